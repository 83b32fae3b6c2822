import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { ConfigError } from '../../src-shared/command-line'
import { defaultDataDir, resolveClientTarget } from '../../src-shared/client-target'
import type { IntegrityDepth, IntegrityReport } from '../db/integrity'
import { answered, hostApi } from './http-client'

export const CHECK_HELP = `Usage: leasehold check [flags]

Checks the integrity of the database in the data directory: every page, row and index
(SQLite's integrity_check), through a read-only connection. While a host serves the data
directory, the file is that host's alone: the host runs the check on a thread of its own
(GET /api/storage/integrity) and this command prints what it found. It reads the whole file
(seconds for a million finished jobs). The host runs the quicker
form on its own, in the background, after a start that follows an unclean shutdown; otherwise
run it when a read fails with storage_error again and again, to tell a failing disk (the file
checks ok) from a damaged file.

Exits 0 when the file is sound, 1 when it is damaged (the problems are printed, with what to
do) or cannot be read at all.

Flags:
  --data-dir PATH   the data directory (default: LEASEHOLD_DATA_DIR, else ${defaultDataDir()})
  --quick           SQLite's quick_check: pages and rows, indexes not matched against their tables (about half the time)
  --json            print {path, ok, problems, ms} as JSON
  -h, --help`

/** The check run by the host that holds the file: the data dir's host.json and token say where it listens (never LEASEHOLD_URL: another host's file is not this one). */
async function checkThroughHost(dataDir: string, depth: IntegrityDepth): Promise<IntegrityReport> {
  const target = resolveClientTarget({ 'data-dir': dataDir }, {})
  return answered(target, hostApi(target).GET('/api/storage/integrity', { params: { query: { depth } } }))
}

/** `leasehold check`: the integrity check, on demand. */
export async function checkCommand(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  let flags: { 'data-dir'?: string; quick?: boolean; json?: boolean }
  try {
    flags = parseArgs({ args: argv, options: { 'data-dir': { type: 'string' }, quick: { type: 'boolean' }, json: { type: 'boolean' } }, strict: true }).values
  } catch (error) {
    throw new ConfigError((error as Error).message.split('\n')[0]!)
  }
  const dataDir = flags['data-dir'] ?? env.LEASEHOLD_DATA_DIR ?? defaultDataDir(env)
  const path = join(dataDir, 'leasehold.db')
  if (!existsSync(path)) {
    console.error(`leasehold: there is no database at ${path} (give the data directory with --data-dir)`)
    return 1
  }
  const depth = flags.quick ? 'quick' : 'full'
  // SQLite is loaded for this command only, as for serve: the other client commands start faster without it.
  const { checkIntegrity, integrityLine } = await import('../db/integrity')
  let report: IntegrityReport
  try {
    report = checkIntegrity(path, depth)
  } catch (error) {
    if ((error as { code?: string }).code !== 'SQLITE_BUSY') {
      console.error(`leasehold: ${path} cannot be read (${(error as Error).message}); if the disk is failing, copy the file with its -wal away before anything else`)
      return 1
    }
    try {
      report = await checkThroughHost(dataDir, depth)
    } catch (failure) {
      console.error(`leasehold: ${path} is held by another process, and the host that serves it could not check it: ${(failure as Error).message}`)
      return 1
    }
  }
  if (flags.json) console.log(JSON.stringify(report, null, 2))
  else if (report.ok) console.log(integrityLine(report))
  else console.log([integrityLine(report), ...report.problems.map((problem) => `  ${problem}`)].join('\n'))
  return report.ok ? 0 : 1
}
