/** How the dashboard writes times and durations; pure, so the tests can pin them. */

const SECOND = 1000
const MINUTE = 60 * SECOND
const HOUR = 60 * MINUTE
const DAY = 24 * HOUR

/** Epoch milliseconds of an ISO time; null stays null. */
export function ms(iso: string | null | undefined): number | null {
  if (!iso) return null
  const value = Date.parse(iso)
  return Number.isNaN(value) ? null : value
}

/**
 * Time left until a deadline as a clock, `m:ss` (or `h:mm:ss`), rounded up so that `0:00` is
 * only shown once the deadline has passed; `expired` after it.
 */
export function formatCountdown(remainingMs: number): string {
  if (remainingMs <= 0) return 'expired'
  const total = Math.ceil(remainingMs / SECOND)
  const h = Math.floor(total / 3600)
  const m = Math.floor((total % 3600) / 60)
  const s = total % 60
  const ss = String(s).padStart(2, '0')
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${ss}` : `${m}:${ss}`
}

/** A duration in its two largest units: `4 s`, `2 min 5 s`, `3 h 12 min`, `2 d 4 h`. */
export function formatDuration(durationMs: number): string {
  const d = Math.max(0, durationMs)
  if (d < MINUTE) return `${Math.floor(d / SECOND)} s`
  if (d < HOUR) {
    const s = Math.floor((d % MINUTE) / SECOND)
    return `${Math.floor(d / MINUTE)} min${s ? ` ${s} s` : ''}`
  }
  if (d < DAY) {
    const m = Math.floor((d % HOUR) / MINUTE)
    return `${Math.floor(d / HOUR)} h${m ? ` ${m} min` : ''}`
  }
  const h = Math.floor((d % DAY) / HOUR)
  return `${Math.floor(d / DAY)} d${h ? ` ${h} h` : ''}`
}

/** How long ago something happened: `just now`, `12 s ago`, `3 min ago`. */
export function formatAge(sinceMs: number | null, nowMs: number): string {
  if (sinceMs === null) return 'never'
  const age = nowMs - sinceMs
  if (age < SECOND) return 'just now'
  return `${formatDuration(age)} ago`
}

/** A wall-clock time for tables: `14:03:07` today, `Jan 3 14:03` on another day. */
export function formatClock(iso: string | null, nowMs: number): string {
  const at = ms(iso)
  if (at === null) return '—'
  const date = new Date(at)
  const today = new Date(nowMs)
  const time = date.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' })
  if (date.toDateString() === today.toDateString()) return time
  return `${date.toLocaleDateString(undefined, { month: 'short', day: 'numeric' })} ${time}`
}
