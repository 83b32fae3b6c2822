import type { z } from 'zod'
import { WorkerClaim, WorkerComplete, WorkerExchange, WorkerFail, WorkerHeartbeat, WorkerRefusal, WorkerReport, WorkerReportRefusal } from '../../src-shared/worker-exchange'
import { EngineError } from '../engine'
import { exchangeBody } from './exchange-body'
import { type AnyRoute, type Api, NOT_FOUND, type Route, type RunRoute } from './route'
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
import { claimAnswer, completeAnswer, exchangeAnswer, failAnswer, heartbeatAnswer, refusalAcks } from './views/worker'

/** The worker API (the worker contract): a claim is a lease + an attempt + a token; the DB stays the truth. Its messages are src-shared/worker-exchange.ts. */
export const WORKER_PREFIX = '/internal/worker'

const WORKER_409 = 'lease_token_mismatch, lease_expired, lease_not_active, attempt_mismatch, file_lease_lost'

/** The statuses of a report the host refused: another worker's job (403), a job not there (404), a lease gone (409). */
const REPORT_REFUSALS = new Set([403, 404, 409])

/**
 * The worker API answers a refused report with `ok: false` (and on complete/fail whether to `ack`)
 * beside `{detail, code}`, as a batch's slot does: a worker reads every refusal the same way.
 */
const notOk =
  (withAck: boolean) =>
  (error: unknown): unknown =>
    error instanceof EngineError && REPORT_REFUSALS.has(statusOf(error.code))
      ? new HttpError(error.code, error.detail, withAck ? { ok: false, ack: refusalAcks(error.code, error.extra) } : { ok: false })
      : error

/**
 * A worker route: every call names its worker, which is how external workers appear in GET
 * /api/workers. A claim or an exchange lists its worker as it comes (a claim may wait 20 s for
 * work); a report (a heartbeat, a completion, a failure, a problem) only once it is accepted: one
 * the host refuses (an unknown job, another worker's lease) is no sign of a worker that runs
 * anything, and only keeps a worker already listed alive.
 */
function workerRoute<Body extends z.ZodType<{ worker_id: string }>, Answer extends z.ZodType>(definition: Route<undefined, undefined, Body, Answer>): AnyRoute {
  const inner = definition as unknown as RunRoute
  const seen: RunRoute = {
    ...inner,
    run: (input, deps, call) => {
      const workerId = (input.body as unknown as { worker_id: string }).worker_id // every body's schema requires it (Body's bound)
      if (!inner.grouped) {
        deps.directory.seen(workerId)
        return inner.run(input, deps, call)
      }
      let answer: unknown
      try {
        // A grouped route's verbs run here, in the commit group: a refusal throws before the worker is listed.
        answer = inner.run(input, deps, call)
      } catch (error) {
        deps.directory.touch(workerId)
        throw error
      }
      deps.directory.seen(workerId)
      return answer
    },
  }
  return seen
}

/** The worker API: the lane serves every route (lane.ts), Koa's router every request the lane leaves to it. */
export const workerApi: Api = {
  tag: 'worker',
  description: 'The worker API: a claim is a lease + an attempt + a token (/internal/worker)',
  prefix: WORKER_PREFIX,
  routes: [
    workerRoute({
      method: 'POST',
      path: '/claim',
      id: 'workerClaim',
      summary: 'Long-poll claim: lease + attempt + token',
      body: WorkerClaim,
      answer: WorkerClaimAnswer,
      lane: true,
      // Granted by dispatch, in its own step; it delivers the answer (a waiting claim's from the
      // commit that grants it: the worker hears of its job as soon as the lease is durable).
      grouped: false,
      run: async ({ body }, { dispatch }, call) => {
        let sent!: WorkerClaimAnswer
        await dispatch.claim(body, (decision) => call.answerNow((sent = claimAnswer(decision))), call.clientGone)
        return sent
      },
    }),
    workerRoute({
      method: 'POST',
      path: '/heartbeat',
      id: 'workerHeartbeat',
      summary: 'Extend the lease named by its token',
      body: WorkerHeartbeat,
      answer: WorkerHeartbeatAnswer,
      errors: { 403: ['worker_mismatch, with ok: false', WorkerRefusal], 404: [`${NOT_FOUND.job}, with ok: false`, WorkerRefusal], 409: [`${WORKER_409}, with ok: false`, WorkerRefusal] },
      lane: true,
      grouped: true,
      refusal: notOk(false),
      run: ({ body }, { engine }) => heartbeatAnswer(engine.heartbeatByToken(body)),
    }),
    workerRoute({
      method: 'POST',
      path: '/complete',
      id: 'workerComplete',
      summary: 'Complete the attempt (idempotent)',
      body: WorkerComplete,
      answer: WorkerCompleteAnswer,
      errors: { 403: ['worker_mismatch, with ok: false and ack: false', WorkerReportRefusal], 404: [`${NOT_FOUND.job}, with ok: false and ack: true (nothing is left to deliver)`, WorkerReportRefusal], 409: [`${WORKER_409}, with ok: false and whether to ack`, WorkerReportRefusal] },
      lane: true,
      grouped: true,
      refusal: notOk(true),
      run: ({ body }, { engine }) => completeAnswer(engine.complete(body)),
    }),
    workerRoute({
      method: 'POST',
      path: '/fail',
      id: 'workerFail',
      summary: 'Fail the attempt; retryable requeues while attempts remain',
      body: WorkerFail,
      answer: WorkerFailAnswer,
      errors: { 403: ['worker_mismatch, with ok: false and ack: false', WorkerReportRefusal], 404: [`${NOT_FOUND.job}, with ok: false and ack: true (nothing is left to deliver)`, WorkerReportRefusal], 409: [`${WORKER_409}, with ok: false and whether to ack`, WorkerReportRefusal] },
      lane: true,
      grouped: true,
      refusal: notOk(true),
      run: ({ body }, { engine }) => failAnswer(engine.fail(body)),
    }),
    workerRoute({
      method: 'POST',
      path: '/batch',
      id: 'workerBatch',
      summary: 'Beyond its contract: heartbeats, completions and failures, then a claim of up to max_jobs, in one round trip',
      body: WorkerExchange,
      answer: WorkerExchangeAnswer,
      lane: true,
      // Each report is atomic on its own: one that fails its schema is refused in its slot.
      itemwise: exchangeBody,
      // Dispatch runs its reports and its claim, each in the commit group, and delivers the answer.
      grouped: false,
      run: async ({ body }, { dispatch }, call) => {
        let sent!: WorkerExchangeAnswer
        await dispatch.exchange(body, (answer) => call.answerNow((sent = exchangeAnswer(body, answer))), call.clientGone)
        return sent
      },
    }),
    // Beyond its contract: a worker reports what an operator should see (a handler that failed to load).
    workerRoute({
      method: 'POST',
      path: '/report',
      id: 'workerReport',
      summary: 'Beyond its contract: a problem an operator should see (a handler that failed to load); recorded as a WORKER_PROBLEM event',
      body: WorkerReport,
      answer: WorkerReportAnswer,
      lane: true,
      grouped: true,
      run: ({ body }, { engine }) => {
        engine.recordWorkerProblem(body.worker_id, { kind: body.kind, detail: body.detail })
        return { ok: true as const }
      },
    }),
  ],
}
