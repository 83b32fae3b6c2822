import { findHost } from './host-target'
import { printable } from '../../src-shared/printable'
import { ConfigError, parseCommandLine, CLIENT_TARGET_HELP } from '../../src-shared/command-line'
import { answerTimeoutMs } from '../../src-shared/client-target'
import { answered, hostApi } from './http-client'

export const BACKUP_HELP = `Usage: leasehold backup [flags]

Copies the database of the running host, every commit so far, into <data-dir>/backups/
leasehold-<time>.db, while the host serves (POST /api/storage/backup: SQLite's backup API,
through the host's own connection). Prints the backup's path. A copy of the file made with cp
while the host commits can be torn; this one is whole. Backups are kept until you remove them.

A backup holds the database alone: every job, schedule and setting, but not the admin token
(<data-dir>/token) nor the worker tokens (<data-dir>/worker-tokens.json): copy those two files
beside it. <data-dir>/backups is on the same disk as the database: a backup there survives a
damaged file or a mistake, not a lost disk. Copy the backup (and those two files) to another
disk or machine to keep what survives that.

To restore one: stop the host, move leasehold.db (and any leasehold.db-wal and -shm beside it)
away, copy the backup to <data-dir>/leasehold.db, and start the host (docs/operations.md).

The host is found as the other client commands find theirs; the answer is waited for up to 10
minutes (LEASEHOLD_TIMEOUT_S, if longer): the copy reads the whole file.

Flags:
  --json               print {path, bytes, ms} as JSON
${CLIENT_TARGET_HELP}
  -h, --help`

/** How long the host's copy is waited for, at the least: it reads the whole file before it answers. */
const BACKUP_ANSWER_MS = 10 * 60_000

interface BackupFlags {
  url?: string
  token?: string
  'data-dir'?: string
  json?: boolean
}

/** `leasehold backup`: the running host copies its database into its data dir's backups folder. */
export async function backupCommand(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const { values: flags, positionals } = parseCommandLine<BackupFlags>(argv, [], ['json'], true)
  if (positionals.length > 0) throw new ConfigError(`backup takes no argument (got "${positionals[0]}"): the backup goes to <data-dir>/backups`)
  const found = await findHost(flags, env)
  const target = { ...found, timeoutMs: Math.max(answerTimeoutMs(found), BACKUP_ANSWER_MS) }
  const backup = await answered(target, hostApi(target).POST('/api/storage/backup'))
  if (flags.json) console.log(JSON.stringify(backup, null, 2))
  else console.log(`${printable(backup.path)} (${(backup.bytes / 1024 / 1024).toFixed(1)} MB, copied in ${(backup.ms / 1000).toFixed(1)} s)`)
  return 0
}
