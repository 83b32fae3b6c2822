import { iso } from './engine/clock'
import type { ExchangeAnswer, ItemResult } from './engine'
import type { AcquireResult } from './engine/files'
import type { LeaseDecision } from './engine/leases'

/**
 * The answers a worker gets, whichever transport it uses: dialect 003 over HTTP and the local
 * workers' IPC render claims and gate decisions the same way.
 */

/** Dialect 003's claim answer. */
export function claimAnswer(decision: LeaseDecision) {
  if (!decision.granted) return { claimed: false as const }
  const { lease, job, message_id } = decision
  return {
    claimed: true as const,
    job_id: job.id,
    attempt_id: lease.attempt_id,
    lease_id: lease.id,
    lease_token: lease.token,
    stream: job.queue,
    message_id: message_id === null ? null : String(message_id),
    payload: JSON.parse(job.payload) as unknown,
    job_type: job.job_type,
    max_runtime_s: job.max_runtime_s,
    lease_ttl_seconds: lease.ttl_s,
    heartbeat_interval_seconds: Math.max(1, Math.floor(lease.ttl_s / 3)),
  }
}

/** A refused item of a batch: dialect 003's 409 body (`ok: false`, `ack` on complete/fail) with the job's id. */
function refused(jobId: string, result: ItemResult<unknown> & { ok: false }, withAck: boolean) {
  const { code, detail, body } = result.error
  return { job_id: jobId, ok: false as const, code, detail, ...(withAck ? { ack: body.ack === true } : {}) }
}

/**
 * The answer to a worker's exchange (`POST /internal/worker/batch`, and IPC `exchange`): one
 * entry per report, in the order sent, each shaped as the one-job route answers it, and the
 * claims granted, each as a dialect 003 claim.
 */
export function exchangeAnswer(request: { heartbeat?: { job_id: string }[]; complete?: { job_id: string }[]; fail?: { job_id: string }[] }, answer: ExchangeAnswer) {
  return {
    heartbeats: answer.heartbeats.map((result, i) => {
      const jobId = request.heartbeat![i]!.job_id
      if (!result.ok) return refused(jobId, result, false)
      const { lease, job } = result.value
      return { job_id: jobId, ok: true as const, lease_expires_at: iso(lease.expires_at), cancel_requested: job.cancel_requested === 1 }
    }),
    completed: answer.completed.map((result, i) => {
      const jobId = request.complete![i]!.job_id
      return result.ok ? { job_id: jobId, ok: true as const, ack: result.value.ack } : refused(jobId, result, true)
    }),
    failed: answer.failed.map((result, i) => {
      const jobId = request.fail![i]!.job_id
      if (!result.ok) return refused(jobId, result, true)
      const { ack, requeued, dlq } = result.value
      return { job_id: jobId, ok: true as const, ack, requeued, dlq }
    }),
    jobs: answer.claimed.granted.map(claimAnswer),
  }
}

/** The gate's decision in the worker runtime's terms. */
export function acquireAnswer(result: AcquireResult) {
  if (result.granted) return { granted: true as const }
  if (result.code === 'file_lease_held') {
    return { granted: false as const, code: 'file_lease_held' as const, retry_at: new Date(result.contention.retry_at).toISOString(), holder: result.contention.holder }
  }
  return { granted: false as const, code: 'blocked' as const, blocker: { blocker_id: result.blocker.id, file: result.blocker.file } }
}
