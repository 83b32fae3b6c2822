import type { JobRow } from '../../db/schema'
import type { EngineContext } from '../memory/context'
import { EngineError } from '../rules/errors'
import { jobCostExceedsCapacity } from './jobs'
import { getJob, moveJob } from '../store/rows'
import { type JobState, RETRYABLE_STATES, shownState } from '../rules/states'
import { nextStreamMessageId } from '../store/streams'
import { openBlockerOf } from '../reads/waiting'

/**
 * An operator's retry: a FAILED, TIMEOUT (dead-lettered) or CANCELED job goes back to QUEUED as
 * a new run, eligible at once. Its history stays: its attempts and events are kept, and the
 * next attempt is numbered after the last. The new run gets a fresh attempt budget — as many
 * attempts as the job was submitted with — so `max_attempts` grows to `attempts` plus that
 * budget. The last run's outcome (result, error, note, progress) is cleared from the job and
 * lives on in its attempts and events. `JOB_RETRIED` records who asked (`requested_by`).
 * A DONE job, or one that has not finished, answers 409; a job costing more than the total
 * capacity (`totalUnits`) is refused, as its submit would be.
 */
export function retryJob(ctx: EngineContext, jobId: string, totalUnits: number, requestedBy: string | null = null): JobRow {
  return ctx.transact(() => {
    const job = getJob(ctx, jobId)
    const from = job.state as JobState
    if (!RETRYABLE_STATES.has(from)) {
      throw new EngineError('illegal_transition', `Job ${jobId} is ${shownState(from)}; ${whyNotRetried(ctx, job)}`)
    }
    if (job.cost_units > totalUnits) throw jobCostExceedsCapacity(job.cost_units, totalUnits)
    const now = ctx.clock.now()
    const messageId = nextStreamMessageId(ctx)
    const max_attempts = job.attempts + job.attempt_budget
    return moveJob(
      ctx,
      job,
      'QUEUED',
      {
      max_attempts,
      eligible_at: now,
      run_at: null,
      next_retry_at: null,
      claimed_by: null,
      claim_expires_at: null,
      cancel_requested: 0,
      dead_letter: 0,
      final_status: null,
      result: null,
      error: null,
      metrics: null,
      progress: null,
      note: null,
      started_at: null,
      finished_at: null,
      // A new delivery on the job's stream (its last one was acknowledged when it ended).
      stream_message_id: messageId,
      },
      {
        type: 'JOB_RETRIED',
        data: { state: 'QUEUED', from, requested_by: requestedBy, attempts: job.attempts, max_attempts, message_id: messageId },
      },
    )
  })
}

/** Why an operator's retry does not apply to `job`, and what does: a halted job's blocker is answered instead. */
function whyNotRetried(ctx: EngineContext, job: JobRow): string {
  if (job.state === 'DONE') return 'a job that succeeded is not retried (submit it again)'
  const blocker = job.state === 'BLOCKED' ? openBlockerOf(ctx, job.id) : undefined
  if (blocker) return `it is halted on ${blocker.file}: answer its blocker ${blocker.id} to run it again (retry: POST /api/blockers/${blocker.id}/resolve, leasehold blockers resolve)`
  return 'only a FAILED, TIMEOUT or CANCELED job is retried'
}
