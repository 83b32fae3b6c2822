import Router, { type RouterContext } from '@koa/router'
import { z } from 'zod'
import { type Engine, type EveryField, type Job, MAX_BATCH_ITEMS } from '../engine'
import { MAX_DELAY_MS, type SubmitJob as EngineSubmitJob } from '../engine/jobs'
import { iso } from '../engine/clock'
import { prefersMinimal, readJson, reply } from './body'
import { pathParam, validate } from './errors'
import { Id, JobState, JsonValue, Name, Note, PRIORITY, Progress, TtlSec, WorkerId } from './schemas'
import { HttpError } from './http-error'
import { type LaneRoute, postRoutes } from './lane'
import {
  BucketName,
  ClaimAnswer,
  type DuplicateRequest,
  JobAnswer,
  JobAttempts,
  JobEvents,
  JobPage,
  JobWithResult,
  LeaseAnswer,
  LeaseDecision,
  LeaseReleased,
  LeaseWithJob,
  MetricName,
  queueAttempt,
  queueEvent,
  queueJob,
  queueJobRead,
  queueLease,
  queueResult,
  queueState,
  RangeName,
  Snapshot,
  SubmitBatchAnswer,
  Timeseries as TimeseriesAnswer,
} from './views/queue'

/** Seed 002: submit, claim, status, then a lease request; release finalizes. */
export const SubmitJob = z.strictObject({
  addon_id: z.string().min(1).max(200).nullable().optional(),
  job_type: Name,
  priority: PRIORITY.optional(),
  cost_units: z.number().int().min(1).max(1_000_000),
  constraints: z.record(z.string().max(100), z.boolean()).optional(),
  payload: JsonValue.optional(),
  client_request_id: z.string().min(1).max(200).nullable().optional(),
  unique: z.boolean().optional(),
  tags: z.array(z.string().max(200)).max(100).optional(),
  max_runtime_s: z.number().int().min(1).max(7 * 24 * 3600).nullable().optional(),
  queue: Name.optional(),
  max_attempts: z.number().int().min(1).max(1000).optional(),
  /** Not in the seed: a delayed job, not claimable or leasable before this time (ISO-8601). Not with `delay_ms`. */
  run_at: z.iso.datetime({ offset: true }).nullable().optional(),
  /** Not in the seed: a delayed job, not claimable or leasable for this many milliseconds. Not with `run_at`. */
  delay_ms: z.number().int().min(0).max(MAX_DELAY_MS).nullable().optional(),
})
export type SubmitJob = z.infer<typeof SubmitJob>

export const SubmitBatch = z.strictObject({ jobs: z.array(SubmitJob).min(1).max(MAX_BATCH_ITEMS) })
export type SubmitBatch = z.infer<typeof SubmitBatch>

/**
 * Dialect 002's submit in the model's words: `client_request_id` is the idempotency key; times
 * are epoch ms. Every field written out, not spread: each submit then has the same shape, which
 * the engine reads faster than objects that carry only the fields each client sent (a batch of
 * 1,000 is 1,000 of them). `EveryField` makes a field the engine adds fail to compile here until
 * it is carried over.
 */
const submitInput = (input: SubmitJob): EveryField<EngineSubmitJob> => ({
  job_type: input.job_type,
  cost_units: input.cost_units,
  addon_id: input.addon_id,
  priority: input.priority,
  constraints: input.constraints,
  payload: input.payload,
  unique: input.unique,
  idempotency_key: input.client_request_id,
  tags: input.tags,
  max_runtime_s: input.max_runtime_s,
  queue: input.queue,
  max_attempts: input.max_attempts,
  run_at: input.run_at == null ? input.run_at : Date.parse(input.run_at),
  delay_ms: input.delay_ms,
})

/** Seed 002's answer to a known `client_request_id`: 409 `duplicate_request` with the existing job. */
const duplicateRequest = (input: SubmitJob, job: Job): DuplicateRequest => ({
  code: 'duplicate_request',
  detail: `A job with client_request_id ${input.client_request_id} exists`,
  job: queueJob(job),
})

export const ClaimJobs = z.strictObject({
  addon_id: z.string().min(1).max(200).nullable().optional(),
  worker_id: WorkerId,
  limit: z.number().int().min(1).max(100).optional(),
  accept_job_types: z.array(z.string().max(200)).max(100).optional(),
  max_cost_units: z.number().int().min(1).max(1_000_000).optional(),
  constraints_capabilities: z.object({ gpu_available: z.boolean().optional() }).optional(),
})
export type ClaimJobs = z.infer<typeof ClaimJobs>

export const StatusUpdate = z.strictObject({
  state: JobState.optional(),
  /** Not in the seed: the worker making the update; another worker's job is 403 worker_mismatch. */
  worker_id: WorkerId.optional(),
  note: Note.nullable().optional(),
  progress: Progress.nullable().optional(),
})
export type StatusUpdate = z.infer<typeof StatusUpdate>

export const CancelJob = z.strictObject({ reason: Note.nullable().optional() })
export type CancelJob = z.infer<typeof CancelJob>

const isoTime = z.iso.datetime({ offset: true }).transform((s) => Date.parse(s))

export const ListJobs = z.strictObject({
  state: JobState.optional(),
  addon_id: z.string().min(1).max(200).optional(),
  job_type: z.string().min(1).max(200).optional(),
  search: z
    .string()
    .min(1)
    .max(200)
    .optional()
    .meta({ description: "Part of the job's id, type or add-on, in any case (`a3f9` finds `…0000a3f9`); the others filter by whole values" }),
  created_after: isoTime.optional(),
  created_before: isoTime.optional(),
  limit: z.coerce.number().int().min(1).max(500).optional(),
  cursor: z.string().max(200).optional(),
})
export type ListJobs = z.infer<typeof ListJobs>

/** The job's own fields may be repeated in a lease request; only `cost_units` is checked against it. */
export const LeaseRequest = z.strictObject({
  job_id: Id,
  addon_id: z.string().max(200).nullable().optional(),
  job_type: z.string().max(200).optional(),
  cost_units: z.number().int().min(1).max(1_000_000).optional(),
  priority: PRIORITY.optional(),
  constraints: z.record(z.string().max(100), z.boolean()).optional(),
  ttl_sec: TtlSec.optional(),
  /** Not in the seed: the worker asking; another worker's claim is 403 worker_mismatch. */
  worker_id: WorkerId.optional(),
})
export type LeaseRequest = z.infer<typeof LeaseRequest>

export const LeaseHeartbeat = z.strictObject({
  job_id: Id,
  worker_id: WorkerId,
  progress: Progress.nullable().optional(),
  message: Note.nullable().optional(),
})
export type LeaseHeartbeat = z.infer<typeof LeaseHeartbeat>

export const LeaseRelease = z.strictObject({
  job_id: Id,
  worker_id: WorkerId,
  status: z.enum(['SUCCEEDED', 'FAILED', 'CANCELED', 'TIMEOUT']),
  result_data: JsonValue.optional(),
  error: JsonValue.optional(),
  metrics: JsonValue.optional(),
})
export type LeaseRelease = z.infer<typeof LeaseRelease>

export const Timeseries = z.strictObject({
  metric: MetricName,
  bucket: BucketName.default('5m'),
  range: RangeName.default('24h'),
})
export type Timeseries = z.infer<typeof Timeseries>

export const QUEUE_PREFIX = '/api/scheduler'

/** A query string as a plain object; a repeated parameter is 400 rather than silently an array. */
function query(raw: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [key, value] of Object.entries(raw)) {
    if (Array.isArray(value)) throw new HttpError('invalid_request', `${key}: given more than once`)
    if (value !== undefined) out[key] = value
  }
  return out
}

/**
 * The queue dialect's routes that the lane serves (lane.ts): the one-job submit, on the way from
 * a script to the worker waiting for its job. Koa's router serves them too ({@link queueRouter}).
 */
export function queueLaneRoutes(engine: Engine): LaneRoute[] {
  const submit: LaneRoute<typeof SubmitJob, typeof JobAnswer> = {
    path: '/jobs/submit',
    body: SubmitJob,
    answer: JobAnswer,
    status: 201,
    run: async (input) => {
      const { job, duplicate } = await engine.run(() => engine.submit(submitInput(input)))
      if (duplicate) {
        const { code, detail, ...body } = duplicateRequest(input, job)
        throw new HttpError(code, detail, body)
      }
      return { job: queueJob(job) }
    },
  }
  return [submit as LaneRoute]
}

/** The queue dialect under Koa: `laneRoutes` ({@link queueLaneRoutes}) for every request the lane leaves to it, and the rest. */
export function queueRouter(engine: Engine, bodyLimit: number, laneRoutes: readonly LaneRoute[]): Router {
  const router = new Router({ prefix: QUEUE_PREFIX })
  const body = async <S extends z.ZodType>(ctx: RouterContext, schema: S) => validate(schema, await readJson(ctx, bodyLimit))
  postRoutes(router, laneRoutes, bodyLimit)

  // Not in the seed: many submits in one request, each answered as /jobs/submit would answer it,
  // or only by its id and state when the client asks for it (RFC 7240 `Prefer: return=minimal`):
  // a thousand job views (~550 KB of JSON) are most of the work of a batch's answer, and a
  // client that sent the jobs has no use for them.
  router.post('/jobs/submit-batch', async (ctx) => {
    const input = await body(ctx, SubmitBatch)
    const minimal = prefersMinimal(ctx.get('prefer'))
    const results = await engine.run(() => engine.submitMany(input.jobs.map(submitInput)))
    if (minimal) ctx.set('Preference-Applied', 'return=minimal')
    reply(ctx, SubmitBatchAnswer, {
      results: results.map((result, i): SubmitBatchAnswer['results'][number] => {
        if (!result.ok) return { ok: false, code: result.error.code, detail: result.error.detail }
        const { job, duplicate } = result.value
        if (duplicate) return { ok: false, ...duplicateRequest(input.jobs[i]!, job) }
        return minimal ? { ok: true, job_id: job.id, state: queueState(job.state) } : { ok: true, job: queueJob(job) }
      }),
    })
  })

  router.post('/jobs/claim', async (ctx) => {
    const input = await body(ctx, ClaimJobs)
    const limit = input.limit ?? 1
    const filter = {
      worker_id: input.worker_id,
      addon_id: input.addon_id,
      accept_job_types: input.accept_job_types,
      max_units: input.max_cost_units,
      gpu_available: input.constraints_capabilities?.gpu_available === true,
    }
    const jobs = await engine.run(() => engine.claim(filter, limit))
    if (jobs.length === 0) {
      ctx.status = 204
      return
    }
    reply(ctx, ClaimAnswer, limit > 1 ? { job: queueJob(jobs[0]!), jobs: jobs.map(queueJob) } : { job: queueJob(jobs[0]!) })
  })

  router.get('/jobs', (ctx) => {
    const q = validate(ListJobs, query(ctx.query))
    const page = engine.listJobs(q)
    const waits = engine.waiting(page.jobs)
    const origins = engine.scheduleOrigins(page.jobs.map((job) => job.id))
    reply(ctx, JobPage, { jobs: page.jobs.map((job, i) => queueJobRead(job, waits[i] ?? null, origins.get(job.id) ?? null)), next_cursor: page.next_cursor })
  })

  router.get('/jobs/:job_id', (ctx) => {
    const job = engine.getJob(pathParam(ctx, 'job_id'))
    const [waiting] = engine.waiting([job])
    reply(ctx, JobWithResult, { job: queueJobRead(job, waiting ?? null, engine.scheduleOrigins([job.id]).get(job.id) ?? null), result: queueResult(job) })
  })

  router.post('/jobs/:job_id/status', async (ctx) => {
    const input = await body(ctx, StatusUpdate)
    const jobId = pathParam(ctx, 'job_id')
    reply(ctx, JobAnswer, { job: queueJob(await engine.run(() => engine.updateStatus(jobId, input))) })
  })

  router.post('/jobs/:job_id/cancel', async (ctx) => {
    const input = await body(ctx, CancelJob)
    const jobId = pathParam(ctx, 'job_id')
    reply(ctx, JobAnswer, { job: queueJob(await engine.run(() => engine.cancel(jobId, input.reason ?? null))) })
  })

  router.get('/jobs/:job_id/events', (ctx) => {
    reply(ctx, JobEvents, { events: engine.jobEvents(pathParam(ctx, 'job_id')).map(queueEvent) })
  })

  // Not in the seed: each attempt with its outcome and error (the dashboard's job page).
  router.get('/jobs/:job_id/attempts', (ctx) => {
    reply(ctx, JobAttempts, { attempts: engine.attempts(pathParam(ctx, 'job_id')).map(queueAttempt) })
  })

  router.post('/lease/request', async (ctx) => {
    const input = await body(ctx, LeaseRequest)
    const decision = await engine.run(() =>
      engine.requestLeaseForJob({ job_id: input.job_id, cost_units: input.cost_units, ttl_s: input.ttl_sec, worker_id: input.worker_id }),
    )
    reply(
      ctx,
      LeaseDecision,
      decision.approved
        ? { approved: true, lease: queueLease(decision.lease) }
        : { approved: false, retry_after_sec: decision.retry_after_sec, reason: decision.reason },
    )
  })

  router.post('/lease/:lease_id/heartbeat', async (ctx) => {
    const input = await body(ctx, LeaseHeartbeat)
    const leaseId = pathParam(ctx, 'lease_id')
    const { lease, job } = await engine.run(() =>
      engine.heartbeat({ lease_id: leaseId, worker_id: input.worker_id, job_id: input.job_id, progress: input.progress, note: input.message }),
    )
    reply(ctx, LeaseWithJob, { lease: queueLease(lease), job: queueJob(job) })
  })

  router.post('/lease/:lease_id/release', async (ctx) => {
    const input = await body(ctx, LeaseRelease)
    const leaseId = pathParam(ctx, 'lease_id')
    const { lease, job } = await engine.run(() =>
      engine.release({
        lease_id: leaseId,
        worker_id: input.worker_id,
        job_id: input.job_id,
        status: input.status,
        result: input.result_data,
        error: input.error,
        metrics: input.metrics,
      }),
    )
    reply(ctx, LeaseReleased, { lease: queueLease(lease), job: queueJob(job), result: queueResult(job) })
  })

  router.get('/lease/:lease_id', (ctx) => {
    reply(ctx, LeaseAnswer, { lease: queueLease(engine.getLease(pathParam(ctx, 'lease_id'))) })
  })

  router.get('/stats/snapshot', (ctx) => {
    reply(ctx, Snapshot, engine.snapshot())
  })

  router.get('/stats/timeseries', (ctx) => {
    const q = validate(Timeseries, query(ctx.query))
    reply(ctx, TimeseriesAnswer, {
      metric: q.metric,
      bucket: q.bucket,
      range: q.range,
      // Not in seed 002: where the history starts, so a chart can leave out the zeros before it.
      since: iso(engine.seriesStart()),
      points: engine.timeseries(q.metric, q.bucket, q.range).map((p) => ({ ts: iso(p.ts), value: p.value })),
    })
  })

  return router
}
