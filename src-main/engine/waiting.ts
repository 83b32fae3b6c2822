import type { BlockerRow, JobRow } from '../db/schema'
import { type CapacityFigures, formatRating } from './capacity'
import type { CapacityStore } from './capacity-store'
import { iso } from './clock'
import type { EngineContext } from './context'
import { eligibleJobs } from './pick'
import { recordJobEvent, SELECT_JOBS } from './rows'
import { isScheduled } from './scheduled'
import { type JobState, WAITING_STATES } from './states'
import { shortId } from '../../src-shared/short-id'

/**
 * Why a job waits, in words, for the job views people read (GET /jobs/{id}, GET /jobs, the CLI
 * and the dashboard). Computed when a view is asked for, never on the claim/complete path: the
 * shared facts ({@link WaitingSituation}) are read once per view, then each job is a pure
 * function of its row and them.
 */

/** What every job's reason is read against, read once per view. */
export interface WaitingSituation {
  now: number
  capacity: CapacityFigures
  /**
   * The first eligible QUEUED job in the order dialects 001 and 002 take them (priority, then
   * the time each became eligible, over every queue): nothing behind it is leased before it.
   */
  head: JobRow | undefined
  /** The open blocker a BLOCKED job waits on. */
  blockerOf(jobId: string): BlockerRow | undefined
  /** The queues an operator paused. */
  paused: ReadonlySet<string>
}

const WAITING_IN_SQL = `state IN (${[...WAITING_STATES].map((s) => `'${s}'`).join(', ')})`

/** Reads the situation once: the capacity now, the head of the line, and a way to find a blocked job's blocker. */
export function readSituation(ctx: EngineContext, capacity: CapacityStore): WaitingSituation {
  const now = ctx.clock.now()
  return {
    now,
    capacity: capacity.figures(),
    // A worker that takes everything: the head for the workers that are not picky.
    head: eligibleJobs(ctx, { worker_id: '', gpu_available: true }, now).next().value ?? undefined,
    blockerOf: (jobId) =>
      ctx.one<BlockerRow>("SELECT * FROM blockers WHERE requester_job_id = ? AND state = 'OPEN' ORDER BY seq DESC LIMIT 1", jobId),
    paused: new Set(ctx.pausedQueues.all()),
  }
}

/** "needs 40 units; 10 available (busy rating 8 leaves 20 of 100 units, 10 leased)", or "(60 of 70 units leased)". */
function capacityShortfall(cost: number, c: CapacityFigures): string {
  const detail =
    c.usable < c.total_units
      ? `busy rating ${formatRating(c.busy_rating)} leaves ${c.usable} of ${c.total_units} units, ${c.leased} leased`
      : `${c.leased} of ${c.total_units} units leased`
  return `needs ${cost} units; ${Math.max(0, c.available)} available (${detail})`
}

/** "cost 500 exceeds total capacity 100": such a job can never be leased. */
const overCapacity = (job: Pick<JobRow, 'cost_units'>, c: CapacityFigures) => `cost ${job.cost_units} exceeds total capacity ${c.total_units}`

/** What a job's waiting reason reads of it: a stored row and a decoded job alike. */
export type WaitingJob = Pick<JobRow, 'id' | 'queue' | 'cost_units' | 'claimed_by' | 'next_retry_at' | 'eligible_at' | 'run_at'> & { state: string }

/** Why this job is not running yet, or null if it is not waiting (it runs, or it has ended). */
export function waitingReason(job: WaitingJob, s: WaitingSituation): string | null {
  const state = job.state as JobState
  if (!WAITING_STATES.has(state)) return null
  if (state === 'BLOCKED') {
    const blocker = s.blockerOf(job.id)
    const on = blocker ? ` on ${blocker.file}, held by ${blocker.holder_owner_id} (blocker ${shortId(blocker.id)})` : ''
    return `halted${on}; waits for an operator to retry, force release or cancel`
  }
  if (s.paused.has(job.queue)) {
    const when = isScheduled(job, s.now) ? `; scheduled for ${iso(job.run_at)}` : ''
    return `queue ${job.queue} is paused${when}; nothing is taken from it until it is resumed`
  }
  const c = s.capacity
  if (job.cost_units > c.total_units) return `${overCapacity(job, c)}; raise total_units or cancel the job`
  const fits = job.cost_units <= c.available
  if (state === 'CLAIMED' || state === 'PREPARING') {
    return fits ? `claimed by ${job.claimed_by}; waiting for its lease request` : `claimed by ${job.claimed_by}; ${capacityShortfall(job.cost_units, c)}`
  }
  if (state === 'LEASE_PENDING') {
    const again = job.next_retry_at === null ? '' : ` after ${iso(job.next_retry_at)}`
    return fits
      ? `capacity is free now; waiting for ${job.claimed_by} to ask for its lease again${again}`
      : `lease denied: ${capacityShortfall(job.cost_units, c)}; ${job.claimed_by} asks again${again}`
  }
  // QUEUED
  if (job.eligible_at > s.now) {
    if (job.next_retry_at !== null) return `retry not before ${iso(job.next_retry_at)}`
    return isScheduled(job, s.now) ? `scheduled for ${iso(job.run_at)}` : `not eligible before ${iso(job.eligible_at)}`
  }
  const head = s.head
  if (head === undefined || head.id === job.id) {
    return fits ? 'first in line; waiting for a worker to take it' : `first in line; ${capacityShortfall(job.cost_units, c)}`
  }
  if (head.cost_units > c.total_units) return `behind job ${shortId(head.id)}, whose ${overCapacity(head, c)}`
  if (head.cost_units > c.available) return `behind job ${shortId(head.id)}, which ${capacityShortfall(head.cost_units, c)}`
  return `waiting its turn behind job ${shortId(head.id)}`
}

/**
 * Reports the waiting jobs that a lower total leaves costing more than the whole capacity
 * (inside the capacity change's transaction): each gets a `JOB_EXCEEDS_CAPACITY` event, once,
 * when the total drops below its cost. Its job view then says so until the total is raised.
 */
export function reportJobsOverCapacity(ctx: EngineContext, previousTotal: number, total: number): void {
  if (total >= previousTotal || ctx.jobTally.waitingCosting(total, previousTotal) === 0) return
  const jobs = ctx.all<JobRow>(`${SELECT_JOBS} WHERE ${WAITING_IN_SQL} AND cost_units > ? AND cost_units <= ? ORDER BY seq`, total, previousTotal)
  for (const job of jobs) {
    recordJobEvent(ctx, job, {
      type: 'JOB_EXCEEDS_CAPACITY',
      data: { state: job.state as JobState, cost_units: job.cost_units, total_units: total },
    })
  }
}

/** How many waiting jobs cost more than the total capacity: they can never run until it is raised (counted in memory, job-tally.ts). */
export function countOverCapacity(ctx: EngineContext, totalUnits: number): number {
  return ctx.jobTally.committedWaitingCosting(totalUnits)
}
