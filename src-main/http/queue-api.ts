import { z } from 'zod'
import { checkSubmit, DEFAULT_PRIORITY, DEFAULT_QUEUE, type Engine, type EveryField, type Job, MAX_BATCH_ITEMS, MAX_DELAY_MS, type SubmitJob as EngineSubmitJob } from '../engine'
import { iso } from '../engine/rules/clock'
import { EngineError } from '../engine/rules/errors'
import { prefersMinimal } from './body'
import { GivenTime, GpuAvailable, Id, JsonValue, Name, Note, PageFields, pathParams, PRIORITY, Progress, QueueName, RequestedBy, TtlSec, WorkerId } from './schemas'
import { HttpError } from './http-error'
import { type Api, LEASE_409, NOT_FOUND, Reply, route } from './route'
import { sameJson } from '../../src-shared/same-json'
import {
  BucketName,
  ClaimAnswer,
  DuplicateRequest,
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
  QueueState,
  queueState,
  RangeName,
  SHOWN_AS_RUNNING,
  Snapshot,
  SubmitBatchAnswer,
  Timeseries as TimeseriesAnswer,
  withoutPayload,
} from './views/queue'

/** the queue contract: submit, claim, status, then a lease request; release finalizes. */

export const SubmitJob = z.strictObject({
  addon_id: z.string().min(1).max(200).nullable().optional(),
  job_type: Name,
  priority: PRIORITY.optional(),
  // No bound of its own: a cost above the capacity's total (itself at most 1,000,000) is the job's
  // own refusal, cost_exceeds_capacity, as any cost above the total is (an item's own, in a batch).
  cost_units: z.number().int().min(1),
  constraints: z.record(z.string().max(100), z.boolean()).optional(),
  payload: JsonValue.optional(),
  client_request_id: z.string().min(1).max(200).nullable().optional(),
  unique: z.boolean().optional(),
  tags: z.array(z.string().max(200)).max(100).optional(),
  max_runtime_s: z.number().int().min(1).max(7 * 24 * 3600).nullable().optional(),
  queue: QueueName.optional(),
  max_attempts: z.number().int().min(1).max(1000).optional(),
  /** Beyond its contract: a delayed job, not claimable or leasable before this time (ISO-8601). Not with `delay_ms`. */
  run_at: GivenTime.nullable().optional(),
  /** Beyond its contract: a delayed job, not claimable or leasable for this many milliseconds. Not with `run_at`. */
  delay_ms: z.number().int().min(0).max(MAX_DELAY_MS).nullable().optional(),
})
export type SubmitJob = z.infer<typeof SubmitJob>

export const SubmitBatch = z.strictObject({ jobs: z.array(SubmitJob).min(1).max(MAX_BATCH_ITEMS) })
export type SubmitBatch = z.infer<typeof SubmitBatch>

/**
 * the queue API's submit in the model's words: `client_request_id` is the idempotency key; times
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

/**
 * A batch whose items do not all validate is 400 for the whole request, and nothing is
 * submitted (docs/api.md): zod checks each item's fields, and this the rules the engine checks
 * of a submit on its own, about its shape alone (`run_at` with `delay_ms`, `run_at` within
 * 1970–9999: `checkSubmit`), each named by its item (`jobs.1: …`), as zod names a field. Only
 * what depends on the store (a known `client_request_id`, the capacity) is an item's own refusal.
 */
function checkEachSubmit(inputs: readonly EngineSubmitJob[]): void {
  const problems: string[] = []
  for (let i = 0; i < inputs.length && problems.length < 10; i++) {
    try {
      checkSubmit(inputs[i]!)
    } catch (error) {
      if (!(error instanceof EngineError)) throw error
      problems.push(`jobs.${i}: ${error.detail}`)
    }
  }
  if (problems.length > 0) throw new HttpError('invalid_request', problems.join('; '))
}

/**
 * the queue contract's answer to a known `client_request_id`: 409 `duplicate_request` with the
 * existing job. Its detail says whether the request asks for that job or another: a client that
 * reused a key for a different job learns from the 409 alone that this one was not submitted.
 */
const duplicateRequest = (input: SubmitJob, job: Job): DuplicateRequest => {
  const differs = fieldsDifferingFrom(input, job)
  const known = `A job with client_request_id ${input.client_request_id} exists`
  return {
    code: 'duplicate_request',
    detail:
      differs.length === 0
        ? `${known}, with the same job_type, payload, queue, priority and cost_units as this request: it is that job's submit repeated`
        : `${known}, differing from this request in its ${differs.join(', ')}: this request was not submitted (a client_request_id names one job)`,
    job: queueJob(job),
  }
}

/** Which of what makes a job (its type, payload, queue, priority, cost) a submit asks differently from the job it names by key. */
function fieldsDifferingFrom(input: SubmitJob, job: Job): string[] {
  const differs: string[] = []
  if (input.job_type !== job.job_type) differs.push('job_type')
  // The stored payload is the submitted one through JSON (an absent payload is {}); its members' order is the client's JSON library's.
  if (!sameJson(input.payload ?? {}, job.payload)) differs.push('payload')
  if ((input.queue ?? DEFAULT_QUEUE) !== job.queue) differs.push('queue')
  if ((input.priority ?? DEFAULT_PRIORITY) !== job.priority) differs.push('priority')
  if (input.cost_units !== job.cost_units) differs.push('cost_units')
  return differs
}

export const ClaimJobs = z.strictObject({
  addon_id: z.string().min(1).max(200).nullable().optional(),
  worker_id: WorkerId,
  limit: z.number().int().min(1).max(100).optional(),
  /** The job types the worker takes, each a name as job types are (an empty list or name would never take a job). */
  accept_job_types: z.array(Name).min(1).max(100).optional(),
  max_cost_units: z.number().int().min(1).max(1_000_000).optional(),
  /** What the worker has: strict like every object of a body, so that a misspelt capability (`gpu`) is a 400, not a worker taken to have none. */
  constraints_capabilities: z.strictObject({ gpu_available: GpuAvailable.optional() }).optional(),
})
export type ClaimJobs = z.infer<typeof ClaimJobs>

export const StatusUpdate = z.strictObject({
  state: QueueState.optional(),
  /** Beyond its contract: the worker making the update; another worker's job is 403 worker_mismatch. */
  worker_id: WorkerId.optional(),
  note: Note.nullable().optional(),
  progress: Progress.nullable().optional(),
})
export type StatusUpdate = z.infer<typeof StatusUpdate>

export const CancelJob = z.strictObject({
  reason: Note.nullable().optional(),
  /** Beyond its contract: who asked; a BLOCKED job's blocker is resolved in that name ("operator" when not given). */
  requested_by: RequestedBy,
})
export type CancelJob = z.infer<typeof CancelJob>

const isoTime = GivenTime.transform((s) => Date.parse(s))

/** A yes or no in a query: `true` or `false`, spelled so; any other value is 400. A new schema each time, so the document writes each in place. */
const queryFlag = () => z.enum(['true', 'false']).transform((value) => value === 'true')

export const ListJobs = z.strictObject({
  state: QueueState.optional().meta({ description: 'Jobs in this state as the queue API shows it: RUNNING finds LEASED jobs too' }),
  addon_id: z.string().min(1).max(200).optional(),
  job_type: z.string().min(1).max(200).optional(),
  dead_letter: queryFlag()
    .optional()
    .meta({ description: '`true`: only the jobs that ran out of attempts (FAILED or TIMEOUT with `dead_letter`), the ones to retry; `false`: only the others' }),
  search: z
    .string()
    .min(1)
    .max(200)
    .optional()
    .meta({ description: "Part of the job's id, type or add-on, in any case (`a3f9` finds `…0000a3f9`); the others filter by whole values" }),
  created_after: isoTime.optional(),
  created_before: isoTime.optional(),
  payload: queryFlag()
    .optional()
    .meta({ description: "`false`: each job without its `payload`, which the host then does not read (a table of jobs shows none; GET /jobs/{job_id} has it); `true`, the default: with it" }),
  ...PageFields,
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
  /** Beyond its contract: the worker asking; another worker's claim is 403 worker_mismatch. */
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

/** A page of a job's timeline: its newest `limit` events (every event of most jobs), or with `cursor` those before the page that gave it. */
export const TimelinePage = z.strictObject({ ...PageFields })

export const Timeseries = z.strictObject({
  metric: MetricName,
  bucket: BucketName.default('5m'),
  range: RangeName.default('24h'),
})
export type Timeseries = z.infer<typeof Timeseries>

export const QUEUE_PREFIX = '/api/scheduler'

const JobParams = pathParams('job_id')
const LeaseParams = pathParams('lease_id')

const SubmitBatchHeaders = z.object({
  Prefer: z.string().optional().meta({ description: '`return=minimal`: answer each job created by its id and state, not its whole view' }),
})

/** The queue API. Its one-job submit, on the way from a script to the worker waiting for its job, is served by the lane too (lane.ts). */
export const queueApi: Api = {
  tag: 'queue',
  description: 'The queue API: submit, claim, status, then a lease request (/api/scheduler)',
  prefix: QUEUE_PREFIX,
  routes: [
    route({
      method: 'POST',
      path: '/jobs/submit',
      id: 'submitJob',
      summary: 'Submit a job',
      body: SubmitJob,
      answer: JobAnswer,
      status: 201,
      errors: { 400: 'invalid_request, cost_exceeds_capacity', 409: ['duplicate_request: the existing job is in `job`', DuplicateRequest] },
      lane: true,
      grouped: true,
      run: ({ body }, { engine }) => {
        const { job, duplicate } = engine.submit(submitInput(body))
        if (duplicate) {
          const { code, detail, ...extra } = duplicateRequest(body, job)
          throw new HttpError(code, detail, extra)
        }
        return { job: queueJob(job) }
      },
    }),
    // Beyond its contract: many submits in one request, each answered as /jobs/submit would answer it,
    // or only by its id and state when the client asks for it (RFC 7240 `Prefer: return=minimal`):
    // a thousand job views (~550 KB of JSON) are most of the work of a batch's answer, and a
    // client that sent the jobs has no use for them.
    route({
      method: 'POST',
      path: '/jobs/submit-batch',
      id: 'submitJobs',
      summary: 'Beyond its contract: up to 1,000 submits in one request, each answered as /jobs/submit would',
      description:
        'With `Prefer: return=minimal` (RFC 7240) a job created is answered by its id and state only (SubmittedJobRef), and the answer carries `Preference-Applied: return=minimal`; refusals are answered in full either way.',
      header: SubmitBatchHeaders,
      body: SubmitBatch,
      answer: SubmitBatchAnswer,
      answerDoc: {
        description: 'One result per job, in the order sent',
        headers: z.object({ 'Preference-Applied': z.string().optional().meta({ description: '`return=minimal` when the request asked for it' }) }),
      },
      grouped: true,
      run: ({ body }, { engine }, call) => {
        const minimal = prefersMinimal(call.header('prefer'))
        const inputs = body.jobs.map(submitInput)
        checkEachSubmit(inputs)
        const results = engine.submitMany(inputs)
        if (minimal) call.setHeader('Preference-Applied', 'return=minimal')
        return {
          results: results.map((result, i): SubmitBatchAnswer['results'][number] => {
            if (!result.ok) return { ok: false, code: result.error.code, detail: result.error.detail }
            const { job, duplicate } = result.value
            if (duplicate) return { ok: false, ...duplicateRequest(body.jobs[i]!, job) }
            return minimal ? { ok: true, job_id: job.id, state: queueState(job.state) } : { ok: true, job: queueJob(job) }
          }),
        }
      },
    }),
    route({
      method: 'POST',
      path: '/jobs/claim',
      id: 'claimJobs',
      summary: 'Claim up to `limit` jobs',
      body: ClaimJobs,
      answer: ClaimAnswer,
      otherAnswers: { 204: { description: 'Nothing to claim' } },
      grouped: true,
      run: ({ body }, { engine, directory }) => {
        const gpu_available = body.constraints_capabilities?.gpu_available === true
        directory.askedForWork(body.worker_id, { jobTypes: body.accept_job_types ?? null, gpu: gpu_available, addonId: body.addon_id, maxUnits: body.max_cost_units })
        const limit = body.limit ?? 1
        const filter = {
          worker_id: body.worker_id,
          addon_id: body.addon_id,
          accept_job_types: body.accept_job_types,
          max_units: body.max_cost_units,
          gpu_available,
        }
        const jobs = engine.claim(filter, limit)
        if (jobs.length === 0) return new Reply(204, undefined)
        return limit > 1 ? { job: queueJob(jobs[0]!), jobs: jobs.map(queueJob) } : { job: queueJob(jobs[0]!) }
      },
    }),
    route({
      method: 'GET',
      path: '/jobs',
      id: 'listJobs',
      summary: 'List jobs newest first, with a cursor',
      query: ListJobs,
      answer: JobPage,
      grouped: false,
      run: async ({ query }, { engine, directory, readJobs }) => {
        const page = await engine.listJobsOn({ ...query, state: query.state === 'RUNNING' ? SHOWN_AS_RUNNING : query.state }, readJobs)
        const waits = engine.waiting(page.jobs, directory)
        const origins = engine.scheduleOrigins(page.jobs.map((job) => job.id))
        const shown = page.jobs.map((job, i) => queueJobRead(job, waits[i] ?? null, origins.get(job.id) ?? null))
        return { jobs: query.payload === false ? shown.map(withoutPayload) : shown, next_cursor: page.next_cursor }
      },
    }),
    route({
      method: 'GET',
      path: '/jobs/:job_id',
      id: 'getJob',
      summary: 'A job and its result',
      params: JobParams,
      answer: JobWithResult,
      errors: { 404: NOT_FOUND.job },
      grouped: false,
      run: ({ params }, { engine, directory }) => {
        const job = engine.getJob(params.job_id)
        const [waiting] = engine.waiting([job], directory)
        return { job: queueJobRead(job, waiting ?? null, engine.scheduleOrigins([job.id]).get(job.id) ?? null), result: queueResult(job) }
      },
    }),
    route({
      method: 'POST',
      path: '/jobs/:job_id/status',
      id: 'updateJobStatus',
      summary: 'Report PREPARING or LEASE_PENDING, a note or progress',
      params: JobParams,
      body: StatusUpdate,
      answer: JobAnswer,
      errors: { 403: 'worker_mismatch', 404: NOT_FOUND.job, 409: 'illegal_transition' },
      grouped: true,
      run: ({ body, params }, { engine }) => ({ job: queueJob(engine.updateStatus(params.job_id, body)) }),
    }),
    route({
      method: 'POST',
      path: '/jobs/:job_id/cancel',
      id: 'cancelJob',
      summary: 'Cancel (at once, or requested while running)',
      params: JobParams,
      body: CancelJob,
      answer: JobAnswer,
      errors: { 404: NOT_FOUND.job, 409: 'illegal_transition (the job has ended)' },
      grouped: true,
      run: ({ body, params }, { engine }) => ({ job: queueJob(engine.cancel(params.job_id, body.reason ?? null, body.requested_by ?? null)) }),
    }),
    // Beyond its contract: each attempt with its outcome and error (the dashboard's job page).
    route({
      method: 'GET',
      path: '/jobs/:job_id/attempts',
      id: 'listJobAttempts',
      summary: "The job's attempts with outcome and error",
      params: JobParams,
      answer: JobAttempts,
      errors: { 404: NOT_FOUND.job },
      grouped: false,
      run: ({ params }, { engine }) => ({ attempts: engine.attempts(params.job_id).map(queueAttempt) }),
    }),
    route({
      method: 'GET',
      path: '/jobs/:job_id/events',
      id: 'listJobEvents',
      summary: "The job's timeline, oldest first: its newest 500 events (or `limit`), `next_cursor` for those before",
      params: JobParams,
      query: TimelinePage,
      answer: JobEvents,
      errors: { 400: 'invalid_request (a cursor of another job)', 404: NOT_FOUND.job },
      grouped: false,
      run: ({ params, query }, { engine }) => {
        const page = engine.jobEventsPage(params.job_id, query)
        return { events: page.events.map(queueEvent), next_cursor: page.next_cursor }
      },
    }),
    route({
      method: 'POST',
      path: '/lease/request',
      id: 'requestLease',
      summary: 'Request a lease for a claimed job (approved or denied, both 200)',
      body: LeaseRequest,
      answer: LeaseDecision,
      errors: { 403: 'worker_mismatch', 404: NOT_FOUND.job, 409: 'illegal_transition, cost_mismatch' },
      grouped: true,
      run: ({ body }, { engine }) => {
        const decision = engine.requestLeaseForJob({ job_id: body.job_id, cost_units: body.cost_units, ttl_s: body.ttl_sec, worker_id: body.worker_id })
        return decision.approved
          ? { approved: true as const, lease: queueLease(decision.lease) }
          : { approved: false as const, retry_after_sec: decision.retry_after_sec, reason: decision.reason }
      },
    }),
    route({
      method: 'POST',
      path: '/lease/:lease_id/heartbeat',
      id: 'heartbeatLease',
      summary: 'Extend a lease, report progress',
      params: LeaseParams,
      body: LeaseHeartbeat,
      answer: LeaseWithJob,
      errors: { 403: 'worker_mismatch', 404: NOT_FOUND.lease, 409: LEASE_409 },
      grouped: true,
      run: ({ body, params }, { engine }) => {
        const { lease, job } = engine.heartbeat({ lease_id: params.lease_id, worker_id: body.worker_id, job_id: body.job_id, progress: body.progress, note: body.message })
        return { lease: queueLease(lease), job: queueJob(job) }
      },
    }),
    route({
      method: 'POST',
      path: '/lease/:lease_id/release',
      id: 'releaseLease',
      summary: 'Release the lease; final for the job',
      params: LeaseParams,
      body: LeaseRelease,
      answer: LeaseReleased,
      errors: { 403: 'worker_mismatch', 404: NOT_FOUND.lease, 409: LEASE_409 },
      grouped: true,
      run: ({ body, params }, { engine }) => {
        const { lease, job } = engine.release({
          lease_id: params.lease_id,
          worker_id: body.worker_id,
          job_id: body.job_id,
          status: body.status,
          result: body.result_data,
          error: body.error,
          metrics: body.metrics,
        })
        return { lease: queueLease(lease), job: queueJob(job), result: queueResult(job) }
      },
    }),
    route({
      method: 'GET',
      path: '/lease/:lease_id',
      id: 'getLease',
      summary: 'A lease',
      params: LeaseParams,
      answer: LeaseAnswer,
      errors: { 404: NOT_FOUND.lease },
      grouped: false,
      run: ({ params }, { engine }) => ({ lease: queueLease(engine.getLease(params.lease_id)) }),
    }),
    route({
      method: 'GET',
      path: '/stats/snapshot',
      id: 'getStatsSnapshot',
      summary: 'Capacity, job and lease counts now',
      answer: Snapshot,
      grouped: false,
      run: (_, { engine }) => engine.snapshot(),
    }),
    route({
      method: 'GET',
      path: '/stats/timeseries',
      id: 'getStatsTimeseries',
      summary: 'A metric per bucket over a range, from SQLite',
      query: Timeseries,
      answer: TimeseriesAnswer,
      grouped: false,
      run: ({ query }, { engine }) => ({
        metric: query.metric,
        bucket: query.bucket,
        range: query.range,
        // Not in the queue contract: where the history starts, so a chart can leave out the zeros before it.
        since: iso(engine.seriesStart()),
        points: engine.timeseries(query.metric, query.bucket, query.range).map((p) => ({ ts: iso(p.ts), value: p.value })),
      }),
    }),
  ],
}
