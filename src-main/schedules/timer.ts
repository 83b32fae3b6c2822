import type { Engine } from '../engine'
import { type Clock, SET_BACK_MS } from '../engine/rules/clock'

/** The timer functions the service uses; tests hand in their own to see what it arms. */
export interface Timers {
  setTimeout(run: () => void, ms: number): unknown
  clearTimeout(handle: unknown): void
}

export const realTimers: Timers = {
  setTimeout: (run, ms) => setTimeout(run, ms),
  clearTimeout: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
}

export interface ScheduleTimerOptions {
  clock: Clock
  timers?: Timers
  /**
   * The longest one sleep lasts before the timer compares the clock with the due time again
   * (in memory; nothing is read). A timer counts time the machine spent asleep as not passed,
   * and the wall clock may be set: a laptop that wakes after the due time fires within this.
   */
  maxSleepMs?: number
  /** How long after a failed firing (a full disk) the next attempt is made. */
  retryMs?: number
  /** A firing pass failed; it is tried again after `retryMs`. */
  onError?: (error: unknown) => void
  /** A firing pass committed. */
  onFired?: () => void
}

export const MAX_SLEEP_MS = 60_000
const RETRY_MS = 1_000

/**
 * Fires recurring schedules on time: one timer, set for the earliest next firing among the
 * enabled schedules, never a loop that polls the database. It is armed again after every commit
 * that touched a schedule (created, updated, deleted, fired), and at start, where the firings
 * missed while the host was down are caught up at once (one run each, the latest: see
 * `dueFiring`). A firing goes through `engine.run`, so it joins the group commit like any
 * request, and makes its job with the submit verb.
 *
 * The engine's clock decides when a firing is due. The host also calls {@link check} on each
 * pass of its reaper (at least once a second; every 250 ms on an injected clock), a comparison
 * in memory, so a machine that wakes after the due time fires within a second, and a host on an
 * injected clock fires when a test moves that clock, as promptly as it would in real time.
 */
export class ScheduleTimer {
  private dueAt: number | null = null
  private handle: unknown = null
  /** A failed pass holds the next attempt back until then. */
  private retryAt = 0
  private running: Promise<void> | null = null
  private again = false
  private stopped = false
  private unsubscribe: (() => void) | null = null
  private readonly clock: Clock
  private readonly timers: Timers
  /** The clock at the last check: a clock read earlier than this by more than {@link SET_BACK_MS} was set back. */
  private checkedAt: number | null = null

  constructor(
    private readonly engine: Engine,
    private readonly options: ScheduleTimerOptions,
  ) {
    this.clock = options.clock
    this.timers = options.timers ?? realTimers
  }

  /** The moment the armed timer waits for (the earliest next firing), or null when none is armed. */
  get armedFor(): number | null {
    return this.dueAt
  }

  /**
   * Arms the timer and catches up the firings missed while the host was down; a next firing
   * reckoned on a clock since set back (while the host was down) is re-aimed first.
   */
  async start(): Promise<void> {
    this.unsubscribe = this.engine.onCommit((events) => {
      if (events.some((event) => event.entity_type === 'SCHEDULE')) this.arm()
    })
    await this.reaim()
    return this.check()
  }

  /** Reads when the next firing is due and sets the one timer for it (replacing the one set before). */
  arm(): void {
    if (this.stopped) return
    this.dueAt = this.engine.nextScheduleFireAt()
    this.setTimer()
  }

  /**
   * Fires if a firing is due by the engine's clock; otherwise does nothing (and reads nothing).
   * A clock set back since the last check re-aims the schedules first (engine `reaimSchedules`).
   */
  check(): Promise<void> {
    const now = this.clock.now()
    const setBack = this.checkedAt !== null && now < this.checkedAt - SET_BACK_MS
    this.checkedAt = now
    if (setBack && !this.stopped) return this.reaim().then(() => this.check())
    if (this.stopped || this.dueAt === null || now < this.wakeAt(this.dueAt)) return this.running ?? Promise.resolve()
    return this.fire()
  }

  /** Re-aims the schedules at the clock as it is now, and arms the timer for them. A failure (a full disk) leaves them as they were. */
  private async reaim(): Promise<void> {
    try {
      await this.engine.run(() => this.engine.reaimSchedules())
    } catch (error) {
      this.options.onError?.(error)
    }
    this.arm()
  }

  /** Stops the timer; a firing in progress finishes (its group commits). */
  async stop(): Promise<void> {
    this.stopped = true
    this.unsubscribe?.()
    this.clearTimer()
    await this.running
  }

  private wakeAt(dueAt: number): number {
    return Math.max(dueAt, this.retryAt)
  }

  private setTimer(): void {
    this.clearTimer()
    if (this.dueAt === null) return
    const delay = Math.max(0, this.wakeAt(this.dueAt) - this.clock.now())
    this.handle = this.timers.setTimeout(() => {
      this.handle = null
      // Woken early (the sleep is capped) or on time: check decides; an early wake sleeps again.
      if (this.dueAt !== null && this.clock.now() < this.wakeAt(this.dueAt)) this.setTimer()
      else void this.check()
    }, Math.min(delay, this.options.maxSleepMs ?? MAX_SLEEP_MS))
  }

  private clearTimer(): void {
    if (this.handle !== null) this.timers.clearTimeout(this.handle)
    this.handle = null
  }

  /** One firing pass at a time; a wake during a pass runs one more pass after it. */
  private fire(): Promise<void> {
    if (this.running) {
      this.again = true
      return this.running
    }
    this.running = (async () => {
      do {
        this.again = false
        try {
          await this.engine.run(() => this.engine.fireDueSchedules())
          this.retryAt = 0
          this.options.onFired?.()
        } catch (error) {
          this.retryAt = this.clock.now() + (this.options.retryMs ?? RETRY_MS)
          this.options.onError?.(error)
        }
      } while (this.again && !this.stopped)
      this.running = null
      this.arm()
    })()
    return this.running
  }
}
