import { accessSync, constants, copyFileSync, existsSync, mkdtempSync, realpathSync, rmSync } from 'node:fs'
import { printable } from '../../src-shared/printable'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { ConfigError, envSetting, parseFlags, CLIENT_TARGET_HELP } from '../../src-shared/command-line'
import { answerTimeoutMs, type ClientTarget, dataDirOf, defaultDataDir, LOCK_FILE, NoHostError, resolveClientTarget } from '../../src-shared/client-target'
import { companionsAsFound } from '../db/companion-files'
import { noFreeFiles } from '../db/free-files'
import type { IntegrityDepth, IntegrityReport } from '../db/integrity'
import { findHost, HOST_START_WAIT_S } from './host-target'
import { answered, hostApi } from './http-client'
import { NotRegularFileError, notRegularFile, refuseNotRegular } from '../../src-shared/regular-file'

export const CHECK_HELP = `Usage: leasehold check [flags]

Checks the integrity of the database in the data directory: every page, row and index
(SQLite's integrity_check), through a read-only connection. While a host serves the data
directory, the file is that host's alone: the host runs the check on a thread of its own
(GET /api/storage/integrity) and this command prints what it found, waiting for it up to 10
minutes (LEASEHOLD_TIMEOUT_S, if longer). It reads the whole file
(seconds for a million finished jobs). The host runs the quicker
form on its own, in the background, after a start that follows an unclean shutdown; otherwise
run it when a read fails with storage_error again and again, to tell a failing disk (the file
checks ok) from a damaged file.

The host that holds the file is found as the other client commands find theirs: --url and
--token (LEASEHOLD_URL, LEASEHOLD_TOKEN), else the host.json and token of the data directory. A
host started with --token has no token file to read: give it here too. A host that could not
write its host.json (a full disk) is reached only with --url and --token. A host named by --url
(or LEASEHOLD_URL) with no data directory named (--data-dir, LEASEHOLD_DATA_DIR) checks its own
file, wherever it is; with a data directory named too, that directory's file is checked.

Another program's SQLite file is not checked (serve refuses it too). A data dir on a read-only
mount, or one this user may read but not write, is checked through a copy of the file in the
temporary directory (TMPDIR), removed after.

Exits 0 when the file is sound, 1 when it is damaged (the problems are printed, with what to
do) or cannot be read at all, 2 on a bad flag.

Flags:
  --quick              SQLite's quick_check: pages and rows, indexes not matched against their tables (about half the time)
  --json               print {path, ok, problems, ms} as JSON; a file that cannot be checked
                       prints {path, ok: false, problems: [], error} (and its line on stderr;
                       path null when the host named by its URL did not answer)
${CLIENT_TARGET_HELP.replace('where to find a local host\'s URL and token', `the data directory (default ${defaultDataDir()})`)}
  -h, --help`

/**
 * How long the host's check is waited for, at the least: it reads the whole file before it
 * answers (seconds for a million finished jobs), far longer than any other answer takes.
 */
const INTEGRITY_ANSWER_MS = 10 * 60_000

/** The check run by the host that holds the file, found as every client command finds its host. */
async function checkThroughHost(target: ClientTarget, depth: IntegrityDepth): Promise<IntegrityReport> {
  const patient = { ...target, timeoutMs: Math.max(answerTimeoutMs(target), INTEGRITY_ANSWER_MS) }
  return answered(patient, hostApi(patient).GET('/api/storage/integrity', { params: { query: { depth } } }))
}

interface CheckFlags {
  url?: string
  token?: string
  'data-dir'?: string
  quick?: boolean
  json?: boolean
}

/**
 * Whether the database file is there to check here: 'missing', or 'here'. One the user may not
 * read (a data dir of another user, mode 0700) is neither: existsSync would call it missing, so
 * the permission problem is named instead, as serve names it.
 */
function databaseFile(path: string): 'here' | 'missing' {
  try {
    accessSync(path, constants.R_OK)
  } catch (error) {
    const e = error as NodeJS.ErrnoException
    if (e.code === 'ENOENT' || e.code === 'ENOTDIR') return 'missing'
    throw new Error(`cannot read ${path} (${e.code}: permission denied): run as the user the host runs as (the owner of the data dir)`)
  }
  // Not a disk's fault, as SQLite's "disk I/O error" on opening one would say; a FIFO's opening would wait forever.
  try {
    refuseNotRegular(path)
  } catch (error) {
    if (error instanceof NotRegularFileError) throw new Error(`${path} is ${error.kind}, not a database file; it was not checked`)
    throw error
  }
  return 'here'
}

/** `leasehold check`: the integrity check, on demand. */
export async function checkCommand(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const flags = parseFlags<CheckFlags>(argv, [], ['quick', 'json'])
  const dataDir = dataDirOf(flags, env)
  const path = join(dataDir, 'leasehold.db')
  // A host named by its URL, and no data dir named, is the host whose file is meant: the default
  // data dir's file, if this machine has one, may be any other host's.
  const hostNamed = (flags.url ?? envSetting(env, 'LEASEHOLD_URL')) !== undefined && (flags['data-dir'] ?? envSetting(env, 'LEASEHOLD_DATA_DIR')) === undefined
  let report: IntegrityReport
  try {
    report = hostNamed ? await checkThroughHost(await resolveClientTarget(flags, env), flags.quick ? 'quick' : 'full') : await checkFile(path, flags, env)
  } catch (error) {
    // A script reads --json from stdout: a file that could not be checked is said there too
    // (its line still goes to stderr). A usage mistake is not a result of the check.
    if (flags.json && !(error instanceof ConfigError)) console.log(JSON.stringify({ path: hostNamed ? null : path, ok: false, problems: [], error: (error as Error).message }, null, 2))
    throw error
  }
  const { integrityLine } = await import('../db/integrity')
  if (flags.json) console.log(JSON.stringify(report, null, 2))
  // The report is the host's (LEASEHOLD_URL may name any host): its text is shown escaped.
  else if (report.ok) console.log(printable(integrityLine(report)))
  else console.log([integrityLine(report), ...report.problems.map((problem) => `  ${problem}`)].map(printable).join('\n'))
  return report.ok ? 0 : 1
}

/** The report on the file at `path`: checked here, or by the host that holds it; a file that cannot be checked throws its one line (exit 1). */
async function checkFile(path: string, flags: CheckFlags, env: NodeJS.ProcessEnv): Promise<IntegrityReport> {
  const depth = flags.quick ? 'quick' : 'full'
  if (databaseFile(path) === 'missing') {
    // A host named by its URL (--url, or LEASEHOLD_URL) checks its own file, wherever it is.
    if (flags.url === undefined && envSetting(env, 'LEASEHOLD_URL') === undefined) {
      throw new Error(`there is no database at ${path} (give the data directory with --data-dir, or a host with --url and --token)`)
    }
    return checkThroughHost(await resolveClientTarget(flags, env), depth)
  }
  // SQLite is loaded for this command only, as for serve: the other client commands start faster without it.
  const [{ checkIntegrity }, { checkCompanionFiles, DatabaseOpenError, refuseLoneLog }] = await Promise.all([import('../db/integrity'), import('../db/open')])
  // SQLite removes a log that holds commits as it opens an empty database file beside it.
  refuseLoneLog(path)
  checkCompanionFiles(path, notRegularFile) // a FIFO's opening would wait forever; a read-only data dir is checked through a copy
  try {
    const unwritable = unwritableDir(dirname(path))
    if (unwritable) return checkCopy(path, unwritable, depth, checkIntegrity)
    const { lockDataDir } = await import('../data-dir/lock')
    return checkLeavingNoLog(path, (alone) => checkIntegrity(path, depth, undefined, alone), lockDataDir)
  } catch (error) {
    if (error instanceof DatabaseOpenError) throw error
    const code = (error as { code?: string }).code
    const noFiles = code === 'SQLITE_CANTOPEN' ? noFreeFiles(dirname(path)) : null
    if (noFiles) throw new Error(`the disk that holds ${path} has ${noFiles}: SQLite cannot create the -wal and -shm files it reads the file with (${code}); remove files from that disk and check again (the file was left untouched)`)
    if (code !== 'SQLITE_BUSY') {
      throw new Error(`${path} cannot be read (${(error as Error).message}); if the disk is failing, copy the file with its -wal away before anything else`)
    }
    return checkHeld(path, flags, env, depth)
  }
}

/**
 * Why the data dir cannot be written here, or null: a read-only mount (a backup, a disk mounted
 * read-only to save what it holds), or a folder this user may read but not write (another
 * user's, an immutable one). SQLite reads a file in WAL mode only beside its -shm, which it
 * cannot create there, so the file is checked through a copy. No host can be writing such a
 * file, or not as this user.
 */
function unwritableDir(dataDir: string): string | null {
  try {
    accessSync(dataDir, constants.W_OK)
    return null
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'EROFS') return 'is read-only'
    return code === 'EACCES' || code === 'EPERM' ? `cannot be written by this user (${code})` : null
  }
}

/**
 * Checks the file of a stopped host and leaves its data dir as it was. SQLite's read-only
 * connection makes an empty -wal and a -shm beside a file in WAL mode, and only a writer's close
 * removes them: they would stay (the host, which keeps the log's index in its memory, never
 * removes a -shm). A data dir is held meanwhile, as a host holds it, so that no host starts on
 * the file while its log is removed; a data dir a host holds is left to `check` as it was (the
 * read-only open is refused, and the host is asked). A -wal that was there before, a killed
 * host's log, is never touched.
 *
 * A folder no host has run in (no host.lock: a copied file, a restored backup) gets no lock file
 * of the check's making. Its file, with no -wal or -shm beside it, is checked `alone`
 * (db/integrity.ts): the check's connection holds the file itself, makes no -shm, and SQLite
 * removes the empty -wal it made as that connection closes, before it lets go of the file. No
 * file is removed by name, so a host that starts meanwhile, which waits for the file or is
 * refused, never loses a log it has open.
 */
function checkLeavingNoLog<T>(path: string, check: (alone: boolean) => T, lockDataDir: (dataDir: string) => { release(): void }): T {
  if (!existsSync(join(dirname(path), LOCK_FILE))) return check(!existsSync(`${path}-wal`) && !existsSync(`${path}-shm`))
  let lock: { release(): void } | null = null
  try {
    lock = lockDataDir(dirname(path))
  } catch {
    // A host holds it (the check is refused and the host asked), or its lock cannot be written: the check says what it finds.
  }
  const restoreCompanions = companionsAsFound(path)
  try {
    return check(false)
  } finally {
    if (lock) {
      try {
        restoreCompanions()
      } finally {
        lock.release()
      }
    }
  }
}

/** Checks a copy of the file and its -wal in the temporary directory; the report names the file itself. */
function checkCopy(path: string, unwritable: string, depth: IntegrityDepth, check: (path: string, depth: IntegrityDepth) => IntegrityReport): IntegrityReport {
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-check-'))
  try {
    const copy = join(dir, 'leasehold.db')
    try {
      copyFileSync(path, copy)
      if (existsSync(`${path}-wal`)) copyFileSync(`${path}-wal`, `${copy}-wal`)
    } catch (error) {
      const e = error as NodeJS.ErrnoException
      throw new Error(`${dirname(path)} ${unwritable}, so ${path} is checked through a copy, and the copy in ${dir} failed (${e.code === 'ENOSPC' ? 'no space left' : (e.code ?? e.message)})`)
    }
    console.error(`leasehold: ${dirname(path)} ${unwritable}, so a copy of the file in ${tmpdir()} is checked`)
    return { ...check(copy, depth), path }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

/**
 * A file another process holds: a host serves it, and is asked to check it. Its host.json may be
 * missing for a moment (a host that is starting), waited for as every client command waits, or
 * for good (a host that could not write it on a full disk): then it is reached only through
 * --url, and the line says so rather than that no host runs.
 */
async function checkHeld(path: string, flags: CheckFlags, env: NodeJS.ProcessEnv, depth: IntegrityDepth): Promise<IntegrityReport> {
  let target: ClientTarget
  try {
    // A host that is starting (migrating, or checking after an unclean stop) holds the file before it says where it listens.
    target = await findHost(flags, env)
  } catch (error) {
    if (!(error instanceof NoHostError)) throw error
    const held = error.stale
      ? `${path} is held by a running host that has not said where it listens in ${HOST_START_WAIT_S} s (the data dir's host.json names pid ${error.stale.named}, which no longer holds it: the holder could not write its own, or it is not a Leasehold host)`
      : `${path} is held by a running host, whose host.json is ${error.reason === 'blank' ? 'empty' : 'missing'} after ${HOST_START_WAIT_S} s (it could not write it, or it is not a Leasehold host)`
    throw new Error(`${held}: give its --url and --token to check through it`)
  }
  let report: IntegrityReport
  try {
    report = await checkThroughHost(target, depth)
  } catch (failure) {
    throw new Error(`${path} is held by a running host, and the host at ${target.url} could not check it: ${(failure as Error).message}`)
  }
  // LEASEHOLD_URL may name another host than the one that holds this file: its report is not this file's.
  if (!sameFile(report.path, path)) {
    throw new Error(`${path} is held by a running host, but the host at ${target.url} serves ${report.path}: give the --url and --token of the host that serves ${path}`)
  }
  return report
}

/** Whether two paths name one file (through links and relative parts), as far as this machine can tell. */
function sameFile(a: string, b: string): boolean {
  const real = (path: string) => {
    try {
      return realpathSync(path)
    } catch {
      return resolve(path)
    }
  }
  return real(a) === real(b)
}
