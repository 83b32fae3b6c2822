import { type EventRow, type JobRow, UNCHAINED_JOB_EVENTS_CLAUSE } from '../../db/schema'
import type { EngineContext } from '../memory/context'
import { invalid } from '../rules/errors'
import { parseStored } from '../store/stored-value'
import { decodeCursor, encodeCursor, MAX_LIST_LIMIT, type PageRequest, pageLimit } from './list'

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

/** A timeline page's cursor: the oldest event of the page before; the next page holds the events before it. */
const TIMELINE_CURSOR = /^before:(\d{1,15})$/

/**
 * A page of a job's timeline, oldest first: its newest `limit` events (by default every event of
 * a job that has at most {@link MAX_LIST_LIMIT}), or with a cursor the `limit` events before the
 * oldest of the page that gave it. Pages go back in time because the chain does: a page walks
 * `limit` links from where it starts, however long the timeline (a job that reported progress
 * every second for a day has ~86,000 events). The events a job had before migration 0013, not on
 * the chain, are older than every event on it, and come after them.
 */
export function readTimelinePage(
  ctx: EngineContext,
  job: Pick<JobRow, 'id' | 'last_event_id'>,
  page: PageRequest,
): { events: EventRow[]; next_cursor: string | null } {
  const limit = pageLimit(page, MAX_LIST_LIMIT)
  let before: EventRow | undefined
  if (page.cursor !== undefined) {
    before = ctx.one<EventRow>('SELECT * FROM events WHERE id = ?', Number(decodeCursor(page.cursor, TIMELINE_CURSOR)[1]))
    if (before?.job_id !== job.id) throw invalid("cursor: not a cursor of this job's timeline")
  }
  const unchained = before !== undefined && before.prev_id === null
  const start = before === undefined ? job.last_event_id : before.prev_id
  // One more than the page, to know whether another follows.
  const rows: EventRow[] =
    !unchained && start !== null && start > 0
      ? ctx.all<EventRow>(
          `WITH RECURSIVE chain(id, n) AS (
             SELECT ?, 1
             UNION ALL SELECT events.prev_id, chain.n + 1 FROM events JOIN chain ON events.id = chain.id
             WHERE events.prev_id > 0 AND chain.n < ?)
           SELECT events.* FROM chain JOIN events ON events.id = chain.id ORDER BY events.id DESC`,
          start,
          limit + 1,
        )
      : []
  if (rows.length <= limit) {
    const below = unchained ? before!.id : (rows.at(-1)?.id ?? Number.MAX_SAFE_INTEGER)
    rows.push(
      ...ctx.all<EventRow>(
        `SELECT * FROM events WHERE job_id = ? AND ${UNCHAINED_JOB_EVENTS_CLAUSE} AND id < ? ORDER BY id DESC LIMIT ?`,
        job.id,
        below,
        limit + 1 - rows.length,
      ),
    )
  }
  const events = rows.slice(0, limit).reverse()
  return { events, next_cursor: rows.length > limit ? encodeCursor(`before:${events[0]!.id}`) : null }
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
