/**
 * Prints a line at most once per interval for each key, and says how many were held back: a
 * fault that repeats on every tick or request (a full disk) shows in the log once a minute, not
 * four times a second.
 */
export class LogLimiter {
  private readonly last = new Map<string, { at: number; held: number }>()

  constructor(
    private readonly log: (line: string) => void,
    private readonly now: () => number,
    private readonly intervalMs = 60_000,
  ) {}

  line(key: string, text: string): void {
    const now = this.now()
    const last = this.last.get(key)
    if (last && now - last.at < this.intervalMs) {
      last.held += 1
      return
    }
    const held = last?.held ? ` (${last.held} more like it since the last such line)` : ''
    this.last.set(key, { at: now, held: 0 })
    this.log(`${text}${held}`)
  }
}
