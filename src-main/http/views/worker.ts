/**
 * Dialect 003 (worker) as the wire shows it, and the answers a worker gets whichever transport
 * it uses: the local workers' IPC renders claims and exchanges with these same functions. Each
 * view's zod schema sits beside the function that renders it.
 */
import { z } from 'zod'
import { iso } from '../../engine/clock'
import type { Assignment, AttemptEnded, Denial, ExchangeAnswer, ItemResult, LeaseExtended } from '../../engine'
import { IsoTime } from '../schemas'

/** Seed 003's claim answer, plus the job's type, its lease id and its max runtime. */
export const WorkerClaimed = z
  .object({
    claimed: z.literal(true),
    job_id: z.string(),
    attempt_id: z.string(),
    lease_id: z.string(),
    lease_token: z.string().meta({ description: 'Secret: names the lease in heartbeat, complete and fail' }),
    stream: z.string().meta({ description: "The job's queue" }),
    message_id: z.string().nullable(),
    payload: z.unknown(),
    job_type: z.string(),
    max_runtime_s: z.number().int().nullable(),
    lease_ttl_seconds: z.number().int(),
    heartbeat_interval_seconds: z.number().int(),
  })
  .meta({ id: 'WorkerClaimed', description: 'A claimed job: lease + attempt + token' })
export type WorkerClaimed = z.infer<typeof WorkerClaimed>

export const WorkerClaimAnswer = z
  .union([WorkerClaimed, z.object({ claimed: z.literal(false) })])
  .meta({ id: 'WorkerClaimAnswer', description: 'A claimed job, or {claimed: false} when none came within max_wait_ms' })
export type WorkerClaimAnswer = z.infer<typeof WorkerClaimAnswer>

/** Dialect 003's claim answer. */
export function claimAnswer(decision: Assignment | Denial): WorkerClaimAnswer {
  return decision.granted ? claimedJob(decision) : { claimed: false }
}

function claimedJob(a: Assignment): WorkerClaimed {
  return {
    claimed: true,
    job_id: a.job_id,
    attempt_id: a.attempt_id,
    lease_id: a.lease_id,
    lease_token: a.lease_token,
    stream: a.queue,
    message_id: a.message_id === null ? null : String(a.message_id),
    payload: a.payload,
    job_type: a.job_type,
    max_runtime_s: a.max_runtime_s,
    lease_ttl_seconds: a.ttl_s,
    heartbeat_interval_seconds: Math.max(1, Math.floor(a.ttl_s / 3)),
  }
}

export const WorkerHeartbeatAnswer = z
  .object({ ok: z.literal(true), lease_expires_at: IsoTime, cancel_requested: z.boolean().meta({ description: 'Stop the job: it was canceled' }) })
  .meta({ id: 'WorkerHeartbeatAnswer' })
export type WorkerHeartbeatAnswer = z.infer<typeof WorkerHeartbeatAnswer>

export function heartbeatAnswer(extended: LeaseExtended): WorkerHeartbeatAnswer {
  return { ok: true, lease_expires_at: iso(extended.expires_at), cancel_requested: extended.cancel_requested }
}

export const WorkerCompleteAnswer = z
  .object({ ok: z.literal(true), ack: z.boolean().meta({ description: 'The stream message may be acknowledged' }) })
  .meta({ id: 'WorkerCompleteAnswer' })
export type WorkerCompleteAnswer = z.infer<typeof WorkerCompleteAnswer>

export const completeAnswer = (answer: AttemptEnded): WorkerCompleteAnswer => ({ ok: true, ack: answer.ack })

export const WorkerFailAnswer = z
  .object({
    ok: z.literal(true),
    ack: z.boolean(),
    requeued: z.boolean().meta({ description: 'Retryable with attempts left: queued again after a backoff' }),
    dlq: z.boolean().meta({ description: 'Dead-lettered: no attempts left, or not retryable' }),
  })
  .meta({ id: 'WorkerFailAnswer' })
export type WorkerFailAnswer = z.infer<typeof WorkerFailAnswer>

export const failAnswer = ({ ack, requeued, dlq }: AttemptEnded): WorkerFailAnswer => ({ ok: true, ack, requeued, dlq })

export const WorkerReportAnswer = z.object({ ok: z.literal(true) }).meta({ id: 'WorkerReportAnswer' })

/** A refused item of a batch: dialect 003's 409 body (`ok: false`, `ack` on complete/fail) with the job's id. */
const RefusedItem = z.object({ job_id: z.string(), ok: z.literal(false), code: z.string(), detail: z.string() })
const RefusedReport = RefusedItem.extend({ ack: z.boolean() })

export const WorkerBatchAnswer = z
  .object({
    heartbeats: z.array(z.union([WorkerHeartbeatAnswer.extend({ job_id: z.string() }), RefusedItem])),
    completed: z.array(z.union([WorkerCompleteAnswer.extend({ job_id: z.string() }), RefusedReport])),
    failed: z.array(z.union([WorkerFailAnswer.extend({ job_id: z.string() }), RefusedReport])),
    jobs: z.array(WorkerClaimed).meta({ description: 'The jobs claimed for the free slots' }),
  })
  .meta({ id: 'WorkerBatchAnswer', description: 'One entry per report, in the order sent, each as its one-job route answers it; then the claims' })
export type WorkerBatchAnswer = z.infer<typeof WorkerBatchAnswer>

function refused(jobId: string, result: ItemResult<unknown> & { ok: false }): z.infer<typeof RefusedItem>
function refused(jobId: string, result: ItemResult<unknown> & { ok: false }, withAck: true): z.infer<typeof RefusedReport>
function refused(jobId: string, result: ItemResult<unknown> & { ok: false }, withAck = false): z.infer<typeof RefusedItem> | z.infer<typeof RefusedReport> {
  const { code, detail, extra } = result.error
  return { job_id: jobId, ok: false as const, code, detail, ...(withAck ? { ack: extra.ack === true } : {}) }
}

/**
 * The answer to a worker's exchange (`POST /internal/worker/batch`, and IPC `exchange`): one
 * entry per report, in the order sent, each shaped as the one-job route answers it, and the
 * claims granted, each as a dialect 003 claim.
 */
export function exchangeAnswer(
  request: { heartbeat?: { job_id: string }[]; complete?: { job_id: string }[]; fail?: { job_id: string }[] },
  answer: ExchangeAnswer,
): WorkerBatchAnswer {
  return {
    heartbeats: answer.heartbeats.map((result, i) => {
      const jobId = request.heartbeat![i]!.job_id
      return result.ok ? { job_id: jobId, ...heartbeatAnswer(result.value) } : refused(jobId, result)
    }),
    completed: answer.completed.map((result, i) => {
      const jobId = request.complete![i]!.job_id
      return result.ok ? { job_id: jobId, ...completeAnswer(result.value) } : refused(jobId, result, true)
    }),
    failed: answer.failed.map((result, i) => {
      const jobId = request.fail![i]!.job_id
      return result.ok ? { job_id: jobId, ...failAnswer(result.value) } : refused(jobId, result, true)
    }),
    jobs: answer.claimed.granted.map(claimedJob),
  }
}

/** A 409 of a heartbeat: the lease is gone, `ok: false` beside `{detail, code}`. */
export const WorkerRefusal = z
  .object({ ok: z.literal(false), detail: z.string(), code: z.string().meta({ description: 'lease_token_mismatch, lease_expired, lease_not_active, …' }) })
  .meta({ id: 'WorkerRefusal' })
export type WorkerRefusal = z.infer<typeof WorkerRefusal>

/** A 409 of a completion or failure: whether the stream message may be acknowledged all the same. */
export const WorkerReportRefusal = WorkerRefusal.extend({
  ack: z.boolean().meta({ description: 'true: the attempt had already ended (requeued or dead-lettered); acknowledge the message' }),
}).meta({ id: 'WorkerReportRefusal' })
export type WorkerReportRefusal = z.infer<typeof WorkerReportRefusal>
