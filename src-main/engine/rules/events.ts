import { EVENT_TYPES, type EventType } from '../../../src-shared/event-types'
import type { Resolution } from './blockers'
import type { CapacitySettings } from './capacity'
import type { Contention } from './file-leases'
import type { Overlap } from './schedules'
import type { JobState, Priority, TerminalState } from './states'

/**
 * The event log's types: one discriminated union over the one list of event types
 * (src-shared/event-types.ts). Each type has its entity and the shape of its data here, and what
 * it means to the host beyond its record (whether it wakes waiting claims, whether the
 * statistics count it) in {@link EVENT_ROLES}; the sets the host uses are derived from them.
 * `appendEvent` takes the union, so no event is written that is not declared here.
 */

export { EVENT_TYPES, type EventType }

/** What an event is about. */
export const ENTITY_TYPES = ['JOB', 'LEASE', 'FILE_LEASE', 'BLOCKER', 'WORKER', 'CAPACITY', 'SCHEDULE', 'QUEUE'] as const
export type EntityType = (typeof ENTITY_TYPES)[number]

/** An interface's fields as a plain object type: event data is a JSON object (a record of its fields). */
type Plain<T> = { [K in keyof T]: T[K] }

/** How the attempt of a lease ended and what became of its job (JOB_DONE, JOB_FAILED, JOB_TIMEOUT, and JOB_CANCELED at a release). */
type JobEnded = {
  state: TerminalState
  lease_id: string | null
  attempt: number
  dead_letter: boolean
}

/** A file lease that ended: by its owner, idle, reclaimed from a dead owner, with its job lease, or taken by an operator. */
type FileLeaseEnded = {
  file: string
  owner_id: string
  /** released, idle, reclaimed, owner_lease_expired, job_succeeded, job_failed, job_ended, job_blocked, force_released, overlapped */
  reason: string
  acquired_at: number
  last_heartbeat_at: number
  /** Why its owner counted as dead (idle, or its job lease ended), with the evidence. */
  because?: 'idle' | 'owner_lease_ended'
  at?: number
  idle_ms?: number
  owner_lease?: { lease_id: string; state: string | null; expires_at?: number; last_heartbeat_at?: number; released_at?: number | null }
  /** The owner that reclaimed it. */
  reclaimed_by?: string
  /** The operator who took it (force release). */
  by?: string
  /** The lease granted before it that it overlapped (`overlapped`): that lease kept its path. */
  overlapped?: { file_lease_id: string; file: string; owner_id: string; job_id: string | null; acquired_at: number }
}

/** A firing missed while the host was down, caught up with this one. */
type CaughtUp = {
  caught_up?: true
  missed_from?: number | null
}

/** Each event type: the entity it is about, and its data. */
/**
 * Why a lease expired: its heartbeats stopped (`no_heartbeat`), its worker's process exited
 * (`worker_exited`), the host restarted and the local worker that held it died with the host
 * before (`host_restarted`), or its grant never reached its worker, who gave it back
 * (`not_delivered`: the claim's worker was gone or had given up on the claim before it heard);
 * or its worker kept heartbeating without stopping the job past a limit (verbs/lease-limits.ts):
 * the TTL and grace after a cancel (`cancel_not_stopped`), or after its `max_runtime_s`
 * (`max_runtime_exceeded`, the attempt failed as the worker should have failed it).
 */
export type LeaseExpiryReason = 'no_heartbeat' | 'worker_exited' | 'host_restarted' | 'not_delivered' | 'cancel_not_stopped' | 'max_runtime_exceeded'

export interface EventShapes {
  JOB_SUBMITTED: {
    entity: 'JOB'
    data: { state: 'QUEUED'; job_type: string; priority: Priority; cost_units: number; queue: string; message_id: number; run_at?: number }
  }
  JOB_CLAIMED: { entity: 'JOB'; data: { state: 'CLAIMED'; worker_id: string } }
  JOB_CLAIM_EXPIRED: { entity: 'JOB'; data: { state: 'QUEUED'; worker_id: string | null } }
  JOB_STATUS: { entity: 'JOB'; data: { state: JobState; from: JobState; note: string | null } }
  JOB_RUNNING: { entity: 'JOB'; data: { state: 'RUNNING'; lease_id: string } }
  /** After a failed or expired attempt (with its backoff), or an operator's answer to a blocker. */
  JOB_REQUEUED: { entity: 'JOB'; data: { state: 'QUEUED'; reason: string; attempt?: number; next_retry_at?: number; message_id: number } }
  JOB_DONE: { entity: 'JOB'; data: JobEnded }
  JOB_FAILED: { entity: 'JOB'; data: JobEnded }
  JOB_TIMEOUT: { entity: 'JOB'; data: JobEnded }
  /** At its lease's release (as JOB_DONE), or at once from a state that holds no lease. */
  /** `requested_by`: who asked for the cancel, as the request named them (the command line's `--by`, `operator` by default); null when none was named, or the engine ended it on its own. */
  JOB_CANCELED: { entity: 'JOB'; data: JobEnded | { state: 'CANCELED'; from: JobState; reason: string | null; requested_by: string | null } }
  JOB_CANCEL_REQUESTED: { entity: 'JOB'; data: { state: JobState; reason: string | null; requested_by: string | null } }
  JOB_BLOCKED: { entity: 'JOB'; data: { state: 'BLOCKED'; blocker_id: string; lease_id: string } }
  JOB_EXCEEDS_CAPACITY: { entity: 'JOB'; data: { state: JobState; cost_units: number; total_units: number } }
  JOB_RETRIED: {
    entity: 'JOB'
    data: { state: 'QUEUED'; from: JobState; requested_by: string | null; attempts: number; max_attempts: number; message_id: number }
  }
  JOB_RUN_NOW: { entity: 'JOB'; data: { state: 'QUEUED'; run_at: number | null; requested_by: string | null } }
  LEASE_GRANTED: {
    entity: 'LEASE'
    data: { state: 'LEASED' | 'RUNNING'; worker_id: string; cost_units: number; attempt: number; fence: number; expires_at: number }
  }
  /** A queue API lease request denied: recorded on the job, which waits in LEASE_PENDING. */
  LEASE_DENIED: { entity: 'JOB'; data: { state: 'LEASE_PENDING'; reason: string } }
  LEASE_EXPIRED: {
    entity: 'LEASE'
    data: { reason: LeaseExpiryReason; worker_id: string; expires_at: number; last_heartbeat_at: number }
  }
  FILE_LEASE_ACQUIRED: { entity: 'FILE_LEASE'; data: { file: string; owner_id: string; lease_id: string | null } }
  FILE_LEASE_RELEASED: { entity: 'FILE_LEASE'; data: FileLeaseEnded }
  FILE_LEASE_REVOKED: { entity: 'FILE_LEASE'; data: FileLeaseEnded }
  /** The contention heartbeat: a denied acquire, with its one retry. */
  FILE_LEASE_CONTENDED: { entity: 'FILE_LEASE'; data: Plain<Contention> & { requester_owner_id: string } }
  BLOCKER_OPENED: {
    entity: 'BLOCKER'
    data: {
      file: string
      holder_owner_id: string
      holder_job_id: string | null
      /** The path the holder held: the file, a folder above it, or a path inside it. */
      holder_file: string
      age_s: number
      retry_s: number
      denied_at: number
      retried_at: number
      requester_owner_id: string
    }
  }
  BLOCKER_RESOLVED: { entity: 'BLOCKER'; data: { action: Resolution; note: string | null; by: string; file: string } }
  CAPACITY_CHANGED: { entity: 'CAPACITY'; data: Plain<CapacitySettings> }
  BUSY_MEASURED: { entity: 'CAPACITY'; data: { busy_rating: number } }
  /** Something about a worker that an operator should see (a handler that failed to load…). */
  WORKER_PROBLEM: { entity: 'WORKER'; data: WorkerProblem }
  SCHEDULE_CREATED: {
    entity: 'SCHEDULE'
    data: { name: string; cron: string; timezone: string; overlap: Overlap; enabled: boolean; job_type: string; next_fire_at: number | null }
  }
  SCHEDULE_UPDATED: { entity: 'SCHEDULE'; data: { name: string; changed: string[]; enabled: boolean; next_fire_at: number | null } }
  SCHEDULE_DELETED: { entity: 'SCHEDULE'; data: { name: string } }
  SCHEDULE_FIRED: { entity: 'SCHEDULE'; data: { name: string; fire_at: number; job_id: string; next_fire_at: number | null } & CaughtUp }
  /** Skipped for overlap, refused by the submit (`reason` its code), or a stored expression that no longer parses. */
  SCHEDULE_SKIPPED: {
    entity: 'SCHEDULE'
    data: { name: string; fire_at: number | null; reason: string; running_job_id?: string; detail?: string } & CaughtUp
  }
  QUEUE_PAUSED: { entity: 'QUEUE'; data: { queue: string; requested_by: string | null } }
  QUEUE_RESUMED: { entity: 'QUEUE'; data: { queue: string; requested_by: string | null } }
}

/** What a worker reports for an operator to see. */
export type WorkerProblem = {
  kind: string
  detail: string
}

/** The entity an event of this type is about. */
export type EventEntity<T extends EventType> = EventShapes[T]['entity']
/** The data of an event of this type. */
export type EventData<T extends EventType> = EventShapes[T]['data']

/**
 * An event of the log as listeners see it and the log reads back: the stored row with its data
 * parsed, `event_type` telling which data it carries. Times are epoch milliseconds.
 */
export type EngineEvent = {
  [T in EventType]: {
    /** Increasing; the event stream's `id:`, from which a client resumes. */
    id: number
    ts: number
    entity_type: EventEntity<T>
    entity_id: string
    /** The job this event belongs to, if any: a job's timeline includes its leases' events. */
    job_id: string | null
    event_type: T
    data: EventData<T>
  }
}[EventType]

/** A compile-time check: the union declares exactly the types of the one list, no more, no fewer. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false
const declaresEveryType: Same<keyof EventShapes, EventType> = true
void declaresEveryType

interface EventRole {
  /**
   * Work or capacity may have become available: waiting claims are offered the queue again
   * inside the commit that holds the event (src-main/dispatch/dispatch.ts).
   */
  wakes: boolean
  /**
   * The statistics count it: the snapshot's last 24 h, the time series' counts, and what
   * retention keeps of a deleted job's events (stats_counts). Its own partial index holds these.
   */
  counted: boolean
}

const NEITHER: EventRole = { wakes: false, counted: false }
const WAKES: EventRole = { wakes: true, counted: false }
const WAKES_AND_COUNTED = { wakes: true, counted: true } as const

/** What each event type means to the host beyond its record. Every type is here: a new one decides both. */
export const EVENT_ROLES = {
  JOB_SUBMITTED: WAKES,
  JOB_CLAIMED: NEITHER,
  JOB_CLAIM_EXPIRED: WAKES,
  JOB_STATUS: NEITHER,
  JOB_RUNNING: NEITHER,
  JOB_REQUEUED: WAKES,
  JOB_DONE: WAKES_AND_COUNTED,
  JOB_FAILED: WAKES_AND_COUNTED,
  JOB_TIMEOUT: WAKES_AND_COUNTED,
  JOB_CANCELED: WAKES_AND_COUNTED,
  JOB_CANCEL_REQUESTED: NEITHER,
  JOB_BLOCKED: NEITHER,
  JOB_EXCEEDS_CAPACITY: NEITHER,
  JOB_RETRIED: WAKES,
  JOB_RUN_NOW: WAKES,
  LEASE_GRANTED: NEITHER,
  LEASE_DENIED: NEITHER,
  LEASE_EXPIRED: WAKES_AND_COUNTED,
  FILE_LEASE_ACQUIRED: NEITHER,
  FILE_LEASE_RELEASED: NEITHER,
  FILE_LEASE_REVOKED: NEITHER,
  FILE_LEASE_CONTENDED: NEITHER,
  BLOCKER_OPENED: NEITHER,
  BLOCKER_RESOLVED: NEITHER,
  CAPACITY_CHANGED: WAKES,
  BUSY_MEASURED: WAKES,
  WORKER_PROBLEM: NEITHER,
  SCHEDULE_CREATED: NEITHER,
  SCHEDULE_UPDATED: NEITHER,
  SCHEDULE_DELETED: NEITHER,
  SCHEDULE_FIRED: NEITHER,
  SCHEDULE_SKIPPED: NEITHER,
  QUEUE_PAUSED: NEITHER,
  QUEUE_RESUMED: WAKES,
} as const satisfies Record<EventType, EventRole>

/** The event types the statistics count. */
export type CountedEvent = { [T in EventType]: (typeof EVENT_ROLES)[T]['counted'] extends true ? T : never }[EventType]

/** The counted event types, in the order of the one list (the order of COUNTED_EVENTS_CLAUSE). */
export const COUNTED_EVENTS: readonly CountedEvent[] = EVENT_TYPES.filter((type): type is CountedEvent => EVENT_ROLES[type].counted)

/** The event types after which a waiting claim may now succeed: work arrived, or capacity came back. */
export const WAKE_EVENTS: ReadonlySet<EventType> = new Set(EVENT_TYPES.filter((type) => EVENT_ROLES[type].wakes))

/** The event that records a job's end in each final state (typed, instead of `JOB_${state}`). */
export const JOB_ENDED_EVENTS = {
  DONE: 'JOB_DONE',
  FAILED: 'JOB_FAILED',
  TIMEOUT: 'JOB_TIMEOUT',
  CANCELED: 'JOB_CANCELED',
} as const satisfies Record<TerminalState, EventType>
