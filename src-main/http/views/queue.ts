/**
 * the queue API (queue) as the wire shows it: each view's zod schema (a named schema of the OpenAPI
 * document) beside the function that renders it, typed by the schema, so the code and the
 * document cannot drift. Canonical names, LEASED shown as RUNNING, times as ISO-8601 UTC.
 */
import { z } from 'zod'
import {
  ATTEMPT_DISPOSITIONS,
  ATTEMPT_OUTCOMES,
  type Attempt,
  BUCKETS,
  ENTITY_TYPES,
  type Event,
  EVENT_TYPES,
  type Job,
  type Lease,
  METRICS,
  RANGES,
  type ScheduleOrigin,
  type Waiting,
} from '../../engine'
import { iso } from '../../engine/rules/clock'
import { type JobState as JobStateName, SHOWN_STATES, shownState, type ShownState, TERMINAL_STATES } from '../../engine/rules/states'
import { FinalStatus, IsoTime, LeaseState, NextCursor, PRIORITY } from '../schemas'
import { wireEventData } from './event-data'

/** The states the queue API shows: the canonical ones, LEASED shown as RUNNING (rules/states.ts shownState). */
export const QUEUE_STATES = SHOWN_STATES
export const QueueState = z.enum(QUEUE_STATES).meta({ id: 'QueueJobState', description: 'A job state as the queue API shows it (LEASED shows as RUNNING)' })
export type QueueState = z.infer<typeof QueueState>

export const queueState: (state: JobStateName) => ShownState = shownState

/** The canonical states the queue API's RUNNING stands for (a filter by it finds both). */
export const SHOWN_AS_RUNNING = ['LEASED', 'RUNNING'] as const

/** A filter's states as the queue API shows them, in canonical ones: RUNNING finds the LEASED jobs too. */
export function canonicalStates(states: readonly JobStateName[]): JobStateName[] {
  return states.includes('RUNNING') ? [...new Set([...states, ...SHOWN_AS_RUNNING])] : [...states]
}

/** the queue contract's JobIntent, plus the model's extra fields. */
export const QueueJob = z
  .object({
    job_id: z.string(),
    addon_id: z.string().nullable(),
    job_type: z.string(),
    priority: PRIORITY,
    cost_units: z.number().int(),
    constraints: z.record(z.string(), z.boolean()),
    payload: z.unknown(),
    state: QueueState,
    created_at: IsoTime,
    updated_at: IsoTime,
    claimed_by: z.string().nullable(),
    claim_expires_at: IsoTime.nullable(),
    lease_id: z.string().nullable().meta({ description: 'The lease the job holds; while it holds none, its last one (after it ended, was requeued or retried), or null before its first' }),
    attempts: z.number().int(),
    next_retry_at: IsoTime.nullable(),
    run_at: IsoTime.nullable().meta({ description: 'A delayed job\'s time (null when it was not delayed, or was run at once)' }),
    unique: z.boolean(),
    tags: z.array(z.string()),
    max_runtime_s: z.number().int().nullable(),
    queue: z.string(),
    max_attempts: z.number().int(),
    client_request_id: z.string().nullable(),
    cancel_requested: z.boolean(),
    progress: z.number().nullable(),
    note: z.string().nullable(),
    dead_letter: z.boolean().meta({ description: 'The job ended because it ran out of attempts' }),
  })
  .meta({ id: 'QueueJob', description: "The queue contract's JobIntent plus the model's extra fields" })
export type QueueJob = z.infer<typeof QueueJob>

export function queueJob(job: Job): QueueJob {
  return {
    job_id: job.id,
    addon_id: job.addon_id,
    job_type: job.job_type,
    priority: job.priority,
    cost_units: job.cost_units,
    constraints: job.constraints,
    payload: job.payload,
    state: queueState(job.state),
    created_at: iso(job.created_at),
    updated_at: iso(job.updated_at),
    claimed_by: job.claimed_by,
    claim_expires_at: iso(job.claim_expires_at),
    lease_id: job.lease_id,
    attempts: job.attempts,
    next_retry_at: iso(job.next_retry_at),
    run_at: iso(job.run_at),
    unique: job.unique,
    tags: job.tags,
    max_runtime_s: job.max_runtime_s,
    queue: job.queue,
    max_attempts: job.max_attempts,
    client_request_id: job.idempotency_key,
    cancel_requested: job.cancel_requested,
    progress: job.progress,
    note: job.note,
    dead_letter: job.dead_letter,
  }
}

/**
 * The job as the reads show it (GET /jobs/{id}, GET /jobs): the job plus `waiting_reason`, why
 * it is not running yet (null when it runs or has ended), `waiting_until`, when that wait ends
 * by itself if it does, and `schedule`, the schedule firing
 * that made it (null for a job submitted by hand). Only reads carry them: they cost a few
 * queries, which the claim and completion answers do not pay.
 */
export const QueueJobRead = QueueJob.extend({
  waiting_reason: z
    .string()
    .nullable()
    .meta({ description: 'Why the job is not running yet, in words that name no time (a running job waits while a file it was refused is held); null when it runs or has ended' }),
  waiting_until: IsoTime.nullable().meta({
    description: 'When the wait ends by itself: a retry\'s not-before time, a scheduled run time, a refused file\'s one retry; null when only a worker, capacity or an operator ends it',
  }),
  schedule: z
    .object({ name: z.string(), fire_at: IsoTime })
    .nullable()
    .meta({ description: 'The schedule firing that submitted the job; null for a job submitted by hand' }),
}).meta({ id: 'QueueJobRead', description: 'A job as the reads show it: plus why it waits and the schedule that made it' })
export type QueueJobRead = z.infer<typeof QueueJobRead>

export function queueJobRead(job: Job, waiting: Waiting | null, origin: ScheduleOrigin | null): QueueJobRead {
  return {
    ...queueJob(job),
    waiting_reason: waiting?.reason ?? null,
    waiting_until: iso(waiting?.until ?? null),
    schedule: origin && { name: origin.name, fire_at: iso(origin.fire_at)! } }
}

/** the queue contract's JobResult for a finished job. */
export const QueueResult = z
  .object({
    job_id: z.string(),
    status: FinalStatus.nullable(),
    result_data: z.unknown(),
    error: z.unknown(),
    started_at: IsoTime.nullable(),
    finished_at: IsoTime.nullable(),
    attempts: z.number().int(),
  })
  .meta({ id: 'QueueResult', description: "The queue contract's JobResult of a finished job" })
export type QueueResult = z.infer<typeof QueueResult>

/** the queue contract's JobResult for a finished job, else null. */
export function queueResult(job: Job): QueueResult | null {
  if (!TERMINAL_STATES.has(job.state)) return null
  return {
    job_id: job.id,
    status: job.final_status,
    result_data: job.result,
    error: job.error,
    started_at: iso(job.started_at),
    finished_at: iso(job.finished_at),
    attempts: job.attempts,
  }
}

/** the queue contract's Lease, plus who holds it and how it ended. The token is never shown here. */
export const QueueLease = z
  .object({
    lease_id: z.string(),
    job_id: z.string(),
    addon_id: z.string().nullable(),
    worker_id: z.string(),
    cost_units: z.number().int(),
    ttl_sec: z.number().int(),
    state: LeaseState,
    granted_at: IsoTime,
    last_heartbeat_at: IsoTime,
    expires_at: IsoTime,
    released_at: IsoTime.nullable(),
    release_status: z.enum(ATTEMPT_OUTCOMES).nullable().meta({ description: 'How its attempt ended; BLOCKED: halted by a file-lease blocker' }),
    fence: z.number().int().meta({ description: 'Strictly increases with every lease granted' }),
  })
  .meta({ id: 'QueueLease', description: "The queue contract's Lease plus who holds it and how it ended (never the token)" })
export type QueueLease = z.infer<typeof QueueLease>

export function queueLease(lease: Lease): QueueLease {
  return {
    lease_id: lease.id,
    job_id: lease.job_id,
    addon_id: lease.addon_id,
    worker_id: lease.worker_id,
    cost_units: lease.cost_units,
    ttl_sec: lease.ttl_s,
    state: lease.state,
    granted_at: iso(lease.granted_at),
    last_heartbeat_at: iso(lease.last_heartbeat_at),
    expires_at: iso(lease.expires_at),
    released_at: iso(lease.released_at),
    release_status: lease.release_status,
    fence: lease.fence,
  }
}

export const QueueAttempt = z
  .object({
    attempt_id: z.string(),
    attempt: z.number().int().meta({ description: '1 for the first attempt' }),
    worker_id: z.string(),
    lease_id: z.string(),
    started_at: IsoTime,
    finished_at: IsoTime.nullable(),
    outcome: z.enum(ATTEMPT_OUTCOMES).nullable().meta({ description: 'null while it runs' }),
    disposition: z.enum(ATTEMPT_DISPOSITIONS).nullable().meta({ description: 'What became of the job; null while it runs' }),
    error: z.unknown().meta({ description: 'What the worker (or the host) reported, usually {code, message}; null without one' }),
  })
  .meta({ id: 'QueueAttempt', description: 'One execution of a job' })
export type QueueAttempt = z.infer<typeof QueueAttempt>

export function queueAttempt(a: Attempt): QueueAttempt {
  return {
    attempt_id: a.id,
    attempt: a.number,
    worker_id: a.worker_id,
    lease_id: a.lease_id,
    started_at: iso(a.started_at),
    finished_at: iso(a.finished_at),
    outcome: a.outcome,
    disposition: a.disposition,
    error: a.error,
  }
}

export const EntityTypeSchema = z.enum(ENTITY_TYPES).meta({ id: 'EntityType' })
/** The event types: the one list (src-shared/event-types.ts), the stream's event names. */
export const EventTypeSchema = z.enum(EVENT_TYPES).meta({ id: 'EventType', description: 'The event type, e.g. JOB_SUBMITTED, LEASE_GRANTED, JOB_DONE' })

/** One entry of the event log, as a job's timeline lists it. */
export const QueueEvent = z
  .object({
    id: z.number().int(),
    ts: IsoTime,
    type: EventTypeSchema,
    entity_type: EntityTypeSchema,
    entity_id: z.string(),
    data: z.record(z.string(), z.unknown()).meta({ description: 'What happened, by event type; every time in it (a field named …_at, or missed_from) is ISO-8601 like the rest of the API' }),
  })
  .meta({ id: 'QueueEvent', description: 'One entry of the event log' })
export type QueueEvent = z.infer<typeof QueueEvent>

export function queueEvent(event: Event): QueueEvent {
  return {
    id: event.id,
    ts: iso(event.ts),
    type: event.event_type,
    entity_type: event.entity_type,
    entity_id: event.entity_id,
    data: wireEventData(event.data),
  }
}

// ---------------------------------------------------------------------------------------------
// The answers of the routes

export const JobAnswer = z.object({ job: QueueJob }).meta({ id: 'JobAnswer' })
export type JobAnswer = z.infer<typeof JobAnswer>

/** A job created by a batch submit that asked for `Prefer: return=minimal`: its id and state, not its whole view. */
export const SubmittedJobRef = z
  .object({ ok: z.literal(true), job_id: z.string(), state: QueueState })
  .meta({ id: 'SubmittedJobRef', description: 'A job created, answered by its id and state (the request sent Prefer: return=minimal)' })
export type SubmittedJobRef = z.infer<typeof SubmittedJobRef>

/** POST /jobs/submit-batch: one entry per submit, in order, each as /jobs/submit answers it (or as a SubmittedJobRef). */
export const SubmitBatchAnswer = z
  .object({
    results: z.array(
      z.union([
        z.object({ ok: z.literal(true), job: QueueJob }),
        SubmittedJobRef,
        z.object({ ok: z.literal(false), code: z.string(), detail: z.string(), job: QueueJob.optional().meta({ description: 'The existing job of a duplicate_request' }) }),
      ]),
    ),
  })
  .meta({ id: 'SubmitBatchAnswer' })
export type SubmitBatchAnswer = z.infer<typeof SubmitBatchAnswer>

/** POST /jobs/claim: the first job, and every job when `limit` > 1. */
export const ClaimAnswer = z
  .object({ job: QueueJob, jobs: z.array(QueueJob).optional().meta({ description: 'Every claimed job, when limit > 1' }) })
  .meta({ id: 'QueueClaimAnswer' })
export type ClaimAnswer = z.infer<typeof ClaimAnswer>

/** A job as a list shows it: without `payload` when the list was asked for none (`payload=false`). */
export const QueueJobListed = QueueJobRead.extend({ payload: z.unknown().optional().meta({ description: 'Absent when the list was asked for none (`payload=false`)' }) }).meta({
  id: 'QueueJobListed',
  description: 'A job as a list shows it: as the reads do, its payload left out when asked',
})

export function withoutPayload({ payload: _payload, ...job }: QueueJobRead): Omit<QueueJobRead, 'payload'> {
  return job
}

export const JobPage = z
  .object({ jobs: z.array(QueueJobListed), next_cursor: NextCursor })
  .meta({ id: 'JobPage' })
export type JobPage = z.infer<typeof JobPage>

export const JobWithResult = z.object({ job: QueueJobRead, result: QueueResult.nullable() }).meta({ id: 'JobWithResult' })
export type JobWithResult = z.infer<typeof JobWithResult>

export const JobEvents = z.object({ events: z.array(QueueEvent), next_cursor: NextCursor }).meta({ id: 'JobEvents' })
export const JobAttempts = z.object({ attempts: z.array(QueueAttempt) }).meta({ id: 'JobAttempts' })

export const LeaseDecision = z
  .union([
    z.object({ approved: z.literal(true), lease: QueueLease }),
    z.object({ approved: z.literal(false), retry_after_sec: z.number().int(), reason: z.string() }),
  ])
  .meta({ id: 'QueueLeaseDecision', description: 'Approved with the lease, or denied with when to ask again (both 200)' })
export type LeaseDecision = z.infer<typeof LeaseDecision>

export const LeaseWithJob = z.object({ lease: QueueLease, job: QueueJob }).meta({ id: 'LeaseWithJob' })
export const LeaseReleased = z.object({ lease: QueueLease, job: QueueJob, result: QueueResult.nullable() }).meta({ id: 'LeaseReleased' })
export const LeaseAnswer = z.object({ lease: QueueLease }).meta({ id: 'LeaseAnswer' })

/** `GET /stats/snapshot` (engine/reads/stats.ts Snapshot). */
export const Snapshot = z
  .object({
    capacity: z.object({
      total: z.number().int(),
      used: z.number().int(),
      reserved: z.number().int().meta({ description: 'total − usable: held back by the busy rating' }),
      usable: z.number().int(),
      available: z.number().int(),
      busy_rating: z.number(),
      busy_mode: z.enum(['auto', 'manual']),
    }),
    jobs: z.object({
      queued: z.number().int(),
      claimed: z.number().int(),
      leased: z.number().int().meta({ description: 'Of the running jobs, those whose worker has not yet reported them started (LEASED)' }),
      running: z.number().int().meta({ description: 'Jobs that hold a lease, as the queue API shows them: RUNNING, LEASED ones included' }),
      blocked: z.number().int(),
      done_last_24h: z.number().int(),
      failed_last_24h: z.number().int(),
      canceled_last_24h: z.number().int(),
      timeout_last_24h: z.number().int(),
      over_capacity: z.number().int().meta({ description: 'Waiting jobs that cost more than the total capacity' }),
    }),
    leases: z.object({ active: z.number().int(), expired_last_24h: z.number().int() }),
  })
  .meta({ id: 'Snapshot' })
export type Snapshot = z.infer<typeof Snapshot>

export const MetricName = z.enum(METRICS).meta({ id: 'Metric', description: 'Gauges (mean per bucket) and counts (per bucket)' })
export const BucketName = z.enum(Object.keys(BUCKETS) as [keyof typeof BUCKETS]).meta({ id: 'Bucket' })
export const RangeName = z.enum(Object.keys(RANGES) as [keyof typeof RANGES]).meta({ id: 'Range' })

export const Timeseries = z
  .object({
    metric: MetricName,
    bucket: BucketName,
    range: RangeName,
    since: IsoTime.nullable().meta({ description: "Where the host's history starts (first sample or event); null before either" }),
    points: z.array(z.object({ ts: IsoTime, value: z.number() })).meta({ description: 'Every bucket of the range, empty ones as 0' }),
  })
  .meta({ id: 'Timeseries' })
export type Timeseries = z.infer<typeof Timeseries>

/** 409 `duplicate_request`: a submit repeating a known `client_request_id` gets the job that has it. */
export const DuplicateRequest = z
  .object({ detail: z.string(), code: z.literal('duplicate_request'), job: QueueJob })
  .meta({ id: 'DuplicateRequest', description: 'A job with this client_request_id exists: it is in `job`' })
export type DuplicateRequest = z.infer<typeof DuplicateRequest>
