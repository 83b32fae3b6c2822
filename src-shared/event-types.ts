/**
 * Every type of event the host writes to its log: the one list. The engine gives each type its
 * entity and the shape of its data (src-main/engine/rules/events.ts, a discriminated union over this
 * list) and derives from it which events wake a waiting claim and which the statistics count; the
 * API documents it as the event stream's names (the `EventType` schema), and the dashboard
 * listens to each by name. A plain constant, so the host and the dashboard import the same one.
 */
export const EVENT_TYPES = [
  'JOB_SUBMITTED',
  'JOB_CLAIMED',
  'JOB_CLAIM_EXPIRED',
  'JOB_STATUS',
  'JOB_RUNNING',
  'JOB_REQUEUED',
  'JOB_DONE',
  'JOB_FAILED',
  'JOB_TIMEOUT',
  'JOB_CANCELED',
  'JOB_CANCEL_REQUESTED',
  'JOB_BLOCKED',
  'JOB_EXCEEDS_CAPACITY',
  'JOB_RETRIED',
  'JOB_RUN_NOW',
  'LEASE_GRANTED',
  'LEASE_DENIED',
  'LEASE_EXPIRED',
  'FILE_LEASE_ACQUIRED',
  'FILE_LEASE_RELEASED',
  'FILE_LEASE_REVOKED',
  'FILE_LEASE_CONTENDED',
  'BLOCKER_OPENED',
  'BLOCKER_RESOLVED',
  'CAPACITY_CHANGED',
  'BUSY_MEASURED',
  'WORKER_PROBLEM',
  'SCHEDULE_CREATED',
  'SCHEDULE_UPDATED',
  'SCHEDULE_DELETED',
  'SCHEDULE_FIRED',
  'SCHEDULE_SKIPPED',
  'QUEUE_PAUSED',
  'QUEUE_RESUMED',
] as const

export type EventType = (typeof EVENT_TYPES)[number]

/**
 * What the dashboard reads that an event can change, so that each part of it reads again on its
 * own events only:
 * - `job-state`: a job's state or record moved — every JOB_ event;
 * - `job-list`: a row of the job list or a queue's counts — every JOB_ event, and the grant that
 *   puts its attempt and holder on the job;
 * - `leases`: a lease taken or given back — the grant, its expiry, and the ends of a job that free
 *   it (done, failed, canceled, timed out, requeued, blocked);
 * - `capacity`: the pool's size or the busy rating;
 * - `workers`: a worker's own record (a problem it reported);
 * - `blockers`, `queues` (a queue's settings), `schedules`: those records.
 */
export type EventSubject = 'job-state' | 'job-list' | 'leases' | 'capacity' | 'workers' | 'blockers' | 'queues' | 'schedules'

/** A job's end that frees the lease it held. */
const ENDS_LEASE = ['job-state', 'job-list', 'leases'] as const
/** Any other move of a job. */
const MOVES_JOB = ['job-state', 'job-list'] as const

/**
 * What each type of event moves. Every type is here (`satisfies` makes a new type a compile
 * error until it says what it moves), and an empty list moves nothing the dashboard reads.
 */
export const EVENT_MOVES = {
  JOB_SUBMITTED: MOVES_JOB,
  JOB_CLAIMED: MOVES_JOB,
  JOB_CLAIM_EXPIRED: MOVES_JOB,
  JOB_STATUS: MOVES_JOB,
  JOB_RUNNING: MOVES_JOB,
  JOB_REQUEUED: ENDS_LEASE,
  JOB_DONE: ENDS_LEASE,
  JOB_FAILED: ENDS_LEASE,
  JOB_TIMEOUT: ENDS_LEASE,
  JOB_CANCELED: ENDS_LEASE,
  JOB_CANCEL_REQUESTED: MOVES_JOB,
  JOB_BLOCKED: ENDS_LEASE,
  JOB_EXCEEDS_CAPACITY: MOVES_JOB,
  JOB_RETRIED: MOVES_JOB,
  JOB_RUN_NOW: MOVES_JOB,
  LEASE_GRANTED: ['job-list', 'leases'],
  LEASE_DENIED: [],
  LEASE_EXPIRED: ['leases'],
  FILE_LEASE_ACQUIRED: [],
  FILE_LEASE_RELEASED: [],
  FILE_LEASE_REVOKED: [],
  FILE_LEASE_CONTENDED: [],
  BLOCKER_OPENED: ['blockers'],
  BLOCKER_RESOLVED: ['blockers'],
  CAPACITY_CHANGED: ['capacity'],
  BUSY_MEASURED: ['capacity'],
  WORKER_PROBLEM: ['workers'],
  SCHEDULE_CREATED: ['schedules'],
  SCHEDULE_UPDATED: ['schedules'],
  SCHEDULE_DELETED: ['schedules'],
  SCHEDULE_FIRED: ['schedules'],
  SCHEDULE_SKIPPED: ['schedules'],
  QUEUE_PAUSED: ['queues'],
  QUEUE_RESUMED: ['queues'],
} as const satisfies Record<EventType, readonly EventSubject[]>

/** Whether an event of this type moves any of these subjects. */
export function eventMoves(type: EventType, ...subjects: EventSubject[]): boolean {
  // A type this list does not know (a newer host's) moves nothing: the next read shows it.
  const moved: readonly EventSubject[] | undefined = EVENT_MOVES[type]
  return moved !== undefined && subjects.some((subject) => moved.includes(subject))
}
