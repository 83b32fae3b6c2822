/**
 * The jobs the engine counts in memory (engine/memory/job-tally.ts) — the QUEUED ones per queue and
 * priority, in pick order, the waiting ones per cost — are always the table's: after every verb that makes a
 * job QUEUED or waiting or takes it out, after a verb that fails under its savepoint, after a
 * transaction that rolls back, and after a restart. The pick path skips a range the tally holds
 * empty, so a count that fell short would leave a job that no worker is ever given; the
 * snapshot's `over_capacity` is read from the counts per cost.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { SECOND } from '../../src-main/engine/rules/clock'
import type { Engine } from '../../src-main/engine'
import type { JobRow } from '../../src-main/db/schema'
import { engineContext } from '../../src-main/engine/internals'
import { SELECT_JOBS } from '../../src-main/engine/store/rows'
import { aJob, seededRandom, setup } from '../helpers/engine'

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

const QUEUES = ['default', 'mail', 'render']
const PRIORITIES = ['LOW', 'NORMAL', 'HIGH', 'URGENT'] as const

const WAITING = "state IN ('QUEUED', 'CLAIMED', 'PREPARING', 'LEASE_PENDING', 'BLOCKED')"

/** The table's QUEUED jobs per queue and priority rank, and the tally's, as `queue rank` → count. */
function counts(engine: Engine): { table: Record<string, number>; tally: Record<string, number> } {
  const ctx = engineContext(engine)
  const rows = ctx.db
    .prepare("SELECT queue, priority, COUNT(*) AS n FROM jobs WHERE state = 'QUEUED' GROUP BY queue, priority")
    .all() as { queue: string; priority: number; n: number }[]
  const table = Object.fromEntries(rows.map((row) => [`${row.queue} ${row.priority}`, row.n]))
  const tally: Record<string, number> = {}
  for (const queue of ctx.jobTally.queues()) {
    for (let rank = 0; rank < 4; rank++) if (ctx.jobTally.count(queue, rank) !== 0) tally[`${queue} ${rank}`] = ctx.jobTally.count(queue, rank)
  }
  return { table, tally }
}

/** The tally, and what reads it (the snapshot, the queues' list), against queries of the table. */
function expectTallyIsTheTable(engine: Engine, when = ''): void {
  const { table, tally } = counts(engine)
  expect(tally, when).toEqual(table)
  const ctx = engineContext(engine)
  for (const key of Object.keys(table)) {
    const [queue, rank] = [key.slice(0, key.lastIndexOf(' ')), Number(key.slice(key.lastIndexOf(' ') + 1))]
    const inOrder = ctx.db
      .prepare("SELECT seq FROM jobs WHERE state = 'QUEUED' AND queue = ? AND priority = ? ORDER BY eligible_at, seq")
      .pluck()
      .all(queue, rank)
    expect(ctx.jobTally.range(queue, rank)!.page(Number.MAX_SAFE_INTEGER, 1e9, null), `${when}: the pick order of ${key}`).toEqual(inOrder)
  }
  const snapshot = engine.snapshot()
  expect(snapshot.jobs.queued, when).toBe(Object.values(table).reduce((sum, n) => sum + n, 0))
  const db = engineContext(engine).db
  for (const units of [0, 1, 2, 3, 5]) {
    const costing = db.prepare(`SELECT COUNT(*) FROM jobs WHERE ${WAITING} AND cost_units > ?`).pluck().get(units)
    expect(engineContext(engine).jobTally.waitingCosting(units), `${when}: waiting jobs costing more than ${units}`).toBe(costing)
  }
  const listed = Object.fromEntries(engine.listQueues().filter((q) => q.counts.QUEUED).map((q) => [q.queue, q.counts.QUEUED]))
  const perQueue = db.prepare("SELECT queue, COUNT(*) AS n FROM jobs WHERE state = 'QUEUED' GROUP BY queue").all() as { queue: string; n: number }[]
  expect(listed, `${when}: the queues' QUEUED counts`).toEqual(Object.fromEntries(perQueue.map((row) => [row.queue, row.n])))
  const total = engine.getCapacity().total_units
  expectKeptRowsAreTheTable(engine, when)
  expect(snapshot.jobs.over_capacity, when).toBe(db.prepare(`SELECT COUNT(*) FROM jobs WHERE ${WAITING} AND cost_units > ?`).pluck().get(total))
}

/**
 * Every row the engine keeps in memory for a pick (queued-rows.ts) is its job's row in the
 * table, and only QUEUED jobs have one. Returns how many rows it keeps.
 */
function expectKeptRowsAreTheTable(engine: Engine, when: string): number {
  const ctx = engineContext(engine)
  let kept = 0
  for (const row of ctx.db.prepare('SELECT * FROM jobs').all() as JobRow[]) {
    const inMemory = ctx.queuedRows.get(row.seq)
    if (inMemory === undefined) continue
    kept += 1
    expect(inMemory, `${when}: the row kept for job ${row.seq}`).toEqual(row)
  }
  return kept
}

describe('the tally of QUEUED and waiting jobs', () => {
  test('follows every verb that makes a job QUEUED or waiting or takes it out, step by step', () => {
    const { engine, clock } = setup({ total_units: 6, config: { maxAttempts: 2, claimTtlS: 5 } })
    const next = seededRandom(7)
    const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!
    const worker = () => `w${Math.floor(next() * 3)}`
    const jobIds: string[] = []
    let everQueued = 0
    let everOverCapacity = 0
    let everClaimed = 0
    let everKept = 0
    for (let step = 0; step < 500; step++) {
      const ctx = engineContext(engine)
      const active = [...ctx.activeLeases.all()]
      const held = active.length > 0 ? pick(active) : undefined
      const someJob = jobIds.length > 0 ? pick(jobIds) : undefined
      const choices: (() => unknown)[] = [
        () => jobIds.push(engine.submit(aJob({ queue: pick(QUEUES), priority: pick(PRIORITIES), cost_units: 1 + Math.floor(next() * 4) })).job.id),
        () => jobIds.push(engine.submit(aJob({ queue: pick(QUEUES), delay_ms: Math.floor(next() * 30) * SECOND })).job.id),
        () => engine.claimBatch({ worker_id: worker(), queues: [pick(QUEUES)] }, 1 + Math.floor(next() * 3)),
        () => engine.claimBatch({ worker_id: worker() }, 2),
        () => engine.claim({ worker_id: worker() }),
        () => engine.requestLease({ worker_id: worker() }),
        () => clock.advance(Math.floor(next() * 10) * SECOND),
        () => engine.reap(),
        () => engine.pauseQueue(pick(QUEUES)),
        () => engine.resumeQueue(pick(QUEUES)),
        () => engine.setCapacity({ total_units: 2 + Math.floor(next() * 5) }),
      ]
      if (someJob) {
        choices.push(
          () => engine.cancel(someJob),
          () => engine.retry(someJob),
          () => engine.runNow(someJob),
        )
      }
      if (held) {
        const { lease, job } = held
        const report = { job_id: job.id, attempt_id: lease.attempt_id, worker_id: lease.worker_id, lease_token: lease.token }
        choices.push(
          () => engine.complete({ ...report, result: { step } }),
          () => engine.fail({ ...report, error: { code: 'boom', retryable: next() < 0.7 } }),
          () => engine.release({ lease_id: lease.id, status: pick(['SUCCEEDED', 'FAILED'] as const) }),
          () => engine.expireLeasesOfWorker(lease.worker_id),
        )
      }
      try {
        pick(choices)()
      } catch {
        // a refusal (409, 404…) is part of the walk
      }
      expectTallyIsTheTable(engine, `step ${step}`)
      if (expectKeptRowsAreTheTable(engine, `step ${step}`) > 0) everKept += 1
      if (Object.keys(counts(engine).table).length > 1) everQueued += 1
      const { jobs } = engine.snapshot()
      if (jobs.over_capacity > 0) everOverCapacity += 1
      if (jobs.claimed > 0) everClaimed += 1
    }
    // The walk tested something: jobs sat QUEUED in several ranges with their rows in memory, cost
    // more than the total, and were claimed.
    expect(Math.min(everQueued, everOverCapacity, everClaimed, everKept), JSON.stringify({ everQueued, everOverCapacity, everClaimed, everKept })).toBeGreaterThan(50)
  })

  test('a verb refused under its savepoint in a group, and a transaction that rolls back, leave the tally and the rows in memory as the table', async () => {
    const { engine } = setup()
    engine.submit(aJob({ priority: 'HIGH' }))
    const held = engine.claimAndLease({ worker_id: 'w1' })
    if (!held.granted) throw new Error('not granted')
    // One group: a submit, then a completion refused (wrong attempt): only the refusal is undone.
    const submitted = engine.run(() => engine.submit(aJob({ queue: 'mail' })))
    const refused = engine.run(() => engine.complete({ job_id: held.job.id, attempt_id: 'not-this-attempt', worker_id: 'w1', lease_token: held.lease.token }))
    await expect(refused).rejects.toMatchObject({ code: 'attempt_mismatch' })
    await submitted
    expectTallyIsTheTable(engine)
    expect(engineContext(engine).jobTally.count('mail', 1)).toBe(1)

    // A transaction that submits and takes a job, and makes a delayed job run now (a QUEUED job's
    // row written, still QUEUED), then throws: the table, the tally and the rows in memory roll back.
    const delayed = engine.submit(aJob({ delay_ms: 60_000 })).job
    expect(() =>
      engineContext(engine).transact(() => {
        engine.submit(aJob({ priority: 'URGENT' }))
        engine.claimBatch({ worker_id: 'w2' }, 2)
        engine.runNow(delayed.id)
        throw new Error('fault after the claim')
      }),
    ).toThrow('fault after the claim')
    expectTallyIsTheTable(engine)
    expect(engineContext(engine).jobTally.count('mail', 1)).toBe(1)
    expect(engineContext(engine).jobTally.count('default', 3)).toBe(0)
  })

  test('is read back from the table when the engine starts again', () => {
    const dir = mkdtempSync(join(tmpdir(), 'leasehold-tally-'))
    dirs.push(dir)
    const path = join(dir, 'leasehold.db')
    const first = setup({ path })
    for (const queue of QUEUES) for (const priority of PRIORITIES) first.engine.submit(aJob({ queue, priority, cost_units: 2 }))
    first.engine.claimBatch({ worker_id: 'w1', queues: ['mail'] }, 3) // RUNNING: no longer waiting
    first.engine.claim({ worker_id: 'w2' }) // CLAIMED (the queue API): still waiting
    first.engine.setCapacity({ total_units: 1 }) // every waiting job now costs more than the total
    engineContext(first.engine).db.close()

    const second = setup({ path })
    expectTallyIsTheTable(second.engine)
    expect(second.engine.snapshot().jobs).toMatchObject({ queued: QUEUES.length * PRIORITIES.length - 4, claimed: 1, over_capacity: QUEUES.length * PRIORITIES.length - 3 })
  })

  test('a start reads the QUEUED jobs from the stored floor up, and an old job made QUEUED below that floor is counted after a restart', () => {
    const dir = mkdtempSync(join(tmpdir(), 'leasehold-tally-'))
    dirs.push(dir)
    const path = join(dir, 'leasehold.db')
    const first = setup({ path })
    const ctx = engineContext(first.engine)
    const old = first.engine.submit(aJob({ queue: 'mail' })).job
    first.engine.cancel(old.id)
    // A whole block of job seqs goes by (4,096), none of them left QUEUED: the next block's
    // reservation raises the floor past all of them.
    ctx.transact(() => {
      for (let i = 0; i < 4096; i++) first.engine.cancel(first.engine.submit(aJob()).job.id)
    })
    first.engine.submit(aJob({ queue: 'render' }))
    const floor = ctx.jobTally.storedFloor
    expect(floor).toBeGreaterThan(4096)
    // The retry makes the old job QUEUED again, far below the floor.
    first.engine.retry(old.id)
    expect(ctx.jobTally.storedFloor).toBeLessThan(floor)
    ctx.db.close()

    const second = setup({ path })
    expectTallyIsTheTable(second.engine)
    expect(engineContext(second.engine).jobTally.count('mail', 1)).toBe(1)
    expect(second.engine.claimBatch({ worker_id: 'w', queues: ['mail'] }, 1).granted.map((grant) => grant.job_id)).toEqual([old.id])
  })

  test('a job in a range the tally holds is given to a worker, a job in no range is never looked for', () => {
    const { engine } = setup()
    const ctx = engineContext(engine)
    const reads = () => {
      let n = 0
      const proto = Object.getPrototypeOf(ctx.db.prepare('SELECT 1')) as { all: (...p: unknown[]) => unknown }
      const original = proto.all
      proto.all = function (this: { source: string }, ...params: unknown[]) {
        if (this.source.includes(`${SELECT_JOBS} WHERE seq IN (`)) n += 1
        return original.apply(this, params)
      }
      return { count: () => n, restore: () => void (proto.all = original) }
    }
    const probe = reads()
    try {
      expect(engine.claimBatch({ worker_id: 'w1' }, 4).granted).toEqual([])
      expect(probe.count()).toBe(0) // nothing QUEUED anywhere: no range read
      engine.submit(aJob({ queue: 'render', priority: 'LOW' }))
      ctx.queuedRows.clear() // as after a start: the row is read, not taken from memory
      const granted = engine.claimBatch({ worker_id: 'w1' }, 4).granted
      expect(granted.map((grant) => grant.job_id)).toHaveLength(1)
      expect(probe.count()).toBe(1) // the row of render's LOW job, and no other read
    } finally {
      probe.restore()
    }
  })
})
