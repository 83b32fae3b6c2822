import type { JobTemplate, Overlap, Priority, Schedule, ScheduleChange, ScheduleInput } from './api'

/** What the schedule form edits: text where the person types text, a number where the field is a number field. */
export interface ScheduleDraft {
  name: string
  cron: string
  timezone: string
  job_type: string
  /** As a number field gives it: a number, or nothing (null, or undefined) while it is empty or not a number. */
  cost_units: number | null | undefined
  priority: Priority
  queue: string
  /** JSON text; empty for none. */
  payload: string
  overlap: Overlap
  enabled: boolean
  /** The template's fields the form does not show (tags, constraints, max_attempts …), kept as they are on an edit. */
  rest: Omit<JobTemplate, 'job_type' | 'cost_units' | 'priority' | 'queue' | 'payload'>
  /** The revision of the schedule the form was opened with (null for a new one): a save names it, so it never undoes an edit made since. */
  revision: number | null
}

export const PRIORITY_CHOICES: readonly Priority[] = ['LOW', 'NORMAL', 'HIGH', 'URGENT']

/** A new schedule: every day at 02:00 in `timezone`, a job of one unit. */
export function emptyDraft(timezone: string): ScheduleDraft {
  return { name: '', cron: '0 2 * * *', timezone, job_type: '', cost_units: 1, priority: 'NORMAL', queue: '', payload: '', overlap: 'allow', enabled: true, rest: {}, revision: null }
}

/** The form filled in with a schedule, to edit it. */
export function draftOf(schedule: Schedule): ScheduleDraft {
  const { job_type, cost_units, priority, queue, payload, ...rest } = schedule.job
  return {
    name: schedule.name,
    cron: schedule.cron,
    timezone: schedule.timezone,
    job_type,
    cost_units,
    priority: priority ?? 'NORMAL',
    queue: queue ?? '',
    payload: payload === undefined ? '' : JSON.stringify(payload, null, 2),
    overlap: schedule.overlap,
    enabled: schedule.enabled,
    rest,
    revision: schedule.revision,
  }
}

/** A field of the form a problem is about. */
export type DraftField = 'name' | 'cron' | 'timezone' | 'job_type' | 'cost_units' | 'priority' | 'queue' | 'payload' | 'overlap'

/** Why the form cannot be sent, shown next to `field` (null: the form as a whole). */
export interface FormProblem {
  field: DraftField | null
  message: string
}

/** Every problem the form found at once (each next to its field), so one Create shows all that is missing. */
export type DraftResult<T> = { ok: true; value: T } | { ok: false; problems: FormProblem[] }

const problem = (field: DraftField, message: string): FormProblem => ({ field, message })

/** The job template of a draft, or what is wrong with it that the host need not be asked about. */
function templateOf(draft: ScheduleDraft): DraftResult<JobTemplate> {
  const problems: FormProblem[] = []
  if (draft.job_type === '') problems.push(problem('job_type', 'Job type: required'))
  const cost = draft.cost_units
  if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 1) problems.push(problem('cost_units', 'Units: a whole number of at least 1'))
  let payload: unknown
  if (draft.payload.trim() !== '') {
    try {
      payload = JSON.parse(draft.payload) as unknown
    } catch (error) {
      problems.push(problem('payload', `Payload: not JSON (${(error as Error).message})`))
    }
  }
  if (problems.length > 0) return { ok: false, problems }
  // The type and the queue as the form holds them: an edit sends back the host's own (" padded " stays
  // " padded "), a new one what was typed; the form shows outer spaces rather than drop them.
  const job: JobTemplate = { ...draft.rest, job_type: draft.job_type, cost_units: cost as number, priority: draft.priority }
  if (draft.queue !== '') job.queue = draft.queue
  if (payload !== undefined) job.payload = payload
  return { ok: true, value: job }
}

/** `POST /api/schedules` from a new schedule's draft. */
export function createInput(draft: ScheduleDraft): DraftResult<ScheduleInput> {
  const job = templateOf(draft)
  const problems = [...(draft.name.trim() === '' ? [problem('name', 'Name: required')] : []), ...(job.ok ? [] : job.problems)]
  if (problems.length > 0 || !job.ok) return { ok: false, problems }
  return {
    ok: true,
    value: { name: draft.name.trim(), cron: draft.cron.trim(), timezone: draft.timezone.trim() || null, job: job.value, overlap: draft.overlap, enabled: draft.enabled },
  }
}

/** `PATCH /api/schedules/{name}` from an edited draft: its timing, job and overlap (enabling has its own switch). */
export function changeInput(draft: ScheduleDraft): DraftResult<ScheduleChange> {
  const job = templateOf(draft)
  if (!job.ok) return job
  return { ok: true, value: { cron: draft.cron.trim(), timezone: draft.timezone.trim() || null, job: job.value, overlap: draft.overlap } }
}

/** The host's fields (`cron`, `job.cost_units` …) as the form's. */
const HOST_FIELDS: Readonly<Record<string, DraftField>> = {
  name: 'name',
  cron: 'cron',
  timezone: 'timezone',
  overlap: 'overlap',
  'job.job_type': 'job_type',
  'job.cost_units': 'cost_units',
  'job.priority': 'priority',
  'job.queue': 'queue',
  'job.payload': 'payload',
}

/** The refusals the host answers with a code rather than a field in its `detail`, and the field each is about. */
const CODE_FIELDS: Readonly<Record<string, DraftField>> = {
  duplicate_schedule: 'name',
  invalid_cron: 'cron',
  invalid_timezone: 'timezone',
}

/** What the form says when the host refused its save because the schedule changed since the form opened. */
export const CHANGED_SINCE_OPENED =
  'This schedule was changed since this form opened (by another operator or program), so nothing was saved: Cancel, open it again to see it as it is now, and make your change there.'

/**
 * The host's refusal of a draft as a problem of the field it is about: its code says so for a
 * name taken or a cron or time zone it cannot read, and otherwise the host starts its `detail`
 * with the failing field (`cron: …`, `job.cost_units: …`); a refusal that names none of the
 * form's fields is the form's as a whole. A length the host's validation refuses is said in
 * words (`at most 200 characters`), not in its own terms.
 */
export function hostProblem(detail: string, code?: string): FormProblem {
  if (code === 'precondition_failed') return { field: null, message: CHANGED_SINCE_OPENED }
  const named = /^([a-z_.]+):/.exec(detail)?.[1]
  const field = (code !== undefined && CODE_FIELDS[code]) || (named !== undefined && HOST_FIELDS[named]) || null
  const message = detail
    .replace(/Too big: expected string to have <=(\d+) characters/g, 'at most $1 characters')
    .replace(/Too small: expected string to have >=1 characters/g, 'required')
  return { field, message }
}

/** This machine's time zone: a new schedule's default (the desktop app and the host share the machine). */
export function localTimeZone(): string {
  return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC'
}

/** The time zones this browser knows, for the form's suggestions. */
export function knownTimeZones(): string[] {
  return typeof Intl.supportedValuesOf === 'function' ? Intl.supportedValuesOf('timeZone') : []
}
