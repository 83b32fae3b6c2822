import { EVENT_TYPES, eventMoves } from '../../src-shared/event-types'
import { type JobState as CanonicalState, shownState } from '../../src-shared/job-states'
import type { Job, JobState, LogEvent } from './api'
import { ms } from './time-format'

/** An event's state as the queue API shows it (LEASED as RUNNING): the dashboard speaks the queue API. */
export const displayState = (state: string): JobState => shownState(state as CanonicalState)

/** Events after which a job no longer holds its lease. */
export const LEASE_ENDING_EVENTS: ReadonlySet<LogEvent['type']> = new Set(EVENT_TYPES.filter((type) => eventMoves(type, 'job-state') && eventMoves(type, 'leases')))

const text = (value: unknown): string | null => (typeof value === 'string' ? value : null)
const num = (value: unknown): number | null => (typeof value === 'number' && Number.isFinite(value) ? value : null)

/**
 * One job as an event moves it: its state (every job event carries the state it moved to), the
 * attempt and lease of a grant, a cancel request, a status note. The same job if the event says
 * nothing about it.
 */
export function reduceJob(job: Job, event: LogEvent): Job {
  if (event.job_id !== job.job_id) return job
  const data = event.data ?? {}
  const state = text(data['state'])
  let next = job
  if (state && (eventMoves(event.type, 'job-list') || event.type === 'LEASE_DENIED')) {
    next = { ...next, state: displayState(state), updated_at: event.ts }
    // Why it waited was true of the state it left; the next read says why it waits now.
    if (next.state !== job.state) next = { ...next, waiting_reason: null, waiting_until: null }
  }
  switch (event.type) {
    case 'LEASE_GRANTED':
      next = { ...next, attempts: num(data['attempt']) ?? next.attempts, lease_id: event.entity_id, claimed_by: text(data['worker_id']) ?? next.claimed_by }
      break
    case 'JOB_CANCEL_REQUESTED':
      next = { ...next, cancel_requested: true }
      break
    case 'JOB_STATUS':
      next = { ...next, note: text(data['note']) ?? next.note }
      break
    case 'JOB_REQUEUED':
    case 'JOB_BLOCKED':
      // The progress and note were the attempt's that ended, as the host keeps them.
      next = { ...next, lease_id: null, progress: null, note: null }
      break
    case 'JOB_DONE':
    case 'JOB_FAILED':
    case 'JOB_TIMEOUT':
      // The attempt that ended: a row that missed the grant still counts it. A failure or
      // timeout that ran out of attempts says so (`dead_letter`), as a read of the job would.
      next = { ...next, attempts: Math.max(next.attempts, num(data['attempt']) ?? 0), dead_letter: data['dead_letter'] === true }
      break
    case 'JOB_RUN_NOW':
      // It waited for its time; the next read says what it waits for now, if anything.
      next = { ...next, run_at: null, waiting_reason: null, waiting_until: null }
      break
    case 'JOB_RETRIED':
      next = { ...next, max_attempts: num(data['max_attempts']) ?? next.max_attempts, dead_letter: false, cancel_requested: false, progress: null, note: null, run_at: null }
      break
  }
  return next
}

/** A page of jobs as an event moves them; the same array when no row changed. */
export function reduceJobs(jobs: readonly Job[], event: LogEvent): Job[] {
  if (!event.job_id || !jobs.some((j) => j.job_id === event.job_id)) return jobs as Job[]
  return jobs.map((job) => reduceJob(job, event))
}

/**
 * The newer of two versions of a job: the row on screen (moved by the events) or a read's
 * answer. An answer can arrive after events that moved the job further (a run-now answered
 * after the job's grant came over the stream): it must not take the row back. The job's
 * `updated_at` orders them; within one millisecond the answer wins only if it shows the same
 * state and at least as many attempts (then it only adds what events do not carry).
 */
export function newerJob(shown: Job, answer: Job): Job {
  const [a, b] = [ms(shown.updated_at) ?? 0, ms(answer.updated_at) ?? 0]
  if (b !== a) return b > a ? answer : shown
  return answer.state === shown.state && answer.attempts >= shown.attempts ? answer : shown
}
