import { closeSync, fsyncSync, mkdirSync, openSync, readSync, renameSync, rmSync, statSync } from 'node:fs'
import { dirname } from 'node:path'
import type { Database } from 'better-sqlite3'

/** How often the host looks whether its database and its log are still the files it opened, whole. */
export const FILE_WATCH_INTERVAL_MS = 1_000

/**
 * Which of the host's files went, and how: no longer at its path, another file there now, or
 * the same file cut short in place (`: > leasehold.db`, `truncate -s 0 leasehold.db-wal`).
 */
export interface FileLoss {
  file: 'database' | 'log'
  how: 'deleted' | 'replaced' | 'cut short'
}

/** A file as the kernel knows it: a path that names another device or inode names another file. */
export type FileIdentity = { dev: number; ino: number }

/** The file at `path` and its length; null when nothing is there (or a folder on the way is gone); undefined when that cannot be told (no permission). */
function identityOf(path: string): (FileIdentity & { size: number }) | null | undefined {
  try {
    const { dev, ino, size } = statSync(path)
    return { dev, ino, size }
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    return code === 'ENOENT' || code === 'ENOTDIR' ? null : undefined
  }
}

/** The first bytes of every SQLite database file (its page 1 begins with them). */
const DATABASE_MAGIC = Buffer.from('SQLite format 3\0', 'latin1')
/** The first four bytes of a write-ahead log's header, big-endian: 0x377f0682 or 0x377f0683 (the checksums' byte order). */
const LOG_MAGIC = 0x377f0682

/** The first `length` bytes of the file open at `fd` (fewer when it is shorter); null when they cannot be read. */
function headOf(fd: number, length: number): Buffer | null {
  try {
    const head = Buffer.alloc(length)
    return head.subarray(0, readSync(fd, head, 0, length, 0))
  } catch {
    return null
  }
}

/** A descriptor of the file at `path` for {@link headOf}; null when it cannot be opened (the look then leaves its head alone). */
function openToRead(path: string): number | null {
  try {
    return openSync(path, 'r')
  } catch {
    return null
  }
}

/**
 * Whether a database file `size` bytes long, beginning with `head`, was cut short: SQLite only
 * ever writes and truncates it in whole pages, never below its first, and its first page
 * begins with {@link DATABASE_MAGIC}. A file cut to nothing that a checkpoint then wrote pages
 * into again is as long as before, with a hole where its first page was: the magic tells.
 */
export function databaseCutShort(size: number, head: Buffer, pageSize: number): boolean {
  return size < pageSize || size % pageSize !== 0 || !head.subarray(0, DATABASE_MAGIC.length).equals(DATABASE_MAGIC)
}

/**
 * Whether a log `size` bytes long, beginning with `head`, was cut short, when it was `longest`
 * bytes long at the most since the host made it. While the host runs, SQLite never makes its log
 * shorter: it starts it over from its beginning once all of it is in the database file, and
 * truncates it only for a `journal_size_limit` (the host sets none), a `wal_checkpoint(TRUNCATE)`
 * (the host runs one only at its start, and once its files are lost) or as the last connection
 * closes. Only the host's main connection writes to it, between two of the host's looks: a log
 * cut short and then written past by the next commit is as long as before, with a hole where its
 * header was, which the magic tells.
 */
export function logCutShort(size: number, head: Buffer, longest: number): boolean {
  return size < longest || (size > 0 && (head.length < 4 || (head.readUInt32BE(0) & ~1) !== LOG_MAGIC))
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
  private log: FileIdentity | null = null
  /** The log's greatest length seen since it was made: it never gets shorter while the host runs ({@link logCutShort}). */
  private logLongest = 0

  /**
   * The files as opened, held open to read their first bytes: a read through a descriptor costs
   * a microsecond where an open costs ten, and the look reads them only while their paths still
   * name them. Closed by {@link close}.
   */
  private databaseFd: number | null
  private logFd: number | null = null

  /** `pageSize`: the database's (`PRAGMA page_size`). */
  constructor(
    private readonly path: string,
    private readonly pageSize: number,
  ) {
    this.database = identityOf(path) ?? null
    this.databaseFd = this.database && openToRead(path)
    this.logSeen()
  }

  /** The log at the path is taken for the host's: as opened, made again by the host, or first seen. */
  private logSeen(): void {
    if (this.logFd !== null) closeSync(this.logFd)
    this.log = identityOf(`${this.path}-wal`) ?? null
    this.logFd = this.log && openToRead(`${this.path}-wal`)
    this.logLongest = 0
  }

  /** The files of the database `sqlite` has open at `path`, with its page size. */
  static of(sqlite: Database, path: string): DatabaseFiles {
    return new DatabaseFiles(path, sqlite.pragma('page_size', { simple: true }) as number)
  }

  /** Lets go of the descriptors the look reads through (at the host's stop, or a start that failed); once. */
  close(): void {
    if (this.databaseFd !== null) closeSync(this.databaseFd)
    if (this.logFd !== null) closeSync(this.logFd)
    this.databaseFd = null
    this.logFd = null
  }

  /** The files as opened, for the host's other connections to check theirs against (checkpointer.ts); null when the database was not found. */
  get opened(): { path: string; database: FileIdentity; log: FileIdentity | null } | null {
    return this.database && { path: this.path, database: this.database, log: this.log }
  }

  /** The host made a new log itself (it changed the database's journal mode): the one at the path now is the host's. */
  logMadeAgain(): void {
    this.logSeen()
  }

  /**
   * Whether the database or its log is no longer at its path, or was cut short in place; null
   * while both are whole. Two stats and two reads of a few bytes through descriptors held open
   * (tens of microseconds, on the host's main thread every second: test/unit/file-watch.test.ts).
   */
  lost(): FileLoss | null {
    const database = this.compare(this.database, this.path, (size) => {
      const head = this.databaseFd === null ? null : headOf(this.databaseFd, DATABASE_MAGIC.length)
      return head !== null && databaseCutShort(size, head, this.pageSize)
    })
    if (database) return { file: 'database', how: database }
    if (this.log === null) {
      this.logSeen()
      return null
    }
    const log = this.compare(this.log, `${this.path}-wal`, (size) => {
      const head = this.logFd === null ? null : headOf(this.logFd, 4)
      if (head === null) return false
      if (logCutShort(size, head, this.logLongest)) return true
      this.logLongest = Math.max(this.logLongest, size)
      return false
    })
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
    if (this.logFd !== null) closeSync(this.logFd)
    this.logFd = null
    return { removed: aside }
  }

  private compare(opened: FileIdentity | null, path: string, cutShort: (size: number) => boolean): FileLoss['how'] | null {
    if (opened === null) return null
    const now = identityOf(path)
    if (now === undefined) return null // cannot be told this time: looked at again in a second
    if (now === null) return 'deleted'
    if (now.dev !== opened.dev || now.ino !== opened.ino) return 'replaced'
    return cutShort(now.size) ? 'cut short' : null
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

/**
 * What the host says of a file cut short in place (its log, its storage mode's detail). No copy
 * it could make would be whole: the pages cut off are read back as zeros, by the host's
 * connection as by any other, so it names what to do instead.
 */
export function cutShortDetail(loss: FileLoss, path: string, dataDir: string): string {
  const what =
    loss.file === 'database'
      ? `The database file ${path} was cut short in place while the host ran: it takes no more writes (reads still work). The pages cut off are lost from the file`
      : `The database's log ${path}-wal was cut short in place while the host ran: it takes no more writes (reads still work). The commits the log held that were not yet copied into the database file are lost from it`
  return `${what}: stop the host and run \`leasehold check --data-dir ${dataDir}\`; should the file fail it, keep a copy of it with its -wal and restore a backup`
}

/** What the host says of `loss` (its log, its storage mode's detail): where its commits are kept and what to do, or why they are not yet. */
export function keptDetail(loss: FileLoss, path: string, kept: string | Error): string {
  const gone = loss.file === 'database' ? `The database file ${path}` : `The database's log ${path}-wal`
  const head = `${gone} was ${loss.how} while the host ran: it takes no more writes (reads still work)`
  if (kept instanceof Error) {
    return `${head}, and could not save what it had committed yet (${kept.message}). It tries again every second: keep it running until it says where that is saved`
  }
  // A file another put at the path may be a backup restored on purpose (docs/operations.md
  // supports `mv` over the file while the host runs): putting the copy back would undo it.
  const next =
    kept !== path
      ? `stop the host, move the file now at ${path} away, rename ${kept} to ${path}, and start the host. ` +
        `If the file now at ${path} was put there on purpose (a backup restored), restarting the host is all it needs: ` +
        `${kept} keeps everything the host had committed, the commits made since that backup included`
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
