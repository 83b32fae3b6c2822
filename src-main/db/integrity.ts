import BetterSqlite3 from 'better-sqlite3'
import { createRequire } from 'node:module'
import { Worker } from 'node:worker_threads'
import { connectionName } from './connection'
import { DatabaseOpenError, isAnotherProgramsFile, isLeaseholdHeader } from './open'

/** What an integrity check of the database file found. */
export interface IntegrityReport {
  /** The file checked. */
  path: string
  ok: boolean
  /** SQLite's findings (at most {@link MAX_PROBLEMS}); empty when ok. */
  problems: string[]
  /** How long the check took. */
  ms: number
}

/** The most problems a check lists: the first few say whether the file is damaged; the rest add nothing. */
const MAX_PROBLEMS = 20

/**
 * `quick` is `PRAGMA quick_check` (every page and row, no index against its table: about half
 * the time), else `PRAGMA integrity_check`. Either reads the whole file: 1,000,000 finished jobs
 * take seconds, which is why the host never runs one on the way to listening.
 */
export type IntegrityDepth = 'quick' | 'full'

/** The check as SQL. */
const pragmaOf = (depth: IntegrityDepth) => `${depth === 'quick' ? 'quick_check' : 'integrity_check'}(${MAX_PROBLEMS})`

/**
 * The problems in the check's rows: a row may hold several lines, the first naming the database
 * (`*** in database main ***`); a sound file answers one row, `ok`.
 */
function problemsOf(rows: Record<string, string>[]): string[] {
  return rows
    .flatMap((row) => String(Object.values(row)[0]).split('\n'))
    .filter((line) => line !== 'ok' && !/^\*\*\* in database \w+ \*\*\*$/.test(line))
    .slice(0, MAX_PROBLEMS)
}

/**
 * The check's rows, read one at a time: on a damaged page SQLite answers the problems it found
 * so far and then fails the statement with `SQLITE_CORRUPT` (an index's count of entries that
 * reads the damaged table, say). Rows that name problems before that failure are the damage
 * found, and are kept; any other failure is thrown, for {@link damageIn} to judge.
 */
function checkRows(db: BetterSqlite3.Database, depth: IntegrityDepth): Record<string, string>[] {
  const rows: Record<string, string>[] = []
  try {
    for (const row of db.prepare(`PRAGMA ${pragmaOf(depth)}`).iterate()) rows.push(row as Record<string, string>)
  } catch (error) {
    if (!isCorruptAfterProblems(error, rows)) throw error
  }
  return rows
}

/** Whether a failure of the check follows rows that name problems and says the file is damaged. */
function isCorruptAfterProblems(error: unknown, rows: Record<string, string>[]): boolean {
  return isDamageCode(error) && problemsOf(rows).length > 0
}

/** SQLite's codes for a file it found malformed (`SQLITE_CORRUPT…`) or, once open, not a database (`SQLITE_NOTADB`); a read the disk failed outright is `SQLITE_IOERR…`. */
function isDamageCode(error: unknown): boolean {
  const code = String((error as { code?: unknown }).code)
  return code.startsWith('SQLITE_CORRUPT') || code === 'SQLITE_NOTADB'
}

/**
 * The problems of a check that failed before naming any, or null when the failure says nothing
 * of the file: a file that begins as a Leasehold database (SQLite opened it as one) and that
 * SQLite then found malformed is damaged (cut short, a page overwritten), and its problem is
 * SQLite's own message. SQLite reports a read the disk failed with EIO as malformed too
 * (error-answer.ts), which is why the damaged line still says the disk may be failing; an I/O
 * error (`SQLITE_IOERR`) is no verdict, and is thrown as the file could not be read.
 */
function damageIn(error: unknown, path: string): string[] | null {
  if (!isDamageCode(error) || !isLeaseholdHeader(path)) return null
  const { code, message } = error as { code: string; message: string }
  return [`${message.replace(/\s*\n\s*/g, ' ')} (${code})`]
}

/**
 * Checks the file now, on this thread, through a read-only connection of its own: one consistent
 * snapshot, whoever writes meanwhile in this process. `leasehold check` runs it. A file SQLite
 * cannot read at all throws, as opening it would; a file a running host holds (connection.ts)
 * throws `SQLITE_BUSY` at once, without waiting for it. Another program's SQLite file throws
 * {@link DatabaseOpenError}, as serve refuses it: its soundness says nothing of Leasehold's.
 *
 * `alone`: the file is held for the check's length, and leaves no `-wal` or `-shm` it did not
 * have. The connection may write (though `query_only` lets it write nothing) and takes SQLite's
 * exclusive locking mode before its first read: it keeps the log's index in its memory, so it
 * makes no `-shm`, and holds the file's lock until it closes, so no other connection opens the
 * file or its log meanwhile; as the last connection of a file, it removes the empty log it made
 * as it closes, still holding that lock. A `-wal` that holds anything it would copy into the
 * file as it closed: for a file with no `-wal` beside it only.
 */
export function checkIntegrity(path: string, depth: IntegrityDepth = 'full', nativeBinding?: string, alone = false): IntegrityReport {
  const started = performance.now()
  const db = new BetterSqlite3(connectionName(path, nativeBinding), { readonly: !alone, fileMustExist: true, timeout: 0, ...(nativeBinding ? { nativeBinding } : {}) })
  try {
    if (alone) {
      db.pragma('locking_mode = EXCLUSIVE') // before the first read: see above
      db.pragma('query_only = ON')
    }
    if (isAnotherProgramsFile(db)) throw new DatabaseOpenError(`${path} is not a Leasehold database (serve refuses it); it was not checked`)
    const problems = problemsOf(checkRows(db, depth))
    return { path, ok: problems.length === 0, problems, ms: Math.round(performance.now() - started) }
  } catch (error) {
    const problems = damageIn(error, path)
    if (problems) return { path, ok: false, problems, ms: Math.round(performance.now() - started) }
    throw error
  } finally {
    db.close()
  }
}

/**
 * The thread's code: one check, its report posted back. Plain CommonJS, as the checkpointer's.
 * Its rows are read one at a time, as {@link checkRows} reads them: a failure after some rows
 * posts those rows with the error, and {@link checkIntegrityInBackground} decides as
 * {@link isCorruptAfterProblems} does.
 */
const THREAD = `
const { parentPort, workerData } = require('node:worker_threads')
const Database = require(workerData.driver)
const started = performance.now()
const rows = []
try {
  const db = new Database(workerData.name, { readonly: true, fileMustExist: true, ...(workerData.nativeBinding ? { nativeBinding: workerData.nativeBinding } : {}) })
  try {
    for (const row of db.prepare('PRAGMA ' + workerData.pragma).iterate()) rows.push(row)
    parentPort.postMessage({ rows, ms: Math.round(performance.now() - started) })
  } finally {
    db.close()
  }
} catch (error) {
  parentPort.postMessage({ rows, ms: Math.round(performance.now() - started), error: error.message, code: error.code })
}
`

/** The check threads still running: a stopping host waits for them ({@link integrityChecksEnded}). */
const running = new Set<Promise<void>>()

/**
 * Runs {@link checkIntegrity} on a thread of its own, so the host serves while the whole file is
 * read. Rejects with the error when the file cannot be read at all (its `code` kept), or when
 * `signal` ends the wait for it first (the host stops). The thread itself is never terminated: a
 * thread ended inside a better-sqlite3 call can abort the whole process (better-sqlite3 issue
 * #1507); it ends with its check, which {@link integrityChecksEnded} waits for.
 */
export function checkIntegrityInBackground(path: string, options: { depth?: IntegrityDepth; nativeBinding?: string; signal?: AbortSignal } = {}): Promise<IntegrityReport> {
  return new Promise((resolve, reject) => {
    const driver = createRequire(import.meta.url).resolve('better-sqlite3')
    const { depth = 'quick', nativeBinding, signal } = options
    const worker = new Worker(THREAD, { eval: true, workerData: { driver, name: connectionName(path, nativeBinding), nativeBinding, pragma: pragmaOf(depth) } })
    const ended = new Promise<void>((done) => worker.once('exit', () => done()))
    running.add(ended)
    void ended.then(() => running.delete(ended))
    signal?.addEventListener('abort', () => reject(new Error('the integrity check was left as the host stopped')), { once: true })
    worker.once('message', (message: { rows: Record<string, string>[]; ms: number; error?: string; code?: string }) => {
      const failure = message.error === undefined ? null : Object.assign(new Error(message.error), { code: message.code })
      if (failure && !isCorruptAfterProblems(failure, message.rows)) {
        const damage = damageIn(failure, path)
        return damage ? resolve({ path, ok: false, problems: damage, ms: message.ms }) : reject(failure)
      }
      const problems = problemsOf(message.rows)
      resolve({ path, ok: problems.length === 0, problems, ms: message.ms })
    })
    worker.once('error', reject)
    worker.once('exit', () => reject(new Error('the integrity check thread ended without a report')))
  })
}

/** Resolves once every check thread started here has ended (a check ends with its read of the file: seconds at most). */
export async function integrityChecksEnded(): Promise<void> {
  await Promise.all([...running])
}

/** One line for the log or the terminal: what the check found, and what to do about damage. */
export function integrityLine(report: IntegrityReport): string {
  if (report.ok) return `${report.path} passed the integrity check (${(report.ms / 1000).toFixed(1)} s)`
  return (
    `${report.path} is damaged (integrity check: ${report.problems.slice(0, 3).join('; ')}${report.problems.length > 3 ? '; …' : ''}): ` +
    'stop the host, keep a copy of the file with its -wal, and restore a backup; the disk under it may be failing'
  )
}
