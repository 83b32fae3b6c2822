/** How long a job waits before its next attempt after a timed-out or retryable failed one. */
export interface BackoffPolicy {
  /** Delay after the first attempt, in milliseconds. */
  baseMs: number
  /** The delay never grows past this. */
  maxMs: number
}

/**
 * Exponential backoff: base × 2^(attempt − 1), capped at max. `attempt` is the number of the
 * attempt that just ended (1 for the first). docs/states.md has the table for the defaults.
 */
export function backoffDelay(attempt: number, policy: BackoffPolicy): number {
  const exponent = Math.min(Math.max(attempt - 1, 0), 30)
  return Math.min(policy.baseMs * 2 ** exponent, policy.maxMs)
}

export function nextRetryAt(now: number, attempt: number, policy: BackoffPolicy): number {
  return now + backoffDelay(attempt, policy)
}
