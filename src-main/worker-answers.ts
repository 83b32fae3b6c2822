import type { AcquireResult } from './engine/files'
import type { LeaseDecision } from './engine/leases'

/**
 * The answers a worker gets, whichever transport it uses: dialect 003 over HTTP and the local
 * workers' IPC render claims and gate decisions the same way.
 */

/** Dialect 003's claim answer. */
export function claimAnswer(decision: LeaseDecision) {
  if (!decision.granted) return { claimed: false as const }
  const { lease, job, message } = decision
  return {
    claimed: true as const,
    job_id: job.id,
    attempt_id: lease.attempt_id,
    lease_id: lease.id,
    lease_token: lease.token,
    stream: job.queue,
    message_id: message ? String(message.id) : null,
    payload: JSON.parse(job.payload) as unknown,
    job_type: job.job_type,
    max_runtime_s: job.max_runtime_s,
    lease_ttl_seconds: lease.ttl_s,
    heartbeat_interval_seconds: Math.max(1, Math.floor(lease.ttl_s / 3)),
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
