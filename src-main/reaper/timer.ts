import type { Clock } from '../engine/rules/clock'
import { realTimers, type Timers } from '../schedules/timer'

/**
 * The pace of a host whose clock may move at any moment (an injected clock, a test's): each pass
 * then looks at the clock every this often, since no moment can be slept until.
 */
export const POLL_MS = 250
/**
 * The longest the reaper sleeps. A timer counts time the machine spent asleep as not passed, and
 * the wall clock may be set, while every moment the reaper acts on is a wall-clock time: a pass
 * within this of a wake makes the sleep good (the leases held count their silence from the wake:
 * engine `noticeSleep`), and finds whatever else came due meanwhile (a retry's backoff, a clock
 * waiter's moment), as docs/states.md says ("Attempts, expiry and retries").
 */
export const MAX_SLEEP_MS = 1_000

export interface ReaperTimerOptions {
  clock: Clock
  timers?: Timers
  /** One pass: expires what is due and releases what waits for the clock. It catches its own errors. */
  pass(): void
  /** The earliest moment a pass would find something due (a lease's or claim's expiry, a file lease going idle, a clock waiter's moment), or null. */
  nextDueAt(): number | null
  /** The clock may move at any moment (not the system's): pass every {@link POLL_MS}, whatever is due. */
  polled: boolean
}

/**
 * How long the reaper sleeps after a pass at `now`, when the earliest moment due is `dueAt`:
 * until that moment, at most {@link MAX_SLEEP_MS}; and {@link POLL_MS} when a moment is still
 * due after the pass (a batch left for the next pass, or a pass that failed: a full disk).
 */
export function sleepAfterPass(now: number, dueAt: number | null): number {
  if (dueAt === null) return MAX_SLEEP_MS
  if (dueAt <= now) return POLL_MS
  return Math.min(dueAt - now, MAX_SLEEP_MS)
}

/**
 * The reaper's one timer. After each pass it sleeps until the next moment anything comes due,
 * never more than {@link MAX_SLEEP_MS}, so an idle host wakes for it once a second instead of
 * polling four times. Nothing set between two passes is due sooner than the sleep: every moment
 * the reaper acts on lies at least a second after the write that sets it (a lease's TTL and a
 * claim's are whole seconds, at least 1; a file lease goes idle after 30 s), except a clock
 * waiter's, which {@link dueBy} brings the timer forward for.
 */
export class ReaperTimer {
  private handle: unknown = null
  /** The moment the armed timer wakes at, on the clock. */
  private wakeAt = Number.POSITIVE_INFINITY
  private stopped = false
  private readonly timers: Timers

  constructor(private readonly options: ReaperTimerOptions) {
    this.timers = options.timers ?? realTimers
  }

  /** Starts the passes, the first one on time after the pass the host made as it started. */
  start(): void {
    this.armAfterPass()
  }

  /** Something comes due at `at` (a clock waiter's moment): the timer wakes by then. */
  dueBy(at: number): void {
    if (this.stopped || this.handle === null || at >= this.wakeAt) return
    this.arm(Math.max(0, at - this.options.clock.now()))
  }

  stop(): void {
    this.stopped = true
    this.clear()
  }

  private passNow(): void {
    this.handle = null
    if (this.stopped) return
    try {
      this.options.pass()
    } finally {
      this.armAfterPass() // as an interval would go on after a throw
    }
  }

  private armAfterPass(): void {
    this.arm(this.options.polled ? POLL_MS : sleepAfterPass(this.options.clock.now(), this.nextDueAt()))
  }

  /** The next moment due; one that cannot be read (the database closing) is looked for again at the poll's pace. */
  private nextDueAt(): number | null {
    try {
      return this.options.nextDueAt()
    } catch {
      return Number.NEGATIVE_INFINITY
    }
  }

  private arm(delay: number): void {
    this.clear()
    if (this.stopped) return
    this.wakeAt = this.options.clock.now() + delay
    this.handle = this.timers.setTimeout(() => this.passNow(), delay)
  }

  private clear(): void {
    if (this.handle !== null) this.timers.clearTimeout(this.handle)
    this.handle = null
    this.wakeAt = Number.POSITIVE_INFINITY
  }
}
