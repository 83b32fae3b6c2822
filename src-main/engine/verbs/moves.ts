import type { JobRow } from '../../db/schema'
import type { EngineContext } from '../memory/context'
import { moveJob } from '../store/rows'
import type { JobState } from '../rules/states'
import { nextStreamMessageId } from '../store/streams'
import { reportOnReturn } from './capacity'

/**
 * The two moves of a job that several verbs make, each written once: back to the queue (after
 * a failed or expired attempt, or an operator's answer to a blocker), and canceled at once (by
 * a cancel, or an operator's answer to a blocker).
 */

/**
 * The progress and note a job is left with when it waits again (a requeue, a lapsed claim, a
 * blocker's halt): none, as they told of the attempt or claim that ended; its errors stay on its
 * attempt.
 */
export const NOTHING_SAID = { progress: null, note: null } as const satisfies Partial<JobRow>

/**
 * Puts a job back in the queue, eligible at `retryAt` (the end of a backoff) or, if null, now,
 * with no progress or note, and a new stream message: the message of the attempt that ended is acknowledged, and the new
 * one waits for the next delivery. `changes` are any other columns the caller's rule sets. A job
 * that now costs more than the total is reported as it returns (`JOB_EXCEEDS_CAPACITY`), in the
 * same write.
 */
export function requeue(ctx: EngineContext, job: JobRow, reason: string, retryAt: number | null, changes: Partial<JobRow> = {}): JobRow {
  const messageId = nextStreamMessageId(ctx)
  return moveJob(
    ctx,
    job,
    'QUEUED',
    {
      claimed_by: null,
      claim_expires_at: null,
      next_retry_at: retryAt,
      eligible_at: retryAt ?? ctx.clock.now(),
      ...NOTHING_SAID,
      stream_message_id: messageId,
      ...changes,
    },
    {
      type: 'JOB_REQUEUED',
      data: { state: 'QUEUED', reason, attempt: job.attempts, ...(retryAt !== null ? { next_retry_at: retryAt } : {}), message_id: messageId },
    },
    ...reportOnReturn(ctx, job, 'QUEUED'),
  )
}

/** Cancels a job that holds no lease, at once: it ends CANCELED. */
export function cancelNow(ctx: EngineContext, job: JobRow, reason: string | null, note: string | null, requestedBy: string | null = null): JobRow {
  return moveJob(
    ctx,
    job,
    'CANCELED',
    { claimed_by: null, claim_expires_at: null, final_status: 'CANCELED', finished_at: ctx.clock.now(), note: note ?? job.note },
    { type: 'JOB_CANCELED', data: { state: 'CANCELED', from: job.state as JobState, reason, requested_by: requestedBy } },
  )
}
