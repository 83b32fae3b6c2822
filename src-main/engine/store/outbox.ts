import type { JobRow, LeaseRow } from '../../db/schema'
import type { StoreContext } from './context'
import type { RowWriteSubscriber, Undo } from './row-writes'
import { type JobState, TERMINAL_STATES } from '../rules/states'
import { findJob } from './rows'
import { streamMessageName } from './streams'

/**
 * The outbox of the Redis transport (src-main/redis/relay.ts carries it to Redis). Subscribed to
 * the write journal only while Redis carries the queues, it sees every job write, so no verb
 * names it.
 *
 * The table `redis_outbox` holds exactly the messages Redis should hold: a write that gives a job
 * a new stream message (a submit, a requeue, an operator's retry or run-now, a schedule's firing)
 * inserts the message's row in that same transaction, and a write that ends the attempt the
 * message delivered (a final state, or a newer message) deletes it. So a crash between COMMIT
 * and Redis loses nothing: the relay's reconciliation compares each stream with this table and
 * publishes what is missing, deletes what is left over.
 *
 * What changed at each commit (messages to XADD, messages to XACK and XDEL, grants to XCLAIM) is
 * also kept in memory, taken by the relay right after the commit ({@link Outbox.takeCommitted}):
 * the relay works from that, not by writing the table again, so a job costs the table one insert
 * and one delete, both inside transactions the job writes anyway.
 *
 * How many rows each queue has is kept in memory too ({@link Outbox.countsByQueue}, what the
 * relay counts each stream against every 5 s: redis/relay.ts `countStreams`): counted once from the table when the
 * outbox is made ({@link Outbox.load}, at the relay's start), then changed by the same code that
 * inserts and deletes a row, in its transaction, with an undo should that transaction or its
 * savepoint roll back, as the caches of memory/ follow the job rows. A GROUP BY over the table
 * instead read every unfinished job's row at each count: with a million messages, 0.4 to 1.8 s
 * of the host's main thread (docs/redis.md).
 *
 * A host without Redis writes no row: its jobs' messages are in no outbox, and rows of jobs it
 * finished or requeued stay. So a host with Redis first fills the table
 * ({@link Outbox.fillStep}, in short steps): the rows of messages that are no job's current one
 * go, and every unfinished job gets the row of its current message, as if Redis had carried the
 * queues all along.
 */

/** A message Redis should hold, as the relay reads it. */
export interface OutboxMessage {
  /** The job's stream message id (its enqueue identity). */
  enqueue_id: number
  job_id: string
  queue: string
  /** When it was committed (epoch ms). */
  created_at: number
}

/** A message whose attempt ended: to be acknowledged and deleted in Redis. */
export interface EndedMessage {
  enqueue_id: number
  queue: string
}

/** A grant whose message is to be XCLAIMed to the worker's consumer. */
export interface OutboxGrant {
  queue: string
  /** The message's id in Redis (its name: see {@link streamMessageName}). */
  redis_id: string
  worker_id: string
}

/** What the commits since the last take changed, in commit order within each list. */
export interface OutboxChanges {
  /** New messages, to XADD. */
  messages: OutboxMessage[]
  /** Messages whose attempt ended, to XACK and XDEL (after the new messages are XADDed). */
  ended: EndedMessage[]
  grants: OutboxGrant[]
}

/** How many messages the table holds (every message Redis should hold), and the oldest one's commit time (null when none). */
export interface OutboxBacklog {
  waiting: number
  oldest_at: number | null
}

/**
 * Where a fill of the table has got to: first its own rows, by `enqueue_id` (those of messages
 * that are no unfinished job's current one are deleted), then the jobs, by `seq` (each unfinished
 * job's current message gets its row, unless it has one).
 */
export type OutboxFillCursor = { phase: 'rows'; after: number } | { phase: 'jobs'; after: number }

/** One fill step's work, and where the next one starts (null: the table is full). */
export interface OutboxFillStep {
  /** Rows inserted (messages of jobs queued while the table was not kept). */
  added: number
  /** Rows deleted (messages of jobs that finished or were queued again meanwhile). */
  removed: number
  next: OutboxFillCursor | null
}

const COLUMNS = ['enqueue_id', 'job_id', 'queue', 'created_at'] as const

/** Outbox rows one fill step looks at, each with its job read by key. */
const FILL_ROWS = 500
/** Jobs' `seq` one fill step walks: the jobs table is walked by its key, finished jobs and all, as the tally's start does. */
const FILL_SEQ_WINDOW = 10_000
/** The unfinished jobs, in a clause (the states written out: TERMINAL_STATES). */
const UNFINISHED_CLAUSE = [...TERMINAL_STATES].map((state) => `state <> '${state}'`).join(' AND ')

const isFinal = (state: string | undefined): boolean => state !== undefined && TERMINAL_STATES.has(state as JobState)

/** Undoes a push by cutting the list back: the transaction runs its undos newest first. */
const push = <T>(list: T[], item: T): (() => void) => {
  const at = list.push(item) - 1
  return () => {
    list.length = at
  }
}

export class Outbox implements RowWriteSubscriber {
  private changes: OutboxChanges = { messages: [], ended: [], grants: [] }
  /** The table's rows per queue, as committed plus the transaction in progress. A queue leaves the map when it has none. */
  private readonly rowsPerQueue = new Map<string, number>()

  constructor(private readonly ctx: StoreContext) {}

  /**
   * Counts the table's rows per queue (once, as the outbox is made: engine/index.ts `outbox`).
   * From then on every insert and delete of a row goes through this class, which counts it.
   */
  load(): void {
    this.rowsPerQueue.clear()
    for (const row of this.ctx.all<{ queue: string; n: number }>('SELECT queue, COUNT(*) AS n FROM redis_outbox GROUP BY queue')) {
      this.rowsPerQueue.set(row.queue, row.n)
    }
  }

  jobWritten(before: JobRow | undefined, after: JobRow): Undo {
    const message = after.stream_message_id
    if (message === null) return undefined
    const previous = before?.stream_message_id ?? null
    if (message !== previous) {
      const row: OutboxMessage = { enqueue_id: message, job_id: after.id, queue: after.queue, created_at: this.ctx.clock.now() }
      this.ctx.insert('redis_outbox', COLUMNS, row)
      const messages = this.changes.messages
      const at = messages.push(row) - 1
      this.bump(row.queue, 1)
      const undoPublish = () => {
        messages.length = at
        this.bump(row.queue, -1)
      }
      // A finished job's message was ended when it finished: a retry's new message ends nothing more.
      if (previous === null || isFinal(before?.state)) return undoPublish
      const undoEnd = this.end(previous, before!.queue)
      return () => {
        undoEnd()
        undoPublish()
      }
    }
    if (isFinal(after.state) && !isFinal(before?.state)) return this.end(message, after.queue)
    return undefined
  }

  leaseGranted(lease: LeaseRow, job: JobRow): Undo {
    if (job.stream_message_id === null) return undefined
    return push(this.changes.grants, { queue: job.queue, redis_id: streamMessageName(job.stream_message_id), worker_id: lease.worker_id })
  }

  /**
   * The message's row goes with the write that ends it (SQLite undoes it with the transaction);
   * Redis is told after the commit. The row may be missing (its job was queued while the host
   * ran without Redis, and the fill has not reached it): then nothing is counted off.
   */
  private end(enqueueId: number, queue: string): () => void {
    const ended = this.changes.ended
    const at = ended.push({ enqueue_id: enqueueId, queue }) - 1
    const deleted = this.deleteRow(enqueueId, queue)
    return () => {
      ended.length = at
      if (deleted) this.bump(queue, 1)
    }
  }

  /**
   * Deletes a message's row and counts it off `queue`, the queue of its job (a job's queue never
   * changes); returns whether there was a row.
   */
  private deleteRow(enqueueId: number, queue: string): boolean {
    const deleted = this.ctx.stmt('DELETE FROM redis_outbox WHERE enqueue_id = ?').run(enqueueId).changes === 1
    if (deleted) this.bump(queue, -1)
    return deleted
  }

  /** `by` more rows of `queue` (fewer when negative), in the transaction in progress: its undo bumps back. */
  private bump(queue: string, by: number): void {
    const rows = (this.rowsPerQueue.get(queue) ?? 0) + by
    if (rows === 0) this.rowsPerQueue.delete(queue)
    else this.rowsPerQueue.set(queue, rows)
  }

  /**
   * What the commits since the last call changed. Called when no transaction is open (at a
   * commit): a change of a transaction still open is not taken, since it may yet roll back.
   */
  takeCommitted(): OutboxChanges {
    const taken = this.changes
    this.changes = { messages: [], ended: [], grants: [] }
    return taken
  }

  /**
   * One step of the table's fill (see the module's comment), from `cursor` (`{phase: 'rows',
   * after: 0}` for the first): run it inside an operation, and let other work in between steps.
   * A step is atomic, its counts undone with its rows should it fail. A job written meanwhile
   * keeps its row through {@link jobWritten}, as ever; a row the fill deletes was never sent by
   * the relay, whose reconciliation follows the fill and deletes the entry Redis may hold.
   */
  fillStep(cursor: OutboxFillCursor): OutboxFillStep {
    return this.ctx.transact(() => (cursor.phase === 'rows' ? this.fillRows(cursor.after) : this.fillJobs(cursor.after)))
  }

  /** The fill's first phase: the rows from `after` on whose message is no unfinished job's current one are deleted. */
  private fillRows(after: number): OutboxFillStep {
    const rows = this.ctx.all<Pick<OutboxMessage, 'enqueue_id' | 'job_id' | 'queue'>>(
      'SELECT enqueue_id, job_id, queue FROM redis_outbox WHERE enqueue_id > ? ORDER BY enqueue_id LIMIT ?',
      after,
      FILL_ROWS,
    )
    let removed = 0
    for (const row of rows) {
      const job = findJob(this.ctx, row.job_id)
      if (job && job.stream_message_id === row.enqueue_id && !isFinal(job.state)) continue
      if (this.deleteRow(row.enqueue_id, row.queue)) this.ctx.onRollback(() => this.bump(row.queue, 1))
      removed += 1
    }
    const next: OutboxFillCursor = rows.length === FILL_ROWS ? { phase: 'rows', after: rows[rows.length - 1]!.enqueue_id } : { phase: 'jobs', after: 0 }
    return { added: 0, removed, next }
  }

  /** The fill's second phase: each unfinished job of the window of seqs from `after` gets its current message's row, unless it has one. */
  private fillJobs(after: number): OutboxFillStep {
    const until = after + FILL_SEQ_WINDOW
    // RETURNING answers the rows inserted only, not those ignored: each is counted to its queue.
    const inserted = this.ctx
      .stmt<{ queue: string }>(
        `INSERT OR IGNORE INTO redis_outbox (${COLUMNS.join(', ')}) SELECT stream_message_id, id, queue, ? FROM jobs WHERE seq > ? AND seq <= ? AND stream_message_id IS NOT NULL AND ${UNFINISHED_CLAUSE} RETURNING queue`,
      )
      .all(this.ctx.clock.now(), after, until)
    const perQueue = new Map<string, number>()
    for (const { queue } of inserted) perQueue.set(queue, (perQueue.get(queue) ?? 0) + 1)
    for (const [queue, n] of perQueue) {
      this.bump(queue, n)
      this.ctx.onRollback(() => this.bump(queue, -n))
    }
    const last = this.ctx.one<{ seq: number | null }>('SELECT MAX(seq) AS seq FROM jobs')!.seq ?? 0
    return { added: inserted.length, removed: 0, next: until < last ? { phase: 'jobs', after: until } : null }
  }

  /** Every message Redis should hold now, in enqueue order. */
  live(): OutboxMessage[] {
    return this.ctx.all<OutboxMessage>('SELECT enqueue_id, job_id, queue, created_at FROM redis_outbox ORDER BY enqueue_id')
  }

  /**
   * How many messages each queue's stream should hold now, as committed, by queue (those with
   * none are not listed): read from memory, no row read. From outside every operation an open
   * group commits first, as a read of the table would.
   */
  countsByQueue(): Map<string, number> {
    this.ctx.commitBeforeRead()
    return new Map(this.rowsPerQueue)
  }

  /** Every message the table holds, and when the oldest was written: the count from memory, the oldest by the table's first row. */
  backlog(): OutboxBacklog {
    let waiting = 0
    for (const n of this.countsByQueue().values()) waiting += n
    const oldest = this.ctx.one<{ created_at: number }>('SELECT created_at FROM redis_outbox ORDER BY enqueue_id LIMIT 1')
    return { waiting, oldest_at: oldest?.created_at ?? null }
  }
}
