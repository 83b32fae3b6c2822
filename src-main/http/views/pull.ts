/**
 * the pull API (pull-lease) as the wire shows it: the pull contract's field names, lowercase states
 * and priorities. Each view's zod schema sits beside the function that renders it.
 */
import { z } from 'zod'
import type { Job, Lease } from '../../engine'
import { iso } from '../../engine/rules/clock'
import { type JobState, PRIORITIES } from '../../engine/rules/states'
import { IsoTime } from '../schemas'

const PULL_STATES = {
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
} as const satisfies Record<JobState, string>

export const PullState = z
  .enum(['queued', 'leased', 'running', 'completed', 'failed', 'canceled', 'expired', 'blocked'])
  .meta({ id: 'PullJobState', description: 'A job state as the pull API shows it' })
export type PullState = z.infer<typeof PullState>

export function pullState(state: JobState): PullState {
  return PULL_STATES[state]
}

export const PullPriority = z.enum(PRIORITIES.map((p) => p.toLowerCase() as Lowercase<typeof p>) as [Lowercase<(typeof PRIORITIES)[number]>]).meta({ id: 'PullPriority' })

/** the pull contract's job, exactly. */
export const PullJob = z
  .object({
    job_id: z.string(),
    type: z.string(),
    priority: PullPriority,
    requested_units: z.number().int(),
    unique: z.boolean(),
    state: PullState,
    payload: z.unknown(),
    idempotency_key: z.string().nullable(),
    tags: z.array(z.string()),
    max_runtime_s: z.number().int().nullable(),
    lease_id: z.string().nullable(),
    created_at: IsoTime,
    updated_at: IsoTime,
  })
  .meta({ id: 'PullJob', description: "A job as the pull API shows it" })
export type PullJob = z.infer<typeof PullJob>

export function pullJob(job: Job): PullJob {
  return {
    job_id: job.id,
    type: job.job_type,
    priority: job.priority.toLowerCase() as PullJob['priority'],
    requested_units: job.cost_units,
    unique: job.unique,
    state: pullState(job.state),
    payload: job.payload,
    idempotency_key: job.idempotency_key,
    tags: job.tags,
    max_runtime_s: job.max_runtime_s,
    lease_id: job.lease_id,
    created_at: iso(job.created_at),
    updated_at: iso(job.updated_at),
  }
}

/** the pull contract's lease, exactly. */
export const PullLease = z
  .object({
    lease_id: z.string(),
    job_id: z.string(),
    worker_id: z.string(),
    capacity_units: z.number().int(),
    issued_at: IsoTime,
    expires_at: IsoTime,
    last_heartbeat: IsoTime,
  })
  .meta({ id: 'PullLease', description: "A lease as the pull API shows it" })
export type PullLease = z.infer<typeof PullLease>

export function pullLease(lease: Lease): PullLease {
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

/** POST /request: granted, or denied with the reason and when to ask again (both 200). */
export const PullDecision = z
  .union([
    z.object({ denied: z.literal(false), lease: PullLease, job: PullJob }),
    z.object({ denied: z.literal(true), reason: z.string(), retry_after_ms: z.number().int() }),
  ])
  .meta({ id: 'PullDecision' })
export type PullDecision = z.infer<typeof PullDecision>

export const PullHeartbeatAnswer = z
  .object({ ok: z.literal(true), expires_at: IsoTime, cancel_requested: z.boolean() })
  .meta({ id: 'PullHeartbeatAnswer' })
export type PullHeartbeatAnswer = z.infer<typeof PullHeartbeatAnswer>

export const PullCompleteAnswer = z.object({ ok: z.literal(true), job: PullJob }).meta({ id: 'PullCompleteAnswer' })
export type PullCompleteAnswer = z.infer<typeof PullCompleteAnswer>
