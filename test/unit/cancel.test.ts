import { describe, expect, it } from 'vitest'
import { aJob, setup } from '../helpers/engine'
import { SECOND } from '../../src-main/engine/rules/clock'
import { eventTypes, expectEngineError, forceState, leaseOrFail } from './support'

describe('cancellation', () => {
  it('cancel QUEUED is immediate; cancel RUNNING sets cancel_requested and ends CANCELED on release; cancel terminal 409 illegal_transition', () => {
    const { engine, clock } = setup()
    const queued = engine.submit(aJob()).job
    const running = engine.submit(aJob()).job
    engine.cancel(queued.id, 'not needed')
    expect(engine.getJob(queued.id)).toMatchObject({ state: 'CANCELED', final_status: 'CANCELED', finished_at: clock.now(), note: 'not needed' })

    const { lease } = leaseOrFail(engine, 'w')
    expect(lease.job_id).toBe(running.id)
    engine.heartbeat({ lease_id: lease.id, worker_id: 'w' })
    const requested = engine.cancel(running.id)
    expect(requested).toMatchObject({ state: 'RUNNING', cancel_requested: true })
    expect(engine.getLease(lease.id).state).toBe('ACTIVE')
    expect(engine.getCapacity().leased).toBe(1)
    clock.advance(SECOND)
    expect(engine.release({ lease_id: lease.id, worker_id: 'w', status: 'CANCELED' }).job.state).toBe('CANCELED')

    expectEngineError(() => engine.cancel(queued.id), 409, 'illegal_transition')
    expectEngineError(() => engine.cancel(running.id), 409, 'illegal_transition')
  })

  it('who asked for a cancel is in its event: JOB_CANCELED for a waiting job, JOB_CANCEL_REQUESTED for a running one; none named is null', () => {
    const { engine } = setup()
    const waiting = engine.submit(aJob()).job
    const running = engine.submit(aJob()).job
    const unnamed = engine.submit(aJob({ job_type: 'other' })).job
    engine.cancel(waiting.id, 'not needed', 'alice')
    const { lease } = leaseOrFail(engine, 'w')
    expect(lease.job_id).toBe(running.id)
    engine.cancel(running.id, 'stop it', 'carol')
    engine.cancel(unnamed.id)
    const data = (id: string, type: string) => engine.jobEvents(id).find((event) => event.event_type === type)?.data
    expect(data(waiting.id, 'JOB_CANCELED')).toEqual({ state: 'CANCELED', from: 'QUEUED', reason: 'not needed', requested_by: 'alice' })
    expect(data(running.id, 'JOB_CANCEL_REQUESTED')).toEqual({ state: 'LEASED', reason: 'stop it', requested_by: 'carol' })
    expect(data(unnamed.id, 'JOB_CANCELED')).toMatchObject({ reason: null, requested_by: null })
  })

  it.each(['CLAIMED', 'PREPARING', 'LEASE_PENDING'] as const)('cancel %s is immediate and drops the claim', (state) => {
    const { engine } = setup({ total_units: 5 })
    const { job } = engine.submit(aJob({ cost_units: 5 }))
    engine.claim({ worker_id: 'w' })
    if (state === 'PREPARING') engine.updateStatus(job.id, { state: 'PREPARING' })
    if (state === 'LEASE_PENDING') {
      engine.setCapacity({ busy_rating: 10 }) // nothing usable: the lease is denied
      expect(engine.requestLeaseForJob({ job_id: job.id }).approved).toBe(false)
    }
    expect(engine.getJob(job.id).state).toBe(state)
    expect(engine.cancel(job.id)).toMatchObject({ state: 'CANCELED', claimed_by: null, claim_expires_at: null })
  })

  it('cancel BLOCKED is immediate', () => {
    const { engine } = setup()
    const { job } = engine.submit(aJob())
    forceState(engine, job.id, 'BLOCKED') // as a file-lease blocker leaves it, without the contention
    expect(engine.cancel(job.id).state).toBe('CANCELED')
  })

  it('cancel LEASED sets cancel_requested and keeps the lease', () => {
    const { engine } = setup()
    const { job } = engine.submit(aJob())
    const { lease } = leaseOrFail(engine, 'w')
    expect(engine.cancel(job.id)).toMatchObject({ state: 'LEASED', cancel_requested: true })
    expect(engine.getLease(lease.id).state).toBe('ACTIVE')
  })

  it('a cancel-requested job released as SUCCEEDED ends DONE (completion status is what the worker reports)', () => {
    const { engine } = setup()
    const { job } = engine.submit(aJob())
    const { lease } = leaseOrFail(engine, 'w')
    engine.cancel(job.id)
    expect(engine.release({ lease_id: lease.id, status: 'SUCCEEDED' }).job.state).toBe('DONE')
  })

  it('a cancel-requested job released as FAILED ends CANCELED', () => {
    const { engine } = setup()
    const { job } = engine.submit(aJob())
    const { lease } = leaseOrFail(engine, 'w')
    engine.cancel(job.id)
    expect(engine.release({ lease_id: lease.id, status: 'FAILED' }).job.state).toBe('CANCELED')
  })

  it('an attempt a cancel stopped ends CANCELED whatever failure its worker reports, and a repeat of that report answers as the first', () => {
    const { engine } = setup()
    const { job } = engine.submit(aJob())
    const granted = engine.claimAndLease({ worker_id: 'w' })
    if (!granted.granted) throw new Error('expected a grant')
    engine.cancel(job.id)
    const report = {
      job_id: job.id,
      attempt_id: granted.lease.attempt_id,
      worker_id: 'w',
      lease_token: granted.lease.token,
      error: { code: 'canceled', message: 'Canceled while running', retryable: false },
    }
    const first = engine.fail(report)
    expect(engine.attempts(job.id)).toMatchObject([{ outcome: 'CANCELED', disposition: 'FINAL', error: { code: 'canceled' } }])
    expect(engine.fail(report)).toEqual(first)
  })

  it('a cancel-requested job released as FAILED through the queue API records its attempt CANCELED; a repeat is a replay', () => {
    const { engine } = setup()
    const { job } = engine.submit(aJob())
    const { lease } = leaseOrFail(engine, 'w')
    engine.cancel(job.id)
    engine.release({ lease_id: lease.id, status: 'FAILED' })
    expect(engine.attempts(job.id)[0]).toMatchObject({ outcome: 'CANCELED', disposition: 'FINAL' })
    expect(engine.release({ lease_id: lease.id, status: 'FAILED' })).toMatchObject({ replay: true })
  })

  it('a cancel-requested job that fails retryably through the worker API is not requeued', () => {
    const { engine } = setup()
    const { job } = engine.submit(aJob({ max_attempts: 5 }))
    const granted = engine.claimAndLease({ worker_id: 'w' })
    if (!granted.granted) throw new Error('expected a grant')
    engine.cancel(job.id)
    const answer = engine.fail({
      job_id: job.id,
      attempt_id: granted.lease.attempt_id,
      worker_id: 'w',
      lease_token: granted.lease.token,
      error: { message: 'stopped', retryable: true },
    })
    expect(answer).toMatchObject({ ack: true, requeued: false })
    expect(engine.getJob(job.id).state).toBe('CANCELED')
  })

  it('a canceled QUEUED job is never picked', () => {
    const { engine } = setup()
    const { job } = engine.submit(aJob())
    engine.cancel(job.id)
    expect(engine.requestLease({ worker_id: 'w' })).toMatchObject({ granted: false, reason: 'No jobs queued' })
    expect(engine.claim({ worker_id: 'w' })).toEqual([])
    expect(engine.getJob(job.id).state).toBe('CANCELED')
  })

  it('cancelling a running job twice records one request', () => {
    const { engine } = setup()
    const { job } = engine.submit(aJob())
    leaseOrFail(engine, 'w')
    engine.cancel(job.id)
    engine.cancel(job.id)
    expect(eventTypes(engine.jobEvents(job.id)).filter((t) => t === 'JOB_CANCEL_REQUESTED')).toHaveLength(1)
  })

  it.each(['DONE', 'FAILED', 'TIMEOUT'] as const)('cancel of a %s job is 409 illegal_transition and changes nothing', (end) => {
    const { engine, clock } = setup()
    const { job } = engine.submit(aJob({ max_attempts: 1 }))
    const { lease } = leaseOrFail(engine, 'w')
    if (end === 'TIMEOUT') {
      clock.advance(36 * SECOND)
      engine.reap()
    } else {
      engine.release({ lease_id: lease.id, status: end === 'DONE' ? 'SUCCEEDED' : 'FAILED' })
    }
    const before = engine.getJob(job.id)
    expect(before.state).toBe(end)
    expectEngineError(() => engine.cancel(job.id), 409, 'illegal_transition')
    expect(engine.getJob(job.id)).toEqual(before)
  })

  it('cancel of an unknown job is 404 job_not_found', () => {
    const { engine } = setup()
    expectEngineError(() => engine.cancel('missing'), 404, 'job_not_found')
  })
})
