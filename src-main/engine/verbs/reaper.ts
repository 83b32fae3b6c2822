import type { JobRow, LeaseRow } from '../../db/schema'
import { activeLeasesNow, committedActiveLeases } from '../memory/active-leases'
import type { EngineContext } from '../memory/context'
import { nextIdleFileAt, reaimFilesAfterSetBack, renewFilesAfterSleep } from './files'
import { expireClaim } from './jobs'
import { expireLease } from './lease-end'
import { nextRetryAt } from '../rules/backoff'
import { earliest, SET_BACK_MS } from '../rules/clock'
import type { LeaseExpiryReason } from '../rules/events'
import { reaimLease, renewLeaseExpiry, SELECT_JOBS, updateJob } from '../store/rows'
import { readSetting, writeSetting } from '../store/settings'

/** Leases expired per transaction, so one reaper pass never holds the write lock for long. */
const BATCH = 1000

/** A job a queue API claim holds, until its `claim_expires_at`. */
const HELD_BY_CLAIM = "state IN ('CLAIMED', 'PREPARING', 'LEASE_PENDING')"

/** The ACTIVE leases (kept in memory, active-leases.ts) that `keep` selects, soonest expiry first. */
function activeLeasesWhere(ctx: EngineContext, keep: (lease: LeaseRow) => boolean): LeaseRow[] {
  const leases: LeaseRow[] = []
  for (const { lease } of activeLeasesNow(ctx)) if (keep(lease)) leases.push(lease)
  return leases.sort((a, b) => a.expires_at - b.expires_at || a.fence - b.fence)
}

/**
 * Workers whose leases do not expire for now, whatever their `expires_at` says: their heartbeats
 * can only reach the host by a way it cannot hear at the moment (remote workers over Redis while
 * Redis does not answer it: src-main/redis/lease-hold.ts). Null: none.
 */
export type SparedWorkers = ReturnType<EngineContext['sparedWorkers']>

/** Whether `lease` is due at `now`, unless its worker is spared. */
const dueAt = (lease: LeaseRow, now: number, spared: SparedWorkers): boolean => lease.expires_at <= now && !spared?.has(lease.worker_id)

/**
 * Expires every ACTIVE lease whose `expires_at` has come, but those of spared workers
 * (`ctx.sparedWorkers`), in batches of {@link BATCH} per transaction, after re-aiming what a
 * clock set back stretched ({@link reaimAfterSetBack}). Returns how many it expired. The host
 * calls this on a short timer and once right after opening the database, so leases granted
 * before a restart expire on time.
 */
export function expireDueLeases(ctx: EngineContext): number {
  const spared = ctx.sparedWorkers()
  reaimAfterSetBack(ctx)
  let total = 0
  // Looked for in memory first: a tick with no lease due (every tick of an idle host) begins no transaction.
  while (anyLeaseDue(ctx, spared)) {
    const expired = ctx.transact(() => {
      const now = ctx.clock.now()
      const due = activeLeasesWhere(ctx, (lease) => dueAt(lease, now, spared)).slice(0, BATCH)
      for (const lease of due) expireLease(ctx, lease)
      return due.length
    })
    total += expired
    if (expired < BATCH) return total
  }
  return total
}

/** How long from `now` a lease heartbeated now would last: its TTL and grace. */
const lastsFrom = (lease: LeaseRow, now: number): number => now + (lease.ttl_s + lease.grace_s) * 1000

/**
 * The host keeps its times by the wall clock, which may be set back (NTP correcting a clock that
 * ran fast, a user setting it; while the host runs or while it is down). Then every moment kept
 * as "now + a duration" lies further off than its duration, and every moment kept as "now" lies
 * in the future. Held here, at each pass of the reaper (and so right after the database opens):
 * no wait the host set lasts longer than its duration from now, and no limit counts from a moment
 * in the future. The ACTIVE leases are checked in memory at every pass; the rest, kept only on
 * disk, when a set-back is seen ({@link clockSetBack}).
 */
function reaimAfterSetBack(ctx: EngineContext): void {
  if (anyLeaseAimedPastNow(ctx)) reaimLeasesAfterSetBack(ctx)
  const now = ctx.clock.now()
  if (clockSetBack(ctx, now)) reaimWaitsAfterSetBack(ctx)
  ctx.reapedAt = now
}

/** Whether the lease is due later than its TTL and grace from now, or was granted after now: the clock was set back since. */
const aimedPastNow = (lease: LeaseRow, now: number): boolean => lease.expires_at > lastsFrom(lease, now) || lease.granted_at > now

function anyLeaseAimedPastNow(ctx: EngineContext): boolean {
  const now = ctx.clock.now()
  for (const { lease } of activeLeasesNow(ctx)) if (aimedPastNow(lease, now)) return true
  return false
}

/**
 * A lease expires by the wall clock, so after the clock is set back a lease heartbeated before
 * would stay ACTIVE for as long as the clock went back: a worker gone meanwhile held its job and
 * its capacity that long. No lease is ever due later than its TTL and grace from now: one aimed
 * further is re-aimed there, as if heartbeated now (a live worker's next heartbeat keeps it as
 * ever). And its max_runtime_s counts from no grant in the future: a grant after now moves to now
 * less the time its heartbeats showed it running (verbs/lease-limits.ts). Returns how many were.
 */
function reaimLeasesAfterSetBack(ctx: EngineContext): number {
  return ctx.transact(() => {
    const now = ctx.clock.now()
    const far = activeLeasesWhere(ctx, (lease) => aimedPastNow(lease, now))
    for (const lease of far) {
      const granted_at = lease.granted_at > now ? now - (lease.last_heartbeat_at - lease.granted_at) : lease.granted_at
      reaimLease(ctx, lease, { granted_at, last_heartbeat_at: now, expires_at: Math.min(lease.expires_at, lastsFrom(lease, now)) })
    }
    return far.length
  })
}

/**
 * Whether the clock reads earlier than it did by more than {@link SET_BACK_MS}: than at the
 * reaper's last pass, or, at the first pass after the database opens, than the newest moment the
 * store kept as "now" (the clock was set back while the host was down).
 */
function clockSetBack(ctx: EngineContext, now: number): boolean {
  const before = ctx.reapedAt ?? newestMomentStored(ctx)
  return before !== null && now < before - SET_BACK_MS
}

/**
 * The newest moment the store kept as "now": its newest event's time, or a held file lease's last
 * heartbeat (which appends no event). Null for an empty store.
 */
function newestMomentStored(ctx: EngineContext): number | null {
  const event = ctx.one<{ ts: number }>('SELECT ts FROM events ORDER BY id DESC LIMIT 1')?.ts ?? null
  const file = ctx.one<{ at: number | null }>("SELECT MAX(last_heartbeat_at) AS at FROM file_leases WHERE state = 'ACTIVE'")?.at ?? null
  return event === null || file === null ? (event ?? file) : Math.max(event, file)
}

/**
 * The waits kept on disk, re-aimed after the clock was set back: a retry waits no longer than its
 * own backoff from now (the attempt that ended is the job's `attempts`, and the backoff policy
 * the host's now), a queue API claim runs out no later than its claim TTL from now, and the file
 * gate's waits are re-aimed likewise (files.ts). A delayed job's `run_at` stays: the store keeps
 * a submit's `delay_ms` as the moment it named, which cannot be told from a `run_at` given as a
 * time, and that is the submitter's own wall-clock intent.
 */
function reaimWaitsAfterSetBack(ctx: EngineContext): void {
  ctx.transact(() => {
    const now = ctx.clock.now()
    for (const job of ctx.all<JobRow>(`${SELECT_JOBS} WHERE state = 'QUEUED' AND next_retry_at > ?`, now)) {
      const retryAt = nextRetryAt(now, job.attempts, ctx.config.backoff)
      if (job.next_retry_at! > retryAt) updateJob(ctx, job, { next_retry_at: retryAt, eligible_at: retryAt })
    }
    const claimsUntil = now + ctx.config.claimTtlS * 1000
    for (const job of ctx.all<JobRow>(`${SELECT_JOBS} WHERE ${HELD_BY_CLAIM} AND claim_expires_at > ?`, claimsUntil)) updateJob(ctx, job, { claim_expires_at: claimsUntil })
    reaimFilesAfterSetBack(ctx, now)
  })
}

function anyLeaseDue(ctx: EngineContext, spared: SparedWorkers): boolean {
  const now = ctx.clock.now()
  for (const { lease } of activeLeasesNow(ctx)) if (dueAt(lease, now, spared)) return true
  return false
}

/**
 * The ACTIVE leases of `workerIds` last their TTL and grace from now (those that already last
 * longer are left): the host could not hear their heartbeats for a while, through no fault of
 * theirs, and counts their silence from now. Their `last_heartbeat_at` stays as it was. Returns
 * how many it renewed.
 */
export function renewLeasesOf(ctx: EngineContext, workerIds: ReadonlySet<string>): number {
  if (workerIds.size === 0) return 0
  return ctx.transact(() => renewLeasesWhere(ctx, (lease) => workerIds.has(lease.worker_id)))
}

/** What {@link renewAfterSleep} renewed. */
export interface SleepRenewals {
  leases: number
  claims: number
  files: number
}

/**
 * The machine slept, or its clock was set ahead (rules/clock.ts `SleepWatch`): nobody could be
 * heard meanwhile, through no fault of their own, and the host counts every holder's silence from
 * now, as it does for remote workers when Redis comes back. Every ACTIVE lease lasts its TTL and
 * grace from now, every queue API claim its claim TTL, and every held file lease goes idle 30 s
 * from now (files.ts); those that already last longer are left. A job lease's
 * `last_heartbeat_at` stays as it was; a file lease's, the moment its idle time counts from,
 * reads now.
 */
export function renewAfterSleep(ctx: EngineContext): SleepRenewals {
  return ctx.transact(() => {
    const now = ctx.clock.now()
    const leases = renewLeasesWhere(ctx, () => true)
    const claimsUntil = now + ctx.config.claimTtlS * 1000
    const claims = ctx.all<JobRow>(`${SELECT_JOBS} WHERE ${HELD_BY_CLAIM} AND claim_expires_at < ?`, claimsUntil)
    for (const job of claims) updateJob(ctx, job, { claim_expires_at: claimsUntil })
    return { leases, claims: claims.length, files: renewFilesAfterSleep(ctx, now) }
  })
}

/** The ACTIVE leases `keep` selects last their TTL and grace from now, unless they already last longer; how many were renewed. */
function renewLeasesWhere(ctx: EngineContext, keep: (lease: LeaseRow) => boolean): number {
  const now = ctx.clock.now()
  const short = activeLeasesWhere(ctx, (lease) => keep(lease) && lease.expires_at < lastsFrom(lease, now))
  for (const lease of short) renewLeaseExpiry(ctx, lease, lastsFrom(lease, now))
  return short.length
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
 * The ids of the local workers the pool has launched since the host started, kept so that the
 * next start knows which leases died with this host: a local worker exits when its host does,
 * while a worker of another process (HTTP, Redis) may outlive it.
 */
const LOCAL_WORKERS_KEY = 'local_worker_ids'

/**
 * The ids of the remote workers over Redis the host has heard from (and that may hold a lease),
 * kept so that a host that starts while Redis does not answer knows whose leases to spare.
 */
const REDIS_WORKERS_KEY = 'redis_worker_ids'

const workerIdsUnder = (ctx: EngineContext, key: string): string[] => JSON.parse(readSetting(ctx, key) ?? '[]') as string[]
const localWorkerIds = (ctx: EngineContext): string[] => workerIdsUnder(ctx, LOCAL_WORKERS_KEY)

/** Adds `workerId` to the ids kept under `key` (its own transaction). */
function recordWorkerUnder(ctx: EngineContext, key: string, workerId: string): void {
  ctx.transact(() => {
    const ids = workerIdsUnder(ctx, key)
    if (!ids.includes(workerId)) writeSetting(ctx, key, JSON.stringify([...ids, workerId]))
  })
}

/** Records a local worker the pool is launching (its own transaction), before it can hold a lease. */
export function recordLocalWorker(ctx: EngineContext, workerId: string): void {
  recordWorkerUnder(ctx, LOCAL_WORKERS_KEY, workerId)
}

/** Records a remote worker over Redis the host heard from (its own transaction), before it can hold a lease. */
export function recordRedisWorker(ctx: EngineContext, workerId: string): void {
  recordWorkerUnder(ctx, REDIS_WORKERS_KEY, workerId)
}

/** The remote workers over Redis recorded, less those that hold no lease now, which are forgotten (a worker heard again is recorded again). */
export function redisWorkersHoldingLeases(ctx: EngineContext): string[] {
  return ctx.transact(() => {
    const holding = new Set(activeLeasesWhere(ctx, () => true).map((lease) => lease.worker_id))
    const ids = workerIdsUnder(ctx, REDIS_WORKERS_KEY)
    const kept = ids.filter((id) => holding.has(id))
    if (kept.length < ids.length) writeSetting(ctx, REDIS_WORKERS_KEY, JSON.stringify(kept))
    return kept
  })
}

/**
 * At a start, before the pool launches: expires at once the leases still held by the local
 * workers of the host that ran before (they died with it, however it ended), and forgets those
 * workers. Leases of other workers are left to their TTL. Returns how many it expired.
 */
export function expireLeasesOfLastHostsLocalWorkers(ctx: EngineContext): number {
  const gone = new Set(localWorkerIds(ctx))
  if (gone.size === 0) return 0
  return ctx.transact(() => {
    const expired = expireWhere(ctx, (lease) => gone.has(lease.worker_id), 'host_restarted')
    writeSetting(ctx, LOCAL_WORKERS_KEY, '[]')
    return expired
  })
}

/**
 * Expires at once those of `leaseIds` that `workerId` still holds and never heartbeated: leases
 * granted to a claim whose worker was gone, or had given up on it, before it could hear of them
 * (src-main/dispatch/, src-main/redis/). Their jobs lose no attempt (`not_delivered`). A lease
 * heartbeated since its grant reached its worker, which may have run its job: it is not given
 * back this way. Returns how many.
 */
export function handBackLeases(ctx: EngineContext, workerId: string, leaseIds: readonly string[]): number {
  const ids = new Set(leaseIds)
  return ctx.transact(() =>
    expireWhere(ctx, (lease) => lease.worker_id === workerId && ids.has(lease.id) && lease.last_heartbeat_at === lease.granted_at, 'not_delivered'),
  )
}

/** Expires the ACTIVE leases `keep` selects, as leases of a worker that is gone, in one transaction. */
function expireForGoneWorker(ctx: EngineContext, keep: (lease: LeaseRow) => boolean): number {
  return ctx.transact(() => expireWhere(ctx, keep, 'worker_exited'))
}

/** Expires the ACTIVE leases `keep` selects, for `reason`, inside the caller's transaction. */
function expireWhere(ctx: EngineContext, keep: (lease: LeaseRow) => boolean, reason: LeaseExpiryReason): number {
  const held = activeLeasesWhere(ctx, keep)
  for (const lease of held) expireLease(ctx, lease, reason)
  return held.length
}

/**
 * Returns the queue API claims that ran out (no lease requested or status reported in time) to
 * QUEUED. No attempt is counted and the job keeps its place in the queue.
 */
export function expireDueClaims(ctx: EngineContext): number {
  const dueClaims = () =>
    ctx.all<JobRow>(
      `${SELECT_JOBS} WHERE ${HELD_BY_CLAIM} AND claim_expires_at <= ?
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

/**
 * The earliest moment the reaper will find something due — a lease's expiry, a claim's, a file
 * lease going idle — for a host that sleeps until then (src-main/reaper/timer.ts).
 */
export function nextDueAt(ctx: EngineContext): number | null {
  const spared = ctx.sparedWorkers()
  let at = ctx.one<{ at: number | null }>(`SELECT MIN(claim_expires_at) AS at FROM jobs WHERE ${HELD_BY_CLAIM} AND claim_expires_at IS NOT NULL`)?.at ?? null
  for (const { lease } of committedActiveLeases(ctx)) if (!spared?.has(lease.worker_id)) at = earliest(at, lease.expires_at)
  return earliest(at, nextIdleFileAt(ctx))
}
