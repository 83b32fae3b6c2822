import type { JobRow } from '../../db/schema'
import type { CapacityFigures } from '../rules/capacity'
import { type JobState, WAITING_STATES } from '../rules/states'
import { type CapacityChange, checkCapacityChange, type CapacityStore, totalUnits } from '../memory/capacity-store'
import type { EngineContext } from '../memory/context'
import { waitingJobsCosting } from '../memory/job-tally'
import { type JobEvent, recordJobEvent, SELECT_JOBS } from '../store/rows'

const WAITING_IN_SQL = `state IN (${[...WAITING_STATES].map((s) => `'${s}'`).join(', ')})`

/**
 * The operator changes total units and/or the busy rating (null = auto); an event records it,
 * and a lower total reports each waiting job it leaves unable ever to run. A change to the
 * values in force is answered with the figures and records nothing: the event log lists changes.
 */
export function setCapacity(ctx: EngineContext, capacity: CapacityStore, change: CapacityChange): CapacityFigures {
  checkCapacityChange(change)
  if (!capacity.changes(change)) return capacity.figures()
  ctx.transact(() => {
    const previous = capacity.change(change)
    reportJobsOverCapacity(ctx, previous.total_units, capacity.totalUnits())
  })
  return capacity.figures()
}

/**
 * Reports the waiting jobs that a lower total leaves costing more than the whole capacity
 * (inside the capacity change's transaction): each gets a `JOB_EXCEEDS_CAPACITY` event, once,
 * when the total drops below its cost. Its job view then says so until the total is raised.
 * Only the costs the drop strands (above the new total, within the old) are reported: a job
 * already costing more than the old total was reported by an earlier drop or as it returned to
 * the line ({@link reportOnReturn}).
 */
function reportJobsOverCapacity(ctx: EngineContext, previousTotal: number, total: number): void {
  if (total >= previousTotal || waitingJobsCosting(ctx, total, previousTotal) === 0) return
  const jobs = ctx.all<JobRow>(`${SELECT_JOBS} WHERE ${WAITING_IN_SQL} AND cost_units > ? AND cost_units <= ? ORDER BY seq`, total, previousTotal)
  for (const job of jobs) recordJobEvent(ctx, job, exceedsCapacity(job.state as JobState, job.cost_units, total))
}

/**
 * What a job returning to the line (a requeue: its lease expired, its attempt failed and may be
 * retried, an operator answered its blocker with a retry or a force release) adds to the events
 * of its move: `JOB_EXCEEDS_CAPACITY` when it costs more than the total, as a drop of the total
 * reports the jobs that wait ({@link reportJobsOverCapacity}); nothing when it fits. A job that
 * ran through a drop was not reported by it, so it is reported here, and once per return: each
 * return is a time it becomes stuck. Two numbers in memory compared: the requeue reads nothing.
 */
export function reportOnReturn(ctx: EngineContext, job: JobRow, state: JobState): JobEvent[] {
  const total = totalUnits(ctx)
  return job.cost_units > total ? [exceedsCapacity(state, job.cost_units, total)] : []
}

/** The report of a job (in `state`) that costs more than the whole capacity: no lease can ever take it. */
function exceedsCapacity(state: JobState, costUnits: number, total: number): JobEvent {
  return { type: 'JOB_EXCEEDS_CAPACITY', data: { state, cost_units: costUnits, total_units: total } }
}
