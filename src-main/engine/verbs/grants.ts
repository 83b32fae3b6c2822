import type { JobRow, LeaseRow } from '../../db/schema'
import { type CapacityFigures, capacityDenial } from '../rules/capacity'
import type { CapacityStore } from '../memory/capacity-store'
import type { EngineContext } from '../memory/context'
import { EngineError, invalid } from '../rules/errors'
import { MIN_LEASE_WINDOW_S } from '../rules/engine-config'
import { keyedId, newId, newToken } from '../store/ids'
import { nextFence } from '../store/counters'
import { queuesWithQueuedJobs } from '../memory/job-tally'
import { queuePaused } from '../memory/paused-queues'
import { checkClaimer, expireClaimIfDue } from './jobs'
import { canTake, eligibleJobs, holdsActiveLease, holdsOrAwaitsLease, knownEmpty, uniqueBarred, type WorkerFilter } from '../reads/pick'
import { pausedDenial } from './queues'
import { fenceOfLease, getJob, insertLease, insertMovedJob, type JobEvent, type Leased, moveJob } from '../store/rows'
import { LEASE_REQUEST_STATES, type JobState, shownState } from '../rules/states'

/**
 * Granting leases: a worker's claim or lease request takes the head job it can run and leases
 * it (a new token, the next fence, the job's next attempt), if capacity allows; the queue API
 * claims first and asks for the lease after.
 */

export type LeaseDecision =
  | ({ granted: true; /** The stream message that delivers this attempt (the worker API's `message_id`). */ message_id: number | null } & Leased)
  | { granted: false; reason: string; retry_after_ms: number }

/** The jobs one lease request took (at most its `maxJobs`), and why it stopped short, if it did. */
export interface LeasedHeads {
  granted: (LeaseDecision & { granted: true })[]
  /** The denial that ended it before `maxJobs` (nothing queued, no capacity), or null. */
  denial: (LeaseDecision & { granted: false }) | null
}

function checkTtl(ctx: EngineContext, ttlS: number | undefined): number {
  const ttl = ttlS ?? ctx.config.leaseTtlS
  const { minTtlS, maxTtlS } = ctx.config
  if (!Number.isSafeInteger(ttl) || ttl < minTtlS || ttl > maxTtlS) {
    throw invalid(`ttl_sec: must be a whole number of seconds from ${minTtlS} to ${maxTtlS}`)
  }
  const { heartbeatGraceS } = ctx.config
  if (ttlS !== undefined && ttl + heartbeatGraceS < MIN_LEASE_WINDOW_S) {
    throw invalid(
      `ttl_sec: ${ttl} s with this host's heartbeat grace of ${heartbeatGraceS} s would expire before the heartbeat due a second later: ask for at least ${MIN_LEASE_WINDOW_S - heartbeatGraceS}`,
    )
  }
  return ttl
}

/**
 * Grants a lease on `job` to `workerId`, inside the caller's transaction: the lease (with a new
 * token and the next fence) that runs the job's next attempt, and the job's move to `to`.
 * Capacity has been checked by the caller.
 */
function grant(ctx: EngineContext, job: JobRow, workerId: string, ttlS: number, to: 'LEASED' | 'RUNNING'): Leased {
  const { lease, changes, event } = leaseFor(ctx, job, workerId, ttlS, to)
  insertLease(ctx, lease, job)
  return { lease, job: moveJob(ctx, job, to, changes, event) }
}

/** The lease that runs `job`'s next attempt for `workerId`, the job's columns it changes, and the event that records it. */
function leaseFor(ctx: EngineContext, job: JobRow, workerId: string, ttlS: number, to: 'LEASED' | 'RUNNING'): { lease: LeaseRow; changes: Partial<JobRow>; event: JobEvent } {
  const now = ctx.clock.now()
  const fence = nextFence(ctx)
  const lease: LeaseRow = {
    id: keyedId(fence),
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
    prev_fence: fenceOfLease(ctx, job.lease_id),
  }
  const attempt = lease.attempt
  return {
    lease,
    changes: { attempts: attempt, lease_id: lease.id, claimed_by: workerId, claim_expires_at: null, next_retry_at: null, started_at: job.started_at ?? now },
    event: {
      type: 'LEASE_GRANTED',
      entity: 'LEASE',
      entityId: lease.id,
      data: { state: to, worker_id: workerId, cost_units: lease.cost_units, attempt, fence, expires_at: lease.expires_at },
    },
  }
}

/**
 * the pull API request and the worker API claim: dequeue the head job this worker can take and lease
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
 * of the queue. A worker that holds a lease (the ones granted here included) or queue API claims
 * not yet leased takes no `unique` job.
 */
export function leaseHeads(
  ctx: EngineContext,
  capacity: CapacityStore,
  filter: WorkerFilter,
  options: { ttl_s?: number; to: 'LEASED' | 'RUNNING'; maxJobs: number },
): LeasedHeads {
  const ttl = checkTtl(ctx, options.ttl_s)
  return ctx.transact(() => {
    let figures = capacity.figures()
    const known = knownDenial(ctx, figures, filter)
    if (known) return { granted: [], denial: known }
    const retry_after_ms = ctx.config.denyRetryAfterMs
    const granted: LeasedHeads['granted'] = []
    const stop = (reason: string): LeasedHeads => ({ granted, denial: { granted: false, reason, retry_after_ms } })
    const now = ctx.clock.now()
    let holds: boolean | undefined
    const holdsLease = () => granted.length > 0 || (holds ??= holdsOrAwaitsLease(ctx, filter.worker_id, now))
    for (const job of eligibleJobs(ctx, filter, now, { holdsLease, wanted: options.maxJobs })) {
      const denial = capacityDenial(figures, job.cost_units)
      if (denial) return stop(denial)
      const leased = grant(ctx, job, filter.worker_id, ttl, options.to)
      granted.push({ granted: true, ...leased, message_id: leased.job.stream_message_id })
      figures = { ...figures, leased: figures.leased + job.cost_units, available: figures.available - job.cost_units }
      if (granted.length === options.maxJobs) return { granted, denial: null }
    }
    return stop(nothingToTake(ctx))
  })
}

const NO_JOBS = 'No jobs queued'
/**
 * Jobs are queued, and none of them may go to this worker now: its filters (job types, units,
 * streams, add-on) leave them out, their queues are paused, they wait for their time, or it holds
 * a lease and they are unique.
 */
const NONE_FOR_THIS_WORKER = 'No queued job this worker can take now'

/** Why a claim that took all it could was given no (more) jobs: none queued at all, or none for it. */
const nothingToTake = (ctx: EngineContext): string => (queuesWithQueuedJobs(ctx).length > 0 ? NONE_FOR_THIS_WORKER : NO_JOBS)

/** A claim that waits for work (dispatch keeps them, oldest first: src-main/dispatch/). */
export interface WaitingClaim {
  readonly filter: WorkerFilter
  readonly maxJobs: number
  readonly ttlS: number | undefined
}

/** The claims waiting for work, as {@link grantOnSubmit} asks them. */
export interface WaitingClaims {
  /** The claims waiting now, oldest first. */
  waiting(): readonly WaitingClaim[]
  /**
   * `claim` was granted `heads` inside the transaction in progress: it is answered once that
   * commits. Returns what undoes this, should the transaction or the submit's savepoint roll back.
   */
  leased(claim: WaitingClaim, heads: LeasedHeads): () => void
}

/**
 * A job being submitted while claims wait for work: leased in its own submit to the first of
 * them that would take it, the job written once, already RUNNING, beside its lease — where the
 * claims' turn at the commit (Engine.claimInCommit) would write it QUEUED, find it, and write it
 * again. Returns the job as written, or null when this cannot be certain to decide what that turn
 * would decide; the job is then written QUEUED and the commit offers it as always.
 *
 * Certain means: the job is eligible now, its queue is not paused and it fits the capacity; and
 * each claim, oldest first, meets nothing else to take in its streams (every range of them holds
 * no eligible job, from memory), so that the first one that can take this job takes it, and
 * only it. Anything else — another job a claim would meet first, a claim's invalid `ttl_s` — is
 * left to the commit. The answer to the claim is what its turn would have answered: this job,
 * and why there is no other if it asked for more than one.
 */
export function grantOnSubmit(ctx: EngineContext, capacity: CapacityStore, claims: WaitingClaims, job: JobRow): JobRow | null {
  const waiting = claims.waiting()
  if (waiting.length === 0) return null
  const now = ctx.clock.now()
  if (job.state !== 'QUEUED' || job.eligible_at > now || queuePaused(ctx, job.queue)) return null
  const figures = capacity.figures()
  if (figures.available <= 0 || capacityDenial(figures, job.cost_units)) return null
  for (const claim of waiting) {
    const { filter } = claim
    if (!knownEmpty(ctx, filter.queues ?? queuesWithQueuedJobs(ctx), now)) return null
    const inStreams = !filter.queues || filter.queues.includes(job.queue)
    if (!inStreams || !canTake(job, filter, () => holdsOrAwaitsLease(ctx, filter.worker_id, now))) continue
    let ttl: number
    try {
      ttl = checkTtl(ctx, claim.ttlS)
    } catch {
      return null
    }
    const { lease, changes, event } = leaseFor(ctx, job, filter.worker_id, ttl, 'RUNNING')
    const leased = insertMovedJob(ctx, job, 'RUNNING', changes, event)
    insertLease(ctx, lease, leased)
    const heads: LeasedHeads = {
      granted: [{ granted: true, lease, job: leased, message_id: leased.stream_message_id }],
      denial: claim.maxJobs === 1 ? null : { granted: false, reason: nothingToTake(ctx), retry_after_ms: ctx.config.denyRetryAfterMs },
    }
    ctx.onRollback(claims.leased(claim, heads))
    return leased
  }
  return null
}

/**
 * A claim's denial when it is known without a walk of the queue: no capacity is left, or the
 * transaction in progress already found every range of the streams the worker names empty
 * (pick.ts `knownEmpty`). Null when only a walk can tell. It writes nothing: a claim offered
 * inside a commit (Engine.claimInCommit) asks it before it opens a savepoint.
 */
export function knownDenial(ctx: EngineContext, figures: CapacityFigures, filter: WorkerFilter): LeasedHeads['denial'] {
  const reason = figures.available <= 0 ? capacityDenial(figures, 1)! : filter.queues && knownEmpty(ctx, filter.queues, ctx.clock.now()) ? NO_JOBS : null
  return reason === null ? null : { granted: false, reason, retry_after_ms: ctx.config.denyRetryAfterMs }
}

/**
 * the queue API claim: take up to `limit` jobs for this worker (no capacity yet; that is the
 * lease). A claimed job is one the worker is about to hold a lease on, so a `unique` job is
 * skipped once this claim took another, or while the worker holds a lease or earlier claims not
 * yet leased; and a unique job ends the claim, handed alone: its lease is denied while the
 * worker holds another, so no job of the same claim may be leased before it.
 */
export function claimJobs(ctx: EngineContext, filter: WorkerFilter, limit: number): JobRow[] {
  if (!Number.isSafeInteger(limit) || limit < 1) throw invalid('limit: must be a whole number of at least 1')
  return ctx.transact(() => {
    const now = ctx.clock.now()
    const claimed: JobRow[] = []
    let holds: boolean | undefined
    const aboutToHoldLease = () => claimed.length > 0 || (holds ??= holdsOrAwaitsLease(ctx, filter.worker_id, now))
    for (const job of eligibleJobs(ctx, filter, now, { holdsLease: aboutToHoldLease, wanted: limit })) {
      claimed.push(
        moveJob(
          ctx,
          job,
          'CLAIMED',
          { claimed_by: filter.worker_id, claim_expires_at: now + ctx.config.claimTtlS * 1000 },
          { type: 'JOB_CLAIMED', data: { state: 'CLAIMED', worker_id: filter.worker_id } },
        ),
      )
      if (claimed.length === limit || job.is_unique) break
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

/** Why a queue API lease request for a `unique` job is denied while its worker holds another lease, or null. */
function uniqueDenial(ctx: EngineContext, job: JobRow): string | null {
  const worker = job.claimed_by!
  return uniqueBarred(job, () => holdsActiveLease(ctx, worker)) ? `Job is unique and worker ${worker} already holds a lease` : null
}

/**
 * the queue API lease request for a claimed job. The lease belongs to the worker that claimed
 * it; a request naming another worker is refused (403) before anything changes. Approval makes the job RUNNING; denial leaves it LEASE_PENDING with `next_retry_at` as
 * advice, and keeps the claim alive while the worker keeps asking. A job of a paused queue is
 * denied, as for want of capacity, and so is a `unique` job while its worker holds another lease.
 */
export function requestLeaseForJob(ctx: EngineContext, capacity: CapacityStore, request: LeaseRequestForJob): JobLeaseDecision {
  const ttl = checkTtl(ctx, request.ttl_s)
  expireClaimIfDue(ctx, request.job_id)
  return ctx.transact(() => {
    const job = getJob(ctx, request.job_id)
    checkClaimer(job, request.worker_id)
    if (!LEASE_REQUEST_STATES.has(job.state as JobState)) {
      throw new EngineError('illegal_transition', `Job ${job.id} is ${shownState(job.state as JobState)}; a lease is requested from CLAIMED, PREPARING or LEASE_PENDING`)
    }
    if (request.cost_units !== undefined && request.cost_units !== job.cost_units) {
      throw new EngineError('cost_mismatch', `Job ${job.id} costs ${job.cost_units} units, not ${request.cost_units}`)
    }
    const denial = pausedDenial(ctx, job.queue) ?? uniqueDenial(ctx, job) ?? capacityDenial(capacity.figures(), job.cost_units)
    if (!denial) return { approved: true, ...grant(ctx, job, job.claimed_by!, ttl, 'RUNNING') }
    const now = ctx.clock.now()
    // The worker comes back while its claim still holds: a claim TTL shorter than twice the usual
    // wait (--claim-ttl-s 5) brings the wait down to half the TTL, or the claim lapsed every time.
    const retry_after_sec = Math.max(1, Math.min(ctx.config.leaseRetryAfterS, Math.floor(ctx.config.claimTtlS / 2)))
    const pending = moveJob(
      ctx,
      job,
      'LEASE_PENDING',
      { next_retry_at: now + retry_after_sec * 1000, claim_expires_at: now + ctx.config.claimTtlS * 1000 },
      { type: 'LEASE_DENIED', data: { state: 'LEASE_PENDING', reason: denial } },
    )
    return { approved: false, reason: denial, retry_after_sec, job: pending }
  })
}
