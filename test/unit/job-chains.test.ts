/**
 * No index holds a job's events or its leases (db/schema.ts): each is a chain, from the job's
 * `last_event_id` back through each event's `prev_id`, and from its `lease_id` back through each
 * lease's `prev_fence` (engine/reads/timeline.ts, rows.ts `leasesOfJob`). Read along the chains, a
 * job's timeline is every event that names it and its attempts are every lease of it, in order,
 * after every verb that appends a job's event or grants a lease: moves, file leases and blockers
 * under its lease, schedules, capacity changes, refusals under a savepoint, purges.
 */
import { describe, expect, test } from 'vitest'
import { FILE_RETRY_MS } from '../../src-main/engine/verbs/files'
import { MINUTE, SECOND } from '../../src-main/engine/rules/clock'
import type { Engine } from '../../src-main/engine'
import { aJob, seededRandom, setup } from '../helpers/engine'
import { UNCHAINED_JOB_EVENTS_CLAUSE } from '../../src-main/db/schema'
import { database } from '../helpers/database'

function expectChainsAreTheLog(engine: Engine, step: number): void {
  const db = database(engine)
  const ids = db.prepare('SELECT id FROM jobs ORDER BY seq').pluck().all() as string[]
  for (const id of ids) {
    const logged = db.prepare('SELECT id FROM events WHERE job_id = ? ORDER BY id').pluck().all(id)
    expect(engine.jobEvents(id).map((event) => event.id), `events of ${id} at step ${step}`).toEqual(logged)
    const leases = db.prepare('SELECT id FROM leases WHERE job_id = ? ORDER BY attempt').pluck().all(id)
    expect(engine.attempts(id).map((attempt) => attempt.lease_id), `leases of ${id} at step ${step}`).toEqual(leases)
  }
  // Every event appended names its predecessor: none goes into the index of the events from before the chains.
  expect(db.prepare(`SELECT COUNT(*) FROM events WHERE ${UNCHAINED_JOB_EVENTS_CLAUSE}`).pluck().get()).toBe(0)
}

describe("a job's chains of events and leases", () => {
  test('read back every event and lease that names the job, in order, through every verb that appends them', () => {
    const { engine, clock } = setup({ total_units: 8 })
    const next = seededRandom(23)
    const pick = <T>(items: readonly T[]): T | undefined => items[Math.floor(next() * items.length)]
    const db = database(engine)
    const jobs = () => db.prepare('SELECT id, state, claimed_by FROM jobs').all() as { id: string; state: string; claimed_by: string | null }[]
    const files = ['/data/a', '/data/b']
    engine.createSchedule({ name: 'every-minute', cron: '* * * * *', job: { job_type: 'scheduled', cost_units: 1 } })
    const seen = new Set<string>()
    for (let step = 0; step < 600; step++) {
      const job = pick(jobs())
      const lease = pick(engine.activeLeases())
      const worker = `w${Math.floor(next() * 3)}`
      const choices: (() => unknown)[] = [
        () => engine.submit(aJob({ cost_units: 1 + Math.floor(next() * 2), max_attempts: 2, delay_ms: next() < 0.2 ? MINUTE : null })),
        () => engine.requestLease({ worker_id: worker }),
        () => engine.claimBatch({ worker_id: worker }, 2),
        () => engine.claim({ worker_id: worker }, 1),
        () => clock.advance(Math.floor(next() * 30) * SECOND),
        () => engine.reap(),
        () => engine.fireDueSchedules(),
        () => engine.setCapacity({ total_units: next() < 0.5 ? 1 : 8 }),
      ]
      if (job) {
        choices.push(
          () => engine.updateStatus(job.id, { state: 'PREPARING', note: `step ${step}`, worker_id: job.claimed_by ?? worker }),
          () => engine.requestLeaseForJob({ job_id: job.id, worker_id: job.claimed_by ?? worker }),
          () => engine.cancel(job.id),
          () => engine.retry(job.id),
          () => engine.runNow(job.id),
          () => engine.deleteFinishedJobs([job.id]),
        )
      }
      if (lease) {
        const report = { job_id: lease.job_id, attempt_id: lease.attempt_id, worker_id: lease.worker_id, lease_token: lease.token }
        const file = pick(files)!
        choices.push(
          () => engine.heartbeat({ lease_id: lease.id, progress: next() }),
          () => engine.complete(report),
          () => engine.fail({ ...report, error: { code: 'boom', retryable: true } }),
          () => engine.release({ lease_id: lease.id, status: 'FAILED' }),
          () => engine.expireLeasesOfWorker(lease.worker_id),
          () => engine.acquireFile({ file, owner_id: lease.worker_id, lease_id: lease.id }),
          () => engine.releaseFile({ file, owner_id: lease.worker_id }),
          () => clock.advance(FILE_RETRY_MS),
          // Refused under its savepoint: a wrong attempt changes nothing.
          () => engine.run(() => engine.complete({ ...report, attempt_id: 'not-this-one' })),
        )
      }
      const blocker = pick(engine.listBlockers('OPEN').blockers)
      if (blocker) choices.push(() => engine.resolveBlocker(blocker.id, { action: pick(['retry', 'force_release', 'cancel'] as const)! }))
      try {
        const result = pick(choices)!()
        if (result instanceof Promise) result.catch(() => {})
      } catch {
        // a refusal is part of the walk
      }
      engine.flush()
      for (const { event_type } of db.prepare('SELECT DISTINCT event_type FROM events').all() as { event_type: string }[]) seen.add(event_type)
      expectChainsAreTheLog(engine, step)
    }
    // A blocker, as one comes about: a file held on, the requester's one retry refused.
    engine.setCapacity({ total_units: 8 })
    clock.advance(10 * MINUTE)
    engine.reap()
    for (const worker of ['holder', 'requester']) {
      engine.submit(aJob({ priority: 'URGENT' }))
      engine.claimAndLease({ worker_id: worker })
    }
    const [holder, requester] = ['holder', 'requester'].map((worker) => engine.activeLeases().find((lease) => lease.worker_id === worker)!)
    engine.acquireFile({ file: '/data/held', owner_id: 'holder', lease_id: holder!.id })
    engine.acquireFile({ file: '/data/held', owner_id: 'requester', lease_id: requester!.id })
    for (let waited = 0; waited < FILE_RETRY_MS; waited += 10 * SECOND) {
      clock.advance(10 * SECOND)
      engine.heartbeat({ lease_id: holder!.id })
      engine.heartbeat({ lease_id: requester!.id })
      engine.heartbeatFile({ file: '/data/held', owner_id: 'holder' })
    }
    const halt = engine.acquireFile({ file: '/data/held', owner_id: 'requester', lease_id: requester!.id })
    expect(halt).toMatchObject({ granted: false, code: 'blocked' })
    if (!halt.granted && halt.code === 'blocked') engine.resolveBlocker(halt.blocker.id, { action: 'retry' })
    for (const { event_type } of db.prepare('SELECT DISTINCT event_type FROM events').all() as { event_type: string }[]) seen.add(event_type)
    expectChainsAreTheLog(engine, 600)
    // The walk appended the kinds of job event that come without a move of the job too.
    for (const type of ['FILE_LEASE_ACQUIRED', 'FILE_LEASE_RELEASED', 'FILE_LEASE_CONTENDED', 'BLOCKER_OPENED', 'BLOCKER_RESOLVED', 'LEASE_EXPIRED', 'SCHEDULE_FIRED', 'JOB_EXCEEDS_CAPACITY']) {
      expect(seen, type).toContain(type)
    }
  })
})

describe("a job's timeline in pages", () => {
  /** Every page from the first, following `next_cursor`: newest page first, each oldest first. */
  function pages(engine: Engine, jobId: string, limit: number): number[][] {
    const read: number[][] = []
    let cursor: string | undefined
    do {
      const page = engine.jobEventsPage(jobId, { limit, cursor })
      read.push(page.events.map((event) => event.id))
      cursor = page.next_cursor ?? undefined
    } while (cursor !== undefined)
    return read
  }

  test('pages of any size hold every event once, each page oldest first and each page before the one that gave its cursor; events from before the chains come last', () => {
    const { engine } = setup({ total_units: 8 })
    const { job } = engine.submit(aJob())
    engine.claim({ worker_id: 'w' }, 1)
    for (let i = 0; i < 9; i++) engine.updateStatus(job.id, { state: 'PREPARING', note: `step ${i}`, worker_id: 'w' })
    engine.submit(aJob()) // another job's events between none of this one's
    const all = engine.jobEvents(job.id).map((event) => event.id)
    expect(all).toHaveLength(11)
    const check = () => {
      for (const limit of [1, 2, 3, 4, 5, 10, 11, 12, 500]) {
        const read = pages(engine, job.id, limit)
        expect(read.toReversed().flat(), `limit ${limit}`).toEqual(all)
        expect(read.slice(0, -1).every((page) => page.length === limit), `limit ${limit}`).toBe(true)
      }
      expect(engine.jobEventsPage(job.id)).toMatchObject({ next_cursor: null })
      expect(engine.jobEventsPage(job.id).events.map((event) => event.id)).toEqual(all)
    }
    check()
    // A job whose first four events were appended before migration 0013: not on its chain, which starts after them.
    const db = database(engine)
    db.prepare('UPDATE events SET prev_id = NULL WHERE id IN (SELECT id FROM events WHERE job_id = ? ORDER BY id LIMIT 4)').run(job.id)
    db.prepare('UPDATE events SET prev_id = 0 WHERE id = ?').run(all[4])
    check()
  })

  test("a cursor of another job's timeline, or none this server gave out, is refused", () => {
    const { engine } = setup({ total_units: 8 })
    const one = engine.submit(aJob()).job
    const other = engine.submit(aJob()).job
    engine.claim({ worker_id: 'w' }, 2)
    const cursor = engine.jobEventsPage(one.id, { limit: 1 }).next_cursor!
    expect(() => engine.jobEventsPage(other.id, { limit: 1, cursor })).toThrow("cursor: not a cursor of this job's timeline")
    expect(() => engine.jobEventsPage(one.id, { cursor: 'bm90IG9uZQ' })).toThrow('cursor: not a cursor this server gave out')
  })
})
