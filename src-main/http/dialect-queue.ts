import Router, { type RouterContext } from '@koa/router'
import { z } from 'zod'
import { type Engine, MAX_BATCH_ITEMS } from '../engine'
import { MAX_DELAY_MS } from '../engine/jobs'
import type { JobRow } from '../db/schema'
import { iso } from '../engine/clock'
import { EngineError } from '../engine/errors'
import { JOB_STATES } from '../engine/states'
import { BUCKETS, METRICS, RANGES } from '../engine/stats'
import { readJson } from './body'
import { validate } from './errors'
import { Id, JsonValue, Note, PRIORITY, Progress, TtlSec, WorkerId } from './schemas'
import { queueAttempt, queueEvent, queueJob, queueJobRead, queueLease, queueResult } from './views'

/** Seed 002: submit, claim, status, then a lease request; release finalizes. */
export const SubmitJob = z.strictObject({
  addon_id: z.string().min(1).max(200).nullable().optional(),
  job_type: z.string().min(1).max(200),
  priority: PRIORITY.optional(),
  cost_units: z.number().int().min(1).max(1_000_000),
  constraints: z.record(z.string().max(100), z.boolean()).optional(),
  payload: JsonValue.optional(),
  client_request_id: z.string().min(1).max(200).nullable().optional(),
  unique: z.boolean().optional(),
  tags: z.array(z.string().max(200)).max(100).optional(),
  max_runtime_s: z.number().int().min(1).max(7 * 24 * 3600).nullable().optional(),
  queue: z.string().min(1).max(200).optional(),
  max_attempts: z.number().int().min(1).max(1000).optional(),
  /** Not in the seed: a delayed job, not claimable or leasable before this time (ISO-8601). Not with `delay_ms`. */
  run_at: z.iso.datetime({ offset: true }).nullable().optional(),
  /** Not in the seed: a delayed job, not claimable or leasable for this many milliseconds. Not with `run_at`. */
  delay_ms: z.number().int().min(0).max(MAX_DELAY_MS).nullable().optional(),
})
export type SubmitJob = z.infer<typeof SubmitJob>

export const SubmitBatch = z.strictObject({ jobs: z.array(SubmitJob).min(1).max(MAX_BATCH_ITEMS) })
export type SubmitBatch = z.infer<typeof SubmitBatch>

/** Dialect 002's submit in the model's words: `client_request_id` is the idempotency key; times are epoch ms. */
const submitInput = (input: SubmitJob) => ({
  ...input,
  idempotency_key: input.client_request_id,
  run_at: input.run_at == null ? input.run_at : Date.parse(input.run_at),
})

/** Seed 002's answer to a known `client_request_id`: 409 `duplicate_request` with the existing job. */
const duplicateRequest = (input: SubmitJob, job: JobRow) =>
  new EngineError(409, 'duplicate_request', `A job with client_request_id ${input.client_request_id} exists`, { job: queueJob(job) })

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
  state: z.enum(JOB_STATES).optional(),
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
  state: z.enum(JOB_STATES).optional(),
  addon_id: z.string().min(1).max(200).optional(),
  job_type: z.string().min(1).max(200).optional(),
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
  metric: z.enum(METRICS),
  bucket: z.enum(Object.keys(BUCKETS) as [keyof typeof BUCKETS]).default('5m'),
  range: z.enum(Object.keys(RANGES) as [keyof typeof RANGES]).default('24h'),
})
export type Timeseries = z.infer<typeof Timeseries>

export const QUEUE_PREFIX = '/api/scheduler'

/** A query string as a plain object; a repeated parameter is 400 rather than silently an array. */
function query(raw: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [key, value] of Object.entries(raw)) {
    if (Array.isArray(value)) throw new EngineError(400, 'invalid_request', `${key}: given more than once`)
    if (value !== undefined) out[key] = value
  }
  return out
}

export function queueRouter(engine: Engine, bodyLimit: number): Router {
  const router = new Router({ prefix: QUEUE_PREFIX })
  const body = async <S extends z.ZodType>(ctx: RouterContext, schema: S) => validate(schema, await readJson(ctx, bodyLimit))

  router.post('/jobs/submit', async (ctx) => {
    const input = await body(ctx, SubmitJob)
    const { job, duplicate } = await engine.run(() => engine.submit(submitInput(input)))
    if (duplicate) {
      throw duplicateRequest(input, job)
    }
    ctx.status = 201
    ctx.body = { job: queueJob(job) }
  })

  // Not in the seed: many submits in one request, each answered as /jobs/submit would answer it.
  router.post('/jobs/submit-batch', async (ctx) => {
    const input = await body(ctx, SubmitBatch)
    const results = await engine.run(() => engine.submitMany(input.jobs.map(submitInput)))
    ctx.body = {
      results: results.map((result, i) => {
        if (!result.ok) return { ok: false, code: result.error.code, detail: result.error.detail }
        const { job, duplicate } = result.value
        if (!duplicate) return { ok: true, job: queueJob(job) }
        const { code, detail, body } = duplicateRequest(input.jobs[i]!, job)
        return { ok: false, code, detail, ...body }
      }),
    }
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
    ctx.body = limit > 1 ? { job: queueJob(jobs[0]!), jobs: jobs.map(queueJob) } : { job: queueJob(jobs[0]!) }
  })

  router.get('/jobs', (ctx) => {
    const q = validate(ListJobs, query(ctx.query))
    const page = engine.listJobs(q)
    const reasons = engine.waitingReasons(page.jobs)
    const origins = engine.scheduleOrigins(page.jobs.map((job) => job.id))
    ctx.body = { jobs: page.jobs.map((job, i) => queueJobRead(job, reasons[i] ?? null, origins.get(job.id) ?? null)), next_cursor: page.next_cursor }
  })

  router.get('/jobs/:job_id', (ctx) => {
    const job = engine.getJob(validate(Id, ctx.params.job_id))
    const [reason] = engine.waitingReasons([job])
    ctx.body = { job: queueJobRead(job, reason ?? null, engine.scheduleOrigins([job.id]).get(job.id) ?? null), result: queueResult(job) }
  })

  router.post('/jobs/:job_id/status', async (ctx) => {
    const input = await body(ctx, StatusUpdate)
    const jobId = validate(Id, ctx.params.job_id)
    ctx.body = { job: queueJob(await engine.run(() => engine.updateStatus(jobId, input))) }
  })

  router.post('/jobs/:job_id/cancel', async (ctx) => {
    const input = await body(ctx, CancelJob)
    const jobId = validate(Id, ctx.params.job_id)
    ctx.body = { job: queueJob(await engine.run(() => engine.cancel(jobId, input.reason ?? null))) }
  })

  router.get('/jobs/:job_id/events', (ctx) => {
    ctx.body = { events: engine.jobEvents(validate(Id, ctx.params.job_id)).map(queueEvent) }
  })

  // Not in the seed: each attempt with its outcome and error (the dashboard's job page).
  router.get('/jobs/:job_id/attempts', (ctx) => {
    ctx.body = { attempts: engine.attempts(validate(Id, ctx.params.job_id)).map(queueAttempt) }
  })

  router.post('/lease/request', async (ctx) => {
    const input = await body(ctx, LeaseRequest)
    const decision = await engine.run(() =>
      engine.requestLeaseForJob({ job_id: input.job_id, cost_units: input.cost_units, ttl_s: input.ttl_sec, worker_id: input.worker_id }),
    )
    ctx.body = decision.approved
      ? { approved: true, lease: queueLease(decision.lease) }
      : { approved: false, retry_after_sec: decision.retry_after_sec, reason: decision.reason }
  })

  router.post('/lease/:lease_id/heartbeat', async (ctx) => {
    const input = await body(ctx, LeaseHeartbeat)
    const leaseId = validate(Id, ctx.params.lease_id)
    const { lease, job } = await engine.run(() =>
      engine.heartbeat({ lease_id: leaseId, worker_id: input.worker_id, job_id: input.job_id, progress: input.progress, note: input.message }),
    )
    ctx.body = { lease: queueLease(lease), job: queueJob(job) }
  })

  router.post('/lease/:lease_id/release', async (ctx) => {
    const input = await body(ctx, LeaseRelease)
    const leaseId = validate(Id, ctx.params.lease_id)
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
    ctx.body = { lease: queueLease(lease), job: queueJob(job), result: queueResult(job) }
  })

  router.get('/lease/:lease_id', (ctx) => {
    ctx.body = { lease: queueLease(engine.getLease(validate(Id, ctx.params.lease_id))) }
  })

  router.get('/stats/snapshot', (ctx) => {
    ctx.body = engine.snapshot()
  })

  router.get('/stats/timeseries', (ctx) => {
    const q = validate(Timeseries, query(ctx.query))
    ctx.body = {
      metric: q.metric,
      bucket: q.bucket,
      range: q.range,
      // Not in seed 002: where the history starts, so a chart can leave out the zeros before it.
      since: iso(engine.seriesStart()),
      points: engine.timeseries(q.metric, q.bucket, q.range).map((p) => ({ ts: new Date(p.ts).toISOString(), value: p.value })),
    }
  })

  return router
}
