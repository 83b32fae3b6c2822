import type { JobRow, LeaseRow } from '../../db/schema'
import type { FloorKeeper } from '../store/counters'
import type { StoreContext } from '../store/context'
import type { ActiveLease, ActiveRows, RowWriteSubscriber, Undo } from '../store/row-writes'
import { copyJob, findJob } from '../store/rows'
import { readSetting, writeSetting } from '../store/settings'
import type { EngineContext } from './context'

export type { ActiveLease } from '../store/row-writes'

/**
 * The settings key of a fence at or below every ACTIVE lease's: where the engine's start reads
 * the ACTIVE leases from (the leases table has no index on its state).
 */
export const ACTIVE_FROM_KEY = 'active_leases_from_fence'

/**
 * The ACTIVE leases and their jobs, kept in memory beside the database, so that the hot verbs
 * (a heartbeat, a completion, the capacity check of every grant) read neither the job nor the
 * lease back, nor sum the units in use, and so that no index has to hold the ACTIVE leases: the
 * reaper, the counts of LEASED and RUNNING jobs, their listings and a worker's leases read this
 * map. SQLite stays the truth: the map is read from it at start, and every write of a lease or
 * of a leased job goes through this map in the same transaction (the row layer, rows.ts, is the
 * only writer of both), with an undo should that transaction or its savepoint roll back. There
 * is at most one ACTIVE lease per job, and no more ACTIVE leases than capacity units, so the map
 * stays small.
 *
 * Reads from outside every operation go through {@link committed} (or the counts below it), which
 * commits an open group first: as with SQLite, nothing outside a group sees its uncommitted writes.
 */
export class ActiveLeases implements RowWriteSubscriber, ActiveRows, FloorKeeper {
  private readonly byJob = new Map<string, ActiveLease>()
  private readonly jobOfLease = new Map<string, string>()
  /** ACTIVE leases per worker. */
  private readonly perWorker = new Map<string, number>()
  private unitsHeld = 0

  constructor(private readonly ctx: StoreContext) {}

  /**
   * Reads the ACTIVE leases and their jobs from the database (the engine does so once, at start).
   * Every ACTIVE lease has a fence at or above the one {@link storeFloor} last stored (fences
   * only grow), so the read is a range of the leases' key from there, not the whole table.
   */
  load(): void {
    this.byJob.clear()
    this.jobOfLease.clear()
    this.perWorker.clear()
    this.unitsHeld = 0
    const from = Number(readSetting(this.ctx, ACTIVE_FROM_KEY) ?? 0)
    const leases = this.ctx.all<LeaseRow>("SELECT * FROM leases WHERE fence >= ? AND state = 'ACTIVE'", from)
    for (const lease of leases) {
      const job = findJob(this.ctx, lease.job_id)
      if (job) this.write(lease.job_id, { lease, job })
    }
  }

  /**
   * Stores a fence at or below the fence of every lease ACTIVE now or granted later, with each
   * block of fences the lease sequence reserves (counters.ts): the smallest ACTIVE fence, or
   * `next` (the fence about to be granted) when none is ACTIVE. Written in the transaction that
   * reserves, it is rolled back with it.
   */
  storeFloor(next: number): void {
    let floor = next
    for (const { lease } of this.byJob.values()) floor = Math.min(floor, lease.fence)
    writeSetting(this.ctx, ACTIVE_FROM_KEY, String(floor))
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

  /** Whether the worker holds an ACTIVE lease (it may then not take a `unique` job). */
  holds(workerId: string): boolean {
    return (this.perWorker.get(workerId) ?? 0) > 0
  }

  /** Every ACTIVE lease with its job (in no particular order), as the transaction in progress sees them. */
  all(): IterableIterator<ActiveLease> {
    return this.byJob.values()
  }

  /** Every ACTIVE lease with its job as committed: an open group commits first. For reads outside the verbs. */
  committed(): ActiveLease[] {
    this.ctx.commitBeforeRead()
    return [...this.byJob.values()]
  }

  /** A lease was granted (inside its transaction). */
  leaseGranted(lease: LeaseRow, job: JobRow): Undo {
    return this.change(job.id, { lease, job })
  }

  /**
   * A job was written (`before` → `after`, the `written` columns and `updated_at`): if it holds
   * an ACTIVE lease, its entry becomes `after`, or takes the columns written if the writer
   * started from another copy of it.
   */
  jobWritten(before: JobRow | undefined, after: JobRow, written: readonly (keyof JobRow)[]): Undo {
    if (!before) return undefined // a new job holds no lease yet: its grant says so (leaseGranted)
    const entry = this.byJob.get(before.id)
    if (!entry) return undefined
    let job = after
    if (entry.job !== before) {
      job = copyJob(entry.job)
      job.updated_at = after.updated_at
      for (const column of written) (job as Record<keyof JobRow, unknown>)[column] = after[column]
    }
    return this.change(before.id, { lease: entry.lease, job })
  }

  /** An ACTIVE lease was extended (a heartbeat). */
  leaseExtended(lease: LeaseRow): Undo {
    const entry = this.byJob.get(lease.job_id)
    return entry && entry.lease.fence === lease.fence ? this.change(lease.job_id, { lease, job: entry.job }) : undefined
  }

  /** A lease ended (released or expired): it leaves the map. */
  leaseEnded(lease: LeaseRow): Undo {
    const entry = this.byJob.get(lease.job_id)
    return entry && entry.lease.fence === lease.fence ? this.change(lease.job_id, undefined) : undefined
  }

  /** Writes the entry of `jobId`; returns how to put back the one it replaced. */
  private change(jobId: string, next: ActiveLease | undefined): Undo {
    const before = this.byJob.get(jobId)
    this.write(jobId, next)
    return () => this.write(jobId, before)
  }

  private write(jobId: string, next: ActiveLease | undefined): void {
    const before = this.byJob.get(jobId)
    if (before) {
      this.unitsHeld -= before.lease.cost_units
      this.jobOfLease.delete(before.lease.id)
      const held = this.perWorker.get(before.lease.worker_id)! - 1
      if (held === 0) this.perWorker.delete(before.lease.worker_id)
      else this.perWorker.set(before.lease.worker_id, held)
    }
    if (next) {
      this.byJob.set(jobId, next)
      this.jobOfLease.set(next.lease.id, jobId)
      this.unitsHeld += next.lease.cost_units
      this.perWorker.set(next.lease.worker_id, (this.perWorker.get(next.lease.worker_id) ?? 0) + 1)
    } else {
      this.byJob.delete(jobId)
    }
  }
}

// The questions the verbs ask of the ACTIVE leases: a verb names no cache.

/** The job's ACTIVE lease and the job as last written, or undefined when it holds none. */
export const activeLeaseOf = (ctx: EngineContext, jobId: string): ActiveLease | undefined => ctx.activeLeases.ofJob(jobId)

/** Every ACTIVE lease with its job (in no particular order), as the transaction in progress sees them. */
export const activeLeasesNow = (ctx: EngineContext): IterableIterator<ActiveLease> => ctx.activeLeases.all()

/** Every ACTIVE lease with its job as committed: an open group commits first. For reads outside the verbs. */
export const committedActiveLeases = (ctx: EngineContext): ActiveLease[] => ctx.activeLeases.committed()
