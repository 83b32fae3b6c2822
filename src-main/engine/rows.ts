import type { JobRow, LeaseRow } from '../db/schema'
import type { EngineContext } from './context'
import type { AttemptDisposition } from './domain'
import { EngineError, type ErrorExtra, jobNotFound, leaseNotFound } from './errors'
import { assertMove, type FinalStatus, type JobState } from './states'

/**
 * The row layer of jobs and leases: reading them, and writing them as the verbs decide, with
 * the memory of ACTIVE leases kept in step (see active-leases.ts). It holds no rule but the
 * transition table, and imports no verb module: the verbs (grants.ts, lease-lookup.ts,
 * heartbeats.ts, lease-end.ts, attempt-reports.ts, jobs.ts, files.ts, blockers.ts) build on it.
 */

/** The job's progress and note, as a heartbeat reports them (or a completion, for the last). */
export interface HeartbeatReport {
  progress?: number | null
  note?: string | null
}

/** A lease and its job, as a verb answers them. */
export interface Leased {
  lease: LeaseRow
  job: JobRow
}

export function getJob(ctx: EngineContext, jobId: string): JobRow {
  const job = ctx.one<JobRow>('SELECT * FROM jobs WHERE id = ?', jobId)
  if (!job) throw jobNotFound(jobId)
  return job
}

/**
 * Writes the job's changed columns, bumps `updated_at`, and returns the row as it now is. Only
 * the columns whose value changes are written: SQLite maintains every index that names a column
 * an UPDATE writes, even to write the value it had (jobs_claim_expiry names a claim's expiry,
 * which most moves set to the null it already is).
 */
export function updateJob(ctx: EngineContext, job: JobRow, changes: Partial<JobRow>): JobRow {
  const updated = { ...job, ...changes, updated_at: ctx.clock.now() }
  const params: Record<string, unknown> = { updated_at: updated.updated_at, seq: job.seq }
  const sets = ['updated_at = @updated_at']
  for (const column of Object.keys(changes) as (keyof JobRow)[]) {
    if (changes[column] === job[column]) continue
    params[column] = changes[column]
    sets.push(`${column} = @${column}`)
  }
  // By `seq`, the row's key: no lookup in the id index first.
  ctx.stmt(`UPDATE jobs SET ${sets.join(', ')} WHERE seq = @seq`).run(params)
  ctx.activeLeases.jobWritten(job, updated, changes)
  return updated
}

/** Moves a job to a new state through the transition table, with any other changes; returns the new row. */
export function moveJob(ctx: EngineContext, job: JobRow, to: JobState, changes: Partial<JobRow> = {}): JobRow {
  assertMove(job.id, job.state, to)
  return updateJob(ctx, job, { ...changes, state: to })
}

/** Every column of a lease. */
const LEASE_COLUMNS = [
  'fence', 'id', 'job_id', 'attempt_id', 'worker_id', 'addon_id', 'cost_units', 'ttl_s', 'grace_s', 'state', 'token',
  'granted_at', 'last_heartbeat_at', 'expires_at', 'released_at', 'release_status', 'attempt', 'disposition', 'error',
] as const satisfies readonly (keyof LeaseRow)[]
/** Fails to compile while a column of the table is missing from the list. */
const allLeaseColumns: Exclude<keyof LeaseRow, (typeof LEASE_COLUMNS)[number]> extends never ? true : never = true
void allLeaseColumns

/** Writes a new ACTIVE lease (inside the grant's transaction). */
export function insertLease(ctx: EngineContext, lease: LeaseRow, job: JobRow): void {
  ctx.insert('leases', LEASE_COLUMNS, lease)
  ctx.activeLeases.granted(lease, job)
}

/** Writes a heartbeat's new expiry; returns the lease as it now is. */
export function extendLease(ctx: EngineContext, lease: LeaseRow, now: number, expiresAt: number): LeaseRow {
  ctx.run('UPDATE leases SET last_heartbeat_at = ?, expires_at = ? WHERE fence = ?', now, expiresAt, lease.fence)
  const extended = { ...lease, last_heartbeat_at: now, expires_at: expiresAt }
  ctx.activeLeases.leaseWritten(extended)
  return extended
}

export function getLease(ctx: EngineContext, leaseId: string): LeaseRow {
  const lease = ctx.activeLeases.byId(leaseId)?.lease ?? ctx.one<LeaseRow>('SELECT * FROM leases WHERE id = ?', leaseId)
  if (!lease) throw leaseNotFound(leaseId)
  return lease
}

/** The 409 for a write under a lease that is no longer ACTIVE. */
export function notActive(lease: LeaseRow, extra: ErrorExtra = {}): EngineError {
  return lease.state === 'EXPIRED'
    ? new EngineError('lease_expired', `Lease ${lease.id} expired`, extra)
    : new EngineError('lease_not_active', `Lease ${lease.id} was released (${lease.release_status})`, extra)
}

/** How an attempt ended, on its lease: what became of the job. */
export type Disposition = AttemptDisposition

/** A value as JSON text, or null for none. */
export const json = (value: unknown): string | null => (value === undefined || value === null ? null : JSON.stringify(value))

/** Ends a lease and the attempt it ran (one row): EXPIRED, or RELEASED with the attempt's outcome. */
export function endLease(
  ctx: EngineContext,
  lease: LeaseRow,
  state: 'RELEASED' | 'EXPIRED',
  status: FinalStatus | 'BLOCKED',
  disposition: Disposition,
  error: unknown,
): LeaseRow {
  const ended = { state, released_at: ctx.clock.now(), release_status: status, disposition, error: json(error) }
  ctx.run(
    'UPDATE leases SET state = ?, released_at = ?, release_status = ?, disposition = ?, error = ? WHERE fence = ?',
    ended.state,
    ended.released_at,
    ended.release_status,
    ended.disposition,
    ended.error,
    lease.fence,
  )
  ctx.activeLeases.ended(lease)
  return { ...lease, ...ended }
}

/** The job of a lease as it now is: from memory while the lease is ACTIVE. */
export function jobOfLease(ctx: EngineContext, lease: LeaseRow): JobRow {
  return ctx.activeLeases.ofJob(lease.job_id)?.job ?? getJob(ctx, lease.job_id)
}

