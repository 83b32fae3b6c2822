import Router, { type RouterContext } from '@koa/router'
import { z } from 'zod'
import type { Engine, Schedule } from '../engine'
import { iso } from '../engine/clock'
import { OVERLAP_POLICIES, RUN_OUTCOMES, SCHEDULE_NAME } from '../engine/schedules'
import { readJson, reply } from './body'
import { SubmitJob } from './dialect-queue'
import { validate } from './errors'
import { IsoTime } from './schemas'
import { queueState } from './views/queue'

/**
 * Recurring schedules (docs/schedules.md): a cron expression, a time zone and the job each firing
 * submits. Routes translate; the engine validates the expression, the zone and the job (with the
 * rules of a submit) and decides when each firing is due.
 */

export const SCHEDULES_PREFIX = '/api/schedules'

/** The job each firing submits: the submit fields of dialect 002, less `client_request_id` (each firing is a new job). */
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

const ScheduleName = z.string().regex(SCHEDULE_NAME, 'letters, digits, ".", "_", ":" or "-", starting with a letter or digit (at most 200)')

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
    job_state: z.string().nullable().meta({ description: "the job's state now (dialect 002's names); null without a job or once it is pruned" }),
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
    next_fire_at: IsoTime.nullable().meta({ description: 'the earliest firing not yet handled; null while disabled' }),
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
    next_fire_at: iso(schedule.next_fire_at),
    next_fire_times: schedule.next_fire_times.map((at) => iso(at)),
    last_run: run && { fire_at: iso(run.fire_at), outcome: run.outcome, reason: run.reason, job_id: run.job_id, job_state: run.job_state && queueState(run.job_state) },
    created_at: iso(schedule.created_at),
    updated_at: iso(schedule.updated_at),
  }
}

/** A name in a path: any text (a name no schedule can have is 404, as an unknown one is). */
const PathName = z.string().min(1).max(200)

export function schedulesRouter(engine: Engine, bodyLimit: number): Router {
  const router = new Router({ prefix: SCHEDULES_PREFIX })
  const body = async <S extends z.ZodType>(ctx: RouterContext, schema: S) => validate(schema, await readJson(ctx, bodyLimit))

  router.get('/', (ctx) => {
    reply(ctx, ScheduleList, { schedules: engine.listSchedules().map(scheduleView) })
  })

  router.post('/', async (ctx) => {
    const input = await body(ctx, CreateSchedule)
    const schedule = await engine.run(() => engine.createSchedule(input))
    reply(ctx, ScheduleAnswer, { schedule: scheduleView(schedule) }, 201)
  })

  router.get('/:name', (ctx) => {
    reply(ctx, ScheduleAnswer, { schedule: scheduleView(engine.getSchedule(validate(PathName, ctx.params.name))) })
  })

  router.patch('/:name', async (ctx) => {
    const change = await body(ctx, ChangeSchedule)
    const name = validate(PathName, ctx.params.name)
    reply(ctx, ScheduleAnswer, { schedule: scheduleView(await engine.run(() => engine.updateSchedule(name, change))) })
  })

  router.delete('/:name', async (ctx) => {
    const name = validate(PathName, ctx.params.name)
    reply(ctx, ScheduleAnswer, { schedule: scheduleView(await engine.run(() => engine.deleteSchedule(name))) })
  })

  return router
}
