import type { JobRow, LeaseRow } from '../db/schema'
import { nextRetryAt } from './backoff'
import { capacityDenial } from './capacity'
import type { CapacityStore } from './capacity-store'
import type { EngineContext } from './context'
import { EngineError, type ErrorExtra, invalid, leaseNotFound, workerMismatch } from './errors'
import { newId, newToken } from './ids'
import { hasRevokedFiles, releaseFilesOfLease } from './files'
import { checkClaimer, expireClaimIfDue, getJob, moveJob, updateJob } from './jobs'
import { eligibleJobs, holdsActiveLease, type WorkerFilter } from './pick'
import { pausedDenial } from './queues'
import { JOB_ENDED_EVENTS } from './events'
import { LEASE_REQUEST_STATES, type FinalStatus, type JobState, type TerminalState } from './states'
import { nextStreamMessageId } from './streams'

export interface Leased {
  lease: LeaseRow
  job: JobRow
}

export type LeaseDecision =
  | ({ granted: true; /** The stream message that delivers this attempt (dialect 003's `message_id`). */ message_id: number | null } & Leased)
  | { granted: false; reason: string; retry_after_ms: number }

/** The jobs one lease request took (at most its `maxJobs`), and why it stopped short, if it did. */
export interface LeasedHeads {
  granted: (LeaseDecision & { granted: true })[]
  /** The denial that ended it before `maxJobs` (nothing queued, no capacity), or null. */
  denial: (LeaseDecision & { granted: false }) | null
}

/** What a worker reports when it finishes an attempt. */
export interface Outcome {
  status: FinalStatus
  result?: unknown
  error?: unknown
  metrics?: unknown
  /** The job's last progress and note, when they come with the outcome instead of a heartbeat before it. */
  report?: HeartbeatReport
}

// ---------------------------------------------------------------------------------------------
// Granting

function checkTtl(ctx: EngineContext, ttlS: number | undefined): number {
  const ttl = ttlS ?? ctx.config.leaseTtlS
  const { minTtlS, maxTtlS } = ctx.config
  if (!Number.isSafeInteger(ttl) || ttl < minTtlS || ttl > maxTtlS) {
    throw invalid(`ttl_sec: must be a whole number of seconds from ${minTtlS} to ${maxTtlS}`)
  }
  return ttl
}

/** Every column of a lease. */
const LEASE_COLUMNS = [
  'fence', 'id', 'job_id', 'attempt_id', 'worker_id', 'addon_id', 'cost_units', 'ttl_s', 'grace_s', 'state', 'token',
  'granted_at', 'last_heartbeat_at', 'expires_at', 'released_at', 'release_status', 'attempt', 'disposition', 'error',
] as const satisfies readonly (keyof LeaseRow)[]
/** Fails to compile while a column of the table is missing from the list. */
const allLeaseColumns: Exclude<keyof LeaseRow, (typeof LEASE_COLUMNS)[number]> extends never ? true : never = true
void allLeaseColumns

/**
 * Grants a lease on `job` to `workerId`, inside the caller's transaction: the lease (with a new
 * token and the next fence) that runs the job's next attempt, and the job's move to `to`.
 * Capacity has been checked by the caller.
 */
function grant(ctx: EngineContext, job: JobRow, workerId: string, ttlS: number, to: 'LEASED' | 'RUNNING'): Leased {
  const now = ctx.clock.now()
  const fence = ctx.counters.nextFence()
  const lease: LeaseRow = {
    id: newId(),
    job_id: job.id,
    attempt_id: newId(),
    worker_id: workerId,
    addon_id: job.addon_id,
    cost_units: job.cost_units,
    ttl_s: ttlS,
    grace_s: ctx.config.heartbeatGraceS,
    state: 'ACTIVE',
    token: newToken(),
    fence,
    granted_at: now,
    last_heartbeat_at: now,
    expires_at: now + (ttlS + ctx.config.heartbeatGraceS) * 1000,
    released_at: null,
    release_status: null,
    attempt: job.attempts + 1,
    disposition: null,
    error: null,
  }
  ctx.insert('leases', LEASE_COLUMNS, lease)
  const attempt = lease.attempt
  // Only the columns that change: SQLite maintains every index that names a column the update
  // writes, even with the value it had (jobs_claim_expiry names a claim's expiry).
  const changes: Partial<JobRow> = { attempts: attempt, lease_id: lease.id, claimed_by: workerId }
  if (job.claim_expires_at !== null) changes.claim_expires_at = null
  if (job.next_retry_at !== null) changes.next_retry_at = null
  if (job.started_at === null) changes.started_at = now
  const leasedJob = moveJob(ctx, job, to, changes)
  ctx.activeLeases.granted(lease, leasedJob)
  ctx.appendEvent('LEASE', lease.id, job.id, 'LEASE_GRANTED', {
    state: to,
    worker_id: workerId,
    cost_units: lease.cost_units,
    attempt,
    fence,
    expires_at: lease.expires_at,
  })
  return { lease, job: leasedJob }
}

/**
 * Dialect 001 request and dialect 003 claim: dequeue the head job this worker can take and lease
 * it in one step. If the head does not fit the available capacity the request is denied and
 * the head keeps its place: no smaller job behind it is leased instead.
 */
export function leaseNext(
  ctx: EngineContext,
  capacity: CapacityStore,
  filter: WorkerFilter,
  options: { ttl_s?: number; to: 'LEASED' | 'RUNNING' },
): LeaseDecision {
  const { granted, denial } = leaseHeads(ctx, capacity, filter, { ...options, maxJobs: 1 })
  return granted[0] ?? denial!
}

/**
 * The head jobs this worker can take, leased one after another in scheduling order until
 * `maxJobs` or the first that cannot be leased: as that many single requests would, in one walk
 * of the queue. A worker that holds a lease (the ones granted here included) takes no `unique`
 * job.
 */
export function leaseHeads(
  ctx: EngineContext,
  capacity: CapacityStore,
  filter: WorkerFilter,
  options: { ttl_s?: number; to: 'LEASED' | 'RUNNING'; maxJobs: number },
): LeasedHeads {
  const ttl = checkTtl(ctx, options.ttl_s)
  return ctx.transact(() => {
    const retry_after_ms = ctx.config.denyRetryAfterMs
    const granted: LeasedHeads['granted'] = []
    const stop = (reason: string): LeasedHeads => ({ granted, denial: { granted: false, reason, retry_after_ms } })
    let figures = capacity.figures()
    if (figures.available <= 0) return stop(capacityDenial(figures, 1)!)
    let holds: boolean | undefined
    const holdsLease = () => granted.length > 0 || (holds ??= holdsActiveLease(ctx, filter.worker_id))
    for (const job of eligibleJobs(ctx, filter, ctx.clock.now(), holdsLease)) {
      const denial = capacityDenial(figures, job.cost_units)
      if (denial) return stop(denial)
      const leased = grant(ctx, job, filter.worker_id, ttl, options.to)
      granted.push({ granted: true, ...leased, message_id: leased.job.stream_message_id })
      figures = { ...figures, leased: figures.leased + job.cost_units, available: figures.available - job.cost_units }
      if (granted.length === options.maxJobs) return { granted, denial: null }
    }
    return stop('No jobs queued')
  })
}

/** Dialect 002 claim: take up to `limit` jobs for this worker (no capacity yet; that is the lease). */
export function claimJobs(ctx: EngineContext, filter: WorkerFilter, limit: number): JobRow[] {
  if (!Number.isSafeInteger(limit) || limit < 1) throw invalid('limit: must be a whole number of at least 1')
  return ctx.transact(() => {
    const now = ctx.clock.now()
    const claimed: JobRow[] = []
    for (const job of eligibleJobs(ctx, filter, now)) {
      claimed.push(
        moveJob(ctx, job, 'CLAIMED', {
          claimed_by: filter.worker_id,
          claim_expires_at: now + ctx.config.claimTtlS * 1000,
        }),
      )
      ctx.appendEvent('JOB', job.id, job.id, 'JOB_CLAIMED', { state: 'CLAIMED', worker_id: filter.worker_id })
      if (claimed.length === limit) break
    }
    return claimed
  })
}

export interface LeaseRequestForJob {
  job_id: string
  /** If given, must equal the job's cost (409 `cost_mismatch`). */
  cost_units?: number
  ttl_s?: number
  /** The worker asking; when given it must be the job's claimer (403 `worker_mismatch`). */
  worker_id?: string
}

export type JobLeaseDecision =
  | ({ approved: true } & Leased)
  | { approved: false; reason: string; retry_after_sec: number; job: JobRow }

/**
 * Dialect 002 lease request for a claimed job. The lease belongs to the worker that claimed
 * it; a request naming another worker is refused (403) before anything changes. Approval makes the job RUNNING; denial leaves it LEASE_PENDING with `next_retry_at` as
 * advice, and keeps the claim alive while the worker keeps asking. A job of a paused queue is
 * denied, as for want of capacity.
 */
export function requestLeaseForJob(ctx: EngineContext, capacity: CapacityStore, request: LeaseRequestForJob): JobLeaseDecision {
  const ttl = checkTtl(ctx, request.ttl_s)
  expireClaimIfDue(ctx, request.job_id)
  return ctx.transact(() => {
    const job = getJob(ctx, request.job_id)
    checkClaimer(job, request.worker_id)
    if (!LEASE_REQUEST_STATES.has(job.state as JobState)) {
      throw new EngineError('illegal_transition', `Job ${job.id} is ${job.state}; a lease is requested from CLAIMED, PREPARING or LEASE_PENDING`)
    }
    if (request.cost_units !== undefined && request.cost_units !== job.cost_units) {
      throw new EngineError('cost_mismatch', `Job ${job.id} costs ${job.cost_units} units, not ${request.cost_units}`)
    }
    const denial = pausedDenial(ctx, job.queue) ?? capacityDenial(capacity.figures(), job.cost_units)
    if (!denial) return { approved: true, ...grant(ctx, job, job.claimed_by!, ttl, 'RUNNING') }
    const now = ctx.clock.now()
    const retry_after_sec = ctx.config.leaseRetryAfterS
    const pending = moveJob(ctx, job, 'LEASE_PENDING', {
      next_retry_at: now + retry_after_sec * 1000,
      claim_expires_at: now + ctx.config.claimTtlS * 1000,
    })
    ctx.appendEvent('JOB', job.id, job.id, 'LEASE_DENIED', { state: 'LEASE_PENDING', reason: denial })
    return { approved: false, reason: denial, retry_after_sec, job: pending }
  })
}

// ---------------------------------------------------------------------------------------------
// Finding the lease a worker names (fencing)

export function getLease(ctx: EngineContext, leaseId: string): LeaseRow {
  const lease = ctx.activeLeases.byId(leaseId)?.lease ?? ctx.one<LeaseRow>('SELECT * FROM leases WHERE id = ?', leaseId)
  if (!lease) throw leaseNotFound(leaseId)
  return lease
}

/**
 * A lease past its `expires_at` is expired on the spot, in its own transaction, before any call
 * that names it is answered: a late heartbeat never revives a lease the reaper has not reached.
 */
function expireIfDue(ctx: EngineContext, lease: LeaseRow): LeaseRow {
  if (lease.state !== 'ACTIVE' || lease.expires_at > ctx.clock.now()) return lease
  ctx.transact(() => expireLease(ctx, lease))
  return getLease(ctx, lease.id)
}

/** The 409 for a write under a lease that is no longer ACTIVE. */
export function notActive(lease: LeaseRow, extra: ErrorExtra = {}): EngineError {
  return lease.state === 'EXPIRED'
    ? new EngineError('lease_expired', `Lease ${lease.id} expired`, extra)
    : new EngineError('lease_not_active', `Lease ${lease.id} was released (${lease.release_status})`, extra)
}

/** Resolves the lease named by id (dialects 001, 002): 404, then 403 on another worker's lease. */
function leaseById(ctx: EngineContext, leaseId: string, workerId: string | undefined, jobId: string | undefined): LeaseRow {
  const lease = expireIfDue(ctx, getLease(ctx, leaseId))
  if (workerId !== undefined && lease.worker_id !== workerId) throw workerMismatch(leaseId, workerId)
  if (jobId !== undefined && lease.job_id !== jobId) {
    throw new EngineError('job_mismatch', `Lease ${leaseId} is for job ${lease.job_id}, not ${jobId}`)
  }
  return lease
}

/**
 * The job's lease that has this token: its current lease (the usual case), else one of its
 * earlier leases. 404 for an unknown job comes first.
 */
function jobLeaseWithToken(ctx: EngineContext, jobId: string, token: string): Leased | undefined {
  const active = ctx.activeLeases.ofJob(jobId)
  if (active?.lease.token === token) return active
  const job = active?.job ?? getJob(ctx, jobId)
  const current = job.lease_id === null ? undefined : ctx.one<LeaseRow>('SELECT * FROM leases WHERE id = ?', job.lease_id)
  if (current?.token === token) return { lease: current, job }
  const earlier = ctx.one<LeaseRow>('SELECT * FROM leases WHERE job_id = ? AND token = ?', jobId, token)
  return earlier && { lease: earlier, job }
}

/**
 * Resolves the lease named by its token (dialect 003): a token that is not this job's is a
 * mismatch. Also answers the job as it now is, so the caller need not read it again.
 */
function leaseByToken(ctx: EngineContext, jobId: string, workerId: string, token: string): Leased {
  const found = jobLeaseWithToken(ctx, jobId, token)
  if (!found) throw new EngineError('lease_token_mismatch', `That lease token is not a lease of job ${jobId}`)
  const lease = expireIfDue(ctx, found.lease)
  if (lease.worker_id !== workerId) throw workerMismatch(lease.id, workerId)
  return { lease, job: lease === found.lease ? found.job : getJob(ctx, jobId) }
}

// ---------------------------------------------------------------------------------------------
// Heartbeats

export interface HeartbeatReport {
  progress?: number | null
  note?: string | null
}

function checkProgress(report: HeartbeatReport): void {
  if (report.progress != null && !(report.progress >= 0 && report.progress <= 1)) {
    throw invalid('progress: must be a number from 0 to 1')
  }
}

/**
 * Extends an ACTIVE lease to now + ttl + grace; the first heartbeat moves LEASED → RUNNING.
 * `job` is the lease's job as already read in this transaction, if the caller has it.
 */
function extend(ctx: EngineContext, lease: LeaseRow, report: HeartbeatReport, current?: JobRow): Leased {
  if (lease.state !== 'ACTIVE') throw notActive(lease)
  const now = ctx.clock.now()
  const expiresAt = now + (lease.ttl_s + lease.grace_s) * 1000
  ctx.run('UPDATE leases SET last_heartbeat_at = ?, expires_at = ? WHERE fence = ?', now, expiresAt, lease.fence)
  const extended = { ...lease, last_heartbeat_at: now, expires_at: expiresAt }
  ctx.activeLeases.leaseWritten(extended)
  let job = current ?? ctx.activeLeases.ofJob(lease.job_id)?.job ?? getJob(ctx, lease.job_id)
  const changes: Partial<JobRow> = {}
  if (report.progress != null) changes.progress = report.progress
  if (report.note != null) changes.note = report.note
  if (job.state === 'LEASED') {
    job = moveJob(ctx, job, 'RUNNING', changes)
    ctx.appendEvent('JOB', job.id, job.id, 'JOB_RUNNING', { state: 'RUNNING', lease_id: lease.id })
  } else if (Object.keys(changes).length > 0) {
    job = updateJob(ctx, job, changes)
  }
  return { lease: extended, job }
}

/** Heartbeat naming the lease by id (dialects 000/001 and 002). */
export function heartbeat(
  ctx: EngineContext,
  request: { lease_id: string; worker_id?: string; job_id?: string } & HeartbeatReport,
): Leased {
  checkProgress(request)
  const lease = leaseById(ctx, request.lease_id, request.worker_id, request.job_id)
  return ctx.transact(() => extend(ctx, lease, request))
}

/** Heartbeat naming the lease by its token (dialect 003). */
export function heartbeatByToken(
  ctx: EngineContext,
  request: { job_id: string; worker_id: string; lease_token: string } & HeartbeatReport,
): Leased {
  checkProgress(request)
  const { lease, job } = leaseByToken(ctx, request.job_id, request.worker_id, request.lease_token)
  return ctx.transact(() => extend(ctx, lease, request, job))
}

// ---------------------------------------------------------------------------------------------
// Finishing an attempt

type Disposition = 'REQUEUED' | 'DEAD_LETTERED' | 'FINAL' | 'BLOCKED'

const FINAL_STATUS_OF: Record<string, FinalStatus> = {
  DONE: 'SUCCEEDED',
  FAILED: 'FAILED',
  CANCELED: 'CANCELED',
  TIMEOUT: 'TIMEOUT',
}

const json = (value: unknown): string | null => (value === undefined || value === null ? null : JSON.stringify(value))

/** Puts a job back in the queue after an attempt, eligible again after the backoff. */
function requeue(ctx: EngineContext, job: JobRow, reason: string): JobRow {
  const now = ctx.clock.now()
  const retryAt = nextRetryAt(now, job.attempts, ctx.config.backoff)
  // The ended attempt's message is acknowledged; a new one waits for the next delivery.
  const messageId = nextStreamMessageId(ctx)
  const queued = moveJob(ctx, job, 'QUEUED', {
    claimed_by: null,
    claim_expires_at: null,
    next_retry_at: retryAt,
    eligible_at: retryAt,
    progress: null,
    stream_message_id: messageId,
  })
  ctx.appendEvent('JOB', job.id, job.id, 'JOB_REQUEUED', {
    state: 'QUEUED',
    reason,
    attempt: job.attempts,
    next_retry_at: retryAt,
    message_id: messageId,
  })
  return queued
}

/** Ends a job in a terminal state. */
function finishJob(ctx: EngineContext, job: JobRow, to: TerminalState, outcome: Outcome, deadLetter: boolean): JobRow {
  const finished = moveJob(ctx, job, to, {
    final_status: FINAL_STATUS_OF[to]!,
    finished_at: ctx.clock.now(),
    dead_letter: deadLetter ? 1 : 0,
    result: json(outcome.result) ?? job.result,
    error: json(outcome.error) ?? job.error,
    metrics: json(outcome.metrics) ?? job.metrics,
    progress: outcome.report?.progress ?? job.progress,
    note: outcome.report?.note ?? job.note,
  })
  ctx.appendEvent('JOB', job.id, job.id, JOB_ENDED_EVENTS[to], {
    state: to,
    lease_id: job.lease_id,
    attempt: job.attempts,
    dead_letter: deadLetter,
  })
  return finished
}

/** Ends a lease and the attempt it ran (one row): EXPIRED, or RELEASED with the attempt's outcome. */
function endLease(
  ctx: EngineContext,
  lease: LeaseRow,
  state: 'RELEASED' | 'EXPIRED',
  status: FinalStatus | 'BLOCKED',
  disposition: Disposition,
  error: unknown,
): LeaseRow {
  const ended = { state, released_at: ctx.clock.now(), release_status: status, disposition, error: json(error) }
  ctx.run(
    'UPDATE leases SET state = ?, released_at = ?, release_status = ?, disposition = ?, error = ? WHERE fence = ?',
    ended.state,
    ended.released_at,
    ended.release_status,
    ended.disposition,
    ended.error,
    lease.fence,
  )
  ctx.activeLeases.ended(lease)
  return { ...lease, ...ended }
}

/** Where a reported outcome takes the job. Completion status is what the worker reports. */
function decide(job: JobRow, outcome: Outcome, retryable: boolean): { to: 'QUEUED' | TerminalState; disposition: Disposition } {
  if (outcome.status === 'SUCCEEDED') return { to: 'DONE', disposition: 'FINAL' }
  if (job.cancel_requested || outcome.status === 'CANCELED') return { to: 'CANCELED', disposition: 'FINAL' }
  if (retryable) {
    return job.attempts < job.max_attempts ? { to: 'QUEUED', disposition: 'REQUEUED' } : { to: outcome.status === 'TIMEOUT' ? 'TIMEOUT' : 'FAILED', disposition: 'DEAD_LETTERED' }
  }
  return { to: outcome.status === 'TIMEOUT' ? 'TIMEOUT' : 'FAILED', disposition: 'FINAL' }
}

/**
 * Releases an ACTIVE lease with the worker's outcome, closes the attempt and moves the job on;
 * returns the rows as they now are.
 */
function release(ctx: EngineContext, lease: LeaseRow, outcome: Outcome, retryable: boolean, current?: JobRow): Leased & { disposition: Disposition } {
  if (outcome.status === 'SUCCEEDED' && hasRevokedFiles(ctx, lease.id)) {
    throw new EngineError('file_lease_lost', 'An operator took a file from this lease; the job cannot succeed under it')
  }
  const job = current ?? jobOfLease(ctx, lease)
  const { to, disposition } = decide(job, outcome, retryable)
  releaseFilesOfLease(ctx, lease.id, to === 'DONE' ? 'job_succeeded' : to === 'QUEUED' || to === 'FAILED' ? 'job_failed' : 'job_ended')
  const released = endLease(ctx, lease, 'RELEASED', outcome.status, disposition, outcome.error)
  const moved = to === 'QUEUED' ? requeue(ctx, job, `attempt ${job.attempts} failed`) : finishJob(ctx, job, to, outcome, disposition === 'DEAD_LETTERED')
  return { lease: released, job: moved, disposition }
}

/** The job of a lease as it now is: from memory while the lease is ACTIVE. */
function jobOfLease(ctx: EngineContext, lease: LeaseRow): JobRow {
  return ctx.activeLeases.ofJob(lease.job_id)?.job ?? getJob(ctx, lease.job_id)
}

/**
 * Expires an ACTIVE lease inside the caller's transaction: its capacity is free at once, the
 * attempt ends TIMEOUT, and the job is requeued with backoff while attempts remain, else ends
 * TIMEOUT dead-lettered (CANCELED if a cancel was requested).
 */
export function expireLease(ctx: EngineContext, lease: LeaseRow, reason: 'no_heartbeat' | 'worker_exited' = 'no_heartbeat'): void {
  const job = jobOfLease(ctx, lease)
  const { to, disposition } = decide(job, { status: 'TIMEOUT' }, true)
  endLease(ctx, lease, 'EXPIRED', 'TIMEOUT', disposition, { code: 'lease_expired', message: 'The lease expired without a heartbeat' })
  ctx.appendEvent('LEASE', lease.id, lease.job_id, 'LEASE_EXPIRED', {
    reason,
    worker_id: lease.worker_id,
    expires_at: lease.expires_at,
    last_heartbeat_at: lease.last_heartbeat_at,
  })
  releaseFilesOfLease(ctx, lease.id, 'owner_lease_expired')
  if (to === 'QUEUED') requeue(ctx, job, reason === 'worker_exited' ? 'worker exited' : 'lease expired')
  else finishJob(ctx, job, to, { status: 'TIMEOUT' }, disposition === 'DEAD_LETTERED')
}

/**
 * Halts the job of a lease on a blocker (inside the caller's transaction): the lease is
 * released so its capacity comes back, the attempt ends BLOCKED, the files held under it are
 * released, and the job waits in BLOCKED for an operator.
 */
export function blockLease(ctx: EngineContext, lease: LeaseRow, blockerId: string): void {
  endLease(ctx, lease, 'RELEASED', 'BLOCKED', 'BLOCKED', { code: 'blocked', message: 'Halted by a file-lease blocker', blocker_id: blockerId })
  releaseFilesOfLease(ctx, lease.id, 'job_blocked')
  const job = getJob(ctx, lease.job_id) // its message is acknowledged: an operator's retry gives it a new one
  moveJob(ctx, job, 'BLOCKED', { progress: null })
  ctx.appendEvent('JOB', job.id, job.id, 'JOB_BLOCKED', { state: 'BLOCKED', blocker_id: blockerId, lease_id: lease.id })
}

export interface ReleaseRequest extends Outcome {
  lease_id: string
  worker_id?: string
  job_id?: string
}

export interface Released extends Leased {
  /** True when this repeated a release that had already taken effect. */
  replay: boolean
}

/**
 * Dialect 002 release (and dialect 001 complete): final for the job whatever the status. A
 * release repeating one that took effect answers as the first did; releasing an expired lease
 * answers 409 `lease_expired` (the attempt already ended TIMEOUT when the lease expired).
 */
export function releaseLease(ctx: EngineContext, request: ReleaseRequest): Released {
  const lease = leaseById(ctx, request.lease_id, request.worker_id, request.job_id)
  if (lease.state === 'RELEASED' && lease.release_status === request.status) {
    return { lease, job: getJob(ctx, lease.job_id), replay: true }
  }
  if (lease.state !== 'ACTIVE') throw notActive(lease)
  return ctx.transact(() => {
    const released = release(ctx, lease, request, false)
    return { lease: released.lease, job: released.job, replay: false }
  })
}

export interface AttemptReport {
  job_id: string
  attempt_id: string
  worker_id: string
  lease_token: string
}

export interface AttemptAnswer {
  ack: boolean
  requeued: boolean
  dlq: boolean
  job: JobRow
}

function answerFor(ctx: EngineContext, ended: LeaseRow): AttemptAnswer {
  return {
    ack: true,
    requeued: ended.disposition === 'REQUEUED',
    dlq: ended.disposition === 'DEAD_LETTERED',
    job: getJob(ctx, ended.job_id),
  }
}

/**
 * Dialect 003 complete and fail, idempotent by (job_id, attempt_id) and guarded by the lease
 * token. A repeat of the call that ended the attempt answers as it did; any other call on an
 * ended attempt is 409 with `ack: true` (the message must not be redelivered).
 */
function finishAttempt(ctx: EngineContext, report: AttemptReport, outcome: Outcome, retryable: boolean): AttemptAnswer {
  const { lease, job: current } = leaseByToken(ctx, report.job_id, report.worker_id, report.lease_token)
  if (lease.attempt_id !== report.attempt_id) {
    throw new EngineError('attempt_mismatch', `Attempt ${report.attempt_id} is not the attempt of that lease`, { ack: false })
  }
  if (lease.state !== 'ACTIVE') {
    if (lease.state === 'RELEASED' && lease.release_status === outcome.status) return answerFor(ctx, lease)
    throw notActive(lease, { ack: true })
  }
  return ctx.transact(() => {
    const { job, disposition } = release(ctx, lease, outcome, retryable, current)
    return { ack: true, requeued: disposition === 'REQUEUED', dlq: disposition === 'DEAD_LETTERED', job }
  })
}

/**
 * Completes the attempt. A completion may carry the job's last progress and note, as a heartbeat
 * would (a worker whose job ended before its queued heartbeat went out sends them with it).
 */
export function completeAttempt(ctx: EngineContext, report: AttemptReport & { result?: unknown } & HeartbeatReport): AttemptAnswer {
  checkProgress(report)
  return finishAttempt(ctx, report, { status: 'SUCCEEDED', result: report.result, report: { progress: report.progress, note: report.note } }, false)
}

export interface AttemptError {
  code?: string
  message?: string
  stack?: string
  retryable?: boolean
}

/** A retryable failure requeues while attempts remain, else dead-letters; any other failure is final. */
export function failAttempt(ctx: EngineContext, report: AttemptReport & { error: AttemptError }): AttemptAnswer {
  return finishAttempt(ctx, report, { status: 'FAILED', error: report.error }, report.error.retryable === true)
}
