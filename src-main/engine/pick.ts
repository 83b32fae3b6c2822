import type { JobRow } from '../db/schema'
import type { EngineContext } from './context'

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
  return ctx.activeLeases.holds(workerId)
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
 * A pick reads its first page sized to the jobs it means to take (one, or a batch claim's N); a
 * worker that skips rows reads on in growing pages. The sizes are written into the SQL, not
 * bound: a bound LIMIT costs ~40 µs a call in SQLite here, more than the whole index probe.
 * 32 is a size of its own because a worker's free slots usually are 32 (its default concurrency,
 * after it finished all it held): a page of 64 read and built 32 rows for nothing, ~10 % of the
 * engine's CPU in a drain.
 */
const PAGE_SIZES = [1, 4, 16, 32, 64] as const

/** The first page for a pick of `wanted` jobs: the smallest size that holds them, or the largest. */
function firstPage(wanted: number): number {
  const fits = PAGE_SIZES.findIndex((size) => size >= wanted)
  return fits < 0 ? PAGE_SIZES.length - 1 : fits
}

/**
 * The eligible QUEUED jobs this worker can take, in scheduling order: by stream if the worker
 * names streams, then URGENT before HIGH before NORMAL before LOW, then by the time each job
 * became eligible. Paused queues hand out nothing. One index (`jobs_pick_queue`: queue,
 * priority, eligible_at, seq) serves both: a worker that names no stream reads every queue's
 * range of a priority at once, merged in order. Each range is read in pages, so the first job
 * costs O(log n) however many are queued. Lazy: the caller stops at the head, or after `limit`
 * claims. (Pages rather than an open cursor: the caller writes between rows.)
 */
export function* eligibleJobs(
  ctx: EngineContext,
  filter: WorkerFilter,
  now: number,
  {
    holdsLease = memo(() => holdsActiveLease(ctx, filter.worker_id)),
    wanted = 1,
  }: {
    /** Whether the worker holds a lease now (a caller that grants as it walks says so itself). */
    holdsLease?: () => boolean
    /** How many jobs the caller means to take: the size of the first page read. */
    wanted?: number
  } = {},
): Generator<JobRow> {
  const queues = unpaused(ctx, filter.queues ?? queuesWithQueuedJobs(ctx)) // read once per walk, not once per priority
  const first = firstPage(wanted)
  const inOrder = filter.queues
    ? queues.flatMap((queue) => PRIORITY_RANKS.map((rank) => rangeOf(ctx, queue, rank, now, first)))
    : PRIORITY_RANKS.map((rank) => merged(queues.map((queue) => rangeOf(ctx, queue, rank, now, first))))
  for (const range of inOrder) {
    for (const job of range) {
      if (canTake(job, filter, holdsLease)) yield job
    }
  }
}

/** A pick range's name in the transaction's notes of empty ranges (context.ts `isEmptyRange`). */
const rangeKey = (queue: string, rank: number, now: number): string => `${rank} ${now} ${queue}`

/**
 * Whether a range is known to hold nothing to take at this moment, without reading it: it has
 * no QUEUED job at all (job-tally.ts), or the transaction in progress already read it and
 * found none eligible (context.ts `isEmptyRange`).
 */
function knownEmptyRange(ctx: EngineContext, queue: string, rank: number, now: number): boolean {
  return ctx.jobTally.count(queue, rank) === 0 || ctx.isEmptyRange(rangeKey(queue, rank, now))
}

/**
 * Whether every range of these streams is known to hold nothing to take at this moment: a
 * claim naming them would walk nothing. False whenever a walk is needed to tell.
 */
export function knownEmpty(ctx: EngineContext, queues: readonly string[], now: number): boolean {
  return unpaused(ctx, queues).every((queue) => PRIORITY_RANKS.every((rank) => knownEmptyRange(ctx, queue, rank, now)))
}

/**
 * The eligible QUEUED jobs of one queue and priority, oldest eligible first, read in pages. A
 * range known to hold nothing now is not read (see knownEmptyRange).
 */
function* rangeOf(ctx: EngineContext, queue: string, rank: number, now: number, startPage: number): Generator<JobRow> {
  if (knownEmptyRange(ctx, queue, rank, now)) return
  const key = rangeKey(queue, rank, now)
  let after: { eligible_at: number; seq: number } | null = null
  for (let p = startPage; ; p = Math.min(p + 1, PAGE_SIZES.length - 1)) {
    const size = PAGE_SIZES[p]!
    const page: JobRow[] = ctx.all<JobRow>(
      `SELECT * FROM jobs WHERE state = 'QUEUED' AND queue = ? AND priority = ? AND eligible_at <= ?
         AND (eligible_at, seq) > (?, ?) ORDER BY eligible_at, seq LIMIT ${size}`,
      queue, rank, now, after?.eligible_at ?? Number.MIN_SAFE_INTEGER, after?.seq ?? 0,
    )
    if (page.length === 0 && after === null) ctx.noteEmptyRange(key)
    yield* page
    if (page.length < size) return
    const last = page[page.length - 1]!
    after = { eligible_at: last.eligible_at, seq: last.seq }
  }
}

/** Several ranges merged into one, by the time each job became eligible, then submit order. */
function* merged(ranges: Generator<JobRow>[]): Generator<JobRow> {
  if (ranges.length === 1) return yield* ranges[0]!
  const heads = ranges.map((range) => range.next())
  for (;;) {
    let first = -1
    for (let i = 0; i < heads.length; i++) {
      const job = heads[i]!.value
      if (heads[i]!.done || !job) continue
      const best = first < 0 ? undefined : heads[first]!.value!
      if (!best || job.eligible_at < best.eligible_at || (job.eligible_at === best.eligible_at && job.seq < best.seq)) first = i
    }
    if (first < 0) return
    yield heads[first]!.value!
    heads[first] = ranges[first]!.next()
  }
}

/** The queues that may hand out work now, of these: the ones not paused. */
function unpaused(ctx: EngineContext, queues: readonly string[]): string[] {
  return ctx.pausedQueues.size === 0 ? [...queues] : queues.filter((queue) => !ctx.pausedQueues.has(queue))
}

/** The queues that have QUEUED jobs, from memory (job-tally.ts). */
function queuesWithQueuedJobs(ctx: EngineContext): string[] {
  return ctx.jobTally.queues()
}

/**
 * The next moment a QUEUED job of a queue that is not paused becomes eligible (a requeued job's
 * backoff ends, a delayed job's `run_at` comes), or null if none waits: whoever waits for work
 * sets a timer for it. One index probe per queue and priority.
 */
export function nextEligibleAt(ctx: EngineContext, now: number): number | null {
  let next: number | null = null
  for (const queue of unpaused(ctx, queuesWithQueuedJobs(ctx))) {
    for (const rank of PRIORITY_RANKS) {
      if (ctx.jobTally.count(queue, rank) === 0) continue
      const row = ctx.one<{ at: number | null }>(
        "SELECT MIN(eligible_at) AS at FROM jobs WHERE state = 'QUEUED' AND queue = ? AND priority = ? AND eligible_at > ?",
        queue,
        rank,
        now,
      )
      if (row?.at != null && (next === null || row.at < next)) next = row.at
    }
  }
  return next
}
