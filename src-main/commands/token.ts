import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { ConfigError, envSetting, flagError, refuseEmptyValues, refuseRepeatedFlags, refuseUndecodedText } from '../../src-shared/command-line'
import { dataDirOf, defaultDataDir } from '../../src-shared/client-target'
import type { TokenScope } from '../data-dir/worker-tokens'
import { table } from './text-table'

export const TOKEN_HELP = `Usage: leasehold token create --scope worker|admin | list | revoke ID [--data-dir PATH]

Scoped tokens, each revocable on its own. A worker token can only run jobs: the worker routes
over HTTP (/internal/worker, and the file leases of its own jobs under /api/files/leases) and
remote workers' requests over Redis (leasehold worker --redis), and read the API's document
(/api/openapi.json). It cannot submit, cancel, change capacity or read the host's jobs. Give one to each machine that runs workers instead of the host's own
token, and revoke it when the machine goes. An admin token can do all the host's own token does
(the data dir's token file stays the admin token it is): give one to a script or a person who
needs the whole API, and revoke it when they no longer do.

  create --scope worker|admin   print a new token (shown once: only its digest is kept)
  list                          the tokens' ids, scopes and when they were made or revoked
  revoke ID                     the token stops working as this returns, without a restart:
                                its requests are refused, no claim it waits in is handed work,
                                and those claims and the event streams it opened end within a
                                second; a token revoked before is said so, exit 0 (an unknown
                                ID: exit 1)

Tokens live in <data-dir>/worker-tokens.json, on the host's machine; run this there, once the
host has started in that data dir (a folder with no leasehold.db is refused).

Flags:
  --data-dir PATH   the host's data directory (default: LEASEHOLD_DATA_DIR, else ${defaultDataDir()})
  --json            print as JSON: create {id, scope, token}, list every token's {id, scope,
                    created_at, revoked_at}
  -h, --help`

/** `leasehold token`: create, list or revoke scoped tokens in the data dir. */
export async function tokenCommand(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  let parsed: ReturnType<typeof parse>
  try {
    parsed = parse(argv)
  } catch (error) {
    throw flagError(error, Object.keys(TOKEN_OPTIONS))
  }
  const { values, positionals, tokens } = parsed
  refuseRepeatedFlags(tokens)
  refuseEmptyValues(values)
  refuseUndecodedText(values)
  // The token file's code (and zod, which reads the file) loads for this command only: the other client commands start faster without it.
  const { createScopedToken, listScopedTokens, revokeScopedToken, TOKEN_SCOPES } = await import('../data-dir/worker-tokens')
  // What was asked is checked before the data dir is looked for: a usage error is said as one.
  const [action, ...rest] = positionals
  const asked = action === 'revoke' ? rest.length === 1 : (action === 'create' || action === 'list') && rest.length === 0
  if (!asked) throw new ConfigError('usage: leasehold token create --scope worker|admin | list | revoke ID')
  const scope = values.scope
  // Not a filter of list nor a check of revoke: taken there, it would seem to narrow what they touch.
  if (action !== 'create' && scope !== undefined) throw new ConfigError('--scope belongs to token create')
  if (action === 'create' && !TOKEN_SCOPES.includes(scope as TokenScope)) throw new ConfigError(`--scope must be one of: ${TOKEN_SCOPES.join(', ')}`)
  const dataDir = dataDirOf(values, env)
  if (!existsSync(dataDir)) throw new ConfigError(`there is no data directory at ${dataDir} (give it with --data-dir)`)
  // A token made in a folder no host reads would be refused by every host: a mistyped --data-dir
  // is said at once, not at the worker's first 401.
  if (!existsSync(join(dataDir, 'leasehold.db'))) throw new ConfigError(`${dataDir} is not a Leasehold data directory (it holds no leasehold.db): give the host's --data-dir, which its first start makes`)
  if (action === 'create') {
    const { id, token } = createScopedToken(dataDir, scope as TokenScope)
    console.error(`leasehold: token ${id} (scope ${scope}) created; it is shown once:`)
    console.log(values.json ? JSON.stringify({ id, scope, token }, null, 2) : token)
  } else if (action === 'list') {
    const tokens = listScopedTokens(dataDir)
    if (values.json) console.log(JSON.stringify(tokens.map((t) => ({ ...t, created_at: new Date(t.created_at).toISOString(), revoked_at: t.revoked_at && new Date(t.revoked_at).toISOString() })), null, 2))
    else if (tokens.length === 0) console.log('no scoped tokens (leasehold token create --scope worker makes one)')
    else console.log(table(['ID', 'SCOPE', 'CREATED', 'REVOKED'], tokens.map((t) => [t.id, t.scope, new Date(t.created_at).toISOString(), t.revoked_at ? new Date(t.revoked_at).toISOString() : '-'])))
  } else {
    // A thing not found is a failure (exit 1), as for a job or a schedule, not a usage mistake. A
    // token revoked before is what was asked for (exit 0), said as such: nothing was changed.
    const outcome = revokeScopedToken(dataDir, rest[0]!)
    if (outcome === 'not_found') throw new Error(`there is no token ${rest[0]} (leasehold token list shows them)`)
    console.error(`leasehold: token ${rest[0]} ${outcome === 'revoked' ? 'revoked' : 'was already revoked; nothing changed'}`)
  }
  return 0
}

const TOKEN_OPTIONS = { 'data-dir': { type: 'string' }, scope: { type: 'string' }, json: { type: 'boolean' } } as const

function parse(argv: string[]) {
  return parseArgs({ args: argv, options: TOKEN_OPTIONS, strict: true, allowPositionals: true, tokens: true })
}
