import type { JobRow, LeaseRow } from '../../db/schema'
import { nextRetryAt } from '../rules/backoff'
import type { EngineContext } from '../memory/context'
import { EngineError, type ErrorExtra } from '../rules/errors'
import { type EventData, JOB_ENDED_EVENTS, type LeaseExpiryReason } from '../rules/events'
import { hasRevokedFiles, releaseFilesOfLease } from './files'
import { limitThatEnded } from './lease-limits'
import { requeue } from './moves'
import { type Disposition, endLease, getLease, type HeartbeatReport, jobOfLease, json, type Leased, leasesOfJob, moveJob, notActive } from '../store/rows'
import type { FinalStatus, TerminalState } from '../rules/states'
import { sameJson } from '../../../src-shared/same-json'
import { parseStored } from '../store/stored-value'

/**
 * How a lease and the attempt it runs end: released with the worker's outcome, or expired; and
 * where that takes the job (DONE, requeued with backoff, dead-lettered…). The verbs that name a
 * lease (attempt-reports.ts, heartbeats.ts, through lease-lookup.ts) and the reaper end leases
 * through these.
 */

/** What a worker reports when it finishes an attempt. */
export interface Outcome {
  status: FinalStatus
  result?: unknown
  error?: unknown
  metrics?: unknown
  /** The job's last progress and note, when they come with the outcome instead of a heartbeat before it. */
  report?: HeartbeatReport
}

const FINAL_STATUS_OF: Record<string, FinalStatus> = {
  DONE: 'SUCCEEDED',
  FAILED: 'FAILED',
  CANCELED: 'CANCELED',
  TIMEOUT: 'TIMEOUT',
}

/** Ends a job in a terminal state. */
function finishJob(ctx: EngineContext, job: JobRow, to: TerminalState, outcome: Outcome, deadLetter: boolean): JobRow {
  return moveJob(
    ctx,
    job,
    to,
    {
      final_status: FINAL_STATUS_OF[to]!,
      finished_at: ctx.clock.now(),
      dead_letter: deadLetter ? 1 : 0,
      result: json(outcome.result) ?? job.result,
      error: json(outcome.error) ?? job.error,
      metrics: json(outcome.metrics) ?? job.metrics,
      progress: outcome.report?.progress ?? job.progress,
      note: outcome.report?.note ?? job.note,
    },
    { type: JOB_ENDED_EVENTS[to], data: { state: to, lease_id: job.lease_id, attempt: job.attempts, dead_letter: deadLetter } },
  )
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
 * How a released attempt ended: as the worker reports, except that a run its job's cancel
 * stopped reads CANCELED whatever failure the worker reported (its stop error says the rest).
 */
function attemptOutcome(to: 'QUEUED' | TerminalState, reported: FinalStatus): FinalStatus {
  return to === 'CANCELED' ? 'CANCELED' : reported
}

/**
 * Whether a worker's report repeats the one that released this lease, to be answered as the
 * first was: the same status saying the same thing (the result a completion stored on its job;
 * the code, message and retryability of the error a failure stored on its attempt), or any but
 * success on an attempt a cancel ended (recorded CANCELED whatever the worker reported). A report
 * of the same status saying something else is no repeat: answered as one, its content would be
 * dropped without a word ({@link reportOnEnded} refuses it). `job` is the lease's job as it now is.
 */
export function repeatsRelease(lease: LeaseRow, job: JobRow, reported: Outcome): boolean {
  if (lease.state !== 'RELEASED') return false
  if (lease.release_status === 'CANCELED' && reported.status !== 'SUCCEEDED') return true
  return lease.release_status === reported.status && saysWhatWasStored(lease, job, reported)
}

/** Whether a report of the status a lease was released with carries what that release stored. */
function saysWhatWasStored(lease: LeaseRow, job: JobRow, reported: Outcome): boolean {
  // A success's result is stored only on its job, which then is DONE for good (a DONE job is not retried).
  // Compared as JSON, not as text: a resending worker's JSON library may write an object's members in another order.
  if (reported.status === 'SUCCEEDED') return sameJson(parseStored(job.result), reported.result ?? null)
  return sameError(lease.error, reported.error)
}

/**
 * Whether a reported error is the one stored: the same code, message and retryability when both
 * are objects (a resent failure may differ in its stack alone), else the same value; each
 * compared as JSON, an object's members in any order.
 */
function sameError(before: string | null, reported: unknown): boolean {
  const was = parseStored(before)
  const now = reported ?? null
  if (!isRecord(was) || !isRecord(now)) return sameJson(was, now)
  return sameMember(was, now, 'code') && sameMember(was, now, 'message') && (was.retryable === true) === (now.retryable === true)
}

/** Whether two objects have the same JSON at a key, a member absent and one null being alike (as stored, both are null). */
function sameMember(a: Record<string, unknown>, b: Record<string, unknown>, key: string): boolean {
  return sameJson(a[key] ?? null, b[key] ?? null)
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)

/**
 * The 409 for a report on a lease that is no longer ACTIVE and that does not repeat its release:
 * `lease_expired`, or `lease_not_active` — saying so when the report has the status the attempt
 * was released with but another result or error, which the first report's stands against.
 */
export function reportOnEnded(lease: LeaseRow, reported: Outcome, extra: ErrorExtra = {}): EngineError {
  if (lease.state !== 'RELEASED' || lease.release_status !== reported.status) return notActive(lease, extra)
  const what = reported.status === 'SUCCEEDED' ? 'result' : 'error'
  return new EngineError(
    'lease_not_active',
    `Lease ${lease.id} was released (${lease.release_status}): its attempt was already reported ${lease.release_status} with a different ${what}, which stands`,
    extra,
  )
}

/**
 * Releases an ACTIVE lease with the worker's outcome, closes the attempt and moves the job on;
 * returns the rows as they now are.
 */
export function release(ctx: EngineContext, lease: LeaseRow, outcome: Outcome, retryable: boolean, current?: JobRow): Leased & { disposition: Disposition } {
  if (outcome.status === 'SUCCEEDED' && hasRevokedFiles(ctx, lease.id)) {
    throw new EngineError('file_lease_lost', 'An operator took a file from this lease; the job cannot succeed under it')
  }
  const job = current ?? jobOfLease(ctx, lease)
  const interrupted = stoppedByShutdown(job, outcome, retryable) && shutdownsGivenBack(ctx, job, lease) < MAX_SHUTDOWN_GIVE_BACKS
  const { to, disposition } = interrupted ? ({ to: 'QUEUED', disposition: 'REQUEUED' } as const) : decide(job, outcome, retryable)
  releaseFilesOfLease(ctx, lease.id, to === 'DONE' ? 'job_succeeded' : to === 'QUEUED' || to === 'FAILED' ? 'job_failed' : 'job_ended')
  const released = endLease(ctx, lease, 'RELEASED', attemptOutcome(to, outcome.status), disposition, outcome.error)
  const moved = interrupted
    ? requeue(ctx, job, 'its worker shut down', null, { max_attempts: job.max_attempts + 1 })
    : to === 'QUEUED'
      ? requeueAfter(ctx, job, `attempt ${job.attempts} failed`)
      : finishJob(ctx, job, to, outcome, disposition === 'DEAD_LETTERED')
  return { lease: released, job: moved, disposition }
}

/** The code of a retryable failure a worker reports for a run it stopped as it shut down (its drain's grace ran out). */
export const SHUTDOWN_ERROR_CODE = 'shutdown'

/**
 * How many times a job has its attempt given back for a shutdown. The code is the worker's word,
 * and a handler's own error can carry it too (a library's "shutdown"): unbounded, such a job
 * would be requeued at once, with an attempt more, for ever. A job stopped by more restarts than
 * this has each further `shutdown` counted as a retryable failure, with its backoff.
 */
export const MAX_SHUTDOWN_GIVE_BACKS = 5

/**
 * A run its worker stopped as it shut down (a restart, a stop of the host or of `leasehold worker`)
 * is the operator's doing, not the job's: it costs no attempt (up to {@link MAX_SHUTDOWN_GIVE_BACKS}
 * times a job). Its job is requeued at once with one attempt more, as a grant never delivered
 * is, so a job on its last attempt is not dead-lettered by a routine restart. A cancel asked
 * meanwhile still ends it.
 */
function stoppedByShutdown(job: JobRow, outcome: Outcome, retryable: boolean): boolean {
  return outcome.status === 'FAILED' && retryable && !job.cancel_requested && (outcome.error as { code?: unknown } | undefined)?.code === SHUTDOWN_ERROR_CODE
}

/**
 * How many of the job's attempts before `current` its worker stopped as it shut down: each was
 * given back, until {@link MAX_SHUTDOWN_GIVE_BACKS} were, and counted after. Read from the job's
 * chain of leases only for a `shutdown` failure, which is rare.
 */
function shutdownsGivenBack(ctx: EngineContext, job: JobRow, current: LeaseRow): number {
  return leasesOfJob(ctx, job).filter((lease) => lease.fence !== current.fence && lease.release_status === 'FAILED' && errorCode(lease.error) === SHUTDOWN_ERROR_CODE).length
}

/** The code of an attempt's stored error (JSON text), if it has one. */
function errorCode(error: string | null): unknown {
  return error === null ? undefined : (JSON.parse(error) as { code?: unknown } | null)?.code
}

/** What an expired lease's attempt says ended it, and the note its job's requeue carries. */
const EXPIRY_TEXTS: Record<LeaseExpiryReason, { message: string; requeueNote: string }> = {
  no_heartbeat: { message: 'The lease expired without a heartbeat', requeueNote: 'lease expired' },
  worker_exited: { message: 'The worker exited while holding the lease', requeueNote: 'worker exited' },
  host_restarted: { message: 'The host restarted; the local worker holding the lease died with it', requeueNote: 'host restarted' },
  not_delivered: { message: 'The grant never reached its worker, which gave it back', requeueNote: 'grant not delivered' },
  cancel_not_stopped: {
    message: "The worker kept heartbeating but did not stop the job within the lease's TTL and grace of the cancel; the host ended the lease",
    requeueNote: 'cancel not honored',
  },
  max_runtime_exceeded: { message: 'Ran past its max_runtime_s and its worker did not stop it: the host ended the lease', requeueNote: 'max runtime exceeded' },
}

/**
 * The error an expired lease's attempt records: always code `lease_expired` (the lease ended
 * EXPIRED, the attempt TIMEOUT), with the reason and a message saying what ended it. An attempt
 * whose job an operator had asked to cancel says so too: its worker never reported that it
 * stopped, so the attempt is TIMEOUT while the job ends CANCELED, and this is what ties the two.
 */
function expiryError(reason: LeaseExpiryReason, cancelPending: boolean) {
  const { message } = EXPIRY_TEXTS[reason]
  if (!cancelPending) return { code: 'lease_expired', reason, message }
  return { code: 'lease_expired', reason, cancel_requested: true, message: `${message}; a cancel was pending` }
}

/**
 * Expires an ACTIVE lease inside the caller's transaction: its capacity is free at once, the
 * attempt ends TIMEOUT, and the job is requeued with backoff while attempts remain, else ends
 * TIMEOUT dead-lettered — or, if a cancel was requested, ends CANCELED whatever attempts remain:
 * the operator's cancel is not lost because the worker went silent before it stopped. A job that
 * ends carries the attempt's error, so its own reads say why, not only its attempts. A grant
 * that never reached its worker (`not_delivered`) ran nothing: its job is requeued at once, its
 * `max_attempts` one more, so that it has as many attempts left as before the grant.
 */
export function expireLease(ctx: EngineContext, lease: LeaseRow, given: LeaseExpiryReason = 'no_heartbeat'): void {
  const job = jobOfLease(ctx, lease)
  // A lease a heartbeat limit cut short ended because its worker did not stop, not because it fell silent.
  const reason = given === 'no_heartbeat' ? (limitThatEnded(ctx, lease, job) ?? given) : given
  if (reason === 'max_runtime_exceeded') return endPastRuntime(ctx, lease, job)
  const undelivered = reason === 'not_delivered' && !job.cancel_requested
  const { to, disposition } = undelivered ? ({ to: 'QUEUED', disposition: 'REQUEUED' } as const) : decide(job, { status: 'TIMEOUT' }, true)
  const error = expiryError(reason, job.cancel_requested === 1)
  endLease(ctx, lease, 'EXPIRED', 'TIMEOUT', disposition, error)
  appendExpired(ctx, lease, job, reason)
  releaseFilesOfLease(ctx, lease.id, 'owner_lease_expired')
  // Before the job is requeued: a claim its silent worker left waiting must not take it back.
  if (reason === 'no_heartbeat') ctx.workerFellSilent?.(lease.worker_id)
  if (undelivered) requeue(ctx, job, EXPIRY_TEXTS[reason].requeueNote, null, { max_attempts: job.max_attempts + 1 })
  else if (to === 'QUEUED') requeueAfter(ctx, job, EXPIRY_TEXTS[reason].requeueNote)
  // The job that ends here carries its last attempt's error, as a job a failure ends does.
  else finishJob(ctx, job, to, { status: 'TIMEOUT', error }, disposition === 'DEAD_LETTERED')
}

/** The lease's `LEASE_EXPIRED` event, on the job's chain; the job's move after it, in this transaction, writes its `last_event_id`. */
function appendExpired(ctx: EngineContext, lease: LeaseRow, job: JobRow, reason: LeaseExpiryReason): void {
  ctx.appendJobEvent(job, 'LEASE', lease.id, 'LEASE_EXPIRED', {
    reason,
    worker_id: lease.worker_id,
    expires_at: lease.expires_at,
    last_heartbeat_at: lease.last_heartbeat_at,
  } satisfies EventData<'LEASE_EXPIRED'>)
}

/**
 * Ends an attempt whose worker kept heartbeating past the job's `max_runtime_s` as Leasehold's
 * own workers end it themselves: failed `max_runtime_exceeded`, not retryable, so the job ends
 * FAILED (CANCELED when a cancel was pending), as their report would leave it. The lease ends
 * EXPIRED, so the worker's later reports are refused as on any expired lease, and the error and
 * the `LEASE_EXPIRED` event (`reason: max_runtime_exceeded`) say that the host ended it.
 */
function endPastRuntime(ctx: EngineContext, lease: LeaseRow, job: JobRow): void {
  const { to, disposition } = decide(job, { status: 'FAILED' }, false)
  const error = { code: 'max_runtime_exceeded', reason: 'max_runtime_exceeded', ended_by: 'host', retryable: false, message: EXPIRY_TEXTS.max_runtime_exceeded.message }
  endLease(ctx, lease, 'EXPIRED', attemptOutcome(to, 'FAILED'), disposition, error)
  appendExpired(ctx, lease, job, 'max_runtime_exceeded')
  releaseFilesOfLease(ctx, lease.id, to === 'FAILED' ? 'job_failed' : 'job_ended')
  finishJob(ctx, job, to as TerminalState, { status: 'FAILED', error }, false)
}

/** Puts a job back in the queue after an attempt, eligible again after the backoff. */
function requeueAfter(ctx: EngineContext, job: JobRow, reason: string): JobRow {
  return requeue(ctx, job, reason, nextRetryAt(ctx.clock.now(), job.attempts, ctx.config.backoff))
}

/**
 * A lease past its `expires_at` is expired on the spot, in its own transaction, before any call
 * that names it is answered: a late heartbeat never revives a lease the reaper has not reached.
 * A spared worker's lease is not (the reaper spares it too: reaper.ts). `heardAt`: the moment the
 * call reached the host's transport, when the host read it only later (a remote worker's request
 * that waited in Redis while the host was stopped): a call that came before the lease's expiry
 * was in time, whenever it is read. Never later than now.
 */
export function expireIfDue(ctx: EngineContext, lease: LeaseRow, heardAt?: number): LeaseRow {
  const at = Math.min(heardAt ?? Infinity, ctx.clock.now())
  if (lease.state !== 'ACTIVE' || lease.expires_at > at || ctx.sparedWorkers()?.has(lease.worker_id)) return lease
  ctx.transact(() => expireLease(ctx, lease))
  return getLease(ctx, lease.id)
}
