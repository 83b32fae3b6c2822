import { afterEach, describe, expect, it } from 'vitest'
import { Dispatch } from '../../src-main/dispatch/dispatch'
import { MINUTE, SECOND } from '../../src-main/engine/rules/clock'
import { aJob, setup, T0 } from '../helpers/engine'
import { expectEngineError, leaseOrFail } from './support'

let dispatch: Dispatch | undefined
afterEach(() => dispatch?.close())

describe('delayed jobs', () => {
  it('a delayed job is invisible to every API until its run_at, then taken at once', () => {
    const { engine, clock } = setup()
    const { job } = engine.submit(aJob({ run_at: T0 + 10 * MINUTE }))
    expect(job).toMatchObject({ state: 'QUEUED', run_at: T0 + 10 * MINUTE, eligible_at: T0 + 10 * MINUTE })
    clock.advance(10 * MINUTE - 1)
    expect(engine.requestLease({ worker_id: 'w' })).toMatchObject({ granted: false, reason: 'No queued job this worker can take now' })
    expect(engine.claimAndLease({ worker_id: 'w' })).toMatchObject({ granted: false })
    expect(engine.claimAndLease({ worker_id: 'w', queues: ['default'] })).toMatchObject({ granted: false })
    expect(engine.claim({ worker_id: 'w' })).toEqual([])
    expect(engine.claimBatch({ worker_id: 'w' }, 5).granted).toEqual([])
    clock.advance(1)
    expect(engine.claim({ worker_id: 'w' }).map((j) => j.id)).toEqual([job.id])
  })

  it('delay_ms counts from the submit; a due delayed job takes its place by priority, then by the time it became eligible', () => {
    const { engine, clock } = setup()
    const delayed = engine.submit(aJob({ delay_ms: 5 * SECOND })).job.id
    clock.advance(2 * SECOND)
    const before = engine.submit(aJob()).job.id // eligible at T0+2s, before the delayed one
    clock.advance(4 * SECOND)
    const after = engine.submit(aJob()).job.id // eligible at T0+6s, after it
    const urgent = engine.submit(aJob({ priority: 'URGENT', delay_ms: 0 })).job.id // no delay at all
    const order = [0, 1, 2, 3].map((i) => leaseOrFail(engine, `w${i}`).job.id)
    expect(order).toEqual([urgent, before, delayed, after])
  })

  it('a run_at in the past is no delay: the job is eligible now, never ahead of jobs already waiting', () => {
    const { engine, clock } = setup()
    clock.advance(MINUTE)
    const waiting = engine.submit(aJob()).job.id
    const { job } = engine.submit(aJob({ run_at: T0 }))
    expect(job).toMatchObject({ run_at: null, eligible_at: T0 + MINUTE })
    expect(engine.claim({ worker_id: 'w' }, 2).map((j) => j.id)).toEqual([waiting, job.id])
  })

  it('run_at and delay_ms together are refused, naming both fields; a negative delay is refused', () => {
    const { engine } = setup()
    const both = expectEngineError(() => engine.submit(aJob({ run_at: T0 + MINUTE, delay_ms: 1000 })), 400, 'invalid_request')
    expect(both.detail).toContain('run_at, delay_ms')
    expectEngineError(() => engine.submit(aJob({ delay_ms: -1 })), 400, 'invalid_request')
    expectEngineError(() => engine.submit(aJob({ run_at: 1.5 })), 400, 'invalid_request')
  })

  it('every submit of a batch may be delayed; an item with both fields is refused alone', () => {
    const { engine } = setup()
    const results = engine.submitMany([aJob({ delay_ms: MINUTE }), aJob({ run_at: T0 + MINUTE, delay_ms: 1 }), aJob()])
    expect(results.map((r) => r.ok)).toEqual([true, false, true])
    expect(results[0]!.ok && results[0]!.value.job.run_at).toBe(T0 + MINUTE)
  })

  it('the waiting reason says the job is scheduled, and its waiting_until for when', () => {
    const { engine } = setup()
    const { job } = engine.submit(aJob({ delay_ms: 90 * SECOND }))
    expect(engine.waiting([engine.getJob(job.id)])).toEqual([{ reason: 'scheduled', until: T0 + 90 * SECOND }])
  })

  it('nextEligibleAt names the run_at of the next delayed job', () => {
    const { engine } = setup()
    engine.submit(aJob({ delay_ms: 3 * MINUTE }))
    engine.submit(aJob({ delay_ms: MINUTE, priority: 'LOW' }))
    expect(engine.nextEligibleAt()).toBe(T0 + MINUTE)
  })

  it('run now makes a delayed job eligible at once, in line from now, and clears its run_at', () => {
    const { engine, clock } = setup()
    const { job } = engine.submit(aJob({ run_at: T0 + 60 * MINUTE }))
    clock.advance(SECOND)
    const other = engine.submit(aJob()).job.id
    clock.advance(SECOND)
    const ran = engine.runNow(job.id, 'ops')
    expect(ran).toMatchObject({ run_at: null, eligible_at: T0 + 2 * SECOND })
    expect(engine.claim({ worker_id: 'w' }, 2).map((j) => j.id)).toEqual([other, job.id])
    const event = engine.jobEvents(job.id).find((e) => e.event_type === 'JOB_RUN_NOW')!
    expect(event.data).toEqual({ state: 'QUEUED', run_at: T0 + 60 * MINUTE, requested_by: 'ops' })
  })

  it('run now answers 409 not_scheduled for a job that is not waiting for its run_at', () => {
    const { engine, clock } = setup()
    const plain = engine.submit(aJob()).job.id
    expectEngineError(() => engine.runNow(plain), 409, 'not_scheduled')
    const due = engine.submit(aJob({ delay_ms: SECOND })).job.id
    clock.advance(SECOND)
    expectEngineError(() => engine.runNow(due), 409, 'not_scheduled')
    const canceled = engine.submit(aJob({ delay_ms: MINUTE })).job.id
    engine.cancel(canceled)
    expectEngineError(() => engine.runNow(canceled), 409, 'not_scheduled')
    expectEngineError(() => engine.runNow('no-such-job'), 404, 'job_not_found')
  })

  it("a job waiting out its retry's backoff is not run now, and the refusal says it waits for its backoff, not that it is eligible", () => {
    const { engine } = setup()
    const job = engine.submit(aJob({ max_attempts: 3 })).job.id
    const { lease } = leaseOrFail(engine, 'w')
    engine.fail({ job_id: job, attempt_id: lease.attempt_id, worker_id: 'w', lease_token: lease.token, error: { message: 'no', retryable: true } })
    const backingOff = engine.getJob(job)
    expect(backingOff.state).toBe('QUEUED')
    const refused = expectEngineError(() => engine.runNow(job), 409, 'not_scheduled')
    expect(refused.message).toMatch(/is QUEUED and waits out its retry's backoff until \d{4}-/)
  })

  it('a delayed job is canceled at once, as any queued job', () => {
    const { engine } = setup()
    const { job } = engine.submit(aJob({ delay_ms: MINUTE }))
    expect(engine.cancel(job.id).state).toBe('CANCELED')
  })
})

describe('waiting claims and delayed jobs', () => {
  it('a waiting claim is woken when a delayed job becomes due on the engine clock, without a query before then', async () => {
    const { engine, clock } = setup()
    dispatch = new Dispatch(engine)
    const claim = dispatch.claim({ worker_id: 'w', streams: ['default'], max_wait_ms: 60_000 }, () => {})
    const { job } = engine.submit(aJob({ delay_ms: 10 * MINUTE }))
    // The submit woke the claim, which found nothing eligible: it waits on.
    expect(dispatch.size).toBe(1)
    const claimBatch = engine.claimBatch
    let tries = 0
    engine.claimBatch = (...args) => {
      tries += 1
      return claimBatch(...args)
    }
    clock.advance(10 * MINUTE - 1)
    for (let i = 0; i < 3; i++) dispatch.wakeIfDue() // the host's reaper ticks
    expect(tries).toBe(0) // not due: the database is not asked
    expect(dispatch.size).toBe(1)
    clock.advance(1)
    dispatch.wakeIfDue()
    const decision = await claim
    expect(decision.granted && decision.job_id).toBe(job.id)
    expect(tries).toBe(1)
  })

  it("the local workers' exchange, waiting for work, is granted a delayed job when it becomes due", async () => {
    const { engine, clock } = setup()
    dispatch = new Dispatch(engine)
    const { job } = engine.submit(aJob({ delay_ms: MINUTE }))
    const exchange = dispatch.exchange({ worker_id: 'local-1', claim: { streams: ['default'], max_jobs: 4, max_wait_ms: 60_000 } }, () => {})
    await new Promise((resolve) => setImmediate(resolve)) // its first try committed, nothing granted: it waits
    expect(dispatch.size).toBe(1)
    clock.advance(MINUTE)
    dispatch.wakeIfDue()
    expect((await exchange).claimed.granted.map((g) => g.job_id)).toEqual([job.id])
  })

  it('run now wakes a waiting claim at once', async () => {
    const { engine } = setup()
    dispatch = new Dispatch(engine)
    const { job } = engine.submit(aJob({ delay_ms: 10 * MINUTE }))
    const claim = dispatch.claim({ worker_id: 'w', max_wait_ms: 60_000 }, () => {})
    expect(dispatch.size).toBe(1)
    engine.runNow(job.id)
    const decision = await claim
    expect(decision.granted && decision.job_id).toBe(job.id)
  })

  it('a delayed job is taken in order after its time by the batch claim of the worker API', () => {
    const { engine, clock } = setup()
    const later = engine.submit(aJob({ delay_ms: 2 * SECOND })).job.id
    const sooner = engine.submit(aJob({ delay_ms: SECOND })).job.id
    clock.advance(2 * SECOND)
    expect(engine.claimBatch({ worker_id: 'w' }, 5).granted.map((g) => g.job_id)).toEqual([sooner, later])
  })
})
