import { createHash, randomBytes } from 'node:crypto'
import { accessSync, closeSync, constants, existsSync, openSync, renameSync, rmSync, type Stats, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { z } from 'zod'
import { LockFile } from '../db/lock-file'
import { othersMayWrite } from '../../src-shared/others-may-write'
import { NotRegularFileError, readRegularFile } from '../../src-shared/regular-file'
import { noFreeFiles } from '../db/free-files'

/**
 * Scoped tokens (`leasehold token create --scope worker|admin`). A worker token can only run jobs
 * — the worker routes over HTTP (/internal/worker, the files API a handler writes through) and
 * remote workers' requests over Redis — not submit, cancel, change capacity or read the API. An
 * admin token can do all the host's own token does (the data dir's `token` file stays the admin
 * token it always was), and can be given to one script or person and revoked alone. Kept in
 * `<data-dir>/worker-tokens.json` (mode 0600) as SHA-256 digests: the file alone cannot act as
 * a worker. The host looks at the file whenever it checks such a token, and before it hands a
 * waiting claim work, re-reading it when it changed: a revoke takes effect once the command
 * that wrote it has returned, with no restart.
 */

/** The scopes a token may have; the host's own token has every right and is not listed here. */
export const TOKEN_SCOPES = ['worker', 'admin'] as const
export type TokenScope = (typeof TOKEN_SCOPES)[number]

/** A scoped token as listed: never the token itself. */
export interface ScopedToken {
  id: string
  scope: TokenScope
  created_at: number
  revoked_at: number | null
}

const Stored = z.object({
  id: z.string(),
  scope: z.enum(TOKEN_SCOPES),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  created_at: z.number(),
  revoked_at: z.number().nullable(),
})
type Stored = z.infer<typeof Stored>
const TokensFile = z.object({ tokens: z.array(Stored) })

export const WORKER_TOKENS_FILE = 'worker-tokens.json'
/** How often the host looks at the file with no request to make it: what a revoked token opened and still holds ends within this. */
const RECHECK_MS = 1_000

const digest = (token: string): string => createHash('sha256').update(token, 'utf8').digest('hex')

/** A token file that cannot be read, or is not one Leasehold wrote: its message names the file. */
export class WorkerTokensFileError extends Error {
  override name = 'WorkerTokensFileError'

  constructor(
    message: string,
    /** Why the file could not be read (`EACCES`, `ENOTREGULAR`…); undefined when it was read and is not Leasehold's. */
    readonly readCode?: string,
  ) {
    super(message)
  }
}

/**
 * The tokens in the file; none when there is no file. A file that is not JSON, or not the shape
 * written here, is an error naming it, never taken as empty: creating a token would then write
 * over it, and with it every token it held. So is one another user owns or may write.
 */
function readStored(dataDir: string): Stored[] {
  const path = join(dataDir, WORKER_TOKENS_FILE)
  let text: string
  try {
    text = readRegularFile(path, (stats) => refuseShared(path, stats))
  } catch (error) {
    const e = error as NodeJS.ErrnoException
    if (error instanceof WorkerTokensFileError) throw error
    if (e.code === 'ENOENT') return []
    throw new WorkerTokensFileError(`cannot read ${path} (${e instanceof NotRegularFileError ? e.message : (e.code ?? e.message)})`, e.code ?? 'unknown')
  }
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    throw new WorkerTokensFileError(`${path} is not JSON, so not a token file Leasehold wrote: fix it or move it away`)
  }
  const parsed = TokensFile.safeParse(json)
  if (!parsed.success) throw new WorkerTokensFileError(`${path} is not a token file Leasehold wrote (${parsed.error.issues[0]!.path.join('.') || 'the whole file'}: ${parsed.error.issues[0]!.message}): fix it or move it away`)
  return parsed.data.tokens
}

/**
 * Refuses a token file another user owns or may write (src-shared/others-may-write.ts): they could
 * have added a token of their own to it, which the host would take as a worker's or an admin's.
 */
function refuseShared(path: string, stats: Stats): void {
  const shared = othersMayWrite(path, stats, '600')
  if (shared) {
    throw new WorkerTokensFileError(
      `${path} ${shared.why}: another user may have added tokens to it; run \`${shared.fix}\`, then \`leasehold token list\` and revoke any you did not make, or move it away to start with no scoped tokens`,
    )
  }
}

/**
 * Written whole and renamed into place: the host never reads half a file. A write that fails (a
 * full disk) removes its temporary file and leaves the old file as it was.
 */
function writeStored(dataDir: string, tokens: Stored[]): void {
  const path = join(dataDir, WORKER_TOKENS_FILE)
  const temp = `${path}.${process.pid}.tmp`
  try {
    writeFileSync(temp, `${JSON.stringify({ tokens }, null, 2)}\n`, { mode: 0o600 })
    renameSync(temp, path)
  } catch (error) {
    rmSync(temp, { force: true })
    const e = error as NodeJS.ErrnoException
    // A read-only mount, or a folder this user may not write in (SQLite opens a lock file there read-only without a word): said as serve says it.
    if (e.code === 'EROFS' || e.code === 'EACCES' || e.code === 'EPERM') throw new WorkerTokensFileError(`cannot write in the data dir ${dataDir} (${e.message}); no token was changed`)
    const noFiles = e.code === 'ENOSPC' ? noFreeFiles(dataDir) : null
    const full = e.code === 'ENOSPC' ? (noFiles ? `the disk has ${noFiles}` : 'the disk is full') : (e.code ?? e.message)
    throw new WorkerTokensFileError(`cannot write ${path} (${full}); no token was changed`)
  }
}

/** The file whose lock a change of the tokens holds, beside the tokens' file. */
const CHANGE_LOCK_FILE = 'worker-tokens.lock'
/** How long a change waits for another command's change of the tokens to end. */
const CHANGE_WAIT_MS = 10_000

/**
 * Reads the tokens, changes them and writes them back while no other process does: two
 * `leasehold token` commands at once would otherwise each write back the list as it was before
 * the other's change, and a revoke be undone, or a token printed and never stored.
 */
function changeStored<T>(dataDir: string, change: (tokens: Stored[]) => T): T {
  try {
    return LockFile.exclusively(join(dataDir, CHANGE_LOCK_FILE), CHANGE_WAIT_MS, () => change(readStored(dataDir)))
  } catch (error) {
    if (error instanceof WorkerTokensFileError) throw error
    const code = (error as { code?: string }).code
    const noFiles = code === 'SQLITE_CANTOPEN' ? noFreeFiles(dataDir) : null
    const unwritable = code === 'SQLITE_CANTOPEN' && !noFiles ? cannotWriteIn(dataDir) : null
    if (unwritable) throw new WorkerTokensFileError(`cannot write in the data dir ${dataDir} (${unwritable}); no token was changed`)
    const why =
      code === 'SQLITE_BUSY'
        ? `another change of the tokens held it for over ${CHANGE_WAIT_MS / 1000} s`
        : error instanceof NotRegularFileError
          ? error.message
          : noFiles
            ? `the disk has ${noFiles}`
            : (code ?? (error as Error).message)
    throw new WorkerTokensFileError(`cannot lock ${join(dataDir, CHANGE_LOCK_FILE)} (${why}); no token was changed`)
  }
}

/**
 * Why the change's lock could not be opened here, from the file system's own error, or null:
 * SQLite says only `SQLITE_CANTOPEN`, where the data dir is on a read-only mount (`EROFS`) or
 * this user may not write in it or its lock file (`EACCES`). Said as serve says it, so one fault
 * reads the same from every command.
 */
function cannotWriteIn(dataDir: string): string | null {
  try {
    accessSync(dataDir, constants.W_OK)
    const lock = join(dataDir, CHANGE_LOCK_FILE)
    if (existsSync(lock)) closeSync(openSync(lock, 'r+'))
    return null
  } catch (error) {
    return (error as Error).message
  }
}

/** Makes a token of `scope`; returns its id and the token, which is shown once and stored only as a digest. */
export function createScopedToken(dataDir: string, scope: TokenScope, now = Date.now()): { id: string; token: string } {
  const token = randomBytes(32).toString('hex')
  const id = randomBytes(4).toString('hex')
  changeStored(dataDir, (tokens) => writeStored(dataDir, [...tokens, { id, scope, sha256: digest(token), created_at: now, revoked_at: null }]))
  return { id, token }
}

/**
 * Revokes the token `id`: `revoked`, or `already_revoked` (its first revocation's time is kept),
 * or `not_found` when there is none of that id. A revoked token stays listed, marked.
 */
export function revokeScopedToken(dataDir: string, id: string, now = Date.now()): 'revoked' | 'already_revoked' | 'not_found' {
  return changeStored(dataDir, (tokens) => {
    const found = tokens.find((t) => t.id === id)
    if (!found) return 'not_found'
    if (found.revoked_at !== null) return 'already_revoked'
    found.revoked_at = now
    writeStored(dataDir, tokens)
    return 'revoked'
  })
}

export function listScopedTokens(dataDir: string): ScopedToken[] {
  return readStored(dataDir).map(({ id, scope, created_at, revoked_at }) => ({ id, scope, created_at, revoked_at }))
}

/**
 * Why a host must not start on the token file, or null: one the host cannot read (another
 * user's, as a start with sudo leaves it; a directory), one another user owns or may write
 * ({@link refuseShared}), or one that is not one Leasehold wrote. A host
 * started on it would answer every scoped token 401, with nothing to tell its workers why. No
 * file is no scoped token, and starts (null). A file that goes bad while the host runs is logged
 * ({@link ScopedTokens}).
 */
export function unreadableTokensLine(dataDir: string): string | null {
  try {
    readStored(dataDir)
    return null
  } catch (error) {
    if (!(error instanceof WorkerTokensFileError)) throw error
    if (error.readCode === undefined) return error.message // says to fix it or move it away
    const remedy =
      error.readCode === 'EACCES' || error.readCode === 'EPERM'
        ? 'give it to the user the host runs as (chown), or start the host as its owner'
        : 'fix it, or move it away to start with no scoped tokens'
    return `${error.message}: it holds the scoped tokens of \`leasehold token\`, and a host that cannot read it would refuse every one; ${remedy}`
  }
}

/** The host's view of the file: the scope of a given token, the file looked at each time. */
export class ScopedTokens {
  private byDigest = new Map<string, TokenScope>()
  /** The digests of the revoked tokens the file lists. */
  private revokedDigests = new Set<string>()
  /** The file's tokens as last read, to write back should the file go ({@link restoreFile}). */
  private stored: Stored[] = []
  private revoked: () => void = () => {}
  /** The file as last read ({@link fileVersion}); null before the first look. */
  private version: string | null = null
  /** {@link recheck} has looked in the synchronous run going on. */
  private recheckedThisRun = false

  /** `log` hears once of each version of the file that cannot be read. */
  constructor(
    private readonly dataDir: string,
    private readonly log: (line: string) => void = () => {},
  ) {}

  /**
   * The scope of `token` if it is a live scoped token, else null. The file is looked at on each
   * call (one stat; it is read again only if it changed): a token `leasehold token create` has
   * just printed works from its first request, and one `leasehold token revoke` has revoked is
   * refused from the first request after the command returned.
   */
  scopeOf(token: string): TokenScope | null {
    this.refresh()
    return this.byDigest.get(digest(token)) ?? null
  }

  /** Whether `token` is a scoped token the file lists as revoked (looked at as {@link scopeOf} does). */
  isRevoked(token: string): boolean {
    this.refresh()
    return this.revokedDigests.has(digest(token))
  }

  /**
   * Looks at the file now, when a scoped token works (else none can have been revoked): a revoke
   * written since calls `revoked` before this returns. The host calls it before a waiting claim
   * is handed work, since that claim's token was checked when it came, maybe before the revoke.
   * Once per synchronous run of the host: no request sent after another process's revoke can be
   * read within a run that looked before it, and a batch of a thousand submits looks once.
   */
  recheck(): void {
    if (this.byDigest.size === 0 || this.recheckedThisRun) return
    this.recheckedThisRun = true
    queueMicrotask(() => (this.recheckedThisRun = false))
    this.refresh()
  }

  /**
   * Looks at the file every second, and calls `revoked` when a token that worked stops working
   * (revoked, or the file went), whether noticed then or by a check ({@link scopeOf},
   * {@link recheck}): a request checked before the revoke may still wait in a long-poll claim,
   * or an event stream it opened be open, and the host must end them. Returns the function that
   * stops it.
   */
  watch(revoked: () => void): () => void {
    this.revoked = revoked
    const timer = setInterval(() => this.refresh(), RECHECK_MS)
    timer.unref()
    return () => clearInterval(timer)
  }

  /**
   * Writes the tokens last read back to a file that went (the whole data dir removed), so that
   * they work again from the next look; a file there now is left as it is.
   */
  restoreFile(): void {
    if (this.stored.length === 0 || existsSync(join(this.dataDir, WORKER_TOKENS_FILE))) return
    writeStored(this.dataDir, this.stored)
    this.refresh()
  }

  private refresh(): void {
    const version = fileVersion(join(this.dataDir, WORKER_TOKENS_FILE))
    if (version === this.version) return
    this.version = version
    const before = this.byDigest
    try {
      const stored = readStored(this.dataDir)
      if (stored.length > 0) this.stored = stored
      this.byDigest = new Map(stored.filter((t) => t.revoked_at === null).map((t) => [t.sha256, t.scope]))
      this.revokedDigests = new Set(stored.filter((t) => t.revoked_at !== null).map((t) => t.sha256))
    } catch (error) {
      this.byDigest = new Map() // unreadable: no scoped token works until it is fixed
      this.revokedDigests = new Set()
      this.log(`leasehold: ${(error as Error).message}; no worker token is taken until then`)
    }
    if ([...before.keys()].some((key) => !this.byDigest.has(key))) this.revoked()
  }
}

/**
 * What tells one version of the file from the next: its inode, which each change's rename into
 * place gives anew (a modification time alone can be the same for two writes within a tick of a
 * filesystem's coarse clock), with its modification time and size for a file changed in place,
 * and its owner and mode, which decide whether it is taken at all ({@link refuseShared}).
 * The empty string when there is no file.
 */
function fileVersion(path: string): string {
  try {
    const stat = statSync(path)
    return `${stat.ino}:${stat.mtimeMs}:${stat.size}:${stat.uid}:${stat.mode}`
  } catch {
    return '' // no file: no scoped token (one that cannot be looked at is said when read)
  }
}
