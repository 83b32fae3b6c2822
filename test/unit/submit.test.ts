import { describe, expect, it } from 'vitest'
import { aJob, setup, T0 } from '../helpers/engine'
import { SECOND } from '../../src-main/engine/rules/clock'
import { expectEngineError } from './support'
import { sql } from '../helpers/database'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

describe('submit', () => {
  it('a submit needing only job_type and cost_units gets every documented default', () => {
    const { engine } = setup()
    const { job, duplicate } = engine.submit({ job_type: 'render', cost_units: 2 })
    expect(duplicate).toBe(false)
    expect(job.id).toMatch(UUID)
    expect(job).toMatchObject({
      job_type: 'render',
      cost_units: 2,
      addon_id: null,
      priority: 'NORMAL',
      constraints: {},
      payload: {},
      unique: false,
      idempotency_key: null,
      tags: [],
      max_runtime_s: null,
      queue: 'default',
      max_attempts: 3,
      state: 'QUEUED',
      attempts: 0,
      claimed_by: null,
      claim_expires_at: null,
      lease_id: null,
      next_retry_at: null,
      cancel_requested: false,
      dead_letter: false,
      created_at: T0,
      updated_at: T0,
      eligible_at: T0,
    })
    expect(engine.getJob(job.id)).toEqual(job)
  })

  it('max_attempts defaults to the configured value', () => {
    const { engine } = setup({ config: { maxAttempts: 7 } })
    expect(engine.submit(aJob()).job.max_attempts).toBe(7)
  })

  it('every model field given at submit is stored', () => {
    const { engine } = setup()
    const { job } = engine.submit({
      job_type: 'encode',
      cost_units: 5,
      addon_id: 'addon-a',
      priority: 'URGENT',
      constraints: { gpu_required: true, ssd: false },
      payload: { input: 'a.mp4', n: [1, 2] },
      unique: true,
      idempotency_key: 'key-1',
      tags: ['x', 'y'],
      max_runtime_s: 600,
      queue: 'video',
      max_attempts: 5,
    })
    const stored = engine.getJob(job.id)
    expect(stored).toMatchObject({
      addon_id: 'addon-a',
      priority: 'URGENT',
      cost_units: 5,
      unique: true,
      idempotency_key: 'key-1',
      max_runtime_s: 600,
      queue: 'video',
      max_attempts: 5,
    })
    expect(stored.constraints).toEqual({ gpu_required: true, ssd: false })
    expect(stored.payload).toEqual({ input: 'a.mp4', n: [1, 2] })
    expect(stored.tags).toEqual(['x', 'y'])
  })

  it('priorities are stored so that a higher rank is picked first: LOW<NORMAL<HIGH<URGENT', () => {
    const { engine } = setup()
    const rank = (priority: 'LOW' | 'NORMAL' | 'HIGH' | 'URGENT') => {
      const { job } = engine.submit(aJob({ priority }))
      expect(job.priority).toBe(priority)
      return sql(engine).one<{ priority: number }>('SELECT priority FROM jobs WHERE id = ?', job.id)!.priority
    }
    expect([rank('LOW'), rank('NORMAL'), rank('HIGH'), rank('URGENT')]).toEqual([0, 1, 2, 3])
  })

  it.each([
    ['job_type missing', { job_type: undefined }, 'job_type'],
    ['job_type empty', { job_type: '' }, 'job_type'],
    ['cost_units 0', { cost_units: 0 }, 'cost_units'],
    ['cost_units negative', { cost_units: -3 }, 'cost_units'],
    ['cost_units fractional', { cost_units: 1.5 }, 'cost_units'],
    ['cost_units missing', { cost_units: undefined }, 'cost_units'],
    ['max_attempts 0', { max_attempts: 0 }, 'max_attempts'],
    ['max_runtime_s 0', { max_runtime_s: 0 }, 'max_runtime_s'],
  ])('an invalid submit (%s) is 400 invalid_request naming the field and stores nothing', (_name, override, field) => {
    const { engine } = setup()
    const error = expectEngineError(() => engine.submit({ ...aJob(), ...(override as object) } as never), 400, 'invalid_request')
    expect(error.detail).toContain(field)
    expect(engine.listJobs({}).jobs).toHaveLength(0)
  })

  it('idempotency key returns the existing job as duplicate and writes nothing', () => {
    const { engine, clock } = setup()
    const first = engine.submit(aJob({ idempotency_key: 'req-1', payload: { n: 1 } }))
    clock.advance(5 * SECOND)
    const events: string[] = []
    engine.onEvent((e) => events.push(e.event_type))
    const again = engine.submit(aJob({ idempotency_key: 'req-1', payload: { n: 2 }, cost_units: 9 }))
    expect(again.duplicate).toBe(true)
    expect(again.job).toEqual(first.job)
    expect(engine.listJobs({}).jobs).toHaveLength(1)
    expect(events).toEqual([])
  })

  it('an idempotency key still answers duplicate after the job has finished', () => {
    const { engine } = setup()
    const first = engine.submit(aJob({ idempotency_key: 'req-2' }))
    engine.cancel(first.job.id)
    const again = engine.submit(aJob({ idempotency_key: 'req-2' }))
    expect(again.duplicate).toBe(true)
    expect(again.job.id).toBe(first.job.id)
    expect(again.job.state).toBe('CANCELED')
  })

  it('submits without an idempotency key are never duplicates of each other', () => {
    const { engine } = setup()
    const a = engine.submit(aJob())
    const b = engine.submit(aJob())
    expect(b.duplicate).toBe(false)
    expect(b.job.id).not.toBe(a.job.id)
  })

  it('a submit writes a JOB_SUBMITTED event recording the stream message it gives the job, in its transaction', () => {
    const { engine } = setup()
    const { job } = engine.submit(aJob({ queue: 'q1' }))
    const events = engine.jobEvents(job.id)
    expect(events.map((e) => [e.entity_type, e.event_type])).toEqual([['JOB', 'JOB_SUBMITTED']])
    expect(events[0]!.data).toMatchObject({ state: 'QUEUED', queue: 'q1', message_id: job.stream_message_id })
    expect(job.stream_message_id).toBeGreaterThan(0)
  })

  it('an unknown job id is 404 job_not_found', () => {
    const { engine } = setup()
    expectEngineError(() => engine.getJob('nope'), 404, 'job_not_found')
    expectEngineError(() => engine.jobEvents('nope'), 404, 'job_not_found')
    expectEngineError(() => engine.attempts('nope'), 404, 'job_not_found')
  })
})
