import type { JobRow, LeaseRow } from '../../db/schema'
import { activeLeasesNow, committedActiveLeases } from '../memory/active-leases'
import type { EngineContext } from '../memory/context'
import { expireClaim } from './jobs'
import { expireLease } from './lease-end'
import { SELECT_JOBS } from '../store/rows'

/** Leases expired per transaction, so one reaper pass never holds the write lock for long. */
const BATCH = 1000

/** The ACTIVE leases (kept in memory, active-leases.ts) that `keep` selects, soonest expiry first. */
function activeLeasesWhere(ctx: EngineContext, keep: (lease: LeaseRow) => boolean): LeaseRow[] {
  const leases: LeaseRow[] = []
  for (const { lease } of activeLeasesNow(ctx)) if (keep(lease)) leases.push(lease)
  return leases.sort((a, b) => a.expires_at - b.expires_at || a.fence - b.fence)
}

/**
 * Expires every ACTIVE lease whose `expires_at` has come, in batches of {@link BATCH} per
 * transaction. Returns how many it expired. The host calls this on a short timer and once
 * right after opening the database, so leases granted before a restart expire on time.
 */
export function expireDueLeases(ctx: EngineContext): number {
  let total = 0
  // Looked for in memory first: a tick with no lease due (every tick of an idle host) begins no transaction.
  while (anyLeaseDue(ctx)) {
    const expired = ctx.transact(() => {
      const now = ctx.clock.now()
      const due = activeLeasesWhere(ctx, (lease) => lease.expires_at <= now).slice(0, BATCH)
      for (const lease of due) expireLease(ctx, lease)
      return due.length
    })
    total += expired
    if (expired < BATCH) return total
  }
  return total
}

function anyLeaseDue(ctx: EngineContext): boolean {
  const now = ctx.clock.now()
  for (const { lease } of activeLeasesNow(ctx)) if (lease.expires_at <= now) return true
  return false
}

/**
 * Expires at once every ACTIVE lease a worker holds: its process is gone, so waiting out the
 * TTL would only keep the capacity stranded. The jobs are requeued (or dead-lettered) as on
 * any expiry. Returns how many leases it expired.
 */
export function expireLeasesOfWorker(ctx: EngineContext, workerId: string): number {
  return expireForGoneWorker(ctx, (lease) => lease.worker_id === workerId)
}

/**
 * Expires at once those of `leaseIds` that `workerId` still holds: leases granted to a claim
 * whose worker was gone before it could hear of them (src-main/dispatch/). Returns how many.
 */
export function handBackLeases(ctx: EngineContext, workerId: string, leaseIds: readonly string[]): number {
  const ids = new Set(leaseIds)
  return expireForGoneWorker(ctx, (lease) => lease.worker_id === workerId && ids.has(lease.id))
}

/** Expires the ACTIVE leases `keep` selects, as leases of a worker that is gone, in one transaction. */
function expireForGoneWorker(ctx: EngineContext, keep: (lease: LeaseRow) => boolean): number {
  return ctx.transact(() => {
    const held = activeLeasesWhere(ctx, keep)
    for (const lease of held) expireLease(ctx, lease, 'worker_exited')
    return held.length
  })
}

/**
 * Returns the queue API claims that ran out (no lease requested or status reported in time) to
 * QUEUED. No attempt is counted and the job keeps its place in the queue.
 */
export function expireDueClaims(ctx: EngineContext): number {
  const dueClaims = () =>
    ctx.all<JobRow>(
      `${SELECT_JOBS} WHERE state IN ('CLAIMED', 'PREPARING', 'LEASE_PENDING') AND claim_expires_at <= ?
       ORDER BY claim_expires_at LIMIT ?`,
      ctx.clock.now(),
      BATCH,
    )
  // Looked for before any transaction: a tick with no claim run out takes no write lock.
  if (dueClaims().length === 0) return 0
  return ctx.transact(() => {
    const due = dueClaims()
    for (const job of due) expireClaim(ctx, job)
    return due.length
  })
}

/** The earliest moment something will be due, for a host that sleeps until then. */
export function nextDueAt(ctx: EngineContext): number | null {
  let at = ctx.one<{ at: number | null }>('SELECT MIN(claim_expires_at) AS at FROM jobs WHERE claim_expires_at IS NOT NULL')?.at ?? null
  for (const { lease } of committedActiveLeases(ctx)) if (at === null || lease.expires_at < at) at = lease.expires_at
  return at
}
