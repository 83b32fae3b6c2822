/** What a firing does while the job of the schedule's last firing has not finished (verbs/schedules.ts). */
export const OVERLAP_POLICIES = [
  /** Fire anyway: several runs of the schedule may be queued or running at once. */
  'allow',
  /** Skip this firing (recorded as SKIPPED, with a SCHEDULE_SKIPPED event). */
  'skip',
] as const
export type Overlap = (typeof OVERLAP_POLICIES)[number]

/** Whether a schedule fires, and if not why (verbs/schedules.ts gives each schedule one). */
export const SCHEDULE_STATES = [
  /** It fires, at its `next_fire_at`. */
  'enabled',
  /** `enabled: false`: it never fires until resumed. */
  'paused',
  /** Enabled, but its expression has no firing left (a date that has passed, a last year gone by). */
  'finished',
  /** Enabled, but this host can no longer read its expression (a time zone its ICU data dropped): it fires again once its `cron` or `timezone` is edited. */
  'stopped',
] as const
export type ScheduleState = (typeof SCHEDULE_STATES)[number]
