/**
 * The QUEUED jobs of each queue and priority are kept in memory in pick order (job-tally.ts,
 * queued-range.ts), and a pick reads only the rows it may take, by their key (pick.ts), and
 * none it holds in memory (queued-rows.ts): a commit offering its new job to many waiting claims
 * reads no row, and a range with nothing eligible is never read. A job written as QUEUED is in reach at once, and one a
 * rolled-back savepoint had taken is back in its place. A pick's first read is sized to the jobs
 * it means to take.
 *
 * White-box by purpose: the kept ranges and rows are the engine's memory, read through engineContext.
 */
import type { Statement } from 'better-sqlite3'
import { afterEach, describe, expect, test } from 'vitest'
import { engineContext } from '../../src-main/engine/internals'
import { QueuedRange } from '../../src-main/engine/memory/queued-range'
import { SELECT_JOBS } from '../../src-main/engine/store/rows'
import { Dispatch } from '../../src-main/dispatch/dispatch'
import { aJob, seededRandom, setup } from '../helpers/engine'
import { database } from '../helpers/database'

let dispatch: Dispatch | undefined
afterEach(() => dispatch?.close())

const PICK_ROWS = `${SELECT_JOBS} WHERE seq IN (`

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

test('a commit that offers its one new job to eight waiting claims takes its row from memory and reads nothing of the queue', async () => {
  const { engine } = setup()
  dispatch = new Dispatch(engine)
  const claims = Array.from({ length: 8 }, (_, i) => dispatch!.claim({ worker_id: `w${i}`, streams: ['default'], max_wait_ms: 5_000 }, () => {}))
  const reads = await countStatements(database(engine).prepare('SELECT 1'), 'all', PICK_ROWS, () => engine.run(() => engine.submit(aJob())))
  // The first waiter takes the job's row as the submit wrote it; the queue then holds nothing
  // eligible, and the seven others read nothing. Before the rows in memory it was 1 read; before
  // the tally, 5 ranges read (the empty ones once each); before the notes of empty ranges, 3 + 7 × 4.
  expect(reads).toBe(0)
  const granted = await Promise.race(claims)
  expect(granted.granted).toBe(true)
  dispatch.close()
  expect((await Promise.all(claims)).filter((claim) => claim.granted)).toHaveLength(1)
})

test('a job submitted to eight waiting claims is leased in its submit, and the seven others are denied without a savepoint', async () => {
  const { engine } = setup()
  dispatch = new Dispatch(engine)
  const claims = Array.from({ length: 8 }, (_, i) => dispatch!.claim({ worker_id: `w${i}`, streams: ['default'], max_wait_ms: 5_000 }, () => {}))
  await new Promise((resolve) => setImmediate(resolve))
  engine.flush() // the claims' own group commits (nobody waits for it: it would wait ~2 ms for the next operation)
  const savepoints = await countStatements(database(engine).prepare('SELECT 1'), 'run', 'SAVEPOINT', () => engine.run(() => engine.submit(aJob())))
  // The first waiter takes the job in its submit (grants.ts grantOnSubmit), which is the first
  // verb of its group and takes none; the queue then holds no QUEUED job, so the seven others
  // are denied from memory at the commit. (Before the lease at the submit: 1, the first waiter's.)
  expect(savepoints).toBe(0)
  dispatch.close()
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

test('a job submitted into a range found empty is in reach in the same transaction', async () => {
  const { engine } = setup()
  const second = await engine.run(() => {
    expect(engine.claimBatch({ worker_id: 'a', queues: ['default'] }, 1).granted).toEqual([])
    engine.submit(aJob())
    return engine.claimBatch({ worker_id: 'b', queues: ['default'] }, 1)
  })
  expect(second.granted).toHaveLength(1)
})

test('a failed job requeued into a range found empty is in reach in the same transaction', async () => {
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

test('a savepoint rolled back puts the job it granted back in its range', () => {
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
  engineContext(engine).queuedRows.clear() // as after a start: no row is in memory, each is read
  const proto = Object.getPrototypeOf(database(engine).prepare('SELECT 1')) as { all: (...params: unknown[]) => unknown[] }
  const original = proto.all
  let rows = 0
  proto.all = function (this: Statement, ...params: unknown[]) {
    const result = original.apply(this, params)
    if (this.source.includes(PICK_ROWS)) rows += result.length
    return result
  }
  try {
    expect(engine.claimBatch({ worker_id: 'w', queues: ['default'] }, 32).granted).toHaveLength(32)
  } finally {
    proto.all = original
  }
  expect(rows).toBe(32)
})

describe('a queued range (the pick order in memory) against a sorted list of its jobs', () => {
  /** The model: the live keys, sorted by (eligible_at, seq). */
  const sorted = (keys: Map<number, number>) => [...keys].sort(([sa, ea], [sb, eb]) => ea - eb || sa - sb)

  test('random adds (mostly at the end), removals (mostly at the front) and returns keep its order, pages and next time', () => {
    const random = seededRandom(11)
    const range = new QueuedRange()
    const model = new Map<number, number>() // seq → eligible_at
    let seq = 0
    let now = 1_000
    for (let step = 0; step < 5_000; step++) {
      const roll = random()
      if (roll < 0.45 || model.size === 0) {
        // A new job (eligible now), or a delayed or requeued one (later, or back in the past).
        const eligibleAt = roll < 0.35 ? now : now + Math.floor(random() * 200) - 50
        seq += 1
        range.add(eligibleAt, seq)
        model.set(seq, eligibleAt)
      } else if (roll < 0.9) {
        const order = sorted(model)
        const [s, e] = roll < 0.8 ? order[0]! : order[Math.floor(random() * order.length)]!
        range.remove(e, s)
        model.delete(s)
      } else {
        now += Math.floor(random() * 20)
      }
      const eligible = sorted(model).filter(([, e]) => e <= now)
      expect(range.size).toBe(model.size)
      expect(range.hasEligible(now)).toBe(eligible.length > 0)
      const first = range.page(now, 16, null)
      expect(first).toEqual(eligible.slice(0, 16).map(([s]) => s))
      if (first.length === 16) {
        const last = eligible[15]!
        expect(range.page(now, 16, { eligibleAt: last[1], seq: last[0] })).toEqual(eligible.slice(16, 32).map(([s]) => s))
      }
      const later = sorted(model).find(([, e]) => e > now)
      expect(range.nextEligibleAfter(now)).toBe(later ? later[1] : null)
    }
  })

  test('removing a job it does not hold throws instead of losing count', () => {
    const range = new QueuedRange()
    range.add(10, 1)
    expect(() => range.remove(10, 2)).toThrow(/not in it/)
    expect(() => range.remove(11, 1)).toThrow(/not in it/)
    range.remove(10, 1)
    expect(() => range.remove(10, 1)).toThrow(/not in it/)
    expect(range.size).toBe(0)
  })
})
