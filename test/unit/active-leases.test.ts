/**
 * The ACTIVE leases the engine keeps in memory (engine/active-leases.ts) are always the
 * database's ACTIVE leases with their jobs, column for column, and the units in use are their
 * sum: after every verb that grants, extends or ends a lease or writes a leased job, after a
 * verb that fails under its savepoint, after a transaction that rolls back, and after a restart.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import type { JobRow, LeaseRow } from '../../src-main/db/schema'
import { SECOND } from '../../src-main/engine/clock'
import type { Engine } from '../../src-main/engine'
import { aJob, seededRandom, setup } from '../helpers/engine'
import { engineContext } from '../../src-main/engine/internals'

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

function expectMemoryIsTheDatabase(engine: Engine): void {
  const db = engineContext(engine).db
  const leases = db.prepare("SELECT * FROM leases WHERE state = 'ACTIVE' ORDER BY fence").all() as LeaseRow[]
  const jobs = leases.map((lease) => db.prepare('SELECT * FROM jobs WHERE id = ?').get(lease.job_id) as JobRow)
  const memory = [...engineContext(engine).activeLeases.all()].sort((a, b) => a.lease.fence - b.lease.fence)
  expect(memory.map((entry) => entry.lease)).toEqual(leases)
  expect(memory.map((entry) => entry.job)).toEqual(jobs)
  expect(engineContext(engine).activeLeases.units).toBe(leases.reduce((sum, lease) => sum + lease.cost_units, 0))
  expect(engine.getCapacity().leased).toBe(engineContext(engine).activeLeases.units)
}

describe('the ACTIVE leases in memory', () => {
  test('follow every verb that grants, extends or ends a lease or writes a leased job, step by step', () => {
    const { engine, clock } = setup({ total_units: 12 })
    const next = seededRandom(11)
    const pick = <T>(items: T[]): T | undefined => items[Math.floor(next() * items.length)]
    const active = () => [...engineContext(engine).activeLeases.all()]
    const steps: ((() => unknown) | null)[] = []
    for (let step = 0; step < 400; step++) {
      const entry = pick(active())
      const choices: (() => unknown)[] = [
        () => engine.submit(aJob({ cost_units: 1 + Math.floor(next() * 3), max_attempts: 2 })),
        () => engine.requestLease({ worker_id: `w${Math.floor(next() * 3)}` }),
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
    }
    expect(active().length).toBeGreaterThan(0) // the walk ended with leases held, so it tested something
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
    engineContext(first.engine).db.close()

    const second = setup({ path })
    expect(engineContext(second.engine).activeLeases.size).toBe(3)
    expect(second.engine.getCapacity().leased).toBe(1 + 2 + 3)
    expectMemoryIsTheDatabase(second.engine)
  })
})
