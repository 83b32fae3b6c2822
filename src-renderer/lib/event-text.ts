import { formatClock } from './time-format'

/** An ISO-8601 time as the host writes them (`2026-11-28T21:47:38.341Z`, or with an offset). */
const ISO_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d)$/

/**
 * A value of an event's data that is a time, in epoch ms or as the ISO string; null for any
 * other. Every time on the wire is an ISO string; events stored before that carry epoch
 * milliseconds, which only fields named `…_at` hold (other numbers, such as a fence, stay numbers).
 */
function timeOf(key: string, value: unknown): string | number | null {
  if (typeof value === 'string' && ISO_TIME.test(value) && !Number.isNaN(Date.parse(value))) return value
  if (key.endsWith('_at') && typeof value === 'number' && Number.isFinite(value)) return value
  return null
}

/** One value of an event's data as the timeline writes it: times with the window's formatter, objects field by field. */
function valueText(key: string, value: unknown, nowMs: number): string {
  const at = timeOf(key, value)
  if (at !== null) return formatClock(at, nowMs)
  if (Array.isArray(value)) return `[${value.map((item) => valueText(key, item, nowMs)).join(', ')}]`
  if (typeof value === 'object' && value !== null) {
    return `{${Object.entries(value).map(([k, v]) => `${k}=${valueText(k, v, nowMs)}`).join(', ')}}`
  }
  return String(value)
}

/** One field of an event's data on the timeline: `expires_at=14:03:07`. */
export interface EventPair {
  key: string
  value: string
}

/**
 * Fields of an event's data whose own name reads wrong on the timeline: a job run now records the
 * time it had been scheduled for as `run_at`, which beside `JOB_RUN_NOW` reads as when it will run.
 */
const SHOWN_AS: Partial<Record<string, Record<string, string>>> = { JOB_RUN_NOW: { run_at: 'was_scheduled_for' } }

/**
 * An event's data as `key=value` pairs for the job's timeline, times as the window writes them.
 * Each pair is shown as one piece, so a line wraps between fields, never inside a value.
 */
export function eventPairs(data: Record<string, unknown> | null, nowMs: number, type?: string): EventPair[] {
  const names = (type && SHOWN_AS[type]) || {}
  return Object.entries(data ?? {}).map(([key, value]) => ({ key: names[key] ?? key, value: valueText(key, value, nowMs) }))
}
