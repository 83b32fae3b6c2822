/**
 * The Redis outbox's count of each queue's messages (engine/store/outbox.ts `countsByQueue`),
 * which the relay counts each queue stream against every 5 s, is kept in memory: counted from the
 * table once, as the outbox is made, then by the code that inserts and deletes its rows. It must
 * always be the table's: after the inserts and deletes of a job's life, after the fill of a data
 * dir that ran without Redis, after a verb refused under its savepoint, a batch item that fails, a
 * transaction that rolls back, and after a restart. A count that drifted from the table would
 * make the relay find a stream out of step that is not (a reconciliation every 5 s), or miss one
 * that is.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { SECOND } from '../../src-main/engine/rules/clock'
import type { Engine, OutboxFillCursor, OutboxFillStep } from '../../src-main/engine'
import { engineContext } from '../../src-main/engine/internals'
import { database, sql } from '../helpers/database'
import { aJob, seededRandom, setup } from '../helpers/engine'

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

const QUEUES = ['default', 'mail', 'render']

function aDatabaseFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-outbox-counts-'))
  dirs.push(dir)
  return join(dir, 'leasehold.db')
}

/** A fresh GROUP BY of the outbox table, as queue → rows (queues with none left out, as the counts leave them). */
function tableCounts(engine: Engine): Record<string, number> {
  const rows = sql(engine).all<{ queue: string; n: number }>('SELECT queue, COUNT(*) AS n FROM redis_outbox GROUP BY queue')
  return Object.fromEntries(rows.map((row) => [row.queue, row.n]))
}

function expectCountsAreTheTable(engine: Engine, when = ''): void {
  expect(Object.fromEntries(engine.outbox().countsByQueue()), when).toEqual(tableCounts(engine))
}

const reportOf = (g: { job_id: string; attempt_id: string; lease_token: string }, worker: string) => ({
  job_id: g.job_id,
  attempt_id: g.attempt_id,
  lease_token: g.lease_token,
  worker_id: worker,
})

describe("the outbox's count of each queue's messages", () => {
  test('equals a fresh GROUP BY of the outbox table after every insert and delete of a random walk of submits, claims, completions, failures, requeues, cancels and retries', () => {
    const { engine, clock } = setup({ total_units: 6, config: { maxAttempts: 2, leaseTtlS: 5 } })
    engine.outbox()
    const next = seededRandom(11)
    const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!
    const jobIds: string[] = []
    let everSeveralQueues = 0
    let everDeleted = 0
    for (let step = 0; step < 400; step++) {
      const held = [...engineContext(engine).activeLeases.all()]
      const someJob = jobIds.length > 0 ? pick(jobIds) : undefined
      const before = Object.values(tableCounts(engine)).reduce((sum, n) => sum + n, 0)
      const choices: (() => unknown)[] = [
        () => jobIds.push(engine.submit(aJob({ queue: pick(QUEUES) })).job.id),
        () => jobIds.push(engine.submit(aJob({ queue: pick(QUEUES), delay_ms: Math.floor(next() * 20) * SECOND })).job.id),
        () => engine.claimBatch({ worker_id: pick(['w1', 'w2']) }, 1 + Math.floor(next() * 3)),
        () => clock.advance(Math.floor(next() * 8) * SECOND),
        () => engine.reap(),
      ]
      if (someJob) choices.push(() => engine.cancel(someJob), () => engine.retry(someJob), () => engine.runNow(someJob))
      if (held.length > 0) {
        const { lease, job } = pick(held)
        const report = reportOf({ job_id: job.id, attempt_id: lease.attempt_id, lease_token: lease.token }, lease.worker_id)
        choices.push(
          () => engine.complete(report),
          () => engine.fail({ ...report, error: { message: 'boom', retryable: next() < 0.7 } }),
        )
      }
      try {
        pick(choices)()
      } catch {
        // a refusal (409, 404…) is part of the walk
      }
      expectCountsAreTheTable(engine, `step ${step}`)
      const counts = tableCounts(engine)
      if (Object.keys(counts).length > 1) everSeveralQueues += 1
      if (Object.values(counts).reduce((sum, n) => sum + n, 0) < before) everDeleted += 1
    }
    // The walk tested something: rows of several queues at once, and rows deleted.
    expect(Math.min(everSeveralQueues, everDeleted), JSON.stringify({ everSeveralQueues, everDeleted })).toBeGreaterThan(30)
  })

  test('equals a fresh GROUP BY after a verb refused under its savepoint in a group, a batch whose failing item undoes the others before each runs alone, and a transaction that rolls back', async () => {
    const { engine } = setup()
    engine.outbox()
    engine.submit(aJob({ queue: 'mail' }))
    const held = engine.claimBatch({ worker_id: 'w1' }, 1).granted[0]!
    // One group: a submit, then a completion refused (wrong attempt): only the refusal is undone.
    const submitted = engine.run(() => engine.submit(aJob({ queue: 'render' })))
    const refused = engine.run(() => engine.complete({ ...reportOf(held, 'w1'), attempt_id: 'not-this-attempt' }))
    await expect(refused).rejects.toMatchObject({ code: 'attempt_mismatch' })
    await submitted
    expectCountsAreTheTable(engine, 'after the refusal')
    expect(Object.fromEntries(engine.outbox().countsByQueue())).toEqual({ mail: 1, render: 1 })

    // A batch whose second item fails: all three ran under one savepoint, undone, then each alone.
    const items = await engine.run(() => engine.submitMany([aJob({ queue: 'render' }), aJob({ queue: 'render', cost_units: -1 }), aJob({ queue: 'mail' })]))
    expect(items.map((item) => item.ok)).toEqual([true, false, true])
    expectCountsAreTheTable(engine, 'after the batch')
    expect(Object.fromEntries(engine.outbox().countsByQueue())).toEqual({ mail: 2, render: 2 })

    // A transaction that submits, completes the leased job (its row deleted) and cancels a queued
    // one, then throws: the rows and the counts roll back together.
    const queued = engine.submit(aJob({ queue: 'render' })).job
    expect(() =>
      engineContext(engine).transact(() => {
        engine.submit(aJob({ queue: 'other' }))
        engine.complete(reportOf(held, 'w1'))
        engine.cancel(queued.id)
        throw new Error('fault after the writes')
      }),
    ).toThrow('fault after the writes')
    expectCountsAreTheTable(engine, 'after the rollback')
    expect(Object.fromEntries(engine.outbox().countsByQueue())).toEqual({ mail: 2, render: 3 })
  })

  test('equals a fresh GROUP BY after each step of the fill of a data dir that ran without Redis, and after a step that rolls back', async () => {
    const path = aDatabaseFile()
    // With Redis: three jobs get their rows.
    const withRedis = setup({ path }).engine
    withRedis.outbox()
    const ids = [withRedis.submit(aJob({ queue: 'mail', max_attempts: 3 })).job.id, withRedis.submit(aJob({ max_attempts: 3 })).job.id]
    withRedis.submit(aJob({ queue: 'render' }))
    database(withRedis).close()
    // Without Redis: one job ends, one is queued again under a new message, and more are submitted.
    const without = setup({ path }).engine
    const grants = without.claimBatch({ worker_id: 'w1', queues: ['mail', 'default'] }, 2).granted
    const done = grants.find((g) => g.job_id === ids[0])!
    const requeued = grants.find((g) => g.job_id === ids[1])!
    without.complete(reportOf(done, 'w1'))
    without.fail({ ...reportOf(requeued, 'w1'), error: { message: 'again', retryable: true } })
    for (const queue of QUEUES) without.submit(aJob({ queue }))
    database(without).close()

    const { engine } = setup({ path })
    const outbox = engine.outbox()
    expectCountsAreTheTable(engine, 'as the outbox is made')
    // A step that fails after its writes: its rows and its counts are undone together.
    await expect(
      engine.run(() =>
        engineContext(engine).transact(() => {
          outbox.fillStep({ phase: 'rows', after: 0 })
          outbox.fillStep({ phase: 'jobs', after: 0 })
          throw new Error('fault in the fill')
        }),
      ),
    ).rejects.toThrow('fault in the fill')
    expectCountsAreTheTable(engine, 'after the failed step')
    let added = 0
    let removed = 0
    for (let cursor: OutboxFillCursor | null = { phase: 'rows', after: 0 }; cursor !== null; ) {
      const from: OutboxFillCursor = cursor
      const step: OutboxFillStep = await engine.run(() => outbox.fillStep(from))
      added += step.added
      removed += step.removed
      cursor = step.next
      expectCountsAreTheTable(engine, `after the step from ${JSON.stringify(from)}`)
    }
    // The fill did both: the done job's and the requeued job's old rows went, their new messages came.
    expect({ added, removed }).toEqual({ added: 4, removed: 2 })
    expect(Object.fromEntries(outbox.countsByQueue())).toEqual({ default: 2, mail: 1, render: 2 })
  })

  test('equals a fresh GROUP BY when the host starts again on its data dir, rows the last run left counted', () => {
    const path = aDatabaseFile()
    const first = setup({ path }).engine
    first.outbox()
    for (const queue of QUEUES) for (let i = 0; i < 3; i++) first.submit(aJob({ queue }))
    const held = first.claimBatch({ worker_id: 'w1', queues: ['mail'] }, 2).granted
    for (const g of held) first.complete(reportOf(g, 'w1'))
    expectCountsAreTheTable(first, 'before the restart')
    database(first).close()

    const second = setup({ path }).engine
    expectCountsAreTheTable(second, 'after the restart')
    expect(Object.fromEntries(second.outbox().countsByQueue())).toEqual({ default: 3, mail: 1, render: 3 })
  })
})
