import type { BlockerRow, FileContentionRow, JobRow } from '../../db/schema'
import type { CapacityFigures } from '../rules/capacity'
import type { CapacityStore } from '../memory/capacity-store'
import type { EngineContext } from '../memory/context'
import { eligibleJobs, holdsActiveLease } from './pick'
import { isScheduled } from './scheduled'
import { type JobState, LEASED_STATES, WAITING_STATES } from '../rules/states'
import { shortId } from '../../../src-shared/short-id'
import { counted } from '../../../src-shared/plural'
import { heldPath, holderName, ownerName } from '../../../src-shared/file-owner'

/**
 * Why a job waits, for the job views people read (GET /jobs/{id}, GET /jobs, the CLI and the
 * dashboard): a reason in words, which names no time, and the time the wait ends by itself
 * when there is one, kept apart so each reader shows it in its own format. Computed when a view
 * is asked for, never on the claim/complete path: the shared facts ({@link WaitingSituation})
 * are read once per view, then each job is a pure function of its row and them.
 */

/** Why a job is not running yet. */
export interface Waiting {
  /** In words, with no time in them (a reader formats {@link until} its own way). */
  reason: string
  /** When the wait ends by itself (a retry's not-before time, a scheduled run time, a file's one retry), epoch ms; null when only something else ends it. */
  until: number | null
}

/** A file a running job's lease was refused: who holds it, and when the one retry is due. */
export type FileWait = Pick<FileContentionRow, 'file' | 'holder_file' | 'retry_at'> & {
  holder: string | null
  /** Whom a force release handed the path to, and until when, when no lease refused it. */
  handed_to: string | null
  handed_until: number | null
}

/** Of a waiting job, what decides which workers take it. */
export interface WaitingJobNeeds {
  queue: string
  job_type: string
  addon_id: string | null
  cost_units: number
  /** Its `constraints.gpu_required`: only a worker with a GPU takes it. */
  gpu_required: boolean
}

/**
 * How a worker walks a queue's line: what it skips. One without a GPU skips the jobs that need
 * one; one that runs only some job types skips the others (null: it runs every type); one that
 * asks for one add-on's jobs skips the rest (null: it takes any add-on's, and jobs of none); one
 * that takes no job above some units skips the larger ones (null: it takes any size).
 */
export interface Walk {
  gpu: boolean
  jobTypes: readonly string[] | null
  addon: string | null
  maxUnits: number | null
}

/** The walk of a worker that may take anything: every job of the queue stands in its line. */
export const WHOLE_LINE: Walk = { gpu: true, jobTypes: null, addon: null, maxUnits: null }

/**
 * What keeps every worker at hand from taking a job, in the order a worker's request is matched
 * against it: the job's queue, its type, its add-on, its size in units, its need of a GPU.
 */
export type NobodyTakes = 'queue' | 'job_type' | 'addon' | 'units' | 'gpu'

/** What the host knows of the workers at hand (its worker directory), which a job's reason reads. */
export interface WorkersAtHand {
  /** What keeps every worker at hand from taking this job, if anything does: the last of {@link NobodyTakes} that some worker passes. */
  nobodyTakes(job: WaitingJobNeeds): NobodyTakes | null
  /**
   * The walks of the workers at hand that take this job, each once, the ones that skip the
   * most first (no GPU before a GPU, then one add-on before any, then some job types before
   * every type, then a limit of units before none); empty when none is known.
   */
  walks(job: WaitingJobNeeds): Walk[]
}

/** No worker known: every job waits for any worker, in its place among all the jobs of its queue. */
export const NO_WORKERS_KNOWN: WorkersAtHand = { nobodyTakes: () => null, walks: () => [] }

/** What every job's reason is read against, read once per view. */
export interface WaitingSituation {
  now: number
  capacity: CapacityFigures
  /**
   * The first eligible QUEUED job of a queue, in the order a worker takes them (priority, then the
   * time each became eligible), as a worker walks it ({@link Walk}): one without a GPU skips the
   * jobs that need one, one that runs some job types the others. Nothing of that queue is leased
   * to such a worker before it.
   */
  headOf(queue: string, walk: Walk): JobRow | undefined
  /** The open blocker a BLOCKED job waits on. */
  blockerOf(jobId: string): BlockerRow | undefined
  /** The file a running job's lease was refused, waiting for its one retry (the file gate's wait). */
  contentionOf(leaseId: string): FileWait | undefined
  /** The queues an operator paused. */
  paused: ReadonlySet<string>
  /** Whether the worker holds an ACTIVE lease (a lease request of its `unique` job is then denied). */
  holdsLease(workerId: string): boolean
  /** The workers at hand: which take a job, and how they walk its line. */
  workers: WorkersAtHand
}

/** The open blocker a BLOCKED job waits on (its latest, should there be more). */
export function openBlockerOf(ctx: EngineContext, jobId: string): BlockerRow | undefined {
  return ctx.one<BlockerRow>("SELECT * FROM blockers WHERE requester_job_id = ? AND state = 'OPEN' ORDER BY seq DESC LIMIT 1", jobId)
}

/** Reads the situation once: the capacity now, the head of the line (when a job asks), and ways to find a job's blocker or refused file. */
export function readSituation(ctx: EngineContext, capacity: CapacityStore, workers: WorkersAtHand): WaitingSituation {
  const now = ctx.clock.now()
  const heads = new Map<string, JobRow | undefined>()
  let fileWaits: Map<string, FileWait> | undefined
  return {
    now,
    capacity: capacity.figures(),
    // The line of one queue, as a worker that takes that queue walks it: a stream worker takes
    // its queues one after another, and the local pool takes only its own (`default` unless
    // configured), so another queue's head says nothing of when this job runs. The pick's own
    // walk, with the pick's filter, so the line skips what a worker skips. Read once per queue
    // and walk, and only when a QUEUED job asks, so a page of running jobs does not pay for it.
    headOf(queue, { gpu, jobTypes, addon, maxUnits }) {
      const key = JSON.stringify([queue, gpu, jobTypes, addon, maxUnits])
      if (!heads.has(key)) {
        const filter = { worker_id: '', gpu_available: gpu, accept_job_types: jobTypes && [...jobTypes], addon_id: addon, max_units: maxUnits, queues: [queue] }
        heads.set(key, eligibleJobs(ctx, filter, now).next().value ?? undefined)
      }
      return heads.get(key)
    },
    blockerOf: (jobId) => openBlockerOf(ctx, jobId),
    // Every pending refusal at once, when a running job first asks: a handful of rows (each is
    // one denied acquire, gone at its retry), where a page of running jobs would ask 500 times.
    contentionOf: (leaseId) => {
      fileWaits ??= new Map(
        ctx
          .all<FileWait & { lease_id: string }>(
            `SELECT c.lease_id, c.file, c.holder_file, c.retry_at, f.owner_id AS holder, h.owner_id AS handed_to, h.until AS handed_until FROM file_contentions c
               LEFT JOIN file_leases f ON f.file = COALESCE(c.holder_file, c.file) AND f.state = 'ACTIVE'
               LEFT JOIN file_handovers h ON h.file = COALESCE(c.holder_file, c.file)
             WHERE c.lease_id IS NOT NULL ORDER BY c.retry_at DESC`,
          )
          .map(({ lease_id, ...wait }) => [lease_id, wait]),
      )
      return fileWaits.get(leaseId)
    },
    paused: new Set(ctx.pausedQueues.all()),
    holdsLease: (workerId) => holdsActiveLease(ctx, workerId),
    workers,
  }
}

/**
 * "needs 40 units; 10 available (busy rating 8 leaves 20 of 100 units, 10 leased)", or "(60 of 70
 * units leased)"; "none available" when the leases hold all the usable units or more (a rating
 * that rose under running work: the capacity reads then say how far below zero).
 */
function capacityShortfall(cost: number, c: CapacityFigures): string {
  const detail =
    c.usable < c.total_units
      ? `busy rating ${c.busy_rating} leaves ${c.usable} of ${c.total_units} units, ${c.leased} leased`
      : `${c.leased} of ${c.total_units} units leased`
  return `needs ${counted(cost, 'unit')}; ${c.available > 0 ? c.available : 'none'} available (${detail})`
}

/** "cost 500 exceeds total capacity 100": such a job can never be leased. */
const overCapacity = (job: Pick<JobRow, 'cost_units'>, c: CapacityFigures) => `cost ${job.cost_units} exceeds total capacity ${c.total_units}`

/** What a job's waiting reason reads of it: a stored row and a decoded job alike. */
export type WaitingJob = Pick<JobRow, 'id' | 'queue' | 'job_type' | 'addon_id' | 'cost_units' | 'claimed_by' | 'lease_id' | 'next_retry_at' | 'eligible_at' | 'run_at'> & {
  state: string
  unique: boolean
  constraints: Readonly<Record<string, boolean>>
}

/** A wait that only something else ends (a worker, capacity, an operator). */
const open = (reason: string): Waiting => ({ reason, until: null })

/**
 * Why this job is not running yet, or null if it is not waiting (it runs, or it has ended). A
 * running job waits too while the file gate holds it: its lease was refused a file and it waits
 * for its one retry. The reasons read on with "until <time>" where there is one.
 */
export function waitingFor(job: WaitingJob, s: WaitingSituation): Waiting | null {
  const state = job.state as JobState
  if (LEASED_STATES.has(state)) {
    const contention = job.lease_id === null ? undefined : s.contentionOf(job.lease_id)
    if (!contention) return null
    // The refusal stands until the one retry, even once the holder has let go.
    const heldFile = contention.holder_file ?? contention.file
    const handed = contention.handed_to !== null && contention.handed_until! > s.now
    // A file kept for a requester is no file it holds: a path refused for it names the file kept.
    const kept = heldFile === contention.file ? ', kept' : ` while ${heldFile} is kept`
    const held =
      contention.holder !== null
        ? `, held by ${ownerName(contention.holder)}${heldPath(contention.file, heldFile)}`
        : handed
          ? `${kept} for ${ownerName(contention.handed_to!)} after a force release`
          : ', since let go'
    return { reason: `refused file ${contention.file}${held}; waits to try it again`, until: contention.retry_at }
  }
  if (!WAITING_STATES.has(state)) return null
  if (state === 'BLOCKED') {
    const blocker = s.blockerOf(job.id)
    const on = blocker ? ` on ${blocker.file}, held by ${holderName({ owner_id: blocker.holder_owner_id, job_id: blocker.holder_job_id })}${heldPath(blocker.file, blocker.holder_file ?? blocker.file)} (blocker ${shortId(blocker.id)})` : ''
    return open(`halted${on}; waits for an operator to retry, force release or cancel`)
  }
  if (s.paused.has(job.queue)) {
    // Paused, the scheduled time does not end the wait: only a resume does.
    const when = isScheduled(job, s.now) ? ' (and it is scheduled for later)' : ''
    return open(`queue ${job.queue} is paused${when}; nothing is taken from it until it is resumed`)
  }
  const c = s.capacity
  if (job.cost_units > c.total_units) return open(`${overCapacity(job, c)}; raise total_units or cancel the job`)
  const fits = job.cost_units <= c.available
  if (state === 'CLAIMED' || state === 'PREPARING') {
    return open(fits ? `claimed by ${job.claimed_by}; waiting for its lease request` : `claimed by ${job.claimed_by}; ${capacityShortfall(job.cost_units, c)}`)
  }
  if (state === 'LEASE_PENDING') {
    const asks = job.next_retry_at === null ? 'asks again' : 'waits to ask again'
    if (job.unique && s.holdsLease(job.claimed_by!)) {
      return { reason: `lease denied: the job is unique and ${job.claimed_by} holds another lease; ${job.claimed_by} ${asks}`, until: job.next_retry_at }
    }
    return {
      reason: fits
        ? `capacity is free now; ${job.claimed_by} ${asks} for its lease`
        : `lease denied: ${capacityShortfall(job.cost_units, c)}; ${job.claimed_by} ${asks}`,
      until: job.next_retry_at,
    }
  }
  // QUEUED
  if (job.eligible_at > s.now) {
    if (job.next_retry_at !== null) return { reason: 'backing off before its retry', until: job.next_retry_at }
    return isScheduled(job, s.now) ? { reason: 'scheduled', until: job.run_at } : { reason: 'not eligible yet', until: job.eligible_at }
  }
  // A worker takes only its queues and the job types it has handlers for: while none takes this job it is in no line.
  const needs: WaitingJobNeeds = {
    queue: job.queue,
    job_type: job.job_type,
    addon_id: job.addon_id,
    cost_units: job.cost_units,
    gpu_required: job.constraints.gpu_required === true,
  }
  const nobody = s.workers.nobodyTakes(needs)
  if (nobody === 'queue') return open(`no worker connected takes queue ${job.queue}; it waits for one that does`)
  if (nobody === 'job_type') return open(`no worker connected runs job type ${job.job_type}; it waits for one that does`)
  // Of the workers that take its queue and run its type, none takes its add-on's jobs, or none of those a job its size.
  if (nobody === 'addon') {
    const whose = job.addon_id === null ? 'jobs without an add-on (each asks for one add-on\'s)' : `add-on ${job.addon_id}'s jobs`
    return open(`no worker connected that runs job type ${job.job_type} takes ${whose}; it waits for one that does`)
  }
  if (nobody === 'units') return open(`no worker connected takes a job of ${counted(job.cost_units, 'unit')}; it waits for one that does`)
  // Its line as each worker that takes it walks it: it is first when it heads one of them (that
  // worker takes it next), and else waits behind the head of the walk that skips the most.
  const walks = s.workers.walks(needs)
  const heads = (walks.length > 0 ? walks : [WHOLE_LINE]).map((walk) => s.headOf(job.queue, walk))
  const first = heads.some((h) => h === undefined || h.id === job.id)
  const head = heads[0]!
  // Every worker asking skips it: its place in line is all it has until one with a GPU asks.
  if (nobody === 'gpu') return open(`${first ? 'first in line' : `behind job ${shortId(head.id)}`}; needs a worker with a GPU, and none asking has one`)
  if (first) {
    return open(fits ? 'first in line; waiting for a worker to take it' : `first in line; ${capacityShortfall(job.cost_units, c)}`)
  }
  if (head.cost_units > c.total_units) return open(`behind job ${shortId(head.id)}, whose ${overCapacity(head, c)}`)
  if (head.cost_units > c.available) return open(`behind job ${shortId(head.id)}, which ${capacityShortfall(head.cost_units, c)}`)
  return open(`waiting its turn behind job ${shortId(head.id)}`)
}

/** How many waiting jobs cost more than the total capacity: they can never run until it is raised (counted in memory, job-tally.ts). */
export function countOverCapacity(ctx: EngineContext, totalUnits: number): number {
  return ctx.jobTally.committedWaitingCosting(totalUnits)
}
