import type { EventRow, JobRow } from '../../db/schema'
import type { EngineContext } from '../memory/context'
import type { EventData } from '../rules/events'
import { iso } from '../rules/clock'
import { EngineError, invalid } from '../rules/errors'
import { nextJobSeq } from '../store/counters'
import { keyedId } from '../store/ids'
import { closeBlockersOfCanceledJob } from './files'
import { cancelNow, NOTHING_SAID } from './moves'
import { getJob, insertJob, type JobEvent, moveJob, SELECT_JOBS, updateJob } from '../store/rows'
import type { PageRequest } from '../reads/list'
import { isScheduled } from '../reads/scheduled'
import { readTimeline, readTimelinePage } from '../reads/timeline'
import { nextStreamMessageId } from '../store/streams'
import { CANCEL_AT_ONCE_STATES, CLAIM_STATES, LEASED_STATES, type JobState, type Priority, priorityRank, shownState, TERMINAL_STATES } from '../rules/states'

/** A submit in the model's own words; each API maps its field names onto this. */
export interface SubmitJob {
  job_type: string
  cost_units: number
  addon_id?: string | null
  priority?: Priority
  constraints?: Record<string, boolean>
  payload?: unknown
  unique?: boolean
  idempotency_key?: string | null
  tags?: string[]
  max_runtime_s?: number | null
  queue?: string
  max_attempts?: number
  /** A delayed job: not claimable or leasable before this moment (epoch ms). Not with `delay_ms`. */
  run_at?: number | null
  /** A delayed job: not claimable or leasable for this many milliseconds. Not with `run_at`. */
  delay_ms?: number | null
}

export interface SubmitResult {
  /**
   * The job as submitted (QUEUED), also when a waiting claim leased it in the same submit
   * (grants.ts `grantOnSubmit`), as it is when the claim takes it at the commit: the answer does
   * not depend on which of the two leased it. A caller that writes the job again reads it first.
   */
  job: JobRow
  /** True when the idempotency key was known: `job` is the existing job, nothing was written. */
  duplicate: boolean
}

function isPositiveInteger(n: unknown): n is number {
  return typeof n === 'number' && Number.isSafeInteger(n) && n >= 1
}

/** The few invariants the database relies on, checked even when a caller skipped validation. */
export function checkSubmit(input: SubmitJob): void {
  if (typeof input.job_type !== 'string' || input.job_type.length === 0) throw invalid('job_type: must be a non-empty string')
  if (!isPositiveInteger(input.cost_units)) throw invalid('cost_units: must be an integer of at least 1')
  if (input.max_attempts !== undefined && !isPositiveInteger(input.max_attempts)) {
    throw invalid('max_attempts: must be an integer of at least 1')
  }
  if (input.max_runtime_s != null && !isPositiveInteger(input.max_runtime_s)) {
    throw invalid('max_runtime_s: must be an integer of at least 1')
  }
  if (input.run_at != null && input.delay_ms != null) throw invalid('run_at, delay_ms: give one or the other, not both')
  if (input.run_at != null && !(Number.isSafeInteger(input.run_at) && input.run_at >= 0 && input.run_at <= LATEST_TIME)) {
    throw invalid('run_at: must be a time between 1970 and 9999')
  }
  if (input.delay_ms != null && !(Number.isSafeInteger(input.delay_ms) && input.delay_ms >= 0 && input.delay_ms <= MAX_DELAY_MS)) {
    throw invalid(`delay_ms: must be a whole number of milliseconds from 0 to ${MAX_DELAY_MS} (100 years)`)
  }
}

/** The last moment an ISO-8601 time with a four-digit year can name (9999-12-31T23:59:59.999Z). */
const LATEST_TIME = Date.UTC(9999, 11, 31, 23, 59, 59, 999)

/** The queue a job submitted without one goes to. */
export const DEFAULT_QUEUE = 'default'
/** The priority of a job submitted without one. */
export const DEFAULT_PRIORITY: Priority = 'NORMAL'

/** The longest delay a submit may ask for. */
export const MAX_DELAY_MS = 100 * 365 * 24 * 3600 * 1000

/**
 * When a submitted job is to run, if that is later than `now` (a delayed job), else null: the
 * job is eligible at once. A time in the past is not a delay: the job takes its place as any
 * job submitted now, never ahead of jobs that have been waiting.
 */
export function delayedUntil(input: Pick<SubmitJob, 'run_at' | 'delay_ms'>, now: number): number | null {
  const at = input.run_at ?? (input.delay_ms != null ? now + input.delay_ms : null)
  return at !== null && at > now ? at : null
}

/**
 * Runs a delayed job now: it becomes eligible at once (its place in line is now) and its
 * `run_at` is cleared. `JOB_RUN_NOW` records the time it was scheduled for and who asked. A job
 * that is not waiting for its `run_at` answers 409 `not_scheduled`.
 */
export function runNow(ctx: EngineContext, jobId: string, requestedBy: string | null = null): JobRow {
  return ctx.transact(() => {
    const job = getJob(ctx, jobId)
    const now = ctx.clock.now()
    if (!isScheduled(job, now)) {
      // A retry's backoff is the retry policy's wait, not a time the submitter chose: run-now leaves it.
      const why = job.state !== 'QUEUED' ? '' : job.eligible_at > now ? ` and waits out its retry's backoff until ${iso(job.eligible_at)}` : ' and eligible'
      throw new EngineError('not_scheduled', `Job ${jobId} is ${shownState(job.state as JobState)}${why}; only a QUEUED job waiting for its run_at can be run now`)
    }
    return updateJob(
      ctx,
      job,
      { eligible_at: now, run_at: null },
      { type: 'JOB_RUN_NOW', data: { state: 'QUEUED', run_at: job.run_at, requested_by: requestedBy } },
    )
  })
}

/** Returns an expired queue API claim's job to QUEUED, inside the caller's transaction: no attempt counted, same place, its progress and note cleared. */
export function expireClaim(ctx: EngineContext, job: JobRow): JobRow {
  return moveJob(
    ctx,
    job,
    'QUEUED',
    { claimed_by: null, claim_expires_at: null, next_retry_at: null, ...NOTHING_SAID },
    { type: 'JOB_CLAIM_EXPIRED', data: { state: 'QUEUED', worker_id: job.claimed_by } },
  )
}

/**
 * A claim past its `claim_expires_at` is expired on the spot, in its own transaction, before a
 * call that names the job is answered: as with leases, the answer never depends on whether the
 * reaper got there first.
 */
export function expireClaimIfDue(ctx: EngineContext, jobId: string): void {
  const job = getJob(ctx, jobId)
  if (job.claim_expires_at !== null && job.claim_expires_at <= ctx.clock.now() && CLAIM_STATES.has(job.state as JobState)) {
    ctx.transact(() => expireClaim(ctx, job))
  }
}

/**
 * 400 `cost_exceeds_capacity`: a job costing more than the total could never be leased, and as
 * nothing passes the head of the line it would hold back every job behind it.
 */
export const costExceedsCapacity = (cost: number, totalUnits: number) =>
  new EngineError(
    'cost_exceeds_capacity',
    `cost_units: ${cost} exceeds the total capacity of ${totalUnits} units, so the job could never run; raise total_units (PUT /api/capacity) or split the job`,
  )

/**
 * {@link costExceedsCapacity} of a job that exists (a retry's): the request gave no cost, so the
 * detail names no field, only the job's cost; a client tells it from a value it sent that way.
 */
export const jobCostExceedsCapacity = (cost: number, totalUnits: number) =>
  new EngineError(
    'cost_exceeds_capacity',
    `the job's cost of ${cost} units exceeds the total capacity of ${totalUnits} units, so it could never run; raise total_units (PUT /api/capacity) to retry it`,
  )

/**
 * Submits a job, or returns the existing one when its idempotency key is already known. A job
 * costing more than `totalUnits` (the capacity's total now) is refused. A delayed job (`run_at`
 * or `delay_ms`) becomes eligible at that time: it is its `eligible_at`, the FIFO key.
 *
 * `offerToWaiting` (the one-job submit): while claims wait for work, the first that would take
 * the job may lease it at once (see EngineContext.leaseOnSubmit); otherwise the job is written
 * QUEUED. Not for the items of a batch: a waiting claim of several jobs takes all the batch
 * offers at the commit, where the first item alone would answer it.
 */
export function submit(ctx: EngineContext, input: SubmitJob, totalUnits: number, offerToWaiting = false): SubmitResult {
  checkSubmit(input)
  return ctx.transact(() => {
    if (input.idempotency_key != null) {
      const existing = ctx.one<JobRow>(`${SELECT_JOBS} WHERE idempotency_key = ?`, input.idempotency_key)
      if (existing) return { job: existing, duplicate: true }
    }
    if (input.cost_units > totalUnits) throw costExceedsCapacity(input.cost_units, totalUnits)
    const now = ctx.clock.now()
    const messageId = nextStreamMessageId(ctx)
    const runAt = delayedUntil(input, now)
    const maxAttempts = input.max_attempts ?? ctx.config.maxAttempts
    // The row's key, taken first so the id can name it.
    const seq = nextJobSeq(ctx)
    const id = keyedId(seq)
    const priority = input.priority ?? DEFAULT_PRIORITY
    const queue = input.queue ?? DEFAULT_QUEUE
    const submitted = ctx.appendJobEvent({ id, last_event_id: null }, 'JOB', id, 'JOB_SUBMITTED', {
      state: 'QUEUED',
      job_type: input.job_type,
      priority,
      cost_units: input.cost_units,
      queue,
      message_id: messageId,
      ...(runAt !== null ? { run_at: runAt } : {}),
    } satisfies EventData<'JOB_SUBMITTED'>)
    const job: JobRow = {
      seq,
      id,
      addon_id: input.addon_id ?? null,
      job_type: input.job_type,
      priority: priorityRank(priority),
      cost_units: input.cost_units,
      constraints: JSON.stringify(input.constraints ?? {}),
      payload: JSON.stringify(input.payload ?? {}),
      is_unique: input.unique ? 1 : 0,
      idempotency_key: input.idempotency_key ?? null,
      tags: JSON.stringify(input.tags ?? []),
      max_runtime_s: input.max_runtime_s ?? null,
      queue,
      max_attempts: maxAttempts,
      attempt_budget: maxAttempts,
      state: 'QUEUED',
      attempts: 0,
      claimed_by: null,
      claim_expires_at: null,
      lease_id: null,
      stream_message_id: messageId,
      next_retry_at: null,
      eligible_at: runAt ?? now,
      run_at: runAt,
      cancel_requested: 0,
      progress: null,
      note: null,
      dead_letter: 0,
      final_status: null,
      error: null,
      result: null,
      metrics: null,
      created_at: now,
      updated_at: now,
      started_at: null,
      finished_at: null,
      last_event_id: submitted,
    }
    if (!(offerToWaiting && ctx.leaseOnSubmit(job))) {
      insertJob(ctx, job)
    }
    return { job, duplicate: false }
  })
}

/**
 * Cancels a job. Jobs not yet holding capacity (and BLOCKED ones) end CANCELED at once; LEASED
 * and RUNNING jobs get `cancel_requested`, which every heartbeat answer carries, and end
 * CANCELED when their lease is released or expires. A terminal job answers 409. `requestedBy`
 * is who asked: a BLOCKED job's blocker is resolved in that name.
 */
export function cancel(ctx: EngineContext, jobId: string, reason: string | null = null, requestedBy: string | null = null): JobRow {
  return ctx.transact(() => {
    const job = getJob(ctx, jobId)
    const state = job.state as JobState
    if (CANCEL_AT_ONCE_STATES.has(state)) {
      cancelNow(ctx, job, reason, reason, requestedBy)
      if (state === 'BLOCKED') closeBlockersOfCanceledJob(ctx, job.id, reason, requestedBy)
    } else if (LEASED_STATES.has(state)) {
      if (!job.cancel_requested) updateJob(ctx, job, { cancel_requested: 1 }, { type: 'JOB_CANCEL_REQUESTED', data: { state, reason, requested_by: requestedBy } })
    } else {
      // Terminal: there is nothing left to cancel.
      throw new EngineError('illegal_transition', `Job ${job.id} has already ended (${state}): there is nothing to cancel`)
    }
    return getJob(ctx, jobId)
  })
}

export interface StatusUpdate {
  state?: JobState
  note?: string | null
  progress?: number | null
  /** The worker making the update; when given it must be the job's claimer (403 `worker_mismatch`). */
  worker_id?: string
}

/** The states a claiming worker may set by a status update (the queue contract: it says PREPARING, then LEASE_PENDING as it asks). */
const STATUS_SETTABLE: ReadonlySet<JobState> = new Set(['PREPARING', 'LEASE_PENDING'])

/**
 * 403 `worker_mismatch` when a queue API write names a worker that is not the job's claimer.
 * A job nobody holds (requeued, its claim lapsed) is left to the caller's 409.
 */
export function checkClaimer(job: JobRow, workerId: string | undefined): void {
  if (workerId !== undefined && job.claimed_by !== null && job.claimed_by !== workerId) {
    throw new EngineError('worker_mismatch', `Job ${job.id} is held by another worker, not ${workerId}`)
  }
}

/**
 * the queue API's status update: the claiming worker reports PREPARING or LEASE_PENDING (from any
 * claim state), or repeats the state the job is in with a note or progress. Leases, not status
 * calls, make a job RUNNING. A job nobody holds — QUEUED again because its claim lapsed or it
 * was requeued, BLOCKED, or finished — takes no status update (409): the caller is a stale
 * worker. An update keeps a claim alive.
 */
export function updateStatus(ctx: EngineContext, jobId: string, update: StatusUpdate): JobRow {
  if (update.progress != null && !(update.progress >= 0 && update.progress <= 1)) {
    throw invalid('progress: must be a number from 0 to 1')
  }
  expireClaimIfDue(ctx, jobId)
  return ctx.transact(() => {
    const job = getJob(ctx, jobId)
    const from = job.state as JobState
    checkClaimer(job, update.worker_id)
    if (!CLAIM_STATES.has(from) && !LEASED_STATES.has(from)) {
      const why = TERMINAL_STATES.has(from)
        ? 'it takes no more status updates'
        : from === 'QUEUED'
          ? 'no worker holds it (its claim lapsed or it was requeued): claim it again'
          : 'it waits for an operator'
      throw new EngineError('illegal_transition', `Job ${jobId} is ${shownState(from)}; ${why}`)
    }
    // Naming the state the queue API shows repeats it (a LEASED job shows as RUNNING).
    const to = update.state === undefined || update.state === shownState(from) ? from : update.state
    if (to !== from && !(STATUS_SETTABLE.has(to) && CLAIM_STATES.has(from))) {
      throw new EngineError('illegal_transition', `Job ${jobId} cannot move from ${shownState(from)} to ${to} by a status update`)
    }
    const changes: Partial<JobRow> = {}
    if (update.note !== undefined) changes.note = update.note
    if (update.progress !== undefined) changes.progress = update.progress
    if (job.claim_expires_at !== null) changes.claim_expires_at = ctx.clock.now() + ctx.config.claimTtlS * 1000
    const events: JobEvent[] = to !== from || update.note != null ? [{ type: 'JOB_STATUS', data: { state: to, from, note: update.note ?? null } }] : []
    if (to !== from) moveJob(ctx, job, to, changes, ...events)
    else if (Object.keys(changes).length > 0 || events.length > 0) updateJob(ctx, job, changes, ...events)
    return getJob(ctx, jobId)
  })
}

/** A job's timeline: its own events and its leases', oldest first. */
export function jobEvents(ctx: EngineContext, jobId: string): EventRow[] {
  return readTimeline(ctx, getJob(ctx, jobId))
}

/** A page of a job's timeline (reads/timeline.ts). */
export function jobEventsPage(ctx: EngineContext, jobId: string, page: PageRequest): { events: EventRow[]; next_cursor: string | null } {
  return readTimelinePage(ctx, getJob(ctx, jobId), page)
}
