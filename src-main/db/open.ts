import BetterSqlite3, { type Database } from 'better-sqlite3'
import { getTableName, is } from 'drizzle-orm'
import { drizzle } from 'drizzle-orm/better-sqlite3'
import { migrate } from 'drizzle-orm/better-sqlite3/migrator'
import { SQLiteTable } from 'drizzle-orm/sqlite-core'
import { closeSync, existsSync, lstatSync, openSync, readFileSync, readlinkSync, readSync, statfsSync, statSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { notRegularFile } from '../../src-shared/regular-file'
import { companionsAsFound } from './companion-files'
import { connectionName, connectionPath } from './connection'
import { noFreeFiles } from './free-files'
import * as schema from './schema'

/**
 * How hard a commit is pushed to disk.
 * - `normal` (synchronous=NORMAL in WAL mode): a commit is in the OS's hands when it returns,
 *   so nothing acknowledged is lost when the process is killed; a power cut may lose the last
 *   commits (never corrupt the file).
 * - `full` (synchronous=FULL): every commit is fsynced; also survives power loss, at a fraction
 *   of the speed (docs/configuration.md has the figures).
 */
export type Durability = 'normal' | 'full'

/** Marks a file as Leasehold's ('LSHD'), so another program's SQLite file is never migrated. */
const APPLICATION_ID = 0x4c534844

/** drizzle/ of this checkout: two levels up from src-main/db/ and from the bundle in out/cli/ (scripts/cli-bundle.js) alike. */
export const DEFAULT_MIGRATIONS_FOLDER = fileURLToPath(new URL('../../drizzle', import.meta.url))

export type Drizzle = ReturnType<typeof drizzle<typeof schema>>

export interface OpenedDatabase {
  sqlite: Database
  orm: Drizzle
  /**
   * The file had a write-ahead log when it was opened: the last process that had it open did not
   * close it (a crash, a kill, a power cut). SQLite recovers from the log by itself; the host then
   * checks the file's integrity in the background (db/integrity.ts).
   */
  uncleanShutdown: boolean
}

export interface OpenOptions {
  /** A file path, or ':memory:' for tests. */
  path: string
  durability?: Durability
  migrationsFolder?: string
  /** A better-sqlite3 addon built for another runtime (Electron's ABI), instead of node_modules'. */
  nativeBinding?: string
  /** Where the one-time conversion of an older file to incremental vacuum, and an upgrade's migrations, are reported. */
  log?: (line: string) => void
}

/** Why a database cannot be opened; the CLI prints `message` as one line and exits. */
export class DatabaseOpenError extends Error {
  override name = 'DatabaseOpenError'

  constructor(
    message: string,
    /** The open failed because the disk is full: an existing file may still be opened read-only ({@link openOnFullDisk}). */
    readonly diskFull = false,
  ) {
    super(message)
  }
}

interface JournalEntry {
  when: number
  tag: string
}

function readJournal(folder: string): JournalEntry[] {
  const path = join(folder, 'meta', '_journal.json')
  return (JSON.parse(readFileSync(path, 'utf8')) as { entries: JournalEntry[] }).entries
}

function tableExists(sqlite: Database, name: string): boolean {
  return sqlite.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(name) !== undefined
}

/**
 * Why `file` cannot be opened for reading and writing, as `CODE: reason` (or `it is a FIFO, not a
 * regular file`), or null when it can (or does not exist).
 */
export function cannotOpen(file: string): string | null {
  if (!existsSync(file)) {
    // existsSync follows a symbolic link: one to nothing is "no file" to it, and SQLite then fails to create the file there.
    const link = linkTarget(file)
    return link === null ? null : `a symbolic link to ${link}, which does not exist`
  }
  // A FIFO's opening would block (SQLite's does), and a device's reads never end.
  const notRegular = notRegularFile(file)
  if (notRegular) return notRegular
  try {
    closeSync(openSync(file, 'r+'))
    return null
  } catch (cause) {
    const { code, message } = cause as NodeJS.ErrnoException
    return `${code ?? 'error'}: ${message.replace(/^\w+: /, '')}`
  }
}

/** Where the symbolic link at `file` points, or null when `file` is not one. */
function linkTarget(file: string): string | null {
  try {
    return lstatSync(file).isSymbolicLink() ? readlinkSync(file) : null
  } catch {
    return null
  }
}

/**
 * The database's write-ahead log and shared-memory files (`-wal`, `-shm`), which SQLite opens on
 * the first read, must open too: when one cannot, SQLite says only "unable to open database
 * file", or quietly opens the database read-only (or, a FIFO, waits forever). The refusal names
 * that file and why. A reader that writes nothing (`leasehold check`) asks only `notRegularFile`.
 */
export function checkCompanionFiles(path: string, why: (file: string) => string | null = cannotOpen): void {
  for (const file of [`${path}-wal`, `${path}-shm`]) {
    const reason = why(file)
    if (reason) throw new DatabaseOpenError(`cannot open ${file} (${reason}); ${path} was left untouched`)
  }
}

/**
 * The refusal of a file another process holds past the busy timeout: a `leasehold check` in
 * progress, a database browser, or a host of an older release, which took no host.lock (the
 * start names that one by its host.json: data-dir/lock.ts). Its reads pass the read-only check,
 * so the lock is met either there or on the first write of the set-up.
 */
export class DatabaseHeldError extends DatabaseOpenError {
  override name = 'DatabaseHeldError'

  constructor(path: string) {
    super(`another process has ${path} open (a \`leasehold check\` in progress, a database browser): the host needs the file to itself; close it and start again (the file was left untouched)`)
  }
}

const heldError = (path: string) => new DatabaseHeldError(path)

/** Why a file SQLite could not read is refused, in one line, naming the file that cannot be opened if one cannot. */
function unreadableError(path: string, error: unknown): DatabaseOpenError {
  const { code, message } = error as { code?: string; message: string }
  // Held past the busy timeout by another process: a `leasehold check` in progress, a database browser.
  if (code?.startsWith('SQLITE_BUSY')) return heldError(path)
  if (code?.startsWith('SQLITE_CANTOPEN')) {
    const reason = cannotOpen(path)
    if (reason) return new DatabaseOpenError(`cannot open ${path} (${reason}); it was left untouched`)
  }
  // The first read creates the -shm (and -wal) files: on a full disk that write fails, and SQLite
  // says only "disk I/O error".
  const free = freeBytes(dirname(path))
  if (free !== null && free < MIN_FREE_TO_OPEN && (code?.startsWith('SQLITE_IOERR') || code === 'SQLITE_FULL')) {
    return new DatabaseOpenError(
      `the disk that holds ${path} is full (${mb(free)} free): SQLite cannot create its ${path}-shm and -wal files (${code}); free some space and start again (the file was left untouched)`,
      true,
    )
  }
  const noFiles = noFreeFiles(dirname(path))
  if (noFiles && code?.startsWith('SQLITE_CANTOPEN')) {
    return new DatabaseOpenError(
      `the disk that holds ${path} has ${noFiles}: SQLite cannot create its ${path}-shm and -wal files (${code}); remove files from that disk and start again (the file was left untouched)`,
    )
  }
  // A file that says it is Leasehold's and fails a read is Leasehold's, damaged (cut short, a bad
  // sector) or on a failing disk: said as the start says a failed read (damagedDatabaseLine).
  if (code?.startsWith('SQLITE_CORRUPT') && isLeaseholdHeader(path)) return new DatabaseOpenError(damagedDatabaseLine(dirname(path), oneLine(message)))
  return new DatabaseOpenError(`${path} is not a readable SQLite database (${oneLine(message)}); it was left untouched`)
}

/**
 * What a start says of a read of its database that failed: the file damaged or its disk failing
 * (SQLite reports both alike, see error-answer.ts), how to tell which, and what to keep first.
 */
export function damagedDatabaseLine(dataDir: string, reason: string): string {
  return (
    `a read of the database in the data dir ${dataDir} failed (${reason}): the file is damaged or its disk is failing; ` +
    `\`leasehold check --data-dir ${dataDir}\` tells which; keep a copy of the file with its -wal before anything else`
  )
}

/** Whether the file at `path` begins as a Leasehold database does: SQLite's header, with Leasehold's application id in it. */
export function isLeaseholdHeader(path: string): boolean {
  let fd: number
  try {
    fd = openSync(path, 'r')
  } catch {
    return false
  }
  try {
    const header = Buffer.alloc(72)
    return readSync(fd, header, 0, 72, 0) === 72 && header.toString('latin1', 0, 16) === 'SQLite format 3\0' && header.readUInt32BE(68) === APPLICATION_ID
  } catch {
    return false
  } finally {
    closeSync(fd)
  }
}

/** Less free space than this, and an I/O error while opening, means a full disk: the -shm file alone takes 32 KiB. */
const MIN_FREE_TO_OPEN = 1024 * 1024

/**
 * Refuses, as a full disk, to open an existing file for writes with less than
 * {@link MIN_FREE_TO_OPEN} free: the host then serves it for reads only ({@link openOnFullDisk})
 * until space returns. A connection of the host's process keeps the log's index in memory
 * (connection.ts), so opening writes nothing, and without this the first write to fail would be
 * the host's own start (its host.json) instead.
 */
function refuseFullDisk(path: string): void {
  const free = freeBytes(dirname(path))
  if (free !== null && free < MIN_FREE_TO_OPEN) {
    throw new DatabaseOpenError(`the disk that holds ${path} is full (${mb(free)} free); free some space and start again (the file was left untouched)`, true)
  }
}

/** An error message on one line (a query's text, quoted by drizzle, spans many). */
const oneLine = (text: string) => text.replace(/\s*\n\s*/g, ' ')

/**
 * Whether an open SQLite file is another program's, which Leasehold never writes. Another
 * program's mark refuses the file whatever it holds, even no tables yet; an unmarked file (0) is
 * adopted only while it is empty, or holds no more than what a first start that failed half-way
 * leaves (drizzle's empty table of migrations): that start is finished at the next.
 */
export function isAnotherProgramsFile(sqlite: Database): boolean {
  const applicationId = sqlite.pragma('application_id', { simple: true }) as number
  if (applicationId === APPLICATION_ID) return false
  if (applicationId !== 0) return true
  return (
    sqlite.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name <> '__drizzle_migrations' LIMIT 1").get() !== undefined ||
    (tableExists(sqlite, '__drizzle_migrations') && sqlite.prepare('SELECT 1 FROM __drizzle_migrations LIMIT 1').get() !== undefined)
  )
}

/**
 * Refuses files this version must not touch: not SQLite, another program's, or migrated by a
 * newer Leasehold. Such a file is never recreated or overwritten. Only what the open itself
 * reads is read (the header and the schema): a check of every page (quick_check) would read the
 * whole file, seconds for a million finished jobs, at every start. Damage elsewhere is found by
 * the background check after an unclean shutdown and by `leasehold check` (db/integrity.ts).
 */
function checkExistingFile(sqlite: Database, path: string, journal: JournalEntry[]): void {
  try {
    sqlite.prepare('SELECT COUNT(*) FROM sqlite_master').get()
  } catch (error) {
    throw unreadableError(path, error)
  }
  if (isAnotherProgramsFile(sqlite)) throw new DatabaseOpenError(`${path} is not a Leasehold database; it was left untouched`)
  const newest = newestMigration(sqlite)
  if (newest !== null) {
    const known = newestKnownMigration(journal)
    if (newest > known) {
      throw new DatabaseOpenError(
        `${path} was written by a newer version of Leasehold; upgrade Leasehold to open it (the file was left untouched)`,
      )
    }
  }
}

/**
 * {@link checkExistingFile} through a read-only connection of its own, closed before the file is
 * opened for writing. The last connection to close checkpoints the write-ahead log into the file
 * and deletes the log; a read-only one cannot, so a start refused here leaves the file and its
 * `-wal` as they were, byte for byte: a log that does not match its file (cut short, or copied
 * from another moment) is still there to copy away or salvage. A file that cannot be opened for
 * writing is refused here too: SQLite would open it read-only without a word, and every write
 * would fail. SQLite makes an empty `-wal` and a `-shm` file for a read-only connection; those
 * that were not there before are removed again, so that a refused start leaves the data dir as it
 * found it.
 */
function checkBeforeOpening(path: string, journal: JournalEntry[], nativeBinding?: string): void {
  checkCompanionFiles(path)
  const notWritable = cannotOpen(path)
  if (notWritable) throw new DatabaseOpenError(`cannot open ${path} for writing (${notWritable}); it was left untouched`)
  const restoreCompanions = companionsAsFound(path)
  let reader: Database
  try {
    reader = new BetterSqlite3(connectionName(path, nativeBinding), { readonly: true, fileMustExist: true, ...(nativeBinding ? { nativeBinding } : {}) })
  } catch (error) {
    restoreCompanions()
    throw unreadableError(path, error)
  }
  try {
    checkExistingFile(reader, path, journal)
  } finally {
    reader.close()
    restoreCompanions()
  }
}

/**
 * Refuses a write-ahead log that holds anything with no database beside it: the file missing, or
 * empty (0 bytes: truncated, a copy that failed). The log is a database's commits (its file
 * moved, deleted, or not yet copied back); SQLite would take it for a new file's and remove it,
 * at the new file's first close or, beside an empty file, as it opens it. An empty log holds
 * nothing, and is used. `leasehold check` refuses it too, before SQLite opens anything.
 */
export function refuseLoneLog(path: string): void {
  const log = lstatSync(`${path}-wal`, { throwIfNoEntry: false })
  if (!log?.isFile() || log.size === 0) return
  const database = statSync(path, { throwIfNoEntry: false })
  if (database && !(database.isFile() && database.size === 0)) return
  const where = database ? 'is empty (0 bytes)' : 'is not there'
  throw new DatabaseOpenError(
    `${path}-wal is a database's log, and its database ${path} ${where}: put the database back beside it, or move the log away to start with a new database (the log was left untouched)`,
  )
}

/** When the newest migration applied to the file was written (drizzle's `created_at`), or null if none was. */
function newestMigration(sqlite: Database): number | null {
  if (!tableExists(sqlite, '__drizzle_migrations')) return null
  const { newest } = sqlite.prepare('SELECT MAX(created_at) AS newest FROM __drizzle_migrations').get() as { newest: number | null }
  return newest === null ? null : Number(newest)
}

const newestKnownMigration = (journal: JournalEntry[]) => Math.max(0, ...journal.map((e) => e.when))

/**
 * WAL pages written before SQLite copies them back into the database file. A checkpoint costs
 * a write per distinct page plus two fsyncs, so checkpointing rarely (the WAL grows to ~40 MB
 * between them) writes each hot page once per checkpoint instead of once per 1,000 frames.
 */
export const WAL_AUTOCHECKPOINT_PAGES = 10_000

/**
 * The connection settings every Leasehold connection uses (and the benchmark's raw floor, so
 * the two are compared on equal terms): WAL, the durability's synchronous level, foreign
 * keys, a busy timeout, a 16 MiB page cache, rare checkpoints, and temporary files in memory
 * (a savepoint's sub-journal is one: in a file it cost a write call per page a savepoint touches).
 */
export function applyConnectionSettings(sqlite: Database, durability: Durability = 'normal'): void {
  sqlite.pragma('journal_mode = WAL')
  sqlite.pragma(`synchronous = ${durability === 'full' ? 'FULL' : 'NORMAL'}`)
  sqlite.pragma('foreign_keys = ON')
  sqlite.pragma('busy_timeout = 5000')
  // 16 MiB. The hot path touches the last pages of each table and index (ids sort by time): with
  // 1,000,000 jobs a lifecycle reads no more pages from the file with a 2 MiB cache than with
  // 64 MiB (docs/performance.md), and every page the cache holds is resident memory. 16 MiB
  // still holds every inner page of every b-tree up to ~6 million jobs (2.4 MiB at a million).
  sqlite.pragma('cache_size = -16384')
  sqlite.pragma(`wal_autocheckpoint = ${WAL_AUTOCHECKPOINT_PAGES}`)
  sqlite.pragma('temp_store = MEMORY') // savepoints' sub-journals in memory, not a temp file per group
}

const AUTO_VACUUM_INCREMENTAL = 2

/**
 * Free disk space a conversion asks for, as a multiple of the file's size: VACUUM writes a copy
 * of the database to a temporary file, then the whole database again through the WAL.
 */
const VACUUM_SPACE_FACTOR = 2

/**
 * Retention deletes old jobs, and the pages they held are given back to the file system a few
 * at a time (`PRAGMA incremental_vacuum`, src-main/engine/store/storage.ts). That needs
 * `auto_vacuum = INCREMENTAL`, which SQLite fixes when the first table is created: a new file
 * gets it before anything else is written. A file made before Leasehold had retention is
 * converted once, here, by a VACUUM, which rewrites the whole file and cannot run inside a
 * transaction (so it is no migration). The conversion is skipped, with a line in the log, when
 * the disk lacks the room for it; should it fail anyway (a full disk), SQLite leaves the file as
 * it was, and the host starts without giving pages back (freed pages are still reused) and tries
 * again at its next start.
 */
function ensureIncrementalVacuum(sqlite: Database, path: string, log: (line: string) => void): void {
  if (sqlite.pragma('auto_vacuum', { simple: true }) === AUTO_VACUUM_INCREMENTAL) return
  const hasTables = sqlite.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' LIMIT 1").get() !== undefined
  const size = path === ':memory:' ? 0 : statSync(path).size
  if (hasTables) {
    const free = freeBytes(dirname(path))
    const needed = size * VACUUM_SPACE_FACTOR
    if (free !== null && free < needed) {
      log(
        `leasehold: ${path} was not converted to incremental vacuum: that needs ${mb(needed)} free on its disk and ${mb(free)} are; ` +
          'old jobs are still deleted and their space reused, but the file does not shrink (it tries again at the next start)',
      )
      return
    }
    log(`leasehold: converting ${path} (${mb(size)}) to incremental vacuum, once, so that the space of deleted jobs goes back to the disk…`)
  }
  const started = performance.now()
  try {
    sqlite.pragma(`auto_vacuum = ${AUTO_VACUUM_INCREMENTAL}`)
    sqlite.exec('VACUUM')
  } catch (error) {
    log(
      `leasehold: converting ${path} to incremental vacuum failed (${(error as Error).message}); the file is as it was, ` +
        'old jobs are still deleted and their space reused, but the file does not shrink (it tries again at the next start)',
    )
    truncateWal(sqlite)
    return
  }
  truncateWal(sqlite) // the VACUUM wrote the whole file through the WAL: give that space back too
  if (hasTables) log(`leasehold: ${path} converted in ${((performance.now() - started) / 1000).toFixed(1)} s (${mb(statSync(path).size)} now)`)
}

function truncateWal(sqlite: Database): void {
  try {
    sqlite.pragma('wal_checkpoint(TRUNCATE)')
  } catch {
    // The next checkpoint does it.
  }
}

function freeBytes(folder: string): number | null {
  try {
    const stats = statfsSync(folder)
    return stats.bavail * stats.bsize
  } catch {
    return null // unknown: try, and let SQLite refuse if it must
  }
}

const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`

/** The tables this version's schema declares, which its migrations made. */
const SCHEMA_TABLES = Object.values(schema)
  .filter((value) => is(value, SQLiteTable))
  .map((table) => getTableName(table as SQLiteTable))

/**
 * A file whose migrations are all recorded but that lacks a table they made was changed outside
 * Leasehold (a table dropped by hand): the start is refused in one line, rather than the host
 * serving until the first request that needs the table fails.
 */
function refuseMissingTables(sqlite: Database, path: string): void {
  const missing = SCHEMA_TABLES.filter((name) => !tableExists(sqlite, name))
  if (missing.length > 0) {
    throw new DatabaseOpenError(`${path} lacks the table${missing.length > 1 ? 's' : ''} ${missing.join(', ')} that its migrations made: the file was changed outside Leasehold; restore a backup`)
  }
}

/**
 * A schema as the log names it: the tag of the newest migration it holds (`0012_lean_updates`),
 * or, for a migration this version's journal does not list, when it was written.
 */
function schemaName(journal: JournalEntry[], when: number): string {
  return journal.find((entry) => entry.when === when)?.tag ?? `of ${new Date(when).toISOString()}`
}

/**
 * Applies the migrations this file lacks. An upgrade (a file that has some already) says so in
 * the log before it starts and when it is done: the migrations rewrite tables, and on a file of
 * a million jobs they take seconds, during which the start says nothing else. The line after
 * names the schemas it went from and to, and says that an older Leasehold cannot open the file
 * any more (it refuses a file written by a newer version): the one way back is a backup taken
 * before the upgrade. A new file's set-up, on empty tables, is not worth a line.
 */
function migrateLogged(orm: Drizzle, sqlite: Database, path: string, journal: JournalEntry[], migrationsFolder: string, log: (line: string) => void): void {
  const newest = newestMigration(sqlite)
  const pending = newest === null ? 0 : journal.filter((entry) => entry.when > newest).length
  if (newest === null || pending === 0) return migrate(orm, { migrationsFolder })
  const size = path === ':memory:' ? 0 : statSync(path).size
  const free = path === ':memory:' ? null : freeBytes(dirname(path)) // before the log takes any of it
  const from = schemaName(journal, newest)
  const to = schemaName(journal, newestKnownMigration(journal))
  log(`leasehold: migrating ${path} (${mb(size)}) to this version: ${pending} migration${pending > 1 ? 's' : ''} to apply, which may take a while on a large file…`)
  const started = performance.now()
  try {
    migrate(orm, { migrationsFolder })
  } catch (error) {
    throw upgradeFailure(error, path, size, free)
  }
  log(
    `leasehold: ${path} migrated from schema ${from} to ${to} in ${((performance.now() - started) / 1000).toFixed(1)} s; ` +
      'an older version of Leasehold cannot open it any more (a backup taken before the upgrade can)',
  )
}

/** Opens (creating if new) and migrates the database, with {@link applyConnectionSettings}. */
export function openDatabase(options: OpenOptions): OpenedDatabase {
  const migrationsFolder = options.migrationsFolder ?? DEFAULT_MIGRATIONS_FOLDER
  const journal = readJournal(migrationsFolder)
  const isNewFile = options.path === ':memory:' || !existsSync(options.path)
  const uncleanShutdown = !isNewFile && fileSize(`${options.path}-wal`) > 0
  if (options.path !== ':memory:') refuseLoneLog(options.path)
  if (!isNewFile) {
    refuseFullDisk(options.path)
    checkBeforeOpening(options.path, journal, options.nativeBinding)
  } else if (options.path !== ':memory:') {
    // A -wal or -shm in the way is named as it is for an existing file, not as the new one's failure.
    checkCompanionFiles(options.path)
    // Private from its first byte (the data dir's files are its owner's alone), even should the start fail below.
    try {
      closeSync(openSync(options.path, 'wx', 0o600))
    } catch (error) {
      const dangling = lstatSync(options.path, { throwIfNoEntry: false })?.isSymbolicLink() === true
      throw new DatabaseOpenError(`cannot create ${options.path}: ${dangling ? `it is a symbolic link to ${readlinkSync(options.path)}, which does not exist` : (error as Error).message}`)
    }
  }
  let sqlite: Database
  try {
    sqlite = new BetterSqlite3(connectionName(options.path, options.nativeBinding), options.nativeBinding ? { nativeBinding: options.nativeBinding } : {})
  } catch (error) {
    throw new DatabaseOpenError(`cannot open ${options.path}: ${(error as Error).message}`)
  }
  try {
    // Before the WAL header or any table is written: only then does the setting take on a new file.
    if (isNewFile) sqlite.pragma(`auto_vacuum = ${AUTO_VACUUM_INCREMENTAL}`)
    applyConnectionSettings(sqlite, options.durability)
    ensureIncrementalVacuum(sqlite, options.path, options.log ?? ((line) => console.error(line)))
    // Written only when it differs: on a full disk a marked file still opens without a write.
    if (sqlite.pragma('application_id', { simple: true }) !== APPLICATION_ID) sqlite.pragma(`application_id = ${APPLICATION_ID}`)
    const orm = drizzle(sqlite, { schema })
    migrateLogged(orm, sqlite, options.path, journal, migrationsFolder, options.log ?? ((line) => console.error(line)))
    // The schema's tables are what this version's own migrations make (a test may stop at an earlier one).
    if (migrationsFolder === DEFAULT_MIGRATIONS_FOLDER) refuseMissingTables(sqlite, options.path)
    return { sqlite, orm, uncleanShutdown }
  } catch (error) {
    sqlite.close()
    if (error instanceof DatabaseOpenError) throw error
    if (String(rootCause(error).code).startsWith('SQLITE_BUSY')) throw heldError(options.path)
    throw new DatabaseOpenError(`cannot open ${options.path}: ${openFailure(error, options.path)}`, storageFullCode(error))
  }
}

/**
 * Opens an existing, current database on a disk too full for {@link openDatabase}, for reads
 * only. A connection in WAL mode keeps the log's index in a `-shm` file that it must create (32
 * KiB) before its first read; in SQLite's exclusive locking mode, set before that read, the index
 * is kept in this process's memory instead, and no file is made. Reads then work; a write fails
 * with SQLITE_FULL and changes nothing (the host refuses writes before they get that far). No
 * other connection can open the file meanwhile (the checkpointer, an integrity check), which is
 * why the host leaves this mode as soon as space returns ({@link shareDatabase}).
 *
 * Refused, as at a normal start, when the file is new (setting it up writes), not Leasehold's,
 * or written by a newer version; and when it needs a migration: migrations write, and this
 * version's code must not read a schema older than its own.
 */
export function openOnFullDisk(options: OpenOptions): OpenedDatabase {
  const { path } = options
  const journal = readJournal(options.migrationsFolder ?? DEFAULT_MIGRATIONS_FOLDER)
  if (path === ':memory:' || !existsSync(path)) {
    throw new DatabaseOpenError(`the disk that holds ${path} is full and the database is new: setting it up writes; free some space and start again`, true)
  }
  refuseLoneLog(path)
  const notRegular = notRegularFile(path)
  if (notRegular) throw new DatabaseOpenError(`cannot open ${path} (${notRegular}); it was left untouched`)
  const uncleanShutdown = fileSize(`${path}-wal`) > 0
  let sqlite: Database
  try {
    sqlite = new BetterSqlite3(connectionName(path, options.nativeBinding), options.nativeBinding ? { nativeBinding: options.nativeBinding } : {})
  } catch (error) {
    throw new DatabaseOpenError(`cannot open ${path}: ${(error as Error).message}`)
  }
  try {
    sqlite.pragma('locking_mode = EXCLUSIVE') // before the first read: no -shm file (see above)
    checkCompanionFiles(path)
    checkExistingFile(sqlite, path, journal)
    if (sqlite.pragma('application_id', { simple: true }) !== APPLICATION_ID || (newestMigration(sqlite) ?? 0) < newestKnownMigration(journal)) {
      throw new DatabaseOpenError(
        `the disk that holds ${path} is full, and the database must be set up or migrated to this version first, which writes; free some space and start again (the file was left untouched)`,
        true,
      )
    }
    applyConnectionSettings(sqlite, options.durability) // the file is in WAL mode already: nothing is written
    return { sqlite, orm: drizzle(sqlite, { schema }), uncleanShutdown }
  } catch (error) {
    sqlite.close()
    if (error instanceof DatabaseOpenError) throw error
    throw new DatabaseOpenError(`cannot open ${path}: ${openFailure(error, path)}`, storageFullCode(error))
  }
}

/**
 * Takes a connection from {@link openOnFullDisk} out of exclusive locking mode, so that other
 * connections (the checkpointer, integrity checks) can open the file again: SQLite changes the
 * locking mode of a WAL database only outside WAL mode, so the file leaves WAL mode (the log is
 * checkpointed into it) and enters it again, which creates the `-shm` file. Each step writes:
 * on a disk still full one fails, the connection stays in a mode where reads work, and the next
 * call tries again. Throws the step's error.
 */
export function shareDatabase(sqlite: Database): void {
  sqlite.pragma('journal_mode = DELETE')
  sqlite.pragma('locking_mode = NORMAL')
  const mode = sqlite.pragma('journal_mode = WAL', { simple: true })
  if (mode !== 'wal') throw new DatabaseOpenError(`${connectionPath(sqlite.name)} stayed in journal mode ${String(mode)}`, true)
  sqlite.prepare('SELECT COUNT(*) FROM sqlite_master').get() // the first read in the new mode (with the default VFS, it makes the -shm file)
}

/** The error at the end of a chain of causes: SQLite's own, under drizzle's wrapping. */
function rootCause(error: unknown): { code?: unknown; message?: string } {
  let root = error as { cause?: unknown; code?: unknown; message?: string }
  while (root.cause && typeof root.cause === 'object') root = root.cause as typeof root
  return root
}

/** Whether a thrown error is SQLite's or the OS's "no space". */
function storageFullCode(error: unknown): boolean {
  const root = rootCause(error)
  return root.code === 'SQLITE_FULL' || root.code === 'ENOSPC' || root.code === 'SQLITE_IOERR_SHMSIZE'
}

function fileSize(path: string): number {
  try {
    return statSync(path).size
  } catch {
    return 0
  }
}

/**
 * What failed while a new file was set up (an upgrade's failure is {@link upgradeFailure}'s), in
 * one line: SQLite's own error, not drizzle's wrapping of it (which quotes the whole statement).
 * The migrations run in one transaction: a start that failed half-way leaves at most drizzle's
 * empty table of migrations, and the next start adopts the file and runs them all
 * (checkExistingFile), so there is nothing to clean up.
 */
function openFailure(error: unknown, path: string): string {
  const root = rootCause(error)
  const code = failedWriteCode(error)
  const what = code ? `the disk failed a write (${code}: ${oneLine(root.message ?? '')})` : hiddenRollback(error, path) ?? oneLine(root.message ?? String(root))
  return `${what}; the next start finishes setting the file up`
}

/** SQLite's code when a write failed on the disk (an I/O error, no space), else null. */
function failedWriteCode(error: unknown): string | null {
  const { code } = rootCause(error)
  return typeof code === 'string' && (code.startsWith('SQLITE_IOERR') || code === 'SQLITE_FULL' || code === 'ENOSPC') ? code : null
}

/** SQLite rolled the migrations' transaction back itself, which it does when a write fails: see {@link hiddenRollback}. */
const rolledBackBySqlite = (error: unknown) => /cannot rollback - no transaction is active/.test(rootCause(error).message ?? '')

/**
 * Why a migration failed when drizzle's own ROLLBACK hid it: a write that fails for want of
 * space (or of the disk) makes SQLite roll the transaction back itself, and the ROLLBACK that
 * drizzle then sends fails with "no transaction is active", the only error it throws. The disk's
 * free space tells the likely cause.
 */
function hiddenRollback(error: unknown, path: string): string | null {
  if (!rolledBackBySqlite(error)) return null
  const free = freeBytes(dirname(path))
  return free !== null && free < HIDDEN_ROLLBACK_FULL_BYTES
    ? `the disk is full (${Math.floor(free / 1024)} KiB free): a write failed while the tables were being made, and SQLite undid them`
    : 'a write failed while the tables were being made, and SQLite undid them (the disk full, or failing)'
}

/**
 * Free disk space an upgrade may take, as a multiple of the file's size: the write-ahead log
 * holds a copy of each page the migrations write (1.2 times the file, measured, for a file of the
 * first releases, whose jobs table they rewrite), and the checkpoint after them grows the file.
 */
const MIGRATION_SPACE_FACTOR = 2

/**
 * Why an upgrade of an existing file failed, in one line. The migrations run in one transaction,
 * which SQLite undid: the file is as it was, and still this version's to upgrade. A write that
 * failed (SQLITE_FULL, an I/O error, or a rollback SQLite made itself before drizzle's: see
 * {@link hiddenRollback}) is most often a disk without the room ({@link MIGRATION_SPACE_FACTOR}),
 * so the line asks for that, and names what was free before the migrations began (after, their
 * log still holds it). Nothing promises the next start does better.
 */
function upgradeFailure(error: unknown, path: string, size: number, free: number | null): DatabaseOpenError {
  const root = rootCause(error)
  if (String(root.code).startsWith('SQLITE_BUSY')) return heldError(path)
  const writeCode = failedWriteCode(error)
  const upgrading = `upgrading ${path} (${mb(size)}) to this version failed`
  if (!writeCode && !rolledBackBySqlite(error)) {
    return new DatabaseOpenError(`${upgrading} (${oneLine(root.message ?? String(root))}); the file was left as it was`)
  }
  const room = free === null ? 'for want of space on its disk' : `for want of space on its disk (${mb(free)} free)`
  return new DatabaseOpenError(
    `${upgrading}: a write failed ${room}, or the disk is failing${writeCode ? ` (${writeCode})` : ''}; the file was left as it was. ` +
      `An upgrade needs up to twice the file's size free (${mb(size * MIGRATION_SPACE_FACTOR)}): free space on its disk and start again`,
  )
}

/** Free space under which a migration's write that SQLite undid is taken for a full disk: more than a new file's tables and their log take. */
const HIDDEN_ROLLBACK_FULL_BYTES = 1024 * 1024

/** The settings key a host keeps while it has the database open: its process and when it started. */
const HOST_OPEN_KEY = 'host_open'
/** Set beside the mark by a start that found the file not closed cleanly and failed: it recovered the log, and closed the file. */
const LOG_RECOVERED_KEY = 'host_open_log_recovered'

/** The mark the last host left when it did not stop cleanly. */
export interface HostMark {
  /** `pid … since …`. */
  mark: string
  /**
   * A start since then found the file so, recovered its log and failed before it served: its
   * close checkpointed the log and removed it. The file still waits for its integrity check, and
   * the log being gone says nothing lost.
   */
  logRecovered: boolean
}

/**
 * What the last host left in the database: its mark when it did not stop cleanly, else null.
 * Read before anything writes (a start on a full disk reads it too).
 */
export function lastHostMark(sqlite: Database): HostMark | null {
  const rows = sqlite.prepare('SELECT key, value FROM settings WHERE key IN (?, ?)').all(HOST_OPEN_KEY, LOG_RECOVERED_KEY) as { key: string; value: string }[]
  const mark = rows.find((row) => row.key === HOST_OPEN_KEY)?.value
  return mark === undefined ? null : { mark, logRecovered: rows.some((row) => row.key === LOG_RECOVERED_KEY) }
}

const PUT_SETTING = 'INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value'

/**
 * Marks the database as open by this host, in a commit of its own; {@link clearHostMark} at a
 * clean stop takes the mark away. A start that finds it knows the last host ended without
 * closing the file, even where the write-ahead log that would say so is gone.
 */
export function setHostMark(sqlite: Database, startedAt: Date): void {
  sqlite.transaction(() => {
    sqlite.prepare(PUT_SETTING).run(HOST_OPEN_KEY, `pid ${process.pid} since ${startedAt.toISOString()}`)
    sqlite.prepare('DELETE FROM settings WHERE key = ?').run(LOG_RECOVERED_KEY)
  })()
}

/** Takes this host's mark away: the last commit of a clean stop. */
export function clearHostMark(sqlite: Database): void {
  sqlite.prepare('DELETE FROM settings WHERE key IN (?, ?)').run(HOST_OPEN_KEY, LOG_RECOVERED_KEY)
}

/**
 * The settings key a backup's copy carries: when it was taken, in epoch milliseconds. A start
 * that finds it is a start on a restored backup (engine/store/counters.ts `goPastRestoredBackup`).
 */
export const BACKUP_TAKEN_AT_KEY = 'backup_taken_at'

/** Marks a copy (db/backup.ts) as a backup taken at `takenAt`, in place of the running host's mark, in one commit. */
export function markAsBackup(sqlite: Database, takenAt: number): void {
  sqlite.transaction(() => {
    clearHostMark(sqlite)
    sqlite.prepare(PUT_SETTING).run(BACKUP_TAKEN_AT_KEY, String(takenAt))
  })()
}

/**
 * What a start that fails leaves: the file as it found it. One that found it not closed cleanly
 * leaves the last host's mark, and that the log was recovered (its own close removes the log), so
 * that the next start still checks the file and does not take the log's absence for a loss; one
 * that found it closed cleanly leaves no mark.
 */
export function markFailedStart(sqlite: Database, found: HostMark | null, unclean: boolean, startedAt: Date): void {
  if (!unclean) return clearHostMark(sqlite)
  sqlite.transaction(() => {
    sqlite.prepare(PUT_SETTING).run(HOST_OPEN_KEY, found?.mark ?? `pid ${process.pid} since ${startedAt.toISOString()}`)
    sqlite.prepare(PUT_SETTING).run(LOG_RECOVERED_KEY, '1')
  })()
}
