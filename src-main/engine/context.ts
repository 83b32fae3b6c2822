import type { Database, Statement } from 'better-sqlite3'
import { drizzle } from 'drizzle-orm/better-sqlite3'
import type { BackoffPolicy } from './backoff'
import type { Clock } from './clock'

/** The scheduling knobs the engine reads. The host builds them from flags (src-main/config.ts). */
export interface EngineConfig {
  /** Lease time-to-live granted when a request names none. */
  leaseTtlS: number
  /** Added to the TTL before a silent lease expires. */
  heartbeatGraceS: number
  /** How long a dialect-002 claim holds a job before it returns to QUEUED. */
  claimTtlS: number
  /** Bounds for a request's own `ttl_sec`. */
  minTtlS: number
  maxTtlS: number
  /** Attempts a job gets unless its submit says otherwise. */
  maxAttempts: number
  backoff: BackoffPolicy
  /** Advice to a dialect-001/003 worker whose lease request was denied. */
  denyRetryAfterMs: number
  /** Advice to a dialect-002 worker whose lease request was denied (also its `next_retry_at`). */
  leaseRetryAfterS: number
}

export const DEFAULT_ENGINE_CONFIG: EngineConfig = {
  leaseTtlS: 30,
  heartbeatGraceS: 5,
  claimTtlS: 60,
  minTtlS: 1,
  maxTtlS: 3600,
  maxAttempts: 3,
  backoff: { baseMs: 2_000, maxMs: 10 * 60_000 },
  denyRetryAfterMs: 1_500,
  leaseRetryAfterS: 10,
}

export type EntityType = 'JOB' | 'LEASE' | 'FILE_LEASE' | 'BLOCKER' | 'WORKER' | 'CAPACITY'

/** An event as listeners see it: the stored row with its data parsed. */
export interface EngineEvent {
  id: number
  ts: number
  entity_type: EntityType
  entity_id: string
  job_id: string | null
  event_type: string
  data: Record<string, unknown>
}

export type EventListener = (event: EngineEvent) => void
/**
 * Called once per commit with its events: just before it ({@link EngineContext.beforeCommit}),
 * or after it and after the event listeners ({@link EngineContext.onCommit}). Both get the same
 * array for the same commit.
 */
export type CommitListener = (events: readonly EngineEvent[]) => void

/** Builds a row object from a raw row (an array of column values). */
type RowBuilder = (values: unknown[]) => unknown

/**
 * A row builder for these column names: one object literal with every column. better-sqlite3
 * builds a row object by adding its columns one by one, and V8 turns an object with that many
 * added properties (a job has 35) into a slow dictionary: reading the row costs ~3× more, and so
 * does every later spread or property read of it. A literal gets a fixed shape. The names are
 * SQLite's column names of the engine's own SQL, quoted with JSON.stringify.
 */
function rowBuilder(names: string[]): RowBuilder {
  const fields = names.map((name, i) => `${JSON.stringify(name)}: values[${i}]`).join(', ')
  return new Function('values', `return { ${fields} }`) as RowBuilder
}

/**
 * What every engine operation works with: the database, the clock, the config, a cache of
 * prepared statements, and the event log. An operation runs inside {@link transact}; the events
 * it appends are written in its transaction and handed to listeners only after it commits.
 */
export class EngineContext {
  private readonly statements = new Map<string, Statement>()
  private readonly builders = new Map<Statement, RowBuilder>()
  private readonly listeners = new Set<EventListener>()
  private readonly commitListeners = new Set<CommitListener>()
  private readonly beforeCommitListeners = new Set<CommitListener>()
  /** Events of the transaction in progress, or null outside one. */
  private pending: EngineEvent[] | null = null
  /** drizzle over the same connection, for the cold queries that read better as a builder. */
  readonly orm: ReturnType<typeof drizzle>

  constructor(
    readonly db: Database,
    readonly clock: Clock,
    readonly config: EngineConfig,
  ) {
    this.orm = drizzle(db)
  }

  /** A prepared statement, prepared once per SQL text (the hot paths run at prepared speed). */
  stmt<Row = unknown>(sql: string): Statement<unknown[], Row> {
    let statement = this.statements.get(sql)
    if (!statement) {
      statement = this.db.prepare(sql)
      this.statements.set(sql, statement)
    }
    return statement as Statement<unknown[], Row>
  }

  /** A statement that returns rows as arrays, with the builder that makes them objects. */
  private reader(sql: string): { statement: Statement<unknown[], unknown[]>; build: RowBuilder } {
    const statement = this.stmt(sql)
    let build = this.builders.get(statement)
    if (!build) {
      statement.raw(true)
      build = rowBuilder(statement.columns().map((column) => column.name))
      this.builders.set(statement, build)
    }
    return { statement: statement as Statement<unknown[], unknown[]>, build }
  }

  one<Row>(sql: string, ...params: unknown[]): Row | undefined {
    const { statement, build } = this.reader(sql)
    const values = statement.get(...params)
    return values === undefined ? undefined : (build(values) as Row)
  }

  all<Row>(sql: string, ...params: unknown[]): Row[] {
    const { statement, build } = this.reader(sql)
    return statement.all(...params).map((values) => build(values) as Row)
  }

  run(sql: string, ...params: unknown[]): void {
    this.stmt(sql).run(...params)
  }

  /**
   * Runs `fn` as one IMMEDIATE transaction. A thrown error rolls everything back, events
   * included; after a commit the events go to listeners in the order they were appended.
   */
  transact<T>(fn: () => T): T {
    if (this.pending) return fn() // already inside this context's transaction
    const pending: EngineEvent[] = []
    this.pending = pending
    this.stmt('BEGIN IMMEDIATE').run()
    let result: T
    try {
      result = fn()
      if (pending.length > 0) for (const listener of this.beforeCommitListeners) listener(pending)
      this.stmt('COMMIT').run()
    } catch (error) {
      if (this.db.inTransaction) this.stmt('ROLLBACK').run()
      throw error
    } finally {
      this.pending = null
    }
    for (const event of pending) this.dispatch(event)
    if (pending.length > 0) this.dispatchCommit(pending)
    return result
  }

  /**
   * Runs `fn` inside the current transaction under a savepoint: if it throws, its writes and
   * events are undone and undefined is returned, and the rest of the transaction goes on.
   */
  attempt<T>(fn: () => T): T | undefined {
    if (!this.pending) throw new Error('attempt outside a transaction')
    const eventsBefore = this.pending.length
    this.stmt('SAVEPOINT attempt').run()
    try {
      const result = fn()
      this.stmt('RELEASE attempt').run()
      return result
    } catch {
      this.stmt('ROLLBACK TO attempt').run()
      this.stmt('RELEASE attempt').run()
      this.pending.length = eventsBefore
      return undefined
    }
  }

  /** Appends an event to the log inside the current transaction. */
  appendEvent(
    entityType: EntityType,
    entityId: string,
    jobId: string | null,
    eventType: string,
    data: Record<string, unknown> = {},
  ): void {
    if (!this.pending) throw new Error('appendEvent outside a transaction')
    const ts = this.clock.now()
    const info = this.stmt(
      'INSERT INTO events (ts, entity_type, entity_id, job_id, event_type, data) VALUES (?, ?, ?, ?, ?, ?)',
    ).run(ts, entityType, entityId, jobId, eventType, JSON.stringify(data))
    this.pending.push({
      id: Number(info.lastInsertRowid),
      ts,
      entity_type: entityType,
      entity_id: entityId,
      job_id: jobId,
      event_type: eventType,
      data,
    })
  }

  /** Listens to committed events; returns the function that stops listening. */
  onEvent(listener: EventListener): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  /**
   * Called at the end of every transaction that appended events, just before it commits. The
   * listener may run operations: they join the transaction (through {@link attempt}, so that a
   * failure undoes only its own part), and their events join the commit's.
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

  private dispatchCommit(events: readonly EngineEvent[]): void {
    for (const listener of this.commitListeners) {
      try {
        listener(events)
      } catch (error) {
        console.error('leasehold: commit listener failed:', error)
      }
    }
  }

  private dispatch(event: EngineEvent): void {
    for (const listener of this.listeners) {
      try {
        listener(event)
      } catch (error) {
        // A listener's bug must not undo or hide a committed operation.
        console.error('leasehold: event listener failed:', error)
      }
    }
  }
}
