/**
 * The Redis keys the host and remote workers share (docs/redis.md). Every key starts with the
 * prefix (`--redis-prefix`, `leasehold:` by default).
 */

/** The prefix when none is given. */
export const DEFAULT_REDIS_PREFIX = 'leasehold:'
/**
 * How long a client's disconnect waits for Redis to close its end before it drops the socket
 * (ioredis waits 2 s by default): a paused Redis never closes it, and a stop would wait for it.
 */
export const DISCONNECT_TIMEOUT_MS = 200
/** Whether an error is Redis's own refusal, which opens with its code (WRONGTYPE, OOM, NOPERM…), rather than its absence (a timeout, a closed connection). */
export const isRedisRefusal = (message: string): boolean => /^[A-Z]{3,}[A-Z_]* /.test(message)
/**
 * An error of the Redis client in the project's words: a command that waited past its timeout, or
 * whose connection dropped before its answer came (ioredis: "Reached the max retries per request
 * limit"), is Redis not answering in time; any other (Redis's own refusal, a socket's error) as it is.
 */
export function redisFaultWords(error: unknown): string {
  const message = String((error as Error)?.message ?? error)
  if (/max retries per request limit|^Command timed out/.test(message)) return 'Redis did not answer in time'
  // ioredis's words for a command sent while its connection is down (enableOfflineQueue off).
  if (/^Stream isn't writeable/.test(message)) return 'Redis is not connected'
  return notRedisWords(message) ?? missingDatabaseWords(message) ?? message
}

/**
 * A server that answers, but not in the Redis protocol (an HTTP port given as `--redis`), in
 * words that say so; null for any other error. ioredis's parser says only `Protocol error, got "H"
 * as reply type byte. Please report this.`, which reads as a fault of Leasehold or of ioredis.
 */
export function notRedisWords(message: string): string | null {
  const got = /^Protocol error, got (".*?") as reply type byte/.exec(message)
  if (!got) return null
  return `the server at that address does not speak the Redis protocol (its answer began with ${got[1]}): check the host and port of the Redis URL`
}

/**
 * The highest database number a `--redis` URL may name. Redis numbers its databases from 0 to
 * its `databases` setting less one (16 by default); a number past this is a typo, not a database.
 */
export const MAX_REDIS_DB = 9999

/** The form a `--redis` URL takes, as its refusal says it. */
const REDIS_URL_FORM = 'redis://[user:password@]host[:port][/db], or rediss:// for TLS'

/**
 * Why a `--redis` URL (or LEASEHOLD_REDIS) is refused, or null when it may be used: the scheme,
 * a host, a port from 1 to 65535, at most a database number in the path, and nothing after it.
 * ioredis would take a path that is no number as `SELECT NaN` (an uncaught rejection), and one it
 * cannot parse fails the start only once the database is open.
 */
export function redisUrlProblem(url: string): string | null {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return `must be a URL of the form ${REDIS_URL_FORM}: this one cannot be read (a port that is no number from 1 to 65535, an unclosed [, no host)`
  }
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') return `must be a URL of the form ${REDIS_URL_FORM}`
  if (parsed.hostname === '') return `names no host: it takes the form ${REDIS_URL_FORM}`
  if (parsed.port === '0') return 'names port 0: the port is a number from 1 to 65535'
  if (parsed.search !== '' || parsed.hash !== '') return `must end with its database number: it takes no ?options or #fragment (${REDIS_URL_FORM})`
  const db = parsed.pathname.replace(/^\//, '')
  if (db !== '' && !(/^\d+$/.test(db) && Number(db) <= MAX_REDIS_DB)) {
    return `names the database ${JSON.stringify(decodeURIComponent(db))}: the path after the port is a database number from 0 to ${MAX_REDIS_DB} (0 when left out)`
  }
  return null
}

/**
 * Redis's refusal of a database it does not have (`SELECT 99` on a server with 16). ioredis says
 * it as an error and then goes on, on database 0: see {@link reconnectOnMissingDatabase}.
 */
export const isMissingDatabase = (message: string): boolean => /^ERR (DB index is out of range|invalid DB index)/.test(message)

/**
 * Keeps a client off a connection whose SELECT of the URL's database Redis refused: ioredis would
 * otherwise go ready on database 0 and everything sent there would land in another database than
 * the one named. The client drops that connection and tries again as after an outage (its
 * retryStrategy), so that what it holds waits, and goes on once the server has the database.
 */
export function reconnectOnMissingDatabase(client: { on(event: 'error', listener: (error: Error) => void): unknown; disconnect(reconnect?: boolean): void }): void {
  client.on('error', (error) => {
    if (isMissingDatabase(error.message)) client.disconnect(true)
  })
}

/** Redis's refusal of the URL's database, in words that say what to mend. */
const missingDatabaseWords = (message: string): string | null =>
  isMissingDatabase(message) ? `Redis has no database of the URL's number (${message}): its databases setting allows fewer; check the /db of the Redis URL` : null

/** The longest `--redis-prefix` (serve's and the worker's). */
export const MAX_REDIS_PREFIX_CHARS = 100

/** The consumer group the host reads with, on every stream it reads or claims on. */
export const CONSUMER_GROUP = 'leasehold'

/** A queue's stream: one entry per unfinished job's current message. */
export const queueStream = (prefix: string, queue: string): string => `${prefix}q:${queue}`
/** The key a host claims its prefix with (src-main/redis/prefix-claim.ts): its identity, while it runs. */
export const prefixClaimKey = (prefix: string): string => `${prefix}host`
/** The stream remote workers send their requests to. */
export const requestStream = (prefix: string): string => `${prefix}worker:requests`
/**
 * A reply channel's name: a worker's process reads the answers to its runtime on its reply
 * stream, and those to its driving thread (`thread-0`) on a channel of its own, so that neither
 * reads the other's.
 */
export const REPLY_CHANNEL = /^thread-\d{1,3}$/

/** The stream a remote worker reads its answers from: the worker's own, or one of its channels. */
export const replyStream = (prefix: string, workerId: string, channel?: string): string =>
  channel ? `${prefix}worker:${workerId}:replies:${channel}` : `${prefix}worker:${workerId}:replies`

/**
 * How long past its longest wait (a claim's `max_wait_ms`) a remote worker waits for an answer
 * before it gives the request up and sends a new one. The host does not grant jobs to a claim
 * older than that: its worker no longer reads the answer.
 */
export const ANSWER_MARGIN_MS = 15_000

/**
 * The name a remote worker gives each connection it reads answers on (`CLIENT SETNAME`, again
 * on every reconnect), and sends with each request as `reader`: the host ends the wait of a
 * claim whose reader Redis no longer lists (its worker died), as a closed connection ends an
 * HTTP claim's.
 */
export const READER_NAME = /^leasehold-reader-[0-9a-f]{16}$/

/** When Redis stored a stream entry: the milliseconds of its id (`1733300000000-0`), by Redis's clock. */
export const entryTimeMs = (entryId: string): number => Number.parseInt(entryId, 10)

/** A stream entry's fields (a flat [name, value, …] list, as Redis answers them) as a lookup. */
export function entryField(fields: readonly string[], name: string): string | undefined {
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === name) return fields[i + 1]
  return undefined
}

/** The URL as it may be shown: its password replaced. */
export function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url)
    if (parsed.password) parsed.password = '***'
    return parsed.toString()
  } catch {
    return '(unparsable URL)'
  }
}

/** How a prefix's holder (`prefix_taken_by`) opens when `<prefix>host` holds something other than a Leasehold host's claim. */
const FOREIGN_HOLDER = 'no Leasehold host: the key holds '

/** The holder a value of `<prefix>host` names that is no Leasehold host's claim (another application's key). */
export const foreignHolder = (value: string): string => `${FOREIGN_HOLDER}${JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}…` : value)}`

/**
 * The characters SCAN's MATCH reads as a pattern (`*`, `?`, `[…]`, and `\` that escapes them). A
 * prefix with any of them would match other keys than its own; `--redis-prefix` refuses them.
 */
export const GLOB_CHARACTERS = /[*?[\]\\]/

/** `text` as a MATCH pattern that matches that text alone: each glob character escaped. */
export const globEscaped = (text: string): string => text.replace(/[*?[\]\\]/g, '\\$&')

/** Why a `--redis-prefix` (or LEASEHOLD_REDIS_PREFIX) is refused, or null when it may be used. */
export function redisPrefixRefusal(prefix: string): string | null {
  if (!GLOB_CHARACTERS.test(prefix)) return null
  return `must not contain * ? [ ] or \\: Redis reads them as a pattern when the host looks for its keys, which would then take other keys for its own`
}

/** Two prefixes nest when one begins the other: the keys of the longer are keys of the shorter's too. */
export const prefixesNest = (a: string, b: string): boolean => a !== b && (a.startsWith(b) || b.startsWith(a))

/** How a holder found on a prefix that nests with this host's ends: its prefix, quoted (group 1). */
const NESTING_HOLDER = /, on the Redis prefix "([^]*)", which nests with this host's$/

/** The holder (`prefix_taken_by`) of a host found on `prefix`, which nests with this host's: its description, then that prefix. */
export const nestingHolder = (description: string, prefix: string): string => `${description}, on the Redis prefix "${prefix}", which nests with this host's`

/**
 * The line a host on a taken prefix says (src-main/redis/prefix-claim.ts): at start, in its log,
 * and in `leasehold status`. `expiresInMs`: how long the holder's claim had left when found (at a
 * start): the holder may be a host that was killed, whose claim expires unrefreshed.
 */
export function prefixTakenMessage(prefix: string, url: string, holder: string, expiresInMs: number | null = null): string {
  const nesting = NESTING_HOLDER.exec(holder)
  if (nesting) {
    const other = nesting[1]!
    const [shorter, longer] = other.length < prefix.length ? [other, prefix] : [prefix, other]
    return (
      `another Leasehold host (${holder.slice(0, nesting.index)}) uses the Redis prefix "${other}" on ${redactedUrl(url)}, which nests with this host's "${prefix}": ` +
      `the keys of "${longer}" are keys of "${shorter}" too, and each host would take the other's for its own; each host needs a prefix that neither begins another host's nor begins with one: give this one another with --redis-prefix`
    )
  }
  if (holder.startsWith(FOREIGN_HOLDER)) {
    const key = prefixClaimKey(prefix)
    return `the key ${key} on ${redactedUrl(url)} holds ${holder.slice(FOREIGN_HOLDER.length)}, which is no Leasehold host's claim: something else uses the Redis prefix "${prefix}"; delete that key (DEL ${key}) if the prefix is this host's alone, or give this one another with --redis-prefix`
  }
  // A claim whose host was killed expires unrefreshed: the pid the line names may be gone already.
  const expiry = expiresInMs === null ? '' : `; if that host is gone (killed), its claim expires in ~${Math.ceil(expiresInMs / 1000)} s: try again then`
  return `another Leasehold host (${holder}) uses the Redis prefix "${prefix}" on ${redactedUrl(url)}; each host needs a prefix of its own: give this one another with --redis-prefix${expiry}`
}
