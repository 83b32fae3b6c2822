/**
 * The ACTIVE leases the engine keeps in memory (engine/memory/active-leases.ts) are always the
 * database's ACTIVE leases with their jobs, column for column, and the units in use are their
 * sum: after every verb that grants, extends or ends a lease or writes a leased job, after a
 * verb that fails under its savepoint, after a transaction that rolls back, and after a restart.
 *
 * White-box by purpose: the kept leases are the engine's memory, read through engineContext.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import type { JobRow, LeaseRow } from '../../src-main/db/schema'
import { SECOND } from '../../src-main/engine/rules/clock'
import type { Engine } from '../../src-main/engine'
import { aJob, seededRandom, setup } from '../helpers/engine'
import { leaseOrFail } from './support'
import { ACTIVE_FROM_KEY } from '../../src-main/engine/memory/active-leases'
import { engineContext } from '../../src-main/engine/internals'
import { holdsActiveLease } from '../../src-main/engine/reads/pick'
import { database } from '../helpers/database'

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

function expectMemoryIsTheDatabase(engine: Engine): void {
  const db = database(engine)
  const leases = db.prepare("SELECT * FROM leases WHERE state = 'ACTIVE' ORDER BY fence").all() as LeaseRow[]
  const jobs = leases.map((lease) => db.prepare('SELECT * FROM jobs WHERE id = ?').get(lease.job_id) as JobRow)
  const memory = [...engineContext(engine).activeLeases.all()].sort((a, b) => a.lease.fence - b.lease.fence)
  expect(memory.map((entry) => entry.lease)).toEqual(leases)
  expect(memory.map((entry) => entry.job)).toEqual(jobs)
  expect(engineContext(engine).activeLeases.units).toBe(leases.reduce((sum, lease) => sum + lease.cost_units, 0))
  expect(engine.getCapacity().leased).toBe(engineContext(engine).activeLeases.units)
  expectReadsOfMemoryAreTheDatabase(engine)
}

/**
 * What reads the ACTIVE leases from memory instead of an index answers what a query of the
 * database answers: the counts of LEASED and RUNNING jobs (snapshot, gauges, queues), the ACTIVE
 * leases (view, reaper's next moment, a worker's), and the listings of LEASED and RUNNING jobs.
 */
function expectReadsOfMemoryAreTheDatabase(engine: Engine): void {
  const db = database(engine)
  const count = (sql: string, ...params: unknown[]) => db.prepare(sql).pluck().get(...params) as number
  const activeJoin = "FROM leases JOIN jobs ON jobs.id = leases.job_id WHERE leases.state = 'ACTIVE'"
  const snapshot = engine.snapshot()
  expect(snapshot.leases.active).toBe(count("SELECT COUNT(*) FROM leases WHERE state = 'ACTIVE'"))
  expect(snapshot.jobs.leased).toBe(count(`SELECT COUNT(*) ${activeJoin} AND jobs.state = 'LEASED'`))
  expect(snapshot.jobs.running).toBe(count(`SELECT COUNT(*) ${activeJoin} AND jobs.state IN ('LEASED', 'RUNNING')`))
  expect(snapshot.jobs.queued).toBe(count("SELECT COUNT(*) FROM jobs WHERE state = 'QUEUED'"))
  const byQueue = db.prepare("SELECT queue, state, COUNT(*) AS n FROM jobs WHERE state NOT IN ('DONE') GROUP BY queue, state").all() as { queue: string; state: string; n: number }[]
  const queues = Object.fromEntries(engine.listQueues().map((summary) => [summary.queue, summary.counts]))
  for (const row of byQueue) expect(queues[row.queue]?.[row.state as keyof (typeof queues)[string]], `${row.queue} ${row.state}`).toBe(row.n)
  const expiries = db.prepare(`SELECT leases.id, leases.job_id, jobs.job_type ${activeJoin} ORDER BY leases.expires_at, leases.fence`).all()
  expect(engine.activeLeases().map(({ id, job_id, job_type }) => ({ id, job_id, job_type }))).toEqual(expiries)
  const soonest = count("SELECT MIN(at) FROM (SELECT MIN(expires_at) AS at FROM leases WHERE state = 'ACTIVE' UNION ALL SELECT MIN(claim_expires_at) FROM jobs)")
  expect(engine.nextDueAt()).toBe(soonest)
  for (const worker of ['w0', 'w1', 'w2']) {
    expect(holdsActiveLease(engineContext(engine), worker)).toBe(count("SELECT COUNT(*) FROM leases WHERE worker_id = ? AND state = 'ACTIVE'", worker) > 0)
  }
  for (const state of ['LEASED', 'RUNNING'] as const) {
    const listed = db.prepare(`SELECT jobs.id ${activeJoin} AND jobs.state = ? ORDER BY jobs.seq DESC`).pluck().all(state)
    expect(engine.listJobs({ state, limit: 500 }).jobs.map((job) => job.id), state).toEqual(listed)
  }
  const holding = db.prepare(`SELECT jobs.id ${activeJoin} AND jobs.state IN ('LEASED', 'RUNNING') ORDER BY jobs.seq DESC`).pluck().all()
  expect(engine.listJobs({ state: ['LEASED', 'RUNNING'], limit: 500 }).jobs.map((job) => job.id), 'LEASED and RUNNING').toEqual(holding)
}

describe('the ACTIVE leases in memory', () => {
  test('follow every verb that grants, extends or ends a lease or writes a leased job, step by step', () => {
    const { engine, clock } = setup({ total_units: 12 })
    const next = seededRandom(11)
    const pick = <T>(items: T[]): T | undefined => items[Math.floor(next() * items.length)]
    const active = () => [...engineContext(engine).activeLeases.all()]
    const steps: ((() => unknown) | null)[] = []
    let stepsHolding = 0
    for (let step = 0; step < 400; step++) {
      const entry = pick(active())
      const choices: (() => unknown)[] = [
        () => engine.submit(aJob({ cost_units: 1 + Math.floor(next() * 3), max_attempts: 2 })),
        () => engine.requestLease({ worker_id: `w${Math.floor(next() * 3)}` }),
        () => engine.claim({ worker_id: `w${Math.floor(next() * 3)}` }),
        () => engine.claimBatch({ worker_id: `w${Math.floor(next() * 3)}` }, 1 + Math.floor(next() * 3)),
        () => clock.advance(Math.floor(next() * 20) * SECOND),
        () => engine.reap(),
      ]
      if (entry) {
        const { lease, job } = entry
        const report = { job_id: job.id, attempt_id: lease.attempt_id, worker_id: lease.worker_id, lease_token: lease.token }
        choices.push(
          () => engine.heartbeat({ lease_id: lease.id, progress: next() }),
          () => engine.heartbeatByToken({ job_id: job.id, worker_id: lease.worker_id, lease_token: lease.token, note: `step ${step}` }),
          () => engine.complete({ ...report, result: { step }, progress: 1 }),
          () => engine.fail({ ...report, error: { code: 'boom', retryable: true } }),
          () => engine.release({ lease_id: lease.id, status: 'FAILED' }),
          () => engine.cancel(job.id),
          () => engine.expireLeasesOfWorker(lease.worker_id),
          // Refused verbs change nothing: another worker's token, a finished attempt.
          () => engine.heartbeatByToken({ job_id: job.id, worker_id: 'intruder', lease_token: lease.token }),
        )
      }
      const action = pick(choices)!
      steps.push(action)
      try {
        action()
      } catch {
        // a refusal (409, 403…) is part of the walk
      }
      expectMemoryIsTheDatabase(engine)
      if (active().length > 0) stepsHolding += 1
    }
    expect(stepsHolding).toBeGreaterThan(100) // the walk held leases most of the time, so it tested something
  })

  test('a verb refused under its savepoint in a group, and a group that fails, leave memory as the database', async () => {
    const { engine } = setup()
    engine.submit(aJob())
    engine.submit(aJob())
    const held = engine.claimAndLease({ worker_id: 'w1' })
    if (!held.granted) throw new Error('not granted')
    // One group: a grant, then a completion refused after the grant (wrong attempt): only the refusal is undone.
    const grant = engine.run(() => engine.claimAndLease({ worker_id: 'w2' }))
    const refused = engine.run(() =>
      engine.complete({ job_id: held.job.id, attempt_id: 'not-this-attempt', worker_id: 'w1', lease_token: held.lease.token }),
    )
    await expect(refused).rejects.toMatchObject({ code: 'attempt_mismatch' })
    await expect(grant).resolves.toMatchObject({ granted: true })
    expectMemoryIsTheDatabase(engine)
    expect(engineContext(engine).activeLeases.size).toBe(2)

    // A transaction that grants and extends, then throws: the database and memory both roll back.
    engine.submit(aJob())
    expect(() =>
      engineContext(engine).transact(() => {
        const decision = engine.claimAndLease({ worker_id: 'w3' })
        if (decision.granted) engine.heartbeat({ lease_id: held.lease.id, progress: 0.5 })
        throw new Error('fault after the grant')
      }),
    ).toThrow('fault after the grant')
    expectMemoryIsTheDatabase(engine)
    expect(engineContext(engine).activeLeases.size).toBe(2)
  })

  test('are read back from the database when the engine starts again', () => {
    const dir = mkdtempSync(join(tmpdir(), 'leasehold-active-'))
    dirs.push(dir)
    const path = join(dir, 'leasehold.db')
    const first = setup({ path })
    for (let i = 0; i < 4; i++) first.engine.submit(aJob({ cost_units: i + 1 }))
    const granted = first.engine.claimBatch({ worker_id: 'w1' }, 3).granted
    first.engine.heartbeat({ lease_id: granted[0]!.lease_id, progress: 0.25 })
    database(first.engine).close()

    const second = setup({ path })
    expect(engineContext(second.engine).activeLeases.size).toBe(3)
    expect(second.engine.getCapacity().leased).toBe(1 + 2 + 3)
    expectMemoryIsTheDatabase(second.engine)
  })

  test('are read back at start from where the oldest ACTIVE lease is, however many leases were granted after it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'leasehold-active-'))
    dirs.push(dir)
    const path = join(dir, 'leasehold.db')
    const first = setup({ path })
    first.engine.submit(aJob())
    const held = leaseOrFail(first.engine, 'long')
    // Many more leases since, granted and released: the fences are reserved block after block.
    for (let i = 0; i < 9_000; i++) {
      first.engine.submit(aJob())
      first.engine.release({ lease_id: leaseOrFail(first.engine, 'short').lease.id, status: 'SUCCEEDED' })
    }
    const db = database(first.engine)
    const from = Number(db.prepare('SELECT value FROM settings WHERE key = ?').pluck().get(ACTIVE_FROM_KEY))
    expect(from).toBeLessThanOrEqual(held.lease.fence)
    expect(from).toBeGreaterThan(0)
    db.close()

    const second = setup({ path })
    expect(engineContext(second.engine).activeLeases.byId(held.lease.id)?.lease).toMatchObject({ id: held.lease.id, state: 'ACTIVE' })
    expectMemoryIsTheDatabase(second.engine)
    // With none ACTIVE, the next start reads from the lease about to be granted.
    second.engine.release({ lease_id: held.lease.id, status: 'SUCCEEDED' })
    for (let i = 0; i < 4_200; i++) {
      second.engine.submit(aJob())
      second.engine.release({ lease_id: leaseOrFail(second.engine, 'short').lease.id, status: 'SUCCEEDED' })
    }
    const after = Number(database(second.engine).prepare('SELECT value FROM settings WHERE key = ?').pluck().get(ACTIVE_FROM_KEY))
    expect(after).toBeGreaterThan(held.lease.fence)
  })
})
