import type { JobRow } from '../../db/schema'
import type { CapacityFigures } from '../rules/capacity'
import { type JobState, WAITING_STATES } from '../rules/states'
import { type CapacityChange, checkCapacityChange, type CapacityStore } from '../memory/capacity-store'
import type { EngineContext } from '../memory/context'
import { waitingJobsCosting } from '../memory/job-tally'
import { recordJobEvent, SELECT_JOBS } from '../store/rows'

const WAITING_IN_SQL = `state IN (${[...WAITING_STATES].map((s) => `'${s}'`).join(', ')})`

/**
 * The operator changes total units and/or the busy rating (null = auto); an event records it,
 * and a lower total reports each waiting job it leaves unable ever to run.
 */
export function setCapacity(ctx: EngineContext, capacity: CapacityStore, change: CapacityChange): CapacityFigures {
  checkCapacityChange(change)
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
 */
function reportJobsOverCapacity(ctx: EngineContext, previousTotal: number, total: number): void {
  if (total >= previousTotal || waitingJobsCosting(ctx, total, previousTotal) === 0) return
  const jobs = ctx.all<JobRow>(`${SELECT_JOBS} WHERE ${WAITING_IN_SQL} AND cost_units > ? AND cost_units <= ? ORDER BY seq`, total, previousTotal)
  for (const job of jobs) {
    recordJobEvent(ctx, job, {
      type: 'JOB_EXCEEDS_CAPACITY',
      data: { state: job.state as JobState, cost_units: job.cost_units, total_units: total },
    })
  }
}
