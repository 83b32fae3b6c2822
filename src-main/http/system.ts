import Router from '@koa/router'
import { z } from 'zod'
import type { Engine } from '../engine'
import { iso } from '../engine/clock'
import type { StorageReport } from '../retention/storage-report'
import type { StorageMode } from '../db/storage-mode'
import type { WorkerDirectory } from '../workers/directory'
import { readJson, reply } from './body'
import { validate } from './errors'
import { IsoTime } from './schemas'
import { openApiDocument } from './openapi'
import { ActiveLeases, activeLeasesView, Capacity, capacityView, Health, type RedisHealth, WorkerList, workerView } from './views/system'

/** PUT /api/capacity: total units and/or a busy rating (null = auto); any other field is 400. */
export const CapacityChange = z.strictObject({
  total_units: z.number().int().min(0).max(1_000_000).optional(),
  busy_rating: z.number().min(0).max(10).nullable().optional(),
})
export type CapacityChange = z.infer<typeof CapacityChange>

/** GET /api/storage: the database's size on disk and the retention that bounds it (docs/retention.md). */
export const StorageAnswer = z
  .object({
    database_bytes: z.number().int().meta({ description: 'The database file and its write-ahead log together' }),
    file_bytes: z.number().int(),
    wal_bytes: z.number().int(),
    free_bytes: z.number().int().meta({ description: 'Free pages inside the file, reused before it grows' }),
    auto_vacuum: z.enum(['none', 'full', 'incremental']).meta({ description: 'incremental: surplus free pages go back to the disk after each pruning' }),
    retain_days: z.number().int().meta({ description: 'Days a finished job is kept after it finished (--retain-days); 0 = forever' }),
    stats_retain_days: z.number().int().meta({ description: 'Days the statistics time series are kept' }),
    last_prune: z
      .object({
        at: IsoTime,
        retain_days: z.number().int(),
        jobs_deleted: z.number().int(),
        events_deleted: z.number().int().meta({ description: 'Events that named no job (capacity, busy rating, workers), deleted after the same period' }),
        stats_rows: z.number().int(),
        pages_returned: z.number().int(),
        longest_step_ms: z.number().meta({ description: 'The longest time one step held the write lock' }),
        longest_checkpoint_ms: z.number().meta({ description: 'The longest checkpoint of the WAL between steps' }),
        duration_ms: z.number(),
      })
      .nullable()
      .meta({ description: 'The last pass of the pruner (a minute apart), or null before the first' }),
  })
  .meta({ id: 'Storage' })
export type StorageAnswer = z.infer<typeof StorageAnswer>

export function storageAnswer(report: StorageReport): StorageAnswer {
  return { ...report, last_prune: report.last_prune && { ...report.last_prune, at: iso(report.last_prune.at) } }
}

/** Routes shared by every dialect: health, capacity, workers, storage and the OpenAPI document. */
export function systemRouter(
  engine: Engine,
  directory: WorkerDirectory,
  version: string,
  bodyLimit: number,
  storage: () => StorageReport,
  storageMode: () => StorageMode = () => ({ state: 'read_write', reason: null }),
  redis?: () => RedisHealth,
): Router {
  const router = new Router({ prefix: '/api' })
  router.get('/health', (ctx) => {
    const mode = storageMode()
    reply(ctx, Health, {
      ok: true,
      version,
      storage: mode.state,
      ...(mode.reason === null ? {} : { reason: mode.reason }),
      ...(redis ? { redis: redis() } : {}),
    })
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
    reply(ctx, ActiveLeases, activeLeasesView(engine.now(), engine.activeLeases()))
  })
  router.get('/workers', (ctx) => {
    reply(ctx, WorkerList, { workers: directory.list(engine).map(workerView) })
  })
  router.get('/storage', (ctx) => {
    reply(ctx, StorageAnswer, storageAnswer(storage()))
  })
  let openApi: unknown
  router.get('/openapi.json', (ctx) => {
    ctx.body = openApi ??= openApiDocument(version)
  })
  return router
}
