import type { EventRow } from '../../db/schema'
import type { Clock } from '../rules/clock'
import type { StoreContext } from './context'
import { readSetting, writeSetting } from './settings'
import type { EngineEvent, EntityType, EventData, EventEntity, EventType } from '../rules/events'
import type { Statements } from './statements'
import type { TransactionUnit } from './transaction'

export type EventListener = (event: EngineEvent) => void
/**
 * Called once per commit with its events: just before it ({@link EventLog.beforeCommit}), or
 * after it and after the event listeners ({@link EventLog.onCommit}). Both get the same array
 * for the same commit.
 */
export type CommitListener = (events: readonly EngineEvent[]) => void

/** What appending an event of a job's timeline needs of the job: its id and its newest event as last written. */
export interface JobLink {
  id: string
  last_event_id: number | null
}

/**
 * The event log: every event is appended in the transaction of the change it records, and
 * handed to listeners only after that transaction has committed — first to each event listener
 * (the event stream, the pool), then each commit's events at once to the commit listeners (the
 * waiting claims). Before-commit listeners run inside the commit's transaction and may add
 * operations to it.
 */
export class EventLog {
  private readonly listeners = new Set<EventListener>()
  private readonly commitListeners = new Set<CommitListener>()
  private readonly beforeCommitListeners = new Set<CommitListener>()
  /** Per job, the newest event appended in the transaction in progress: where the job's chain goes on. */
  private readonly heads = new Map<string, number>()

  constructor(
    private readonly statements: Statements,
    private readonly tx: TransactionUnit,
    private readonly clock: Clock,
    /** The next event id: never one given before (counters.ts). */
    private readonly nextId: () => number,
  ) {}

  /**
   * Appends an event that names no job to the log, inside the current transaction. A job's
   * events go through the row layer (rows.ts), which keeps the job's chain of events.
   */
  append<T extends EventType>(entityType: EventEntity<T>, entityId: string, eventType: T, data: EventData<T>): void {
    this.insert(entityType, entityId, null, null, eventType, data)
  }

  /**
   * Appends an event of `job`'s timeline, chained to the job's newest event (`prev_id`), and
   * returns its id, which the caller writes as the job's `last_event_id` in the same transaction
   * (rows.ts does). The job's newest event is the one appended last in this transaction, or the
   * one `job` names: a copy of the job read before an event of this transaction still chains right.
   */
  appendForJob(job: JobLink, entityType: EntityType, entityId: string, eventType: EventType, data: unknown): number {
    const before = this.heads.get(job.id)
    const id = this.insert(entityType, entityId, job.id, before ?? job.last_event_id ?? 0, eventType, data)
    this.heads.set(job.id, id)
    this.tx.onRollback(() => (before === undefined ? this.heads.delete(job.id) : this.heads.set(job.id, before)))
    return id
  }

  private insert(entityType: EntityType, entityId: string, jobId: string | null, prevId: number | null, eventType: EventType, data: unknown): number {
    const open = this.tx.writing()
    const ts = this.clock.now()
    const id = this.nextId()
    this.statements
      .get('INSERT INTO events (id, ts, entity_type, entity_id, job_id, event_type, data, prev_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)')
      .run(id, ts, entityType, entityId, jobId, eventType, JSON.stringify(data), prevId)
    open.events.push({ id, ts, entity_type: entityType, entity_id: entityId, job_id: jobId, event_type: eventType, data } as EngineEvent)
    return id
  }

  /** The transaction's before-commit step (TransactionHooks.beforeCommit). */
  runBeforeCommit(events: EngineEvent[]): void {
    for (const listener of this.beforeCommitListeners) listener(events)
  }

  /** After a commit (TransactionHooks.committed): the chains start afresh, then the events go out. */
  committed(events: readonly EngineEvent[]): void {
    this.heads.clear()
    for (const event of events) {
      for (const listener of this.listeners) {
        try {
          listener(event)
        } catch (error) {
          // A listener's bug must not undo or hide a committed operation.
          console.error('leasehold: event listener failed:', error)
        }
      }
    }
    for (const listener of this.commitListeners) {
      try {
        listener(events)
      } catch (error) {
        console.error('leasehold: commit listener failed:', error)
      }
    }
  }

  /** Listens to committed events; returns the function that stops listening. */
  onEvent(listener: EventListener): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  /**
   * Called at the end of every transaction that appended events, just before it commits. The
   * listener may run operations: they join the transaction (through `attempt`, so that a failure
   * undoes only its own part), and their events join the commit's.
   */
  beforeCommit(listener: CommitListener): () => void {
    this.beforeCommitListeners.add(listener)
    return () => this.beforeCommitListeners.delete(listener)
  }

  /**
   * Listens to commits: the listener gets each commit's events at once, after every event
   * listener has seen them, and may itself run operations (their commits reach it in turn).
   */
  onCommit(listener: CommitListener): () => void {
    this.commitListeners.add(listener)
    return () => this.commitListeners.delete(listener)
  }
}

// Reads of the event log for a client that resumes the event stream (GET /api/events/stream).

/** The newest event's id, 0 for an empty log. */
export function newestEventId(ctx: StoreContext): number {
  return ctx.one<{ id: number | null }>('SELECT MAX(id) AS id FROM events')?.id ?? 0
}

/**
 * The settings key of the largest event id ever deleted (retention, a purge). Migration 0025
 * set it to the newest event of a database made before it, whose deletions nothing recorded.
 */
const DELETED_THROUGH_KEY = 'events_deleted_through'

/** The largest id of an event ever deleted; 0 when none was. */
export function eventsDeletedThrough(ctx: StoreContext): number {
  return Number(readSetting(ctx, DELETED_THROUGH_KEY) ?? 0)
}

/**
 * The largest event id the log has handed out to readers: its newest event's, or a deleted
 * one's when that was larger; 0 for a log that never held one. A reader cannot hold a larger one
 * from this log.
 */
function largestEventId(ctx: StoreContext): number {
  return Math.max(newestEventId(ctx), eventsDeletedThrough(ctx))
}

/**
 * Records, inside the transaction that deletes them, that events were deleted whose largest id is
 * `largest`: every deletion of events goes through here, or a resuming reader is not told it
 * missed them (see {@link replayStart}).
 */
export function noteEventsDeleted(ctx: StoreContext, largest: number): void {
  if (largest > eventsDeletedThrough(ctx)) writeSetting(ctx, DELETED_THROUGH_KEY, String(largest))
}

/**
 * Where a replay of the events after `after` starts when it may send at most `limit` of them:
 * `after` itself when every event after it is still stored and there are no more; otherwise a
 * later id, and the reader is told of the events up to it as missed (a gap). When events after
 * `after` were deleted (an event was deleted whose id is larger), the replay starts past the
 * largest deleted id: what is left before it has holes no reader can fill. Of what follows, the
 * newest `limit` are sent. Events are counted, not ids: the ids are sparse (each start of a host
 * begins a new block of them), so their difference is not a count, and a jump of ids loses nothing.
 */
function replayStart(ctx: StoreContext, after: number, limit: number): number {
  const whole = Math.max(after, eventsDeletedThrough(ctx))
  return ctx.one<{ id: number }>('SELECT id FROM events WHERE id > ? ORDER BY id DESC LIMIT 1 OFFSET ?', whole, limit)?.id ?? whole
}

/**
 * What a reader resuming after event `after` gets, at most `limit` events: the ids it may have
 * missed and is not sent (a gap), or null, and the events it is sent, oldest first. An id past
 * every id this log gave ({@link largestEventId}) is none of its own — one from a database since
 * restored from an older backup, or another host's — so where the reader stands is unknown: all
 * it may have missed is the whole log, and nothing is replayed.
 */
export function replayAfter(ctx: StoreContext, after: number, limit: number): { gap: { missed_from: number; missed_to: number } | null; events: EventRow[] } {
  const largest = largestEventId(ctx)
  if (after > largest) return { gap: largest > 0 ? { missed_from: 1, missed_to: largest } : null, events: [] }
  const from = replayStart(ctx, after, limit)
  return { gap: from > after ? { missed_from: after + 1, missed_to: from } : null, events: eventsAfter(ctx, from, limit) }
}

/** Up to `limit` events after the one with id `after`, oldest first. */
function eventsAfter(ctx: StoreContext, after: number, limit: number): EventRow[] {
  return ctx.all<EventRow>('SELECT * FROM events WHERE id > ? ORDER BY id LIMIT ?', after, limit)
}
