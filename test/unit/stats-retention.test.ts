/**
 * The statistics' own retention (docs/retention.md): gauges and the counts of deleted jobs are
 * kept for 90 days, in full detail as far back as any range of the time series reaches, as
 * hourly means and sums before that, and are deleted after. Rows are written straight into the
 * tables, five minutes apart, over 100 days before T0.
 */
import { describe, expect, it } from 'vitest'
import { DAY, HOUR, MINUTE } from '../../src-main/engine/rules/clock'
import type { Engine } from '../../src-main/engine'
import type { StatsSample } from '../../src-main/engine/reads/stats'
import { STATS_FULL_DETAIL_MS, STATS_RETAIN_MS } from '../../src-main/engine/verbs/stats-retention'
import { setup, T0 } from '../helpers/engine'
import { database } from '../helpers/database'

const SPAN = 100 * DAY
const EVERY = 5 * MINUTE

type Sample = StatsSample

function fill(engine: Engine): void {
  const sample = database(engine).prepare(
    'INSERT INTO stats_samples (ts, leases_active, jobs_queued, jobs_running, capacity_used, busy_rating) VALUES (?, ?, ?, ?, ?, ?)',
  )
  const count = database(engine).prepare('INSERT INTO stats_counts (event_type, ts, n) VALUES (?, ?, ?)')
  database(engine).transaction(() => {
    for (let ts = T0 - SPAN, i = 0; ts <= T0; ts += EVERY, i++) {
      sample.run(ts, i % 7, i % 13, i % 5, i % 11, (i % 10) / 2)
      count.run('JOB_DONE', ts, 1 + (i % 3))
      if (i % 4 === 0) count.run('LEASE_EXPIRED', ts, 2)
    }
  })()
}

function pruneStatsFully(engine: Engine): number[] {
  const steps: number[] = []
  for (let changed = engine.pruneStats(); changed > 0; changed = engine.pruneStats()) steps.push(changed)
  return steps
}

const samples = (engine: Engine, from: number, to: number) =>
  database(engine).prepare('SELECT * FROM stats_samples WHERE ts >= ? AND ts < ? ORDER BY ts').all(from, to) as Sample[]
const counts = (engine: Engine, from: number, to: number) =>
  database(engine).prepare('SELECT event_type, ts, n FROM stats_counts WHERE ts >= ? AND ts < ? ORDER BY ts, event_type').all(from, to) as {
    event_type: string
    ts: number
    n: number
  }[]

const hourOf = (ts: number) => ts - (ts % HOUR)

describe('the statistics keep their own retention', () => {
  it('deletes what is older than 90 days, keeps hourly means and sums before the charts\' reach, and full detail within it', () => {
    const { engine } = setup()
    fill(engine)
    const expired = hourOf(T0 - STATS_RETAIN_MS)
    const detailed = hourOf(T0 - STATS_FULL_DETAIL_MS)
    const beforeSamples = samples(engine, expired, detailed)
    const beforeCounts = counts(engine, expired, detailed)
    const recentSamples = samples(engine, detailed, T0 + 1)
    const recentCounts = counts(engine, detailed, T0 + 1)
    const series = () => [
      engine.timeseries('jobs_queued', '1m', '7d'),
      engine.timeseries('busy_rating', '1h', '7d'),
      engine.timeseries('leases_expired', '5m', '7d'),
      engine.timeseries('jobs_completed', '15m', '7d'),
    ]
    const seriesBefore = series()

    pruneStatsFully(engine)

    // Nothing older than 90 days.
    expect(samples(engine, 0, expired)).toEqual([])
    expect(counts(engine, 0, expired)).toEqual([])
    // Within the charts' reach, nothing changed, and no chart sees a difference.
    expect(samples(engine, detailed, T0 + 1)).toEqual(recentSamples)
    expect(counts(engine, detailed, T0 + 1)).toEqual(recentCounts)
    expect(series()).toEqual(seriesBefore)

    // Before it: one row per hour, at the hour's start, the mean of its samples and the sum of its counts.
    const thinned = samples(engine, expired, detailed)
    expect(thinned).toHaveLength((detailed - expired) / HOUR)
    const byHour = new Map<number, Sample[]>()
    for (const s of beforeSamples) byHour.set(hourOf(s.ts), [...(byHour.get(hourOf(s.ts)) ?? []), s])
    for (const row of thinned) {
      const group = byHour.get(row.ts)!
      const mean = (key: keyof Sample) => expect.closeTo(group.reduce((sum, s) => sum + s[key], 0) / group.length, 9)
      expect(row).toEqual({
        ts: row.ts,
        leases_active: mean('leases_active'),
        jobs_queued: mean('jobs_queued'),
        jobs_running: mean('jobs_running'),
        capacity_used: mean('capacity_used'),
        busy_rating: mean('busy_rating'),
      })
    }
    const sums = new Map<string, number>()
    for (const c of beforeCounts) sums.set(`${c.event_type}@${hourOf(c.ts)}`, (sums.get(`${c.event_type}@${hourOf(c.ts)}`) ?? 0) + c.n)
    expect(new Map(counts(engine, expired, detailed).map((c) => [`${c.event_type}@${c.ts}`, c.n]))).toEqual(sums)
  })

  it('works in bounded steps, each a few hours of rows', () => {
    const { engine } = setup()
    fill(engine)
    const steps = pruneStatsFully(engine)
    // Six hours of five-minute rows: 72 samples, or 72 + 18 counts.
    expect(Math.max(...steps)).toBeLessThanOrEqual(90)
    expect(steps.length).toBeGreaterThan(100)
  })

  it('does nothing on a second pass at the same time, and thins the next hour once it passes out of reach', () => {
    const { engine, clock } = setup()
    fill(engine)
    pruneStatsFully(engine)
    expect(engine.pruneStats()).toBe(0)
    const detailed = hourOf(T0 - STATS_FULL_DETAIL_MS)
    expect(samples(engine, detailed, detailed + HOUR)).toHaveLength(HOUR / EVERY)
    clock.advance(HOUR)
    expect(pruneStatsFully(engine).length).toBeGreaterThan(0)
    expect(samples(engine, detailed, detailed + HOUR)).toHaveLength(1)
  })
})
