/**
 * Prints a line at most once per interval for each key, and says how many were held back: a
 * fault that repeats on every tick or request (a full disk) shows in the log once a minute, not
 * four times a second. Shared: the host limits its own lines with it, and the workers their
 * retry lines ({@link limitRetryLines}).
 */
export class LogLimiter {
  private readonly last = new Map<string, { at: number; held: number }>()

  constructor(
    private readonly log: (line: string) => void,
    private readonly now: () => number,
    private readonly intervalMs = 60_000,
  ) {}

  /** Lets the next line of `key` through at once: the fault it said has ended (and a new one is news). */
  forget(key: string): void {
    this.last.delete(key)
  }

  /** Lets the next line of every key through at once ({@link forget}). */
  forgetAll(): void {
    this.last.clear()
  }

  line(key: string, text: string): void {
    const now = this.now()
    const last = this.last.get(key)
    // A clock read earlier than the last line's (set back) lets the line through: otherwise it would wait out the hours the clock went back.
    if (last && now >= last.at && now - last.at < this.intervalMs) {
      last.held += 1
      return
    }
    const held = last?.held ? ` (${last.held} more like it since the last such line)` : ''
    this.last.set(key, { at: now, held: 0 })
    this.log(`${text}${held}`)
  }
}

/** How a worker's retry lines end (src-worker/runtime.ts, driver.ts): "…; retrying in 1 s". */
const RETRY_LINE = /; retrying in \d+ m?s$/

/** A worker's line that it reached its host again after a retry line (src-worker/transport.ts HostContact). */
const AGAIN_LINE = /^leasehold worker .+: connected to the host at .+ again$/

/**
 * A worker's log with its retry lines limited: "the host answered 507 storage_full (…); retrying
 * in 1 s" comes after every failed exchange (about three a second while the host's disk is full),
 * and is printed at most once a minute for each kind of fault, with the count of those held back,
 * as the host logs its own faults (docs/operations.md). The kind is the line up to its first
 * parenthesis ("the host answered 507 storage_full", "the host did not answer"): the details
 * inside may differ from one line to the next.
 *
 * The line that the worker reached its host again ends the outage: each of the worker's talkers
 * that said a retry line says it, and it is printed once, if a retry line was printed or held
 * back since the last one; then a retry line of a later outage is printed at once. Every other
 * line passes as it is.
 */
export function limitRetryLines(log: (line: string) => void, now: () => number = Date.now, intervalMs = 60_000): (line: string) => void {
  const limiter = new LogLimiter(log, now, intervalMs)
  let retried = false
  return (line) => {
    if (AGAIN_LINE.test(line)) {
      if (!retried) return
      retried = false
      limiter.forgetAll()
      return log(line)
    }
    if (!RETRY_LINE.test(line)) return log(line)
    retried = true
    limiter.line(line.split(' (')[0]!, line)
  }
}
