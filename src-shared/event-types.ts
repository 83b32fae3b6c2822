/**
 * Every type of event the host writes to its log: the one list. The engine gives each type its
 * entity and the shape of its data (src-main/engine/events.ts, a discriminated union over this
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
