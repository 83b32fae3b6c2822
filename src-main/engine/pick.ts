import type { JobRow } from '../db/schema'
import type { EngineContext } from './context'
import { NOT_PAUSED_CLAUSE } from './queues'

/** What a worker can take. Jobs outside it are skipped for that worker, never denied. */
export interface WorkerFilter {
  worker_id: string
  /** Only this add-on's jobs. */
  addon_id?: string | null
  /** Only these job types. */
  accept_job_types?: string[] | null
  /** No job costing more units (001 `max_units`, 002 `max_cost_units`). */
  max_units?: number | null
  /** Whether the worker can run jobs with `constraints.gpu_required`. */
  gpu_available?: boolean
  /** Dialect 003 streams (job queues), tried in this order; null means every queue. */
  queues?: string[] | null
}

const PRIORITY_RANKS = [3, 2, 1, 0] // URGENT first

/** True when the worker holds an ACTIVE lease (it may then not take a `unique` job). */
export function holdsActiveLease(ctx: EngineContext, workerId: string): boolean {
  return ctx.one("SELECT 1 FROM leases WHERE worker_id = ? AND state = 'ACTIVE' LIMIT 1", workerId) !== undefined
}

function memo<T>(fn: () => T): () => T {
  let value: { v: T } | undefined
  return () => (value ??= { v: fn() }).v
}

function canTake(job: JobRow, filter: WorkerFilter, holdsLease: () => boolean): boolean {
  if (filter.addon_id != null && job.addon_id !== filter.addon_id) return false
  if (filter.accept_job_types && !filter.accept_job_types.includes(job.job_type)) return false
  if (filter.max_units != null && job.cost_units > filter.max_units) return false
  if (!filter.gpu_available && job.constraints.includes('gpu_required') && requiresGpu(job)) return false
  if (job.is_unique && holdsLease()) return false
  return true
}

function requiresGpu(job: JobRow): boolean {
  return (JSON.parse(job.constraints) as Record<string, unknown>).gpu_required === true
}

/**
 * Most picks take the first row; a worker that skips rows reads on in growing pages. The sizes
 * are written into the SQL, not bound: a bound LIMIT costs ~40 µs a call in SQLite here, more
 * than the whole index probe.
 */
const PAGE_SIZES = [1, 4, 16, 64] as const

/**
 * The eligible QUEUED jobs this worker can take, in scheduling order: by stream if the worker
 * names streams, then URGENT before HIGH before NORMAL before LOW, then by the time each job
 * became eligible. Paused queues hand out nothing. Each priority is one index range read in
 * pages, so the first job costs O(log n) however many are queued. Lazy: the caller stops at the head, or after `limit`
 * claims. (Pages rather than an open cursor: the caller writes between rows.)
 */
export function* eligibleJobs(
  ctx: EngineContext,
  filter: WorkerFilter,
  now: number,
  /** Whether the worker holds a lease now (a caller that grants as it walks says so itself). */
  holdsLease: () => boolean = memo(() => holdsActiveLease(ctx, filter.worker_id)),
): Generator<JobRow> {
  for (const queue of filter.queues ?? [null]) {
    if (queue !== null && ctx.pausedQueues.has(queue)) continue
    for (const rank of PRIORITY_RANKS) {
      let after = { eligible_at: Number.MIN_SAFE_INTEGER, seq: 0 }
      for (let p = 0; ; p = Math.min(p + 1, PAGE_SIZES.length - 1)) {
        const size = PAGE_SIZES[p]!
        const page = eligiblePage(ctx, queue, rank, now, after, size)
        for (const job of page) {
          if (canTake(job, filter, holdsLease)) yield job
        }
        if (page.length < size) break
        const last = page[page.length - 1]!
        after = { eligible_at: last.eligible_at, seq: last.seq }
      }
    }
  }
}

function eligiblePage(
  ctx: EngineContext,
  queue: string | null,
  rank: number,
  now: number,
  after: { eligible_at: number; seq: number },
  size: (typeof PAGE_SIZES)[number],
): JobRow[] {
  // While a queue is paused, a walk over every queue reads past that queue's jobs.
  const notPaused = ctx.pausedQueues.size > 0 ? ` AND ${NOT_PAUSED_CLAUSE}` : ''
  return queue === null
    ? ctx.all<JobRow>(
        `SELECT * FROM jobs WHERE state = 'QUEUED' AND priority = ? AND eligible_at <= ?
           AND (eligible_at, seq) > (?, ?)${notPaused} ORDER BY eligible_at, seq LIMIT ${size}`,
        rank, now, after.eligible_at, after.seq,
      )
    : ctx.all<JobRow>(
        `SELECT * FROM jobs WHERE state = 'QUEUED' AND queue = ? AND priority = ? AND eligible_at <= ?
           AND (eligible_at, seq) > (?, ?) ORDER BY eligible_at, seq LIMIT ${size}`,
        queue, rank, now, after.eligible_at, after.seq,
      )
}

/**
 * The next moment a QUEUED job of a queue that is not paused becomes eligible (a requeued job's
 * backoff ends, a delayed job's `run_at` comes), or null if none waits: whoever waits for work
 * sets a timer for it. One index probe per priority.
 */
export function nextEligibleAt(ctx: EngineContext, now: number): number | null {
  let next: number | null = null
  // With a condition outside the index, the first row in index order is the minimum.
  const sql =
    ctx.pausedQueues.size > 0
      ? `SELECT eligible_at AS at FROM jobs WHERE state = 'QUEUED' AND priority = ? AND eligible_at > ? AND ${NOT_PAUSED_CLAUSE}
           ORDER BY eligible_at LIMIT 1`
      : "SELECT MIN(eligible_at) AS at FROM jobs WHERE state = 'QUEUED' AND priority = ? AND eligible_at > ?"
  for (const rank of PRIORITY_RANKS) {
    const row = ctx.one<{ at: number | null }>(
      sql,
      rank,
      now,
    )
    if (row?.at != null && (next === null || row.at < next)) next = row.at
  }
  return next
}
