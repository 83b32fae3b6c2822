import Router from '@koa/router'
import { z } from 'zod'
import type { Engine } from '../engine'
import { iso } from '../engine/clock'
import { readJson, reply } from './body'
import { pathParam, validate } from './errors'
import { JsonValue, TtlSec, WorkerId } from './schemas'
import { PullCompleteAnswer, PullDecision, PullHeartbeatAnswer, pullJob, pullLease } from './views/pull'

/** Seeds 000 + 001: one step dequeues and leases; the first heartbeat makes the job running. */
export const PullLeaseRequest = z.strictObject({
  worker_id: WorkerId,
  max_units: z.number().int().min(1).max(1_000_000).optional(),
  ttl_sec: TtlSec.optional(),
})
export type PullLeaseRequest = z.infer<typeof PullLeaseRequest>

export const PullHeartbeat = z.strictObject({ worker_id: WorkerId })
export type PullHeartbeat = z.infer<typeof PullHeartbeat>

/** Added by Leasehold so this dialect can finish a job. */
export const PullComplete = z.strictObject({
  worker_id: WorkerId,
  status: z.enum(['completed', 'failed']),
  result: JsonValue.optional(),
  error: JsonValue.optional(),
})
export type PullComplete = z.infer<typeof PullComplete>

export const PULL_PREFIX = '/api/system/scheduler/leases'

export function pullRouter(engine: Engine, bodyLimit: number): Router {
  const router = new Router({ prefix: PULL_PREFIX })

  router.post('/request', async (ctx) => {
    const body = validate(PullLeaseRequest, await readJson(ctx, bodyLimit))
    const decision = await engine.run(() => engine.requestLease({ worker_id: body.worker_id, max_units: body.max_units ?? null }, body.ttl_sec))
    reply(
      ctx,
      PullDecision,
      decision.granted
        ? { denied: false, lease: pullLease(decision.lease), job: pullJob(decision.job) }
        : { denied: true, reason: decision.reason, retry_after_ms: decision.retry_after_ms },
    )
  })

  router.post('/:lease_id/heartbeat', async (ctx) => {
    const body = validate(PullHeartbeat, await readJson(ctx, bodyLimit))
    const leaseId = pathParam(ctx, 'lease_id')
    const { lease, job } = await engine.run(() => engine.heartbeat({ lease_id: leaseId, worker_id: body.worker_id }))
    reply(ctx, PullHeartbeatAnswer, { ok: true, expires_at: iso(lease.expires_at), cancel_requested: job.cancel_requested })
  })

  router.post('/:lease_id/complete', async (ctx) => {
    const body = validate(PullComplete, await readJson(ctx, bodyLimit))
    const leaseId = pathParam(ctx, 'lease_id')
    const { job } = await engine.run(() =>
      engine.release({
        lease_id: leaseId,
        worker_id: body.worker_id,
        status: body.status === 'completed' ? 'SUCCEEDED' : 'FAILED',
        result: body.result,
        error: body.error,
      }),
    )
    reply(ctx, PullCompleteAnswer, { ok: true, job: pullJob(job) })
  })

  return router
}
