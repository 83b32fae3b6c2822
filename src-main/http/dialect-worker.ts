import Router from '@koa/router'
import { z } from 'zod'
import type { ClaimWaiters } from '../workers/claim-waiters'
import { longPollMs } from '../workers/long-poll'
import { type Engine, EngineError, MAX_BATCH_ITEMS, MAX_CLAIM_JOBS } from '../engine'
import type { WorkerDirectory } from '../workers/directory'
import { clientGone, earlyReply, readJson } from './body'
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
 * How a worker route's answer leaves, given by whichever carrier runs the route: Koa's router
 * ({@link workerRouter}), or the worker lane for the common shape of request (worker-lane.ts).
 */
export interface WorkerCall<Answer> {
  /** A signal that aborts when the client hangs up (asked for only by a call that may wait). */
  clientGone(): AbortSignal
  /** Answers now, before the route's promise settles: a waiting claim, from the commit that grants it. */
  answerNow(answer: Answer): void
}

/** One route of the worker dialect: `POST WORKER_PREFIX + path`, its body's schema, its answer's, and what it does. */
export interface WorkerRoute<Body extends z.ZodType = z.ZodType, Answer extends z.ZodType = z.ZodType> {
  path: string
  body: Body
  answer: Answer
  run(input: z.output<Body>, call: WorkerCall<z.output<Answer>>): Promise<z.output<Answer>>
}

/** Every call names its worker: that is how external workers appear in GET /api/workers. */
function route<Body extends z.ZodType<{ worker_id: string }>, Answer extends z.ZodType>(
  directory: WorkerDirectory,
  definition: WorkerRoute<Body, Answer>,
): WorkerRoute {
  return {
    ...definition,
    run: (input: z.output<Body>, call: WorkerCall<z.output<Answer>>) => {
      directory.seen((input as { worker_id: string }).worker_id) // every body's schema requires it (Body's bound)
      return definition.run(input, call)
    },
  } as WorkerRoute
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

/** The worker dialect's routes. */
export function workerRoutes(engine: Engine, waiters: ClaimWaiters, directory: WorkerDirectory): WorkerRoute[] {
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

/**
 * The worker routes under Koa: every request the worker lane leaves to Koa (another spelling of
 * the path, another method, another body encoding) is answered here, by the same routes.
 */
export function workerRouter(routes: readonly WorkerRoute[], bodyLimit: number): Router {
  const router = new Router({ prefix: WORKER_PREFIX })
  for (const { path, body, answer, run } of routes) {
    router.post(path, async (ctx) => {
      const input = validate(body, await readJson(ctx, bodyLimit))
      const reply = earlyReply(ctx, answer)
      const settled = await run(input, { clientGone: () => clientGone(ctx.res), answerNow: reply.now })
      reply.settled(() => settled)
    })
  }
  return router
}
