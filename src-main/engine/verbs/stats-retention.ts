import { DAY, HOUR } from '../rules/clock'
import type { EngineContext } from '../memory/context'
import { BUCKETS, RANGES } from '../reads/stats'

/**
 * The statistics' own retention, longer than the jobs': the gauges (`stats_samples`) and the
 * counts of the counted events (`stats_counts`) are kept for {@link STATS_RETAIN_MS}; what is
 * older than any range of the time series reaches ({@link STATS_FULL_DETAIL_MS}) is thinned to
 * one row per hour (gauges averaged, counts summed), so that the whole 90 days take about as many
 * rows as a few days of full detail. docs/retention.md.
 */

/** How long the statistics are kept. */
export const STATS_RETAIN_MS = 90 * DAY

/** The time series' longest range plus its largest bucket: no series reads further back than this. */
export const STATS_FULL_DETAIL_MS = Math.max(...Object.values(RANGES)) + Math.max(...Object.values(BUCKETS))

/** The span of time one step deletes or thins: a few thousand rows at most. */
const STEP_SPAN_MS = 6 * HOUR

/**
 * One step of the statistics' retention, one transaction: deletes the samples and counts older
 * than {@link STATS_RETAIN_MS}, or thins those older than {@link STATS_FULL_DETAIL_MS} to one
 * per hour, a span of {@link STEP_SPAN_MS} at most. Returns the rows it changed: 0 when nothing
 * is left to do at `now`.
 */
export function pruneStatsStep(ctx: EngineContext, now: number): number {
  // Whole hours only: an hour is thinned once, with all its rows, and kept or deleted whole.
  const expired = Math.floor((now - STATS_RETAIN_MS) / HOUR) * HOUR
  const detailed = Math.floor((now - STATS_FULL_DETAIL_MS) / HOUR) * HOUR
  return ctx.transact(
    () =>
      deleteBefore(ctx, 'stats_samples', expired) ||
      deleteBefore(ctx, 'stats_counts', expired) ||
      thinSamples(ctx, detailed) ||
      thinCounts(ctx, detailed),
  )
}

function changes(ctx: EngineContext, sql: string, ...params: unknown[]): number {
  return ctx.stmt(sql).run(...params).changes
}

function deleteBefore(ctx: EngineContext, table: 'stats_samples' | 'stats_counts', before: number): number {
  const oldest = ctx.one<{ ts: number | null }>(`SELECT MIN(ts) AS ts FROM ${table}`)!.ts
  if (oldest === null || oldest >= before) return 0
  return changes(ctx, `DELETE FROM ${table} WHERE ts < ?`, Math.min(before, oldest + STEP_SPAN_MS))
}

/** The span of the oldest rows before `before` that are not yet one per hour, or null. */
function unthinned(ctx: EngineContext, table: 'stats_samples' | 'stats_counts', before: number): { from: number; to: number } | null {
  const first = ctx.one<{ ts: number | null }>(`SELECT MIN(ts) AS ts FROM ${table} WHERE ts < ? AND ts % ${HOUR} <> 0`, before)!.ts
  if (first === null) return null
  const from = first - (first % HOUR)
  return { from, to: Math.min(before, from + STEP_SPAN_MS) }
}

function thinSamples(ctx: EngineContext, before: number): number {
  const span = unthinned(ctx, 'stats_samples', before)
  if (!span) return 0
  // The hour's mean replaces its samples, at the hour's start (where a sample may already be).
  ctx.run(
    `INSERT OR REPLACE INTO stats_samples (ts, leases_active, jobs_queued, jobs_running, capacity_used, busy_rating)
     SELECT ts - ts % ${HOUR} AS hour, AVG(leases_active), AVG(jobs_queued), AVG(jobs_running), AVG(capacity_used), AVG(busy_rating)
     FROM stats_samples WHERE ts >= ? AND ts < ? GROUP BY hour`,
    span.from,
    span.to,
  )
  return changes(ctx, `DELETE FROM stats_samples WHERE ts >= ? AND ts < ? AND ts % ${HOUR} <> 0`, span.from, span.to)
}

function thinCounts(ctx: EngineContext, before: number): number {
  const span = unthinned(ctx, 'stats_counts', before)
  if (!span) return 0
  ctx.run(
    `INSERT INTO stats_counts (event_type, ts, n)
     SELECT event_type, ts - ts % ${HOUR}, SUM(n) FROM stats_counts WHERE ts >= ? AND ts < ? AND ts % ${HOUR} <> 0 GROUP BY 1, 2
     ON CONFLICT (ts, event_type) DO UPDATE SET n = n + excluded.n`,
    span.from,
    span.to,
  )
  return changes(ctx, `DELETE FROM stats_counts WHERE ts >= ? AND ts < ? AND ts % ${HOUR} <> 0`, span.from, span.to)
}
