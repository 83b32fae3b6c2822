import { EngineError } from './errors'
import { type FinalStatus, type JobState, type Priority, PRIORITIES } from '../../../src-shared/job-states'

// The states, their groups and priorities are shared with the workers and the window.
export * from '../../../src-shared/job-states'

const FINISH: JobState[] = ['DONE', 'FAILED', 'CANCELED', 'TIMEOUT']

/** Every legal move. A move not listed here answers 409 `illegal_transition`. */
export const JOB_TRANSITIONS: Readonly<Record<JobState, readonly JobState[]>> = {
  QUEUED: ['CLAIMED', 'LEASED', 'RUNNING', 'CANCELED'],
  CLAIMED: ['PREPARING', 'LEASE_PENDING', 'RUNNING', 'QUEUED', 'CANCELED'],
  PREPARING: ['PREPARING', 'LEASE_PENDING', 'RUNNING', 'QUEUED', 'CANCELED'],
  LEASE_PENDING: ['PREPARING', 'LEASE_PENDING', 'RUNNING', 'QUEUED', 'CANCELED'],
  LEASED: ['RUNNING', 'QUEUED', 'BLOCKED', ...FINISH],
  RUNNING: ['QUEUED', 'BLOCKED', ...FINISH],
  BLOCKED: ['QUEUED', 'CANCELED'],
  DONE: [],
  // An operator's retry: a new run with a fresh attempt budget (engine/verbs/retry.ts).
  FAILED: ['QUEUED'],
  CANCELED: ['QUEUED'],
  TIMEOUT: ['QUEUED'],
}

export function canMove(from: JobState, to: JobState): boolean {
  return JOB_TRANSITIONS[from].includes(to)
}

/** Throws 409 `illegal_transition` unless `from → to` is in the table. */
export function assertMove(jobId: string, from: string, to: JobState): void {
  if (!canMove(from as JobState, to)) {
    throw new EngineError('illegal_transition', `Job ${jobId} cannot move from ${from} to ${to}`)
  }
}

/** Stored as an integer so that a higher number is picked first. */
export const priorityRank = (p: Priority): number => PRIORITIES.indexOf(p)
export const priorityName = (rank: number): Priority => PRIORITIES[rank] ?? 'NORMAL'

/** How an attempt ended (a lease's `release_status`): the worker's final status, or halted by a blocker. */
export type AttemptOutcome = FinalStatus | 'BLOCKED'
export const ATTEMPT_OUTCOMES = ['SUCCEEDED', 'FAILED', 'CANCELED', 'TIMEOUT', 'BLOCKED'] as const satisfies readonly AttemptOutcome[]
/** What became of the job when an attempt ended. */
export const ATTEMPT_DISPOSITIONS = ['REQUEUED', 'DEAD_LETTERED', 'FINAL', 'BLOCKED'] as const
export type AttemptDisposition = (typeof ATTEMPT_DISPOSITIONS)[number]
