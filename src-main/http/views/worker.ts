/**
 * The worker API's answers rendered from the engine's results, whichever transport carries
 * them: the local workers' IPC renders claims and exchanges with these same functions. Their
 * schemas are the worker exchange's (src-shared/worker-exchange.ts).
 */
import type {
  RefusedItem,
  RefusedReport,
  WorkerClaimAnswer,
  WorkerClaimed,
  WorkerCompleteAnswer,
  WorkerExchangeAnswer,
  WorkerFailAnswer,
  WorkerHeartbeatAnswer,
} from '../../../src-shared/worker-exchange'
import { iso } from '../../engine/rules/clock'
import { REFUSED_REPORTS, type RefusedReports, type ReportRefusal, type ServedExchange } from '../../dispatch/dispatch'
import { type Assignment, type AttemptEnded, type Denial, heartbeatIntervalS, type ItemResult, type LeaseExtended, streamMessageName } from '../../engine'

/** the worker API's claim answer. */
export function claimAnswer(decision: Assignment | Denial): WorkerClaimAnswer {
  return decision.granted ? claimedJob(decision) : { claimed: false }
}

function claimedJob(a: Assignment): WorkerClaimed {
  return {
    claimed: true,
    job_id: a.job_id,
    attempt_id: a.attempt_id,
    lease_id: a.lease_id,
    lease_token: a.lease_token,
    stream: a.queue,
    message_id: a.message_id === null ? null : streamMessageName(a.message_id),
    payload: a.payload,
    job_type: a.job_type,
    max_runtime_s: a.max_runtime_s,
    lease_ttl_seconds: a.ttl_s,
    heartbeat_interval_seconds: heartbeatIntervalS(a.ttl_s),
  }
}

export function heartbeatAnswer(extended: LeaseExtended): WorkerHeartbeatAnswer {
  return { ok: true, lease_expires_at: iso(extended.expires_at), cancel_requested: extended.cancel_requested }
}

export const completeAnswer = (answer: AttemptEnded): WorkerCompleteAnswer => ({ ok: true, ack: answer.ack })

export const failAnswer = ({ ack, requeued, dlq }: AttemptEnded): WorkerFailAnswer => ({ ok: true, ack, requeued, dlq })

/**
 * Whether a refused completion or failure's stream message may be acknowledged all the same: the
 * engine says so for an attempt that had ended, and a report on a job that is not there (purged
 * since its attempt ended) has nothing left to deliver either. The one-job routes and a batch's
 * slots answer by this one rule.
 */
export const refusalAcks = (code: string, extra: { ack?: unknown }): boolean => extra.ack === true || code === 'job_not_found'

function refused(jobId: string, result: ItemResult<unknown> & { ok: false }): RefusedItem
function refused(jobId: string, result: ItemResult<unknown> & { ok: false }, withAck: true): RefusedReport
/** A refused report in its slot. */
function refused(jobId: string, result: ItemResult<unknown> & { ok: false }, withAck = false): RefusedItem | RefusedReport {
  const { code, detail, extra } = result.error
  return { job_id: jobId, ok: false as const, code, detail, ...(withAck ? { ack: refusalAcks(code, extra) } : {}) }
}

/**
 * The answer to a worker's exchange (`POST /internal/worker/batch`, and IPC `exchange`): one
 * entry per report, in the order sent, each shaped as the one-job route answers it, and the
 * claims granted, each as a worker API claim.
 */
export function exchangeAnswer(
  request: { heartbeat?: { job_id: string }[]; complete?: { job_id: string }[]; fail?: { job_id: string }[]; [REFUSED_REPORTS]?: RefusedReports },
  answer: ServedExchange,
): WorkerExchangeAnswer {
  const refusals = request[REFUSED_REPORTS]
  return {
    heartbeats: inSlots(
      answer.heartbeats.map((result, i) => {
        const jobId = request.heartbeat![i]!.job_id
        return result.ok ? { job_id: jobId, ...heartbeatAnswer(result.value) } : refused(jobId, result)
      }),
      refusals?.heartbeat,
      (refusal) => ({ ...refusal, ok: false as const }),
    ),
    completed: inSlots(
      answer.completed.map((result, i) => {
        const jobId = request.complete![i]!.job_id
        return result.ok ? { job_id: jobId, ...completeAnswer(result.value) } : refused(jobId, result, true)
      }),
      refusals?.complete,
      (refusal) => ({ ...refusal, ok: false as const, ack: false }),
    ),
    failed: inSlots(
      answer.failed.map((result, i) => {
        const jobId = request.fail![i]!.job_id
        return result.ok ? { job_id: jobId, ...failAnswer(result.value) } : refused(jobId, result, true)
      }),
      refusals?.fail,
      (refusal) => ({ ...refusal, ok: false as const, ack: false }),
    ),
    jobs: answer.claimed.granted.map(claimedJob),
    claim_waited_ms: Math.round(answer.claimWaitedMs * 1000) / 1000,
  }
}

/**
 * The answers of a list of reports in the order sent: the engine's, for the reports it was
 * given, and between them the refusal of each report refused before it (at its place as sent).
 */
function inSlots<T>(answers: T[], refusals: ReadonlyMap<number, ReportRefusal> | undefined, view: (refusal: ReportRefusal) => T): T[] {
  if (refusals === undefined || refusals.size === 0) return answers
  const slots: T[] = []
  let next = 0
  for (let i = 0; i < answers.length + refusals.size; i++) {
    const refusal = refusals.get(i)
    slots.push(refusal === undefined ? answers[next++]! : view(refusal))
  }
  return slots
}
