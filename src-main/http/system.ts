import Router from '@koa/router'
import { z } from 'zod'
import type { Engine } from '../engine'
import type { WorkerDirectory } from '../workers'
import { readJson, reply } from './body'
import { validate } from './errors'
import { openApiDocument } from './openapi'
import { ActiveLeases, activeLeasesView, Capacity, capacityView, Health, WorkerList, workerView } from './views/system'

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
    reply(ctx, Health, { ok: true, version })
  })
  router.get('/capacity', (ctx) => {
    reply(ctx, Capacity, capacityView(engine.getCapacity()))
  })
  router.put('/capacity', async (ctx) => {
    const change = validate(CapacityChange, await readJson(ctx, bodyLimit))
    reply(ctx, Capacity, capacityView(engine.setCapacity(change)))
  })
  // Every ACTIVE lease in one call, with the host's clock: countdowns need no guessing.
  router.get('/leases', (ctx) => {
    reply(ctx, ActiveLeases, activeLeasesView(engine.ctx.clock.now(), engine.activeLeases()))
  })
  router.get('/workers', (ctx) => {
    reply(ctx, WorkerList, { workers: directory.list(engine).map(workerView) })
  })
  let openApi: unknown
  router.get('/openapi.json', (ctx) => {
    ctx.body = openApi ??= openApiDocument(version)
  })
  return router
}
