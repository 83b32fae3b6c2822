import { describe, expect, it } from 'vitest'
import type { Engine } from '../../src-main/engine'
import { BULK_STEP } from '../../src-main/engine/verbs/bulk'
import { aJob, setup } from '../helpers/engine'
import { claimOrFail, eventTypes, expectEngineError, runBulk } from './support'

/** A job that ended FAILED (the worker API, not retryable). */
function failedJob(engine: Engine, fields: Parameters<typeof aJob>[0] = {}): string {
  const { job } = engine.submit(aJob({ priority: 'URGENT', ...fields }))
  const { lease } = claimOrFail(engine, { worker_id: 'w', queues: [job.queue] })
  if (lease.job_id !== job.id) throw new Error('claimed another job')
  engine.fail({ job_id: job.id, attempt_id: lease.attempt_id, worker_id: 'w', lease_token: lease.token, error: { message: 'no' } })
  return job.id
}

describe('bulk retry', () => {
  it('counts and changes exactly the matching finished jobs; a dry run only counts', () => {
    const { engine } = setup()
    const matching = [failedJob(engine, { queue: 'q', job_type: 'render' }), failedJob(engine, { queue: 'q', job_type: 'render' })]
    const otherType = failedJob(engine, { queue: 'q', job_type: 'encode' })
    const otherQueue = failedJob(engine, { queue: 'r', job_type: 'render' })
    const canceled = engine.submit(aJob({ queue: 'q', job_type: 'render' })).job.id
    engine.cancel(canceled)
    const waiting = engine.submit(aJob({ queue: 'q', job_type: 'render' })).job.id

    const filter = { states: ['FAILED' as const], queue: 'q', job_type: 'render' }
    expect(runBulk(engine, 'retry', { filter, dry_run: true })).toMatchObject({ matched: 2, changed: 0 })
    expect(matching.map((id) => engine.getJob(id).state)).toEqual(['FAILED', 'FAILED'])

    expect(runBulk(engine, 'retry', { filter, requested_by: 'ops' })).toMatchObject({ matched: 2, changed: 2 })
    expect(matching.map((id) => engine.getJob(id).state)).toEqual(['QUEUED', 'QUEUED'])
    expect([otherType, otherQueue, canceled, waiting].map((id) => engine.getJob(id).state)).toEqual(['FAILED', 'FAILED', 'CANCELED', 'QUEUED'])
    expect(engine.jobEvents(matching[0]!).at(-1)!.data).toMatchObject({ requested_by: 'ops' })

    // No state given: every retryable state of the queue (FAILED, CANCELED, TIMEOUT).
    expect(runBulk(engine, 'retry', { filter: { queue: 'q' } })).toMatchObject({ matched: 2, changed: 2 })
    expect([otherType, canceled].map((id) => engine.getJob(id).state)).toEqual(['QUEUED', 'QUEUED'])
  })

  it('a job whose retry is refused is matched but not changed, and the others go on', () => {
    const { engine } = setup({ total_units: 10 })
    const big = engine.submit(aJob({ cost_units: 10 })).job.id
    const small = engine.submit(aJob({ cost_units: 1 })).job.id
    engine.cancel(big)
    engine.cancel(small)
    engine.setCapacity({ total_units: 5 })
    expect(runBulk(engine, 'retry', { filter: {}, all: true })).toMatchObject({ matched: 2, changed: 1 })
    expect([big, small].map((id) => engine.getJob(id).state)).toEqual(['CANCELED', 'QUEUED'])
  })

  it('states the action does not apply to are refused, naming the field', () => {
    const { engine } = setup()
    expect(expectEngineError(() => engine.planBulk('retry', { filter: { states: ['DONE'] } }), 400, 'invalid_request').detail).toMatch(/^states: retry applies to/)
    expectEngineError(() => engine.planBulk('cancel', { filter: { states: ['FAILED'] } }), 400, 'invalid_request')
    expectEngineError(() => engine.planBulk('purge', { filter: { states: ['QUEUED'] } }), 400, 'invalid_request')
  })
})

describe('bulk cancel', () => {
  it('an empty filter is refused unless all: true, for retry too (it would run again the jobs canceled on purpose)', () => {
    const { engine } = setup()
    engine.submit(aJob())
    expect(expectEngineError(() => engine.planBulk('cancel', { filter: {} }), 400, 'invalid_request').detail).toContain('all: true')
    expect(expectEngineError(() => engine.planBulk('retry', { filter: {} }), 400, 'invalid_request').detail).toContain('an empty filter would retry every job')
    expect(runBulk(engine, 'cancel', { filter: {}, all: true })).toMatchObject({ matched: 1, changed: 1 })
  })

  it('cancels waiting jobs at once and asks running ones to stop; finished jobs and other queues are untouched', () => {
    const { engine } = setup()
    const running = engine.submit(aJob({ addon_id: 'a' })).job.id
    claimOrFail(engine, 'w')
    const waiting = engine.submit(aJob({ addon_id: 'a' })).job.id
    const other = engine.submit(aJob({ addon_id: 'b' })).job.id
    const failed = failedJob(engine, { addon_id: 'a' })
    expect(runBulk(engine, 'cancel', { filter: { addon_id: 'a' } })).toMatchObject({ matched: 2, changed: 2 })
    expect(engine.getJob(waiting).state).toBe('CANCELED')
    expect(engine.getJob(running)).toMatchObject({ state: 'RUNNING', cancel_requested: true })
    expect([other, failed].map((id) => engine.getJob(id).state)).toEqual(['QUEUED', 'FAILED'])
    // Asked again: the running job is matched, but already cancel-requested, so not changed.
    expect(runBulk(engine, 'cancel', { filter: { addon_id: 'a' } })).toMatchObject({ matched: 1, changed: 0 })
    expect(eventTypes(engine.jobEvents(running)).filter((t) => t === 'JOB_CANCEL_REQUESTED')).toHaveLength(1)
  })
})

/** A job that ran out of attempts: FAILED and dead-lettered (a retryable failure of its only attempt). */
function deadLetteredJob(engine: Engine, fields: Parameters<typeof aJob>[0] = {}): string {
  const { job } = engine.submit(aJob({ priority: 'URGENT', max_attempts: 1, ...fields }))
  const { lease } = claimOrFail(engine, { worker_id: 'w', queues: [job.queue] })
  if (lease.job_id !== job.id) throw new Error('claimed another job')
  engine.fail({ job_id: job.id, attempt_id: lease.attempt_id, worker_id: 'w', lease_token: lease.token, error: { message: 'no', retryable: true } })
  return job.id
}

describe('bulk actions on dead letters', () => {
  it('dead_letter: true retries only the jobs that ran out of attempts; false only the others', () => {
    const { engine } = setup()
    const dead = [deadLetteredJob(engine, { queue: 'q' }), deadLetteredJob(engine, { queue: 'q' })]
    const failed = failedJob(engine, { queue: 'q' })
    const canceled = engine.submit(aJob({ queue: 'q' })).job.id
    engine.cancel(canceled)
    expect(dead.map((id) => engine.getJob(id))).toEqual([expect.objectContaining({ state: 'FAILED', dead_letter: true }), expect.objectContaining({ state: 'FAILED', dead_letter: true })])

    expect(runBulk(engine, 'retry', { filter: { dead_letter: true }, dry_run: true })).toMatchObject({ matched: 2, changed: 0 })
    expect(runBulk(engine, 'retry', { filter: { dead_letter: false }, dry_run: true })).toMatchObject({ matched: 2, changed: 0 })
    expect(runBulk(engine, 'retry', { filter: { dead_letter: true } })).toMatchObject({ matched: 2, changed: 2 })
    expect(dead.map((id) => engine.getJob(id))).toEqual([expect.objectContaining({ state: 'QUEUED', dead_letter: false }), expect.objectContaining({ state: 'QUEUED', dead_letter: false })])
    expect([failed, canceled].map((id) => engine.getJob(id).state)).toEqual(['FAILED', 'CANCELED'])
  })

  it('dead_letter alone is a filter: a purge of dead letters needs no all: true and deletes only them', () => {
    const { engine } = setup()
    const dead = deadLetteredJob(engine, { job_type: 'render' })
    const failed = failedJob(engine, { job_type: 'render' })
    expect(runBulk(engine, 'purge', { filter: { dead_letter: true } })).toMatchObject({ matched: 1, changed: 1 })
    expectEngineError(() => engine.getJob(dead), 404, 'job_not_found')
    expect(engine.getJob(failed).state).toBe('FAILED')
  })

  it('dead_letter: true is refused where no state could hold a dead letter, naming the field', () => {
    const { engine } = setup()
    expect(expectEngineError(() => engine.planBulk('cancel', { filter: { dead_letter: true } }), 400, 'invalid_request').detail).toMatch(/^dead_letter: /)
    expect(expectEngineError(() => engine.planBulk('retry', { filter: { states: ['CANCELED'], dead_letter: true } }), 400, 'invalid_request').detail).toMatch(/^dead_letter: /)
    expect(engine.planBulk('retry', { filter: { states: ['CANCELED', 'TIMEOUT'], dead_letter: true } }).states).toEqual(['TIMEOUT'])
  })
})

describe('bulk steps', () => {
  it('works in steps of at most BULK_STEP jobs, each its own transaction', () => {
    const { engine } = setup()
    const count = BULK_STEP * 2 + 7
    for (let i = 0; i < count; i += 500) engine.submitMany(Array.from({ length: Math.min(500, count - i) }, () => aJob({ queue: 'many' })))
    const commits = engine.commits
    const result = runBulk(engine, 'cancel', { filter: { queue: 'many' } })
    expect(result).toMatchObject({ matched: count, changed: count })
    expect(Math.max(...result.steps)).toBe(BULK_STEP)
    expect(engine.commits - commits).toBe(result.steps.filter((n) => n > 0).length)
    expect(engine.listQueues()).toEqual([expect.objectContaining({ queue: 'many', counts: { CANCELED: count } })])
  })

  it('a job submitted after the call started is not swept up', () => {
    const { engine } = setup()
    engine.submit(aJob({ queue: 'q' }))
    const plan = engine.planBulk('cancel', { filter: { queue: 'q' } })
    const late = engine.submit(aJob({ queue: 'q' })).job.id
    for (let cursor = plan.first; cursor; ) cursor = engine.bulkStep(plan, cursor).next
    expect(engine.getJob(late).state).toBe('QUEUED')
  })
})
