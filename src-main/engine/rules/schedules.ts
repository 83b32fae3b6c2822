/** What a firing does while the job of the schedule's last firing has not finished (verbs/schedules.ts). */
export const OVERLAP_POLICIES = [
  /** Fire anyway: several runs of the schedule may be queued or running at once. */
  'allow',
  /** Skip this firing (recorded as SKIPPED, with a SCHEDULE_SKIPPED event). */
  'skip',
] as const
export type Overlap = (typeof OVERLAP_POLICIES)[number]
