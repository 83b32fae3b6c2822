import { statSync } from 'node:fs'
import { type Engine, STATS_RETAIN_MS } from '../engine'
import { DAY } from '../engine/rules/clock'
import type { Pruner, PrunePass } from './pruner'

/** The database's size on disk and the retention that bounds it (GET /api/storage, `leasehold status`). */
export interface StorageReport {
  /** The database file and its write-ahead log together: what the data takes on disk. */
  database_bytes: number
  file_bytes: number
  wal_bytes: number
  /** Free pages inside the file, reused before it grows. */
  free_bytes: number
  auto_vacuum: 'none' | 'full' | 'incremental'
  /** Days a finished job is kept; 0 = forever. */
  retain_days: number
  /** Days the statistics are kept (hourly beyond the charts' longest range). */
  stats_retain_days: number
  last_prune: PrunePass | null
}

function fileSize(path: string): number {
  try {
    return statSync(path).size
  } catch {
    return 0 // no WAL yet, or none at all (a database in memory)
  }
}

export function storageReport(engine: Engine, pruner: Pruner): StorageReport {
  const figures = engine.storage()
  const file = engine.databaseFile
  const inMemory = file === '' || file === ':memory:'
  const fileBytes = inMemory ? figures.page_count * figures.page_size : fileSize(file)
  const walBytes = inMemory ? 0 : fileSize(`${file}-wal`)
  return {
    database_bytes: fileBytes + walBytes,
    file_bytes: fileBytes,
    wal_bytes: walBytes,
    free_bytes: figures.freelist_count * figures.page_size,
    auto_vacuum: figures.auto_vacuum,
    retain_days: pruner.retainDays,
    stats_retain_days: STATS_RETAIN_MS / DAY,
    last_prune: pruner.last,
  }
}
