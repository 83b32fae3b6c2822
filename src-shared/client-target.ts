import { statSync } from 'node:fs'
import { homedir, userInfo } from 'node:os'
import { join, posix, win32 } from 'node:path'
import { ConfigError, edgeWhitespaceProblem, envSetting, wholeNumberOf } from './command-line'
import { lockHeld, lockPid } from './host-lock'
import { TOKEN_CHARS } from './limits'
import { othersMayWrite, shellWord } from './others-may-write'
import { NotRegularFileError, readRegularFile } from './regular-file'

/**
 * How a command finds the host: its data dir, and there the host.json a running host writes and
 * the API token — the host's own files, read by the host's client commands and by the worker
 * program's `leasehold worker` alike.
 */

/**
 * The folder Electron calls `userData` for an app named leasehold, so the CLI and the app share
 * it. An empty or relative XDG_CONFIG_HOME (or APPDATA) is ignored, as the XDG spec says: taken
 * as given it would put a database and a token in whatever folder a command runs from.
 */
export function defaultDataDir(env: NodeJS.ProcessEnv = process.env, platform = process.platform): string {
  const absolute = (value: string | undefined) => (value && (platform === 'win32' ? win32.isAbsolute(value) : posix.isAbsolute(value)) ? value : undefined)
  // An empty or relative HOME (`HOME=`) is ignored alike: the home the system's user database
  // names stands in for it, rather than a data dir under whatever folder the command runs from.
  const home = absolute(homedir()) ?? systemHome() ?? homedir()
  if (platform === 'win32') return join(absolute(env.APPDATA) ?? join(home, 'AppData', 'Roaming'), 'leasehold')
  if (platform === 'darwin') return join(home, 'Library', 'Application Support', 'leasehold')
  return join(absolute(env.XDG_CONFIG_HOME) ?? join(home, '.config'), 'leasehold')
}

/** The user's home as the system's user database names it (not HOME), if it names one. */
function systemHome(): string | undefined {
  try {
    return userInfo().homedir || undefined
  } catch {
    return undefined
  }
}

/** Where a client command finds the host: flags, then LEASEHOLD_URL / LEASEHOLD_TOKEN, then the data dir. */
export interface ClientTarget {
  url: string
  token: string
  /**
   * Where the token came from, as a host's refusal of it names it: `--token`, `LEASEHOLD_TOKEN`,
   * the URL's `#token=`, or the data dir's token file (its path).
   */
  tokenSource?: string
  /**
   * How long to wait for each answer of the host, as LEASEHOLD_TIMEOUT_S gives it; when not given,
   * the wait the request calls for ({@link answerTimeoutMs}, {@link bulkAnswerTimeoutMs}).
   */
  timeoutMs?: number
  /**
   * The data dir whose host.json named the host, when no URL was given (--url, LEASEHOLD_URL):
   * that host is this machine's, and `leasehold serve` on that data dir starts it.
   */
  dataDir?: string
}

/**
 * How long a client command waits for each answer of its host, in seconds, unless
 * LEASEHOLD_TIMEOUT_S says otherwise: a host stopped with SIGSTOP, or a port that accepts and
 * never answers, would otherwise hold the command forever. Longer than any answer a working host
 * takes (an integrity check of a large file takes seconds).
 */
export const DEFAULT_ANSWER_TIMEOUT_S = 30

/** The time a client command waits for each answer of `target`. */
export const answerTimeoutMs = (target: ClientTarget): number => target.timeoutMs ?? DEFAULT_ANSWER_TIMEOUT_S * 1000

/**
 * How long a client command waits for the answer to a bulk action (`jobs retry --dead-letter`),
 * in seconds, unless LEASEHOLD_TIMEOUT_S says otherwise. The host answers once it has acted on
 * every job the filter selects, at ~2,800 (cancel) to ~4,000 (retry) jobs a second as measured:
 * 100,000 jobs take 25 to 36 s, past {@link DEFAULT_ANSWER_TIMEOUT_S}. Ten minutes covers some
 * 1.7 million jobs at the slower rate (400,000 on a machine four times slower), and still ends
 * the wait on a host stopped with SIGSTOP, which keeps its connections open and never answers.
 */
export const BULK_ANSWER_TIMEOUT_S = 600

/** The time a client command waits for the answer to a bulk action of `target`. */
export const bulkAnswerTimeoutMs = (target: ClientTarget): number => target.timeoutMs ?? BULK_ANSWER_TIMEOUT_S * 1000

/** Written by a running host so that local commands find it; removed when it stops. */
export const HOST_FILE = 'host.json'
/** The file a running host holds locked for its lifetime (src-main/data-dir/lock.ts). */
export const LOCK_FILE = 'host.lock'
/** The host's API token, made on its first start (src-main/data-dir/token.ts) unless it was given one. */
export const TOKEN_FILE = 'token'

/** What host.json says: where the host listens, and its process. */
export interface HostFile {
  url: string
  pid: number
}

/**
 * host.json's text as a host writes it (src-main/data-dir/lock.ts): an http(s) URL and the
 * host's pid, a positive whole number; null for anything else, which no host wrote and which
 * names no host. A trailing slash is dropped: requests add their paths to the URL.
 */
export function parseHostFile(text: string): HostFile | null {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return null
  }
  const { url, pid } = (parsed ?? {}) as { url?: unknown; pid?: unknown }
  if (typeof url !== 'string' || !/^https?:\/\//.test(url) || !URL.canParse(url)) return null
  if (typeof pid !== 'number' || !Number.isInteger(pid) || pid <= 0) return null
  return { url: url.replace(/\/+$/, ''), pid }
}

/**
 * A file the user cannot read: not the same as one that is not there. A data dir of another user
 * (mode 0700) would otherwise read as "no host is running", and send the user to start a second
 * host; this names the permission problem instead (exit 1: not a mistake in the flags).
 */
export class UnreadableError extends Error {
  constructor(path: string, error: NodeJS.ErrnoException) {
    super(`cannot read ${path} (${error.code}: ${error.message.replace(/^\w+: /, '')}): run as the user the host runs as, or give --url and --token`)
    this.name = 'UnreadableError'
  }
}

/** A file's text, or null when it is not there; one that is there but cannot be read (EACCES, EPERM) throws UnreadableError. */
function readOptional(path: string): string | null {
  try {
    return readRegularFile(path).trim()
  } catch (error) {
    const e = error as NodeJS.ErrnoException
    if (e.code === 'EACCES' || e.code === 'EPERM') throw new UnreadableError(path, e)
    if (e instanceof NotRegularFileError) throw new Error(`cannot read ${path} (${e.message}): remove it, or give --url and --token`)
    return null
  }
}

/** The data dir's host.json, or null when there is none (no host runs there) or it is not one; UnreadableError when the user may not read it. */
export function readHostFile(dataDir: string): HostFile | null {
  const text = readOptional(join(dataDir, HOST_FILE))
  return text ? parseHostFile(text) : null
}

/**
 * Why the host.json of `dataDir` may be another user's (the data dir, or the file, is another
 * user's or writable by its group or others: src-shared/others-may-write.ts), in a line; null
 * when only this user or root can have written it. Such a host.json could name any port: a
 * process of that user's listening there, holding the data dir's lock, would be sent the token.
 * A host refuses to start on such a data dir, so no host of this user's wrote it.
 */
export function untrustedHostFile(dataDir: string): string | null {
  const checked: [path: string, chmod: string][] = [
    [dataDir, '700'],
    [join(dataDir, HOST_FILE), '600'],
  ]
  for (const [path, chmod] of checked) {
    let shared
    try {
      shared = othersMayWrite(path, statSync(path), chmod)
    } catch {
      continue // gone meanwhile: read as no host, below
    }
    if (shared) return `${path} ${shared.why}: another user could name a host there, and this command would send it the token; check that the data dir is yours, then run \`${shared.fix}\`, or give --url and --token`
  }
  return null
}

/**
 * Whether process `pid` is alive and the user's: a process of another user answers EPERM, and is
 * none of the user's hosts (a host runs as the user whose data dir it holds).
 */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/**
 * Whether the host a data dir's host.json names (`pid`) runs there now: it holds the data dir's
 * lock (src-shared/host-lock.ts), and the lock names it. A host killed with SIGKILL (or a machine
 * that lost power) leaves its host.json behind, and its pid is soon another process's (after a
 * reboot, often one of the user's own): a live pid says nothing, and whatever listens on that
 * port now must never be sent the host's token. A running host removes a host.json left there as
 * it takes the lock, and writes its own once it listens. `nativeBinding`: better-sqlite3's addon
 * built for Electron, in the desktop app.
 */
export async function hostHolds(dataDir: string, pid: number, nativeBinding?: string): Promise<boolean> {
  const path = join(dataDir, LOCK_FILE)
  return lockPid(path) === pid && (await lockHeld(path, nativeBinding))
}

/**
 * Why a data dir names no host to talk to: `none` runs there (host.json is not there, or names a
 * host that does not hold the data dir's lock: one that has ended); `blank`, its host.json names
 * none (empty: a host that started on a full disk could not write it); `unsaid`, a host holds the
 * data dir but its host.json is missing (it is still starting, or could not write it); `stale`,
 * another process holds the data dir than the one its host.json names (a host that is starting
 * keeps a host.json naming a live process until it has opened its database).
 */
export type NoHostReason = 'none' | 'blank' | 'unsaid' | 'stale'

/** For a `stale` {@link NoHostError}: the pid host.json names, and the pid written in the lock that another process holds (null when the lock names none). */
export interface StaleHostFile {
  named: number
  holder: number | null
}

/**
 * A client command aimed at a data dir where no host runs (a running host keeps host.json
 * there) and given no host of its own: not a mistake in its flags, so it says what to start
 * rather than what is missing — or, for a host that runs but has not said where (in the
 * `waitedS` seconds the command waited for it), what to give.
 */
export class NoHostError extends Error {
  constructor(
    readonly dataDir: string,
    readonly reason: NoHostReason = 'none',
    waitedS?: number,
    readonly stale?: StaleHostFile,
  ) {
    const waited = waitedS === undefined ? '' : ` in ${waitedS} s`
    super(
      reason === 'blank'
        ? `the host on ${dataDir} has not said where it listens${waited} (its ${HOST_FILE} is empty: it may still be starting, or its disk may be full): ` +
            'try again in a moment, or give --url and --token (its log names its URL)'
        : reason === 'stale' && stale
          ? `the ${HOST_FILE} of the data dir ${dataDir} names pid ${stale.named}, which no longer holds the data dir; ${stale.holder === null ? 'another process' : `pid ${stale.holder}`} holds it ` +
            `and has not said where it listens${waited} (it may still be starting, or its disk may be full): try again in a moment, or give --url and --token (its log names its URL)`
        : reason === 'unsaid'
          ? `a host holds the data dir ${dataDir} but has not said where it listens${waited} (its ${HOST_FILE} is missing: it may still be starting, or its disk may be full): ` +
            'try again in a moment, or give --url and --token (its log names its URL)'
          : `no host is running on ${dataDir}: start one with "leasehold serve --data-dir ${shellWord(dataDir)}" ` +
            '(or "npm start" in the repository), or give --url and --token for a host elsewhere',
    )
    this.name = 'NoHostError'
  }
}

/** The data dir a command reads: `--data-dir`, else LEASEHOLD_DATA_DIR (an empty one is unset), else the default. */
export function dataDirOf(flags: { 'data-dir'?: string }, env: NodeJS.ProcessEnv): string {
  if (flags['data-dir'] !== undefined) return checkedDataDir('--data-dir', flags['data-dir'])
  const fromEnv = envSetting(env, 'LEASEHOLD_DATA_DIR')
  return fromEnv !== undefined ? checkedDataDir('LEASEHOLD_DATA_DIR', fromEnv) : defaultDataDir(env)
}

/** A data dir given by `source`, held to the rule serve holds it to ({@link edgeWhitespaceProblem}). */
function checkedDataDir(source: string, path: string): string {
  const problem = edgeWhitespaceProblem(path)
  if (problem !== null) throw new ConfigError(`${source} ${problem} (got ${JSON.stringify(path)})`)
  return path
}

/**
 * The host a client command talks to: its flags, then LEASEHOLD_URL / LEASEHOLD_TOKEN, then the
 * host.json and token of the data dir — a host.json whose host does not hold the data dir's lock
 * ({@link hostHolds}) is a dead host's, taken as none, and nothing is sent to the URL it names;
 * one that another user may have written ({@link untrustedHostFile}) is refused. A
 * token alone never names a host: without a URL the host is the data dir's, or there is none.
 *
 * A URL is taken as far as its path (a host behind a proxy under a prefix): the dashboard's link
 * that `serve` prints, `http://127.0.0.1:7878/#token=…`, names the host, and its `#token=` is
 * the token when no other is given (--token, LEASEHOLD_TOKEN).
 */
export async function resolveClientTarget(flags: { url?: string; token?: string; 'data-dir'?: string }, env: NodeJS.ProcessEnv): Promise<ClientTarget> {
  const dataDir = dataDirOf(flags, env)
  const timeoutS = wholeNumberOf('LEASEHOLD_TIMEOUT_S', envSetting(env, 'LEASEHOLD_TIMEOUT_S'), 1, 3600)
  const urlSource = flags.url !== undefined ? '--url' : 'LEASEHOLD_URL'
  const given = flags.url ?? envSetting(env, 'LEASEHOLD_URL')
  const named = given === undefined ? null : checkUrl(urlSource, given)
  const found = named ? null : readHostFile(dataDir)
  const untrusted = found === null ? null : untrustedHostFile(dataDir)
  if (untrusted !== null) throw new Error(untrusted)
  const hostFile = found !== null && (await hostHolds(dataDir, found.pid)) ? found : null
  if (named === null && hostFile === null) throw new NoHostError(dataDir, found === null && readOptional(join(dataDir, HOST_FILE)) === '' ? 'blank' : 'none')
  const url = new URL(named ?? hostFile!.url)
  const linked = new URLSearchParams(url.hash.slice(1)).get('token') || undefined
  const givenTokens: [string, string | undefined][] = [
    ['--token', flags.token],
    ['LEASEHOLD_TOKEN', envSetting(env, 'LEASEHOLD_TOKEN')],
    [`the #token= of ${urlSource}`, linked],
  ]
  const tokenFile = join(dataDir, TOKEN_FILE)
  const [tokenSource, token] = givenTokens.find(([, value]) => value !== undefined) ?? [tokenFile, readOptional(tokenFile)]
  if (!token) throw new ConfigError(`no token: give --token, set LEASEHOLD_TOKEN, or run where ${tokenFile} exists`)
  checkToken(tokenSource, token)
  return { url: `${url.origin}${url.pathname.replace(/\/+$/, '')}`, token, tokenSource, ...(timeoutS === undefined ? {} : { timeoutMs: timeoutS * 1000 }), ...(named === null ? { dataDir } : {}) }
}

/**
 * A token as a user gave it (`source`: the flag, variable or file it came from). A newline or a
 * space cannot travel in an Authorization header: Node would refuse the request as
 * ERR_INVALID_CHAR, which reads as a host that cannot be reached; it is a usage error (exit 2).
 */
export function checkToken(source: string, token: string): void {
  if (!TOKEN_CHARS.test(token)) throw new ConfigError(`${source} is not a token: a token is visible ASCII characters only (no spaces, newlines or control characters)`)
}

/**
 * A host's URL as a user gave it (`source`: the flag or the variable it came from): http: or
 * https:, with a host. "localhost:7878" parses as a URL of the scheme "localhost:", which no
 * request can use: a usage error (exit 2), not a host that cannot be reached.
 */
export function checkUrl(source: string, value: string): URL {
  let url: URL | null = null
  try {
    url = new URL(value)
  } catch {
    // named below
  }
  if (url === null || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '') {
    throw new ConfigError(`${source} must be an http:// or https:// URL such as http://127.0.0.1:7878 (got "${value}")`)
  }
  // A path is a proxy's prefix; one that starts as the API's own paths do (`…/api/`, copied from
  // a request) would be sent as /api/api/…, which no host serves.
  if (API_PATH.test(url.pathname)) {
    throw new ConfigError(`${source} must name the host only — its scheme, address and port, such as http://127.0.0.1:7878 — not a path of its API (got the path "${url.pathname}"); a path is only for a host that a proxy serves under a prefix`)
  }
  return url
}

/** The first segment of the host's own routes (the API, the workers' exchange): never a proxy's prefix. */
const API_PATH = /^\/(?:api|internal)(?:\/|$)/i
