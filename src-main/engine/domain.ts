import type { AttemptRow, BlockerRow, EventRow, FileLeaseRow, JobRow, LeaseRow } from '../db/schema'
import type * as batch from './verbs/batch'
import type { Resolution } from './rules/blockers'
import type { EngineEvent } from './rules/events'
import type { Contention } from './rules/file-leases'
import type * as files from './verbs/files'
import type * as jobs from './verbs/jobs'
import type { AttemptAnswer } from './verbs/attempt-reports'
import type { JobLeaseDecision as JobLeaseDecisionRows, LeaseDecision as LeaseDecisionRows, LeasedHeads } from './verbs/grants'
import type { Leased as LeasedRows } from './store/rows'
import type { AttemptDisposition, AttemptOutcome, FinalStatus, JobState, LeaseState, Priority } from './rules/states'
import { priorityName } from './rules/states'
import { parseStored } from './store/stored-value'

/**
 * The engine's domain types: what it hands out, decoded (booleans for 0/1 columns, values for
 * JSON text, unions for states), and the one place its rows become them. Outside `engine/` and
 * `db/` nobody sees a row; the HTTP views, the IPC answers and the CLI render these. Times are
 * epoch milliseconds (ISO strings only at the edges).
 *
 * The worker's exchange (claims, heartbeats and reports by token) hands out narrow answers,
 * {@link Assignment}, {@link LeaseExtended} and {@link AttemptEnded}, built once from the rows it
 * already holds: no decoded copy of the whole job on that path.
 */

const parse = parseStored

/** A job: what was submitted, where it is in its life, and how it ended. */
export interface Job {
  id: string
  addon_id: string | null
  job_type: string
  priority: Priority
  cost_units: number
  constraints: Record<string, boolean>
  payload: unknown
  unique: boolean
  /** the queue API's `client_request_id`: a submit repeating it gets this job back. */
  idempotency_key: string | null
  tags: string[]
  max_runtime_s: number | null
  /** the worker API calls it a stream. */
  queue: string
  /** The most attempts the job may have had, all runs counted (an operator's retry raises it). */
  max_attempts: number
  state: JobState
  attempts: number
  claimed_by: string | null
  claim_expires_at: number | null
  /** The current lease, or the last one once the job has ended. */
  lease_id: string | null
  /** the worker API's transport: the stream message that delivers the job's current or next attempt (a new one at each submit and requeue). */
  stream_message_id: number | null
  /** When a requeued job may be taken again (its backoff); null if it may now. */
  next_retry_at: number | null
  /** When the job became eligible (submit, its `run_at`, or the end of its backoff): the FIFO key. */
  eligible_at: number
  /** A delayed job's time; null when it was not delayed, or an operator ran it at once. */
  run_at: number | null
  cancel_requested: boolean
  progress: number | null
  note: string | null
  /** The job ended because it ran out of attempts. */
  dead_letter: boolean
  final_status: FinalStatus | null
  result: unknown
  error: unknown
  metrics: unknown
  created_at: number
  updated_at: number
  started_at: number | null
  finished_at: number | null
}

export function toJob(row: JobRow): Job {
  return {
    id: row.id,
    addon_id: row.addon_id,
    job_type: row.job_type,
    priority: priorityName(row.priority),
    cost_units: row.cost_units,
    constraints: parse(row.constraints) as Record<string, boolean>,
    // Absent from the rows of a list asked without payloads (reads/list.ts).
    payload: row.payload === undefined ? undefined : parse(row.payload),
    unique: row.is_unique === 1,
    idempotency_key: row.idempotency_key,
    tags: parse(row.tags) as string[],
    max_runtime_s: row.max_runtime_s,
    queue: row.queue,
    max_attempts: row.max_attempts,
    state: row.state as JobState,
    attempts: row.attempts,
    claimed_by: row.claimed_by,
    claim_expires_at: row.claim_expires_at,
    lease_id: row.lease_id,
    stream_message_id: row.stream_message_id,
    next_retry_at: row.next_retry_at,
    eligible_at: row.eligible_at,
    run_at: row.run_at,
    cancel_requested: row.cancel_requested === 1,
    progress: row.progress,
    note: row.note,
    dead_letter: row.dead_letter === 1,
    final_status: row.final_status as FinalStatus | null,
    result: parse(row.result),
    error: parse(row.error),
    metrics: parse(row.metrics),
    created_at: row.created_at,
    updated_at: row.updated_at,
    started_at: row.started_at,
    finished_at: row.finished_at,
  }
}

export { ATTEMPT_DISPOSITIONS, ATTEMPT_OUTCOMES, type AttemptDisposition, type AttemptOutcome } from './rules/states'

/** A submit's answer: the job, and whether it was already known by its idempotency key (nothing written then). */
export interface SubmitResult {
  job: Job
  duplicate: boolean
}

export const toSubmitResult = (result: jobs.SubmitResult): SubmitResult => ({ job: toJob(result.job), duplicate: result.duplicate })

/** A page of jobs, newest first; `next_cursor` names the next page. */
export interface JobPage {
  jobs: Job[]
  next_cursor: string | null
}

/** Capacity held by one worker for one job; it runs one attempt of the job. */
export interface Lease {
  id: string
  job_id: string
  /** The attempt this lease runs. */
  attempt_id: string
  worker_id: string
  addon_id: string | null
  cost_units: number
  ttl_s: number
  grace_s: number
  state: LeaseState
  /** Secret, for the holder only: the worker API names the lease by it. */
  token: string
  /** Strictly increases with every lease granted, anywhere. */
  fence: number
  granted_at: number
  last_heartbeat_at: number
  /** now + ttl + grace at the grant and at every heartbeat. */
  expires_at: number
  released_at: number | null
  release_status: AttemptOutcome | null
}

export function toLease(row: LeaseRow): Lease {
  return {
    id: row.id,
    job_id: row.job_id,
    attempt_id: row.attempt_id,
    worker_id: row.worker_id,
    addon_id: row.addon_id,
    cost_units: row.cost_units,
    ttl_s: row.ttl_s,
    grace_s: row.grace_s,
    state: row.state as LeaseState,
    token: row.token,
    fence: row.fence,
    granted_at: row.granted_at,
    last_heartbeat_at: row.last_heartbeat_at,
    expires_at: row.expires_at,
    released_at: row.released_at,
    release_status: row.release_status as AttemptOutcome | null,
  }
}

/** An ACTIVE lease with its job's type, as the dashboard lists it. */
export type ActiveLease = Lease & { job_type: string }

export const toActiveLease = (row: LeaseRow & { job_type: string }): ActiveLease => ({ ...toLease(row), job_type: row.job_type })

/**
 * One execution of a job (the attempt columns of its lease, db/schema.ts AttemptRow), its
 * outcome and disposition typed and its error parsed.
 */
export interface Attempt extends Omit<AttemptRow, 'outcome' | 'disposition' | 'error'> {
  /** Null while it runs. */
  outcome: AttemptOutcome | null
  /** Null while it runs. */
  disposition: AttemptDisposition | null
  /** What the worker (or the host) reported, usually `{code, message}`; null without one. */
  error: unknown
}

export function toAttempt(row: AttemptRow): Attempt {
  return {
    ...row,
    outcome: row.outcome as AttemptOutcome | null,
    disposition: row.disposition as AttemptDisposition | null,
    error: parse(row.error),
  }
}

export const FILE_LEASE_STATES = ['ACTIVE', 'RELEASED', 'REVOKED'] as const
/** REVOKED: taken by an operator's force release (the owner's later writes under it are refused). */
export type FileLeaseState = (typeof FILE_LEASE_STATES)[number]

/** The right of one owner to mutate one file, keyed by the file's normalized absolute path. */
export interface FileLease {
  id: string
  file: string
  owner_id: string
  /** The job lease it is held under, if any: the owner is alive while that lease is ACTIVE. */
  lease_id: string | null
  job_id: string | null
  state: FileLeaseState
  acquired_at: number
  last_heartbeat_at: number
  released_at: number | null
  /** released, idle, reclaimed, job_succeeded, job_failed, job_ended, force_released, overlapped, … */
  release_reason: string | null
}

export function toFileLease(row: FileLeaseRow): FileLease {
  return {
    id: row.id,
    file: row.file,
    owner_id: row.owner_id,
    lease_id: row.lease_id,
    job_id: row.job_id,
    state: row.state as FileLeaseState,
    acquired_at: row.acquired_at,
    last_heartbeat_at: row.last_heartbeat_at,
    released_at: row.released_at,
    release_reason: row.release_reason,
  }
}

export const BLOCKER_STATES = ['OPEN', 'RESOLVED'] as const
export type BlockerState = (typeof BLOCKER_STATES)[number]

/** A blocker report: a job still blocked on a file after its one retry, halted until an operator answers. */
export interface Blocker {
  id: string
  file: string
  holder_owner_id: string
  holder_job_id: string | null
  /** The path the holder held: the file, a folder above it, or a path inside it. */
  holder_file: string
  holder_acquired_at: number
  holder_last_heartbeat_at: number
  /** Whether that holder still holds the file as the report is read (false once it let go, or lost it to a force_release). */
  holder_holds_now: boolean
  /**
   * Since when it holds the file now: `holder_acquired_at` while it holds the lease the report
   * names; later when its job holds the file again under a new attempt; null when it does not.
   */
  holder_holds_since: number | null
  retry_s: number
  denied_at: number
  retried_at: number
  requester_owner_id: string
  requester_job_id: string | null
  requester_lease_id: string | null
  state: BlockerState
  resolution: Resolution | null
  note: string | null
  resolved_by: string | null
  resolved_at: number | null
  /** An answered force_release: whether the named holder still held the file and lost it (false: nothing was taken); null otherwise. */
  taken_from_holder: boolean | null
  created_at: number
}

export function toBlocker(row: BlockerRow, holderHoldsSince: number | null): Blocker {
  return {
    id: row.id,
    file: row.file,
    holder_owner_id: row.holder_owner_id,
    holder_job_id: row.holder_job_id,
    holder_file: row.holder_file ?? row.file,
    holder_acquired_at: row.holder_acquired_at,
    holder_last_heartbeat_at: row.holder_last_heartbeat_at,
    holder_holds_now: holderHoldsSince !== null,
    holder_holds_since: holderHoldsSince,
    retry_s: row.retry_s,
    denied_at: row.denied_at,
    retried_at: row.retried_at,
    requester_owner_id: row.requester_owner_id,
    requester_job_id: row.requester_job_id,
    requester_lease_id: row.requester_lease_id,
    state: row.state as BlockerState,
    resolution: row.resolution as Resolution | null,
    note: row.note,
    resolved_by: row.resolved_by,
    resolved_at: row.resolved_at,
    taken_from_holder: row.taken_from_holder === null ? null : row.taken_from_holder === 1,
    created_at: row.created_at,
  }
}

/** An event of the log, its data parsed: the union of events.ts. */
export type Event = EngineEvent

/** A stored event as the log reads it back (its type and data were checked by the union when appended). */
export function toEvent(row: EventRow): Event {
  return {
    id: row.id,
    ts: row.ts,
    entity_type: row.entity_type,
    entity_id: row.entity_id,
    job_id: row.job_id,
    event_type: row.event_type,
    data: parseStored(row.data),
  } as Event
}

// ---------------------------------------------------------------------------------------------
// Decisions and answers

/** A request that leased nothing: why, and when to ask again. */
export interface Denial {
  granted: false
  reason: string
  retry_after_ms: number
}

/** A lease and its job, as they are after the call. */
export interface Leased {
  lease: Lease
  job: Job
}

export const toLeased = (leased: LeasedRows): Leased => ({ lease: toLease(leased.lease), job: toJob(leased.job) })

/** A lease request of the pull API (or one claim of the worker API): the head job leased, or a denial. */
export type LeaseDecision = ({ granted: true; /** The stream message that delivers this attempt. */ message_id: number | null } & Leased) | Denial

export const toLeaseDecision = (decision: LeaseDecisionRows): LeaseDecision =>
  decision.granted ? { granted: true, message_id: decision.message_id, ...toLeased(decision) } : decision

/** the queue API's lease request for a claimed job: approved with the lease, or denied (the job waits in LEASE_PENDING). */
export type JobLeaseDecision = ({ approved: true } & Leased) | { approved: false; reason: string; retry_after_sec: number; job: Job }

export const toJobLeaseDecision = (decision: JobLeaseDecisionRows): JobLeaseDecision =>
  decision.approved ? { approved: true, ...toLeased(decision) } : { ...decision, job: toJob(decision.job) }

export interface Released extends Leased {
  /** True when this repeated a release that had already taken effect. */
  replay: boolean
}

/**
 * A job handed to a worker under a new lease (the worker API's claim, a local worker's exchange):
 * what the worker needs to run it and to speak of its lease.
 */
export interface Assignment {
  granted: true
  job_id: string
  job_type: string
  /** The job's queue (the worker API's stream). */
  queue: string
  payload: unknown
  max_runtime_s: number | null
  lease_id: string
  attempt_id: string
  /** Secret: names the lease in the worker's heartbeats and reports. */
  lease_token: string
  ttl_s: number
  /** The stream message that delivers this attempt. */
  message_id: number | null
}

export function toAssignment(granted: LeaseDecisionRows & { granted: true }): Assignment {
  const { lease, job } = granted
  return {
    granted: true,
    job_id: job.id,
    job_type: job.job_type,
    queue: job.queue,
    payload: parse(job.payload),
    max_runtime_s: job.max_runtime_s,
    lease_id: lease.id,
    attempt_id: lease.attempt_id,
    lease_token: lease.token,
    ttl_s: lease.ttl_s,
    message_id: granted.message_id,
  }
}

/** A claim of up to N jobs: the assignments, and the denial that stopped it short, if one did. */
export interface Claims {
  granted: Assignment[]
  denial: Denial | null
}

export const toClaims = (heads: LeasedHeads): Claims => ({ granted: heads.granted.map(toAssignment), denial: heads.denial })

/** A heartbeat's answer to the worker that holds the lease: until when it holds, and whether to stop. */
export interface LeaseExtended {
  lease_id: string
  expires_at: number
  /** The job was canceled: the worker stops it. */
  cancel_requested: boolean
}

export const toLeaseExtended = ({ lease, job }: LeasedRows): LeaseExtended => ({
  lease_id: lease.id,
  expires_at: lease.expires_at,
  cancel_requested: job.cancel_requested === 1,
})

/** A worker's completion or failure of an attempt, as taken (or as first taken, when repeated). */
export interface AttemptEnded {
  /** The stream message may be acknowledged. */
  ack: boolean
  /** Retryable with attempts left: queued again after a backoff. */
  requeued: boolean
  /** Dead-lettered: no attempts left. */
  dlq: boolean
}

export const toAttemptEnded = ({ ack, requeued, dlq }: AttemptAnswer): AttemptEnded => ({ ack, requeued, dlq })

/** A batch item's value decoded; a refusal passes as it is. */
export function toItem<T, U>(result: batch.ItemResult<T>, decode: (value: T) => U): batch.ItemResult<U> {
  return result.ok ? { ok: true, value: decode(result.value) } : result
}

/** A worker's exchange answered: each report as its one-job verb answers it, then the jobs claimed. */
export interface ExchangeAnswer {
  heartbeats: batch.ItemResult<LeaseExtended>[]
  completed: batch.ItemResult<AttemptEnded>[]
  failed: batch.ItemResult<AttemptEnded>[]
  claimed: Claims
}

export const toExchangeAnswer = (answer: batch.ExchangeAnswer): ExchangeAnswer => ({
  heartbeats: answer.heartbeats.map((result) => toItem(result, toLeaseExtended)),
  completed: answer.completed.map((result) => toItem(result, toAttemptEnded)),
  failed: answer.failed.map((result) => toItem(result, toAttemptEnded)),
  claimed: toClaims(answer.claimed),
})

/** A file acquire: granted, or refused with the contention (the one retry) or the blocker report that halted the requester. */
export type AcquireResult =
  | { granted: true; file_lease: FileLease }
  | { granted: false; code: 'file_lease_held'; contention: Contention }
  | { granted: false; code: 'blocked'; blocker: Blocker }

export function toAcquireResult(result: files.AcquireResult): AcquireResult {
  if (result.granted) return { granted: true, file_lease: toFileLease(result.file_lease) }
  // A report made at this refusal: its holder holds the file, which is why the job halts.
  if (result.code === 'blocked') return { granted: false, code: 'blocked', blocker: toBlocker(result.blocker, result.blocker.holder_acquired_at) }
  return result
}
