import Router from '@koa/router'
import { z } from 'zod'
import type { Engine } from '../engine'
import { iso } from '../engine/clock'
import type { WorkerDirectory } from '../workers'
import { readJson } from './body'
import { validate } from './errors'
import { openApiDocument } from './openapi'

/** PUT /api/capacity: total units and/or a busy rating (null = auto); any other field is 400. */
export const CapacityChange = z.strictObject({
  total_units: z.number().int().min(0).max(1_000_000).optional(),
  busy_rating: z.number().min(0).max(10).nullable().optional(),
})
export type CapacityChange = z.infer<typeof CapacityChange>

/** Routes shared by every dialect: health, capacity, workers and the OpenAPI document. */
export function systemRouter(engine: Engine, directory: WorkerDirectory, version: string, bodyLimit: number): Router {
  const router = new Router({ prefix: '/api' })
  router.get('/health', (ctx) => {
    ctx.body = { ok: true, version }
  })
  router.get('/capacity', (ctx) => {
    ctx.body = engine.getCapacity()
  })
  router.put('/capacity', async (ctx) => {
    const change = validate(CapacityChange, await readJson(ctx, bodyLimit))
    ctx.body = engine.setCapacity(change)
  })
  // Every ACTIVE lease in one call, with the host's clock: countdowns need no guessing.
  router.get('/leases', (ctx) => {
    ctx.body = {
      now: iso(engine.ctx.clock.now()),
      leases: engine.activeLeases().map((l) => ({
        lease_id: l.id,
        job_id: l.job_id,
        job_type: l.job_type,
        addon_id: l.addon_id,
        worker_id: l.worker_id,
        cost_units: l.cost_units,
        granted_at: iso(l.granted_at),
        last_heartbeat_at: iso(l.last_heartbeat_at),
        expires_at: iso(l.expires_at),
      })),
    }
  })
  router.get('/workers', (ctx) => {
    ctx.body = {
      workers: directory.list(engine).map((w) => ({ ...w, last_seen_at: iso(w.last_seen_at), started_at: iso(w.started_at) })),
    }
  })
  let openApi: unknown
  router.get('/openapi.json', (ctx) => {
    ctx.body = openApi ??= openApiDocument(version)
  })
  return router
}
