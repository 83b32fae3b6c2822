import { type JobRow, STATE_SEQ_CLAUSE, STATES_OUTSIDE_STATE_SEQ } from '../../db/schema'
import type { CapacityStore } from '../memory/capacity-store'
import type { EngineContext } from '../memory/context'
import { EngineError, invalid } from '../rules/errors'
import { cancel } from './jobs'
import { newestEventId } from '../store/event-log'
import { getJob } from '../store/rows'
import { deleteFinishedJobs } from './prune'
import { retryJob } from './retry'
import { CANCEL_AT_ONCE_STATES, DEAD_LETTER_STATES, JOB_STATES, type JobState, LEASED_STATES, RETRYABLE_STATES, TERMINAL_STATES } from '../rules/states'

/**
 * Bulk operations: retry, cancel or purge every job a filter selects. Each is its one-job verb
 * applied job by job, so the rules stay in one place; a call works in steps of at most
 * {@link BULK_STEP} jobs, one transaction each, so it never holds the write lock for long.
 * The jobs a call can touch are those that exist when it starts (their `seq` is at most the
 * largest then): a job submitted meanwhile is never swept up.
 */

export const BULK_ACTIONS = ['retry', 'cancel', 'purge'] as const
export type BulkAction = (typeof BULK_ACTIONS)[number]

/** The states each action applies to. */
export const BULK_STATES: Readonly<Record<BulkAction, readonly JobState[]>> = {
  retry: JOB_STATES.filter((s) => RETRYABLE_STATES.has(s)),
  cancel: JOB_STATES.filter((s) => CANCEL_AT_ONCE_STATES.has(s) || LEASED_STATES.has(s)),
  purge: JOB_STATES.filter((s) => TERMINAL_STATES.has(s)),
}

/** Which jobs: every given field must match; no field means every job the action applies to. */
export interface BulkFilter {
  states?: JobState[]
  queue?: string
  job_type?: string
  addon_id?: string
  /** `true`: only the jobs that ran out of attempts (FAILED or TIMEOUT with `dead_letter`); `false`: only the others. */
  dead_letter?: boolean
}

/** A bulk call about to run: what it does, to which states, and how far its jobs go. */
export interface BulkPlan {
  action: BulkAction
  filter: BulkFilter
  /** The states walked, in this order. */
  states: readonly JobState[]
  /** Count only, change nothing. */
  dryRun: boolean
  /** Who asked, recorded on each retried or canceled job. */
  requestedBy: string | null
  /** The largest `seq` when the call started. */
  lastSeq: number
  /**
   * Retry and purge: only jobs that finished at or before this instant (epoch ms). A dry run
   * counts up to its own start and says when that was.
   */
  finishedBy: number | null
  /**
   * Retry and purge: only jobs whose newest event is this one of the log or an older one — jobs
   * unchanged since. A dry run counts up to the newest event at its start and says which that
   * was, so the action it was counted for, given it, touches exactly the jobs counted: none that
   * finished after, not even in the count's own millisecond (event ids are never given twice).
   */
  countedThrough: number | null
  /** Where the first step starts; null when there are no jobs at all. */
  first: BulkCursor | null
}

/** Where the next step starts: the state (an index into `plan.states`) and the `seq` after which to look. */
export interface BulkCursor {
  state: number
  afterSeq: number
}

export interface BulkStep {
  matched: number
  changed: number
  /** A retry's: the jobs it refused because each costs more than the total capacity, in the order walked. */
  overCapacity: string[]
  next: BulkCursor | null
}

/** Rows of `seq` one step reads at most, so a state with few matches is still walked in short steps. */
const SEQ_WINDOW = 50_000

/** The most jobs one step of a bulk call finds and changes, in one transaction. */
export const BULK_STEP = 500

const isEmpty = (filter: BulkFilter) =>
  (filter.states === undefined || filter.states.length === 0) &&
  filter.queue === undefined &&
  filter.job_type === undefined &&
  filter.addon_id === undefined &&
  filter.dead_letter === undefined

/**
 * Checks a bulk call and plans it. The states must be ones the action applies to (400 naming
 * `states`), and `dead_letter: true` must leave one to walk (a cancel of dead letters is refused:
 * they have finished); an empty filter is refused unless `all` says so, as a guard against
 * sweeping every job by mistake (a retry of every job would run again the ones canceled on purpose).
 */
export function planBulk(
  ctx: EngineContext,
  action: BulkAction,
  request: { filter: BulkFilter; all?: boolean; dry_run?: boolean; requested_by?: string | null; finished_by?: number; counted_through?: number },
): BulkPlan {
  const applies = BULK_STATES[action]
  const given = request.filter.states ?? []
  const wrong = given.filter((s) => !applies.includes(s))
  if (wrong.length > 0) throw invalid(`states: ${action} applies to ${applies.join(', ')}, not ${wrong.join(', ')}`)
  const states = walked(applies, given, request.filter.dead_letter)
  if (states.length === 0) {
    // Only dead_letter: true can leave no state: of the states asked for, none holds a dead-lettered job.
    throw invalid(`dead_letter: dead-lettered jobs are ${DEAD_LETTER_STATES.join(' or ')}, and ${action} here applies to ${(given.length > 0 ? given : applies).join(', ')}`)
  }
  if (isEmpty(request.filter) && request.all !== true) {
    throw new EngineError(
      'invalid_request',
      `states, queue, job_type, addon_id, dead_letter: an empty filter would ${action} every job; give a filter, or all: true to mean it`,
    )
  }
  for (const field of ['finished_by', 'counted_through'] as const) {
    if (request[field] !== undefined && action === 'cancel') throw invalid(`${field}: only retry and purge act on finished jobs`)
  }
  const lastSeq = ctx.one<{ n: number | null }>('SELECT MAX(seq) AS n FROM jobs')!.n ?? 0
  const counts = request.dry_run === true && action !== 'cancel'
  return {
    action,
    filter: request.filter,
    states,
    dryRun: request.dry_run === true,
    requestedBy: request.requested_by ?? null,
    lastSeq,
    finishedBy: request.finished_by ?? (counts ? ctx.clock.now() : null),
    countedThrough: request.counted_through ?? (counts ? newestEventId(ctx) : null),
    first: lastSeq > 0 ? { state: 0, afterSeq: 0 } : null,
  }
}

const isDeadLetterState = (state: JobState) => (DEAD_LETTER_STATES as readonly JobState[]).includes(state)

/** The states a call walks: those given (else every one the action applies to), and only the dead-letter states when it asks for dead letters. */
function walked(applies: readonly JobState[], given: readonly JobState[], deadLetter: boolean | undefined): readonly JobState[] {
  const states = given.length > 0 ? applies.filter((s) => given.includes(s)) : applies
  return deadLetter === true ? states.filter(isDeadLetterState) : states
}

/** A job a bulk step found: where it is in `seq` order, and what a retry checks of it. */
type Matched = Pick<JobRow, 'seq' | 'id' | 'cost_units'>

/**
 * The ids (in `seq` order) of the jobs in `state` that match the filter, with a `seq` above
 * `afterSeq` and at most `untilSeq`, at most {@link BULK_STEP} of them. Each state is read
 * the way its index allows: LEASED and RUNNING through the ACTIVE leases, DONE by `seq` (the
 * table's own order), the others on jobs_state_seq.
 */
function matching(ctx: EngineContext, state: JobState, plan: BulkPlan, afterSeq: number, untilSeq: number): Matched[] {
  const { filter } = plan
  const conditions = ['state = ?', 'seq > ?', 'seq <= ?']
  const params: unknown[] = [state, afterSeq, untilSeq]
  if (plan.finishedBy !== null) {
    conditions.push('finished_at <= ?')
    params.push(plan.finishedBy)
  }
  if (plan.countedThrough !== null) {
    // A job with no event since migration 0013 has none newer than any count.
    conditions.push('(last_event_id IS NULL OR last_event_id <= ?)')
    params.push(plan.countedThrough)
  }
  if (LEASED_STATES.has(state)) conditions.push("id IN (SELECT job_id FROM leases WHERE state = 'ACTIVE')")
  else if (!STATES_OUTSIDE_STATE_SEQ.includes(state)) conditions.push(STATE_SEQ_CLAUSE)
  for (const field of ['queue', 'job_type', 'addon_id'] as const) {
    if (filter[field] === undefined) continue
    conditions.push(`${field} = ?`)
    params.push(filter[field])
  }
  if (filter.dead_letter !== undefined) {
    conditions.push('dead_letter = ?')
    params.push(filter.dead_letter ? 1 : 0)
  }
  return ctx.all(`SELECT seq, id, cost_units FROM jobs WHERE ${conditions.join(' AND ')} ORDER BY seq LIMIT ${BULK_STEP}`, ...params)
}

/**
 * One step of a bulk call: the next matching jobs of one state (at most {@link BULK_STEP},
 * within a window of `seq`), each retried, canceled or purged as its own verb would do it.
 * `matched` counts the jobs the step found, `changed` those it changed: a job whose retry is
 * refused (it costs more than the capacity: named in `overCapacity`), one already
 * cancel-requested, or one that moved on meanwhile is matched but not changed. A dry run only counts, and names the jobs a retry would refuse for their cost. Returns where the next step
 * starts, or null after the last. Runs as its own transaction: call it outside any.
 */
export function bulkStep(ctx: EngineContext, capacity: CapacityStore, plan: BulkPlan, cursor: BulkCursor): BulkStep {
  const state = plan.states[cursor.state]!
  const untilSeq = Math.min(cursor.afterSeq + SEQ_WINDOW, plan.lastSeq)
  const overCapacity: string[] = []
  const apply = (found: Matched[]): number => {
    if (plan.dryRun) {
      // A dry run changes nothing, but names the jobs a retry would refuse for their cost, as the retry itself would.
      if (plan.action === 'retry') for (const job of found) if (job.cost_units > capacity.totalUnits()) overCapacity.push(job.id)
      return 0
    }
    if (found.length === 0) return 0
    if (plan.action === 'purge') return deleteFinishedJobs(ctx, found.map((job) => job.id)).length
    return ctx.transact(() => {
      let changed = 0
      for (const job of found) {
        const settled = ctx.settle(() => change(ctx, capacity, plan, job.id))
        if (settled.ok) changed += settled.value ? 1 : 0
        else if (!(settled.error instanceof EngineError)) throw settled.error // not a refusal: the step fails whole
        else if (settled.error.code === 'cost_exceeds_capacity') overCapacity.push(job.id) // the one refusal the operator can act on: say which
      }
      return changed
    })
  }
  const found = matching(ctx, state, plan, cursor.afterSeq, untilSeq)
  const changed = apply(found)
  const full = found.length === BULK_STEP
  const next: BulkCursor | null = full
    ? { state: cursor.state, afterSeq: found[found.length - 1]!.seq }
    : untilSeq < plan.lastSeq
      ? { state: cursor.state, afterSeq: untilSeq }
      : cursor.state + 1 < plan.states.length
        ? { state: cursor.state + 1, afterSeq: 0 }
        : null
  return { matched: found.length, changed, overCapacity, next }
}

/** Retries or cancels one job; whether it changed (a cancel-requested job asked again does not). */
function change(ctx: EngineContext, capacity: CapacityStore, plan: BulkPlan, jobId: string): boolean {
  if (plan.action === 'retry') {
    retryJob(ctx, jobId, capacity.totalUnits(), plan.requestedBy)
    return true
  }
  const before = getJob(ctx, jobId)
  const after = cancel(ctx, jobId, plan.requestedBy === null ? 'bulk cancel' : `bulk cancel by ${plan.requestedBy}`, plan.requestedBy)
  return before.state !== after.state || before.cancel_requested !== after.cancel_requested
}
