import { z } from 'zod'
import { iso } from '../engine/rules/clock'
import { type Api, LEASE_409, NOT_FOUND, route } from './route'
import { GpuAvailable, JsonValue, pathParams, TtlSec, WorkerId } from './schemas'
import { PullCompleteAnswer, PullDecision, PullHeartbeatAnswer, pullJob, pullLease } from './views/pull'

/** The pull API: one step dequeues and leases; the first heartbeat makes the job running. */
export const PullLeaseRequest = z.strictObject({
  worker_id: WorkerId,
  max_units: z.number().int().min(1).max(1_000_000).optional(),
  gpu_available: GpuAvailable.optional(),
  ttl_sec: TtlSec.optional(),
})
export type PullLeaseRequest = z.infer<typeof PullLeaseRequest>

export const PullHeartbeat = z.strictObject({ worker_id: WorkerId })
export type PullHeartbeat = z.infer<typeof PullHeartbeat>

/** Added by Leasehold so this API can finish a job. */
export const PullComplete = z.strictObject({
  worker_id: WorkerId,
  status: z.enum(['completed', 'failed']),
  result: JsonValue.optional(),
  error: JsonValue.optional(),
})
export type PullComplete = z.infer<typeof PullComplete>

export const PULL_PREFIX = '/api/system/scheduler/leases'

const LeaseParams = pathParams('lease_id')

export const pullApi: Api = {
  tag: 'pull',
  description: 'The pull API: one request dequeues and leases (/api/system/scheduler/leases)',
  prefix: PULL_PREFIX,
  routes: [
    route({
      method: 'POST',
      path: '/request',
      id: 'pullLease',
      summary: 'Dequeue and lease the head job (granted or denied, both 200)',
      body: PullLeaseRequest,
      answer: PullDecision,
      grouped: true,
      run: ({ body }, { engine, directory }) => {
        const gpu_available = body.gpu_available === true
        directory.askedForWork(body.worker_id, { jobTypes: null, gpu: gpu_available, maxUnits: body.max_units })
        const decision = engine.requestLease({ worker_id: body.worker_id, max_units: body.max_units ?? null, gpu_available }, body.ttl_sec)
        return decision.granted
          ? { denied: false as const, lease: pullLease(decision.lease), job: pullJob(decision.job) }
          : { denied: true as const, reason: decision.reason, retry_after_ms: decision.retry_after_ms }
      },
    }),
    route({
      method: 'POST',
      path: '/:lease_id/heartbeat',
      id: 'pullHeartbeat',
      summary: 'Extend a lease; the first heartbeat makes the job running',
      params: LeaseParams,
      body: PullHeartbeat,
      answer: PullHeartbeatAnswer,
      errors: { 403: 'worker_mismatch', 404: NOT_FOUND.lease, 409: LEASE_409 },
      grouped: true,
      run: ({ body, params }, { engine }) => {
        const { lease, job } = engine.heartbeat({ lease_id: params.lease_id, worker_id: body.worker_id })
        return { ok: true as const, expires_at: iso(lease.expires_at), cancel_requested: job.cancel_requested }
      },
    }),
    route({
      method: 'POST',
      path: '/:lease_id/complete',
      id: 'pullComplete',
      summary: 'Finish the job: completed or failed',
      params: LeaseParams,
      body: PullComplete,
      answer: PullCompleteAnswer,
      errors: { 403: 'worker_mismatch', 404: NOT_FOUND.lease, 409: LEASE_409 },
      grouped: true,
      run: ({ body, params }, { engine }) => {
        const { job } = engine.release({
          lease_id: params.lease_id,
          worker_id: body.worker_id,
          status: body.status === 'completed' ? 'SUCCEEDED' : 'FAILED',
          result: body.result,
          error: body.error,
        })
        return { ok: true as const, job: pullJob(job) }
      },
    }),
  ],
}
