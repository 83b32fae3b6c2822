import { describe, expect, it } from 'vitest'
import { aJob, setup, T0 } from '../helpers/engine'
import { SECOND } from '../../src-main/engine/rules/clock'
import type { Engine } from '../../src-main/engine'
import { claimOrFail, expectEngineError, messageIds } from './support'

function claimedByWorker(options: Parameters<typeof setup>[0] = {}, job = aJob()) {
  const s = setup(options)
  const submitted = s.engine.submit(job).job
  const granted = claimOrFail(s.engine, 'w')
  const report = { job_id: submitted.id, attempt_id: granted.lease.attempt_id, worker_id: 'w', lease_token: granted.lease.token }
  return { ...s, job: submitted, lease: granted.lease, report }
}


describe('worker API: claim = lease + attempt + token', () => {
  it('claimAndLease moves QUEUED → RUNNING and returns the lease, its token and attempt', () => {
    const { engine, job, lease } = claimedByWorker()
    expect(engine.getJob(job.id)).toMatchObject({ state: 'RUNNING', attempts: 1, lease_id: lease.id, claimed_by: 'w' })
    expect(engine.attempts(job.id)).toEqual([expect.objectContaining({ id: lease.attempt_id, number: 1, lease_id: lease.id })])
    expect(lease.expires_at).toBe(T0 + 35 * SECOND)
  })

  it('a claim is a lease: capacity rules apply', () => {
    const { engine } = setup({ total_units: 50, busy_rating: 8 })
    engine.submit(aJob({ cost_units: 11 }))
    expect(engine.claimAndLease({ worker_id: 'w' })).toMatchObject({
      granted: false,
      reason: 'Capacity exceeded: used=0, requested=11, capacity=10',
    })
  })
})

describe('worker API: heartbeat by token', () => {
  it('a heartbeat with the token extends the lease to now + ttl + grace', () => {
    const { engine, clock, job, lease } = claimedByWorker()
    clock.advance(20 * SECOND)
    const beat = engine.heartbeatByToken({ job_id: job.id, worker_id: 'w', lease_token: lease.token })
    expect(beat).toEqual({ lease_id: lease.id, expires_at: T0 + 55 * SECOND, cancel_requested: false })
  })

  it('a token that is not this job\'s lease is 409 lease_token_mismatch', () => {
    const { engine, job } = claimedByWorker()
    const other = engine.submit(aJob()).job
    const otherLease = claimOrFail(engine, 'w2').lease
    expect(otherLease.job_id).toBe(other.id)
    expectEngineError(() => engine.heartbeatByToken({ job_id: job.id, worker_id: 'w', lease_token: 'forged' }), 409, 'lease_token_mismatch')
    expectEngineError(
      () => engine.heartbeatByToken({ job_id: job.id, worker_id: 'w2', lease_token: otherLease.token }),
      409,
      'lease_token_mismatch',
    )
  })

  it('the token of an earlier attempt of the same job is that lease\'s: 409 lease_expired, not a mismatch', () => {
    const { engine, clock, job, lease } = claimedByWorker({}, aJob({ max_attempts: 2 }))
    clock.advance((lease.ttl_s + lease.grace_s) * SECOND + 1)
    engine.reap()
    clock.advance(10 * 60 * SECOND) // past the backoff
    const second = claimOrFail(engine, 'w2')
    expect(second.job.id).toBe(job.id)
    expectEngineError(() => engine.heartbeatByToken({ job_id: job.id, worker_id: 'w', lease_token: lease.token }), 409, 'lease_expired')
    expect(engine.heartbeatByToken({ job_id: job.id, worker_id: 'w2', lease_token: second.lease.token }).lease_id).toBe(second.lease.id)
  })

  it('a heartbeat for an unknown job is 404 job_not_found', () => {
    const { engine, lease } = claimedByWorker()
    expectEngineError(() => engine.heartbeatByToken({ job_id: 'missing', worker_id: 'w', lease_token: lease.token }), 404, 'job_not_found')
  })

  it('a heartbeat by another worker with the right token is 403 worker_mismatch', () => {
    const { engine, job, lease } = claimedByWorker()
    expectEngineError(() => engine.heartbeatByToken({ job_id: job.id, worker_id: 'x', lease_token: lease.token }), 403, 'worker_mismatch')
  })

  it('a heartbeat after expiry is 409 lease_expired; after completion 409 lease_not_active', () => {
    const a = claimedByWorker()
    a.clock.advance(35 * SECOND)
    expectEngineError(() => a.engine.heartbeatByToken({ job_id: a.job.id, worker_id: 'w', lease_token: a.lease.token }), 409, 'lease_expired')
    const b = claimedByWorker()
    b.engine.complete(b.report)
    expectEngineError(() => b.engine.heartbeatByToken({ job_id: b.job.id, worker_id: 'w', lease_token: b.lease.token }), 409, 'lease_not_active')
  })

  it('a superseded token is refused once the job has a new lease', () => {
    const { engine, clock, job, lease } = claimedByWorker()
    clock.advance(36 * SECOND)
    engine.reap()
    clock.advance(2 * SECOND)
    const second = claimOrFail(engine, 'w2').lease
    expect(second.job_id).toBe(job.id)
    expectEngineError(() => engine.heartbeatByToken({ job_id: job.id, worker_id: 'w', lease_token: lease.token }), 409, 'lease_expired')
    expect(engine.getLease(second.id).state).toBe('ACTIVE')
  })
})

describe('worker API: complete and fail', () => {
  it('complete ends the job DONE with its result, acks its messages and frees capacity', () => {
    const { engine, job, report } = claimedByWorker({}, aJob({ cost_units: 4 }))
    const answer = engine.complete({ ...report, result: { ok: 1 } })
    expect(answer).toEqual({ ack: true, requeued: false, dlq: false })
    expect(engine.getJob(job.id)).toMatchObject({ state: 'DONE', final_status: 'SUCCEEDED', result: { ok: 1 } })
    expect(messageIds(engine, job.id)).toEqual([job.stream_message_id]) // no message follows the final state
    expect(engine.getCapacity().leased).toBe(0)
  })

  it('replaying a completion answers as the first time (idempotent by job_id and attempt_id)', () => {
    const { engine, clock, job, report } = claimedByWorker()
    const first = engine.complete(report)
    const events = engine.jobEvents(job.id)
    clock.advance(SECOND)
    expect(engine.complete(report)).toEqual(first)
    expect(engine.jobEvents(job.id)).toEqual(events)
  })

  it('replaying a failure answers as the first time', () => {
    const { engine, report } = claimedByWorker({}, aJob({ max_attempts: 3 }))
    const first = engine.fail({ ...report, error: { message: 'x', retryable: true } })
    expect(first.requeued).toBe(true)
    expect(engine.fail({ ...report, error: { message: 'x', retryable: true } })).toEqual(first)
  })

  it('a second completion with another result is no repeat: 409 lease_not_active with ack true, saying so, and the first result stands', () => {
    const { engine, job, report } = claimedByWorker()
    const first = engine.complete({ ...report, result: { a: 1 } })
    expect(engine.complete({ ...report, result: { a: 1 } })).toEqual(first)
    const events = engine.jobEvents(job.id)
    const error = expectEngineError(() => engine.complete({ ...report, result: { a: 2 } }), 409, 'lease_not_active')
    expect(error.extra).toMatchObject({ ack: true })
    expect(error.detail).toContain('already reported SUCCEEDED with a different result')
    expectEngineError(() => engine.complete(report), 409, 'lease_not_active') // no result is another result too
    expect(engine.getJob(job.id)).toMatchObject({ state: 'DONE', result: { a: 1 } })
    expect(engine.jobEvents(job.id)).toEqual(events)
  })

  it('a second failure repeats the first only with its code, message and retryability; its stack may differ', () => {
    const { engine, job, report } = claimedByWorker({}, aJob({ max_attempts: 3 }))
    const error = { code: 'boom', message: 'x', stack: 'at a', retryable: true }
    const first = engine.fail({ ...report, error })
    expect(engine.fail({ ...report, error: { ...error, stack: 'at b' } })).toEqual(first)
    for (const other of [{ code: 'bang' }, { message: 'y' }, { retryable: false }]) {
      const refused = expectEngineError(() => engine.fail({ ...report, error: { ...error, ...other } }), 409, 'lease_not_active')
      expect(refused.extra).toMatchObject({ ack: true })
      expect(refused.detail).toContain('already reported FAILED with a different error')
    }
    expect(engine.attempts(job.id)[0]).toMatchObject({ outcome: 'FAILED', error: { code: 'boom', message: 'x', retryable: true } })
  })

  it('any failure on an attempt a cancel ended repeats its release, whatever its error', () => {
    const { engine, job, report } = claimedByWorker()
    engine.cancel(job.id)
    const first = engine.fail({ ...report, error: { code: 'stopped', message: 'canceled' } })
    expect(engine.fail({ ...report, error: { code: 'other', message: 'another' } })).toEqual(first)
  })

  it('a completion after the attempt failed is 409 lease_not_active with ack true', () => {
    const { engine, job, report } = claimedByWorker()
    engine.fail({ ...report, error: { message: 'no' } })
    const error = expectEngineError(() => engine.complete(report), 409, 'lease_not_active')
    expect(error.extra).toMatchObject({ ack: true })
    expect(engine.getJob(job.id).state).toBe('FAILED')
  })

  it('a late completion after expiry is refused (409 lease_expired, ack true) and the requeued job is untouched', () => {
    const { engine, clock, job, report } = claimedByWorker()
    clock.advance(36 * SECOND)
    engine.reap()
    const before = engine.getJob(job.id)
    const error = expectEngineError(() => engine.complete(report), 409, 'lease_expired')
    expect(error.extra).toMatchObject({ ack: true })
    expect(engine.getJob(job.id)).toEqual(before)
    expect(before.state).toBe('QUEUED')
  })

  it('a completion naming another attempt is 409 attempt_mismatch', () => {
    const { engine, job, report } = claimedByWorker()
    expectEngineError(() => engine.complete({ ...report, attempt_id: 'other' }), 409, 'attempt_mismatch')
    expect(engine.getJob(job.id).state).toBe('RUNNING')
  })

  it('a completion with a forged token is 409 lease_token_mismatch and by another worker 403', () => {
    const { engine, job, report } = claimedByWorker()
    expectEngineError(() => engine.complete({ ...report, lease_token: 'forged' }), 409, 'lease_token_mismatch')
    expectEngineError(() => engine.complete({ ...report, worker_id: 'x' }), 403, 'worker_mismatch')
    expect(engine.getJob(job.id).state).toBe('RUNNING')
  })

  it('fail with error.retryable requeues with backoff while attempts remain', () => {
    const { engine, clock, job, report } = claimedByWorker({}, aJob({ max_attempts: 2 }))
    const answer = engine.fail({ ...report, error: { code: 'E', message: 'flaky', retryable: true } })
    expect(answer).toEqual({ ack: true, requeued: true, dlq: false })
    const requeued = engine.getJob(job.id)
    expect(requeued).toMatchObject({ state: 'QUEUED', attempts: 1, next_retry_at: clock.now() + 2 * SECOND, dead_letter: false })
    expect(engine.attempts(job.id)[0]).toMatchObject({ outcome: 'FAILED', disposition: 'REQUEUED', error: { code: 'E', message: 'flaky' } })
    // The requeue gives the job a new message, which waits for the next delivery.
    expect(messageIds(engine, job.id)).toEqual([job.stream_message_id, requeued.stream_message_id])
    expect(requeued.stream_message_id).toBeGreaterThan(job.stream_message_id!)
  })

  it('a requeued job starts its next attempt with no progress and no note: they told of the attempt that ended', () => {
    const { engine, job, report } = claimedByWorker({}, aJob({ max_attempts: 2 }))
    engine.heartbeatByToken({ ...report, progress: 0.5, note: 'halfway' })
    expect(engine.getJob(job.id)).toMatchObject({ progress: 0.5, note: 'halfway' })
    engine.fail({ ...report, error: { message: 'flaky', retryable: true } })
    expect(engine.getJob(job.id)).toMatchObject({ state: 'QUEUED', progress: null, note: null })
  })

  it('fail with error.retryable on the last attempt dead-letters', () => {
    const { engine, clock, job, report } = claimedByWorker({}, aJob({ max_attempts: 2 }))
    engine.fail({ ...report, error: { message: 'flaky', retryable: true } })
    clock.advance(2 * SECOND)
    const second = claimOrFail(engine, 'w')
    const answer = engine.fail({
      job_id: job.id,
      attempt_id: second.lease.attempt_id,
      worker_id: 'w',
      lease_token: second.lease.token,
      error: { message: 'flaky', retryable: true },
    })
    expect(answer).toEqual({ ack: true, requeued: false, dlq: true })
    expect(engine.getJob(job.id)).toMatchObject({ state: 'FAILED', dead_letter: true, attempts: 2 })
  })

  it('fail without retryable is final even with attempts left', () => {
    const { engine, job, report } = claimedByWorker({}, aJob({ max_attempts: 5 }))
    const answer = engine.fail({ ...report, error: { message: 'bad input' } })
    expect(answer).toEqual({ ack: true, requeued: false, dlq: false })
    expect(engine.getJob(job.id)).toMatchObject({ state: 'FAILED', dead_letter: false })
  })
})

describe('worker API: stream messages', () => {
  it('a claim delivers the job\'s current message, the one its submit recorded', () => {
    const { engine } = setup()
    const submitted = engine.submit(aJob()).job
    const decision = engine.claimAndLease({ worker_id: 'w', queues: ['default'] })
    if (!decision.granted) throw new Error(decision.reason)
    expect(decision.message_id).toBe(submitted.stream_message_id)
    expect(messageIds(engine, submitted.id)).toEqual([submitted.stream_message_id])
  })

  it('each submit and each requeue gives the job a new message, with a larger id than any before', () => {
    const { engine, clock, job, lease } = claimedByWorker({}, aJob({ max_attempts: 3 }))
    const other = engine.submit(aJob()).job
    clock.advance((lease.ttl_s + lease.grace_s) * SECOND + 1)
    engine.reap()
    const requeued = engine.getJob(job.id)
    expect(requeued.state).toBe('QUEUED')
    expect(messageIds(engine, job.id)).toEqual([job.stream_message_id, requeued.stream_message_id])
    expect(requeued.stream_message_id).toBeGreaterThan(other.stream_message_id!)
    expect(other.stream_message_id).toBeGreaterThan(job.stream_message_id!)
  })

  it('a canceled job\'s message is never delivered', () => {
    const { engine } = setup()
    const { job } = engine.submit(aJob())
    engine.cancel(job.id)
    expect(engine.claimAndLease({ worker_id: 'w' })).toMatchObject({ granted: false })
  })
})
