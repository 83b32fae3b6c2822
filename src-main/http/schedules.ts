import { z } from 'zod'
import { type ExpectedRevisions, OVERLAP_POLICIES, RUN_OUTCOMES, SCHEDULE_NAME, SCHEDULE_STATES, type Schedule } from '../engine'
import { iso } from '../engine/rules/clock'
import { SubmitJob } from './queue-api'
import { type AnswerDoc, type Api, NOT_FOUND, route, type RouteCall } from './route'
import { IsoTime } from './schemas'
import { queueState } from './views/queue'
import { entityTag } from '../../src-shared/entity-tag'

/**
 * Recurring schedules (docs/schedules.md): a cron expression, a time zone and the job each firing
 * submits. Routes translate; the engine validates the expression, the zone and the job (with the
 * rules of a submit) and decides when each firing is due.
 */

export const SCHEDULES_PREFIX = '/api/schedules'

/** The job each firing submits: the submit fields of the queue API, less `client_request_id` (each firing is a new job). */
export const JobTemplate = SubmitJob.pick({
  addon_id: true,
  job_type: true,
  priority: true,
  cost_units: true,
  constraints: true,
  payload: true,
  unique: true,
  tags: true,
  max_runtime_s: true,
  queue: true,
  max_attempts: true,
}).meta({ id: 'JobTemplate' })
export type JobTemplate = z.infer<typeof JobTemplate>

const ScheduleName = z.string().regex(SCHEDULE_NAME, 'ASCII letters, digits, ".", "_", ":" or "-", starting with a letter or digit (at most 200)')

export const CreateSchedule = z.strictObject({
  name: ScheduleName,
  /** 5 fields (minute hour day month weekday), 6 (seconds first) or 7 (…, year), or @daily, @hourly … */
  cron: z.string().min(1).max(200),
  /** An IANA time zone; default: the host's own, stored with the schedule. */
  timezone: z.string().min(1).max(100).nullable().optional(),
  job: JobTemplate,
  overlap: z.enum(OVERLAP_POLICIES).optional(),
  enabled: z.boolean().optional(),
})
export type CreateSchedule = z.infer<typeof CreateSchedule>

/** Each field given replaces the schedule's (`job` as a whole); the name is the key and stays. */
export const ChangeSchedule = CreateSchedule.omit({ name: true }).partial()
export type ChangeSchedule = z.infer<typeof ChangeSchedule>

export const ScheduleRunView = z
  .object({
    fire_at: IsoTime,
    outcome: z.enum(RUN_OUTCOMES),
    reason: z.string().nullable().meta({ description: 'why the firing was skipped (overlap, or the submit refused)' }),
    job_id: z.string().nullable(),
    job_state: z.string().nullable().meta({ description: "the job's state now (the queue API's names); null without a job or once it is pruned" }),
  })
  .meta({ id: 'ScheduleRun' })

export const ScheduleView = z
  .object({
    /** The schedule's id in the event log (entity_id of its SCHEDULE_* events). */
    id: z.string(),
    name: z.string(),
    cron: z.string(),
    timezone: z.string(),
    job: JobTemplate,
    overlap: z.enum(OVERLAP_POLICIES),
    enabled: z.boolean(),
    state: z.enum(SCHEDULE_STATES).meta({
      description:
        'whether it fires: enabled (at next_fire_at); paused (enabled false); finished (enabled, but its cron has no firing left); stopped (enabled, but this host can no longer read its cron or timezone: it fires again once they are edited)',
    }),
    next_fire_at: IsoTime.nullable().meta({ description: 'the earliest firing not yet handled; null while paused, finished or stopped' }),
    next_fire_times: z.array(IsoTime).meta({ description: 'the next three firings, next_fire_at first' }),
    last_run: ScheduleRunView.nullable(),
    revision: z.number().int().min(1).meta({
      description:
        'counts the changes to its settings (cron, timezone, job, overlap), 1 when created; pausing, resuming and firing leave it. Its ETag is this number in quotes: send it in If-Match to PATCH or DELETE only the schedule as read',
    }),
    created_at: IsoTime,
    updated_at: IsoTime,
  })
  .meta({ id: 'Schedule' })
export type ScheduleView = z.infer<typeof ScheduleView>

export const ScheduleAnswer = z.object({ schedule: ScheduleView })
export const ScheduleList = z.object({ schedules: z.array(ScheduleView) })

export function scheduleView(schedule: Schedule): ScheduleView {
  const run = schedule.last_run
  return {
    id: schedule.id,
    name: schedule.name,
    cron: schedule.cron,
    timezone: schedule.timezone,
    job: schedule.job,
    overlap: schedule.overlap,
    enabled: schedule.enabled,
    state: schedule.state,
    next_fire_at: iso(schedule.next_fire_at),
    next_fire_times: schedule.next_fire_times.map((at) => iso(at)),
    last_run: run && { fire_at: iso(run.fire_at), outcome: run.outcome, reason: run.reason, job_id: run.job_id, job_state: run.job_state && queueState(run.job_state) },
    revision: schedule.revision,
    created_at: iso(schedule.created_at),
    updated_at: iso(schedule.updated_at),
  }
}

/** A name in a path: any text (a name no schedule can have is 404, as an unknown one is). */
const PathName = z.string().min(1).max(200)

const NameParams = z.object({ name: PathName })
const SCHEDULE_400 = 'invalid_request, invalid_cron, invalid_timezone (with the reason), cost_exceeds_capacity (of the job)'

/**
 * The revisions an If-Match names (RFC 9110 13.1.1): absent or `*` (any schedule there is) sets
 * no condition; otherwise the strong tags of the form this host gives. A weak tag (`W/"3"`)
 * never matches under If-Match's strong comparison, nor does a tag this host never gave: a list
 * of only those names no revision, and the write is refused.
 */
export function ifMatchRevisions(header: string | undefined): ExpectedRevisions | undefined {
  if (header === undefined) return undefined
  const tags = header.split(',').map((tag) => tag.trim())
  if (tags.includes('*')) return undefined
  return tags.flatMap((tag) => (/^"([1-9][0-9]{0,14})"$/.exec(tag) ? [Number(tag.slice(1, -1))] : []))
}

/** The schedule's answer, with its revision as the ETag. */
function tagged(schedule: Schedule, call: RouteCall<unknown>): z.infer<typeof ScheduleAnswer> {
  call.setHeader('ETag', entityTag(schedule.revision))
  return { schedule: scheduleView(schedule) }
}

/** The document's entry of an answer that carries the schedule's ETag. */
const taggedDoc = (description: string): AnswerDoc => ({
  description,
  headers: z.object({ ETag: z.string().meta({ description: "the schedule's revision in quotes (its view's revision): If-Match takes it" }) }),
})

const IfMatchHeader = z.object({
  'If-Match': z.string().optional().meta({
    description:
      'the ETag the change was made from (the revision read, in quotes): another is 412 precondition_failed and nothing changes; without it the change is made whatever the schedule holds',
  }),
})
const SCHEDULE_412 = 'precondition_failed: If-Match names another revision than the schedule is at (its settings changed since it was read); nothing changed'

export const schedulesApi: Api = {
  tag: 'schedules',
  description: 'Recurring schedules: a cron expression in a time zone submits a job at each firing (/api/schedules)',
  prefix: SCHEDULES_PREFIX,
  routes: [
    route({
      method: 'GET',
      path: '',
      id: 'listSchedules',
      summary: 'Every schedule, with its next three firings and its last run',
      answer: ScheduleList,
      grouped: false,
      run: (_, { engine }) => ({ schedules: engine.listSchedules().map(scheduleView) }),
    }),
    route({
      method: 'POST',
      path: '',
      id: 'createSchedule',
      summary: 'Create a schedule (cron expression, time zone, the job each firing submits)',
      body: CreateSchedule,
      answer: ScheduleAnswer,
      status: 201,
      answerDoc: taggedDoc('Created'),
      errors: { 400: SCHEDULE_400, 409: 'duplicate_schedule' },
      grouped: true,
      run: ({ body }, { engine }, call) => tagged(engine.createSchedule(body), call),
    }),
    route({
      method: 'GET',
      path: '/:name',
      id: 'getSchedule',
      summary: 'One schedule',
      params: NameParams,
      answer: ScheduleAnswer,
      answerDoc: taggedDoc('OK'),
      errors: { 404: NOT_FOUND.schedule },
      grouped: false,
      run: ({ params }, { engine }, call) => tagged(engine.getSchedule(params.name), call),
    }),
    route({
      method: 'PATCH',
      path: '/:name',
      id: 'changeSchedule',
      summary: 'Change a schedule: each field given replaces its own (job as a whole); enabled false pauses it',
      description:
        'With If-Match (the ETag it was read with: its revision in quotes, `"3"`) the change is made only if the schedule is still at that revision, else 412: an edit made from an old read never undoes a change made since.',
      params: NameParams,
      header: IfMatchHeader,
      body: ChangeSchedule,
      answer: ScheduleAnswer,
      answerDoc: taggedDoc('OK'),
      errors: { 400: SCHEDULE_400, 404: NOT_FOUND.schedule, 412: SCHEDULE_412 },
      grouped: true,
      run: ({ body, params }, { engine }, call) => tagged(engine.updateSchedule(params.name, body, ifMatchRevisions(call.header('if-match'))), call),
    }),
    route({
      method: 'DELETE',
      path: '/:name',
      id: 'deleteSchedule',
      summary: 'Delete a schedule (the jobs it made stay)',
      description: 'With If-Match, deleted only if the schedule is still at that revision, else 412.',
      params: NameParams,
      header: IfMatchHeader,
      answer: ScheduleAnswer,
      errors: { 404: NOT_FOUND.schedule, 412: SCHEDULE_412 },
      grouped: true,
      run: ({ params }, { engine }, call) => ({ schedule: scheduleView(engine.deleteSchedule(params.name, ifMatchRevisions(call.header('if-match')))) }),
    }),
  ],
}
