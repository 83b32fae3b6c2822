import { randomUUID } from 'node:crypto'
import type { StreamMessageRow } from '../db/schema'
import type { EngineContext } from './context'

/**
 * Dialect 003's transport, kept in SQLite: every submit and every requeue writes a message on
 * the job's stream (its queue). Messages may repeat; the jobs table stays the truth, and a
 * message is acknowledged once its attempt's final state is committed.
 */
export function writeStreamMessage(ctx: EngineContext, jobId: string, stream: string): void {
  ctx.run(
    'INSERT INTO stream_messages (enqueue_id, stream, job_id, created_at) VALUES (?, ?, ?, ?)',
    randomUUID(),
    stream,
    jobId,
    ctx.clock.now(),
  )
}

/** The message that delivered the job's current attempt: the newest one for the job. */
export function currentStreamMessage(ctx: EngineContext, jobId: string): StreamMessageRow | undefined {
  return ctx.one<StreamMessageRow>('SELECT * FROM stream_messages WHERE job_id = ? ORDER BY id DESC LIMIT 1', jobId)
}

export function ackStreamMessages(ctx: EngineContext, jobId: string): void {
  ctx.run('UPDATE stream_messages SET acked_at = ? WHERE job_id = ? AND acked_at IS NULL', ctx.clock.now(), jobId)
}
