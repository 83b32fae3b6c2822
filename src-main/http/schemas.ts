import { z } from 'zod'
import { FINAL_STATUSES, JOB_STATES, LEASE_STATES, PRIORITIES } from '../engine/states'
import { MAX_LONG_POLL_MS } from '../workers/long-poll'

/** Zod pieces shared by the dialects' request and response schemas. */

/** An identifier in a path or body (job, lease, attempt ids are UUIDs, but unknown ids are 404, not 400). */
export const Id = z.string().min(1).max(200)
/** A route's path parameter: an id (the 400 for a bad one names the parameter). */
export const pathParams = <N extends string>(name: N) => z.object({ [name]: Id } as Record<N, typeof Id>)

/**
 * A name the host keeps and shows: a job type, a queue (a worker's stream). Well-formed Unicode
 * without U+0000: JSON can spell a lone surrogate (`"\ud800"`), which has no UTF-8 form, so the
 * name would come back altered from the database, the logs and every client; and a NUL cuts the
 * name short wherever it meets a C string (a terminal, a log line, SQLite's text functions).
 * Schedule names are narrower still (schedules.ts).
 */
/** U+0000, or a surrogate not in a pair (`u` makes a pair one code point, outside the class). */
const ILL_FORMED = /[\u0000\ud800-\udfff]/u

export const Name = z
  .string()
  .min(1)
  .max(200)
  .refine((name) => !ILL_FORMED.test(name), 'must be well-formed Unicode without U+0000 (no lone surrogates)')

export const WorkerId = z.string().min(1).max(200)
export const TtlSec = z.number().int().min(1).max(3600)
export const Progress = z.number().min(0).max(1)
export const Note = z.string().max(10_000)

/** Any JSON value; bounded by the body limit. */
export const JsonValue: z.ZodType<unknown> = z.unknown()

export const PRIORITY = z.enum(PRIORITIES).meta({ id: 'Priority', description: 'URGENT > HIGH > NORMAL > LOW' })

/**
 * The largest `max_wait_ms` a request may name (an hour); above it is 400. Up to it, a wait
 * longer than {@link MAX_LONG_POLL_MS} is accepted and capped to it.
 */
export const MAX_WAIT_MS_ACCEPTED = 3_600_000
export const MaxWaitMs = z
  .number()
  .int()
  .min(0)
  .max(MAX_WAIT_MS_ACCEPTED)
  .meta({ description: `How long to wait for an answer, in ms; the host waits at most ${MAX_LONG_POLL_MS} ms (a larger value is capped)` })

/** An event id, as `Last-Event-ID` or `?last_event_id=` resumes the event stream after it. */
export const LAST_EVENT_ID = /^\d{1,15}$/

/** A time as the API writes it: ISO-8601 UTC with milliseconds. */
export const IsoTime = z.iso.datetime().meta({ id: 'Timestamp', description: 'ISO-8601 UTC with milliseconds, e.g. 2026-02-06T20:15:30.123Z' })

// Response vocabulary: each becomes a named schema of the OpenAPI document.
export const JobState = z.enum(JOB_STATES).meta({ id: 'JobState', description: 'A canonical job state (docs/states.md)' })
export const LeaseState = z.enum(LEASE_STATES).meta({ id: 'LeaseState' })
export const FinalStatus = z.enum(FINAL_STATUSES).meta({ id: 'FinalStatus', description: 'How an attempt or a job ended' })
