import type { JobRow } from '../db/schema'
import type { EngineContext } from './context'
import { newId } from './ids'

/**
 * Dialect 003's transport, kept in SQLite: every submit and every requeue writes a message on
 * the job's stream (its queue), and the job names it (`stream_message_id`). Messages may
 * repeat; the jobs table stays the truth. A message is acknowledged once the final state of the
 * attempt it delivered is committed, so a job has at most one unacknowledged message: its
 * current one.
 */

/** The id the next message will get: a submit names its message in the job row it inserts. */
export function nextStreamMessageId(ctx: EngineContext): number {
  return ctx.counters.nextMessageId()
}

/** Writes a message for the job (which must exist) and returns its id, for `job.stream_message_id`. */
export function writeStreamMessage(ctx: EngineContext, jobId: string, stream: string, id: number = nextStreamMessageId(ctx)): number {
  ctx.run(
    'INSERT INTO stream_messages (id, enqueue_id, stream, job_id, created_at) VALUES (?, ?, ?, ?, ?)',
    id,
    newId(),
    stream,
    jobId,
    ctx.clock.now(),
  )
  return id
}

/** Acknowledges the job's current message: the attempt it delivered has ended. */
export function ackStreamMessage(ctx: EngineContext, job: JobRow): void {
  if (job.stream_message_id === null) return
  ctx.run('UPDATE stream_messages SET acked_at = ? WHERE id = ? AND acked_at IS NULL', ctx.clock.now(), job.stream_message_id)
}
