/**
 * How far heartbeats carry a lease (docs/states.md, "Cancellation" and "Attempts, expiry and
 * retries"): not past the TTL and grace after a cancel, nor after the attempt's max_runtime_s.
 * A worker that keeps heartbeating without stopping loses its lease, its job and its units.
 */
import { describe, expect, it } from 'vitest'
import { aJob, setup } from '../helpers/engine'
import { HOUR, SECOND } from '../../src-main/engine/rules/clock'
import { claimOrFail, expectEngineError, leaseOrFail } from './support'

/** The default lease's TTL and grace: 30 s and 5 s. */
const LASTS = 35 * SECOND

describe('heartbeat limits', () => {
  it('once a cancel is requested, heartbeats no longer extend the lease past the cancel + TTL + grace: a worker that does not stop loses it, and the job ends CANCELED', () => {
    const { engine, clock } = setup()
    const { job } = engine.submit(aJob())
    const { lease } = leaseOrFail(engine, 'w')
    for (let i = 0; i < 10; i++) {
      clock.advance(10 * SECOND)
      engine.heartbeat({ lease_id: lease.id, worker_id: 'w' })
    }
    const canceledAt = clock.now()
    expect(engine.cancel(job.id)).toMatchObject({ state: 'RUNNING', cancel_requested: true })
    engine.cancel(job.id) // asked again: changes nothing, the limit stays the first cancel's
    for (let i = 0; i < 3; i++) {
      clock.advance(10 * SECOND)
      const beat = engine.heartbeat({ lease_id: lease.id, worker_id: 'w' })
      expect(beat.lease.expires_at).toBe(Math.min(clock.now() + LASTS, canceledAt + LASTS))
      expect(beat.job.cancel_requested).toBe(true)
    }
    clock.advance(canceledAt + LASTS - clock.now() - 1)
    engine.reap()
    expect(engine.getLease(lease.id).state).toBe('ACTIVE')
    clock.advance(1)
    engine.reap()
    expect(engine.getLease(lease.id)).toMatchObject({ state: 'EXPIRED', release_status: 'TIMEOUT' })
    expect(engine.getJob(job.id)).toMatchObject({ state: 'CANCELED', final_status: 'CANCELED', dead_letter: false })
    expect(engine.getCapacity().leased).toBe(0)
    const expired = engine.jobEvents(job.id).find((event) => event.event_type === 'LEASE_EXPIRED')!
    expect(expired.data).toMatchObject({ reason: 'cancel_not_stopped' })
    expectEngineError(() => engine.heartbeat({ lease_id: lease.id, worker_id: 'w' }), 409, 'lease_expired')
  })

  it('a heartbeat that comes after the cancel + TTL + grace, the reaper not there yet, is 409 lease_expired, and the job ends CANCELED', () => {
    const { engine, clock } = setup()
    const { job } = engine.submit(aJob())
    const { lease } = leaseOrFail(engine, 'w')
    clock.advance(10 * SECOND)
    engine.heartbeat({ lease_id: lease.id, worker_id: 'w' })
    engine.cancel(job.id)
    const canceledAt = clock.now()
    while (clock.now() + 10 * SECOND < canceledAt + LASTS) {
      clock.advance(10 * SECOND)
      expect(engine.heartbeat({ lease_id: lease.id, worker_id: 'w' }).lease.state).toBe('ACTIVE')
    }
    clock.advance(10 * SECOND)
    expectEngineError(() => engine.heartbeat({ lease_id: lease.id, worker_id: 'w' }), 409, 'lease_expired')
    expectEngineError(() => engine.release({ lease_id: lease.id, worker_id: 'w', status: 'SUCCEEDED' }), 409, 'lease_expired')
    expect(engine.getJob(job.id).state).toBe('CANCELED')
  })

  it('heartbeats no longer extend a lease past the attempt start + max_runtime_s + TTL + grace: the host fails the attempt max_runtime_exceeded, not retryable, as the worker would, and says it ended it', () => {
    const { engine, clock } = setup()
    const { job } = engine.submit(aJob({ max_runtime_s: 60, max_attempts: 3 }))
    const claimed = claimOrFail(engine, 'w')
    const report = { job_id: job.id, attempt_id: claimed.lease.attempt_id!, worker_id: 'w', lease_token: claimed.lease.token! }
    const startedAt = clock.now()
    const limit = startedAt + 60 * SECOND + LASTS
    while (clock.now() + 10 * SECOND < limit) {
      clock.advance(10 * SECOND)
      const beat = engine.heartbeatByToken(report)
      expect(beat.expires_at).toBe(Math.min(clock.now() + LASTS, limit))
    }
    clock.advance(limit - clock.now())
    engine.reap()
    expect(engine.getLease(claimed.lease.id)).toMatchObject({ state: 'EXPIRED', release_status: 'FAILED' })
    const ended = engine.getJob(job.id)
    expect(ended).toMatchObject({ state: 'FAILED', final_status: 'FAILED', dead_letter: false, attempts: 1 })
    expect(ended.error).toMatchObject({ code: 'max_runtime_exceeded', retryable: false, ended_by: 'host' })
    expect(engine.attempts(job.id)).toMatchObject([{ outcome: 'FAILED', disposition: 'FINAL', error: { code: 'max_runtime_exceeded', ended_by: 'host' } }])
    const expired = engine.jobEvents(job.id).find((event) => event.event_type === 'LEASE_EXPIRED')!
    expect(expired.data).toMatchObject({ reason: 'max_runtime_exceeded' })
    expect(engine.getCapacity().leased).toBe(0)
    // The worker's later report, its own max_runtime_exceeded failure or a success, is refused as on any expired lease.
    expect(expectEngineError(() => engine.complete(report), 409, 'lease_expired').extra).toMatchObject({ ack: true })
    expect(engine.getJob(job.id).state).toBe('FAILED')
  })

  it('the time the machine slept does not count against max_runtime_s: its worker slept too', async () => {
    const { engine, clock } = setup()
    const { job } = engine.submit(aJob({ max_runtime_s: 60 }))
    const { lease } = leaseOrFail(engine, 'w')
    const grantedAt = clock.now()
    clock.advance(30 * SECOND)
    engine.heartbeat({ lease_id: lease.id, worker_id: 'w' })
    clock.sleep(HOUR)
    const woke = await engine.run(() => engine.heartbeat({ lease_id: lease.id, worker_id: 'w' }))
    expect(woke.lease).toMatchObject({ state: 'ACTIVE', expires_at: clock.now() + LASTS })
    const limit = grantedAt + 60 * SECOND + LASTS + HOUR
    while (clock.now() + 10 * SECOND < limit) {
      clock.advance(10 * SECOND)
      expect(engine.heartbeat({ lease_id: lease.id, worker_id: 'w' }).lease.expires_at).toBe(Math.min(clock.now() + LASTS, limit))
    }
    clock.advance(limit - clock.now())
    engine.reap()
    expect(engine.getJob(job.id)).toMatchObject({ state: 'FAILED', error: { code: 'max_runtime_exceeded' } })
  })
})
