import { chmodSync, closeSync, lstatSync, mkdirSync, openSync, readdirSync, readlinkSync, renameSync, rmSync, statSync } from 'node:fs'
import { join, resolve } from 'node:path'
import BetterSqlite3, { type Database } from 'better-sqlite3'
import { markAsBackup } from './open'

/** A backup taken: the file it wrote, its size, and how long the copy took. */
export interface BackupReport {
  path: string
  bytes: number
  ms: number
}

/**
 * Copies the database, every commit up to the copy's end, into `<dir>/leasehold-<time>.db` while
 * the host serves: SQLite's backup API reads the pages through the host's own connection, a
 * hundred at a time between the host's other work (a copy of the file with `cp` while the host
 * commits can be torn: the file is the host's alone). The copy is written as `….partial` and
 * renamed once whole, so a file named `.db` there is always a whole backup; a copy cut short
 * (a full disk) is removed. Private to its owner, as every file of the data dir is. A start opens
 * a backup as any database file: restore one with the host stopped (docs/operations.md).
 */
export async function backupDatabase(sqlite: Database, dir: string, now: Date, nativeBinding?: string): Promise<BackupReport> {
  const started = performance.now()
  refuseUnusableFolder(dir)
  const path = join(dir, `leasehold-${now.toISOString().replace(/[:.]/g, '-')}.db`)
  const partial = `${path}.partial`
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 })
    removeCutShort(dir)
    // Private from its first byte (SQLite gives its journal the same mode).
    closeSync(openSync(partial, 'wx', 0o600))
  } catch (error) {
    throw notWritable(dir, error) ?? error
  }
  try {
    await copyOnce(sqlite, partial)
    closedCleanly(partial, nativeBinding)
    chmodSync(partial, 0o600) // as created, whatever the umask
    renameSync(partial, path)
  } catch (error) {
    rmSync(partial, { force: true })
    throw error
  }
  return { path, bytes: statSync(path).size, ms: Math.round(performance.now() - started) }
}

/**
 * A backups folder that is not one, or one the host may not write in: what the operator put at
 * its path, which no disk fault explains and no retry mends. The host answers it `409 backup_folder_unusable`, not as the
 * disk's `storage_error`.
 */
export class BackupFolderError extends Error {
  /** The answer's code, read by the route (http/system.ts), which loads nothing of this module. */
  readonly code = 'backup_folder_unusable'
}

/**
 * Refuses, saying what is wrong and what to do, a backups path that names no folder: a file, or
 * a link to nothing or to a file. Left to `mkdir`, they read as errno text (`EEXIST … mkdir`,
 * `ENOENT … mkdir`) that looks like a failing disk. A path that does not exist is made.
 */
function refuseUnusableFolder(dir: string): void {
  let found: ReturnType<typeof lstatSync>
  try {
    found = lstatSync(dir)
  } catch {
    return // none yet (made below), or not to be read: mkdir says why
  }
  if (found.isDirectory()) return
  if (!found.isSymbolicLink()) throw new BackupFolderError(`${dir} is a file, not a folder: move it away (the next backup makes the folder) or replace it with a folder`)
  const target = resolve(dir, '..', readlinkSync(dir))
  let pointed: ReturnType<typeof statSync>
  try {
    pointed = statSync(dir)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') return // mkdir says why
    throw new BackupFolderError(`${dir} is a link to ${target}, which does not exist: make that folder, or remove the link (the next backup makes the folder)`)
  }
  if (!pointed.isDirectory()) throw new BackupFolderError(`${dir} is a link to ${target}, which is a file, not a folder: point the link at a folder, or remove it (the next backup makes the folder)`)
}

/**
 * The copy holds the running host's mark (db/open.ts `setHostMark`), which tells a start that the
 * last host ended without closing the file: a start on a restored backup would warn of an
 * unclean shutdown and check the whole file. The copy is a file no host had open, so its mark
 * goes. In its place it is marked as a backup, with when it was taken: the host keeps giving
 * event ids and stream message ids after the copy, and a start on the restored copy moves its
 * own past those (engine/store/counters.ts `goPastRestoredBackup`).
 */
function closedCleanly(copy: string, nativeBinding?: string): void {
  const db = new BetterSqlite3(copy, nativeBinding ? { nativeBinding } : {})
  try {
    markAsBackup(db, Date.now())
  } finally {
    db.close()
  }
}

/** What the errors of a folder the host may not write in say of it. */
const NOT_WRITABLE: Readonly<Record<string, string>> = {
  EROFS: 'is on a read-only file system',
  EACCES: 'is not writable by the user the host runs as',
  EPERM: 'is not writable by the user the host runs as',
}

/**
 * A folder the host may not write in (a read-only mount, another user's folder) as what it is:
 * the operator's to change, like a file at the folder's path, not a failing disk. Null for any
 * other error, which stays the disk's.
 */
function notWritable(dir: string, error: unknown): BackupFolderError | null {
  const said = NOT_WRITABLE[(error as NodeJS.ErrnoException).code ?? '']
  return said === undefined ? null : new BackupFolderError(`${dir} ${said}: make it writable, or make it a link to a folder that is (nothing was written)`)
}

/** A copy's file until it is whole, and the files SQLite writes beside it (the copy's journal; its log while its mark is taken out). */
const CUT_SHORT = /\.db\.partial(-journal|-wal|-shm)?$/

/**
 * Removes what copies cut short left: a host killed (or a machine losing power) in the middle of
 * a copy leaves its `.partial` file, which no one else writes (backups run one at a time, and one
 * host holds the data dir), and would otherwise stay for good.
 */
function removeCutShort(dir: string): void {
  for (const name of readdirSync(dir)) if (CUT_SHORT.test(name)) rmSync(join(dir, name), { force: true })
}

/** How many times a copy is begun before the database is called too busy to copy. */
const MAX_STARTS = 200

/**
 * One whole copy into `target`. SQLite refuses a copy's first step as busy while the connection
 * has a commit group open, and better-sqlite3 takes that refusal for a finished copy of nothing
 * (no page copied, the file removed): such a copy is begun again, a few milliseconds later,
 * until one begins. Once begun, the host's commits go into the copy as they are made.
 */
async function copyOnce(sqlite: Database, target: string): Promise<void> {
  for (let start = 1; ; start++) {
    const { totalPages } = await sqlite.backup(target)
    if (totalPages > 0) return
    if (start === MAX_STARTS) throw new Error(`no copy could begin in ${MAX_STARTS} tries: the database stayed busy`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}
