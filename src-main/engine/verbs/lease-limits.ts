import type { JobRow, LeaseRow } from '../../db/schema'
import type { EngineContext } from '../memory/context'
import type { LeaseExpiryReason } from '../rules/events'

/**
 * How far heartbeats may carry a lease (docs/states.md, "Cancellation" and "Attempts, expiry and
 * retries"). A heartbeat keeps a lease for its TTL and grace, but not past the moment its worker
 * should have stopped: the TTL and grace after a cancel was asked (every heartbeat answer since
 * said `cancel_requested`), or after the attempt's `max_runtime_s` ran out. A worker that keeps
 * heartbeating without stopping would otherwise hold its job and its units for ever. The time the
 * machine slept is not counted against it: its worker slept too.
 */

/** How long a heartbeat keeps a lease: its TTL and grace. */
export const lastsMs = (lease: LeaseRow): number => (lease.ttl_s + lease.grace_s) * 1000

/** The latest a heartbeat may carry the lease to, by its job's max_runtime_s: the attempt's start, the runtime, then the TTL and grace, and any time the machine slept since. Infinity without one. */
const runtimeLimit = (ctx: EngineContext, lease: LeaseRow, job: JobRow): number =>
  job.max_runtime_s == null ? Infinity : lease.granted_at + job.max_runtime_s * 1000 + lastsMs(lease) + asleepSince(ctx, lease.granted_at)

/** How long the machine slept after `since` (as far as {@link EngineContext.sleeps} remembers). */
function asleepSince(ctx: EngineContext, since: number): number {
  let slept = 0
  for (const { wokeAt, sleptMs } of ctx.sleeps) if (wokeAt > since) slept += sleptMs
  return slept
}

/**
 * The latest a heartbeat may carry the lease to: the earlier of {@link runtimeLimit} and, once its
 * job is asked to cancel, the cancel's time and the TTL and grace. Infinity when neither applies.
 * A cancel recorded after now (the wall clock was set back since) counts from no later than the
 * first heartbeat or reaper pass that sees it so: the lease is carried no further than it is aimed
 * then, and the reaper aims no lease further than its TTL and grace from now (reaper.ts). The
 * grant a runtime counts from the reaper moves itself.
 */
export function heartbeatLimit(ctx: EngineContext, lease: LeaseRow, job: JobRow): number {
  const canceledAt = job.cancel_requested ? cancelRequestedAt(ctx, job, lease.granted_at) : null
  return Math.min(canceledAt === null ? Infinity : cancelLimit(ctx, lease, canceledAt), runtimeLimit(ctx, lease, job))
}

/** The latest a heartbeat may carry the lease to once its job was asked to cancel at `canceledAt` (see {@link heartbeatLimit}). */
function cancelLimit(ctx: EngineContext, lease: LeaseRow, canceledAt: number): number {
  const now = ctx.clock.now()
  if (canceledAt > now) return Math.min(lease.expires_at, now + lastsMs(lease))
  return canceledAt + lastsMs(lease) + asleepSince(ctx, canceledAt)
}

/**
 * Why a lease that came to its expiry ended, when a limit cut it short: its expiry is earlier
 * than its last heartbeat would have carried it, which only {@link heartbeatLimit} makes so.
 * `max_runtime_exceeded` when the runtime limit cut it, else `cancel_not_stopped`; null for a
 * lease that simply was not heartbeated in time.
 */
export function limitThatEnded(ctx: EngineContext, lease: LeaseRow, job: JobRow): LeaseExpiryReason | null {
  if (lease.expires_at >= lease.last_heartbeat_at + lastsMs(lease)) return null
  return lease.expires_at >= runtimeLimit(ctx, lease, job) ? 'max_runtime_exceeded' : job.cancel_requested ? 'cancel_not_stopped' : null
}

/**
 * When the job's running attempt was asked to cancel: its newest `JOB_CANCEL_REQUESTED` event, on
 * the job's chain of events walked back from its newest no further than the lease's grant. A
 * cancel is only ever asked of a leased job, so after its grant; when retention has deleted the
 * event, the grant is the earliest it can have been.
 */
function cancelRequestedAt(ctx: EngineContext, job: JobRow, grantedAt: number): number {
  if (job.last_event_id === null) return grantedAt
  const found = ctx.one<{ ts: number }>(
    `WITH RECURSIVE chain(id, prev_id, event_type, ts) AS (
       SELECT id, prev_id, event_type, ts FROM events WHERE id = ?
       UNION ALL SELECT events.id, events.prev_id, events.event_type, events.ts FROM events JOIN chain ON events.id = chain.prev_id
         WHERE chain.event_type != 'JOB_CANCEL_REQUESTED' AND chain.ts >= ?)
     SELECT ts FROM chain WHERE event_type = 'JOB_CANCEL_REQUESTED' LIMIT 1`,
    job.last_event_id,
    grantedAt,
  )
  return found?.ts ?? grantedAt
}
