import Router from '@koa/router'
import { z } from 'zod'
import type { ClaimWaiters } from '../workers/claim-waiters'
import { longPollMs } from '../workers/long-poll'
import { type Engine, EngineError, MAX_BATCH_ITEMS, MAX_CLAIM_JOBS } from '../engine'
import type { WorkerDirectory } from '../workers/directory'
import { clientGone, earlyReply, readJson, reply } from './body'
import { validate } from './errors'
import { Id, JsonValue, MaxWaitMs, Note, Progress, WorkerId } from './schemas'
import { HttpError, statusOf } from './statuses'
import {
  claimAnswer,
  completeAnswer,
  exchangeAnswer,
  failAnswer,
  heartbeatAnswer,
  WorkerBatchAnswer,
  WorkerClaimAnswer,
  WorkerCompleteAnswer,
  WorkerFailAnswer,
  WorkerHeartbeatAnswer,
  WorkerReportAnswer,
} from './views/worker'

/** Seed 003: a claim is a lease + an attempt + a token; the DB stays the truth. */
const Streams = z.array(z.string().min(1).max(200)).min(1).max(50)

export const WorkerClaim = z.strictObject({
  worker_id: WorkerId,
  streams: Streams,
  max_wait_ms: MaxWaitMs.optional(),
})
export type WorkerClaim = z.infer<typeof WorkerClaim>

export const WorkerHeartbeat = z.strictObject({
  worker_id: WorkerId,
  job_id: Id,
  lease_token: z.string().min(1).max(200),
  progress: Progress.nullable().optional(),
  note: Note.nullable().optional(),
})
export type WorkerHeartbeat = z.infer<typeof WorkerHeartbeat>

const AttemptFields = {
  worker_id: WorkerId,
  job_id: Id,
  attempt_id: Id,
  lease_token: z.string().min(1).max(200),
  stream: z.string().max(200).optional(),
  message_id: z.string().max(200).optional(),
}

export const WorkerComplete = z.strictObject({ ...AttemptFields, result: JsonValue.optional() })
export type WorkerComplete = z.infer<typeof WorkerComplete>

const AttemptFailure = z.strictObject({
  code: z.string().max(200).optional(),
  message: z.string().max(100_000).optional(),
  stack: z.string().max(100_000).optional(),
  retryable: z.boolean().optional(),
})

export const WorkerFail = z.strictObject({ ...AttemptFields, error: AttemptFailure })
export type WorkerFail = z.infer<typeof WorkerFail>

const { worker_id: _worker, ...BatchAttemptFields } = AttemptFields
const Reports = <T extends z.ZodType>(item: T) => z.array(item).max(MAX_BATCH_ITEMS).optional()

/**
 * Not in the seed: a worker's whole round trip in one request — heartbeats, completions and
 * failures of the jobs it runs, then a claim of up to `max_jobs` for its free slots.
 */
export const WorkerBatch = z.strictObject({
  worker_id: WorkerId,
  heartbeat: Reports(z.strictObject({ job_id: Id, lease_token: z.string().min(1).max(200), progress: Progress.nullable().optional(), note: Note.nullable().optional() })),
  complete: Reports(z.strictObject({ ...BatchAttemptFields, result: JsonValue.optional(), progress: Progress.nullable().optional(), note: Note.nullable().optional() })),
  fail: Reports(z.strictObject({ ...BatchAttemptFields, error: AttemptFailure })),
  claim: z
    .strictObject({ streams: Streams, max_jobs: z.number().int().min(1).max(MAX_CLAIM_JOBS), max_wait_ms: MaxWaitMs.optional() })
    .optional(),
})
export type WorkerBatch = z.infer<typeof WorkerBatch>

export const WorkerReport = z.strictObject({ worker_id: WorkerId, kind: z.string().min(1).max(100), detail: z.string().max(10_000) })
export type WorkerReport = z.infer<typeof WorkerReport>

export const WORKER_PREFIX = '/internal/worker'

/**
 * Runs `op` in the engine's commit group. Dialect 003 answers a 409 with `ok: false` (and `ack`
 * on complete/fail) beside `{detail, code}`.
 */
async function notOk<T>(engine: Engine, op: () => T, withAck: boolean): Promise<T> {
  try {
    return await engine.run(op)
  } catch (error) {
    if (error instanceof EngineError && statusOf(error.code) === 409) {
      throw new HttpError(error.code, error.detail, withAck ? { ok: false, ack: error.extra.ack === true } : { ok: false })
    }
    throw error
  }
}

export function workerRouter(engine: Engine, waiters: ClaimWaiters, directory: WorkerDirectory, bodyLimit: number): Router {
  const router = new Router({ prefix: WORKER_PREFIX })
  // Every call names its worker: that is how external workers appear in GET /api/workers.
  const seen = <T extends { worker_id: string }>(input: T): T => {
    directory.seen(input.worker_id)
    return input
  }

  router.post('/claim', async (ctx) => {
    const input = seen(validate(WorkerClaim, await readJson(ctx, bodyLimit)))
    const maxWaitMs = longPollMs(input.max_wait_ms)
    // A claim that waits is answered from the commit that grants it: the worker hears of its job
    // as soon as the lease is durable.
    const answer = earlyReply(ctx, WorkerClaimAnswer)
    const options = { maxWaitMs, signal: maxWaitMs > 0 ? clientGone(ctx) : undefined }
    const decision = await waiters.claim({ worker_id: input.worker_id, queues: input.streams }, options, (granted) => answer.now(claimAnswer(granted)))
    answer.settled(() => claimAnswer(decision))
  })

  router.post('/heartbeat', async (ctx) => {
    const input = seen(validate(WorkerHeartbeat, await readJson(ctx, bodyLimit)))
    reply(ctx, WorkerHeartbeatAnswer, heartbeatAnswer(await notOk(engine, () => engine.heartbeatByToken(input), false)))
  })

  router.post('/complete', async (ctx) => {
    const input = seen(validate(WorkerComplete, await readJson(ctx, bodyLimit)))
    reply(ctx, WorkerCompleteAnswer, completeAnswer(await notOk(engine, () => engine.complete(input), true)))
  })

  router.post('/fail', async (ctx) => {
    const input = seen(validate(WorkerFail, await readJson(ctx, bodyLimit)))
    reply(ctx, WorkerFailAnswer, failAnswer(await notOk(engine, () => engine.fail(input), true)))
  })

  router.post('/batch', async (ctx) => {
    const input = seen(validate(WorkerBatch, await readJson(ctx, bodyLimit)))
    const maxWaitMs = longPollMs(input.claim?.max_wait_ms)
    const answer = earlyReply(ctx, WorkerBatchAnswer)
    const options = { maxWaitMs, signal: maxWaitMs > 0 ? clientGone(ctx) : undefined }
    const exchanged = await waiters.exchange(input, options, (early) => answer.now(exchangeAnswer(input, early)))
    answer.settled(() => exchangeAnswer(input, exchanged))
  })

  // Not in the seed: a worker reports what an operator should see (a handler that failed to load).
  router.post('/report', async (ctx) => {
    const input = seen(validate(WorkerReport, await readJson(ctx, bodyLimit)))
    await engine.run(() => engine.recordWorkerProblem(input.worker_id, { kind: input.kind, detail: input.detail }))
    reply(ctx, WorkerReportAnswer, { ok: true })
  })

  return router
}
