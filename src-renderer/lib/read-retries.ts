import { NO_ANSWER } from './api'
import { reconnectDelayMs } from './live.svelte'

/** A part of the page read from the host: `error` says why its last read failed. */
export interface ReadPart {
  readonly error: string | null
  refresh(): Promise<void>
}

/** A failed part: how many reads of it failed in a row, and when it is read next (epoch ms). */
interface Retry {
  failures: number
  at: number
}

/**
 * The parts whose read got no answer while the event stream stayed open (a request lost on the
 * way, the browser offline for its requests only): no event need come to read them again, so
 * each is read again by itself, 1 s, 2 s, 4 s … at most 15 s after its last failed read (the
 * stream's own backoff), until a read is answered and its error goes. A read the host answered
 * with a refusal (a 404, a 400) is not asked again: the same question gets the same answer. A
 * stream that reopens reads what failed itself; the dashboard calls {@link ReadRetries.retry}
 * only while it is live.
 */
export class ReadRetries {
  private readonly failed = new Map<ReadPart, Retry>()
  private readonly reading = new Set<ReadPart>()

  constructor(private readonly now: () => number = Date.now) {}

  /** Reads again each of `parts` whose failure's wait is over; forgets those that read well since. */
  retry(parts: readonly (ReadPart | null)[]): void {
    for (const part of parts) {
      if (part === null || this.reading.has(part)) continue
      const retry = this.failed.get(part)
      if (part.error !== NO_ANSWER) {
        this.failed.delete(part)
      } else if (retry === undefined) {
        this.failed.set(part, { failures: 1, at: this.now() + reconnectDelayMs(1) })
      } else if (this.now() >= retry.at) {
        this.reading.add(part)
        void part.refresh().finally(() => {
          this.reading.delete(part)
          retry.failures += 1
          retry.at = this.now() + reconnectDelayMs(retry.failures)
        })
      }
    }
  }

  clear(): void {
    this.failed.clear()
  }
}
