import { accessSync, chmodSync, constants, existsSync, lstatSync, mkdirSync, readlinkSync, rmSync, type Stats, statSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { noFreeFiles } from '../db/free-files'
import { LockFile } from '../db/lock-file'
import { cannotOpen, damagedDatabaseLine, DatabaseHeldError } from '../db/open'
import { storageFault } from '../error-answer'
import { readRunningHost } from '../desktop/running-host'
import { WORKER_TOKENS_FILE } from './worker-tokens'
import { HOST_FILE, LOCK_FILE, readHostFile, type HostFile, TOKEN_FILE } from '../../src-shared/client-target'
import { othersMayWrite } from '../../src-shared/others-may-write'

/** Why a host cannot start on its data dir; the CLI prints it as one line and exits 1. */
export class HostStartError extends Error {
  override name = 'HostStartError'
}

/** The file in the data dir whose lock says a host runs there. */

/** The data dir held by this process until {@link release}. */
export interface DataDirLock {
  /**
   * What host.json named as the lock was taken, when that process is alive and is not this one:
   * a host of an older release, which took no host.lock, or a process that took a dead host's
   * pid. The file is left in place; which of the two it is, only the database tells
   * ({@link unlockedHostError}).
   */
  readonly liveHostFile: HostFile | null
  release(): void
}

const reason = (error: unknown) => (error as Error).message

/**
 * Creates the data dir (mode 0700) with its missing parents, one at a time, and refuses one
 * another user may write in ({@link refuseSharedDataDir}). Node's recursive
 * mkdir retries forever where the parent exists but refuses new entries (under /proc it spins
 * at 100 % CPU); here each missing part is made once and any refusal is the answer.
 */
export function createDataDir(dataDir: string): void {
  const missing: string[] = []
  let at = resolve(dataDir)
  while (!existsSync(at)) {
    // A symbolic link to nothing: mkdir would answer only EEXIST, for a path that "does not exist".
    const target = danglingLinkTarget(at)
    if (target !== null) {
      throw new HostStartError(
        `cannot create the data dir ${dataDir}: ${at} is a symbolic link to ${target}, which does not exist; create that folder, or point the link at one that exists`,
      )
    }
    missing.unshift(at)
    if (dirname(at) === at) break
    at = dirname(at)
  }
  try {
    for (const path of missing) mkdirSync(path, { mode: 0o700 })
  } catch (error) {
    throw new HostStartError(`cannot create the data dir ${dataDir} (${reason(error)})`)
  }
  const stats = statSync(dataDir)
  if (!stats.isDirectory()) throw new HostStartError(`the data dir ${dataDir} is not a directory`)
  refuseSharedDataDir(dataDir, stats)
  try {
    accessSync(dataDir, constants.W_OK)
  } catch (error) {
    throw new HostStartError(`cannot write in the data dir ${dataDir} (${reason(error)})`)
  }
}

/**
 * Refuses a data dir another user may write in (src-shared/others-may-write.ts): one owned by
 * another user, or writable by its group or others (a folder made with `mkdir -m 777`, or by a
 * umask of 002). There, another user could put a `token` the host would serve with, or
 * `handlers/` its local workers would load and run as this user. The host does not tighten the
 * folder itself: it cannot tell whether someone already did.
 */
function refuseSharedDataDir(dataDir: string, stats: Stats): void {
  const shared = othersMayWrite(dataDir, stats, '700')
  if (!shared) return
  throw new HostStartError(
    `the data dir ${dataDir} ${shared.why}: another user could put a token or handlers in it, which this host would serve with or run as this user; check that what it holds is yours, then run \`${shared.fix}\`, or give another --data-dir`,
  )
}

/** Where the symbolic link at `path` points, when it is one (existsSync, which follows links, said nothing is there); else null. */
function danglingLinkTarget(path: string): string | null {
  try {
    return lstatSync(path).isSymbolicLink() ? readlinkSync(path) : null
  } catch {
    return null
  }
}

/** The files of a data dir that hold secrets or every job's data: the token, the worker tokens' digests, the database and its log. */
const PRIVATE_FILES = [TOKEN_FILE, WORKER_TOKENS_FILE, 'leasehold.db', 'leasehold.db-wal', 'leasehold.db-shm']

/**
 * Makes the data dir's files readable and writable by their owner alone (0600), as a start
 * creates them. A data dir the user made before the first start keeps its own mode (the host
 * makes 0700 only the folders it creates, and refuses one others may write in, but not one they
 * may read), and SQLite creates the database with the process's
 * umask (0644, commonly): every local user could then read the jobs, or a token left loose. The
 * log files SQLite creates later take the database file's mode. Not on Windows, whose files
 * follow their folder's ACL.
 */
export function keepDataPrivate(dataDir: string): void {
  if (process.platform === 'win32') return
  for (const name of PRIVATE_FILES) {
    const path = join(dataDir, name)
    try {
      const stat = statSync(path)
      if (stat.isFile() && (stat.mode & 0o077) !== 0) chmodSync(path, stat.mode & 0o700)
    } catch {
      // Not there (yet), or not ours to change: the start goes on; what it cannot read it names.
    }
  }
}

/**
 * Holds the data dir for this process's lifetime, so that a second host refuses to start on it.
 * The lock is SQLite's on a small file of its own, `host.lock` (src-main/db/lock-file.ts): the OS
 * drops it when the process ends in any way, so a host killed with SIGKILL leaves nothing to go
 * stale and the next one starts at once.
 *
 * A refusal names the holder from its host.json, written once it listens. Once the lock is
 * ours, a host.json left there is removed when its process has ended (a dead host's) or is this
 * one; one naming a live process is kept (see {@link DataDirLock.liveHostFile}).
 */
export function lockDataDir(dataDir: string, nativeBinding?: string): DataDirLock {
  const path = join(dataDir, LOCK_FILE)
  // A lock file of another user's (a start with sudo once made it root's): SQLite would open it
  // read-only without a word and call the write that takes the lock a failed disk.
  const notWritable = isDirectory(path) ? null : cannotOpen(path) // a directory is named below
  if (notWritable) throw new HostStartError(`cannot open ${path} for writing (${notWritable}): it is the data dir's lock file; start the host as its owner, or remove it if no host runs`)
  let lock: LockFile
  try {
    lock = LockFile.open(path, nativeBinding)
  } catch (error) {
    // SQLite says only that it could not open the file.
    if (isDirectory(path)) throw new HostStartError(`${path} is a directory, not the data dir's lock file: remove it`)
    const noFiles = noFreeFiles(dataDir)
    if (noFiles) throw new HostStartError(`the disk that holds ${path} has ${noFiles}: SQLite cannot create the data dir's lock file (${reason(error)}); remove files from that disk and start again`)
    throw new HostStartError(`cannot write in the data dir ${dataDir} (${reason(error)})`)
  }
  try {
    lock.hold(process.pid)
  } catch (error) {
    if ((error as { code?: string }).code === 'SQLITE_BUSY') throw new HostStartError(holderMessage(dataDir, readHostFile(dataDir)))
    throw storageStartError(error, dataDir) ?? new HostStartError(`cannot lock the data dir ${dataDir} (${reason(error)}); ${path} may be damaged: remove it if no host runs`)
  }
  const liveHostFile = readRunningHost(dataDir)
  if (!liveHostFile) removeHostFile(join(dataDir, HOST_FILE))
  return { liveHostFile, release: () => lock.release() }
}

/**
 * Why a start whose database another process holds is refused, when host.json names a live
 * process: a host of a release that took no host.lock runs on the data dir, and is named as a
 * host that holds the lock is. Null for any other failure.
 */
export function unlockedHostError(error: unknown, lock: DataDirLock, dataDir: string): HostStartError | null {
  return error instanceof DatabaseHeldError && lock.liveHostFile ? new HostStartError(holderMessage(dataDir, lock.liveHostFile)) : null
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory()
  } catch {
    return false
  }
}

function holderMessage(dataDir: string, holder: HostFile | null): string {
  const who = holder
    ? `another Leasehold host (pid ${holder.pid}, ${holder.url}) runs on the data dir ${dataDir}`
    : `another Leasehold host runs on the data dir ${dataDir} (it has not said where it listens: it is starting, or its disk was too full for ${HOST_FILE})`
  return `${who}; stop it first, or give this one another --data-dir`
}

/**
 * A start that failed on the disk itself (full, failing) says so and names the data dir; null for
 * any other error. A failed read may as well be a damaged file (SQLite reports both alike, see
 * error-answer.ts): the line says so, and that `leasehold check` tells them apart.
 */
export function storageStartError(error: unknown, dataDir: string): HostStartError | null {
  const fault = storageFault(error)
  if (!fault) return null
  if (fault === 'read') {
    return new HostStartError(damagedDatabaseLine(dataDir, reason(error)))
  }
  return new HostStartError(`the disk that holds the data dir ${dataDir} ${fault === 'full' ? 'is full' : 'failed a write'} (${reason(error)})`)
}

/** Writes host.json (mode 0600), saying where the host listens: what parseHostFile (src-shared/client-target.ts) reads. */
export function writeHostFile(path: string, host: HostFile): void {
  try {
    writeFileSync(path, `${JSON.stringify(host)}\n`, { mode: 0o600 })
  } catch (error) {
    throw new HostStartError(`cannot write ${path} (${reason(error)})`)
  }
}

/** Removes host.json; something else in its place (a directory) is left for writeHostFile to report. */
export function removeHostFile(path: string): void {
  try {
    rmSync(path, { force: true })
  } catch {
    // not a file: nothing of ours to remove
  }
}
