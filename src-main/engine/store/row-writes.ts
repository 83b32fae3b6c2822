import type { JobRow, LeaseRow } from '../../db/schema'

/**
 * The write journal: the row layer (rows.ts) reports each write of a job or a lease row here,
 * once, as it makes it; every cache of hot state that follows those rows subscribes (the ACTIVE
 * leases, the job tally, the rows of QUEUED jobs). No verb and no insert path names a cache: a
 * write the row layer makes reaches every cache, and a new cache needs only to subscribe.
 *
 * Undo is the journal's too: a subscriber returns how to put itself back, and the journal
 * registers that with the transaction in progress, so a rollback (of the transaction, or of the
 * savepoint the write was in) undoes every cache with the rows. The model test checks each
 * cache against SQLite after every command (test/unit/model.test.ts).
 */

/** How a subscriber puts itself back should the write be rolled back; nothing when it did not change. */
export type Undo = (() => void) | undefined

/** An ACTIVE lease and its job, as both were last written. */
export interface ActiveLease {
  lease: LeaseRow
  job: JobRow
}

/** The ACTIVE leases as kept in memory (memory/active-leases.ts), as the row layer looks them up. */
export interface ActiveRows {
  /** The job's ACTIVE lease and the job, or undefined when it holds none. */
  ofJob(jobId: string): ActiveLease | undefined
  /** The ACTIVE lease with this id and its job, or undefined when no ACTIVE lease has it. */
  byId(leaseId: string): ActiveLease | undefined
}

export interface RowWriteSubscriber {
  /**
   * A job row was inserted (`before` undefined) or updated from `before` (the copy the writer
   * started from) to `after`; `written` names the columns an update wrote, besides `updated_at`.
   */
  jobWritten?(before: JobRow | undefined, after: JobRow, written: readonly (keyof JobRow)[]): Undo
  /** A lease was granted, running `job`. */
  leaseGranted?(lease: LeaseRow, job: JobRow): Undo
  /** An ACTIVE lease was extended (a heartbeat). */
  leaseExtended?(lease: LeaseRow): Undo
  /** A lease ended: released or expired. */
  leaseEnded?(lease: LeaseRow): Undo
  /**
   * The transaction in progress, or a savepoint of it, rolled back (before the undos run): for a
   * subscriber that keeps no undo of its own (a row it holds may be one of the writes undone, so
   * it forgets them all).
   */
  rolledBack?(): void
}

/** Every column of a row written whole (an insert). */
const WHOLE_ROW: readonly (keyof JobRow)[] = []

export class RowWrites {
  private readonly subscribers: RowWriteSubscriber[] = []

  /** `onRollback` registers an undo with the transaction in progress (engine/store/transaction.ts). */
  constructor(private readonly onRollback: (undo: () => void) => void) {}

  subscribe(subscriber: RowWriteSubscriber): void {
    this.subscribers.push(subscriber)
  }

  jobInserted(job: JobRow): void {
    for (const s of this.subscribers) this.keep(s.jobWritten?.(undefined, job, WHOLE_ROW))
  }

  jobWritten(before: JobRow, after: JobRow, written: readonly (keyof JobRow)[]): void {
    for (const s of this.subscribers) this.keep(s.jobWritten?.(before, after, written))
  }

  leaseGranted(lease: LeaseRow, job: JobRow): void {
    for (const s of this.subscribers) this.keep(s.leaseGranted?.(lease, job))
  }

  leaseExtended(lease: LeaseRow): void {
    for (const s of this.subscribers) this.keep(s.leaseExtended?.(lease))
  }

  leaseEnded(lease: LeaseRow): void {
    for (const s of this.subscribers) this.keep(s.leaseEnded?.(lease))
  }

  /** The transaction in progress, or a savepoint of it, rolled back (engine/store/transaction.ts). */
  rolledBack(): void {
    for (const s of this.subscribers) s.rolledBack?.()
  }

  private keep(undo: Undo): void {
    if (undo) this.onRollback(undo)
  }
}
