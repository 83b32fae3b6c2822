import type { JobRow } from '../db/schema'
import type { EngineContext } from './context'

/** What the tally reads of a job row. */
type Tallied = Pick<JobRow, 'state' | 'queue' | 'priority'>

/** Priorities are ranks 0 (LOW) to 3 (URGENT): one counter each. */
const RANKS = 4

/**
 * How many QUEUED jobs each queue holds, per priority, kept in memory beside the database. The
 * pick path asks it before it reads a range of the pick index (pick.ts): a claim over an empty
 * queue or priority asks nothing of SQLite, nor does finding the queues that hold work, nor the
 * count of QUEUED jobs in the snapshot and the gauges. On a host that is mostly idle, a pickup's
 * claims used to read six to ten such ranges (every priority, twice over), each a statement on
 * the path to the worker's answer.
 *
 * SQLite stays the truth: the tally is read from the pick index at start, and every write of a
 * job goes through it in the same transaction (the job's insert, jobs.ts, and `updateJob`,
 * rows.ts, are the only writers of a job's state, queue or priority; retention deletes finished
 * jobs only), with an undo should that transaction or its savepoint roll back.
 *
 * A QUEUED job that is not eligible yet (delayed, or in its backoff) counts too: a range with a
 * count may still hold nothing to take now, and is read; a range without one is never read.
 */
export class QueuedTally {
  /** Per queue, the QUEUED jobs of each priority rank. A queue leaves the map when it has none. */
  private readonly perQueue = new Map<string, number[]>()
  private queued = 0

  constructor(private readonly ctx: EngineContext) {}

  /** Counts the QUEUED jobs (the engine does so once, at start): one pass over the pick index. */
  load(): void {
    this.perQueue.clear()
    this.queued = 0
    const rows = this.ctx.all<{ queue: string; priority: number; n: number }>(
      "SELECT queue, priority, COUNT(*) AS n FROM jobs WHERE state = 'QUEUED' GROUP BY queue, priority",
    )
    for (const row of rows) this.add(row.queue, row.priority, row.n)
  }

  /** The QUEUED jobs of this queue and priority rank, as committed plus the transaction in progress. */
  count(queue: string, rank: number): number {
    return this.perQueue.get(queue)?.[rank] ?? 0
  }

  /** The queues that hold a QUEUED job, in name order. */
  queues(): string[] {
    return [...this.perQueue.keys()].sort()
  }

  /** Every QUEUED job, as committed: from outside every operation, an open group commits first. */
  committedTotal(): number {
    this.ctx.commitBeforeRead()
    return this.queued
  }

  /**
   * A job row was written inside the transaction in progress: inserted (`before` undefined) or
   * updated from `before` (the row as it was) to `after`.
   */
  written(before: Tallied | undefined, after: Tallied): void {
    const was = before?.state === 'QUEUED'
    const is = after.state === 'QUEUED'
    if (!was && !is) return
    if (was && is && before.queue === after.queue && before.priority === after.priority) return
    const apply = (sign: 1 | -1) => {
      if (was) this.add(before.queue, before.priority, -sign)
      if (is) this.add(after.queue, after.priority, sign)
    }
    apply(1)
    this.ctx.onRollback(() => apply(-1))
  }

  private add(queue: string, rank: number, n: number): void {
    let counts = this.perQueue.get(queue)
    if (!counts) this.perQueue.set(queue, (counts = new Array<number>(RANKS).fill(0)))
    counts[rank] = counts[rank]! + n
    this.queued += n
    if (counts.every((count) => count === 0)) this.perQueue.delete(queue)
  }
}
