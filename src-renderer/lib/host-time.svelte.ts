/**
 * "Now" on the host's clock, ticking for countdowns and ages. The host stamps times with its own
 * clock, which a test (or a machine with a skewed clock) may run ahead of this page's: every
 * live event tells how far ahead at least (its `ts` minus when it arrived), and the largest such
 * lead is added to the local clock. Events replayed after a reconnect are older, so they never
 * raise it.
 */
export class HostTime {
  /** Milliseconds the host's clock runs ahead of this page's (never negative). */
  offsetMs = $state(0)
  /** The host's now, updated every tick. */
  now = $state(Date.now())
  private timer: ReturnType<typeof setInterval> | null = null

  constructor(private readonly localNow: () => number = () => Date.now()) {
    this.now = localNow()
  }

  /** An event stamped `ts` (ISO) by the host arrived now. */
  observe(ts: string): void {
    const lead = Date.parse(ts) - this.localNow()
    if (Number.isFinite(lead) && lead > this.offsetMs) {
      this.offsetMs = lead
      this.tick()
    }
  }

  tick(): void {
    this.now = this.localNow() + this.offsetMs
  }

  start(intervalMs = 250): void {
    this.timer ??= setInterval(() => this.tick(), intervalMs)
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer)
    this.timer = null
  }
}
