/**
 * Whether Redis answers, judged from the checks sent to it and their answers: a connection that
 * stays open is not enough (a Redis stopped with SIGSTOP, a network that drops packets, keep it
 * open and answer nothing). Times are wall-clock milliseconds, passed in: how long Redis takes is
 * measured in real time, never on the scheduler's clock.
 */

/** A check unanswered for this long means Redis does not answer. */
export const UNANSWERED_AFTER_MS = 3_000

export class Answering {
  private answeredAt: number
  /** When the oldest check still unanswered was sent; null when every one was answered. */
  private unansweredSince: number | null = null

  /** Starts from `now`: the time Redis has not answered counts from there until its first answer. */
  constructor(now: number) {
    this.answeredAt = now
  }

  /** A check was sent: unanswered from now on, unless an earlier one already is (a check that failed). */
  sent(now: number): void {
    this.unansweredSince ??= now
  }

  /** Redis answered (a check, or a new connection's handshake). */
  answered(now: number): void {
    this.answeredAt = now
    this.unansweredSince = null
  }

  /** Whether Redis answers at `now`: no check has waited {@link UNANSWERED_AFTER_MS} for its answer. */
  answers(now: number): boolean {
    return this.unansweredSince === null || now - this.unansweredSince < UNANSWERED_AFTER_MS
  }

  /** How long since Redis last answered, at `now`. */
  silentFor(now: number): number {
    return Math.max(0, now - this.answeredAt)
  }
}
