import type { AttemptRow, LeaseRow } from '../db/schema'
import type { EngineContext } from './context'
import { getJob } from './rows'

/** Reads of the leases table for the views people read: a job's attempts, the ACTIVE leases. */

/** A job's attempts, first first: the attempt columns of its lease rows (404 for an unknown job). */
export function jobAttempts(ctx: EngineContext, jobId: string): AttemptRow[] {
  getJob(ctx, jobId)
  return ctx.all<AttemptRow>(
    `SELECT attempt_id AS id, job_id, id AS lease_id, worker_id, attempt AS number, granted_at AS started_at,
       released_at AS finished_at, release_status AS outcome, disposition, error
     FROM leases WHERE job_id = ? ORDER BY attempt`,
    jobId,
  )
}

/** The ACTIVE leases with their job's type, soonest expiry first. */
export function activeLeases(ctx: EngineContext): (LeaseRow & { job_type: string })[] {
  return ctx.all<LeaseRow & { job_type: string }>(
    "SELECT leases.*, jobs.job_type FROM leases JOIN jobs ON jobs.id = leases.job_id WHERE leases.state = 'ACTIVE' ORDER BY leases.expires_at",
  )
}
