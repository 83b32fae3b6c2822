/**
 * The transaction unit's modes and moves (src-main/engine/store/transaction.ts), white-box: the unit
 * is the point. The engine's verbs through it are tested by group-commit.test.ts and the model
 * test; here, over a bare table, each move the unit allows and each it refuses.
 */
import Database from 'better-sqlite3'
import { describe, expect, test } from 'vitest'
import type { EngineEvent } from '../../src-main/engine/rules/events'
import { type TransactionHooks, TransactionUnit } from '../../src-main/engine/store/transaction'

function setup(hooks: Partial<TransactionHooks> = {}, groupWaitMs = 0) {
  const db = new Database(':memory:')
  db.exec('CREATE TABLE t (v INTEGER UNIQUE)')
  const committed: EngineEvent[][] = []
  const unit = new TransactionUnit(db, { groupMaxOperations: 256, groupMaxMs: 1_000, groupWaitMs }, {
    beforeCommit: () => {},
    committed: (events) => committed.push(events),
    afterCommit: () => {},
    rolledBack: () => {},
    commitFailed: (error) => error,
    ...hooks,
  })
  const insert = (v: number) => unit.transact(() => db.prepare('INSERT INTO t (v) VALUES (?)').run(v))
  const values = () => (db.prepare('SELECT v FROM t ORDER BY v').pluck().all() as number[])
  return { db, unit, insert, values, committed }
}

describe('the transaction unit', () => {
  test('a verb called on its own is its own transaction: committed when it returns', () => {
    const { db, unit, insert, values } = setup()
    expect(unit.transact(() => unit.current)).toBe('body')
    insert(1)
    expect(db.inTransaction).toBe(false)
    expect(values()).toEqual([1])
    expect(() => insert(1)).toThrow(/UNIQUE/)
    expect(db.inTransaction).toBe(false)
  })

  test("a group's operations share one commit, and a failing verb undoes only itself, the group's first one too", async () => {
    const { unit, insert, values } = setup()
    const before = unit.commits
    const first = unit.runGrouped(() => {
      insert(1)
      insert(1) // refused: undoes only itself
    })
    const second = unit.runGrouped(() => insert(2))
    await expect(first).rejects.toThrow(/UNIQUE/)
    await second
    expect(values()).toEqual([1, 2])
    expect(unit.commits - before).toBe(1)
  })

  test("the group's first verb, run without a savepoint, is undone alone when it fails", async () => {
    const { unit, insert, values } = setup()
    insert(1)
    const failing = unit.runGrouped(() => insert(1))
    const next = unit.runGrouped(() => insert(2))
    await expect(failing).rejects.toThrow(/UNIQUE/)
    await next
    expect(values()).toEqual([1, 2])
  })

  test('afterCommit hears every commit, plain or grouped, with events or without, and never a rollback', async () => {
    let heard = 0
    const { unit, insert } = setup({ afterCommit: () => (heard += 1) })
    insert(1) // a plain transaction, no events
    expect(heard).toBe(1)
    await Promise.all([unit.runGrouped(() => insert(2)), unit.runGrouped(() => insert(3))]) // one group
    expect(heard).toBe(2)
    expect(() => insert(1)).toThrow(/UNIQUE/) // rolled back
    expect(heard).toBe(2)
    expect(unit.commits).toBe(2)
  })

  test('nothing is answered before COMMIT: an operation settles only once its group has committed', async () => {
    const { db, unit, insert } = setup()
    let settled = false
    const op = unit.runGrouped(() => insert(1)).then(() => (settled = true))
    expect(unit.current).toBe('group')
    await Promise.resolve()
    expect(settled).toBe(false)
    expect(db.inTransaction).toBe(true)
    await op
    expect(db.inTransaction).toBe(false)
  })

  test('a group cannot be run or committed from inside one of its operations', async () => {
    const { unit } = setup()
    let inner: unknown
    await unit.runGrouped(() => {
      try {
        void unit.runGrouped(() => 0)
      } catch (error) {
        inner = error
      }
    })
    expect(String(inner)).toMatch(/run inside an operation/)
    let flushed: unknown
    await unit.runGrouped(() => {
      try {
        unit.flush()
      } catch (error) {
        flushed = error
      }
    })
    expect(String(flushed)).toMatch(/cannot commit from operation/)
  })

  test('settle, attempt and onRollback need a transaction in progress', () => {
    const { unit } = setup()
    expect(() => unit.settle(() => 0)).toThrow(/outside a transaction/)
    expect(() => unit.attempt(() => 0)).toThrow(/outside a transaction/)
    expect(() => unit.onRollback(() => {})).toThrow(/outside a transaction/)
  })

  test('a read from outside commits the open group first: only committed state is seen outside a group', async () => {
    const { db, unit, insert } = setup()
    const op = unit.runGrouped(() => insert(1))
    expect(db.inTransaction).toBe(true)
    unit.beforeUse()
    expect(db.inTransaction).toBe(false)
    await op
  })

  describe('a group nobody waits for (commitMayWait) stays open past its turn', () => {
    const aTurn = () => new Promise((resolve) => setImmediate(resolve))
    /** An operation that writes `v` and says nobody waits for its commit. */
    const unwaited = (unit: TransactionUnit, insert: (v: number) => unknown, v: number) =>
      unit.runGrouped(() => {
        insert(v)
        unit.commitMayWait()
      })

    test('the next operation joins it, and the two commit once, at the end of that operation\'s turn', async () => {
      const { db, unit, insert, values } = setup({}, 60_000)
      const before = unit.commits
      let firstSettled = false
      const first = unwaited(unit, insert, 1).then(() => (firstSettled = true))
      await aTurn()
      await aTurn()
      expect(db.inTransaction).toBe(true)
      expect(firstSettled).toBe(false) // nothing is answered before the commit, however late it comes
      await unit.runGrouped(() => insert(2))
      await first
      expect(unit.commits - before).toBe(1)
      expect(db.inTransaction).toBe(false)
      expect(values()).toEqual([1, 2])
    })

    test('it commits alone once groupWaitMs has passed', async () => {
      const { db, unit, insert, values } = setup({}, 20)
      const started = performance.now()
      await unwaited(unit, insert, 1)
      expect(performance.now() - started).toBeGreaterThanOrEqual(19)
      expect(db.inTransaction).toBe(false)
      expect(values()).toEqual([1])
    })

    test('a read from outside commits it at once', async () => {
      const { db, unit, insert } = setup({}, 60_000)
      const op = unwaited(unit, insert, 1)
      await aTurn()
      unit.beforeUse()
      expect(db.inTransaction).toBe(false)
      await op
    })

    test('an operation that says so and then fails is waited for: its error is answered with its turn', async () => {
      const { unit, insert } = setup({}, 60_000)
      insert(1)
      const failing = unit.runGrouped(() => {
        unit.commitMayWait()
        insert(1)
      })
      await expect(failing).rejects.toThrow(/UNIQUE/)
    })

    test('one operation somebody waits for in the group, and it commits with its turn; with groupWaitMs 0 every group does', async () => {
      for (const [groupWaitMs, waited] of [[60_000, true], [0, false]] as const) {
        const { unit, insert, values } = setup({}, groupWaitMs)
        const ops = [unwaited(unit, insert, 1), ...(waited ? [unit.runGrouped(() => insert(2))] : [])]
        await Promise.all(ops)
        expect(values()).toEqual(waited ? [1, 2] : [1])
      }
    })
  })

  test('memory changes are undone with the savepoint they were made in', async () => {
    const { unit, insert } = setup()
    const memory: number[] = []
    const remember = (v: number) =>
      unit.transact(() => {
        memory.push(v)
        unit.onRollback(() => memory.pop())
        insert(v)
      })
    await expect(
      unit.runGrouped(() => {
        remember(1)
        remember(1) // its push is undone with its savepoint
      }),
    ).rejects.toThrow(/UNIQUE/)
    expect(memory).toEqual([1])
  })

  test('a group lost inside an operation leaves the unit idle: the next operation opens a new group', async () => {
    const { db, unit, insert, values } = setup()
    const lost = unit.runGrouped(() => {
      unit.transact(() => {
        db.prepare('ROLLBACK').run() // as SQLite does on some I/O errors: the transaction is gone
        throw new Error('disk I/O error')
      })
    })
    await expect(lost).rejects.toThrow(/disk I\/O error/)
    expect(unit.current).toBe('idle')
    await unit.runGrouped(() => insert(7))
    expect(values()).toEqual([7])
    expect(unit.insideOperation).toBe(false)
  })

  test('before-commit work joins the commit: a verb there is part of it', async () => {
    const setupDone = setup({
      beforeCommit: () => {
        if (!added) {
          added = true
          setupDone.unit.transact(() => setupDone.db.prepare('INSERT INTO t (v) VALUES (100)').run())
        }
      },
    })
    let added = false
    const { unit, insert, values, committed } = setupDone
    const events = [{ id: 1 } as EngineEvent]
    await unit.runGrouped(() => {
      insert(1)
      unit.transact(() => unit.writing().events.push(...events))
    })
    expect(values()).toEqual([1, 100])
    expect(committed).toEqual([events])
  })
})
