/** Every scheduling rule reads time from a Clock, so tests move time instead of sleeping. */
export interface Clock {
  /** Epoch milliseconds: the wall clock, in which every moment the engine keeps is written. */
  now(): number
  /**
   * Milliseconds on a clock that is never set and stands still while the machine sleeps (from
   * any origin), where the clock has one: against it a {@link SleepWatch} tells a sleep of the
   * machine from time that passed.
   */
  awake?(): number
}

export const SECOND = 1000
export const MINUTE = 60 * SECOND
export const HOUR = 60 * MINUTE
export const DAY = 24 * HOUR

/**
 * The system's clocks. Node's `performance.now()` reads the monotonic clock (`CLOCK_MONOTONIC`
 * on Linux), which nobody sets and which stands still while the machine sleeps.
 */
export const systemClock: Clock = { now: () => Date.now(), awake: () => performance.now() }

/** A clock that only moves when told to: for tests, and for hosts started with an injected clock. */
export class ManualClock implements Clock {
  private awakeMs = 0

  constructor(private current: number) {}

  now(): number {
    return this.current
  }

  awake(): number {
    return this.awakeMs
  }

  /** Time passes, the machine awake. */
  advance(ms: number): void {
    this.current += ms
    this.awakeMs += ms
  }

  /** The clock reads `ms` from now on: ahead of it, as time passing awake; behind it, as a clock set back. */
  set(ms: number): void {
    if (ms > this.current) this.awakeMs += ms - this.current
    this.current = ms
  }

  /** The machine sleeps for `ms` (or its clock is set ahead by as much): the wall clock moves, the awake clock stands still. */
  sleep(ms: number): void {
    this.current += ms
  }
}

/** How far back the wall clock must go between two looks (about a second apart) to count as set back. */
export const SET_BACK_MS = SECOND

/** The least the wall clock must run ahead of the awake clock, between two looks, for a {@link SleepWatch} to see a sleep. */
export const SLEEP_AT_LEAST_MS = SECOND

/**
 * Sees the machine sleep: between two looks its wall clock ran ahead of its awake clock
 * ({@link Clock.awake}) by at least {@link SLEEP_AT_LEAST_MS}. A clock set ahead reads the same,
 * and is the same to whoever holds a lease: time in which it could not be heard, though it did
 * nothing wrong. NTP's slewing moves both clocks alike, and a clock set back reads as no sleep
 * (the reaper re-aims what that moved: engine/verbs/reaper.ts `reaimAfterSetBack`). A clock without an awake clock
 * never reads a sleep.
 */
export class SleepWatch {
  private wall: number
  private awake: number
  /** The sleep seen and not yet made good ({@link madeGood}). */
  private owed = 0

  constructor(private readonly clock: Clock) {
    this.wall = clock.now()
    this.awake = clock.awake?.() ?? 0
  }

  /** How long the machine slept, in ms, since a sleep was last made good; 0 when it did not. */
  look(): number {
    const awake = this.clock.awake?.()
    if (awake === undefined) return 0
    const wall = this.clock.now()
    const ahead = wall - this.wall - (awake - this.awake)
    this.wall = wall
    this.awake = awake
    if (ahead >= SLEEP_AT_LEAST_MS) this.owed += ahead
    return this.owed
  }

  /** The sleep {@link look} read has been made good: the next look counts from here. */
  madeGood(): void {
    this.owed = 0
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
