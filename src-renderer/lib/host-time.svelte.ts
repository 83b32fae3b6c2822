/** Differences this small between two readings are the network's jitter, not a clock that moved. */
const JITTER_MS = 25

/**
 * "Now" on the host's clock, ticking for countdowns and ages. The host stamps times with its own
 * clock, which a test (or a machine with a skewed clock) may run ahead of or behind this page's.
 * `GET /api/leases` answers the host's `now`; the host read it about halfway between sending the
 * request and getting the answer, so the offset is `now` minus that midpoint, within half the
 * round trip. Each reading replaces the last, so a clock the host moves shows at the next one.
 */
export class HostTime {
  /** Milliseconds the host's clock runs ahead of this page's (behind when negative). */
  offsetMs = $state(0)
  /** The host's now, updated every tick. */
  now = $state(0)
  private timer: ReturnType<typeof setInterval> | null = null

  constructor(
    /** This page's clock. */
    readonly localNow: () => number = () => Date.now(),
  ) {
    this.now = localNow()
  }

  /** The host answered `hostNow` (ISO) to a request sent at `sentAt` and answered at `receivedAt` (this page's clock). */
  sync(hostNow: string, sentAt: number, receivedAt: number): void {
    const host = Date.parse(hostNow)
    if (!Number.isFinite(host)) return
    const offset = Math.round(host - (sentAt + receivedAt) / 2)
    if (Math.abs(offset - this.offsetMs) <= Math.max(JITTER_MS, (receivedAt - sentAt) / 2)) return
    this.offsetMs = offset
    this.tick()
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
