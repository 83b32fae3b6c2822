import { EngineError } from './errors'

/**
 * The canonical job states. Each dialect renders them its own way (src-main/http/views), but
 * every move goes through {@link JOB_TRANSITIONS}. docs/states.md draws the same table.
 */
export const JOB_STATES = [
  /** Waiting to be picked (a requeued job also waits out its `next_retry_at`, a delayed one its `run_at`). */
  'QUEUED',
  /** Taken by a dialect-002 worker; returns to QUEUED if the claim expires. */
  'CLAIMED',
  /** The claiming worker is getting ready (dialect 002 status update). */
  'PREPARING',
  /** The claiming worker is asking for a lease (its status update), or was denied one; it asks again later. */
  'LEASE_PENDING',
  /** A lease was granted through dialect 001; the first heartbeat makes it RUNNING. */
  'LEASED',
  /** A worker holds a lease and runs the job. */
  'RUNNING',
  /** Halted by a file-lease blocker; waits for an operator's answer. */
  'BLOCKED',
  /** Finished successfully. */
  'DONE',
  /** Finished with a failure that is not retried (an operator may retry it). */
  'FAILED',
  /** Canceled before or while it ran (an operator may retry it). */
  'CANCELED',
  /** Its last lease expired with no attempts left (dead-lettered; an operator may retry it). */
  'TIMEOUT',
] as const

export type JobState = (typeof JOB_STATES)[number]

/** The states a job ends in. */
export type TerminalState = 'DONE' | 'FAILED' | 'CANCELED' | 'TIMEOUT'
export const TERMINAL_STATES: ReadonlySet<JobState> = new Set<TerminalState>(['DONE', 'FAILED', 'CANCELED', 'TIMEOUT'])

/** States from which a job is canceled at once; LEASED and RUNNING only get `cancel_requested`. */
export const CANCEL_AT_ONCE_STATES: ReadonlySet<JobState> = new Set([
  'QUEUED',
  'CLAIMED',
  'PREPARING',
  'LEASE_PENDING',
  'BLOCKED',
])

/** States in which a dialect-002 claim holds the job (and may expire). */
export const CLAIM_STATES: ReadonlySet<JobState> = new Set(['CLAIMED', 'PREPARING', 'LEASE_PENDING'])

/** States from which dialect 002 may request a lease: exactly the claimed ones. */
export const LEASE_REQUEST_STATES = CLAIM_STATES

/** The states in which a job waits for something; the others run or have ended. */
export const WAITING_STATES: ReadonlySet<JobState> = new Set(['QUEUED', 'CLAIMED', 'PREPARING', 'LEASE_PENDING', 'BLOCKED'])

/** States in which a job holds an ACTIVE lease. */
export const LEASED_STATES: ReadonlySet<JobState> = new Set(['LEASED', 'RUNNING'])

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
  // An operator's retry: a new run with a fresh attempt budget (engine/retry.ts).
  FAILED: ['QUEUED'],
  CANCELED: ['QUEUED'],
  TIMEOUT: ['QUEUED'],
}

/** The finished states an operator may retry (DONE is not: a success is submitted again instead). */
export const RETRYABLE_STATES: ReadonlySet<JobState> = new Set(['FAILED', 'CANCELED', 'TIMEOUT'])

export function canMove(from: JobState, to: JobState): boolean {
  return JOB_TRANSITIONS[from].includes(to)
}

/** Throws 409 `illegal_transition` unless `from → to` is in the table. */
export function assertMove(jobId: string, from: string, to: JobState): void {
  if (!canMove(from as JobState, to)) {
    throw new EngineError('illegal_transition', `Job ${jobId} cannot move from ${from} to ${to}`)
  }
}

export const PRIORITIES = ['LOW', 'NORMAL', 'HIGH', 'URGENT'] as const
export type Priority = (typeof PRIORITIES)[number]

/** Stored as an integer so that a higher number is picked first. */
export const priorityRank = (p: Priority): number => PRIORITIES.indexOf(p)
export const priorityName = (rank: number): Priority => PRIORITIES[rank] ?? 'NORMAL'

export const LEASE_STATES = ['ACTIVE', 'EXPIRED', 'RELEASED'] as const
export type LeaseState = (typeof LEASE_STATES)[number]

/** How an attempt, and a lease release, ended. */
export const FINAL_STATUSES = ['SUCCEEDED', 'FAILED', 'CANCELED', 'TIMEOUT'] as const
export type FinalStatus = (typeof FINAL_STATUSES)[number]
