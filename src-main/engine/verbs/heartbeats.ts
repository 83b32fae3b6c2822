import type { JobRow, LeaseRow } from '../../db/schema'
import type { EngineContext } from '../memory/context'
import { invalid } from '../rules/errors'
import { leaseById, leaseByToken } from './lease-lookup'
import { heartbeatLimit, lastsMs } from './lease-limits'
import { extendLease, type HeartbeatReport, jobOfLease, type Leased, moveJob, notActive, updateJob } from '../store/rows'

/** Heartbeats: a worker keeps its lease alive, and reports its job's progress. */

export function checkProgress(report: HeartbeatReport): void {
  if (report.progress != null && !(report.progress >= 0 && report.progress <= 1)) {
    throw invalid('progress: must be a number from 0 to 1')
  }
}

/**
 * Extends an ACTIVE lease to now + ttl + grace; the first heartbeat moves LEASED → RUNNING.
 * `job` is the lease's job as already read in this transaction, if the caller has it. A heartbeat
 * `heardAt` an earlier moment (batch.ts `HEARD_AT`) was beaten then: the lease lasts its TTL and
 * grace from that moment, and is never shortened (a later heartbeat may have been read first).
 * No heartbeat carries a lease past its {@link heartbeatLimit} (a cancel asked, the job's
 * max_runtime_s passed): one that comes after it leaves the lease due now, for the reaper to end.
 */
function extend(ctx: EngineContext, lease: LeaseRow, report: HeartbeatReport, current?: JobRow, heardAt?: number): Leased {
  if (lease.state !== 'ACTIVE') throw notActive(lease)
  const now = ctx.clock.now()
  let job = current ?? jobOfLease(ctx, lease)
  const limit = heartbeatLimit(ctx, lease, job)
  const extended =
    heardAt === undefined || heardAt >= now ? extendLease(ctx, lease, now, Math.min(now + lastsMs(lease), Math.max(limit, now))) : extendFromEarlier(ctx, lease, heardAt, limit)
  const changes: Partial<JobRow> = {}
  if (report.progress != null) changes.progress = report.progress
  if (report.note != null) changes.note = report.note
  if (job.state === 'LEASED') {
    job = moveJob(ctx, job, 'RUNNING', changes, { type: 'JOB_RUNNING', data: { state: 'RUNNING', lease_id: lease.id } })
  } else if (Object.keys(changes).length > 0) {
    job = updateJob(ctx, job, changes)
  }
  return { lease: extended, job }
}

/** A heartbeat beaten at `heardAt`, before now, read only now: the lease moves as it would have then (not past `limit`), never back. */
function extendFromEarlier(ctx: EngineContext, lease: LeaseRow, heardAt: number, limit: number): LeaseRow {
  return extendLease(ctx, lease, Math.max(lease.last_heartbeat_at, heardAt), Math.max(lease.expires_at, Math.min(heardAt + lastsMs(lease), limit)))
}

/** Heartbeat naming the lease by id (the pull and queue APIs). */
export function heartbeat(
  ctx: EngineContext,
  request: { lease_id: string; worker_id?: string; job_id?: string } & HeartbeatReport,
): Leased {
  checkProgress(request)
  const lease = leaseById(ctx, request.lease_id, request.worker_id, request.job_id)
  return ctx.transact(() => extend(ctx, lease, request))
}

/** Heartbeat naming the lease by its token (the worker API). */
export function heartbeatByToken(
  ctx: EngineContext,
  request: { job_id: string; worker_id: string; lease_token: string } & HeartbeatReport,
  heardAt?: number,
): Leased {
  checkProgress(request)
  const { lease, job } = leaseByToken(ctx, request.job_id, request.worker_id, request.lease_token, heardAt)
  return ctx.transact(() => extend(ctx, lease, request, job, heardAt))
}
