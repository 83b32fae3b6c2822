/** Every scheduling rule reads time from a Clock, so tests move time instead of sleeping. */
export interface Clock {
  /** Epoch milliseconds. */
  now(): number
}

export const SECOND = 1000
export const MINUTE = 60 * SECOND
export const HOUR = 60 * MINUTE
export const DAY = 24 * HOUR

export const systemClock: Clock = { now: () => Date.now() }

/** A clock that only moves when told to: for tests, and for hosts started with an injected clock. */
export class ManualClock implements Clock {
  constructor(private current: number) {}

  now(): number {
    return this.current
  }

  advance(ms: number): void {
    this.current += ms
  }

  set(ms: number): void {
    this.current = ms
  }
}

/** The earliest of some moments, any of which may be missing (null); null when all are. */
export function earliest(...moments: (number | null)[]): number | null {
  let first: number | null = null
  for (const at of moments) if (at !== null && (first === null || at < first)) first = at
  return first
}

/** ISO-8601 UTC with milliseconds, the only time format on the wire. */
export function iso(ms: number): string
export function iso(ms: number | null): string | null
export function iso(ms: number | null): string | null {
  return ms === null ? null : isoText(ms)
}

/**
 * `format`, remembering its text for the last millisecond asked: a batch names the same one
 * over and over (a job's created_at and updated_at, the ids of a thousand jobs submitted in
 * one commit).
 */
export function lastMillisecond(format: (ms: number) => string): (ms: number) => string {
  let last = { ms: NaN, text: '' }
  return (ms) => {
    if (ms !== last.ms) last = { ms, text: format(ms) }
    return last.text
  }
}

const isoText = lastMillisecond((ms) => new Date(ms).toISOString())
