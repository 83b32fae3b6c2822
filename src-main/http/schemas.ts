import { z } from 'zod'
import { FINAL_STATUSES, JOB_STATES, LEASE_STATES, PRIORITIES } from '../engine/rules/states'
import { ActorName, Id } from '../../src-shared/worker-exchange'

/** Zod pieces shared by the APIs' request and response schemas; the worker exchange's own are src-shared's. */
export { GpuAvailable, Id, IsoTime, JsonValue, MAX_WAIT_MS_ACCEPTED, MaxWaitMs, Name, Note, QueueName, Progress, WorkerId } from '../../src-shared/worker-exchange'

/**
 * A time as the API takes it: ISO-8601 with seconds and an offset (`Z` or `±HH:MM`), where the
 * answers write {@link IsoTime} (UTC with milliseconds).
 */
export const GivenTime = z.iso.datetime({
  offset: true,
  error: 'must be an ISO-8601 time with seconds and an offset, such as 2027-01-01T09:00:00Z or 2027-01-01T09:00:00+01:00',
})

/** The body of a POST that takes no fields: none, `{}`, or white space; any field is a 400 as on every route. */
export const NoBody = z.strictObject({})

/** A route's path parameter: an id (the 400 for a bad one names the parameter). */
export const pathParams = <N extends string>(name: N) => z.object({ [name]: Id } as Record<N, typeof Id>)

export const TtlSec = z.number().int().min(1).max(3600)

/**
 * A whole number in a query, written in plain decimal digits: `0x10`, `0b11`, ` 5`, `1e2` are
 * refused (400 naming the parameter), where Number, and so z.coerce, would read them. Every
 * refusal says what the parameter takes: a query's value is always text, so zod's own words for
 * one that is not digits ("expected number, received string") would blame its type, not its
 * writing.
 */
export const queryInt = (min: number, max: number) => {
  const error = `must be a whole number from ${min} to ${max}, in plain decimal digits`
  return z.preprocess(
    (value) => (typeof value === 'string' && /^[0-9]{1,16}$/.test(value) ? Number(value) : value),
    z.number({ error }).int({ error }).min(min, { error }).max(max, { error }),
  )
}

/** A list's page in its query: at most `limit` items (1–500), after `cursor` (the `next_cursor` of the page before). */
export const PageFields = {
  limit: queryInt(1, 500).optional(),
  cursor: z.string().max(200).optional(),
}

/** A page's answer names where the next one starts; null on the last. */
export const NextCursor = z.string().nullable().meta({ description: 'Opaque; pass it as `cursor` for the next page (null: this page is the last)' })

/**
 * Who asked for an operator's action (a person, a script, "dashboard"), recorded in its events
 * and shown as a worker id is: the same rule ({@link ActorName}).
 */
export const RequestedBy = ActorName.nullable().optional().describe('Who asked, recorded in the event')

export const PRIORITY = z.enum(PRIORITIES).meta({ id: 'Priority', description: 'URGENT > HIGH > NORMAL > LOW' })

/** An event id, as `Last-Event-ID` or `?last_event_id=` resumes the event stream after it. */
export const LAST_EVENT_ID = /^\d{1,15}$/

// Response vocabulary: each becomes a named schema of the OpenAPI document.
export const JobState = z.enum(JOB_STATES).meta({ id: 'JobState', description: 'A canonical job state (docs/states.md)' })
export const LeaseState = z.enum(LEASE_STATES).meta({ id: 'LeaseState' })
export const FinalStatus = z.enum(FINAL_STATUSES).meta({ id: 'FinalStatus', description: 'How an attempt or a job ended' })
