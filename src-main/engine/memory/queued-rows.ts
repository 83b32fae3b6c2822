import type { JobRow } from '../../db/schema'
import type { RowWriteSubscriber } from '../store/row-writes'

/**
 * The most memory the rows of QUEUED jobs may hold, as estimated by {@link rowBytes}: about
 * 24,000 jobs with small payloads (such a row takes ~600 bytes of heap, ~700 as counted). Past
 * it, a job's row stays in SQLite only and a pick reads it. A memory-for-CPU trade, measured with
 * a 20,000-job backlog drained by the pool (docs/performance.md): reading the
 * rows back cost the drain 2–16 % of its jobs/s with 4 MiB (~6,000 rows), and holding them all
 * cost `host RSS, 1,000,000 finished jobs` 159–172 MB against 155–162.
 */
export const QUEUED_ROWS_BUDGET_BYTES = 16 * 1024 * 1024

/**
 * What a row costs in memory, roughly: the object with its 37 fields, and its strings at two
 * bytes a character (the worst V8 stores).
 */
function rowBytes(row: JobRow): number {
  return 600 + 2 * (row.id.length + row.job_type.length + row.queue.length + row.payload.length + row.constraints.length + row.tags.length + (row.idempotency_key?.length ?? 0))
}

/**
 * The rows of QUEUED jobs as the engine last wrote them, so that a pick (pick.ts) takes the head
 * jobs from memory instead of reading each row back: reading and building a 37-column row cost a
 * pick ~2.7 µs per job, a tenth of a drain's engine CPU. The job tally (job-tally.ts) says which
 * jobs a pick may take; this only spares the read of their rows.
 *
 * A cache, not a second truth: a job missing here is read from SQLite. What is here is exact,
 * because the row layer (rows.ts) is the only writer of a job's row and tells it of every write
 * ({@link written}); a job that leaves QUEUED leaves the map. Should a transaction or a savepoint
 * roll back, the write journal tells it and it empties the map ({@link rolledBack}): a row
 * written by the writes undone might be here, and rollbacks are rare. Bounded by {@link QUEUED_ROWS_BUDGET_BYTES}: a row that
 * does not fit is not kept, so a backlog keeps the rows a pick takes first (the oldest).
 */
export class QueuedRows implements RowWriteSubscriber {
  private readonly rows = new Map<number, { row: JobRow; bytes: number }>()
  private bytes = 0

  constructor(private readonly budgetBytes = QUEUED_ROWS_BUDGET_BYTES) {}

  /** The QUEUED job with this key as last written, or undefined when its row is not kept. */
  get(seq: number): JobRow | undefined {
    return this.rows.get(seq)?.row
  }

  /** The rows kept now (for tests). */
  get size(): number {
    return this.rows.size
  }

  /**
   * A job's row was written: inserted (`before` undefined) or updated from `before` to `after`.
   * It returns no undo: a rollback empties the map instead (see the class).
   */
  jobWritten(before: JobRow | undefined, after: JobRow): undefined {
    if (before) this.forget(before.seq)
    if (after.state !== 'QUEUED') return
    const bytes = rowBytes(after)
    if (this.bytes + bytes > this.budgetBytes) return
    this.rows.set(after.seq, { row: after, bytes })
    this.bytes += bytes
    return undefined
  }

  /** A transaction or a savepoint rolled back: a row it wrote may be here, so every row goes. */
  rolledBack(): void {
    this.clear()
  }

  /** Drops every row. */
  clear(): void {
    this.rows.clear()
    this.bytes = 0
  }

  private forget(seq: number): void {
    const kept = this.rows.get(seq)
    if (!kept) return
    this.rows.delete(seq)
    this.bytes -= kept.bytes
  }
}
