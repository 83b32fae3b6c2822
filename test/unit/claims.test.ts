import { describe, expect, it } from 'vitest'
import { aJob, setup, T0 } from '../helpers/engine'
import { SECOND } from '../../src-main/engine/rules/clock'
import { eventTypes, expectEngineError } from './support'

function claimed(options: Parameters<typeof setup>[0] = {}, job = aJob()) {
  const s = setup(options)
  const submitted = s.engine.submit(job).job
  const [claim] = s.engine.claim({ worker_id: 'w' })
  expect(claim?.id).toBe(submitted.id)
  return { ...s, job: submitted }
}

describe('queue API: claim', () => {
  it('a claim moves the job QUEUED → CLAIMED for the worker, for claim ttl 60 s, without holding capacity', () => {
    const { engine, job } = claimed()
    expect(engine.getJob(job.id)).toMatchObject({ state: 'CLAIMED', claimed_by: 'w', claim_expires_at: T0 + 60 * SECOND, attempts: 0 })
    expect(engine.getCapacity().leased).toBe(0)
    expect(eventTypes(engine.jobEvents(job.id))).toEqual(['JOB_SUBMITTED', 'JOB_CLAIMED'])
  })

  it('the claim ttl comes from config', () => {
    const { engine, job } = claimed({ config: { claimTtlS: 5 } })
    expect(engine.getJob(job.id).claim_expires_at).toBe(T0 + 5 * SECOND)
  })

  it('a claim takes up to limit jobs, in order, and nothing already claimed', () => {
    const { engine } = setup()
    const ids = Array.from({ length: 4 }, () => engine.submit(aJob()).job.id)
    expect(engine.claim({ worker_id: 'a' }, 3).map((j) => j.id)).toEqual(ids.slice(0, 3))
    expect(engine.claim({ worker_id: 'b' }, 3).map((j) => j.id)).toEqual(ids.slice(3))
    expect(engine.claim({ worker_id: 'c' }, 3)).toEqual([])
  })

  it.each([0, -1, 1.5])('a claim limit of %d is 400 invalid_request', (limit) => {
    const { engine } = setup()
    engine.submit(aJob())
    expectEngineError(() => engine.claim({ worker_id: 'w' }, limit), 400, 'invalid_request')
  })

  it('a claimed job is not leased by a pull API request', () => {
    const { engine } = claimed()
    expect(engine.requestLease({ worker_id: 'other' })).toMatchObject({ granted: false, reason: 'No jobs queued' })
  })
})

describe('queue API: status updates', () => {
  it('a status update moves CLAIMED → PREPARING, stores note and progress, and keeps the claim alive', () => {
    const { engine, clock, job } = claimed()
    clock.advance(50 * SECOND)
    const updated = engine.updateStatus(job.id, { state: 'PREPARING', note: 'downloading', progress: 0.25 })
    expect(updated).toMatchObject({ state: 'PREPARING', note: 'downloading', progress: 0.25, claim_expires_at: T0 + 110 * SECOND })
    clock.advance(50 * SECOND)
    engine.reap()
    expect(engine.getJob(job.id).state).toBe('PREPARING')
  })

  it('a status update may only set PREPARING or LEASE_PENDING (or the current state); RUNNING comes from a lease', () => {
    const { engine, job } = claimed()
    expectEngineError(() => engine.updateStatus(job.id, { state: 'RUNNING' }), 409, 'illegal_transition')
    expectEngineError(() => engine.updateStatus(job.id, { state: 'DONE' }), 409, 'illegal_transition')
    expectEngineError(() => engine.updateStatus(job.id, { state: 'QUEUED' }), 409, 'illegal_transition')
    expectEngineError(() => engine.updateStatus(job.id, { state: 'BLOCKED' }), 409, 'illegal_transition')
    expect(engine.updateStatus(job.id, { state: 'CLAIMED', note: 'n' }).state).toBe('CLAIMED')
  })

  it.each([
    ['CLAIMED', 'PREPARING'],
    ['CLAIMED', 'LEASE_PENDING'],
    ['PREPARING', 'PREPARING'],
    ['PREPARING', 'LEASE_PENDING'],
    ['LEASE_PENDING', 'PREPARING'],
    ['LEASE_PENDING', 'LEASE_PENDING'],
  ] as const)('the claiming worker may set %s → %s by a status update (the queue contract walks CLAIMED → PREPARING → LEASE_PENDING)', (from, to) => {
    const { engine, job } = claimed()
    if (from !== 'CLAIMED') engine.updateStatus(job.id, { state: from, worker_id: 'w' })
    const updated = engine.updateStatus(job.id, { state: to, note: 'next step', worker_id: 'w' })
    expect(updated).toMatchObject({ state: to, note: 'next step', claimed_by: 'w' })
    expect(eventTypes(engine.jobEvents(job.id)).at(-1)).toBe('JOB_STATUS')
  })

  it('a status update naming another worker than the claimer is 403 worker_mismatch and changes nothing', () => {
    const { engine, job } = claimed()
    const before = engine.getJob(job.id)
    expectEngineError(() => engine.updateStatus(job.id, { state: 'LEASE_PENDING', note: 'stale', worker_id: 'other' }), 403, 'worker_mismatch')
    expect(engine.getJob(job.id)).toEqual(before)
    expect(eventTypes(engine.jobEvents(job.id))).toEqual(['JOB_SUBMITTED', 'JOB_CLAIMED'])
  })

  it('a status update for a job whose claim lapsed (QUEUED again) is 409, even with a note only', () => {
    const { engine, clock, job } = claimed()
    clock.advance(61 * SECOND)
    expectEngineError(() => engine.updateStatus(job.id, { note: 'late', worker_id: 'w' }), 409, 'illegal_transition')
    expectEngineError(() => engine.updateStatus(job.id, { note: 'late' }), 409, 'illegal_transition')
    expect(engine.getJob(job.id)).toMatchObject({ state: 'QUEUED', note: null, claimed_by: null })
  })

  it('a status update for a job since claimed by another worker is 403 worker_mismatch', () => {
    const { engine, clock, job } = claimed()
    clock.advance(61 * SECOND)
    engine.reap()
    expect(engine.claim({ worker_id: 'w2' }).map((j) => j.id)).toEqual([job.id])
    expectEngineError(() => engine.updateStatus(job.id, { state: 'PREPARING', note: 'stale', worker_id: 'w' }), 403, 'worker_mismatch')
    expect(engine.getJob(job.id)).toMatchObject({ state: 'CLAIMED', claimed_by: 'w2', note: null })
  })

  it('a QUEUED job cannot be set PREPARING by a status update', () => {
    const { engine } = setup()
    const { job } = engine.submit(aJob())
    expectEngineError(() => engine.updateStatus(job.id, { state: 'PREPARING' }), 409, 'illegal_transition')
    expect(engine.getJob(job.id).state).toBe('QUEUED')
  })

  it('a terminal job takes no status updates (409 illegal_transition)', () => {
    const { engine, job } = claimed()
    engine.cancel(job.id)
    expectEngineError(() => engine.updateStatus(job.id, { note: 'late' }), 409, 'illegal_transition')
    expect(engine.getJob(job.id).note).toBeNull()
  })

  it('a progress outside 0–1 is 400 invalid_request', () => {
    const { engine, job } = claimed()
    expectEngineError(() => engine.updateStatus(job.id, { progress: 2 }), 400, 'invalid_request')
  })

  it('a status update of an unknown job is 404 job_not_found', () => {
    const { engine } = setup()
    expectEngineError(() => engine.updateStatus('missing', { note: 'x' }), 404, 'job_not_found')
  })
})

describe('queue API: lease request', () => {
  it.each(['CLAIMED', 'PREPARING', 'LEASE_PENDING'] as const)(
    'a lease may be requested from %s; approval makes the job RUNNING under the claiming worker',
    (state) => {
      const { engine, job } = claimed({ total_units: 10 })
      if (state === 'PREPARING') engine.updateStatus(job.id, { state: 'PREPARING' })
      if (state === 'LEASE_PENDING') {
        engine.setCapacity({ busy_rating: 10 })
        expect(engine.requestLeaseForJob({ job_id: job.id }).approved).toBe(false)
        engine.setCapacity({ busy_rating: 0 })
      }
      expect(engine.getJob(job.id).state).toBe(state)
      const decision = engine.requestLeaseForJob({ job_id: job.id, cost_units: 1, ttl_s: 45 })
      if (!decision.approved) throw new Error('expected approval')
      expect(decision.lease).toMatchObject({ worker_id: 'w', job_id: job.id, cost_units: 1, ttl_s: 45, state: 'ACTIVE' })
      expect(decision.job).toMatchObject({ state: 'RUNNING', attempts: 1, lease_id: decision.lease.id, claim_expires_at: null, next_retry_at: null })
    },
  )

  it.each(['QUEUED', 'RUNNING', 'DONE'] as const)('a lease request on a %s job is 409 illegal_transition', (state) => {
    const { engine } = setup()
    const { job } = engine.submit(aJob())
    if (state !== 'QUEUED') {
      engine.claim({ worker_id: 'w' })
      const d = engine.requestLeaseForJob({ job_id: job.id })
      if (!d.approved) throw new Error('expected approval')
      if (state === 'DONE') engine.release({ lease_id: d.lease.id, status: 'SUCCEEDED' })
    }
    expectEngineError(() => engine.requestLeaseForJob({ job_id: job.id }), 409, 'illegal_transition')
    expect(engine.getJob(job.id).attempts).toBe(state === 'QUEUED' ? 0 : 1)
  })

  it('a lease request whose cost_units differ from the job\'s is 409 cost_mismatch', () => {
    const { engine, job } = claimed({}, aJob({ cost_units: 3 }))
    expectEngineError(() => engine.requestLeaseForJob({ job_id: job.id, cost_units: 2 }), 409, 'cost_mismatch')
    expect(engine.getJob(job.id).state).toBe('CLAIMED')
  })

  it('a lease request naming another worker than the claimer is 403 worker_mismatch: no lease, the claim stays', () => {
    const { engine, job } = claimed()
    expectEngineError(() => engine.requestLeaseForJob({ job_id: job.id, worker_id: 'stale' }), 403, 'worker_mismatch')
    expect(engine.getJob(job.id)).toMatchObject({ state: 'CLAIMED', claimed_by: 'w', attempts: 0, lease_id: null })
    expect(engine.getCapacity().leased).toBe(0)
  })

  it('a lease request naming the claimer is granted to it', () => {
    const { engine, job } = claimed()
    const decision = engine.requestLeaseForJob({ job_id: job.id, worker_id: 'w' })
    expect(decision.approved && decision.lease.worker_id).toBe('w')
  })

  it('a lease request of an unknown job is 404 job_not_found', () => {
    const { engine } = setup()
    expectEngineError(() => engine.requestLeaseForJob({ job_id: 'missing' }), 404, 'job_not_found')
  })

  it('a lease request with a ttl outside the bounds is 400 invalid_request', () => {
    const { engine, job } = claimed()
    expectEngineError(() => engine.requestLeaseForJob({ job_id: job.id, ttl_s: 0 }), 400, 'invalid_request')
  })

  it('a denial sets LEASE_PENDING with next_retry_at and retry_after_sec, names the numbers and keeps the claim alive', () => {
    const { engine, clock, job } = claimed({ total_units: 50, busy_rating: 8 }, aJob({ cost_units: 20 }))
    clock.advance(50 * SECOND)
    const decision = engine.requestLeaseForJob({ job_id: job.id })
    expect(decision).toMatchObject({
      approved: false,
      reason: 'Capacity exceeded: used=0, requested=20, capacity=10',
      retry_after_sec: 10,
    })
    expect(engine.getJob(job.id)).toMatchObject({
      state: 'LEASE_PENDING',
      next_retry_at: clock.now() + 10 * SECOND,
      claim_expires_at: clock.now() + 60 * SECOND,
      claimed_by: 'w',
      attempts: 0,
    })
    expect(eventTypes(engine.jobEvents(job.id))).toContain('LEASE_DENIED')
  })

  it('a denial asks the worker back within its claim: half the claim TTL when that is shorter than twice the usual wait', () => {
    const { engine, clock, job } = claimed({ total_units: 10, busy_rating: 10, config: { claimTtlS: 5 } }, aJob({ cost_units: 5 }))
    const decision = engine.requestLeaseForJob({ job_id: job.id })
    expect(decision).toMatchObject({ approved: false, retry_after_sec: 2 })
    expect(engine.getJob(job.id)).toMatchObject({ next_retry_at: clock.now() + 2 * SECOND, claim_expires_at: clock.now() + 5 * SECOND })
  })

  it('on a LEASE_PENDING job next_retry_at is advice: an early request is approved once capacity is back', () => {
    const { engine, clock, job } = claimed({ total_units: 10 }, aJob({ cost_units: 10 }))
    engine.setCapacity({ busy_rating: 5 })
    expect(engine.requestLeaseForJob({ job_id: job.id }).approved).toBe(false)
    engine.setCapacity({ busy_rating: 0 })
    clock.advance(SECOND) // well before next_retry_at
    expect(engine.requestLeaseForJob({ job_id: job.id }).approved).toBe(true)
  })
})

describe('queue API: claim expiry', () => {
  it('expired claim returns to QUEUED without counting an attempt', () => {
    const { engine, clock, job } = claimed()
    clock.advance(60 * SECOND - 1)
    expect(engine.reap().claims).toBe(0)
    clock.advance(1)
    expect(engine.reap()).toMatchObject({ leases: 0, claims: 1 })
    expect(engine.getJob(job.id)).toMatchObject({ state: 'QUEUED', attempts: 0, claimed_by: null, claim_expires_at: null })
    expect(engine.attempts(job.id)).toEqual([])
    expect(eventTypes(engine.jobEvents(job.id))).toContain('JOB_CLAIM_EXPIRED')
    expect(engine.claim({ worker_id: 'other' }).map((j) => j.id)).toEqual([job.id])
  })

  it.each(['PREPARING', 'LEASE_PENDING'] as const)('an expired claim in %s also returns to QUEUED', (state) => {
    const { engine, clock, job } = claimed({ total_units: 1 }, aJob({ cost_units: 1 }))
    if (state === 'PREPARING') engine.updateStatus(job.id, { state: 'PREPARING' })
    else {
      engine.setCapacity({ busy_rating: 10 })
      engine.requestLeaseForJob({ job_id: job.id })
    }
    clock.advance(61 * SECOND)
    engine.reap()
    expect(engine.getJob(job.id)).toMatchObject({ state: 'QUEUED', attempts: 0, next_retry_at: null })
  })

  it("a lapsed claim clears the job's progress and note, as a requeue does: they told of the claim that ended", () => {
    const { engine, clock, job } = claimed()
    engine.updateStatus(job.id, { state: 'PREPARING', note: 'prep', progress: 0.5 })
    clock.advance(61 * SECOND)
    engine.reap()
    expect(engine.getJob(job.id)).toMatchObject({ state: 'QUEUED', progress: null, note: null })
  })

  it('a job whose claim expired keeps its place ahead of later submits', () => {
    const { engine, clock, job } = claimed()
    clock.advance(10 * SECOND)
    const later = engine.submit(aJob()).job
    clock.advance(60 * SECOND)
    engine.reap()
    expect(engine.claim({ worker_id: 'x' }, 2).map((j) => j.id)).toEqual([job.id, later.id])
  })

  it('a leased job is not touched by claim expiry', () => {
    const { engine, clock, job } = claimed()
    const d = engine.requestLeaseForJob({ job_id: job.id, ttl_s: 600 })
    expect(d.approved).toBe(true)
    clock.advance(120 * SECOND)
    expect(engine.reap()).toMatchObject({ leases: 0, claims: 0 })
    expect(engine.getJob(job.id).state).toBe('RUNNING')
  })

  it('a lease granted through the queue API is fenced like any other: a late release after expiry is 409 lease_expired', () => {
    const { engine, clock, job } = claimed()
    const d = engine.requestLeaseForJob({ job_id: job.id })
    if (!d.approved) throw new Error('expected approval')
    clock.advance(36 * SECOND)
    expectEngineError(() => engine.release({ lease_id: d.lease.id, worker_id: 'w', status: 'SUCCEEDED' }), 409, 'lease_expired')
    expect(engine.getJob(job.id).state).toBe('QUEUED')
  })
})

describe('a claim past its expiry, before the reaper ran', () => {
  it('a lease request finds the job back in QUEUED (409 illegal_transition), as the reaper would have left it', () => {
    const { engine, clock, job } = claimed()
    clock.advance(60 * SECOND)
    expectEngineError(() => engine.requestLeaseForJob({ job_id: job.id }), 409, 'illegal_transition')
    expect(engine.getJob(job.id)).toMatchObject({ state: 'QUEUED', claimed_by: null, attempts: 0 })
    expect(eventTypes(engine.jobEvents(job.id))).toEqual(['JOB_SUBMITTED', 'JOB_CLAIMED', 'JOB_CLAIM_EXPIRED'])
    expect(engine.getCapacity().leased).toBe(0)
  })

  it('a status update does not revive it: the job is QUEUED and a PREPARING report is refused', () => {
    const { engine, clock, job } = claimed()
    clock.advance(60 * SECOND)
    expectEngineError(() => engine.updateStatus(job.id, { state: 'PREPARING' }), 409, 'illegal_transition')
    expect(engine.getJob(job.id).state).toBe('QUEUED')
  })

  it('one millisecond before its expiry the claim still holds', () => {
    const { engine, clock, job } = claimed()
    clock.advance(60 * SECOND - 1)
    expect(engine.requestLeaseForJob({ job_id: job.id }).approved).toBe(true)
  })
})

describe('queue API: unique jobs', () => {
  // The rule of every API: a worker that holds a lease, or is about to, takes no unique job.
  // The queue API claims before it leases, so a worker's claimed jobs are leases it is about to hold.

  it('a claim skips a unique job once it took another: the claimed jobs are leases the worker is about to hold', () => {
    const { engine } = setup()
    const x = engine.submit(aJob()).job
    const unique = engine.submit(aJob({ unique: true })).job
    const y = engine.submit(aJob()).job
    expect(engine.claim({ worker_id: 'w' }, 5).map((j) => j.id)).toEqual([x.id, y.id])
    expect(engine.getJob(unique.id).state).toBe('QUEUED')
    expect(engine.claim({ worker_id: 'other' }, 5).map((j) => j.id)).toEqual([unique.id])
  })

  it('a claim hands a unique job alone: it ends the claim, whose leases may then be asked for in any order', () => {
    const { engine } = setup()
    const unique = engine.submit(aJob({ unique: true })).job
    const x = engine.submit(aJob()).job
    expect(engine.claim({ worker_id: 'w' }, 5).map((j) => j.id)).toEqual([unique.id])
    expect(engine.getJob(x.id).state).toBe('QUEUED')
  })

  it('a worker that holds claims not yet leased claims no unique job until they are leased or lapse', () => {
    const { engine, clock } = setup({ config: { claimTtlS: 60 } })
    engine.submit(aJob())
    const [held] = engine.claim({ worker_id: 'w' })
    const unique = engine.submit(aJob({ unique: true })).job
    expect(engine.claim({ worker_id: 'w' }, 5)).toEqual([])
    engine.updateStatus(held!.id, { state: 'LEASE_PENDING' })
    expect(engine.claim({ worker_id: 'w' }, 5)).toEqual([])
    clock.advance(60 * SECOND) // the claim has lapsed, though the reaper has not run
    expect(engine.claim({ worker_id: 'w' }, 5).map((j) => j.id)).toEqual([unique.id])
  })

  it('a lease request for a unique job is denied while its worker holds another lease, and approved once it holds none', () => {
    const { engine, clock } = setup()
    const unique = engine.submit(aJob({ unique: true })).job
    engine.claim({ worker_id: 'w' })
    engine.submit(aJob())
    const [other] = engine.claim({ worker_id: 'w' })
    const held = engine.requestLeaseForJob({ job_id: other!.id })
    expect(held.approved).toBe(true)
    const denied = engine.requestLeaseForJob({ job_id: unique.id, worker_id: 'w' })
    expect(denied).toMatchObject({ approved: false, reason: 'Job is unique and worker w already holds a lease', retry_after_sec: 10 })
    expect(engine.getJob(unique.id)).toMatchObject({ state: 'LEASE_PENDING', claimed_by: 'w', next_retry_at: T0 + 10 * SECOND })
    if (!held.approved) throw new Error('unreachable')
    engine.release({ lease_id: held.lease.id, status: 'SUCCEEDED' })
    clock.advance(10 * SECOND)
    expect(engine.requestLeaseForJob({ job_id: unique.id }).approved).toBe(true)
  })

  it('a worker with queue API claims not yet leased takes no unique job through the worker API or the pull API either', () => {
    const { engine } = setup()
    engine.submit(aJob())
    const [held] = engine.claim({ worker_id: 'mixed' })
    expect(held).toBeDefined()
    const unique = engine.submit(aJob({ unique: true })).job
    expect(engine.claimBatch({ worker_id: 'mixed' }, 5).granted).toEqual([])
    expect(engine.requestLease({ worker_id: 'mixed' })).toMatchObject({ granted: false, reason: 'No queued job this worker can take now' })
    expect(engine.getJob(unique.id).state).toBe('QUEUED')
    expect(engine.requestLeaseForJob({ job_id: held!.id }).approved).toBe(true)
    engine.release({ lease_id: engine.getJob(held!.id).lease_id!, status: 'SUCCEEDED' })
    expect(engine.claimBatch({ worker_id: 'mixed' }, 5).granted.map((g) => g.job_id)).toEqual([unique.id])
  })

  it('a worker that holds a unique job\'s lease may be leased another job, as the worker API leases it', () => {
    const { engine } = setup()
    const unique = engine.submit(aJob({ unique: true })).job
    engine.claim({ worker_id: 'w' })
    expect(engine.requestLeaseForJob({ job_id: unique.id }).approved).toBe(true)
    engine.submit(aJob())
    const [other] = engine.claim({ worker_id: 'w' })
    expect(engine.requestLeaseForJob({ job_id: other!.id }).approved).toBe(true)

    const batch = setup().engine
    const u = batch.submit(aJob({ unique: true })).job
    const x = batch.submit(aJob()).job
    expect(batch.claimBatch({ worker_id: 'w' }, 5).granted.map((g) => g.job_id)).toEqual([u.id, x.id])
  })
})
