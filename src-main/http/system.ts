import { z } from 'zod'
import { iso } from '../engine/rules/clock'
import { DISK_FULL, type StorageMode } from '../db/storage-mode'
import type { StorageReport } from '../retention/storage-report'
import { HttpError } from './http-error'
import { type Api, route } from './route'
import { IsoTime } from './schemas'
import { ActiveLeases, activeLeasesView, Capacity, capacityView, Health, OpenApiDocument, WorkerList, workerView } from './views/system'

/** PUT /api/capacity: total units and/or a busy rating (null = auto); neither, or any other field, is 400 (the engine checks the first). */
export const CapacityChange = z.strictObject({
  total_units: z.number().int().min(1).max(1_000_000).optional(), // 0 would refuse every submit (cost_exceeds_capacity): a pause is the busy rating's 10, or a queue's
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
    read_only: z
      .object({
        reason: z.string().meta({ description: '`disk full` (writes resume once space returns), or the database file or its log `deleted` or `replaced` while the host ran (a restart takes writes again)' }),
        detail: z.string().meta({ description: 'What happened and what to do, naming the files' }),
      })
      .nullable()
      .meta({ description: 'Why the host takes no writes; null while it takes them' }),
  })
  .meta({ id: 'Storage' })
export type StorageAnswer = z.infer<typeof StorageAnswer>

/** GET /api/storage/integrity: how thorough the check is. */
export const IntegrityQuery = z.strictObject({
  depth: z.enum(['quick', 'full']).default('full').meta({ description: "full: SQLite's integrity_check; quick: its quick_check (indexes not matched against their tables, about half the time)" }),
})

/** What an integrity check of the database file found (db/integrity.ts). */
export const IntegrityAnswer = z
  .object({
    path: z.string().meta({ description: 'The database file checked' }),
    ok: z.boolean(),
    problems: z.array(z.string()).meta({ description: "SQLite's findings, at most 20; empty when ok" }),
    ms: z.number().int(),
  })
  .meta({ id: 'IntegrityReport' })

/** POST /api/storage/backup: the backup written. */
export const BackupAnswer = z
  .object({
    path: z.string().meta({ description: 'The backup: <data-dir>/backups/leasehold-<time>.db, a database file a start opens as it is' }),
    bytes: z.number().int(),
    ms: z.number().int().meta({ description: 'How long the copy took' }),
  })
  .meta({ id: 'Backup' })

export function storageAnswer(report: StorageReport, mode: StorageMode): StorageAnswer {
  return {
    ...report,
    last_prune: report.last_prune && { ...report.last_prune, at: iso(report.last_prune.at) },
    read_only: mode.state === 'read_only' ? { reason: mode.reason ?? '', detail: mode.detail ?? '' } : null,
  }
}

/** The routes every API shares: health, capacity, leases, workers, storage and the OpenAPI document. */
export const systemApi: Api = {
  tag: 'system',
  description: 'Health, capacity and the busy rating, leases and workers at a glance, this document',
  prefix: '/api',
  routes: [
    route({
      method: 'GET',
      path: '/health',
      id: 'getHealth',
      summary: 'Liveness and version (no token)',
      answer: Health,
      public: true,
      grouped: false,
      run: (_, { version, storageMode, redis }) => {
        const mode = storageMode()
        return {
          ok: true as const,
          version,
          storage: mode.state,
          ...(mode.reason === null ? {} : { reason: mode.reason }),
          ...(redis ? { redis: redis.health() } : {}),
        }
      },
    }),
    route({
      method: 'GET',
      path: '/capacity',
      id: 'getCapacity',
      summary: 'Capacity: total, busy rating and mode, usable, leased, available',
      answer: Capacity,
      grouped: false,
      run: (_, { engine }) => capacityView(engine.getCapacity()),
    }),
    route({
      method: 'PUT',
      path: '/capacity',
      id: 'setCapacity',
      summary: 'Set total units and/or the busy rating (null = auto)',
      body: CapacityChange,
      answer: Capacity,
      grouped: true,
      run: ({ body }, { engine }) => capacityView(engine.setCapacity(body)),
    }),
    // Every ACTIVE lease in one call, with the host's clock: countdowns need no guessing.
    route({
      method: 'GET',
      path: '/leases',
      id: 'listActiveLeases',
      summary: 'Every ACTIVE lease, with the host clock (`now`)',
      answer: ActiveLeases,
      grouped: false,
      run: (_, { engine }) => activeLeasesView(engine.now(), engine.activeLeases()),
    }),
    route({
      method: 'GET',
      path: '/workers',
      id: 'listWorkers',
      summary: 'Local and external workers',
      answer: WorkerList,
      grouped: false,
      run: (_, { engine, directory }) => ({ workers: directory.list(engine).map(workerView) }),
    }),
    route({
      method: 'GET',
      path: '/storage',
      id: 'getStorage',
      summary: "The database's size on disk (file + WAL) and the retention setting (docs/retention.md)",
      answer: StorageAnswer,
      grouped: false,
      run: (_, { storage, storageMode }) => storageAnswer(storage(), storageMode()),
    }),
    // The file is the running host's alone (db/connection.ts): `leasehold check` asks it here.
    route({
      method: 'GET',
      path: '/storage/integrity',
      id: 'checkStorageIntegrity',
      summary: "Check the database file's integrity, on a thread of the host: seconds for a million finished jobs",
      query: IntegrityQuery,
      answer: IntegrityAnswer,
      errors: { 503: 'storage_error: the check could not read the file, or the host\'s file was deleted or replaced while it ran', 507: 'storage_full: the host is read-only (its disk was full at start) and keeps the file to itself until space returns' },
      grouped: false,
      run: async ({ query }, { checkIntegrity, storageMode }) => {
        const mode = storageMode()
        if (mode.state === 'read_only' && mode.reason === DISK_FULL) {
          throw new HttpError('storage_full', 'The host is read-only (its disk was full at start) and keeps the file to itself until space returns: check it once writes resume')
        }
        if (mode.state === 'read_only') throw new HttpError('storage_error', `There is no file of the host's to check. ${mode.detail}`)
        try {
          return await checkIntegrity(query.depth)
        } catch (error) {
          throw new HttpError('storage_error', `The integrity check could not read the file (${(error as Error).message}); if the disk is failing, copy the file with its -wal away before anything else`)
        }
      },
    }),
    route({
      method: 'POST',
      path: '/storage/backup',
      id: 'backupDatabase',
      summary: 'Copy the database, every commit so far, into <data-dir>/backups while the host serves (SQLite\'s backup API; docs/operations.md)',
      answer: BackupAnswer,
      status: 201,
      errors: {
        409: 'backup_folder_unusable: <data-dir>/backups is a file, a link to nothing or to a file, or a folder the host may not write in (a read-only mount, another user\'s); the detail says what to do (nothing was written)',
        503: 'storage_error: the copy could not be read or written',
        507: 'storage_full: the disk has no room for the copy (nothing of it is left)',
      },
      grouped: false,
      run: async (_, { backup }) => {
        try {
          return await backup()
        } catch (error) {
          const code = (error as { code?: string }).code ?? ''
          // db/backup.ts BackupFolderError: what stands at the folder's path, not the disk.
          if (code === 'backup_folder_unusable') throw new HttpError('backup_folder_unusable', `The backup was not taken: ${(error as Error).message}`)
          if (code === 'ENOSPC' || code === 'SQLITE_FULL') throw new HttpError('storage_full', `The disk has no room for the backup (${(error as Error).message}); nothing of it is left`)
          throw new HttpError('storage_error', `The backup could not be written (${(error as Error).message}); nothing of it is left`)
        }
      },
    }),
    route({
      method: 'GET',
      path: '/openapi.json',
      id: 'getOpenApiDocument',
      summary: 'This document',
      answer: OpenApiDocument,
      grouped: false,
      run: (_, { openApi }) => openApi() as OpenApiDocument,
    }),
  ],
}
