import type { Database, RunResult, Statement } from 'better-sqlite3'
import { isFailedSync, settleFailedCommit } from '../../db/commit-outcome'
import type { JobRow } from '../../db/schema'
import { drizzle } from 'drizzle-orm/better-sqlite3'
import type { Clock } from '../rules/clock'
import type { EngineConfig } from '../rules/engine-config'
import { Counters } from './counters'
import type { EntityType, EventData, EventEntity, EventType } from '../rules/events'
import { type CommitListener, EventLog, type EventListener, type JobLink } from './event-log'
import { type ActiveRows, RowWrites } from './row-writes'
import { Statements } from './statements'
import { type Settled, TransactionUnit } from './transaction'

export type { Settled } from './transaction'
export { DEFAULT_ENGINE_CONFIG, type EngineConfig } from '../rules/engine-config'
export type { EngineEvent, EntityType } from '../rules/events'
export type { CommitListener, EventListener, JobLink } from './event-log'

/**
 * The store's half of what every engine operation works with: the database, the clock, the
 * config, the prepared statements, the transaction unit, the event log, the counters and the
 * write journal. The engine's context (memory/context.ts) adds the caches of hot state on top;
 * nothing here names them, so the store sits below what is kept in memory.
 *
 * An operation runs inside {@link transact}; the events it appends are written in its
 * transaction and handed to listeners only after it commits. Two ways in. A plain call of a verb
 * ({@link transact} outside any group) is its own transaction, durable when the call returns.
 * {@link runGrouped} puts the operation in the current commit group instead: operations that
 * arrive in the same event-loop turn share one commit, each verb under its own savepoint, and
 * nobody hears of any of them (answer or event) before that commit. A plain call, or a read, made
 * while a group is open commits the group first, so nothing outside a group ever sees its
 * uncommitted writes. The transaction unit (engine/store/transaction.ts) names the modes and
 * holds every move between them.
 */
export abstract class StoreContext {
  private readonly statements: Statements
  private readonly tx: TransactionUnit
  private readonly events: EventLog
  private readonly commitWatchers = new Set<() => void>()
  private readonly syncFailureWatchers = new Set<(error: unknown) => void>()
  /**
   * Set while claims wait for work (Engine.serveWaitingClaims): writes a job being submitted
   * already leased to the first waiting claim that would take it at once (grants.ts
   * `grantOnSubmit`), and returns the row as written; null when it leaves the job to be written
   * QUEUED.
   */
  waitingClaims: ((job: JobRow) => JobRow | null) | null = null
  /**
   * The workers whose leases do not expire for now, whatever their `expires_at` says
   * (Engine.spareLeases): neither the reaper nor a call that names one of their leases expires it.
   */
  sparedWorkers: () => ReadonlySet<string> | null = () => null
  /**
   * Told, inside the transaction, of each worker a lease of which expired for its silence (no
   * heartbeat within its TTL and grace: Engine.onWorkerSilent). Dispatch ends that worker's
   * waiting claims there, before the job it lost, or any other, can be offered to them.
   */
  workerFellSilent: ((workerId: string) => void) | null = null
  /** Fences, job keys, stream message ids and event ids, handed out from memory. */
  readonly counters = new Counters(this)
  /** Each write of a job or lease row, reported once by the row layer; the caches that follow rows subscribe. */
  readonly rowWrites = new RowWrites((undo) => this.onRollback(undo))
  /**
   * Where the row layer finds an ACTIVE lease and its job without reading them back: the cache
   * of ACTIVE leases, which the engine's context provides.
   */
  abstract readonly activeLeases: ActiveRows
  private readonly drizzle: ReturnType<typeof drizzle>

  constructor(
    readonly db: Database,
    readonly clock: Clock,
    readonly config: EngineConfig,
  ) {
    this.drizzle = drizzle(db)
    this.statements = new Statements(db)
    this.tx = new TransactionUnit(db, config, {
      beforeCommit: (events) => this.events.runBeforeCommit(events),
      committed: (events) => this.events.committed(events),
      afterCommit: () => {
        for (const listener of this.commitWatchers) listener()
      },
      rolledBack: () => this.rowWrites.rolledBack(),
      commitFailed: (error) => {
        const answer = settleFailedCommit(db, error, clock.now())
        if (isFailedSync(error)) for (const listener of this.syncFailureWatchers) listener(error)
        return answer
      },
    })
    // Event ids come from a reserved sequence, so an id is never given twice, even after the event it named was deleted.
    this.events = new EventLog(this.statements, this.tx, clock, () => this.counters.nextEventId())
  }

  /** Transactions committed since the engine started (plain and grouped): how well groups gather. */
  get commits(): number {
    return this.tx.commits
  }

  /** True while an operation or a transaction's body runs: a verb that needs a transaction of its own cannot start now. */
  get insideOperation(): boolean {
    return this.tx.insideOperation
  }

  /**
   * A read of state kept in memory, from outside every operation (a route, a timer), commits an
   * open group first, as {@link stmt} does for a read of SQLite: only committed state is seen
   * from outside a group.
   */
  commitBeforeRead(): void {
    this.tx.beforeUse()
  }

  /** drizzle over the same connection, for the cold queries that read better as a builder. */
  get orm(): ReturnType<typeof drizzle> {
    this.tx.beforeUse()
    return this.drizzle
  }

  /**
   * A prepared statement, prepared once per SQL text (the hot paths run at prepared speed).
   * Used outside every operation while a group is open, it commits the group first: only
   * committed state is seen from outside a group.
   */
  stmt<Row = unknown>(sql: string): Statement<unknown[], Row> {
    this.tx.beforeUse()
    return this.statements.get<Row>(sql)
  }

  one<Row>(sql: string, ...params: unknown[]): Row | undefined {
    this.tx.beforeUse()
    return this.statements.one<Row>(sql, params)
  }

  all<Row>(sql: string, ...params: unknown[]): Row[] {
    this.tx.beforeUse()
    return this.statements.all<Row>(sql, params)
  }

  run(sql: string, ...params: unknown[]): void {
    this.stmt(sql).run(...params)
  }

  /**
   * Inserts `row` into `table`, its `columns` only. `columns` is the caller's constant: the
   * statement is prepared once per such list.
   */
  insert(table: string, columns: readonly string[], row: object): RunResult {
    this.tx.beforeUse()
    return this.statements.insert(table, columns, row)
  }

  /** Runs `fn` atomically: its own transaction, a savepoint of an operation's, or joining a body (engine/store/transaction.ts). */
  transact<T>(fn: () => T): T {
    return this.tx.transact(fn)
  }

  /** Runs `fn` under a savepoint of the transaction in progress; undefined if it threw (its part undone). */
  attempt<T>(fn: () => T): T | undefined {
    return this.tx.attempt(fn)
  }

  /** Runs `fn` as a call of its own inside the transaction in progress: its error is returned, not thrown. */
  settle<T>(fn: () => T): Settled<T> {
    return this.tx.settle(fn)
  }

  /** Each of `calls` as {@link settle} would, under one savepoint while none fails. */
  settleEach<T>(calls: readonly (() => T)[]): Settled<T>[] {
    return this.tx.settleEach(calls)
  }

  /** How to put memory back should the transaction in progress (or its savepoint) roll back. */
  onRollback(undo: () => void): void {
    this.tx.onRollback(undo)
  }

  /** Group commit: runs `op` now in this turn's commit group, settled once the group has committed. */
  runGrouped<T>(op: () => T): Promise<T> {
    return this.tx.runGrouped(op)
  }

  /**
   * A job being submitted, offered to the claims waiting for work ({@link waitingClaims}): the
   * row as written, already leased to one of them, or null when it is to be written QUEUED. A job
   * leased here answers a waiting claim, so the open group commits as this operation ends, not
   * with the rest of the event-loop turn: the worker hears of its job at once.
   */
  leaseOnSubmit(job: JobRow): JobRow | null {
    const leased = this.waitingClaims?.(job) ?? null
    if (leased) this.tx.commitWhenOperationEnds()
    return leased
  }

  /** Nobody waits for the operation in progress to commit: its group may wait for the next (TransactionUnit.commitMayWait). */
  commitMayWait(): void {
    this.tx.commitMayWait()
  }

  /** Commits the open group now, if there is one (the host calls it before closing the database). */
  flush(): void {
    this.tx.flush()
  }

  /**
   * Appends an event that names no job to the log, inside the current transaction. A job's
   * events go through the row layer (rows.ts), which keeps the job's chain of events.
   */
  appendEvent<T extends EventType>(entityType: EventEntity<T>, entityId: string, eventType: T, data: EventData<T>): void {
    this.events.append(entityType, entityId, eventType, data)
  }

  /** Appends an event of `job`'s timeline, chained to the job's newest event, and returns its id (event-log.ts). */
  appendJobEvent(job: JobLink, entityType: EntityType, entityId: string, eventType: EventType, data: unknown): number {
    return this.events.appendForJob(job, entityType, entityId, eventType, data)
  }

  /** Listens to committed events; returns the function that stops listening. */
  onEvent(listener: EventListener): () => void {
    return this.events.onEvent(listener)
  }

  /** Called at the end of every transaction that appended events, just before it commits (event-log.ts). */
  beforeCommit(listener: CommitListener): () => void {
    return this.events.beforeCommit(listener)
  }

  /** Listens to commits: each commit's events at once, after every event listener has seen them. */
  onCommit(listener: CommitListener): () => void {
    return this.events.onCommit(listener)
  }

  /** Hears every commit, with events or without, right after it; returns the function that stops listening. */
  onEveryCommit(listener: () => void): () => void {
    this.commitWatchers.add(listener)
    return () => this.commitWatchers.delete(listener)
  }

  /** Called from inside the failed commit, once its outcome is settled: the listener must not use the engine before its stack unwinds. */
  onSyncFailed(listener: (error: unknown) => void): () => void {
    this.syncFailureWatchers.add(listener)
    return () => this.syncFailureWatchers.delete(listener)
  }
}
