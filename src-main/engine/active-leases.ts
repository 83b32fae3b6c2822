import type { JobRow, LeaseRow } from '../db/schema'
import type { EngineContext } from './context'

/** An ACTIVE lease and its job, as both were last written. */
export interface ActiveLease {
  lease: LeaseRow
  job: JobRow
}

/**
 * The ACTIVE leases and their jobs, kept in memory beside the database, so that the hot verbs
 * (a heartbeat, a completion, the capacity check of every grant) read neither the job nor the
 * lease back, nor sum the units in use. SQLite stays the truth: the map is read from it at start,
 * and every write of a lease or of a leased job goes through this map in the same transaction
 * (the row layer, rows.ts, is the only writer of both), with an undo should that
 * transaction or its savepoint roll back. There is at most one ACTIVE lease per job, and no more
 * ACTIVE leases than capacity units, so the map stays small.
 */
export class ActiveLeases {
  private readonly byJob = new Map<string, ActiveLease>()
  private readonly jobOfLease = new Map<string, string>()
  private unitsHeld = 0

  constructor(private readonly ctx: EngineContext) {}

  /** Reads the ACTIVE leases and their jobs from the database (the engine does so once, at start). */
  load(): void {
    this.byJob.clear()
    this.jobOfLease.clear()
    this.unitsHeld = 0
    const leases = this.ctx.all<LeaseRow>("SELECT * FROM leases WHERE state = 'ACTIVE'")
    for (const lease of leases) {
      const job = this.ctx.one<JobRow>('SELECT * FROM jobs WHERE id = ?', lease.job_id)
      if (job) this.write(lease.job_id, { lease, job })
    }
  }

  /** Capacity units held by ACTIVE leases now. */
  get units(): number {
    return this.unitsHeld
  }

  get size(): number {
    return this.byJob.size
  }

  /** The job's ACTIVE lease and the job, or undefined when it holds none. */
  ofJob(jobId: string): ActiveLease | undefined {
    return this.byJob.get(jobId)
  }

  /** The ACTIVE lease with this id and its job, or undefined when no ACTIVE lease has it. */
  byId(leaseId: string): ActiveLease | undefined {
    const jobId = this.jobOfLease.get(leaseId)
    return jobId === undefined ? undefined : this.byJob.get(jobId)
  }

  /** Every ACTIVE lease with its job (in no particular order). */
  all(): IterableIterator<ActiveLease> {
    return this.byJob.values()
  }

  /** A lease was granted (inside its transaction). */
  granted(lease: LeaseRow, job: JobRow): void {
    this.change(job.id, { lease, job })
  }

  /**
   * A job was written (`before` → `after` by `changes`): if it holds an ACTIVE lease, its entry
   * becomes `after`, or takes the same changes if the writer started from another copy of it.
   */
  jobWritten(before: JobRow, after: JobRow, changes: Partial<JobRow>): void {
    const entry = this.byJob.get(before.id)
    if (!entry) return
    const job = entry.job === before ? after : { ...entry.job, ...changes, updated_at: after.updated_at }
    this.change(before.id, { lease: entry.lease, job })
  }

  /** An ACTIVE lease was extended (a heartbeat). */
  leaseWritten(lease: LeaseRow): void {
    const entry = this.byJob.get(lease.job_id)
    if (entry && entry.lease.fence === lease.fence) this.change(lease.job_id, { lease, job: entry.job })
  }

  /** A lease ended (released or expired): it leaves the map. */
  ended(lease: LeaseRow): void {
    const entry = this.byJob.get(lease.job_id)
    if (entry && entry.lease.fence === lease.fence) this.change(lease.job_id, undefined)
  }

  private change(jobId: string, next: ActiveLease | undefined): void {
    const before = this.byJob.get(jobId)
    this.write(jobId, next)
    this.ctx.onRollback(() => this.write(jobId, before))
  }

  private write(jobId: string, next: ActiveLease | undefined): void {
    const before = this.byJob.get(jobId)
    if (before) {
      this.unitsHeld -= before.lease.cost_units
      this.jobOfLease.delete(before.lease.id)
    }
    if (next) {
      this.byJob.set(jobId, next)
      this.jobOfLease.set(next.lease.id, jobId)
      this.unitsHeld += next.lease.cost_units
    } else {
      this.byJob.delete(jobId)
    }
  }
}
