import type { JobRow } from '../../db/schema'

/**
 * Delayed jobs. A submit's `run_at` or `delay_ms` (see `delayedUntil` in jobs.ts) becomes the
 * job's `eligible_at`, the key the pick path already orders and filters by, so a delayed job is
 * invisible to every claim until then and afterwards takes its place by priority and by the
 * time it became eligible. Waiting claims set their timer by `nextEligibleAt`, and `runNow`
 * (verbs/jobs.ts) makes a delayed job eligible at once.
 */

/** A QUEUED job still waiting for its `run_at`. */
export function isScheduled(job: Pick<JobRow, 'state' | 'run_at'>, now: number): boolean {
  return job.state === 'QUEUED' && job.run_at !== null && job.run_at > now
}
