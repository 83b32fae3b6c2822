import Router from '@koa/router'
import type { z } from 'zod'
import { WorkerClaim, WorkerComplete, WorkerExchange, WorkerFail, WorkerHeartbeat, WorkerReport } from '../../src-shared/worker-exchange'
import type { Dispatch } from '../dispatch/dispatch'
import { type Engine, EngineError } from '../engine'
import type { WorkerDirectory } from '../workers/directory'
import { type LaneCall, type LaneRoute, postRoutes } from './lane'
import { statusOf } from '../../src-shared/error-codes'
import { HttpError } from './http-error'
import {
  WorkerClaimAnswer,
  WorkerCompleteAnswer,
  WorkerExchangeAnswer,
  WorkerFailAnswer,
  WorkerHeartbeatAnswer,
  WorkerReportAnswer,
} from '../../src-shared/worker-exchange'
import { claimAnswer, completeAnswer, exchangeAnswer, failAnswer, heartbeatAnswer } from './views/worker'

/** The worker API (seed 003): a claim is a lease + an attempt + a token; the DB stays the truth. Its messages are src-shared/worker-exchange.ts. */
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
export function workerRoutes(engine: Engine, dispatch: Dispatch, directory: WorkerDirectory): LaneRoute[] {
  return [
    route(directory, {
      path: '/claim',
      body: WorkerClaim,
      answer: WorkerClaimAnswer,
      // Dispatch delivers the answer (a waiting claim's from the commit that grants it).
      run: async (input, call) => {
        let sent!: WorkerClaimAnswer
        await dispatch.claim(input, (decision) => call.answerNow((sent = claimAnswer(decision))), call.clientGone)
        return sent
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
      body: WorkerExchange,
      answer: WorkerExchangeAnswer,
      run: async (input, call) => {
        let sent!: WorkerExchangeAnswer
        await dispatch.exchange(input, (answer) => call.answerNow((sent = exchangeAnswer(input, answer))), call.clientGone)
        return sent
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
