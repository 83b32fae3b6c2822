import { describe, expect, it } from 'vitest'
import { aJob, setup, T0 } from '../helpers/engine'
import { SECOND } from '../../src-main/engine/rules/clock'
import { claimOrFail, eventTypes, expectEngineError, leaseOrFail } from './support'

describe('granting a lease', () => {
  it('a pull API grant sets LEASED, creates an ACTIVE lease for the job\'s cost and counts attempt 1', () => {
    const { engine } = setup()
    const { job } = engine.submit(aJob({ cost_units: 4 }))
    const { lease, job: leased } = leaseOrFail(engine, 'w1')
    expect(lease).toMatchObject({
      job_id: job.id,
      worker_id: 'w1',
      cost_units: 4,
      state: 'ACTIVE',
      ttl_s: 30,
      grace_s: 5,
      granted_at: T0,
      last_heartbeat_at: T0,
      released_at: null,
      release_status: null,
    })
    expect(lease.token.length).toBeGreaterThanOrEqual(20)
    expect(leased).toMatchObject({ state: 'LEASED', attempts: 1, lease_id: lease.id, claimed_by: 'w1', started_at: T0 })
    expect(engine.getLease(lease.id)).toEqual(lease)
    const attempts = engine.attempts(job.id)
    expect(attempts).toHaveLength(1)
    expect(attempts[0]).toMatchObject({ id: lease.attempt_id, lease_id: lease.id, worker_id: 'w1', number: 1, started_at: T0, outcome: null })
    expect(eventTypes(engine.jobEvents(job.id))).toEqual(['JOB_SUBMITTED', 'LEASE_GRANTED'])
  })

  it('lease timing: expires_at = now + ttl + grace with defaults ttl 30 s and grace 5 s', () => {
    const { engine } = setup()
    engine.submit(aJob())
    expect(leaseOrFail(engine, 'w').lease.expires_at).toBe(T0 + 35 * SECOND)
  })

  it('a request\'s ttl_sec overrides the ttl; the configured grace still applies', () => {
    const { engine } = setup({ config: { heartbeatGraceS: 7 } })
    engine.submit(aJob())
    const { lease } = leaseOrFail(engine, 'w', 120)
    expect(lease).toMatchObject({ ttl_s: 120, grace_s: 7, expires_at: T0 + 127 * SECOND })
  })

  it.each([0, -5, 1.5, 3601])('a ttl_sec outside the config bounds (%d) is 400 invalid_request and leases nothing', (ttl) => {
    const { engine } = setup()
    const { job } = engine.submit(aJob())
    const error = expectEngineError(() => engine.requestLease({ worker_id: 'w' }, ttl), 400, 'invalid_request')
    expect(error.detail).toContain('ttl_sec')
    expectEngineError(() => engine.claimAndLease({ worker_id: 'w' }, ttl), 400, 'invalid_request')
    expect(engine.getJob(job.id).state).toBe('QUEUED')
  })

  it('a ttl_sec of 1 s on a host with no heartbeat grace is 400: it would expire before the heartbeat due a second later', () => {
    const { engine } = setup({ config: { heartbeatGraceS: 0 } })
    const { job } = engine.submit(aJob())
    const error = expectEngineError(() => engine.requestLease({ worker_id: 'w' }, 1), 400, 'invalid_request')
    expect(error.detail).toBe("ttl_sec: 1 s with this host's heartbeat grace of 0 s would expire before the heartbeat due a second later: ask for at least 2")
    expect(engine.getJob(job.id).state).toBe('QUEUED')
    expect(leaseOrFail(engine, 'w', 2).lease).toMatchObject({ ttl_s: 2, expires_at: T0 + 2 * SECOND })
  })

  it('the ttl bounds come from config', () => {
    const { engine } = setup({ config: { minTtlS: 10, maxTtlS: 20 } })
    engine.submit(aJob())
    expectEngineError(() => engine.requestLease({ worker_id: 'w' }, 9), 400, 'invalid_request')
    expectEngineError(() => engine.requestLease({ worker_id: 'w' }, 21), 400, 'invalid_request')
    expect(leaseOrFail(engine, 'w', 20).lease.ttl_s).toBe(20)
  })

  it('the default lease ttl comes from config', () => {
    const { engine } = setup({ config: { leaseTtlS: 10, heartbeatGraceS: 2 } })
    engine.submit(aJob())
    expect(leaseOrFail(engine, 'w').lease.expires_at).toBe(T0 + 12 * SECOND)
  })

  it('fence strictly increases across leases, whichever API granted them', () => {
    const { engine, clock } = setup()
    for (let i = 0; i < 6; i++) engine.submit(aJob())
    const fences: number[] = []
    fences.push(leaseOrFail(engine, 'a').lease.fence)
    fences.push(claimOrFail(engine, 'b').lease.fence)
    const [claimed] = engine.claim({ worker_id: 'c' })
    const approved = engine.requestLeaseForJob({ job_id: claimed!.id })
    if (!approved.approved) throw new Error('expected approval')
    fences.push(approved.lease.fence)
    // Expire everything, then lease again: new leases still get larger fences.
    clock.advance(40 * SECOND)
    engine.reap()
    fences.push(leaseOrFail(engine, 'd').lease.fence)
    fences.push(claimOrFail(engine, 'e').lease.fence)
    for (let i = 1; i < fences.length; i++) expect(fences[i]!).toBeGreaterThan(fences[i - 1]!)
  })

  it('every lease gets its own secret token', () => {
    const { engine } = setup()
    engine.submit(aJob())
    engine.submit(aJob())
    expect(leaseOrFail(engine, 'a').lease.token).not.toBe(leaseOrFail(engine, 'b').lease.token)
  })

  it('an attempt is counted each time a lease is granted for the job, and only then', () => {
    const { engine, clock } = setup({ config: { maxAttempts: 5 } })
    const { job } = engine.submit(aJob())
    engine.claim({ worker_id: 'w' }) // a claim is not an attempt
    expect(engine.getJob(job.id).attempts).toBe(0)
    engine.requestLeaseForJob({ job_id: job.id })
    expect(engine.getJob(job.id).attempts).toBe(1)
    clock.advance(35 * SECOND)
    engine.reap()
    clock.advance(10 * SECOND)
    leaseOrFail(engine, 'w')
    expect(engine.getJob(job.id).attempts).toBe(2)
    clock.advance(35 * SECOND)
    engine.reap()
    clock.advance(10 * SECOND)
    claimOrFail(engine, 'w')
    expect(engine.getJob(job.id).attempts).toBe(3)
    expect(engine.attempts(job.id).map((a) => a.number)).toEqual([1, 2, 3])
  })

  it('a job keeps its first started_at across attempts and lease_id names the current lease', () => {
    const { engine, clock } = setup()
    const { job } = engine.submit(aJob())
    leaseOrFail(engine, 'w')
    clock.advance(35 * SECOND)
    engine.reap()
    clock.advance(2 * SECOND)
    const second = leaseOrFail(engine, 'w')
    expect(engine.getJob(job.id)).toMatchObject({ started_at: T0, lease_id: second.lease.id })
  })

  it('a grant returns the stream message that delivered the job', () => {
    const { engine } = setup()
    const { job } = engine.submit(aJob({ queue: 'video' }))
    const decision = engine.claimAndLease({ worker_id: 'w' })
    if (!decision.granted) throw new Error('expected a grant')
    expect(decision.message_id).toBe(engine.getJob(job.id).stream_message_id)
  })

  it('an unknown lease id is 404 lease_not_found', () => {
    const { engine } = setup()
    expectEngineError(() => engine.getLease('nope'), 404, 'lease_not_found')
  })
})
