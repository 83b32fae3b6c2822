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

  /** How long the oldest waiting message has waited at the host's `now`; null when none waits. */
  oldestWaitMs(now: number): number | null {
    const waited = this.current?.oldest_wait_ms ?? null
    return waited === null ? null : waited + Math.max(0, now - this.toldAt)
  }
}
