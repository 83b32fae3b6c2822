import { STATE_SEQ_CLAUSE } from '../../db/schema'
import type { CapacityStore } from '../memory/capacity-store'
import { HOUR, MINUTE } from '../rules/clock'
import type { EngineContext } from '../memory/context'
import type { CountedEvent } from '../rules/events'
import { invalid } from '../rules/errors'
import { LEASED_STATES, type JobState } from '../rules/states'
import { countOverCapacity } from './waiting'

export interface Snapshot {
  capacity: { total: number; used: number; reserved: number; usable: number; available: number; busy_rating: number; busy_mode: 'auto' | 'manual' }
  jobs: {
    queued: number
    claimed: number
    leased: number
    running: number
    blocked: number
    done_last_24h: number
    failed_last_24h: number
    canceled_last_24h: number
    timeout_last_24h: number
    /** Waiting jobs that cost more than the total capacity: they cannot run until it is raised. */
    over_capacity: number
  }
  leases: { active: number; expired_last_24h: number }
}

/**
 * Jobs in a state other than DONE: LEASED and RUNNING ones among the ACTIVE leases in memory,
 * QUEUED ones in the tally in memory (job-tally.ts), the others on the jobs_state_seq index
 * (see STATE_SEQ_CLAUSE).
 */
function countState(ctx: EngineContext, state: Exclude<JobState, 'DONE'>): number {
  if (LEASED_STATES.has(state)) return ctx.activeLeases.committed().filter(({ job }) => job.state === state).length
  if (state === 'QUEUED') return ctx.jobTally.committedQueued()
  return ctx.one<{ n: number }>(`SELECT COUNT(*) AS n FROM jobs WHERE state = ? AND ${STATE_SEQ_CLAUSE}`, state)!.n
}

/**
 * the queue API's current snapshot; `reserved = total − usable` is what the busy rating holds back.
 * The counts of the last 24 h come from memory (recent-counts.ts), not from the event log.
 */
export function snapshot(ctx: EngineContext, capacity: CapacityStore): Snapshot {
  const recent = ctx.counts
  const c = capacity.figures()
  return {
    capacity: {
      total: c.total_units,
      used: c.leased,
      reserved: c.total_units - c.usable,
      usable: c.usable,
      available: c.available,
      busy_rating: c.busy_rating,
      busy_mode: c.busy_mode,
    },
    jobs: {
      queued: countState(ctx, 'QUEUED'),
      claimed: countState(ctx, 'CLAIMED') + countState(ctx, 'PREPARING') + countState(ctx, 'LEASE_PENDING'),
      leased: countState(ctx, 'LEASED'),
      // As the queue API shows them: a LEASED job is RUNNING there (`leased` counts those among them).
      running: countState(ctx, 'RUNNING') + countState(ctx, 'LEASED'),
      blocked: countState(ctx, 'BLOCKED'),
      done_last_24h: recent.lastDay('JOB_DONE'),
      failed_last_24h: recent.lastDay('JOB_FAILED'),
      canceled_last_24h: recent.lastDay('JOB_CANCELED'),
      timeout_last_24h: recent.lastDay('JOB_TIMEOUT'),
      over_capacity: countOverCapacity(ctx, c.total_units),
    },
    leases: {
      active: ctx.activeLeases.committed().length,
      expired_last_24h: recent.lastDay('LEASE_EXPIRED'),
    },
  }
}

/** One sample of the gauges (a row of stats_samples), which the time series of gauges average. */
export interface StatsSample {
  ts: number
  leases_active: number
  jobs_queued: number
  jobs_running: number
  capacity_used: number
  busy_rating: number
}

/** The gauges now, as one sample (verbs/stats-samples.ts writes it). */
export function gaugeSample(ctx: EngineContext, capacity: CapacityStore): StatsSample {
  const c = capacity.figures()
  return {
    ts: ctx.clock.now(),
    leases_active: ctx.activeLeases.committed().length,
    jobs_queued: countState(ctx, 'QUEUED'),
    jobs_running: countState(ctx, 'RUNNING') + countState(ctx, 'LEASED'),
    capacity_used: c.leased,
    busy_rating: c.busy_rating,
  }
}

export const GAUGE_METRICS = ['leases_active', 'jobs_queued', 'jobs_running', 'capacity_used', 'busy_rating'] as const
/** Counted metrics and the events they count. */
export const COUNT_METRICS = {
  jobs_completed: ['JOB_DONE'],
  jobs_failed: ['JOB_FAILED', 'JOB_TIMEOUT'],
  leases_expired: ['LEASE_EXPIRED'],
} as const satisfies Record<string, readonly CountedEvent[]>
export const METRICS = [...GAUGE_METRICS, ...(Object.keys(COUNT_METRICS) as (keyof typeof COUNT_METRICS)[])] as const
export type Metric = (typeof METRICS)[number]

export const BUCKETS = { '1m': MINUTE, '5m': 5 * MINUTE, '15m': 15 * MINUTE, '1h': HOUR } as const
export const RANGES = { '1h': HOUR, '6h': 6 * HOUR, '24h': 24 * HOUR, '7d': 7 * 24 * HOUR } as const
export type Bucket = keyof typeof BUCKETS
export type Range = keyof typeof RANGES

export interface TimeseriesPoint {
  ts: number
  value: number
}

/**
 * When this database's history starts: its first stats sample, first stored count of
 * events, or first event, whichever came first; null before any. A series answers 0 for every
 * bucket before it as for any empty bucket, so a chart uses this to leave out the time before
 * the host existed (or before the statistics' retention, docs/retention.md).
 */
export function seriesStart(ctx: EngineContext): number | null {
  const starts = [
    ctx.one<{ ts: number | null }>('SELECT MIN(ts) AS ts FROM stats_samples')?.ts ?? null,
    ctx.one<{ ts: number | null }>('SELECT MIN(ts) AS ts FROM stats_counts')?.ts ?? null,
    ctx.one<{ ts: number }>('SELECT ts FROM events ORDER BY id LIMIT 1')?.ts ?? null,
  ].filter((ts): ts is number => ts !== null)
  return starts.length > 0 ? Math.min(...starts) : null
}

/**
 * Every bucket of the range, oldest first, the last one holding now; gauges are the mean of the
 * samples in a bucket (the bucket of now, before its first sample, the last sample of the one
 * before) and counts the number of events, 0 where a bucket has none. Read from SQLite, so the
 * series survive restarts.
 */
export function timeseries(ctx: EngineContext, metric: Metric, bucket: Bucket, range: Range): TimeseriesPoint[] {
  if (!METRICS.includes(metric)) throw invalid(`metric: must be one of ${METRICS.join(', ')}`)
  const size = BUCKETS[bucket]
  const span = RANGES[range]
  if (size === undefined) throw invalid(`bucket: must be one of ${Object.keys(BUCKETS).join(', ')}`)
  if (span === undefined) throw invalid(`range: must be one of ${Object.keys(RANGES).join(', ')}`)
  const lastStart = Math.floor(ctx.clock.now() / size) * size
  const count = Math.ceil(span / size)
  const first = lastStart - (count - 1) * size
  const end = lastStart + size
  const values = new Map<number, number>()
  if (metric in COUNT_METRICS) {
    const types = COUNT_METRICS[metric as keyof typeof COUNT_METRICS]
    // The events stats_counts does not hold yet: the few after its mark (recent-counts.ts), read
    // by the log's key.
    const rows = ctx.all<{ b: number; n: number }>(
      // `ts - ts % size`, not `(ts / size) * size`: better-sqlite3 binds numbers as REAL, so the
      // division would not truncate and every event would land in a bucket of its own.
      `SELECT ts - ts % ? AS b, COUNT(*) AS n FROM events
       WHERE id > ? AND event_type IN (${types.map(() => '?').join(', ')}) AND ts >= ? AND ts < ? GROUP BY b`,
      size,
      ctx.counts.storedThrough(),
      ...types,
      first,
      end,
    )
    for (const row of rows) values.set(row.b, row.n)
    // The counts up to the mark, per minute or per hour.
    const kept = ctx.all<{ b: number; n: number }>(
      `SELECT ts - ts % ? AS b, SUM(n) AS n FROM stats_counts
       WHERE event_type IN (${types.map(() => '?').join(', ')}) AND ts >= ? AND ts < ? GROUP BY b`,
      size,
      ...types,
      first,
      end,
    )
    for (const row of kept) values.set(row.b, (values.get(row.b) ?? 0) + row.n)
  } else {
    // The column name comes from the closed GAUGE_METRICS list checked above, never from input.
    const rows = ctx.all<{ b: number; v: number }>(
      `SELECT ts - ts % ? AS b, AVG(${metric}) AS v FROM stats_samples WHERE ts >= ? AND ts < ? GROUP BY b`,
      size,
      first,
      end,
    )
    for (const row of rows) values.set(row.b, row.v)
    // The bucket of now before its first sample (up to a sampling interval into it) is not 0: a
    // gauge is what its last sample said, if that came in the bucket before.
    if (!values.has(lastStart)) {
      const last = ctx.one<{ ts: number; v: number }>(`SELECT ts, ${metric} AS v FROM stats_samples ORDER BY ts DESC LIMIT 1`)
      if (last && last.ts >= lastStart - size) values.set(lastStart, last.v)
    }
  }
  const points: TimeseriesPoint[] = []
  for (let ts = first; ts < end; ts += size) points.push({ ts, value: values.get(ts) ?? 0 })
  return points
}
