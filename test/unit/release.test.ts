import { describe, expect, it } from 'vitest'
import { aJob, setup } from '../helpers/engine'
import { SECOND } from '../../src-main/engine/rules/clock'
import { MAX_SHUTDOWN_GIVE_BACKS } from '../../src-main/engine/verbs/lease-end'
import { claimOrFail, eventTypes, expectEngineError, leaseOrFail, messageIds } from './support'

function leasedJob(options: Parameters<typeof setup>[0] = {}, job = aJob()) {
  const s = setup(options)
  const submitted = s.engine.submit(job).job
  const leased = leaseOrFail(s.engine, 'w')
  return { ...s, job: submitted, lease: leased.lease }
}

describe('release', () => {
  it('release SUCCEEDED ends the job DONE, frees capacity and closes the attempt', () => {
    const { engine, clock, job, lease } = leasedJob({}, aJob({ cost_units: 3 }))
    clock.advance(5 * SECOND)
    const released = engine.release({ lease_id: lease.id, worker_id: 'w', status: 'SUCCEEDED', result: { out: 42 } })
    expect(released.replay).toBe(false)
    expect(released.lease).toMatchObject({ state: 'RELEASED', release_status: 'SUCCEEDED', released_at: clock.now() })
    expect(released.job).toMatchObject({ state: 'DONE', final_status: 'SUCCEEDED', finished_at: clock.now(), dead_letter: false })
    expect(released.job.result).toEqual({ out: 42 })
    expect(engine.getCapacity().leased).toBe(0)
    expect(engine.attempts(job.id)[0]).toMatchObject({ outcome: 'SUCCEEDED', disposition: 'FINAL', finished_at: clock.now() })
  })

  it('release FAILED is final even with attempts left (only the worker API’s retryable /fail requeues)', () => {
    const { engine, job, lease } = leasedJob({ config: { maxAttempts: 5 } })
    const released = engine.release({ lease_id: lease.id, status: 'FAILED', error: { message: 'boom' } })
    expect(released.job).toMatchObject({ state: 'FAILED', final_status: 'FAILED', dead_letter: false, attempts: 1 })
    expect(released.job.error).toEqual({ message: 'boom' })
    expect(engine.attempts(job.id)[0]).toMatchObject({ outcome: 'FAILED', disposition: 'FINAL' })
    expect(engine.attempts(job.id)[0]!.error).toEqual({ message: 'boom' })
  })

  it('release CANCELED ends the job CANCELED', () => {
    const { engine, lease } = leasedJob()
    expect(engine.release({ lease_id: lease.id, status: 'CANCELED' }).job.state).toBe('CANCELED')
  })

  it('release works from RUNNING as well as LEASED', () => {
    const { engine, lease } = leasedJob()
    engine.heartbeat({ lease_id: lease.id, worker_id: 'w' })
    expect(engine.release({ lease_id: lease.id, status: 'SUCCEEDED' }).job.state).toBe('DONE')
  })

  it('replaying a completion answers as the first time and writes nothing', () => {
    const { engine, clock, job, lease } = leasedJob()
    const first = engine.release({ lease_id: lease.id, worker_id: 'w', status: 'SUCCEEDED', result: 1 })
    const eventsBefore = engine.jobEvents(job.id)
    clock.advance(10 * SECOND)
    const again = engine.release({ lease_id: lease.id, worker_id: 'w', status: 'SUCCEEDED', result: 1 })
    expect(again.replay).toBe(true)
    expect(again.lease).toEqual(first.lease)
    expect(again.job).toEqual(first.job)
    expect(engine.jobEvents(job.id)).toEqual(eventsBefore)
  })

  it('replaying a failure answers as the first time', () => {
    const { engine, lease } = leasedJob()
    const first = engine.release({ lease_id: lease.id, status: 'FAILED' })
    const again = engine.release({ lease_id: lease.id, status: 'FAILED' })
    expect(again).toMatchObject({ replay: true, job: first.job, lease: first.lease })
  })

  it('a release of the same status with another result or error is no repeat: 409 lease_not_active saying so', () => {
    const done = leasedJob()
    done.engine.release({ lease_id: done.lease.id, status: 'SUCCEEDED', result: { a: 1 } })
    const error = expectEngineError(() => done.engine.release({ lease_id: done.lease.id, status: 'SUCCEEDED', result: { a: 2 } }), 409, 'lease_not_active')
    expect(error.detail).toContain('already reported SUCCEEDED with a different result')
    expect(done.engine.getJob(done.job.id).result).toEqual({ a: 1 })
    const failed = leasedJob()
    failed.engine.release({ lease_id: failed.lease.id, status: 'FAILED', error: 'disk full' })
    expect(failed.engine.release({ lease_id: failed.lease.id, status: 'FAILED', error: 'disk full' }).replay).toBe(true)
    const refused = expectEngineError(() => failed.engine.release({ lease_id: failed.lease.id, status: 'FAILED', error: 'out of memory' }), 409, 'lease_not_active')
    expect(refused.detail).toContain('already reported FAILED with a different error')
  })

  it('a repeated completion or failure is compared as JSON: its objects\' members in any order, an array\'s order counting', () => {
    const done = leasedJob()
    done.engine.release({ lease_id: done.lease.id, status: 'SUCCEEDED', result: { a: 1, b: { c: [1, 2], d: 'x' } } })
    expect(done.engine.release({ lease_id: done.lease.id, status: 'SUCCEEDED', result: { b: { d: 'x', c: [1, 2] }, a: 1 } }).replay).toBe(true)
    expectEngineError(() => done.engine.release({ lease_id: done.lease.id, status: 'SUCCEEDED', result: { a: 1, b: { c: [2, 1], d: 'x' } } }), 409, 'lease_not_active')
    const failed = leasedJob()
    failed.engine.release({ lease_id: failed.lease.id, status: 'FAILED', error: { code: 'io', message: 'disk full', details: { dev: 'sda', free: 0 } } })
    expect(failed.engine.release({ lease_id: failed.lease.id, status: 'FAILED', error: { details: { free: 0, dev: 'sda' }, message: 'disk full', code: 'io' } }).replay).toBe(true)
    const plain = leasedJob()
    plain.engine.release({ lease_id: plain.lease.id, status: 'FAILED', error: [{ at: 1, why: 'x' }] })
    expect(plain.engine.release({ lease_id: plain.lease.id, status: 'FAILED', error: [{ why: 'x', at: 1 }] }).replay).toBe(true)
    const coded = leasedJob()
    coded.engine.release({ lease_id: coded.lease.id, status: 'FAILED', error: { code: { kind: 'io', n: 5 }, message: 'm' } })
    expect(coded.engine.release({ lease_id: coded.lease.id, status: 'FAILED', error: { message: 'm', code: { n: 5, kind: 'io' } } }).replay).toBe(true)
  })

  it('a different outcome on an already released lease is 409 lease_not_active and changes nothing', () => {
    const { engine, job, lease } = leasedJob()
    engine.release({ lease_id: lease.id, status: 'SUCCEEDED' })
    expectEngineError(() => engine.release({ lease_id: lease.id, status: 'FAILED' }), 409, 'lease_not_active')
    expect(engine.getJob(job.id).state).toBe('DONE')
  })

  it('a release by another worker is 403 worker_mismatch and changes nothing', () => {
    const { engine, job, lease } = leasedJob()
    expectEngineError(() => engine.release({ lease_id: lease.id, worker_id: 'other', status: 'SUCCEEDED' }), 403, 'worker_mismatch')
    expect(engine.getJob(job.id).state).toBe('LEASED')
    expect(engine.getLease(lease.id).state).toBe('ACTIVE')
  })

  it('a release of an unknown lease is 404 lease_not_found', () => {
    const { engine } = setup()
    expectEngineError(() => engine.release({ lease_id: 'x', status: 'SUCCEEDED' }), 404, 'lease_not_found')
  })

  it('release of an expired lease is 409 lease_expired and the attempt ended TIMEOUT', () => {
    const { engine, clock, job, lease } = leasedJob()
    clock.advance(36 * SECOND)
    engine.reap()
    expectEngineError(() => engine.release({ lease_id: lease.id, worker_id: 'w', status: 'SUCCEEDED' }), 409, 'lease_expired')
    expect(engine.attempts(job.id)[0]).toMatchObject({ outcome: 'TIMEOUT' })
    expect(engine.getJob(job.id).state).toBe('QUEUED')
  })

  it('a late completion after expiry is refused by fencing (409 lease_expired), even before the reaper ran', () => {
    const { engine, clock, job, lease } = leasedJob()
    clock.advance(35 * SECOND)
    expectEngineError(() => engine.release({ lease_id: lease.id, worker_id: 'w', status: 'SUCCEEDED' }), 409, 'lease_expired')
    const after = engine.getJob(job.id)
    expect(after.state).toBe('QUEUED')
    expect(after.final_status).toBeNull()
    expect(engine.attempts(job.id)[0]!.outcome).toBe('TIMEOUT')
  })

  it('a superseded lease cannot finish the job its successor now runs', () => {
    const { engine, clock, job, lease } = leasedJob()
    clock.advance(36 * SECOND)
    engine.reap()
    clock.advance(2 * SECOND)
    const second = leaseOrFail(engine, 'w2')
    expect(second.job.id).toBe(job.id)
    expectEngineError(() => engine.release({ lease_id: lease.id, worker_id: 'w', status: 'FAILED' }), 409, 'lease_expired')
    expectEngineError(() => engine.heartbeat({ lease_id: lease.id, worker_id: 'w' }), 409, 'lease_expired')
    expect(engine.getJob(job.id)).toMatchObject({ state: 'LEASED', lease_id: second.lease.id })
    expect(engine.getLease(second.lease.id).state).toBe('ACTIVE')
  })

  it('a release writes the job\'s final event in its transaction', () => {
    const { engine, job, lease } = leasedJob()
    engine.release({ lease_id: lease.id, status: 'SUCCEEDED' })
    expect(eventTypes(engine.jobEvents(job.id))).toEqual(['JOB_SUBMITTED', 'LEASE_GRANTED', 'JOB_DONE'])
  })

  it('a released job is delivered no further stream message', () => {
    const { engine, job, lease } = leasedJob()
    engine.release({ lease_id: lease.id, status: 'FAILED' })
    expect(messageIds(engine, job.id)).toEqual([job.stream_message_id])
  })
})

describe('a run stopped by its worker shutting down', () => {
  it('costs no attempt: its job on its last attempt is requeued at once with one more, not dead-lettered; a cancel asked meanwhile still ends it', () => {
    const { engine } = setup()
    const shutdown = { code: 'shutdown', message: 'The worker shut down before the job finished', retryable: true }
    const job = engine.submit(aJob({ max_attempts: 1 })).job
    const { lease } = claimOrFail(engine, 'w')
    expect(engine.fail({ job_id: job.id, worker_id: 'w', lease_token: lease.token, attempt_id: lease.attempt_id, error: shutdown })).toMatchObject({ requeued: true, dlq: false })
    expect(engine.getJob(job.id)).toMatchObject({ state: 'QUEUED', attempts: 1, max_attempts: 2, next_retry_at: null, dead_letter: false })
    expect(engine.attempts(job.id)).toEqual([expect.objectContaining({ outcome: 'FAILED', disposition: 'REQUEUED' })])
    // Another failure on the last attempt is the job's own: dead-lettered as ever.
    const again = claimOrFail(engine, 'w').lease
    expect(engine.fail({ job_id: job.id, worker_id: 'w', lease_token: again.token, attempt_id: again.attempt_id, error: { code: 'boom', retryable: true } })).toMatchObject({ dlq: true })
    // A cancel asked before the worker stopped ends the job.
    const canceled = engine.submit(aJob()).job
    const third = claimOrFail(engine, 'w').lease
    engine.cancel(canceled.id)
    engine.fail({ job_id: canceled.id, worker_id: 'w', lease_token: third.token, attempt_id: third.attempt_id, error: shutdown })
    expect(engine.getJob(canceled.id).state).toBe('CANCELED')
  })

  it(`gives a job its attempt back at most MAX_SHUTDOWN_GIVE_BACKS (${MAX_SHUTDOWN_GIVE_BACKS}) times: a shutdown after that is a retryable failure, counted, with its backoff`, () => {
    const { engine, clock } = setup()
    const shutdown = { code: 'shutdown', message: 'a handler whose library says "shutdown"', retryable: true }
    const job = engine.submit(aJob({ max_attempts: 2 })).job
    const failShutdown = () => {
      const { lease } = claimOrFail(engine, 'w')
      return engine.fail({ job_id: job.id, worker_id: 'w', lease_token: lease.token, attempt_id: lease.attempt_id, error: shutdown })
    }
    for (let i = 1; i <= MAX_SHUTDOWN_GIVE_BACKS; i++) {
      expect(failShutdown()).toMatchObject({ requeued: true, dlq: false })
      expect(engine.getJob(job.id)).toMatchObject({ state: 'QUEUED', attempts: i, max_attempts: 2 + i, next_retry_at: null })
    }
    // Counted now: one attempt left of the seven, after a backoff.
    expect(failShutdown()).toMatchObject({ requeued: true, dlq: false })
    const held = engine.getJob(job.id)
    expect(held).toMatchObject({ state: 'QUEUED', attempts: MAX_SHUTDOWN_GIVE_BACKS + 1, max_attempts: 2 + MAX_SHUTDOWN_GIVE_BACKS })
    expect(held.next_retry_at).toBeGreaterThan(clock.now())
    clock.set(held.next_retry_at!)
    expect(failShutdown()).toMatchObject({ requeued: false, dlq: true })
    expect(engine.getJob(job.id)).toMatchObject({ state: 'FAILED', dead_letter: true, attempts: MAX_SHUTDOWN_GIVE_BACKS + 2 })
  })
})
