import { describe, expect, it } from 'vitest'
import { join } from 'node:path'
import { aJob, setup, T0 } from '../helpers/engine'
import { HOUR, MINUTE, SECOND } from '../../src-main/engine/rules/clock'
import type { Metric } from '../../src-main/engine/reads/stats'
import { claimOrFail, expectEngineError, leaseOrFail, openFileEngine, tempDir } from './support'
import { sql } from '../helpers/database'

/** The counted events of a type from the start of the minute that holds now − 24 h, counted in the event log itself. */
function countedInLog(engine: ReturnType<typeof setup>['engine'], type: string, now: number): number {
  const since = Math.floor((now - 24 * HOUR) / MINUTE) * MINUTE
  return sql(engine).one<{ n: number }>('SELECT COUNT(*) AS n FROM events WHERE event_type = ? AND ts >= ?', type, since)!.n
}

describe('stats snapshot', () => {
  it('the last-24-h counts, kept in memory in whole minutes, equal a count of the event log at every moment, as the window walks through the minutes and across a restart', () => {
    const dir = tempDir()
    try {
      const path = join(dir.dir, 'leasehold.db')
      let { engine, sqlite, clock } = openFileEngine(path)
      const finish = (status: 'SUCCEEDED' | 'FAILED') => {
        engine.submit(aJob())
        engine.release({ lease_id: leaseOrFail(engine, 'w').lease.id, status })
      }
      for (let i = 0; i < 30; i++) {
        finish(i % 3 === 0 ? 'FAILED' : 'SUCCEEDED')
        clock.advance(17 * SECOND + 333) // events spread over minutes, not on their edges
      }
      const check = () => {
        const snap = engine.snapshot()
        expect(snap.jobs.done_last_24h).toBe(countedInLog(engine, 'JOB_DONE', clock.now()))
        expect(snap.jobs.failed_last_24h).toBe(countedInLog(engine, 'JOB_FAILED', clock.now()))
      }
      check()
      // The window's start walks through the minutes of those events, one step at a time.
      clock.advance(24 * HOUR - 9 * MINUTE)
      for (let i = 0; i < 60; i++) {
        check()
        clock.advance(11 * SECOND + 7)
      }
      // A restart reads the counts back from the log.
      sqlite.close()
      ;({ engine, sqlite } = openFileEngine(path, { clock }))
      check()
      finish('SUCCEEDED')
      check()
      // And from stats_counts, once the stats timer stored them there.
      engine.sampleStats()
      sqlite.close()
      ;({ engine, sqlite } = openFileEngine(path, { clock }))
      check()
      sqlite.close()
    } finally {
      dir.cleanup()
    }
  })

  it('capacity figures with reserved = total − usable', () => {
    const { engine } = setup({ total_units: 50, busy_rating: 8 })
    engine.submit(aJob({ cost_units: 4 }))
    leaseOrFail(engine, 'w')
    expect(engine.snapshot().capacity).toEqual({
      total: 50,
      used: 4,
      reserved: 40,
      usable: 10,
      available: 6,
      busy_rating: 8,
      busy_mode: 'manual',
    })
  })

  it('job counts by state and finished counts over the last 24 h', () => {
    const { engine, clock } = setup()
    const old = engine.submit(aJob()).job
    const oldLease = leaseOrFail(engine, 'w').lease
    engine.release({ lease_id: oldLease.id, status: 'FAILED' })
    expect(engine.getJob(old.id).state).toBe('FAILED')
    clock.advance(25 * HOUR) // that failure leaves the 24 h window

    engine.submit(aJob({ priority: 'LOW' })) // stays queued
    engine.submit(aJob({ priority: 'LOW' })) // stays queued
    engine.submit(aJob({ priority: 'URGENT' }))
    engine.submit(aJob({ priority: 'URGENT' }))
    engine.submit(aJob({ priority: 'URGENT' }))
    engine.submit(aJob({ priority: 'URGENT' }))
    engine.submit(aJob({ priority: 'HIGH', max_attempts: 1 }))
    engine.submit(aJob({ priority: 'HIGH' }))
    const running = claimOrFail(engine, 'a') // URGENT → RUNNING
    const leased = leaseOrFail(engine, 'b') // URGENT → LEASED
    const done = leaseOrFail(engine, 'c') // URGENT → DONE
    engine.release({ lease_id: done.lease.id, status: 'SUCCEEDED' })
    const failed = leaseOrFail(engine, 'd') // URGENT → FAILED
    engine.release({ lease_id: failed.lease.id, status: 'FAILED' })
    leaseOrFail(engine, 'e', 5) // HIGH (max_attempts 1) → TIMEOUT below
    engine.claim({ worker_id: 'f' }) // HIGH → CLAIMED
    engine.heartbeat({ lease_id: running.lease.id }) // keep alive
    engine.heartbeat({ lease_id: leased.lease.id })
    clock.advance(11 * SECOND)
    engine.reap()

    const snap = engine.snapshot()
    expect(snap.jobs).toEqual({
      queued: 2,
      claimed: 1,
      leased: 0, // its first heartbeat made it RUNNING
      running: 2,
      blocked: 0,
      done_last_24h: 1,
      failed_last_24h: 1,
      canceled_last_24h: 0,
      timeout_last_24h: 1,
      over_capacity: 0,
    })
    expect(snap.leases).toEqual({ active: 2, expired_last_24h: 1 })
  })
})

describe('stats timeseries', () => {
  it('timeseries returns every bucket with zeros', () => {
    const { engine, clock } = setup()
    clock.advance(30 * SECOND)
    const points = engine.timeseries('jobs_completed', '1m', '1h')
    expect(points).toHaveLength(60)
    expect(points.every((p) => p.value === 0)).toBe(true)
    for (let i = 1; i < points.length; i++) expect(points[i]!.ts - points[i - 1]!.ts).toBe(MINUTE)
    expect(points[points.length - 1]!.ts).toBe(T0) // the last bucket holds now
    expect(engine.timeseries('busy_rating', '5m', '6h')).toHaveLength(72)
    expect(engine.timeseries('leases_active', '15m', '24h')).toHaveLength(96)
    expect(engine.timeseries('jobs_queued', '1h', '7d')).toHaveLength(168)
  })

  it("the history starts at the first sample or event, whichever came first: before it, a series has only the contract's zeros", () => {
    const { engine, clock } = setup()
    expect(engine.seriesStart()).toBeNull()
    clock.advance(10 * SECOND)
    engine.sampleStats()
    expect(engine.seriesStart()).toBe(T0 + 10 * SECOND)
    clock.advance(MINUTE)
    engine.submit(aJob())
    engine.sampleStats()
    expect(engine.seriesStart()).toBe(T0 + 10 * SECOND)

    const events = setup()
    events.clock.advance(3 * SECOND)
    events.engine.submit(aJob())
    expect(events.engine.seriesStart()).toBe(T0 + 3 * SECOND)
    events.clock.advance(7 * SECOND)
    events.engine.sampleStats()
    expect(events.engine.seriesStart()).toBe(T0 + 3 * SECOND)
  })

  it('counted metrics count events per bucket', () => {
    const { engine, clock } = setup()
    clock.advance(HOUR) // start at a bucket boundary an hour in
    for (let i = 0; i < 3; i++) {
      engine.submit(aJob({ max_attempts: 1 }))
      const { lease } = leaseOrFail(engine, 'w')
      engine.release({ lease_id: lease.id, status: i < 2 ? 'SUCCEEDED' : 'FAILED' })
    }
    clock.advance(MINUTE)
    engine.submit(aJob({ max_attempts: 1 }))
    leaseOrFail(engine, 'w')
    clock.advance(36 * SECOND)
    engine.reap() // TIMEOUT: counted as failed, and a lease expired
    const at = (metric: Metric) => engine.timeseries(metric, '1m', '1h').slice(-2).map((p) => p.value)
    expect(at('jobs_completed')).toEqual([2, 0])
    expect(at('jobs_failed')).toEqual([1, 1])
    expect(at('leases_expired')).toEqual([0, 1])
  })

  it('gauges are the mean of the samples in each bucket', () => {
    const { engine, clock } = setup({ total_units: 100 })
    engine.submit(aJob({ cost_units: 10 }))
    engine.submit(aJob({ cost_units: 30 }))
    leaseOrFail(engine, 'a', 600)
    engine.sampleStats() // capacity_used 10
    clock.advance(10 * SECOND)
    leaseOrFail(engine, 'b', 600)
    const sample = engine.sampleStats() // capacity_used 40
    expect(sample).toMatchObject({ ts: T0 + 10 * SECOND, leases_active: 2, jobs_queued: 0, jobs_running: 2, capacity_used: 40, busy_rating: 0 })
    const series = engine.timeseries('capacity_used', '1m', '1h')
    expect(series[series.length - 1]).toEqual({ ts: T0, value: 25 })
    expect(series.slice(0, -1).every((p) => p.value === 0)).toBe(true)
    // The next minute, before its first sample: what the last sample said, not 0; a bucket later, 0.
    clock.set(T0 + MINUTE + SECOND)
    expect(engine.timeseries('capacity_used', '1m', '1h').at(-1)).toEqual({ ts: T0 + MINUTE, value: 40 })
    clock.set(T0 + 2 * MINUTE + SECOND)
    expect(engine.timeseries('capacity_used', '1m', '1h').slice(-2)).toEqual([
      { ts: T0 + MINUTE, value: 0 },
      { ts: T0 + 2 * MINUTE, value: 0 },
    ])
  })

  it.each([
    ['nope', '1m', '1h', 'metric'],
    ['jobs_queued', '2m', '1h', 'bucket'],
    ['jobs_queued', '1m', '2h', 'range'],
  ])('an unknown metric, bucket or range (%s %s %s) is 400 invalid_request', (metric, bucket, range, field) => {
    const { engine } = setup()
    const error = expectEngineError(() => engine.timeseries(metric as never, bucket as never, range as never), 400, 'invalid_request')
    expect(error.detail).toContain(field)
  })

  it('the series are read from SQLite, so they survive a restart', () => {
    const { dir, cleanup } = tempDir()
    try {
      const path = join(dir, 'leasehold.db')
      const first = openFileEngine(path)
      first.engine.setCapacity({ busy_rating: 6 })
      first.engine.sampleStats()
      first.engine.submit(aJob())
      const { lease } = leaseOrFail(first.engine, 'w')
      first.engine.release({ lease_id: lease.id, status: 'SUCCEEDED' })
      first.sqlite.close()
      const second = openFileEngine(path, { clock: first.clock })
      expect(second.engine.timeseries('busy_rating', '1m', '1h').at(-1)!.value).toBe(6)
      expect(second.engine.timeseries('jobs_completed', '1m', '1h').at(-1)!.value).toBe(1)
      second.sqlite.close()
    } finally {
      cleanup()
    }
  })
})
