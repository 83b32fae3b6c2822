import type { AttemptRow, LeaseRow } from '../../db/schema'
import type { EngineContext } from '../memory/context'
import { getJob, leasesOfJob } from '../store/rows'

/** Reads of the leases for the views people read: a job's attempts, the ACTIVE leases. */

/** A job's attempts, first first: the attempt columns of its lease rows (404 for an unknown job). */
export function jobAttempts(ctx: EngineContext, jobId: string): AttemptRow[] {
  return leasesOfJob(ctx, getJob(ctx, jobId)).map((lease) => ({
    id: lease.attempt_id,
    job_id: lease.job_id,
    lease_id: lease.id,
    worker_id: lease.worker_id,
    number: lease.attempt,
    started_at: lease.granted_at,
    finished_at: lease.released_at,
    outcome: lease.release_status,
    disposition: lease.disposition,
    error: lease.error,
  }))
}

/** The ACTIVE leases with their job's type, soonest expiry first (from memory: active-leases.ts). */
export function activeLeases(ctx: EngineContext): (LeaseRow & { job_type: string })[] {
  return ctx.activeLeases
    .committed()
    .map(({ lease, job }) => ({ ...lease, job_type: job.job_type }))
    .sort((a, b) => a.expires_at - b.expires_at || a.fence - b.fence)
}
