/**
 * How each dialect shows the one model: field names per seed, states per CONTRACTS.md's table,
 * times as ISO-8601 UTC strings. Pure functions of stored rows.
 */
import type { AttemptRow, EventRow, JobRow, LeaseRow } from '../db/schema'
import type { ScheduleOrigin } from '../engine'
import { iso } from '../engine/clock'
import { priorityName, TERMINAL_STATES, type JobState } from '../engine/states'

const parse = (text: string | null): unknown => (text === null ? null : JSON.parse(text))

// ---------------------------------------------------------------------------------------------
// Dialect 002 (queue): canonical names, LEASED shown as RUNNING.

export function queueState(state: string): string {
  return state === 'LEASED' ? 'RUNNING' : state
}

/** Seed 002's JobIntent, plus the model's extra fields. */
export function queueJob(job: JobRow) {
  return {
    job_id: job.id,
    addon_id: job.addon_id,
    job_type: job.job_type,
    priority: priorityName(job.priority),
    cost_units: job.cost_units,
    constraints: parse(job.constraints),
    payload: parse(job.payload),
    state: queueState(job.state),
    created_at: iso(job.created_at),
    updated_at: iso(job.updated_at),
    claimed_by: job.claimed_by,
    claim_expires_at: iso(job.claim_expires_at),
    lease_id: job.lease_id,
    attempts: job.attempts,
    next_retry_at: iso(job.next_retry_at),
    /** A delayed job's time (null when it was not delayed, or was run at once). */
    run_at: iso(job.run_at),
    unique: job.is_unique === 1,
    tags: parse(job.tags),
    max_runtime_s: job.max_runtime_s,
    queue: job.queue,
    max_attempts: job.max_attempts,
    client_request_id: job.idempotency_key,
    cancel_requested: job.cancel_requested === 1,
    progress: job.progress,
    note: job.note,
    dead_letter: job.dead_letter === 1,
  }
}

/**
 * The job as the reads show it (GET /jobs/{id}, GET /jobs): the job plus `waiting_reason`, why
 * it is not running yet (null when it runs or has ended), and `schedule`, the schedule firing
 * that made it (null for a job submitted by hand). Only reads carry them: they cost a few
 * queries, which the claim and completion answers do not pay.
 */
export function queueJobRead(job: JobRow, waitingReason: string | null, origin: ScheduleOrigin | null) {
  return { ...queueJob(job), waiting_reason: waitingReason, schedule: origin && { name: origin.name, fire_at: iso(origin.fire_at) } }
}

/** Seed 002's JobResult for a finished job, else null. */
export function queueResult(job: JobRow) {
  if (!TERMINAL_STATES.has(job.state as JobState)) return null
  return {
    job_id: job.id,
    status: job.final_status,
    result_data: parse(job.result),
    error: parse(job.error),
    started_at: iso(job.started_at),
    finished_at: iso(job.finished_at),
    attempts: job.attempts,
  }
}

/** Seed 002's Lease, plus who holds it and how it ended. The token is never shown here. */
export function queueLease(lease: LeaseRow) {
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

export function queueAttempt(a: AttemptRow) {
  return {
    attempt_id: a.id,
    attempt: a.number,
    worker_id: a.worker_id,
    lease_id: a.lease_id,
    started_at: iso(a.started_at),
    finished_at: iso(a.finished_at),
    outcome: a.outcome,
    disposition: a.disposition,
    error: parse(a.error),
  }
}

export function queueEvent(event: EventRow) {
  return { id: event.id, ts: iso(event.ts), type: event.event_type, entity_type: event.entity_type, entity_id: event.entity_id, data: parse(event.data) }
}

// ---------------------------------------------------------------------------------------------
// Dialect 001/000 (pull-lease): lowercase states and priorities.

const PULL_STATES: Record<string, string> = {
  QUEUED: 'queued',
  CLAIMED: 'queued',
  PREPARING: 'queued',
  LEASE_PENDING: 'queued',
  LEASED: 'leased',
  RUNNING: 'running',
  DONE: 'completed',
  FAILED: 'failed',
  CANCELED: 'canceled',
  TIMEOUT: 'expired',
  BLOCKED: 'blocked',
}

export function pullState(state: string): string {
  return PULL_STATES[state] ?? state.toLowerCase()
}

export function pullJob(job: JobRow) {
  return {
    job_id: job.id,
    type: job.job_type,
    priority: priorityName(job.priority).toLowerCase(),
    requested_units: job.cost_units,
    unique: job.is_unique === 1,
    state: pullState(job.state),
    payload: parse(job.payload),
    idempotency_key: job.idempotency_key,
    tags: parse(job.tags),
    max_runtime_s: job.max_runtime_s,
    lease_id: job.lease_id,
    created_at: iso(job.created_at),
    updated_at: iso(job.updated_at),
  }
}

export function pullLease(lease: LeaseRow) {
  return {
    lease_id: lease.id,
    job_id: lease.job_id,
    worker_id: lease.worker_id,
    capacity_units: lease.cost_units,
    issued_at: iso(lease.granted_at),
    expires_at: iso(lease.expires_at),
    last_heartbeat: iso(lease.last_heartbeat_at),
  }
}
