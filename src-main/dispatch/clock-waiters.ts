import { STOPPING_WAIT_MS } from './long-poll'
import type { Clock } from '../engine/rules/clock'

interface Waiter {
  at: number
  resolve(reached: boolean): void
}

/**
 * Waits for moments on the engine's clock (a file lease's one retry at +180 s). The host checks
 * them on each pass of its reaper, which wakes by the earliest of them ({@link nextAt}; a new
 * one sooner than its sleep is passed to `onWait`), and every 250 ms on an injected clock, so a
 * test that moves that clock releases them as promptly as real time does.
 */
export class ClockWaiters {
  private waiting = new Set<Waiter>()
  private closed = false

  constructor(
    private readonly clock: Clock,
    /** A wait for `at` began. */
    private readonly onWait: (at: number) => void = () => {},
  ) {}

  /**
   * Resolves true once the clock reaches `at`, false after `maxWaitMs` of real time or on abort;
   * once closed (the host stopping), false after at most {@link STOPPING_WAIT_MS}.
   */
  waitUntil(at: number, maxWaitMs: number, signal?: AbortSignal): Promise<boolean> {
    if (this.clock.now() >= at) return Promise.resolve(true)
    if (this.closed) maxWaitMs = Math.min(maxWaitMs, STOPPING_WAIT_MS)
    return new Promise((resolve) => {
      const waiter: Waiter = {
        at,
        resolve: (reached) => {
          clearTimeout(timer)
          signal?.removeEventListener('abort', onAbort)
          this.waiting.delete(waiter)
          resolve(reached)
        },
      }
      const timer = setTimeout(() => waiter.resolve(false), maxWaitMs)
      const onAbort = () => waiter.resolve(false)
      signal?.addEventListener('abort', onAbort, { once: true })
      this.waiting.add(waiter)
      this.onWait(at)
    })
  }

  /** The earliest moment waited for, or null. */
  nextAt(): number | null {
    let next: number | null = null
    for (const { at } of this.waiting) if (next === null || at < next) next = at
    return next
  }

  /** Releases every waiter whose moment has come; the host calls this on each tick. */
  check(): void {
    const now = this.clock.now()
    for (const waiter of [...this.waiting]) if (now >= waiter.at) waiter.resolve(true)
  }

  /** The host is stopping: every wait ends now, and later ones last at most {@link STOPPING_WAIT_MS}. */
  close(): void {
    this.closed = true
    for (const waiter of [...this.waiting]) waiter.resolve(false)
  }
}
