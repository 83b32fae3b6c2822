import type { JobRow } from '../../db/schema'
import type { EngineContext } from '../memory/context'
import { iso } from '../rules/clock'
import { EngineError } from '../rules/errors'
import { type JobState, shownState } from '../rules/states'
import { getJob, updateJob } from '../store/rows'

/**
 * Delayed jobs. A submit's `run_at` or `delay_ms` (see `delayedUntil` in jobs.ts) becomes the
 * job's `eligible_at`, the key the pick path already orders and filters by, so a delayed job is
 * invisible to every claim until then and afterwards takes its place by priority and by the
 * time it became eligible. Waiting claims set their timer by `nextEligibleAt`.
 */

/** A QUEUED job still waiting for its `run_at`. */
export function isScheduled(job: Pick<JobRow, 'state' | 'run_at'>, now: number): boolean {
  return job.state === 'QUEUED' && job.run_at !== null && job.run_at > now
}

/**
 * Runs a delayed job now: it becomes eligible at once (its place in line is now) and its
 * `run_at` is cleared. `JOB_RUN_NOW` records the time it was scheduled for and who asked. A job
 * that is not waiting for its `run_at` answers 409 `not_scheduled`.
 */
export function runNow(ctx: EngineContext, jobId: string, requestedBy: string | null = null): JobRow {
  return ctx.transact(() => {
    const job = getJob(ctx, jobId)
    const now = ctx.clock.now()
    if (!isScheduled(job, now)) {
      // A retry's backoff is the retry policy's wait, not a time the submitter chose: run-now leaves it.
      const why = job.state !== 'QUEUED' ? '' : job.eligible_at > now ? ` and waits out its retry's backoff until ${iso(job.eligible_at)}` : ' and eligible'
      throw new EngineError('not_scheduled', `Job ${jobId} is ${shownState(job.state as JobState)}${why}; only a QUEUED job waiting for its run_at can be run now`)
    }
    return updateJob(
      ctx,
      job,
      { eligible_at: now, run_at: null },
      { type: 'JOB_RUN_NOW', data: { state: 'QUEUED', run_at: job.run_at, requested_by: requestedBy } },
    )
  })
}
