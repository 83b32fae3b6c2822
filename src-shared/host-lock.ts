import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs'
import { refuseNotRegular } from './regular-file'

/**
 * A data dir's lock as those who are not its holder read it: a running host holds `host.lock`
 * for its lifetime (src-main/data-dir/lock.ts takes it, through SQLite's lock; the OS drops it
 * when the process ends in any way) and writes its pid into it as it takes it. Read by the host's
 * client commands, `leasehold worker` and the desktop app alike, to tell a running host from a
 * host.json left behind (src-shared/client-target.ts `hostHolds`); SQLite is loaded for
 * {@link lockHeld} only.
 */

/** SQLite's file header starts so; its user_version (the lock's pid) is the big-endian word at offset 60. */
const SQLITE_MAGIC = 'SQLite format 3\0'
const USER_VERSION_AT = 60

/**
 * The pid the last taker of the lock file at `path` wrote into it, read from its header without
 * SQLite (SQLite's lock covers bytes past the end of so small a file, never its header: the
 * holder keeps no reader out); null when the file is not there, or is not one. A file there that
 * is not a regular file throws NotRegularFileError, unopened.
 */
export function lockPid(path: string): number | null {
  refuseNotRegular(path)
  let fd: number
  try {
    fd = openSync(path, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0)) // a FIFO put there since is not waited on
  } catch {
    return null
  }
  try {
    if (!fstatSync(fd).isFile()) return null
    const header = Buffer.alloc(USER_VERSION_AT + 4)
    if (readSync(fd, header, 0, header.length, 0) < header.length) return null
    return header.toString('latin1', 0, SQLITE_MAGIC.length) === SQLITE_MAGIC ? header.readUInt32BE(USER_VERSION_AT) : null
  } finally {
    closeSync(fd)
  }
}

/**
 * Whether another process holds the lock on the file at `path` now: a read-only connection's
 * first read is refused with SQLITE_BUSY at once (timeout 0). False when the file is not there
 * or not locked; it creates nothing (the file is not in WAL mode: no -wal or -shm to leave). A
 * file there that is not a regular file (a FIFO) throws NotRegularFileError, unopened.
 */
export async function lockHeld(path: string, nativeBinding?: string): Promise<boolean> {
  refuseNotRegular(path)
  const { default: Database } = await import('better-sqlite3')
  let db: InstanceType<typeof Database> | undefined
  try {
    db = new Database(path, { readonly: true, fileMustExist: true, timeout: 0, ...(nativeBinding ? { nativeBinding } : {}) })
    db.pragma('user_version')
    return false
  } catch (error) {
    return (error as { code?: string }).code === 'SQLITE_BUSY'
  } finally {
    db?.close()
  }
}
