import Router from '@koa/router'
import { z } from 'zod'
import type { ClaimWaiters } from '../workers/claim-waiters'
import { longPollMs } from '../workers/long-poll'
import { type Engine, EngineError, MAX_BATCH_ITEMS, MAX_CLAIM_JOBS } from '../engine'
import type { WorkerDirectory } from '../workers/directory'
import { type LaneCall, type LaneRoute, postRoutes } from './lane'
import { Id, JsonValue, MaxWaitMs, Name, Note, Progress, WorkerId } from './schemas'
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
const Streams = z.array(Name).min(1).max(50)

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

/** Every call names its worker: that is how external workers appear in GET /api/workers. */
function route<Body extends z.ZodType<{ worker_id: string }>, Answer extends z.ZodType>(
  directory: WorkerDirectory,
  definition: LaneRoute<Body, Answer>,
): LaneRoute {
  return {
    ...definition,
    run: (input: z.output<Body>, call: LaneCall<z.output<Answer>>) => {
      directory.seen((input as { worker_id: string }).worker_id) // every body's schema requires it (Body's bound)
      return definition.run(input, call)
    },
  } as LaneRoute
}

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

/** The worker dialect's routes: the lane's (lane.ts), and Koa's for every other request ({@link workerRouter}). */
export function workerRoutes(engine: Engine, waiters: ClaimWaiters, directory: WorkerDirectory): LaneRoute[] {
  return [
    route(directory, {
      path: '/claim',
      body: WorkerClaim,
      answer: WorkerClaimAnswer,
      // A claim that waits is answered from the commit that grants it: the worker hears of its job
      // as soon as the lease is durable.
      run: async (input, call) => {
        const maxWaitMs = longPollMs(input.max_wait_ms)
        const options = { maxWaitMs, signal: maxWaitMs > 0 ? call.clientGone() : undefined }
        return claimAnswer(await waiters.claim({ worker_id: input.worker_id, queues: input.streams }, options, (granted) => call.answerNow(claimAnswer(granted))))
      },
    }),
    route(directory, {
      path: '/heartbeat',
      body: WorkerHeartbeat,
      answer: WorkerHeartbeatAnswer,
      run: async (input) => heartbeatAnswer(await notOk(engine, () => engine.heartbeatByToken(input), false)),
    }),
    route(directory, {
      path: '/complete',
      body: WorkerComplete,
      answer: WorkerCompleteAnswer,
      run: async (input) => completeAnswer(await notOk(engine, () => engine.complete(input), true)),
    }),
    route(directory, {
      path: '/fail',
      body: WorkerFail,
      answer: WorkerFailAnswer,
      run: async (input) => failAnswer(await notOk(engine, () => engine.fail(input), true)),
    }),
    route(directory, {
      path: '/batch',
      body: WorkerBatch,
      answer: WorkerBatchAnswer,
      run: async (input, call) => {
        const maxWaitMs = longPollMs(input.claim?.max_wait_ms)
        const options = { maxWaitMs, signal: maxWaitMs > 0 ? call.clientGone() : undefined }
        return exchangeAnswer(input, await waiters.exchange(input, options, (early) => call.answerNow(exchangeAnswer(input, early))))
      },
    }),
    // Not in the seed: a worker reports what an operator should see (a handler that failed to load).
    route(directory, {
      path: '/report',
      body: WorkerReport,
      answer: WorkerReportAnswer,
      run: async (input) => {
        await engine.run(() => engine.recordWorkerProblem(input.worker_id, { kind: input.kind, detail: input.detail }))
        return { ok: true as const }
      },
    }),
  ]
}

/** The worker routes under Koa, for every request the lane leaves to it. */
export function workerRouter(routes: readonly LaneRoute[], bodyLimit: number): Router {
  const router = new Router({ prefix: WORKER_PREFIX })
  postRoutes(router, routes, bodyLimit)
  return router
}
