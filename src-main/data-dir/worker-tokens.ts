import { createHash, randomBytes } from 'node:crypto'
import { readFileSync, renameSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

/**
 * Scoped tokens (`leasehold token create --scope worker`): a token that can only run jobs — the
 * worker routes over HTTP (/internal/worker, the files API a handler writes through) and remote
 * workers' requests over Redis — not submit, cancel, change capacity or read the API. Kept in
 * `<data-dir>/worker-tokens.json` (mode 0600) as SHA-256 digests: the file alone cannot act as
 * a worker. The host reads the file again when it changes, so a revoke takes effect within a
 * second, with no restart.
 */

/** The scopes a token may have; the host's own token has every right and is not listed here. */
export const TOKEN_SCOPES = ['worker'] as const
export type TokenScope = (typeof TOKEN_SCOPES)[number]

/** A scoped token as listed: never the token itself. */
export interface ScopedToken {
  id: string
  scope: TokenScope
  created_at: number
  revoked_at: number | null
}

interface Stored extends ScopedToken {
  sha256: string
}

export const WORKER_TOKENS_FILE = 'worker-tokens.json'
/** How often the host looks at the file's modification time (a revoke takes effect within this). */
const RECHECK_MS = 1_000

const digest = (token: string): string => createHash('sha256').update(token, 'utf8').digest('hex')

function readStored(dataDir: string): Stored[] {
  try {
    const parsed = JSON.parse(readFileSync(join(dataDir, WORKER_TOKENS_FILE), 'utf8')) as { tokens?: Stored[] }
    return Array.isArray(parsed.tokens) ? parsed.tokens : []
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return []
    throw error
  }
}

/** Written whole and renamed into place: the host never reads half a file. */
function writeStored(dataDir: string, tokens: Stored[]): void {
  const path = join(dataDir, WORKER_TOKENS_FILE)
  const temp = `${path}.${process.pid}.tmp`
  writeFileSync(temp, `${JSON.stringify({ tokens }, null, 2)}\n`, { mode: 0o600 })
  renameSync(temp, path)
}

/** Makes a token of `scope`; returns its id and the token, which is shown once and stored only as a digest. */
export function createScopedToken(dataDir: string, scope: TokenScope, now = Date.now()): { id: string; token: string } {
  const token = randomBytes(32).toString('hex')
  const id = randomBytes(4).toString('hex')
  writeStored(dataDir, [...readStored(dataDir), { id, scope, sha256: digest(token), created_at: now, revoked_at: null }])
  return { id, token }
}

/** Revokes the token `id`; false when there is none of that id. A revoked token stays listed, marked. */
export function revokeScopedToken(dataDir: string, id: string, now = Date.now()): boolean {
  const tokens = readStored(dataDir)
  const found = tokens.find((t) => t.id === id)
  if (!found) return false
  if (found.revoked_at === null) found.revoked_at = now
  writeStored(dataDir, tokens)
  return true
}

export function listScopedTokens(dataDir: string): ScopedToken[] {
  return readStored(dataDir).map(({ id, scope, created_at, revoked_at }) => ({ id, scope, created_at, revoked_at }))
}

/** The host's view of the file: the scope of a given token, re-read when the file changes. */
export class ScopedTokens {
  private byDigest = new Map<string, TokenScope>()
  private mtimeMs = -1
  private checkedAt = -Infinity

  constructor(private readonly dataDir: string) {}

  /** The scope of `token` if it is a live scoped token, else null. */
  scopeOf(token: string): TokenScope | null {
    this.refresh()
    if (this.byDigest.size === 0) return null
    return this.byDigest.get(digest(token)) ?? null
  }

  private refresh(): void {
    const now = Date.now()
    if (now - this.checkedAt < RECHECK_MS) return
    this.checkedAt = now
    let mtimeMs: number
    try {
      mtimeMs = statSync(join(this.dataDir, WORKER_TOKENS_FILE)).mtimeMs
    } catch {
      mtimeMs = 0 // no file: no scoped token
    }
    if (mtimeMs === this.mtimeMs) return
    this.mtimeMs = mtimeMs
    try {
      this.byDigest = new Map(readStored(this.dataDir).filter((t) => t.revoked_at === null).map((t) => [t.sha256, t.scope]))
    } catch {
      this.byDigest = new Map() // unreadable: no scoped token works until it is fixed
    }
  }
}
