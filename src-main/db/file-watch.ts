import { closeSync, fsyncSync, mkdirSync, openSync, renameSync, rmSync, statSync } from 'node:fs'
import { dirname } from 'node:path'
import type { Database } from 'better-sqlite3'

/** How often the host looks whether its database and its log are still the files it opened. */
export const FILE_WATCH_INTERVAL_MS = 1_000

/** Which of the host's files went, and how: no longer at its path, or another file there now. */
export interface FileLoss {
  file: 'database' | 'log'
  how: 'deleted' | 'replaced'
}

/** A file as the kernel knows it: a path that names another device or inode names another file. */
export type FileIdentity = { dev: number; ino: number }

/** The file at `path`; null when nothing is there (or a folder on the way is gone); undefined when that cannot be told (no permission). */
function identityOf(path: string): FileIdentity | null | undefined {
  try {
    const { dev, ino } = statSync(path)
    return { dev, ino }
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    return code === 'ENOENT' || code === 'ENOTDIR' ? null : undefined
  }
}

/**
 * The database file and its write-ahead log, as the host opened them, and whether their paths
 * still name them. A file deleted while the host runs (a cleaner of /tmp, an `rm -rf` of the data
 * dir, a sync tool that puts another file in its place) stays open: the host would go on taking
 * commits into it that no later start could see. Read every {@link FILE_WATCH_INTERVAL_MS}, so
 * the host stops taking writes within a second of it (host.ts).
 */
export class DatabaseFiles {
  private readonly database: FileIdentity | null
  /** The log's, once it has been seen: SQLite makes it at the first read, and a start on a full disk may have none. */
  private log: FileIdentity | null

  constructor(private readonly path: string) {
    this.database = identityOf(path) ?? null
    this.log = identityOf(`${path}-wal`) ?? null
  }

  /** The files as opened, for the host's other connections to check theirs against (checkpointer.ts); null when the database was not found. */
  get opened(): { path: string; database: FileIdentity; log: FileIdentity | null } | null {
    return this.database && { path: this.path, database: this.database, log: this.log }
  }

  /** The host made a new log itself (it changed the database's journal mode): the one at the path now is the host's. */
  logMadeAgain(): void {
    this.log = identityOf(`${this.path}-wal`) ?? null
  }

  /** Whether the database or its log is no longer at its path; null while both are. */
  lost(): FileLoss | null {
    const database = this.compare(this.database, this.path)
    if (database) return { file: 'database', how: database }
    if (this.log === null) {
      this.log = identityOf(`${this.path}-wal`) ?? null
      return null
    }
    const log = this.compare(this.log, `${this.path}-wal`)
    return log ? { file: 'log', how: log } : null
  }

  /**
   * The database file went (deleted or replaced): the log at the path, if it is still the one the
   * host opened, holds the pages of the database that went, and a start would copy them into the
   * file now there — a restore put in place — and damage it or mix it with the old. So it is moved
   * to `<path>.log-of-lost-<time>` as soon as the loss is seen, not at the stop: a host killed or
   * a machine losing power meanwhile must not leave it at the path. The host's connections keep
   * reading it through the files they hold open, and the rescue copies from them. Returns where
   * it went, or null when the log at the path is not the host's (none, or another's).
   */
  setAsideLog(now: Date): string | null {
    const log = `${this.path}-wal`
    const there = identityOf(log)
    if (this.log === null || !there || there.dev !== this.log.dev || there.ino !== this.log.ino) return null
    const aside = `${this.path}.log-of-lost-${now.toISOString().replace(/[:.]/g, '-')}`
    renameSync(log, aside)
    syncFolder(dirname(this.path))
    this.asideAt = aside
    return aside
  }

  /** Where {@link setAsideLog} moved the log, until {@link retireLog} removes it. */
  private asideAt: string | null = null

  /**
   * Once what the host held of a database that went is kept (`kept`: the rescued copy has every
   * commit the log had), its log is removed; else it stays set aside (it was moved as the loss
   * was seen, or is moved now: SQLite keeps the log when a connection that may not write closes).
   * Returns what was done, or null when there is no log of the host's left to retire.
   */
  retireLog(kept: boolean, now: Date): { removed: string } | { setAside: string } | null {
    const aside = this.asideAt ?? this.setAsideLog(now)
    if (aside === null) return null
    if (!kept) return { setAside: aside }
    rmSync(aside, { force: true })
    this.asideAt = null
    this.log = null // retired: nothing of the host's is left to move or remove
    return { removed: aside }
  }

  private compare(opened: FileIdentity | null, path: string): FileLoss['how'] | null {
    if (opened === null) return null
    const now = identityOf(path)
    if (now === undefined) return null // cannot be told this time: looked at again in a second
    if (now === null) return 'deleted'
    return now.dev === opened.dev && now.ino === opened.ino ? null : 'replaced'
  }
}

/** From now on every write of this connection fails in SQLite (`query_only`), whoever asks for it: reads go on. */
export function refuseWrites(sqlite: Database): void {
  sqlite.pragma('query_only = ON')
}

/**
 * Keeps every commit of `sqlite` where a start finds it, once `loss` happened to its files, and
 * answers the file that holds them: the database gone, a copy of it ({@link rescueDatabase});
 * the log gone, the database file itself, the log copied into it whole. Throws when that could
 * not be done yet (the host tries again).
 */
export async function keepCommits(sqlite: Database, loss: FileLoss, path: string, now: Date): Promise<string> {
  if (loss.file === 'database') return rescueDatabase(sqlite, path, now)
  // A checkpoint that waits for the checkpointer's pass and any reader, and leaves the log empty.
  const [pass] = sqlite.pragma('wal_checkpoint(TRUNCATE)') as { busy: number; log: number; checkpointed: number }[]
  if (pass && (pass.busy !== 0 || pass.checkpointed < pass.log)) throw new Error(`the log's checkpoint was held up (${pass.checkpointed} of ${pass.log} pages copied)`)
  return path
}

/** What the host says of `loss` (its log, its storage mode's detail): where its commits are kept and what to do, or why they are not yet. */
export function keptDetail(loss: FileLoss, path: string, kept: string | Error): string {
  const gone = loss.file === 'database' ? `The database file ${path}` : `The database's log ${path}-wal`
  const head = `${gone} was ${loss.how} while the host ran: it takes no more writes (reads still work)`
  if (kept instanceof Error) {
    return `${head}, and could not save what it had committed yet (${kept.message}). It tries again every second: keep it running until it says where that is saved`
  }
  const next =
    kept !== path
      ? `stop the host, move the file now at ${path} away, rename ${kept} to ${path}, and start the host`
      : loss.how === 'replaced' && loss.file === 'log'
        ? `stop the host, move the file now at ${path}-wal away, and start the host`
        : 'restart the host to take writes again'
  return `${head}. Everything it had committed is in ${kept}: ${next}`
}

/**
 * Writes a copy of everything `sqlite` holds to a file a start can open, and returns its path:
 * `path` itself when nothing is there (its folder made again, private, if it went too), else
 * beside the file now there, as `<path>.rescued-<time>`. SQLite's backup API copies from the open
 * connection, so the commits made since the file went are in the copy. The copy is private to
 * its owner, as every file of the data dir is.
 */
export async function rescueDatabase(sqlite: Database, path: string, now: Date): Promise<string> {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 })
  const target = claimFile(path) ?? claimFile(`${path}.rescued-${now.toISOString().replace(/[:.]/g, '-')}`)
  if (target === null) throw new Error(`${path} and the rescue file beside it are both taken`)
  try {
    await sqlite.backup(target)
  } catch (error) {
    // A copy cut short must not be taken for the database: a start would open it as a new one.
    rmSync(target, { force: true })
    throw error
  }
  return target
}

/** Makes `path` as a new, empty, private file, or answers null when a file is there already. */
function claimFile(path: string): string | null {
  try {
    closeSync(openSync(path, 'wx', 0o600))
    return path
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return null
    throw error
  }
}

/** Makes a rename in `folder` last through a power loss (a folder is synced through a descriptor of its own). */
function syncFolder(folder: string): void {
  const fd = openSync(folder, 'r')
  try {
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}
