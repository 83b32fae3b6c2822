import { describe, expect, it } from 'vitest'
import { aJob, setup } from '../helpers/engine'
import { SECOND } from '../../src-main/engine/rules/clock'
import type { Event } from '../../src-main/engine'
import { eventTypes, expectEngineError, leaseOrFail } from './support'
// White-box where the transaction is the point: a few cases open one (and a savepoint) around verbs.
import { engineContext } from '../../src-main/engine/internals'
import { database, sql } from '../helpers/database'

describe('event log', () => {
  it('events are written in the transaction and listeners see them only after commit (a rolled-back op emits nothing)', () => {
    const { engine } = setup()
    const seen: { event: Event; inTransaction: boolean; jobVisible: boolean }[] = []
    engine.onEvent((event) => {
      seen.push({
        event,
        inTransaction: database(engine).inTransaction,
        jobVisible: sql(engine).one('SELECT 1 FROM jobs WHERE id = ?', event.entity_id) !== undefined,
      })
    })

    // Committed: the listener runs after COMMIT and already sees the row.
    const { job } = engine.submit(aJob())
    expect(seen).toHaveLength(1)
    expect(seen[0]).toMatchObject({ inTransaction: false, jobVisible: true })
    expect(seen[0]!.event).toMatchObject({ entity_type: 'JOB', entity_id: job.id, job_id: job.id, event_type: 'JOB_SUBMITTED' })

    // Rolled back: an operation whose transaction fails emits nothing and leaves nothing behind.
    const eventCount = () => sql(engine).one<{ n: number }>('SELECT COUNT(*) AS n FROM events')!.n
    const before = eventCount()
    expect(() =>
      engineContext(engine).transact(() => {
        engine.submit(aJob({ idempotency_key: 'rolled-back' }))
        throw new Error('boom after the submit')
      }),
    ).toThrow('boom')
    expect(seen).toHaveLength(1)
    expect(eventCount()).toBe(before)
    expect(engine.submit(aJob({ idempotency_key: 'rolled-back' })).duplicate).toBe(false)
  })

  it('a refused operation writes no event', () => {
    const { engine } = setup()
    const { job } = engine.submit(aJob())
    engine.cancel(job.id)
    const seen: string[] = []
    engine.onEvent((e) => seen.push(e.event_type))
    const before = engine.jobEvents(job.id)
    expectEngineError(() => engine.cancel(job.id), 409, 'illegal_transition')
    expect(seen).toEqual([])
    expect(engine.jobEvents(job.id)).toEqual(before)
  })

  it('listeners see events in the order they were appended, with parsed data', () => {
    const { engine, clock } = setup()
    const seen: Event[] = []
    engine.onEvent((e) => seen.push(e))
    engine.submit(aJob())
    clock.advance(36 * SECOND)
    leaseOrFail(engine, 'w')
    clock.advance(36 * SECOND)
    engine.reap()
    expect(seen.map((e) => e.event_type)).toEqual(['JOB_SUBMITTED', 'LEASE_GRANTED', 'LEASE_EXPIRED', 'JOB_REQUEUED'])
    for (let i = 1; i < seen.length; i++) expect(seen[i]!.id).toBeGreaterThan(seen[i - 1]!.id)
    expect(seen[1]!.data).toMatchObject({ worker_id: 'w', attempt: 1 })
    expect(seen[2]!.ts).toBe(clock.now())
  })

  it('a failing listener neither undoes the operation nor stops other listeners', () => {
    const { engine } = setup()
    const seen: string[] = []
    const original = console.error
    console.error = () => {}
    try {
      engine.onEvent(() => {
        throw new Error('listener bug')
      })
      engine.onEvent((e) => seen.push(e.event_type))
      const { job } = engine.submit(aJob())
      expect(engine.getJob(job.id).state).toBe('QUEUED')
      expect(seen).toEqual(['JOB_SUBMITTED'])
    } finally {
      console.error = original
    }
  })

  it('the returned function stops a listener', () => {
    const { engine } = setup()
    const seen: string[] = []
    const stop = engine.onEvent((e) => seen.push(e.event_type))
    engine.submit(aJob())
    stop()
    engine.submit(aJob())
    expect(seen).toHaveLength(1)
  })

  it('a job\'s timeline holds its own events and its leases\', oldest first', () => {
    const { engine } = setup()
    const { job } = engine.submit(aJob())
    engine.submit(aJob()) // another job's events stay out
    const { lease } = leaseOrFail(engine, 'w')
    engine.heartbeat({ lease_id: lease.id, worker_id: 'w' })
    engine.release({ lease_id: lease.id, status: 'SUCCEEDED' })
    const events = engine.jobEvents(job.id)
    expect(eventTypes(events)).toEqual(['JOB_SUBMITTED', 'LEASE_GRANTED', 'JOB_RUNNING', 'JOB_DONE'])
    expect(events.find((e) => e.event_type === 'LEASE_GRANTED')).toMatchObject({ entity_type: 'LEASE', entity_id: lease.id })
  })

  it('the event log is append-only: later operations never rewrite earlier events', () => {
    const { engine, clock } = setup()
    const { job } = engine.submit(aJob())
    const first = engine.jobEvents(job.id)
    clock.advance(SECOND)
    engine.cancel(job.id)
    expect(engine.jobEvents(job.id).slice(0, first.length)).toEqual(first)
  })

  it('an operation run under ctx.attempt that fails undoes only its own writes and events; the transaction commits', () => {
    const { engine } = setup()
    const commits: string[][] = []
    engine.onCommit((events) => commits.push(events.map((e) => e.event_type)))
    const { kept, failed } = engineContext(engine).transact(() => {
      const kept = engine.submit(aJob()).job
      const failed = engineContext(engine).attempt(() => {
        engine.submit(aJob({ idempotency_key: 'undone' }))
        throw new Error('this part fails')
      })
      return { kept, failed }
    })
    expect(failed).toBeUndefined()
    expect(engine.getJob(kept.id).state).toBe('QUEUED')
    expect(sql(engine).one('SELECT 1 FROM jobs WHERE idempotency_key = ?', 'undone')).toBeUndefined()
    expect(commits).toEqual([['JOB_SUBMITTED']])
  })

  it('beforeCommit listeners run inside the transaction, and what they append joins the same commit', () => {
    const { engine } = setup()
    const commits: string[][] = []
    engine.onCommit((events) => commits.push(events.map((e) => e.event_type)))
    engine.beforeCommit((events) => {
      expect(database(engine).inTransaction).toBe(true)
      if (events.some((e) => e.event_type === 'JOB_SUBMITTED')) engineContext(engine).attempt(() => engine.requestLease({ worker_id: 'w' }))
    })
    engine.submit(aJob())
    expect(commits).toEqual([['JOB_SUBMITTED', 'LEASE_GRANTED']])
  })
})
