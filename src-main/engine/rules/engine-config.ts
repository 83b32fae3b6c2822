import type { BackoffPolicy } from './backoff'

/** The scheduling knobs the engine reads. The host builds them from flags (src-main/config.ts). */
export interface EngineConfig {
  /** Lease time-to-live granted when a request names none. */
  leaseTtlS: number
  /** Added to the TTL before a silent lease expires. */
  heartbeatGraceS: number
  /** How long a queue API claim holds a job before it returns to QUEUED. */
  claimTtlS: number
  /** Bounds for a request's own `ttl_sec`. */
  minTtlS: number
  maxTtlS: number
  /** Attempts a job gets unless its submit says otherwise. */
  maxAttempts: number
  backoff: BackoffPolicy
  /** Advice to a pull API/003 worker whose lease request was denied. */
  denyRetryAfterMs: number
  /** Advice to a queue API worker whose lease request was denied (also its `next_retry_at`). */
  leaseRetryAfterS: number
  /** The most operations one commit group holds; the group commits at once when it reaches it. */
  groupMaxOperations: number
  /** The longest a group stays open while operations keep arriving in one event-loop turn. */
  groupMaxMs: number
  /**
   * How long a group that nobody waits for yet (a worker's reports sent with a claim that now
   * waits for work) stays open past its turn for the next operation, which then commits with
   * it; 0 commits every group with its turn (engine/store/transaction.ts).
   */
  groupWaitMs: number
  /**
   * Events after the statistics' mark at which the engine stores their counts at the end of a
   * commit, should the host's stats timer (which stores them too) be slow to come: what a
   * restart, or a time series, reads of the log past stats_counts stays about this long (recent-counts.ts).
   */
  countsStoreAfterEvents: number
}

/**
 * The shortest a lease may live past a grant or heartbeat (its TTL and the grace together):
 * `heartbeat_interval_seconds` is whole seconds, at least 1, so a lease that expired a second
 * after its heartbeat would expire before the next one came.
 */
export const MIN_LEASE_WINDOW_S = 2

export const DEFAULT_ENGINE_CONFIG: EngineConfig = {
  leaseTtlS: 30,
  heartbeatGraceS: 5,
  claimTtlS: 60,
  minTtlS: 1,
  maxTtlS: 3600,
  maxAttempts: 3,
  backoff: { baseMs: 2_000, maxMs: 10 * 60_000 },
  denyRetryAfterMs: 1_500,
  leaseRetryAfterS: 10,
  groupMaxOperations: 256,
  groupMaxMs: 2,
  groupWaitMs: 2,
  countsStoreAfterEvents: 100_000,
}
