import { z } from 'zod'
import { OVERLAP_POLICIES, RUN_OUTCOMES, SCHEDULE_NAME, SCHEDULE_STATES, type Schedule } from '../engine'
import { iso } from '../engine/rules/clock'
import { SubmitJob } from './queue-api'
import { type Api, NOT_FOUND, route } from './route'
import { IsoTime } from './schemas'
import { queueState } from './views/queue'

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
    created_at: iso(schedule.created_at),
    updated_at: iso(schedule.updated_at),
  }
}

/** A name in a path: any text (a name no schedule can have is 404, as an unknown one is). */
const PathName = z.string().min(1).max(200)

const NameParams = z.object({ name: PathName })
const SCHEDULE_400 = 'invalid_request, invalid_cron, invalid_timezone (with the reason), cost_exceeds_capacity (of the job)'

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
      answerDoc: { description: 'Created' },
      errors: { 400: SCHEDULE_400, 409: 'duplicate_schedule' },
      grouped: true,
      run: ({ body }, { engine }) => ({ schedule: scheduleView(engine.createSchedule(body)) }),
    }),
    route({
      method: 'GET',
      path: '/:name',
      id: 'getSchedule',
      summary: 'One schedule',
      params: NameParams,
      answer: ScheduleAnswer,
      errors: { 404: NOT_FOUND.schedule },
      grouped: false,
      run: ({ params }, { engine }) => ({ schedule: scheduleView(engine.getSchedule(params.name)) }),
    }),
    route({
      method: 'PATCH',
      path: '/:name',
      id: 'changeSchedule',
      summary: 'Change a schedule: each field given replaces its own (job as a whole); enabled false pauses it',
      params: NameParams,
      body: ChangeSchedule,
      answer: ScheduleAnswer,
      errors: { 400: SCHEDULE_400, 404: NOT_FOUND.schedule },
      grouped: true,
      run: ({ body, params }, { engine }) => ({ schedule: scheduleView(engine.updateSchedule(params.name, body)) }),
    }),
    route({
      method: 'DELETE',
      path: '/:name',
      id: 'deleteSchedule',
      summary: 'Delete a schedule (the jobs it made stay)',
      params: NameParams,
      answer: ScheduleAnswer,
      errors: { 404: NOT_FOUND.schedule },
      grouped: true,
      run: ({ params }, { engine }) => ({ schedule: scheduleView(engine.deleteSchedule(params.name)) }),
    }),
  ],
}
