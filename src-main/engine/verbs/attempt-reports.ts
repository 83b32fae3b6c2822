import type { JobRow, LeaseRow } from '../../db/schema'
import type { EngineContext } from '../memory/context'
import { EngineError } from '../rules/errors'
import { checkProgress } from './heartbeats'
import { type Outcome, release, repeatsRelease, reportOnEnded } from './lease-end'
import { leaseById, leaseByToken } from './lease-lookup'
import { getJob, type HeartbeatReport, type Leased } from '../store/rows'

/**
 * A worker's reports of how an attempt ended: the queue API's release (and 001's complete), and
 * the worker API's complete and fail, each found by its lease and ended through lease-end.ts.
 */

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
 * the queue API release (and the pull API complete): final for the job whatever the status. A
 * release repeating one that took effect (saying the same) answers as the first did; one of
 * the same status with another result or error is 409 `lease_not_active`; releasing an expired lease
 * answers 409 `lease_expired` (the attempt already ended TIMEOUT when the lease expired).
 */
export function releaseLease(ctx: EngineContext, request: ReleaseRequest): Released {
  const lease = leaseById(ctx, request.lease_id, request.worker_id, request.job_id)
  if (lease.state !== 'ACTIVE') {
    const job = getJob(ctx, lease.job_id)
    if (repeatsRelease(lease, job, request)) return { lease, job, replay: true }
    throw reportOnEnded(lease, request)
  }
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
 * the worker API complete and fail, idempotent by (job_id, attempt_id) and guarded by the lease
 * token. A repeat of the call that ended the attempt (saying the same: lease-end.ts's
 * repeatsRelease) answers as it did; any other call on an ended attempt, one with another
 * result or error too, is 409 with `ack: true` (the message must not be redelivered).
 */
function finishAttempt(ctx: EngineContext, report: AttemptReport, outcome: Outcome, retryable: boolean, heardAt?: number): AttemptAnswer {
  const { lease, job: current } = leaseByToken(ctx, report.job_id, report.worker_id, report.lease_token, heardAt)
  if (lease.attempt_id !== report.attempt_id) {
    throw new EngineError('attempt_mismatch', `Attempt ${report.attempt_id} is not the attempt of that lease`, { ack: false })
  }
  if (lease.state !== 'ACTIVE') {
    if (repeatsRelease(lease, current, outcome)) return answerFor(ctx, lease)
    throw reportOnEnded(lease, outcome, { ack: true })
  }
  return ctx.transact(() => {
    const { job, disposition } = release(ctx, lease, outcome, retryable, current)
    return { ack: true, requeued: disposition === 'REQUEUED', dlq: disposition === 'DEAD_LETTERED', job }
  })
}

/**
 * Completes the attempt. A completion may carry the job's last progress and note, as a heartbeat
 * would (a worker whose job ended before its queued heartbeat went out sends them with it).
 * `heardAt`: when it reached the host's transport, if before now (batch.ts `HEARD_AT`).
 */
export function completeAttempt(ctx: EngineContext, report: AttemptReport & { result?: unknown } & HeartbeatReport, heardAt?: number): AttemptAnswer {
  checkProgress(report)
  return finishAttempt(ctx, report, { status: 'SUCCEEDED', result: report.result, report: { progress: report.progress, note: report.note } }, false, heardAt)
}

export interface AttemptError {
  code?: string
  message?: string
  stack?: string
  retryable?: boolean
}

/** A retryable failure requeues while attempts remain, else dead-letters; any other failure is final. */
export function failAttempt(ctx: EngineContext, report: AttemptReport & { error: AttemptError }, heardAt?: number): AttemptAnswer {
  return finishAttempt(ctx, report, { status: 'FAILED', error: report.error }, report.error.retryable === true, heardAt)
}
