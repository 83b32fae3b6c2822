/**
 * The vocabulary of job and lease states that the host, the workers and the window share: the
 * states, their groups, priorities, and how attempts end. Every move between job states goes
 * through the engine's one transition table (src-main/engine/rules/states.ts); docs/states.md draws it.
 */

/**
 * The canonical job states. Each API renders them its own way (src-main/http/views), but every
 * move goes through the engine's transition table.
 */
export const JOB_STATES = [
  /** Waiting to be picked (a requeued job also waits out its `next_retry_at`, a delayed one its `run_at`). */
  'QUEUED',
  /** Taken by a queue API worker; returns to QUEUED if the claim expires. */
  'CLAIMED',
  /** The claiming worker is getting ready (the queue API status update). */
  'PREPARING',
  /** The claiming worker is asking for a lease (its status update), or was denied one; it asks again later. */
  'LEASE_PENDING',
  /** A lease was granted through the pull API; the first heartbeat makes it RUNNING. */
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

/** A state as the queue API shows it: every state but LEASED (see {@link shownState}). */
export type ShownState = Exclude<JobState, 'LEASED'>

/**
 * A state as the queue API shows it, and with it the operations routes, the command line, the
 * window and every refusal whose detail names a job's state: LEASED (a pull API grant whose first
 * heartbeat has not come) shows as RUNNING, the state of every job whose worker holds its lease;
 * each other state as it is. The pull API shows its own words (src-main/http/views/pull.ts).
 */
export function shownState(state: JobState): ShownState {
  return state === 'LEASED' ? 'RUNNING' : state
}

/** The states {@link shownState} shows, in the canonical order: a filter by state names one of these. */
export const SHOWN_STATES: readonly ShownState[] = JOB_STATES.filter((state): state is ShownState => shownState(state) === state)

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

/** States in which a queue API claim holds the job (and may expire). */
export const CLAIM_STATES: ReadonlySet<JobState> = new Set(['CLAIMED', 'PREPARING', 'LEASE_PENDING'])

/** States from which the queue API may request a lease: exactly the claimed ones. */
export const LEASE_REQUEST_STATES = CLAIM_STATES

/** The states in which a job waits for something; the others run or have ended. */
export const WAITING_STATES: ReadonlySet<JobState> = new Set(['QUEUED', 'CLAIMED', 'PREPARING', 'LEASE_PENDING', 'BLOCKED'])

/** States in which a job holds an ACTIVE lease. */
export const LEASED_STATES: ReadonlySet<JobState> = new Set(['LEASED', 'RUNNING'])

/**
 * The states of a dead-lettered job (`dead_letter`: it ran out of attempts): a retryable failure
 * on its last attempt ends FAILED, an expired last lease TIMEOUT. An operator's retry clears the mark.
 */
export const DEAD_LETTER_STATES = ['FAILED', 'TIMEOUT'] as const satisfies readonly JobState[]

/** The finished states an operator may retry (DONE is not: a success is submitted again instead). */
export const RETRYABLE_STATES: ReadonlySet<JobState> = new Set(['FAILED', 'CANCELED', 'TIMEOUT'])

export const PRIORITIES = ['LOW', 'NORMAL', 'HIGH', 'URGENT'] as const
export type Priority = (typeof PRIORITIES)[number]

export const LEASE_STATES = ['ACTIVE', 'EXPIRED', 'RELEASED'] as const
export type LeaseState = (typeof LEASE_STATES)[number]

/** How an attempt, and a lease release, ended. */
export const FINAL_STATUSES = ['SUCCEEDED', 'FAILED', 'CANCELED', 'TIMEOUT'] as const
export type FinalStatus = (typeof FINAL_STATUSES)[number]
