import type { LeaseRow } from '../../db/schema'
import { activeLeaseOf } from '../memory/active-leases'
import type { EngineContext } from '../memory/context'
import { EngineError, invalid, workerMismatch } from '../rules/errors'
import { expireIfDue } from './lease-end'
import { findLease, getJob, getLease, type Leased, leasesOfJob } from '../store/rows'

/**
 * Finding the lease a worker names, by its id (the pull and queue APIs) or by its job and token
 * (the worker API): the fencing checks, in order, and a lease past its expiry expired first.
 */

/** Resolves the lease named by id (the pull and queue APIs): 404, then 403 on another worker's lease. */
export function leaseById(ctx: EngineContext, leaseId: string, workerId: string | undefined, jobId: string | undefined): LeaseRow {
  const lease = expireIfDue(ctx, getLease(ctx, leaseId))
  if (workerId !== undefined && lease.worker_id !== workerId) throw workerMismatch(leaseId, workerId)
  if (jobId !== undefined && lease.job_id !== jobId) {
    throw new EngineError('job_mismatch', `Lease ${leaseId} is for job ${lease.job_id}, not ${jobId}`)
  }
  return lease
}

/**
 * The job's lease that has this token: its current lease (the usual case), else one of its
 * earlier leases. 404 for an unknown job comes first.
 */
function jobLeaseWithToken(ctx: EngineContext, jobId: string, token: string): Leased | undefined {
  const active = activeLeaseOf(ctx, jobId)
  if (active?.lease.token === token) return active
  const job = active?.job ?? getJob(ctx, jobId)
  const current = job.lease_id === null ? undefined : findLease(ctx, job.lease_id)
  if (current?.token === token) return { lease: current, job }
  const earlier = leasesOfJob(ctx, job).find((lease) => lease.token === token)
  return earlier && { lease: earlier, job }
}

/**
 * Resolves the lease named by its token (the worker API): a token that is not this job's is a
 * mismatch. Also answers the job as it now is, so the caller need not read it again. A lease is
 * judged due at `heardAt` (when the report reached the host's transport), else now.
 */
export function leaseByToken(ctx: EngineContext, jobId: string, workerId: string, token: string, heardAt?: number): Leased {
  const found = jobLeaseWithToken(ctx, jobId, token)
  if (!found) throw new EngineError('lease_token_mismatch', `That lease token is not a lease of job ${jobId}`)
  const lease = expireIfDue(ctx, found.lease, heardAt)
  if (lease.worker_id !== workerId) throw workerMismatch(lease.id, workerId)
  return { lease, job: lease === found.lease ? found.job : getJob(ctx, jobId) }
}

/**
 * The job lease a caller with a worker token names in a file request, proved by that lease's
 * token: such a caller acts on file leases of its own jobs only (the scoped tokens of
 * docs/workers.md), and only the worker a job was granted to has its lease's token. 400 without
 * both, 404 for no such lease, 409 `lease_token_mismatch` for another lease's token. Whether the
 * lease is still ACTIVE is the file verb's to say, as for any caller.
 */
export function provenLease(ctx: EngineContext, request: { lease_id?: string | null; lease_token?: string | null }): LeaseRow {
  if (!request.lease_id || !request.lease_token) {
    throw invalid('A worker token acts only on file leases of its own jobs: name the job lease (lease_id) and its token (lease_token)')
  }
  const lease = getLease(ctx, request.lease_id)
  if (lease.token !== request.lease_token) throw new EngineError('lease_token_mismatch', `That lease token is not lease ${lease.id}'s`)
  return lease
}
