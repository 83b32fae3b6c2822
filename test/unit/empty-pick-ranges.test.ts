/**
 * A pick reads no range (a queue and priority) that holds no QUEUED job (the tally in memory,
 * job-tally.ts), and a transaction remembers the ranges it read and found empty, so that a
 * commit offering its new job to many waiting claims reads each range at most once (context.ts
 * `isEmptyRange`, pick.ts `rangeOf`). What it remembers is forgotten whenever a job may have
 * come back into a range: a job written as QUEUED, a savepoint rolled back. And a pick's first
 * read is sized to the jobs it means to take.
 */
import type { Statement } from 'better-sqlite3'
import { afterEach, expect, test } from 'vitest'
import { engineContext } from '../../src-main/engine/internals'
import { ClaimWaiters } from '../../src-main/workers/claim-waiters'
import { aJob, setup } from '../helpers/engine'

let waiters: ClaimWaiters | undefined
afterEach(() => waiters?.close())

const PICK_RANGE = "state = 'QUEUED' AND queue = ? AND priority = ?"

/** Counts the statements of `method` (all, run) whose SQL includes `sql` while `fn` runs. */
async function countStatements(statement: Statement, method: 'all' | 'run', sql: string, fn: () => Promise<unknown>): Promise<number> {
  const proto = Object.getPrototypeOf(statement) as Record<'all' | 'run', (...params: unknown[]) => unknown>
  const original = proto[method]
  let count = 0
  proto[method] = function (this: Statement, ...params: unknown[]) {
    if (this.source.includes(sql)) count += 1
    return original.apply(this, params)
  }
  try {
    await fn()
    return count
  } finally {
    proto[method] = original
  }
}

test('a commit that offers its one new job to eight waiting claims reads only the range that holds it, once', async () => {
  const { engine } = setup()
  waiters = new ClaimWaiters(engine)
  const claims = Array.from({ length: 8 }, (_, i) => waiters!.claim({ worker_id: `w${i}`, queues: ['default'] }, { maxWaitMs: 5_000 }))
  const reads = await countStatements(engineContext(engine).db.prepare('SELECT 1'), 'all', PICK_RANGE, () => engine.run(() => engine.submit(aJob())))
  // The first waiter reads NORMAL (the job); URGENT, HIGH and LOW hold no QUEUED job and are
  // not read, nor is NORMAL once the job is taken. Before the tally it was 5 (the empty ranges
  // read once each); before the notes of empty ranges, 3 + 7 × 4.
  expect(reads).toBe(1)
  const granted = await Promise.race(claims)
  expect(granted.granted).toBe(true)
  waiters.close()
  expect((await Promise.all(claims)).filter((claim) => claim.granted)).toHaveLength(1)
})

test('a waiting claim that the ranges already found empty deny is asked without a savepoint of its own', async () => {
  const { engine } = setup()
  waiters = new ClaimWaiters(engine)
  const claims = Array.from({ length: 8 }, (_, i) => waiters!.claim({ worker_id: `w${i}`, queues: ['default'] }, { maxWaitMs: 5_000 }))
  await new Promise((resolve) => setTimeout(resolve, 10)) // the claims' own group has committed
  const savepoints = await countStatements(engineContext(engine).db.prepare('SELECT 1'), 'run', 'SAVEPOINT', () => engine.run(() => engine.submit(aJob())))
  // The submit's, and the first waiter's (it takes the job); the queue then holds no QUEUED job,
  // so the seven others are denied from memory (it was 3: the second waiter read the range).
  expect(savepoints).toBe(2)
  waiters.close()
  expect((await Promise.all(claims)).filter((claim) => claim.granted)).toHaveLength(1)
})

test('a claim with no capacity left is denied as before, without a walk of the queue', () => {
  const { engine } = setup({ total_units: 1 })
  engine.submit(aJob())
  engine.submit(aJob())
  expect(engine.claimBatch({ worker_id: 'a', queues: ['default'] }, 1).granted).toHaveLength(1)
  const denied = engine.claimBatch({ worker_id: 'b', queues: ['default'] }, 1)
  expect(denied.granted).toEqual([])
  expect(denied.denial).toMatchObject({ granted: false, reason: expect.stringMatching(/capacity|units/i) })
})

test('a range found empty is read again once a job is submitted into it in the same transaction', async () => {
  const { engine } = setup()
  const second = await engine.run(() => {
    expect(engine.claimBatch({ worker_id: 'a', queues: ['default'] }, 1).granted).toEqual([])
    engine.submit(aJob())
    return engine.claimBatch({ worker_id: 'b', queues: ['default'] }, 1)
  })
  expect(second.granted).toHaveLength(1)
})

test('a range found empty is read again once a failed job is requeued into it in the same transaction', async () => {
  const { engine } = setup({ config: { backoff: { baseMs: 0, maxMs: 0 } } })
  engine.submit(aJob())
  const [held] = engine.claimBatch({ worker_id: 'a', queues: ['default'] }, 1).granted
  const retried = await engine.run(() => {
    expect(engine.claimBatch({ worker_id: 'b', queues: ['default'] }, 1).granted).toEqual([])
    engine.fail({ job_id: held!.job_id, attempt_id: held!.attempt_id, lease_token: held!.lease_token, worker_id: 'a', error: { code: 'flaky', message: 'try again', retryable: true } })
    return engine.claimBatch({ worker_id: 'c', queues: ['default'] }, 1)
  })
  expect(retried.granted.map((claim) => claim.job_id)).toEqual([held!.job_id])
})

test('a savepoint rolled back forgets the ranges it found empty: the grant it undid is in reach again', () => {
  const { engine } = setup()
  const { job } = engine.submit(aJob())
  const ctx = engineContext(engine)
  const third = ctx.transact(() => {
    ctx.attempt(() => {
      expect(engine.claimBatch({ worker_id: 'a', queues: ['default'] }, 1).granted).toHaveLength(1)
      expect(engine.claimBatch({ worker_id: 'b', queues: ['default'] }, 1).granted).toEqual([]) // the job's range, now empty
      throw new Error('undo both claims')
    })
    return engine.claimBatch({ worker_id: 'c', queues: ['default'] }, 1)
  })
  expect(third.granted.map((claim) => claim.job_id)).toEqual([job.id])
})

test("a worker's batch claim of 32 (its free slots) reads 32 rows of its range, not a page of 64", () => {
  const { engine } = setup()
  for (let i = 0; i < 100; i++) engine.submit(aJob())
  const proto = Object.getPrototypeOf(engineContext(engine).db.prepare('SELECT 1')) as { all: (...params: unknown[]) => unknown[] }
  const original = proto.all
  let rows = 0
  proto.all = function (this: Statement, ...params: unknown[]) {
    const result = original.apply(this, params)
    if (this.source.includes(PICK_RANGE)) rows += result.length
    return result
  }
  try {
    expect(engine.claimBatch({ worker_id: 'w', queues: ['default'] }, 32).granted).toHaveLength(32)
  } finally {
    proto.all = original
  }
  expect(rows).toBe(32)
})
