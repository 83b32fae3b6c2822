/**
 * An event's `data` as the wire shows it. The engine stores and emits event data with times as
 * epoch milliseconds (the rules compare them); the wire shows every time as ISO-8601, so each
 * time field of an event's data is formatted here, at the edge, on the way out. Events stored
 * before this rule existed read back the same way: nothing in the log is rewritten.
 *
 * A time field is one named `at` or `…_at`, at any depth (`holder.acquired_at`, `owner_lease.expires_at`),
 * or `missed_from` (a schedule's first missed firing). test/contract/wire-times.test.ts holds the
 * event union to this naming: a numeric field of any event that is not a time must be named there
 * as a quantity.
 */
import { iso } from '../../engine/rules/clock'

/** A time field by its name: how event data says a number is a time. */
export type TimeKey = 'at' | `${string}_at` | 'missed_from'

/** Event data with each time field's epoch milliseconds turned into an ISO-8601 string. */
export type WireData<D> = D extends readonly (infer I)[]
  ? WireData<I>[]
  : D extends object
    ? { [K in keyof D]: K extends TimeKey ? Exclude<D[K], number> | ([Extract<D[K], number>] extends [never] ? never : string) : WireData<D[K]> }
    : D

const isTimeKey = (key: string): boolean => key === 'at' || key.endsWith('_at') || key === 'missed_from'

/** Formats every time field of an event's data (at any depth) as ISO-8601; everything else passes as it is. */
export function wireEventData<D>(data: D): WireData<D> {
  return convert(data) as WireData<D>
}

function convert(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(convert)
  if (value === null || typeof value !== 'object') return value
  const out: Record<string, unknown> = {}
  for (const [key, field] of Object.entries(value)) {
    out[key] = typeof field === 'number' && isTimeKey(key) ? iso(field) : convert(field)
  }
  return out
}
