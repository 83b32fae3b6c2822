import { MAX_NOTE_CHARS } from '../src-shared/limits'
import type { AttemptError } from './transport'
import { cut } from './attempt-error'

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
 * A handler's result as the host will keep it: its JSON form (`undefined` is `null`, a function
 * is dropped as JSON drops it). A value JSON cannot write is no result: the attempt fails as
 * `result_not_json`, not retryable, since the same run would return the same value.
 */
export function resultOf(value: unknown): { ok: true; result: unknown } | { ok: false; error: AttemptError } {
  if (value === undefined || value === null) return { ok: true, result: null }
  if (typeof value === 'string' || typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value))) return { ok: true, result: value }
  let text: string | undefined
  try {
    text = JSON.stringify(value)
  } catch (error) {
    return { ok: false, error: { code: 'result_not_json', message: `The handler's result cannot be written as JSON: ${(error as Error).message}`, retryable: false } }
  }
  return { ok: true, result: text === undefined ? null : JSON.parse(text) }
}
