import type { RedisHealth } from './api'

/**
 * Redis as the host last told it on the event stream: a host started with `--redis` sends a
 * `redis` frame when the stream opens, whenever its connection to Redis is made or lost, and
 * every few seconds while Redis is away (how many messages wait). Nothing is polled: a host
 * without Redis sends no frame, and `current` stays null.
 */
export class RedisState {
  current = $state<RedisHealth | null>(null)
  /** The host's now when `current` was told: the oldest message's wait grows from there. */
  private toldAt = 0

  constructor(private readonly hostNow: () => number) {}

  /** A `redis` frame; null when the stream (re)opens, until the host says again. */
  hear(health: RedisHealth | null): void {
    this.current = health
    this.toldAt = this.hostNow()
  }

  /** Redis is configured and does not answer. */
  get away(): boolean {
    return this.current !== null && !this.current.connected
  }

  /** Another host uses this host's prefix, which then no longer uses Redis: who, as it names itself; null otherwise. */
  get prefixTakenBy(): string | null {
    return this.current?.prefix_taken_by ?? null
  }

  /** How long the oldest waiting message has waited at the host's `now`; null when none waits. */
  oldestWaitMs(now: number): number | null {
    return this.grown(this.current?.oldest_wait_ms ?? null, now)
  }

  /** How long Redis has not answered at the host's `now`; null while it answers. */
  unansweredMs(now: number): number | null {
    return this.grown(this.current?.unanswered_ms ?? null, now)
  }

  /** A duration the host told, grown by the time since it told it. */
  private grown(toldMs: number | null, now: number): number | null {
    return toldMs === null ? null : toldMs + Math.max(0, now - this.toldAt)
  }
}
