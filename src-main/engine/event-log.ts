import type { EventRow } from '../db/schema'
import type { EngineContext } from './context'

/** Reads of the event log for a client that resumes the event stream (GET /api/events/stream). */

/** The newest event's id, 0 for an empty log. */
export function newestEventId(ctx: EngineContext): number {
  return ctx.one<{ id: number | null }>('SELECT MAX(id) AS id FROM events')?.id ?? 0
}

/** Up to `limit` events after the one with id `after`, oldest first. */
export function eventsAfter(ctx: EngineContext, after: number, limit: number): EventRow[] {
  return ctx.all<EventRow>('SELECT * FROM events WHERE id > ? ORDER BY id LIMIT ?', after, limit)
}
