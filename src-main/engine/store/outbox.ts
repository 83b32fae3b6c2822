import type { JobRow, LeaseRow } from '../../db/schema'
import type { StoreContext } from './context'
import type { RowWriteSubscriber, Undo } from './row-writes'
import { type JobState, TERMINAL_STATES } from '../rules/states'
import { streamMessageName } from './streams'

/**
 * The outbox of the Redis transport (src-main/redis/relay.ts carries it to Redis). Subscribed to
 * the write journal only while Redis carries the queues, it sees every job write, so no verb
 * names it: a write that gives a job a new stream message (a submit, a requeue, an operator's
 * retry or run-now, a schedule's firing) inserts the message's row in that same transaction,
 * and a write that ends the attempt the message delivered (a final state, or a newer message)
 * marks it acknowledgeable. A crash between COMMIT and Redis loses nothing: the relay finds the
 * rows at its next pass.
 *
 * Grants are kept in memory only, to be XCLAIMed to the worker after the commit: who holds a
 * message in Redis is for operators to read (XPENDING), and the leases in SQLite stay the truth.
 */

/** A message of the ledger, as the relay reads it. */
export interface OutboxMessage {
  /** The job's stream message id (its enqueue identity). */
  enqueue_id: number
  job_id: string
  queue: string
  created_at: number
  /** Its id in Redis once published; null while it waits in the outbox. */
  redis_id: string | null
}

/** A grant whose message is to be XCLAIMed to the worker's consumer. */
export interface OutboxGrant {
  queue: string
  /** The message's id in Redis (its name: see {@link streamMessageName}). */
  redis_id: string
  worker_id: string
}

/** How many messages wait to be published, and since when (epoch ms; null when none waits). */
export interface OutboxBacklog {
  waiting: number
  oldest_at: number | null
}

const COLUMNS = ['enqueue_id', 'job_id', 'queue', 'created_at'] as const

const isFinal = (state: string | undefined): boolean => state !== undefined && TERMINAL_STATES.has(state as JobState)

export class Outbox implements RowWriteSubscriber {
  private grants: OutboxGrant[] = []

  constructor(private readonly ctx: StoreContext) {}

  jobWritten(before: JobRow | undefined, after: JobRow): Undo {
    const message = after.stream_message_id
    if (message === null) return undefined
    const previous = before?.stream_message_id ?? null
    if (message !== previous) {
      this.ctx.insert('redis_outbox', COLUMNS, { enqueue_id: message, job_id: after.id, queue: after.queue, created_at: this.ctx.clock.now() })
      // The new message is XADDed before the old one is acknowledged: the relay publishes first in every pass.
      if (previous !== null) this.markAckDue(previous)
    } else if (isFinal(after.state) && !isFinal(before?.state)) {
      this.markAckDue(message)
    }
    // SQLite undoes the rows with the transaction: nothing kept in memory.
    return undefined
  }

  leaseGranted(lease: LeaseRow, job: JobRow): Undo {
    if (job.stream_message_id === null) return undefined
    const grant: OutboxGrant = { queue: job.queue, redis_id: streamMessageName(job.stream_message_id), worker_id: lease.worker_id }
    this.grants.push(grant)
    return () => {
      this.grants = this.grants.filter((g) => g !== grant)
    }
  }

  private markAckDue(enqueueId: number): void {
    this.ctx.run('UPDATE redis_outbox SET ack_due = 1 WHERE enqueue_id = ?', enqueueId)
  }

  /** The grants committed since the last call (a grant of a transaction still open is not taken: it may yet roll back). */
  takeGrants(): OutboxGrant[] {
    const taken = this.grants
    this.grants = []
    return taken
  }

  /** Up to `limit` messages that wait to be published, oldest first (publish order is stream order). */
  unpublished(limit: number): OutboxMessage[] {
    return this.ctx.all<OutboxMessage>(
      'SELECT enqueue_id, job_id, queue, created_at, redis_id FROM redis_outbox WHERE redis_id IS NULL AND ack_due = 0 ORDER BY enqueue_id LIMIT ?',
      limit,
    )
  }

  /** Up to `limit` messages whose attempt ended: to acknowledge and delete (or only forget, when never published). */
  ackDue(limit: number): OutboxMessage[] {
    return this.ctx.all<OutboxMessage>(
      'SELECT enqueue_id, job_id, queue, created_at, redis_id FROM redis_outbox WHERE ack_due = 1 ORDER BY enqueue_id LIMIT ?',
      limit,
    )
  }

  /** Every message Redis should hold now (published or not, not yet acknowledgeable), in enqueue order. */
  live(): OutboxMessage[] {
    return this.ctx.all<OutboxMessage>('SELECT enqueue_id, job_id, queue, created_at, redis_id FROM redis_outbox WHERE ack_due = 0 ORDER BY enqueue_id')
  }

  published(messages: readonly { enqueue_id: number; redis_id: string }[]): void {
    this.ctx.transact(() => {
      for (const m of messages) this.ctx.run('UPDATE redis_outbox SET redis_id = ? WHERE enqueue_id = ?', m.redis_id, m.enqueue_id)
    })
  }

  /** Messages Redis was found to have lost: back to the outbox, to be published again. */
  unpublish(enqueueIds: readonly number[]): void {
    this.ctx.transact(() => {
      for (const id of enqueueIds) this.ctx.run('UPDATE redis_outbox SET redis_id = NULL WHERE enqueue_id = ?', id)
    })
  }

  acknowledged(enqueueIds: readonly number[]): void {
    this.ctx.transact(() => {
      for (const id of enqueueIds) this.ctx.run('DELETE FROM redis_outbox WHERE enqueue_id = ?', id)
    })
  }

  backlog(): OutboxBacklog {
    const row = this.ctx.one<{ waiting: number; oldest_at: number | null }>(
      'SELECT COUNT(*) AS waiting, MIN(created_at) AS oldest_at FROM redis_outbox WHERE redis_id IS NULL AND ack_due = 0',
    )!
    return { waiting: row.waiting, oldest_at: row.oldest_at }
  }
}
