import type { StoreContext } from './context'

/**
 * the worker API's transport, kept in SQLite: every submit and every requeue gives the job a new
 * stream message on its stream (its queue). The job row holds its current message
 * (`stream_message_id`) and its JOB_SUBMITTED or JOB_REQUEUED event records it, so the
 * messages need no table of their own. A message is acknowledged when the attempt it delivered
 * ends: a job has at most one unacknowledged message, its current one, while it waits or runs.
 */

/** The id of a new stream message: increasing, never given twice. */
export function nextStreamMessageId(ctx: StoreContext): number {
  return ctx.counters.nextMessageId()
}

/**
 * A stream message's id as the worker API answers it (`message_id`): the form of a Redis stream
 * entry id, `0-<n>`. With Redis carrying the queues (src-main/redis/relay.ts) it is the entry's
 * id in Redis as well: the relay XADDs each message under this explicit id, so a worker granted
 * a job in the commit that submitted it hears the same id Redis will hold, and a message
 * published again after Redis lost it keeps its id.
 */
export function streamMessageName(messageId: number): string {
  return `0-${messageId}`
}
