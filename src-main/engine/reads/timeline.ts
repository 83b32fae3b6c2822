import { type EventRow, type JobRow, UNCHAINED_JOB_EVENTS_CLAUSE } from '../../db/schema'
import type { EngineContext } from '../memory/context'
import { parseStored } from '../store/stored-value'

/**
 * A job's timeline: its events, and its leases', file leases' and blockers' events that name it.
 * No index holds a job's events (an entry per event was a page written by every commit): they
 * are a chain instead, from the job's `last_event_id` back through each event's `prev_id` (0 ends
 * it), written by the row layer with each event (rows.ts, context.ts `appendJobEvent`). The
 * events a job had before migration 0013 are not on a chain; a partial index holds those
 * (db/schema.ts UNCHAINED_JOB_EVENTS_CLAUSE), and no event appended since enters it.
 */

/** The event ids on the chains that start at the ids of a JSON array (null starts none): `chain(id)`, for a WITH RECURSIVE. */
export const TIMELINE_CHAIN = `chain(id) AS (
  SELECT value FROM json_each(?) WHERE value IS NOT NULL
  UNION ALL SELECT events.prev_id FROM events JOIN chain ON events.id = chain.id WHERE events.prev_id > 0)`

/** A job's timeline, oldest first. */
export function readTimeline(ctx: EngineContext, job: Pick<JobRow, 'id' | 'last_event_id'>): EventRow[] {
  return ctx.all<EventRow>(
    `WITH RECURSIVE ${TIMELINE_CHAIN}
     SELECT events.* FROM chain JOIN events ON events.id = chain.id
     UNION ALL SELECT * FROM events WHERE job_id = ? AND ${UNCHAINED_JOB_EVENTS_CLAUSE}
     ORDER BY id`,
    JSON.stringify([job.last_event_id]),
    job.id,
  )
}

/**
 * Who asked for a job's cancel: the `requested_by` of its newest `JOB_CANCEL_REQUESTED` event,
 * null when that request named nobody. Read when a job whose cancel was asked for while it ran
 * ends canceled by the engine itself (its halt on a blocker), in the asker's name.
 */
export function cancelRequestedBy(ctx: EngineContext, job: Pick<JobRow, 'id' | 'last_event_id'>): string | null {
  const asked = readTimeline(ctx, job).findLast((event) => event.event_type === 'JOB_CANCEL_REQUESTED')
  return asked ? (((parseStored(asked.data) as { requested_by?: string | null }).requested_by ?? null)) : null
}
