import { MAX_BATCH_ITEMS, MAX_CLAIM_JOBS } from '../../../src-shared/worker-exchange'
import type { CapacityStore } from '../memory/capacity-store'
import type { EngineContext } from '../memory/context'
import type { Settled } from '../store/context'
import { EngineError, invalid } from '../rules/errors'
import { submit, type SubmitJob, type SubmitResult } from './jobs'
import { type AttemptAnswer, type AttemptError, type AttemptReport, completeAttempt, failAttempt } from './attempt-reports'
import { type LeasedHeads, leaseHeads } from './grants'
import { heartbeatByToken } from './heartbeats'
import type { HeartbeatReport, Leased } from '../store/rows'
import type { WorkerFilter } from '../reads/pick'

/**
 * Batch verbs: many operations in one call, each answered on its own. They add nothing to the
 * rules: each item is the one-job verb, atomic on its own (see EngineContext.settleEach), so one
 * item that is refused (a lost lease, a duplicate key) never undoes another. Only an unexpected
 * error (a bug, a storage fault) fails the whole batch.
 */

/** The most items one batch call may carry, and the most jobs one claim may take: the worker exchange's limits. */
export { MAX_BATCH_ITEMS, MAX_CLAIM_JOBS }

/** One item's answer: its value, or the domain error that refused it. */
export type ItemResult<T> = { ok: true; value: T } | { ok: false; error: EngineError }

function item<T>(settled: Settled<T>): ItemResult<T> {
  if (settled.ok) return settled
  if (settled.error instanceof EngineError) return { ok: false, error: settled.error }
  throw settled.error // not a refusal: the batch fails whole
}

function checkCount(name: string, count: number, max: number): void {
  if (count > max) throw invalid(`${name}: at most ${max} items in one call`)
}

/** Submits many jobs in one transaction; each is answered as a single submit would be. */
export function submitMany(ctx: EngineContext, capacity: CapacityStore, inputs: SubmitJob[]): ItemResult<SubmitResult>[] {
  checkCount('jobs', inputs.length, MAX_BATCH_ITEMS)
  const totalUnits = capacity.totalUnits()
  return ctx.transact(() => ctx.settleEach(inputs.map((input) => () => submit(ctx, input, totalUnits))).map(item))
}

/** The jobs granted by one claim of up to `maxJobs`, and why it stopped short, if it did. */
export type ClaimBatch = LeasedHeads

/**
 * the worker API claim of up to `maxJobs`: the head jobs this worker can take, each leased as a
 * single claim would lease it, in order, until one is denied (no job, or the head does not
 * fit: no backfilling past it).
 */
export function claimBatch(ctx: EngineContext, capacity: CapacityStore, filter: WorkerFilter, maxJobs: number, ttlS?: number): ClaimBatch {
  if (!Number.isSafeInteger(maxJobs) || maxJobs < 1 || maxJobs > MAX_CLAIM_JOBS) {
    throw invalid(`max_jobs: must be a whole number from 1 to ${MAX_CLAIM_JOBS}`)
  }
  return leaseHeads(ctx, capacity, filter, { ttl_s: ttlS, to: 'RUNNING', maxJobs })
}

/**
 * The moment an exchange's reports reached the host's transport, by the engine's clock, when that
 * was before the host could read them: a remote worker's request that waited in Redis while the
 * host was stopped (src-main/redis/worker-requests.ts). A symbol, so that no worker can send one.
 */
export const HEARD_AT = Symbol('heard at')

/** What a worker sends in one exchange: reports on the jobs it runs, and a claim for free slots. */
export interface WorkerExchange {
  worker_id: string
  /**
   * See {@link HEARD_AT}: each report is judged in time against its lease's expiry at that moment,
   * not at the moment it is read, and a heartbeat counts from it. Absent: now.
   */
  [HEARD_AT]?: number
  heartbeat?: (Omit<AttemptReport, 'attempt_id' | 'worker_id'> & HeartbeatReport)[]
  /** A completion may carry the job's last progress and note (no heartbeat needed for them). */
  complete?: (Omit<AttemptReport, 'worker_id'> & { result?: unknown } & HeartbeatReport)[]
  fail?: (Omit<AttemptReport, 'worker_id'> & { error: AttemptError })[]
  /** Claim up to `max_jobs` more, after the reports (capacity they free is reused at once). */
  claim?: { filter: Omit<WorkerFilter, 'worker_id'>; max_jobs: number; ttl_s?: number }
}

export interface ExchangeAnswer {
  heartbeats: ItemResult<Leased>[]
  completed: ItemResult<AttemptAnswer>[]
  failed: ItemResult<AttemptAnswer>[]
  claimed: ClaimBatch
}

/**
 * A worker's round trip in one transaction: heartbeats, completions and failures (each as the
 * one-job verb would answer it), then a claim for the slots it has free. Reports come first,
 * so the capacity a completion frees can go straight to the next job.
 */
export function exchange(ctx: EngineContext, capacity: CapacityStore, request: WorkerExchange): ExchangeAnswer {
  const { worker_id } = request
  const heartbeats = request.heartbeat ?? []
  const completions = request.complete ?? []
  const failures = request.fail ?? []
  checkCount('reports', heartbeats.length + completions.length + failures.length, MAX_BATCH_ITEMS)
  const heardAt = request[HEARD_AT]
  return ctx.transact(() => ({
    heartbeats: ctx.settleEach(heartbeats.map((beat) => () => heartbeatByToken(ctx, heartbeatOf(beat, worker_id), heardAt))).map(item),
    completed: ctx.settleEach(completions.map((report) => () => completeAttempt(ctx, completionOf(report, worker_id), heardAt))).map(item),
    failed: ctx.settleEach(failures.map((report) => () => failAttempt(ctx, failureOf(report, worker_id), heardAt))).map(item),
    claimed: request.claim
      ? claimBatch(ctx, capacity, { ...request.claim.filter, worker_id }, request.claim.max_jobs, request.claim.ttl_s)
      : { granted: [], denial: null },
  }))
}

/**
 * `T` with every field present (an optional one may hold undefined): the type of a copy that
 * writes each field out instead of spreading, so that a field added to `T` and not to the copy
 * fails to compile instead of being dropped.
 */
export type EveryField<T> = { [K in keyof Required<T>]: T[K] }

type Heartbeat = NonNullable<WorkerExchange['heartbeat']>[number] & { worker_id: string }
type Completion = NonNullable<WorkerExchange['complete']>[number] & { worker_id: string }
type Failure = NonNullable<WorkerExchange['fail']>[number] & { worker_id: string }

// Each report as its one-job verb takes it, with the worker's id: every field written out, not
// spread, so that the verbs read reports of one shape. Parsed from a request, each carries only
// the fields its worker sent, and the spreads' copies made the verbs' reads megamorphic.

function heartbeatOf(beat: NonNullable<WorkerExchange['heartbeat']>[number], worker_id: string): EveryField<Heartbeat> {
  return { job_id: beat.job_id, worker_id, lease_token: beat.lease_token, progress: beat.progress, note: beat.note }
}

function completionOf(report: NonNullable<WorkerExchange['complete']>[number], worker_id: string): EveryField<Completion> {
  return {
    job_id: report.job_id,
    attempt_id: report.attempt_id,
    worker_id,
    lease_token: report.lease_token,
    result: report.result,
    progress: report.progress,
    note: report.note,
  }
}

function failureOf(report: NonNullable<WorkerExchange['fail']>[number], worker_id: string): EveryField<Failure> {
  return { job_id: report.job_id, attempt_id: report.attempt_id, worker_id, lease_token: report.lease_token, error: report.error }
}
