import type { Job } from './api'
import { ms } from './time-format'

/** A QUEUED job still waiting for its `run_at` (src-main/engine/reads/scheduled.ts says the same of the host's rows). */
export function isScheduled(job: Pick<Job, 'state' | 'run_at'>, nowMs: number): boolean {
  const at = ms(job.run_at)
  return job.state === 'QUEUED' && at !== null && at > nowMs
}
