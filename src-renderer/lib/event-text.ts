import { formatClock, ms } from './time-format'

/**
 * A field of an event's data that is a time, as ISO; null for any other field or value. The host
 * names its times `…_at` and stores an event's data as written: epoch milliseconds, or ISO.
 */
function timeField(key: string, value: unknown): string | null {
  if (!key.endsWith('_at')) return null
  if (typeof value === 'number' && Number.isFinite(value)) return new Date(value).toISOString()
  return typeof value === 'string' && ms(value) !== null ? value : null
}

/** An event's data as `key=value` pairs for the job's timeline, times as clock times (`expires_at=14:03:07`). */
export function eventPairs(data: Record<string, unknown> | null, nowMs: number): string {
  return Object.entries(data ?? {})
    .map(([key, value]) => {
      const at = timeField(key, value)
      const shown = at !== null ? formatClock(at, nowMs) : typeof value === 'object' && value !== null ? JSON.stringify(value) : String(value)
      return `${key}=${shown}`
    })
    .join('  ')
}
