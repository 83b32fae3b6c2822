import { type JobRow, STATE_SEQ_CLAUSE } from '../../db/schema'
import type { FloorKeeper } from '../store/counters'
import type { StoreContext } from '../store/context'
import type { RowWriteSubscriber, Undo } from '../store/row-writes'
import { readSetting, writeSetting } from '../store/settings'
import type { EngineContext } from './context'
import { QueuedRange } from './queued-range'
import { WAITING_STATES, type JobState } from '../rules/states'

/** What the tally reads of a job row. */
type Tallied = Pick<JobRow, 'state' | 'queue' | 'priority' | 'cost_units' | 'eligible_at' | 'seq'>

/** Priorities are ranks 0 (LOW) to 3 (URGENT): one range each. */
const RANKS = 4

/**
 * The settings key of a job seq at or below every QUEUED job's: where the engine's start reads
 * the QUEUED jobs from (no index holds them), so that a start reads the jobs of the last few
 * thousand submits, not the whole table.
 */
export const QUEUED_FROM_KEY = 'queued_jobs_from_seq'

const isWaiting = (job: Tallied | undefined): job is Tallied => job !== undefined && WAITING_STATES.has(job.state as JobState)

/**
 * The jobs kept in memory beside the database, so that neither the pick path nor the snapshot
 * counts or walks rows:
 * - the QUEUED jobs of each queue, per priority, in pick order (queued-range.ts: their keys, not
 *   their rows). A pick walks them and reads only the rows it may take (pick.ts); a claim over an
 *   empty queue or priority reads nothing, nor does finding the queues that hold work, nor the
 *   count of QUEUED jobs in the snapshot and the gauges.
 * - the waiting jobs (WAITING_STATES) per cost: the snapshot's `over_capacity` (those costing more
 *   than the total) used to read every waiting job, tens of milliseconds with a backlog.
 *
 * SQLite stays the truth: the jobs are read from the table at start, and every write of a job
 * goes through the tally in the same transaction (the job's insert, jobs.ts, and `updateJob`,
 * rows.ts, are the only writers of a job's state, queue, priority or cost; retention deletes
 * finished jobs only), with an undo should that transaction or its savepoint roll back.
 *
 * A QUEUED job that is not eligible yet (delayed, or in its backoff) is in its range too, at
 * the time it becomes eligible.
 *
 * The start reads the QUEUED jobs from a stored floor ({@link QUEUED_FROM_KEY}) up. The floor
 * is lowered in the transaction of any write that makes a job below it QUEUED (a retry or a
 * requeue of an old job: the write reaches the tally through the write journal), and raised
 * with each block of job seqs reserved (counters.ts) to the oldest QUEUED job, or the seq being
 * taken when none is: both writes roll back with their transaction, so the stored floor is at or
 * below every committed QUEUED job's seq.
 */
export class JobTally implements RowWriteSubscriber, FloorKeeper {
  /** Per queue, the QUEUED jobs of each priority rank. A queue leaves the map when it has none. */
  private readonly queuedPerQueue = new Map<string, QueuedRange[]>()
  private queued = 0
  /** Per cost in units, the waiting jobs. A cost leaves the map when none waits. */
  private readonly waitingPerCost = new Map<number, number>()
  /** The floor as stored in the transaction in progress (0 when none is: the start reads every job). */
  private floor = 0

  constructor(private readonly ctx: StoreContext) {}

  /**
   * Reads the QUEUED and the waiting jobs (the engine does so once, at start). No index holds
   * the QUEUED ones (an entry cost every job an index insert at submit and a delete at grant):
   * they are found by a pass over the jobs from the stored floor up, a range of the table's key
   * (a pass over the whole table took ~0.4 s with a million finished jobs, more with a cold
   * disk). The other waiting states are each read on jobs_state_seq.
   */
  load(): void {
    this.queuedPerQueue.clear()
    this.queued = 0
    this.waitingPerCost.clear()
    this.floor = Number(readSetting(this.ctx, QUEUED_FROM_KEY) ?? 0)
    const queued = this.ctx.db
      .prepare(
        "SELECT queue, priority, eligible_at, seq, cost_units FROM jobs WHERE seq >= ? AND state = 'QUEUED' ORDER BY queue, priority, eligible_at, seq",
      )
      .raw(true)
      .iterate(this.floor) as IterableIterator<[string, number, number, number, number]>
    for (const [queue, priority, eligibleAt, seq, cost] of queued) {
      this.rangeOf(queue, priority).add(eligibleAt, seq)
      this.queued += 1
      this.addWaiting(cost, 1)
    }
    for (const state of WAITING_STATES) {
      if (state === 'QUEUED') continue
      const rows = this.ctx.all<{ cost_units: number; n: number }>(
        `SELECT cost_units, COUNT(*) AS n FROM jobs WHERE state = ? AND ${STATE_SEQ_CLAUSE} GROUP BY cost_units`,
        state,
      )
      for (const row of rows) this.addWaiting(row.cost_units, row.n)
    }
  }

  /**
   * Stores the floor the next start reads from: the oldest QUEUED job's seq, or `next` (the seq
   * about to be taken) when none is QUEUED. Called inside the transaction that reserves a block
   * of job seqs (counters.ts); rolled back with it.
   */
  storeFloor(next: number): void {
    let floor = next
    for (const ranges of this.queuedPerQueue.values()) for (const range of ranges) floor = range.minSeq(floor)
    this.writeFloor(floor)
  }

  /** The floor stored now (see {@link storeFloor}): at or below every QUEUED job's seq. */
  get storedFloor(): number {
    return this.floor
  }

  private writeFloor(floor: number): void {
    const before = this.floor
    if (floor === before) return
    writeSetting(this.ctx, QUEUED_FROM_KEY, String(floor))
    this.floor = floor
    this.ctx.onRollback(() => (this.floor = before))
  }

  /** The QUEUED jobs of this queue and priority rank, as committed plus the transaction in progress. */
  count(queue: string, rank: number): number {
    return this.queuedPerQueue.get(queue)?.[rank]!.size ?? 0
  }

  /** The QUEUED jobs of this queue and priority rank in pick order, or undefined when it has none (see {@link count}). */
  range(queue: string, rank: number): QueuedRange | undefined {
    const range = this.queuedPerQueue.get(queue)?.[rank]
    return range && range.size > 0 ? range : undefined
  }

  /** The queues that hold a QUEUED job, in name order. */
  queues(): string[] {
    return [...this.queuedPerQueue.keys()].sort()
  }

  /** Every QUEUED job, as committed: from outside every operation, an open group commits first. */
  committedQueued(): number {
    this.ctx.commitBeforeRead()
    return this.queued
  }

  /** The QUEUED jobs of each queue that holds one, as committed (see {@link committedQueued}). */
  committedQueuedByQueue(): { queue: string; n: number }[] {
    this.ctx.commitBeforeRead()
    return [...this.queuedPerQueue].map(([queue, ranges]) => ({ queue, n: ranges.reduce((sum, range) => sum + range.size, 0) }))
  }

  /** The seq of every QUEUED job below `below`, newest first, as committed (see {@link committedQueued}). */
  committedQueuedBelow(below: number): number[] {
    this.ctx.commitBeforeRead()
    const seqs: number[] = []
    for (const ranges of this.queuedPerQueue.values()) for (const range of ranges) range.seqsBelow(below, seqs)
    return seqs.sort((a, b) => b - a)
  }

  /** The waiting jobs that cost more than `units`, as committed (see {@link committedQueued}). */
  committedWaitingCosting(units: number): number {
    this.ctx.commitBeforeRead()
    return this.waitingCosting(units)
  }

  /** The waiting jobs that cost more than `units` and at most `upTo` units, as committed plus the transaction in progress. */
  waitingCosting(units: number, upTo = Infinity): number {
    let n = 0
    for (const [cost, count] of this.waitingPerCost) if (cost > units && cost <= upTo) n += count
    return n
  }

  /**
   * A job row was written inside the transaction in progress: inserted (`before` undefined) or
   * updated from `before` (the row as it was) to `after`.
   */
  jobWritten(before: Tallied | undefined, after: Tallied): Undo {
    const wasQueued = before?.state === 'QUEUED'
    const isQueued = after.state === 'QUEUED'
    // An old job made QUEUED again (a retry, a requeue) lies below the floor: lower it in this
    // write's transaction, or the next start would not read the job.
    if (isQueued && after.seq < this.floor) this.writeFloor(after.seq)
    const queuedMoves =
      (wasQueued || isQueued) &&
      !(wasQueued && isQueued && before.queue === after.queue && before.priority === after.priority && before.eligible_at === after.eligible_at)
    const wasWaiting = isWaiting(before)
    const isWaitingNow = isWaiting(after)
    const waitingMoves = (wasWaiting || isWaitingNow) && !(wasWaiting && isWaitingNow && before.cost_units === after.cost_units)
    if (!queuedMoves && !waitingMoves) return undefined
    const apply = (sign: 1 | -1) => {
      if (queuedMoves && wasQueued) this.moveQueued(before, -sign as 1 | -1)
      if (queuedMoves && isQueued) this.moveQueued(after, sign)
      if (waitingMoves && wasWaiting) this.addWaiting(before.cost_units, -sign)
      if (waitingMoves && isWaitingNow) this.addWaiting(after.cost_units, sign)
    }
    apply(1)
    return () => apply(-1)
  }

  /** The job (as `job` has it) comes into its range (`sign` 1) or leaves it (-1). */
  private moveQueued(job: Tallied, sign: 1 | -1): void {
    const range = this.rangeOf(job.queue, job.priority)
    if (sign === 1) range.add(job.eligible_at, job.seq)
    else range.remove(job.eligible_at, job.seq)
    this.queued += sign
    if (sign === -1 && this.queuedPerQueue.get(job.queue)!.every((r) => r.size === 0)) this.queuedPerQueue.delete(job.queue)
  }

  private rangeOf(queue: string, rank: number): QueuedRange {
    let ranges = this.queuedPerQueue.get(queue)
    if (!ranges) this.queuedPerQueue.set(queue, (ranges = Array.from({ length: RANKS }, () => new QueuedRange())))
    return ranges[rank]!
  }

  private addWaiting(cost: number, n: number): void {
    const count = (this.waitingPerCost.get(cost) ?? 0) + n
    if (count === 0) this.waitingPerCost.delete(cost)
    else this.waitingPerCost.set(cost, count)
  }
}

// The questions the verbs and the pick ask of the tally: they name no cache.

/** The queues that have QUEUED jobs, as the transaction in progress sees them. */
export const queuesWithQueuedJobs = (ctx: EngineContext): string[] => ctx.jobTally.queues()

/** The QUEUED jobs of each queue that holds one, as committed: an open group commits first. */
export const committedQueuedByQueue = (ctx: EngineContext): { queue: string; n: number }[] => ctx.jobTally.committedQueuedByQueue()

/** The waiting jobs that cost more than `units` and at most `upTo`, as the transaction in progress sees them. */
export const waitingJobsCosting = (ctx: EngineContext, units: number, upTo: number): number => ctx.jobTally.waitingCosting(units, upTo)
