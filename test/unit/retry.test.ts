import { describe, expect, it } from 'vitest'
import { SECOND } from '../../src-main/engine/rules/clock'
import { aJob, setup, T0 } from '../helpers/engine'
import { claimOrFail, eventTypes, expectEngineError } from './support'

/** Runs the job's attempts to the end through the worker API, each failing as retryable: it ends FAILED dead-lettered. */
function failToTheEnd(setupResult: ReturnType<typeof setup>, jobId: string): void {
  const { engine, clock } = setupResult
  for (;;) {
    clock.advance(10 * 60 * SECOND) // past any backoff
    const { lease } = claimOrFail(engine, 'w')
    const answer = engine.fail({ job_id: jobId, attempt_id: lease.attempt_id, worker_id: 'w', lease_token: lease.token, error: { message: 'boom', retryable: true } })
    if (answer.dlq) return
  }
}

describe('retrying a finished job', () => {
  it('a dead-lettered job comes back QUEUED as a new run with a fresh attempt budget, its history kept', () => {
    const s = setup()
    const { engine, clock } = s
    const { job } = engine.submit(aJob({ max_attempts: 2 }))
    failToTheEnd(s, job.id)
    expect(engine.getJob(job.id)).toMatchObject({ state: 'FAILED', attempts: 2, dead_letter: true })
    clock.advance(SECOND)
    const retried = engine.retry(job.id, 'alice')
    expect(retried).toMatchObject({ state: 'QUEUED', attempts: 2, max_attempts: 4, dead_letter: false, final_status: null, error: null, eligible_at: clock.now() })
    // The new run gets two attempts of its own, numbered 3 and 4, then dead-letters again.
    failToTheEnd(s, job.id)
    expect(engine.attempts(job.id).map((a) => [a.number, a.outcome, a.disposition])).toEqual([
      [1, 'FAILED', 'REQUEUED'],
      [2, 'FAILED', 'DEAD_LETTERED'],
      [3, 'FAILED', 'REQUEUED'],
      [4, 'FAILED', 'DEAD_LETTERED'],
    ])
    const types = eventTypes(engine.jobEvents(job.id))
    expect(types.filter((t) => t === 'JOB_FAILED')).toHaveLength(2)
    expect(types.indexOf('JOB_RETRIED')).toBeGreaterThan(types.indexOf('JOB_FAILED'))
    const retriedEvent = engine.jobEvents(job.id).find((e) => e.event_type === 'JOB_RETRIED')!
    expect(retriedEvent.ts).toBe(retried.updated_at)
    expect(retriedEvent.data).toEqual({ state: 'QUEUED', from: 'FAILED', requested_by: 'alice', message_id: retried.stream_message_id, attempts: 2, max_attempts: 4 })
  })

  it('a TIMEOUT job (its last lease expired) and a CANCELED one are retried too; a retried job is taken at once', () => {
    const { engine, clock } = setup()
    const timedOut = engine.submit(aJob({ max_attempts: 1 })).job.id
    claimOrFail(engine, 'w')
    clock.advance(60 * SECOND)
    engine.reap()
    expect(engine.getJob(timedOut)).toMatchObject({ state: 'TIMEOUT', dead_letter: true })
    const canceled = engine.submit(aJob()).job.id
    engine.cancel(canceled, 'not now')
    expect(engine.retry(timedOut).max_attempts).toBe(2)
    expect(engine.retry(canceled)).toMatchObject({ state: 'QUEUED', attempts: 0, max_attempts: 3, note: null })
    expect(engine.claim({ worker_id: 'w' }, 2).map((j) => j.id).sort()).toEqual([timedOut, canceled].sort())
  })

  it('a job that is DONE or not finished answers 409, and nothing changes', () => {
    const { engine } = setup()
    engine.submit(aJob())
    const running = claimOrFail(engine, 'w')
    const queued = engine.submit(aJob()).job.id
    expect(expectEngineError(() => engine.retry(queued), 409, 'illegal_transition').detail).toContain('QUEUED')
    expectEngineError(() => engine.retry(running.job.id), 409, 'illegal_transition')
    expect(engine.getJob(running.job.id).state).toBe('RUNNING')
    engine.complete({ job_id: running.job.id, attempt_id: running.lease.attempt_id, worker_id: 'w', lease_token: running.lease.token })
    expect(expectEngineError(() => engine.retry(running.job.id), 409, 'illegal_transition').detail).toContain('DONE')
    expect(engine.getJob(running.job.id).state).toBe('DONE')
    expect(engine.getJob(queued).state).toBe('QUEUED')
    expectEngineError(() => engine.retry('no-such-job'), 404, 'job_not_found')
  })

  it('a job that now costs more than the total capacity is not retried', () => {
    const { engine } = setup({ total_units: 10 })
    const { job } = engine.submit(aJob({ cost_units: 10 }))
    engine.cancel(job.id)
    engine.setCapacity({ total_units: 5 })
    expectEngineError(() => engine.retry(job.id), 400, 'cost_exceeds_capacity')
    expect(engine.getJob(job.id).state).toBe('CANCELED')
  })

  it('a retry writes a new stream message: a worker API worker gets the new run', () => {
    const { engine } = setup()
    const { job } = engine.submit(aJob())
    engine.cancel(job.id)
    const retried = engine.retry(job.id)
    expect(retried.stream_message_id).toBeGreaterThan(job.stream_message_id!)
    const claimed = claimOrFail(engine, { worker_id: 'w', queues: ['default'] })
    expect(claimed.message_id).toBe(retried.stream_message_id)
    expect(claimed.job.started_at).toBe(T0)
  })
})
