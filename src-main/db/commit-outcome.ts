import type { Database } from 'better-sqlite3'

/**
 * Codes of a failed COMMIT whose frames may be on disk all the same: in WAL mode SQLite writes
 * every frame of the commit, its commit frame last, and only then syncs the log. When that sync
 * fails the connection rolls back, yet the frames are in the file, and should the process die
 * before its next commit, the recovery of the next open replays them: the write was made. A
 * commit that failed before its commit frame was written (a full disk, a failed write) was not.
 * A bare `SQLITE_IOERR` says too little to tell, so it counts as a failed sync.
 */
const SYNC_CODES = new Set(['SQLITE_IOERR', 'SQLITE_IOERR_FSYNC', 'SQLITE_IOERR_DIR_FSYNC'])

/**
 * Whether `error` is a sync the disk failed (a commit's or a checkpoint's). After one the host can
 * no longer know what is on the disk: on Linux a failed fsync marks the pages it could not write
 * clean, so a later sync "works" with them gone, and what the host was told is durable may not be.
 * The host takes no more writes until a restart (host.ts `syncFailed`).
 */
export function isFailedSync(error: unknown): boolean {
  const code = codeOf(error)
  return code !== null && SYNC_CODES.has(code)
}

/** The settings row the settling commit writes (its value: when it last settled a commit). */
const SETTLED_KEY = 'commit_settled_at'

/**
 * A write whose outcome is unknown: its commit failed at the sync, and the commit that would
 * have made "not made" certain failed too. Answered 503 `storage_uncertain`: the client retries
 * the same call (a submit with the same `client_request_id`), which answers what was made.
 */
export class StorageUncertainError extends Error {
  override name = 'StorageUncertainError'

  constructor(
    /** The code of the failed commit's error (SQLITE_IOERR_FSYNC…). */
    readonly failedCode: string,
    cause: unknown,
  ) {
    super(`the disk failed to sync a commit (${failedCode}) and then a write: whether the commit was made is unknown`, { cause })
  }
}

const codeOf = (error: unknown): string | null => {
  const code = (error as { code?: unknown } | null | undefined)?.code
  return typeof code === 'string' ? code : null
}

/**
 * Makes the outcome of a failed COMMIT certain, once the connection has rolled it back, and
 * returns the error to answer with. A commit refused before its frames were complete was not
 * made: its error is returned as it is. After a failed sync, one small commit is made (it
 * rewrites a settings row): it writes its frames over the failed commit's and breaks their
 * checksum chain, so that no recovery can replay them, and once it is synced the failed commit
 * is certainly not made: the original error is returned, and "not made" is the truth. Should that
 * commit fail too, a {@link StorageUncertainError} is returned. Either way the memory the engine
 * keeps was put back with the rollback, and it matches what this connection reads; after a
 * restart it is read again from the file, whatever recovery kept.
 */
export function settleFailedCommit(db: Database, error: unknown, now: number): unknown {
  if (!isFailedSync(error)) return error
  const code = codeOf(error)!
  try {
    if (db.inTransaction) db.prepare('ROLLBACK').run()
    db.prepare('BEGIN IMMEDIATE').run()
    db.prepare('INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value').run(SETTLED_KEY, String(now))
    db.prepare('COMMIT').run()
    return error
  } catch {
    try {
      if (db.inTransaction) db.prepare('ROLLBACK').run()
    } catch {
      // The disk is failing: SQLite rolls back at the next open.
    }
    return new StorageUncertainError(code, error)
  }
}
