import { describe, expect, it } from 'vitest'
import { aJob, setup, T0 } from '../helpers/engine'
import { SECOND } from '../../src-main/engine/rules/clock'
import { eventTypes, expectEngineError, leaseOrFail } from './support'

describe('heartbeat', () => {
  it('a heartbeat sets expires_at = now + ttl + grace and last_heartbeat_at = now', () => {
    const { engine, clock } = setup()
    engine.submit(aJob())
    const { lease } = leaseOrFail(engine, 'w', 60)
    clock.advance(50 * SECOND)
    const beat = engine.heartbeat({ lease_id: lease.id, worker_id: 'w' })
    expect(beat.lease).toMatchObject({ last_heartbeat_at: T0 + 50 * SECOND, expires_at: T0 + 115 * SECOND })
    expect(engine.getLease(lease.id)).toMatchObject({ last_heartbeat_at: T0 + 50 * SECOND, expires_at: T0 + 115 * SECOND })
  })

  it('heartbeats keep a lease alive well past its first expiry', () => {
    const { engine, clock } = setup()
    const { job } = engine.submit(aJob())
    const { lease } = leaseOrFail(engine, 'w')
    for (let i = 0; i < 10; i++) {
      clock.advance(30 * SECOND)
      engine.reap()
      engine.heartbeat({ lease_id: lease.id, worker_id: 'w' })
    }
    expect(engine.getLease(lease.id).state).toBe('ACTIVE')
    expect(engine.getJob(job.id).attempts).toBe(1)
  })

  it('the first heartbeat moves LEASED → RUNNING; later ones keep it RUNNING', () => {
    const { engine, clock } = setup()
    const { job } = engine.submit(aJob())
    const { lease } = leaseOrFail(engine, 'w')
    expect(engine.getJob(job.id).state).toBe('LEASED')
    expect(engine.heartbeat({ lease_id: lease.id, worker_id: 'w' }).job.state).toBe('RUNNING')
    clock.advance(SECOND)
    expect(engine.heartbeat({ lease_id: lease.id, worker_id: 'w' }).job.state).toBe('RUNNING')
    expect(eventTypes(engine.jobEvents(job.id)).filter((t) => t === 'JOB_RUNNING')).toHaveLength(1)
  })

  it('a heartbeat may report progress and a note', () => {
    const { engine } = setup()
    const { job } = engine.submit(aJob())
    const { lease } = leaseOrFail(engine, 'w')
    engine.heartbeat({ lease_id: lease.id, worker_id: 'w', progress: 0.5, note: 'halfway' })
    expect(engine.getJob(job.id)).toMatchObject({ progress: 0.5, note: 'halfway' })
  })

  it.each([-0.1, 1.1])('a progress outside 0–1 (%d) is 400 invalid_request and does not extend the lease', (progress) => {
    const { engine, clock } = setup()
    engine.submit(aJob())
    const { lease } = leaseOrFail(engine, 'w')
    clock.advance(SECOND)
    expectEngineError(() => engine.heartbeat({ lease_id: lease.id, worker_id: 'w', progress }), 400, 'invalid_request')
    expect(engine.getLease(lease.id).expires_at).toBe(lease.expires_at)
  })

  it('every heartbeat answer carries cancel_requested so the worker stops', () => {
    const { engine } = setup()
    const { job } = engine.submit(aJob())
    const { lease } = leaseOrFail(engine, 'w')
    expect(engine.heartbeat({ lease_id: lease.id, worker_id: 'w' }).job.cancel_requested).toBe(false)
    engine.cancel(job.id)
    expect(engine.heartbeat({ lease_id: lease.id, worker_id: 'w' }).job.cancel_requested).toBe(true)
    const byToken = engine.heartbeatByToken({ job_id: job.id, worker_id: 'w', lease_token: lease.token })
    expect(byToken.cancel_requested).toBe(true)
  })

  it('an unknown lease is 404 lease_not_found', () => {
    const { engine } = setup()
    expectEngineError(() => engine.heartbeat({ lease_id: 'missing', worker_id: 'w' }), 404, 'lease_not_found')
  })

  it('a heartbeat from another worker is 403 worker_mismatch and does not extend the lease', () => {
    const { engine, clock } = setup()
    engine.submit(aJob())
    const { lease } = leaseOrFail(engine, 'owner')
    clock.advance(10 * SECOND)
    expectEngineError(() => engine.heartbeat({ lease_id: lease.id, worker_id: 'intruder' }), 403, 'worker_mismatch')
    expect(engine.getLease(lease.id).expires_at).toBe(lease.expires_at)
  })

  it('a heartbeat naming the wrong job is refused', () => {
    const { engine } = setup()
    engine.submit(aJob())
    const other = engine.submit(aJob()).job
    const { lease } = leaseOrFail(engine, 'w')
    const error = expectEngineError(() => engine.heartbeat({ lease_id: lease.id, worker_id: 'w', job_id: other.id }), 409, 'job_mismatch')
    expect(error.detail).toContain(other.id)
  })

  it('a heartbeat on a released lease is 409 lease_not_active', () => {
    const { engine } = setup()
    engine.submit(aJob())
    const { lease } = leaseOrFail(engine, 'w')
    engine.release({ lease_id: lease.id, worker_id: 'w', status: 'SUCCEEDED' })
    expectEngineError(() => engine.heartbeat({ lease_id: lease.id, worker_id: 'w' }), 409, 'lease_not_active')
  })

  it('a heartbeat on an expired lease is 409 lease_expired', () => {
    const { engine, clock } = setup()
    engine.submit(aJob())
    const { lease } = leaseOrFail(engine, 'w')
    clock.advance(36 * SECOND)
    engine.reap()
    expectEngineError(() => engine.heartbeat({ lease_id: lease.id, worker_id: 'w' }), 409, 'lease_expired')
  })

  it('a late heartbeat past expires_at never revives the lease, even before the reaper ran', () => {
    const { engine, clock } = setup()
    const { job } = engine.submit(aJob())
    const { lease } = leaseOrFail(engine, 'w')
    clock.advance(35 * SECOND + 1)
    expectEngineError(() => engine.heartbeat({ lease_id: lease.id, worker_id: 'w' }), 409, 'lease_expired')
    expect(engine.getLease(lease.id).state).toBe('EXPIRED')
    expect(engine.getJob(job.id).state).toBe('QUEUED')
    expect(engine.getCapacity().leased).toBe(0)
  })

  it('a heartbeat just before expires_at extends the lease', () => {
    const { engine, clock } = setup()
    engine.submit(aJob())
    const { lease } = leaseOrFail(engine, 'w')
    clock.advance(35 * SECOND - 1)
    expect(engine.heartbeat({ lease_id: lease.id, worker_id: 'w' }).lease.state).toBe('ACTIVE')
  })
})
