import { type JobRow, STATE_SEQ_CLAUSE } from '../../db/schema'
import type { EngineContext } from '../memory/context'
import { queuesWithQueuedJobs } from '../memory/job-tally'
import { CLAIM_STATES } from '../rules/states'
import { parseStored } from '../store/stored-value'
import { SELECT_JOBS } from '../store/rows'

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
  /** the worker API streams (job queues), tried in this order; null means every queue. */
  queues?: string[] | null
}

const PRIORITY_RANKS = [3, 2, 1, 0] // URGENT first

/** True when the worker holds an ACTIVE lease (it may then not take a `unique` job). */
export function holdsActiveLease(ctx: EngineContext, workerId: string): boolean {
  return ctx.activeLeases.holds(workerId)
}

const CLAIM_STATE_LIST = [...CLAIM_STATES].map((state) => `'${state}'`).join(', ')

/**
 * True when the worker holds queue API claims whose leases it has not been granted yet (CLAIMED,
 * PREPARING or LEASE_PENDING, the claim not lapsed): it is about to hold leases. Read from the
 * jobs_state_seq index (its clause repeated so that SQLite uses it): a cost in claimed jobs only.
 */
export function holdsUnleasedClaims(ctx: EngineContext, workerId: string, now: number): boolean {
  return (
    ctx.one(
      `SELECT 1 FROM jobs WHERE ${STATE_SEQ_CLAUSE} AND state IN (${CLAIM_STATE_LIST}) AND claimed_by = ? AND claim_expires_at > ? LIMIT 1`,
      workerId,
      now,
    ) !== undefined
  )
}

/**
 * True when the worker holds a lease or is about to: an ACTIVE lease, or queue API claims not yet
 * leased. What the one rule of `unique` jobs asks, whichever API the worker takes jobs through
 * (a worker id may claim through the queue API and lease through the worker API).
 */
export function holdsOrAwaitsLease(ctx: EngineContext, workerId: string, now: number): boolean {
  return holdsActiveLease(ctx, workerId) || holdsUnleasedClaims(ctx, workerId, now)
}

/**
 * The one rule of `unique` jobs: a worker that holds a lease, or is about to, may not take one
 * (the claim verbs skip it, the queue API's lease request denies it). `holdsLease` is asked only
 * for a unique job: it may read the database.
 */
export function uniqueBarred(job: Pick<JobRow, 'is_unique'>, holdsLease: () => boolean): boolean {
  return job.is_unique === 1 && holdsLease()
}

function memo<T>(fn: () => T): () => T {
  let value: { v: T } | undefined
  return () => (value ??= { v: fn() }).v
}

/** Whether this worker may take this job: its filter, and a `unique` job only while it holds no lease. */
export function canTake(job: JobRow, filter: WorkerFilter, holdsLease: () => boolean): boolean {
  if (filter.addon_id != null && job.addon_id !== filter.addon_id) return false
  if (filter.accept_job_types && !filter.accept_job_types.includes(job.job_type)) return false
  if (filter.max_units != null && job.cost_units > filter.max_units) return false
  if (!filter.gpu_available && job.constraints.includes('gpu_required') && requiresGpu(job)) return false
  if (uniqueBarred(job, holdsLease)) return false
  return true
}

function requiresGpu(job: JobRow): boolean {
  return (parseStored(job.constraints) as Record<string, unknown>).gpu_required === true
}

/**
 * A pick reads its first page sized to the jobs it means to take (one, or a batch claim's N); a
 * worker that skips rows reads on in growing pages. The sizes are written into the SQL, not
 * bound, so that each is one prepared statement. 32 is a size of its own because a worker's free
 * slots usually are 32 (its default concurrency, after it finished all it held): a page of 64
 * read and built 32 rows for nothing, ~10 % of the engine's CPU in a drain.
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
 * became eligible. Paused queues hand out nothing. The order is kept in memory (job-tally.ts,
 * queued-range.ts); a worker that names no stream walks every queue's range of a priority at
 * once, merged in order. Each range is walked in pages, and only a page's rows are read, by
 * their key. Lazy: the caller stops at the head, or after `limit` claims. (Pages rather than one
 * pass: the caller writes between rows, and a write may move jobs in or out of a range.)
 */
export function* eligibleJobs(
  ctx: EngineContext,
  filter: WorkerFilter,
  now: number,
  {
    holdsLease = memo(() => holdsOrAwaitsLease(ctx, filter.worker_id, now)),
    wanted = 1,
  }: {
    /** Whether the worker holds a lease now or is about to (a caller that grants as it walks says so itself). */
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

/** Whether a range holds a job eligible at this moment (from memory). */
function hasEligible(ctx: EngineContext, queue: string, rank: number, now: number): boolean {
  return ctx.jobTally.range(queue, rank)?.hasEligible(now) ?? false
}

/**
 * Whether every range of these streams is known to hold nothing to take at this moment: a
 * claim naming them would walk nothing.
 */
export function knownEmpty(ctx: EngineContext, queues: readonly string[], now: number): boolean {
  return unpaused(ctx, queues).every((queue) => PRIORITY_RANKS.every((rank) => !hasEligible(ctx, queue, rank, now)))
}

/**
 * The eligible QUEUED jobs of one queue and priority, oldest eligible first: the range's keys
 * from memory in pages, each page's rows read by their key. Each page goes on after the last job
 * of the one before, so a job taken or written between pages is not met twice.
 */
function* rangeOf(ctx: EngineContext, queue: string, rank: number, now: number, startPage: number): Generator<JobRow> {
  let after: { eligibleAt: number; seq: number } | null = null
  for (let p = startPage; ; ) {
    const range = ctx.jobTally.range(queue, rank)
    if (!range) return
    const size = PAGE_SIZES[p]!
    const commits = ctx.commits
    const seqs = range.page(now, size, after)
    if (seqs.length === 0) return
    const rows = jobsBySeq(ctx, seqs)
    // Read from outside every operation (a view asking why a job waits), the rows' read commits an
    // open group first, and what its commit sets off (grants to waiting claims) may have taken
    // jobs of this page: the page is taken again. Inside an operation nothing commits meanwhile.
    if (ctx.commits !== commits) continue
    for (const job of rows) {
      if (job.state !== 'QUEUED') throw new Error(`pick: job ${job.id} is in the QUEUED range but ${job.state}`)
      yield job
    }
    if (seqs.length < size) return
    const last = rows[rows.length - 1]!
    after = { eligibleAt: last.eligible_at, seq: last.seq }
    p = Math.min(p + 1, PAGE_SIZES.length - 1)
  }
}

/**
 * The rows of these jobs, in the order given: from memory where the engine keeps them
 * (queued-rows.ts), the others read by their key, one statement per page size (the keys past
 * those read bound as 0, which no job has).
 */
function jobsBySeq(ctx: EngineContext, seqs: readonly number[]): JobRow[] {
  const rows: JobRow[] = []
  let unread: number[] | null = null
  for (const seq of seqs) {
    const row = ctx.queuedRows.get(seq)
    if (row) rows.push(row)
    else (unread ??= []).push(seq)
  }
  if (unread === null) return rows
  const size = PAGE_SIZES[firstPage(unread.length)]!
  const params = unread.length === size ? unread : [...unread, ...new Array<number>(size - unread.length).fill(0)]
  const read = ctx.all<JobRow>(`${SELECT_JOBS} WHERE seq IN (${PAGE_PLACEHOLDERS[size]})`, ...params)
  if (read.length !== unread.length) throw new Error(`pick: ${unread.length - read.length} QUEUED jobs of a range have no row`)
  if (read.length === seqs.length && read.length < 2) return read
  const bySeq = new Map(rows.map((row) => [row.seq, row]))
  for (const row of read) bySeq.set(row.seq, row)
  return seqs.map((seq) => bySeq.get(seq)!)
}

const PAGE_PLACEHOLDERS: Record<number, string> = Object.fromEntries(PAGE_SIZES.map((size) => [size, new Array(size).fill('?').join(', ')]))

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

/**
 * The next moment a QUEUED job of a queue that is not paused becomes eligible (a requeued job's
 * backoff ends, a delayed job's `run_at` comes), or null if none waits: whoever waits for work
 * sets a timer for it. From memory.
 */
export function nextEligibleAt(ctx: EngineContext, now: number): number | null {
  let next: number | null = null
  for (const queue of unpaused(ctx, queuesWithQueuedJobs(ctx))) {
    for (const rank of PRIORITY_RANKS) {
      const at = ctx.jobTally.range(queue, rank)?.nextEligibleAfter(now) ?? null
      if (at !== null && (next === null || at < next)) next = at
    }
  }
  return next
}
