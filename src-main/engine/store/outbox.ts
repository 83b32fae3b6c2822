import type { JobRow, LeaseRow } from '../../db/schema'
import type { StoreContext } from './context'
import type { RowWriteSubscriber, Undo } from './row-writes'
import { type JobState, TERMINAL_STATES } from '../rules/states'
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

const COLUMNS = ['enqueue_id', 'job_id', 'queue', 'created_at'] as const

const isFinal = (state: string | undefined): boolean => state !== undefined && TERMINAL_STATES.has(state as JobState)

/** Undoes a push by cutting the list back: the transaction runs its undos newest first. */
const push = <T>(list: T[], item: T): Undo => {
  const at = list.push(item) - 1
  return () => {
    list.length = at
  }
}

export class Outbox implements RowWriteSubscriber {
  private changes: OutboxChanges = { messages: [], ended: [], grants: [] }

  constructor(private readonly ctx: StoreContext) {}

  jobWritten(before: JobRow | undefined, after: JobRow): Undo {
    const message = after.stream_message_id
    if (message === null) return undefined
    const previous = before?.stream_message_id ?? null
    if (message !== previous) {
      const row: OutboxMessage = { enqueue_id: message, job_id: after.id, queue: after.queue, created_at: this.ctx.clock.now() }
      this.ctx.insert('redis_outbox', COLUMNS, row)
      const undoPublish = push(this.changes.messages, row)
      // A finished job's message was ended when it finished: a retry's new message ends nothing more.
      if (previous === null || isFinal(before?.state)) return undoPublish
      const undoEnd = this.end(previous, before!.queue)
      return () => {
        undoEnd()
        undoPublish!()
      }
    }
    if (isFinal(after.state) && !isFinal(before?.state)) return this.end(message, after.queue)
    return undefined
  }

  leaseGranted(lease: LeaseRow, job: JobRow): Undo {
    if (job.stream_message_id === null) return undefined
    return push(this.changes.grants, { queue: job.queue, redis_id: streamMessageName(job.stream_message_id), worker_id: lease.worker_id })
  }

  /** The message's row goes with the write that ends it (SQLite undoes it with the transaction); Redis is told after the commit. */
  private end(enqueueId: number, queue: string): () => void {
    this.ctx.run('DELETE FROM redis_outbox WHERE enqueue_id = ?', enqueueId)
    return push(this.changes.ended, { enqueue_id: enqueueId, queue })!
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

  /** Every message Redis should hold now, in enqueue order. */
  live(): OutboxMessage[] {
    return this.ctx.all<OutboxMessage>('SELECT enqueue_id, job_id, queue, created_at FROM redis_outbox ORDER BY enqueue_id')
  }

  backlog(): OutboxBacklog {
    const waiting = this.ctx.one<{ n: number }>('SELECT COUNT(*) AS n FROM redis_outbox')!.n
    const oldest = this.ctx.one<{ created_at: number }>('SELECT created_at FROM redis_outbox ORDER BY enqueue_id LIMIT 1')
    return { waiting, oldest_at: oldest?.created_at ?? null }
  }
}
