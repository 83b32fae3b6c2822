import type { Database, Statement } from 'better-sqlite3'
import type { EngineEvent } from '../rules/events'

/**
 * The transaction unit: the one connection's transaction, and where the engine's code runs
 * within it. Every write of the engine happens inside it; nobody hears of a write (an answer,
 * an event) before the transaction that holds it has committed.
 *
 * Its modes, and every move between them (each asserted by {@link TransactionUnit.enter}):
 *
 *   idle       No transaction is open.
 *              → body       a verb called on its own (`transact`): BEGIN, its body, COMMIT → idle.
 *              → group      an operation arrives for the commit group (`runGrouped`): BEGIN.
 *   group      A commit group's transaction is open between its operations. It commits when
 *              the event-loop turn ends, at `groupMaxOperations`, after `groupMaxMs`, when
 *              something outside it reads (a route, a timer, a plain verb), or as an operation
 *              that answered a waiting claim ends (`commitWhenOperationEnds`): COMMIT → idle.
 *              A group whose every operation said nobody waits for its commit (`commitMayWait`:
 *              a worker's reports sent with a claim that now waits for work) stays open past its
 *              turn, up to `groupWaitMs`, for the next operation to join it; it commits at the
 *              end of the turn in which an operation that is waited for joins it.
 *              → operation  the group runs an operation (`runGrouped`) → back to group.
 *              → body       the commit's before-commit listeners run (claims waiting for work
 *                           are leased in the commit that made it available) → back to group.
 *   operation  An operation runs: each verb it calls is atomic on its own, under a savepoint
 *              (`transact` → body), so one that throws undoes only itself. Batch items
 *              (`settle`) run in this mode too, inside a verb's body.
 *   body       A verb's body runs. A verb it calls joins it; `settle` runs an item as an
 *              operation; `attempt` runs a part under a savepoint that may fail alone.
 *
 * A group's first verb takes no savepoint (`fresh`): rolling back the whole transaction undoes
 * exactly that verb, and a new transaction begins for the group. A savepoint and its release
 * cost ~3 µs, about what a small verb costs, and most groups of one-job requests hold one or two.
 *
 * What a transaction did to memory is undone with it: each write path registers its undo
 * (`onRollback`), run in reverse order when the transaction or the savepoint the write was in
 * rolls back.
 */
export type TransactionMode = 'idle' | 'group' | 'operation' | 'body'

/** Every legal move between modes (the comment above says when each happens). */
const MOVES: Readonly<Record<TransactionMode, readonly TransactionMode[]>> = {
  idle: ['body', 'group'],
  group: ['operation', 'body'],
  operation: ['body'],
  body: ['operation', 'body'],
}

/** What a call came to: its value, or the error it threw. */
export type Settled<T> = { ok: true; value: T } | { ok: false; error: unknown }

/** The transaction in progress: the events it appended, and how to undo its changes to memory. */
export interface OpenTransaction {
  /** Events appended in it, handed to listeners after its commit. */
  readonly events: EngineEvent[]
  readonly undos: (() => void)[]
}

/** One operation of a commit group, settled once the group has committed (or failed). */
interface Member {
  outcome: Settled<unknown>
  resolve(value: unknown): void
  reject(error: unknown): void
}

/** Operations that share one `BEGIN IMMEDIATE … COMMIT`. */
interface Group {
  members: Member[]
  openedAt: number
  /** Its transaction has run no statement yet: its first verb needs no savepoint. */
  fresh: boolean
  /** An operation answered a waiting claim: the group commits as that operation ends ({@link TransactionUnit.commitWhenOperationEnds}). */
  commitAfterOperation: boolean
  /** Nobody waits for any of its operations to commit so far ({@link TransactionUnit.commitMayWait}). */
  mayWait: boolean
  /** It outlived the turn it opened in, and commits when `groupWaitMs` ends or someone waits for it. */
  pastItsTurn: boolean
  /** Why the group was abandoned (its commit failed, or SQLite lost its transaction). */
  failure?: unknown
}

/** What the unit tells the engine's context of a transaction's life. */
export interface TransactionHooks {
  /** Just before COMMIT, in body mode, when the transaction appended events: listeners may add operations. */
  beforeCommit(events: EngineEvent[]): void
  /** After COMMIT: every operation of a group is settled first, then its events go out. */
  committed(events: EngineEvent[]): void
  /** Right after every COMMIT, with events or without, before anyone hears of it. */
  afterCommit(): void
  /** After a rollback (of a transaction or a savepoint) and before its undos run. */
  rolledBack(): void
  /**
   * A COMMIT failed, and its transaction was rolled back: makes the outcome certain (a commit
   * whose sync failed may be on disk all the same) and returns the error to answer with.
   */
  commitFailed(error: unknown): unknown
}

export interface GroupLimits {
  groupMaxOperations: number
  groupMaxMs: number
  /** How long a group nobody waits for stays open past its turn (0: it commits with its turn). */
  groupWaitMs: number
}

export class TransactionUnit {
  private mode: TransactionMode = 'idle'
  private open: OpenTransaction | null = null
  private group: Group | null = null
  private committedCount = 0
  /** The operation running now said nobody waits for its commit. */
  private operationMayWait = false
  private readonly control: Record<'begin' | 'commit' | 'rollback' | 'savepoint' | 'release' | 'rollbackTo', Statement>

  constructor(
    private readonly db: Database,
    private readonly limits: GroupLimits,
    private readonly hooks: TransactionHooks,
  ) {
    this.control = {
      begin: db.prepare('BEGIN IMMEDIATE'),
      commit: db.prepare('COMMIT'),
      rollback: db.prepare('ROLLBACK'),
      savepoint: db.prepare('SAVEPOINT operation'),
      release: db.prepare('RELEASE operation'),
      rollbackTo: db.prepare('ROLLBACK TO operation'),
    }
  }

  /** Transactions committed since the engine started (plain and grouped): how well groups gather. */
  get commits(): number {
    return this.committedCount
  }

  /** Where the engine's code runs now (the modes above). */
  get current(): TransactionMode {
    return this.mode
  }

  /** True while an operation or a verb's body runs: a verb that needs a transaction of its own cannot start now. */
  get insideOperation(): boolean {
    return this.mode === 'operation' || this.mode === 'body'
  }

  /** The transaction in progress, for a write that appends an event; only a verb's body writes. */
  writing(): OpenTransaction {
    if (this.mode !== 'body' || !this.open) throw new Error('appendEvent outside a transaction')
    return this.open
  }

  /**
   * Before the connection is used: from outside every operation while a group is open (a read
   * from a route, a timer), the group commits first, so that only committed state is seen from
   * outside a group; inside the group, its transaction is no longer fresh.
   */
  beforeUse(): void {
    if (this.mode === 'group') this.flush()
    else if (this.group) this.group.fresh = false
  }

  /**
   * Moves to `mode` for the length of `fn`, then back: the one place modes change while code
   * runs. Back at the outside (idle or group), the mode is what the transaction has become: a
   * group that committed or was abandoned meanwhile leaves the unit idle.
   */
  private enter<T>(mode: TransactionMode, fn: () => T): T {
    const from = this.mode
    if (!MOVES[from].includes(mode)) throw new Error(`transaction unit: no move from ${from} to ${mode}`)
    this.mode = mode
    try {
      return fn()
    } finally {
      this.mode = from === 'idle' || from === 'group' ? (this.group ? 'group' : 'idle') : from
    }
  }

  /**
   * Runs `fn` atomically. Idle: one IMMEDIATE transaction; a thrown error rolls everything back,
   * events included; after the commit the events go to listeners in the order they were
   * appended. In an operation: a savepoint of the group's transaction, rolled back alone if `fn`
   * throws. In a body: `fn` simply joins it. With a group open between operations, the group
   * commits first.
   */
  transact<T>(fn: () => T): T {
    if (this.mode === 'body') return fn()
    if (this.mode === 'operation') return this.savepoint(fn)
    if (this.mode === 'group') this.flush()
    return this.plainTransaction(fn)
  }

  private plainTransaction<T>(fn: () => T): T {
    const open: OpenTransaction = { events: [], undos: [] }
    this.open = open
    this.control.begin.run()
    let result: T
    let committing = false
    try {
      result = this.enter('body', () => {
        const value = fn()
        if (open.events.length > 0) this.hooks.beforeCommit(open.events)
        return value
      })
      committing = true
      this.control.commit.run()
      this.committedCount += 1
      this.hooks.afterCommit()
    } catch (error) {
      if (this.db.inTransaction) this.control.rollback.run()
      this.undoTo(0)
      // A failed COMMIT may have reached the disk all the same: its outcome is made certain before anyone hears of it.
      throw committing ? this.hooks.commitFailed(error) : error
    } finally {
      this.open = null
    }
    if (open.events.length > 0) this.hooks.committed(open.events)
    return result
  }

  /**
   * Runs `fn` under a savepoint of the transaction in progress: if it throws, its writes, events
   * and memory changes are undone and the error is rethrown; the rest of the transaction goes
   * on. If SQLite lost the whole transaction (it does so on some I/O errors and a full disk),
   * the open group fails with it.
   */
  private savepoint<T>(fn: () => T): T {
    const open = this.open!
    const eventsBefore = open.events.length
    const undosBefore = open.undos.length
    // A fresh group's first verb is undone by rolling back the whole transaction, and a new one
    // begins: no savepoint to take and release.
    const whole = this.group?.fresh === true
    if (this.group) this.group.fresh = false
    if (!whole) this.control.savepoint.run()
    try {
      const result = this.enter('body', fn)
      if (!whole) this.control.release.run()
      return result
    } catch (error) {
      if (this.db.inTransaction) {
        if (whole) this.restartGroupTransaction(error)
        else {
          this.control.rollbackTo.run()
          this.control.release.run()
        }
        open.events.length = eventsBefore
        this.undoTo(undosBefore)
      } else {
        this.abandonGroup(error)
      }
      throw error
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
      this.group!.fresh = true
    } catch {
      this.abandonGroup(cause)
    }
  }

  /**
   * Runs `fn` inside the current transaction under a savepoint: if it throws, its writes and
   * events are undone and undefined is returned, and the rest of the transaction goes on.
   */
  attempt<T>(fn: () => T): T | undefined {
    if (!this.open) throw new Error('attempt outside a transaction')
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
    if (!this.open) throw new Error('settle outside a transaction')
    try {
      return { ok: true, value: this.enter('operation', fn) }
    } catch (error) {
      if (!this.db.inTransaction) throw error
      return { ok: false, error }
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
    if (!this.open) throw new Error('settleEach outside a transaction')
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
    if (!this.open) throw new Error('onRollback outside a transaction')
    this.open.undos.push(undo)
  }

  private undoTo(length: number): void {
    this.hooks.rolledBack()
    const undos = this.open?.undos ?? []
    while (undos.length > length) {
      try {
        undos.pop()!()
      } catch (error) {
        console.error('leasehold: undo after rollback failed:', error)
      }
    }
  }

  /**
   * Group commit: runs `op` now, in the commit group of this event-loop turn (opening one if
   * none is open), and settles with its answer or its error once the group has committed. Each
   * verb `op` calls is atomic on its own (a savepoint): one that fails undoes only itself. Should
   * the commit fail, every operation of the group fails with its error and nothing of the group
   * stays, in the database or in memory. Later operations of a group see the earlier ones'
   * writes, which is safe because nobody hears of any of them before the whole group is durable.
   */
  runGrouped<T>(op: () => T): Promise<T> {
    if (this.mode !== 'idle' && this.mode !== 'group') throw new Error('run inside an operation: call the verb directly')
    if (!this.group) this.openGroup()
    const group = this.group!
    let outcome: Member['outcome']
    this.operationMayWait = false
    try {
      outcome = { ok: true, value: this.enter('operation', op) }
    } catch (error) {
      outcome = { ok: false, error }
    }
    return new Promise<T>((resolve, reject) => {
      if (this.group !== group) {
        // The group was lost while `op` ran (its transaction is gone): nothing of it stays.
        reject(outcome.ok ? group.failure : outcome.error)
        return
      }
      group.members.push({ outcome, resolve: resolve as (value: unknown) => void, reject })
      if (!(outcome.ok && this.operationMayWait)) this.waitedFor(group)
      const { groupMaxOperations, groupMaxMs } = this.limits
      if (group.commitAfterOperation || group.members.length >= groupMaxOperations || performance.now() - group.openedAt >= groupMaxMs) this.flush()
    })
  }

  /**
   * Asks that the open group commit as the operation in progress ends, not with the rest of the
   * event-loop turn: called when the operation answered a claim that waits (a job leased to it at
   * its submit), whose worker then hears of it at once. Outside a group a transaction commits as
   * it ends anyway.
   */
  commitWhenOperationEnds(): void {
    if (this.group) this.group.commitAfterOperation = true
  }

  /**
   * Says that nobody waits for the operation in progress to commit: its answer goes out only
   * when work comes for a claim that now waits (a worker's reports sent with its next claim), and
   * that work's own commit is the one to carry it. Its group may then stay open past its turn,
   * up to `groupWaitMs`, so that the submit that brings the work commits both: one commit, not
   * two, for a job that follows another alone. Nothing is answered before the commit all the
   * same, and anything that reads from outside the group commits it first.
   */
  commitMayWait(): void {
    if (this.mode === 'operation') this.operationMayWait = true
  }

  /** An operation somebody waits for joined `group`: it commits by the end of this turn. */
  private waitedFor(group: Group): void {
    if (!group.mayWait) return
    group.mayWait = false
    if (group.pastItsTurn) this.atTurnEnd(group)
  }

  /**
   * When this event-loop turn ends, `group` commits, if it is still open then; unless nobody
   * waits for it yet, and then it waits up to `groupWaitMs` for an operation that somebody does.
   */
  private atTurnEnd(group: Group): void {
    const commit = () => {
      if (this.group === group && this.mode === 'group') this.flush()
    }
    setImmediate(() => {
      if (this.group !== group) return
      if (!group.mayWait || this.limits.groupWaitMs <= 0) return commit()
      group.pastItsTurn = true
      setTimeout(commit, this.limits.groupWaitMs)
    })
  }

  /** Commits the open group now, if there is one (the host calls it before closing the database). */
  flush(): void {
    const group = this.group
    if (!group) return
    if (this.mode !== 'group') throw new Error(`transaction unit: a group cannot commit from ${this.mode}`)
    const open = this.open!
    try {
      if (open.events.length > 0) this.enter('body', () => this.hooks.beforeCommit(open.events))
    } catch (error) {
      this.abandonGroup(error)
      return
    }
    try {
      this.control.commit.run()
      this.committedCount += 1
      this.hooks.afterCommit()
    } catch (error) {
      this.abandonGroup(error, true)
      return
    }
    this.endGroup()
    for (const member of group.members) {
      if (member.outcome.ok) member.resolve(member.outcome.value)
      else member.reject(member.outcome.error)
    }
    if (open.events.length > 0) this.hooks.committed(open.events)
  }

  private openGroup(): void {
    this.control.begin.run()
    const group: Group = { members: [], openedAt: performance.now(), fresh: true, commitAfterOperation: false, mayWait: true, pastItsTurn: false }
    this.group = group
    this.open = { events: [], undos: [] }
    this.mode = 'group'
    this.atTurnEnd(group)
  }

  /** The group is over (committed or abandoned). Called from inside running code, the mode is set right as that code unwinds ({@link enter}). */
  private endGroup(): void {
    this.group = null
    this.open = null
    if (this.mode === 'group') this.mode = 'idle'
  }

  /**
   * The group's transaction failed or was lost: roll back, undo memory, fail every member. When
   * its COMMIT failed (`atCommit`), the outcome is made certain first ({@link TransactionHooks.commitFailed}).
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
    if (atCommit) cause = this.hooks.commitFailed(cause)
    group.failure = cause
    // Even a member that had failed on its own hears of the commit: its answer may have rested
    // on writes of the group that are now gone.
    for (const member of group.members) member.reject(cause)
  }
}
