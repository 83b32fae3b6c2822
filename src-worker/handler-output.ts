import { type FaultKind, faultIn, MAX_JSON_DEPTH } from '../src-shared/json-faults'
import { MAX_BODY_LIMIT_BYTES, MAX_NOTE_CHARS, REPORT_ENVELOPE_BYTES } from '../src-shared/limits'
import { MAX_RESULT_DEPTH } from '../src-shared/worker-exchange'
import type { AttemptError } from './transport'
import { cut, shortened } from './attempt-error'

/**
 * What a handler hands back — its progress, its note, its result — checked in the handler's own
 * thread, where a mistake fails the one call or the one attempt. Unchecked, a progress of 2 or a
 * result JSON cannot write (a BigInt, a cycle) would make every exchange that carries it fail,
 * and every report behind it would wait forever.
 */

/** A handler's `progress(fraction, note)`, as the exchange carries it; throws on a fraction outside 0–1 or a note that is no string. */
export function progressOf(fraction: unknown, note: unknown): { fraction: number | null; note: string | null } {
  if (fraction !== null && fraction !== undefined && (typeof fraction !== 'number' || !(fraction >= 0 && fraction <= 1))) {
    const got = typeof fraction === 'number' ? String(fraction) : typeof fraction === 'string' ? JSON.stringify(fraction) : `a ${typeof fraction}`
    throw new RangeError(`progress() takes a fraction from 0 to 1, or null; got ${got}`)
  }
  if (note !== null && note !== undefined && typeof note !== 'string') throw new TypeError(`progress() takes a note that is a string; got ${typeof note}`)
  return { fraction: fraction ?? null, note: note == null ? null : cut(note, MAX_NOTE_CHARS) }
}

/**
 * The most bytes of JSON a result or an error may take under a host whose body limit is
 * `bodyLimit`: the limit less REPORT_ENVELOPE_BYTES, the room for the exchange around it (less
 * half the limit, for a limit under twice that). The same on every kind of worker, so that a
 * result a local worker reports is one `leasehold worker` can send, and the other way round.
 */
export function reportLimit(bodyLimit: number): number {
  return bodyLimit - Math.min(REPORT_ENVELOPE_BYTES, Math.floor(bodyLimit / 2))
}

/** The most bytes one UTF-16 unit of a string takes in JSON (a control character, `\u001f`). */
const MAX_JSON_BYTES_PER_UNIT = 6

/**
 * A handler's result as the host will keep it: its JSON form (`undefined` is `null`, a function
 * is dropped as JSON drops it). A value JSON cannot write is no result: the attempt fails as
 * `result_not_json`, not retryable, since the same run would return the same value. So does one
 * JSON writes but the host would refuse, on every transport alike: nested deeper than
 * MAX_RESULT_DEPTH (the host's MAX_JSON_DEPTH, less the levels of the exchange around it), or
 * with a string that is not well-formed Unicode (json-faults.ts). And one whose JSON is larger
 * than {@link reportLimit} of `bodyLimit` (the host's body limit: no exchange could carry it)
 * fails as `result_too_large`.
 * All found here, before the result is copied to the runtime or written into an exchange, where
 * one of hundreds of megabytes made the whole exchange fail, again and again, and one nested a
 * few thousand levels could not be read at the other end of the thread's message, nor stored.
 */
export function resultOf(value: unknown, bodyLimit = MAX_BODY_LIMIT_BYTES): { ok: true; result: unknown } | { ok: false; error: AttemptError } {
  const maxBytes = reportLimit(bodyLimit)
  if (value === undefined || value === null) return { ok: true, result: null }
  if (typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value))) return { ok: true, result: value }
  // A short string fits however it is escaped; a long one is measured (one longer than the limit need not be written to know).
  if (typeof value === 'string' && value.length * MAX_JSON_BYTES_PER_UNIT + 2 <= maxBytes) return accepted(value)
  if (typeof value === 'string' && value.length > maxBytes) return tooLarge(`${value.length} characters`, bodyLimit)
  let text: string | undefined
  try {
    text = JSON.stringify(value)
  } catch (error) {
    // A RangeError is a string longer than V8 makes, or the stack running out on a value nested
    // thousands of levels deep: the one too large, the other not JSON the host takes.
    if (error instanceof RangeError) return faultIn(value, false, { maxDepth: MAX_RESULT_DEPTH, only: 'depth' }) ? unacceptable('depth') : tooLarge(error.message, bodyLimit)
    return notJson(`cannot be written as JSON: ${(error as Error).message}`)
  }
  if (text === undefined) return { ok: true, result: null }
  const bytes = text.length > maxBytes ? text.length : Buffer.byteLength(text)
  if (bytes > maxBytes) return tooLarge(`${bytes} bytes of JSON`, bodyLimit)
  return accepted(typeof value === 'string' ? value : JSON.parse(text))
}

/** A result in its JSON form, unless it holds what the host refuses in any body. */
function accepted(result: unknown): { ok: true; result: unknown } | { ok: false; error: AttemptError } {
  const fault = faultIn(result, false, { maxDepth: MAX_RESULT_DEPTH })
  return fault ? unacceptable(fault.kind) : { ok: true, result }
}

const UNACCEPTABLE: Record<FaultKind, string> = {
  depth: `is nested too deep: more than ${MAX_RESULT_DEPTH} levels (the host refuses JSON nested deeper than ${MAX_JSON_DEPTH}, the exchange around it included)`,
  text: 'holds a string that is not well-formed Unicode (a lone surrogate), which the host refuses',
  number: 'holds a number too large for a double',
}

function unacceptable(kind: FaultKind): { ok: false; error: AttemptError } {
  return notJson(UNACCEPTABLE[kind])
}

function notJson(why: string): { ok: false; error: AttemptError } {
  return { ok: false, error: { code: 'result_not_json', message: `The handler's result ${why}`, retryable: false } }
}

function tooLarge(size: string, bodyLimit: number): { ok: false; error: AttemptError } {
  const limit = bodyLimit === MAX_BODY_LIMIT_BYTES ? 'the largest --body-limit a host takes' : 'its --body-limit'
  const message = `The handler's result is larger than the host accepts (${size}; at most ${reportLimit(bodyLimit)} bytes: ${limit}, ${bodyLimit}, less ${bodyLimit - reportLimit(bodyLimit)} for the exchange around it): write it to a file and return its path`
  return { ok: false, error: { code: 'result_too_large', message, retryable: false } }
}

/**
 * A handler's error as it will be reported: whole when its JSON fits in {@link reportLimit} of
 * `bodyLimit` (the host's body limit), else with its message cut short and no stack, as the
 * worker does for a failure the host refused as too large (report-budget.ts).
 */
export function failureOf(error: AttemptError, bodyLimit = MAX_BODY_LIMIT_BYTES): AttemptError {
  const maxBytes = reportLimit(bodyLimit)
  const units = error.code.length + error.message.length + (error.stack?.length ?? 0)
  if (units * MAX_JSON_BYTES_PER_UNIT + 100 <= maxBytes) return error
  return Buffer.byteLength(JSON.stringify(error)) <= maxBytes ? error : shortened(error)
}
