import type { Database, RunResult, Statement } from 'better-sqlite3'
import { settleFailedCommit } from '../db/commit-outcome'
import type { JobRow } from '../db/schema'
import { drizzle } from 'drizzle-orm/better-sqlite3'
import type { BackoffPolicy } from './backoff'
import type { Clock } from './clock'
import { ActiveLeases } from './active-leases'
import { Counters } from './counters'
import type { EngineEvent, EntityType, EventData, EventEntity, EventType } from './events'
import { JobTally } from './job-tally'
import { PausedQueues } from './queues'
import { QueuedRows } from './queued-rows'
import { RecentCounts } from './recent-counts'

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
  /** The most operations one commit group holds; the group commits at once when it reaches it. */
  groupMaxOperations: number
  /** The longest a group stays open while operations keep arriving in one event-loop turn. */
  groupMaxMs: number
  /**
   * Events after the statistics' mark at which the engine stores their counts at the end of a
   * commit, should the host's stats timer (which stores them too) be slow to come: what a
   * restart, or a time series, reads of the log past stats_counts stays about this long (recent-counts.ts).
   */
  countsStoreAfterEvents: number
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
  groupMaxOperations: 256,
  groupMaxMs: 2,
  countsStoreAfterEvents: 100_000,
}

export type { EngineEvent, EntityType } from './events'

export type EventListener = (event: EngineEvent) => void
/**
 * Called once per commit with its events: just before it ({@link EngineContext.beforeCommit}),
 * or after it and after the event listeners ({@link EngineContext.onCommit}). Both get the same
 * array for the same commit.
 */
export type CommitListener = (events: readonly EngineEvent[]) => void

/** What appending an event of a job's timeline needs of the job: its id and its newest event as last written. */
export interface JobLink {
  id: string
  last_event_id: number | null
}

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

type Inserter = (row: object) => RunResult

/**
 * Inserts a row's `columns` with positional parameters read straight off the row: binding by
 * name looks each parameter up on the object, which for a wide row costs more than the insert.
 */
function inserter(statement: Statement, columns: readonly string[]): Inserter {
  const args = columns.map((column) => `row[${JSON.stringify(column)}]`).join(', ')
  return new Function('statement', `return (row) => statement.run(${args})`)(statement) as Inserter
}

/** What a call came to: its value, or the error it threw. */
export type Settled<T> = { ok: true; value: T } | { ok: false; error: unknown }

/** One operation of a commit group, settled once the group has committed (or failed). */
interface Member {
  outcome: Settled<unknown>
  resolve(value: unknown): void
  reject(error: unknown): void
}

/** Operations that share one `BEGIN IMMEDIATE … COMMIT` (see {@link EngineContext.runGrouped}). */
interface Group {
  members: Member[]
  openedAt: number
  /** Why the group was abandoned (its commit failed, or SQLite lost its transaction). */
  failure?: unknown
}

/**
 * What every engine operation works with: the database, the clock, the config, a cache of
 * prepared statements, and the event log. An operation runs inside {@link transact}; the events
 * it appends are written in its transaction and handed to listeners only after it commits.
 *
 * Two ways in. A plain call of a verb ({@link transact} outside any group) is its own
 * transaction, durable when the call returns. {@link runGrouped} puts the operation in the current
 * commit group instead: operations that arrive in the same event-loop turn share one commit,
 * each verb under its own savepoint, and nobody hears of any of them (answer or event) before
 * that commit. A plain call, or a read, made while a group is open commits the group first, so
 * nothing outside a group ever sees its uncommitted writes.
 */
export class EngineContext {
  private readonly statements = new Map<string, Statement>()
  private readonly builders = new Map<Statement, RowBuilder>()
  private readonly inserters = new Map<readonly string[], Inserter>()
  private readonly listeners = new Set<EventListener>()
  private readonly commitListeners = new Set<CommitListener>()
  private readonly beforeCommitListeners = new Set<CommitListener>()
  /** Events of the transaction in progress (plain or group), or null outside one. */
  private pending: EngineEvent[] | null = null
  /** What to do to memory if the transaction in progress (or a savepoint of it) is rolled back. */
  private undos: (() => void)[] = []
  /** Per job, the newest event appended in the transaction in progress: where the job's chain goes on. */
  private readonly heads = new Map<string, number>()
  /** Inside a transaction's body: a nested {@link transact} joins it. */
  private inBody = false
  /** Inside an operation given to {@link runGrouped}: a verb's {@link transact} becomes a savepoint. */
  private inOperation = false
  /** The open commit group, or null. */
  private group: Group | null = null
  /**
   * The open group's transaction has run no statement yet: its first verb needs no savepoint,
   * since rolling back the whole transaction undoes exactly that verb (see {@link savepoint}).
   * A savepoint and its release cost ~3 µs, about what a small verb costs; most groups of
   * single-job requests hold one or two operations.
   */
  private untouched = false
  /** Transactions committed since the engine started (plain and grouped): how well groups gather. */
  private committed = 0
  /** An operation of the open group answered a waiting claim: the group commits as that operation ends (see {@link commitWhenOperationEnds}). */
  private commitSoon = false
  /**
   * Set while claims wait for work (Engine.serveWaitingClaims): writes a job being submitted
   * already leased to the first waiting claim that would take it at once (grants.ts
   * `grantOnSubmit`), and returns the row as written; null when it leaves the job to be written
   * QUEUED.
   */
  leaseOnSubmit: ((job: JobRow) => JobRow | null) | null = null
  /** Fences and stream message ids, handed out from memory. */
  readonly counters = new Counters(this)
  /** The queues an operator paused, kept in memory for the pick path. */
  readonly pausedQueues = new PausedQueues(this)
  /** The ACTIVE leases and their jobs, kept in memory for the hot verbs. */
  readonly activeLeases = new ActiveLeases(this)
  /** The QUEUED jobs per queue and priority, and the waiting jobs per cost, kept in memory for the pick path and the snapshot. */
  readonly jobTally = new JobTally(this)
  /** The rows of QUEUED jobs as last written, so that a pick need not read them back. */
  readonly queuedRows = new QueuedRows()
  /** The counted events: the last 24 h by minute in memory, and stats_counts kept up to date. */
  readonly counts = new RecentCounts(this)
  private readonly control: Record<'begin' | 'commit' | 'rollback' | 'savepoint' | 'release' | 'rollbackTo', Statement>
  private readonly drizzle: ReturnType<typeof drizzle>

  constructor(
    readonly db: Database,
    readonly clock: Clock,
    readonly config: EngineConfig,
  ) {
    this.drizzle = drizzle(db)
    this.control = {
      begin: db.prepare('BEGIN IMMEDIATE'),
      commit: db.prepare('COMMIT'),
      rollback: db.prepare('ROLLBACK'),
      savepoint: db.prepare('SAVEPOINT operation'),
      release: db.prepare('RELEASE operation'),
      rollbackTo: db.prepare('ROLLBACK TO operation'),
    }
  }

  get commits(): number {
    return this.committed
  }

  /** True while an operation or a transaction's body runs: a verb that needs a transaction of its own cannot start now. */
  get insideOperation(): boolean {
    return this.inBody || this.inOperation
  }

  /** Used outside every operation while a group is open (a read from a route, a timer): commit the group first. */
  private beforeOutsideUse(): void {
    if (this.group && !this.inOperation && !this.inBody) this.flush()
  }

  /**
   * A read of state kept in memory, from outside every operation (a route, a timer), commits an
   * open group first, as {@link stmt} does for a read of SQLite: only committed state is seen
   * from outside a group.
   */
  commitBeforeRead(): void {
    this.beforeOutsideUse()
  }

  /** drizzle over the same connection, for the cold queries that read better as a builder. */
  get orm(): ReturnType<typeof drizzle> {
    this.beforeOutsideUse()
    this.untouched = false
    return this.drizzle
  }

  /**
   * A prepared statement, prepared once per SQL text (the hot paths run at prepared speed).
   * Used outside every operation while a group is open, it commits the group first: only
   * committed state is seen from outside a group.
   */
  stmt<Row = unknown>(sql: string): Statement<unknown[], Row> {
    this.beforeOutsideUse()
    this.untouched = false
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
   * Inserts `row` into `table`, its `columns` only. `columns` is the caller's constant: the
   * statement is prepared once per such list.
   */
  insert(table: string, columns: readonly string[], row: object): RunResult {
    this.beforeOutsideUse()
    let insert = this.inserters.get(columns)
    if (!insert) {
      const sql = `INSERT INTO ${table} (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`
      insert = inserter(this.stmt(sql), columns)
      this.inserters.set(columns, insert)
    }
    return insert(row)
  }

  /**
   * Runs `fn` atomically. Outside a group: one IMMEDIATE transaction; a thrown error rolls
   * everything back, events included; after the commit the events go to listeners in the order
   * they were appended. Inside an operation of a group: a savepoint of the group's transaction,
   * rolled back alone if `fn` throws. Inside either: `fn` simply joins.
   */
  transact<T>(fn: () => T): T {
    if (this.inBody) return fn()
    if (this.inOperation) return this.savepoint(fn)
    if (this.group) this.flush() // a plain call while a group is open: the group commits first
    return this.plainTransaction(fn)
  }

  private plainTransaction<T>(fn: () => T): T {
    const pending: EngineEvent[] = []
    this.pending = pending
    this.undos = []
    this.control.begin.run()
    this.inBody = true
    let result: T
    let committing = false
    try {
      result = fn()
      if (pending.length > 0) for (const listener of this.beforeCommitListeners) listener(pending)
      committing = true
      this.control.commit.run()
      this.committed += 1
    } catch (error) {
      if (this.db.inTransaction) this.control.rollback.run()
      this.undoTo(0)
      // A failed COMMIT may have reached the disk all the same: make its outcome certain before anyone hears of it.
      throw committing ? settleFailedCommit(this.db, error, this.clock.now()) : error
    } finally {
      this.inBody = false
      this.pending = null
      this.undos = []
      this.heads.clear()
    }
    for (const event of pending) this.dispatch(event)
    if (pending.length > 0) this.dispatchCommit(pending)
    return result
  }

  /**
   * Runs `fn` under a savepoint of the transaction in progress: if it throws, its writes, events
   * and memory changes are undone and the error is rethrown; the rest of the transaction goes
   * on. If SQLite lost the whole transaction (it does so on some I/O errors and a full disk),
   * the open group fails with it.
   */
  private savepoint<T>(fn: () => T): T {
    const pending = this.pending!
    const eventsBefore = pending.length
    const undosBefore = this.undos.length
    const outer = this.inBody
    // The first verb of a group that has run nothing yet is undone by rolling back the whole
    // transaction, and a new one begins: no savepoint to take and release.
    const whole = this.untouched
    this.untouched = false
    if (!whole) this.control.savepoint.run()
    this.inBody = true
    try {
      const result = fn()
      if (!whole) this.control.release.run()
      return result
    } catch (error) {
      if (this.db.inTransaction) {
        if (whole) this.restartGroupTransaction(error)
        else {
          this.control.rollbackTo.run()
          this.control.release.run()
        }
        pending.length = eventsBefore
        this.undoTo(undosBefore)
      } else {
        this.abandonGroup(error)
      }
      throw error
    } finally {
      this.inBody = outer
    }
  }

  /**
   * Undoes the open group's first verb, which ran without a savepoint: the transaction is
   * rolled back and a new one begun for the group. Should that fail, the group is abandoned.
   */
  private restartGroupTransaction(cause: unknown): void {
    try {
      this.control.rollback.run()
      this.control.begin.run()
      this.untouched = true
    } catch {
      this.abandonGroup(cause)
    }
  }

  /**
   * Runs `fn` inside the current transaction under a savepoint: if it throws, its writes and
   * events are undone and undefined is returned, and the rest of the transaction goes on.
   */
  attempt<T>(fn: () => T): T | undefined {
    if (!this.pending) throw new Error('attempt outside a transaction')
    try {
      return this.savepoint(fn)
    } catch (error) {
      if (!this.db.inTransaction) throw error // the transaction itself is gone: not this attempt's failure alone
      return undefined
    }
  }

  /**
   * Runs `fn` inside the transaction in progress as if it were a call of its own: each verb it
   * calls is atomic under its own savepoint, and an error it throws is returned, not thrown (the
   * verbs that completed before it stay). A batch answers each of its items this way. Should
   * SQLite lose the whole transaction, that is thrown: it is not this item's failure alone.
   */
  settle<T>(fn: () => T): Settled<T> {
    if (!this.pending) throw new Error('settle outside a transaction')
    const outer = { inBody: this.inBody, inOperation: this.inOperation }
    this.inBody = false
    this.inOperation = true
    try {
      return { ok: true, value: fn() }
    } catch (error) {
      if (!this.db.inTransaction) throw error
      return { ok: false, error }
    } finally {
      this.inBody = outer.inBody
      this.inOperation = outer.inOperation
    }
  }

  /**
   * Runs each of `calls` as {@link settle} would, in order, but all under one savepoint while
   * none fails: a savepoint per call costs more than a typical call. Should one fail, all of
   * them are undone and run again one by one, each under its own savepoint, so that the failure
   * undoes only itself and the answers are those of one-by-one calls. (A number one of them took
   * from a sequence is not given back: a gap, as after any rollback.)
   */
  settleEach<T>(calls: readonly (() => T)[]): Settled<T>[] {
    if (!this.pending) throw new Error('settleEach outside a transaction')
    if (calls.length > 1) {
      try {
        return this.savepoint(() => calls.map((call): Settled<T> => ({ ok: true, value: call() })))
      } catch (error) {
        if (!this.db.inTransaction) throw error
      }
    }
    return calls.map((call) => this.settle(call))
  }

  /**
   * Registers how to put memory back should the transaction in progress not commit (or the
   * savepoint it is in roll back): state kept in memory never runs ahead of the database.
   */
  onRollback(undo: () => void): void {
    if (!this.pending) throw new Error('onRollback outside a transaction')
    this.undos.push(undo)
  }

  private undoTo(length: number): void {
    this.queuedRows.clear() // it keeps no undo of its own: a row it holds may be one of the writes undone
    while (this.undos.length > length) {
      try {
        this.undos.pop()!()
      } catch (error) {
        console.error('leasehold: undo after rollback failed:', error)
      }
    }
  }

  /**
   * Group commit: runs `op` now, in the commit group of this event-loop turn (opening one if
   * none is open), and settles with its answer or its error once the group has committed. The
   * group commits when the turn ends, or at once when it holds `groupMaxOperations` operations
   * or has been open `groupMaxMs` (see {@link EngineConfig}). Each verb `op` calls is atomic on its
   * own (a savepoint): one that fails undoes only itself. Should the commit fail, every
   * operation of the group fails with its error and nothing of the group stays, in the database
   * or in memory. Later operations of a group see the earlier ones' writes, which is safe
   * because nobody hears of any of them before the whole group is durable.
   */
  runGrouped<T>(op: () => T): Promise<T> {
    if (this.inBody || this.inOperation) throw new Error('run inside an operation: call the verb directly')
    if (!this.group) this.openGroup()
    const group = this.group!
    this.inOperation = true
    let outcome: Member['outcome']
    try {
      outcome = { ok: true, value: op() }
    } catch (error) {
      outcome = { ok: false, error }
    } finally {
      this.inOperation = false
    }
    return new Promise<T>((resolve, reject) => {
      if (this.group !== group) {
        // The group was lost while `op` ran (its transaction is gone): nothing of it stays.
        reject(outcome.ok ? group.failure : outcome.error)
        return
      }
      group.members.push({ outcome, resolve: resolve as (value: unknown) => void, reject })
      const { groupMaxOperations, groupMaxMs } = this.config
      if (this.commitSoon || group.members.length >= groupMaxOperations || performance.now() - group.openedAt >= groupMaxMs) this.flush()
    })
  }

  /**
   * Asks that the open group commit as the operation in progress ends, not with the rest of the
   * event-loop turn: called when the operation answered a claim that waits (a job leased to it at
   * its submit), whose worker then hears of it at once. Such groups commit at most once per
   * claim answered; outside a group a transaction commits as it ends anyway.
   */
  commitWhenOperationEnds(): void {
    if (this.group) this.commitSoon = true
  }

  /** Commits the open group now, if there is one (the host calls it before closing the database). */
  flush(): void {
    const group = this.group
    if (!group) return
    const pending = this.pending!
    try {
      if (pending.length > 0) {
        this.inBody = true
        try {
          for (const listener of this.beforeCommitListeners) listener(pending)
        } finally {
          this.inBody = false
        }
      }
    } catch (error) {
      this.abandonGroup(error)
      return
    }
    try {
      this.control.commit.run()
      this.committed += 1
    } catch (error) {
      this.abandonGroup(error, true)
      return
    }
    this.endGroup()
    for (const member of group.members) {
      if (member.outcome.ok) member.resolve(member.outcome.value)
      else member.reject(member.outcome.error)
    }
    for (const event of pending) this.dispatch(event)
    if (pending.length > 0) this.dispatchCommit(pending)
  }

  private openGroup(): void {
    this.control.begin.run()
    this.untouched = true
    const group: Group = { members: [], openedAt: performance.now() }
    this.group = group
    this.pending = []
    this.undos = []
    setImmediate(() => {
      if (this.group === group) this.flush()
    })
  }

  private endGroup(): void {
    this.group = null
    this.commitSoon = false
    this.untouched = false
    this.pending = null
    this.undos = []
    this.heads.clear()
  }

  /**
   * The group's transaction failed or was lost: roll back, undo memory, fail every member. When
   * its COMMIT failed (`atCommit`), the outcome is made certain first (db/commit-outcome.ts).
   */
  private abandonGroup(cause: unknown, atCommit = false): void {
    const group = this.group
    if (!group) return
    if (this.db.inTransaction) {
      try {
        this.control.rollback.run()
      } catch {
        // The rollback itself failed (the disk is gone): SQLite rolls back on the next open.
      }
    }
    this.undoTo(0)
    this.endGroup()
    if (atCommit) cause = settleFailedCommit(this.db, cause, this.clock.now())
    group.failure = cause
    // Even a member that had failed on its own hears of the commit: its answer may have rested
    // on writes of the group that are now gone.
    for (const member of group.members) member.reject(cause)
  }

  /**
   * Appends an event that names no job to the log, inside the current transaction. A job's
   * events go through the row layer (rows.ts), which keeps the job's chain of events.
   */
  appendEvent<T extends EventType>(entityType: EventEntity<T>, entityId: string, eventType: T, data: EventData<T>): void {
    this.insertEvent(entityType, entityId, null, null, eventType, data)
  }

  /**
   * Appends an event of `job`'s timeline, chained to the job's newest event (`prev_id`), and
   * returns its id, which the caller writes as the job's `last_event_id` in the same transaction
   * (rows.ts does). The job's newest event is the one appended last in this transaction, or the
   * one `job` names: a copy of the job read before an event of this transaction still chains right.
   */
  appendJobEvent(job: JobLink, entityType: EntityType, entityId: string, eventType: EventType, data: unknown): number {
    const before = this.heads.get(job.id)
    const id = this.insertEvent(entityType, entityId, job.id, before ?? job.last_event_id ?? 0, eventType, data)
    this.heads.set(job.id, id)
    this.onRollback(() => (before === undefined ? this.heads.delete(job.id) : this.heads.set(job.id, before)))
    return id
  }

  private insertEvent(entityType: EntityType, entityId: string, jobId: string | null, prevId: number | null, eventType: EventType, data: unknown): number {
    if (!this.pending || !this.inBody) throw new Error('appendEvent outside a transaction')
    const ts = this.clock.now()
    const info = this.stmt(
      'INSERT INTO events (ts, entity_type, entity_id, job_id, event_type, data, prev_id) VALUES (?, ?, ?, ?, ?, ?, ?)',
    ).run(ts, entityType, entityId, jobId, eventType, JSON.stringify(data), prevId)
    const id = Number(info.lastInsertRowid)
    this.pending.push({ id, ts, entity_type: entityType, entity_id: entityId, job_id: jobId, event_type: eventType, data } as EngineEvent)
    return id
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
