import { resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { z } from 'zod'
import { defaultDataDir } from '../src-shared/client-target'
import { ConfigError, edgeWhitespaceProblem, emptyListProblem, envSetting, flagError, isPlainWholeNumber, joinDashedValues, listEntries, refuseEmptyValues, refuseRepeatedFlags, refuseUndecodedText, unknownVariableWarnings } from '../src-shared/command-line'
import { DEFAULT_WORKER_CONCURRENCY, MAX_WORKER_CONCURRENCY, MIN_TOKEN_CHARS, QueueName, TOKEN_CHARS, TOKEN_CHARS_RULE } from '../src-shared/worker-exchange'
import { MAX_BODY_LIMIT_BYTES, MAX_STREAMS } from '../src-shared/limits'
import { MAX_REDIS_DB, MAX_REDIS_PREFIX_CHARS, redisPrefixRefusal, redisUrlProblem } from '../src-shared/redis-streams'
import { EXEC_ALLOW_RULE, execAllowEntries, relativeExecEntry } from '../src-shared/exec-allow'
import { type WriteAllow, writeAllowEntries, writeAllowProblem } from '../src-shared/write-allow'
import type { Durability } from './db/open'
import { WAL_VFS_VARIABLE, walVfsSettingProblem } from './db/wal-vfs-setting'
import { FIRST_CAPACITY } from './engine/rules/capacity'
import { DEFAULT_ENGINE_CONFIG, MIN_LEASE_WINDOW_S } from './engine/rules/engine-config'

// Shared with the worker program's command and the host's client commands; named here too for
// the host's code that reads its configuration from this module.
export { ConfigError, defaultDataDir, DEFAULT_WORKER_CONCURRENCY, MAX_WORKER_CONCURRENCY }

/**
 * Jobs each local worker runs at once when `--worker-concurrency` is not given: enough for the
 * pool together to fill the capacity with one-unit jobs, and never fewer than
 * {@link DEFAULT_WORKER_CONCURRENCY}. With the defaults (100 units, 2 workers) that is 50 each;
 * 32 each could never hold more than 64 of the 100 units. Read once, when the pool starts.
 */
export function localWorkerSlots(totalUnits: number, workers: number): number {
  const share = workers > 0 ? Math.ceil(totalUnits / workers) : 0
  return Math.min(MAX_WORKER_CONCURRENCY, Math.max(DEFAULT_WORKER_CONCURRENCY, share))
}

/** Everything `leasehold serve` (and the desktop app) needs to start a host. */
export interface HostConfig {
  dataDir: string
  host: string
  port: number
  /** The API token; null = read `<dataDir>/token`, creating it on first start. */
  token: string | null
  workers: number
  /** Jobs each local worker runs at once; null = {@link localWorkerSlots} of the capacity at start. */
  workerConcurrency: number | null
  /** Programs local workers' exec handler may run. */
  execAllow: string[]
  /** The folders local workers' file.write may write under: null anywhere their user may, [] nowhere (src-shared/write-allow.ts). */
  writeAllow: WriteAllow
  /** The niceness local workers' handler threads lower themselves to (0 = as the host's), see src-worker/handler-thread.ts. */
  workerNice: number
  /** The queues local workers take jobs from, in their order of preference. */
  workerStreams: string[]
  /** Local workers have a GPU: they take jobs with `constraints.gpu_required`. */
  workerGpu: boolean
  drainGraceS: number
  /** Total capacity units; null keeps the stored setting (default 100). */
  totalUnits: number | null
  /** A manual busy rating, 'auto' to measure it, or null to keep the stored setting (default auto). */
  busy: number | 'auto' | null
  leaseTtlS: number
  heartbeatGraceS: number
  claimTtlS: number
  maxAttempts: number
  durability: Durability
  /** Host names accepted in the Host header besides localhost, 127.0.0.1, [::1] and the address the host listens on. */
  allowedHosts: string[]
  /** JSON bodies larger than this are refused with 413. */
  bodyLimitBytes: number
  statsIntervalS: number
  /** Days a finished job is kept after it finished, then deleted with its history; 0 keeps every job. */
  retainDays: number
  /** Redis to carry the queues' streams (docs/redis.md); null = SQLite alone, as without the flag. */
  redisUrl: string | null
  /** The prefix of every key the host writes in Redis. */
  redisPrefix: string
}

/**
 * A whole number from `min` to `max`, written in plain decimal: not "" (which Number reads as 0,
 * and would store a capacity of 0), nor " 3", "0x5" or "1e1", which z.coerce would take.
 */
const int = (min: number, max: number) => {
  const message = `must be a whole number from ${min} to ${max}`
  return z
    .string()
    .refine(isPlainWholeNumber, message)
    .transform(Number)
    .pipe(z.number().int(message).min(min, message).max(max, message))
}

/** `true` or `false`, spelt so: every flag takes a value (and its variable the same one), a switch included. */
/** A Redis key prefix: no glob characters (SCAN's MATCH would read them as a pattern: redis-streams.ts). */
const redisPrefix = z
  .string()
  .min(1, 'must not be empty')
  .max(MAX_REDIS_PREFIX_CHARS, `must be at most ${MAX_REDIS_PREFIX_CHARS} characters`)
  .refine((prefix) => redisPrefixRefusal(prefix) === null, { error: (issue) => redisPrefixRefusal(String(issue.input)) ?? '' })
/** A Redis URL as ioredis can use it, naming the database it means (src-shared/redis-streams.ts). */
const redisUrl = z.string().refine((url) => redisUrlProblem(url) === null, { error: (issue) => redisUrlProblem(String(issue.input)) ?? '' })
const yesOrNo = z.enum(['true', 'false'], { error: 'must be true or false' }).transform((value) => value === 'true')

const BUSY_MESSAGE = 'must be a number from 0 to 10, or auto'

/** `auto`, or a number from 0 to 10 in plain decimal (7 or 7.5); every other value gets the one message that says what is allowed. */
const busyRating = z
  .string()
  .refine((value) => value === 'auto' || (/^\d+(\.\d+)?$/.test(value) && Number(value) <= 10), BUSY_MESSAGE)
  .transform((value) => (value === 'auto' ? ('auto' as const) : Number(value)))

interface Flag {
  name: string
  env: string
  value: string
  help: string
  schema: z.ZodType
  default?: string
}

/** The flags of `leasehold serve`, each also read from LEASEHOLD_<NAME>. The help text is made from this table. */


/** A Host header's name as --allowed-host takes it: a DNS name, an IPv4 address or a bracketed IPv6 one; no port, no wildcard. */
const HOST_NAME = /^(\[[0-9a-f:.]+\]|[a-z0-9]([a-z0-9.-]*[a-z0-9])?)$/i

const hostNames = listEntries
const hostNamesOnly = (value: string) => hostNames(value).every((name) => HOST_NAME.test(name))
const hostNamesRule = (value: string) =>
  `each name is a host name without a port or a wildcard (the port is the server's own): "${hostNames(value).find((name) => !HOST_NAME.test(name))}" is not one`

/** Extra Host header names, comma-separated; none when not given, but a list of commas alone is a mistake. */
const allowedHosts = z
  .string()
  .refine((value) => emptyListProblem(value, 'host') === null, { error: (issue) => emptyListProblem(String(issue.input), 'host') ?? '' })
  .refine(hostNamesOnly, { error: (issue) => hostNamesRule(String(issue.input)) })

/**
 * An address to listen on. `[::1]` is how a URL writes an IPv6 address (and how --allowed-host
 * takes one): read as the address itself, which is what listen() takes.
 */
const listenAddress = z
  .string()
  .min(1, 'must not be empty')
  .transform((value) => /^\[[0-9a-f:.]+\]$/i.exec(value)?.[0].slice(1, -1) ?? value)

/** A data dir's path: whitespace at either end would name a new, empty one. */
const dataDirPath = z
  .string()
  .min(1, 'must not be empty')
  .refine((path) => edgeWhitespaceProblem(path) === null, { error: (issue) => edgeWhitespaceProblem(String(issue.input)) ?? '' })

/** Queue names, comma-separated: each one a worker's claim may name, at most as many as a claim names. */
const workerStreams = z
  .string()
  .transform(listEntries)
  .refine((names) => names.length > 0, 'needs at least one queue name')
  .refine((names) => names.length <= MAX_STREAMS, `names at most ${MAX_STREAMS} queues`)
  .superRefine((names, context) => {
    const bad = names.find((name) => !QueueName.safeParse(name).success)
    if (bad !== undefined) context.addIssue({ code: 'custom', message: `${JSON.stringify(bad)} is not a queue name` })
  })

/** An exec allow-list: absolute paths and bare names, no relative path (src-shared/exec-allow.ts says why). */
const execAllowList = z
  .string()
  .refine((value) => emptyListProblem(value, 'program') === null, { error: (issue) => emptyListProblem(String(issue.input), 'program') ?? '' })
  .transform(execAllowEntries)
  .superRefine((entries, context) => {
    const relative = relativeExecEntry(entries)
    if (relative !== undefined) context.addIssue({ code: 'custom', message: EXEC_ALLOW_RULE(relative) })
  })

/** A write allow-list: absolute folders, or `none` (src-shared/write-allow.ts says why). */
const writeAllowList = z.string().transform((value, context) => {
  const entries = writeAllowEntries(value)
  const problem = writeAllowProblem(value, entries)
  if (problem !== null) context.addIssue({ code: 'custom', message: problem })
  return entries
})

export const SERVE_FLAGS: Flag[] = [
  { name: 'data-dir', env: 'LEASEHOLD_DATA_DIR', value: 'PATH', help: 'where the database and token live', schema: dataDirPath },
  { name: 'host', env: 'LEASEHOLD_HOST', value: 'ADDR', help: 'address to listen on (another than loopback prints a warning); an IPv6 one as ::1 or [::1]', schema: listenAddress, default: '127.0.0.1' },
  { name: 'port', env: 'LEASEHOLD_PORT', value: 'N', help: 'port to listen on; 0 picks a free one', schema: int(0, 65535), default: '7878' },
  { name: 'token', env: 'LEASEHOLD_TOKEN', value: 'TOKEN', help: 'API token (default: <data-dir>/token, created on first start)', schema: z.string().min(MIN_TOKEN_CHARS, `must be at least ${MIN_TOKEN_CHARS} characters`).regex(TOKEN_CHARS, TOKEN_CHARS_RULE) },
  { name: 'workers', env: 'LEASEHOLD_WORKERS', value: 'N', help: 'local worker processes (0 = none: only external workers)', schema: int(0, 64), default: '2' },
  { name: 'worker-concurrency', env: 'LEASEHOLD_WORKER_CONCURRENCY', value: 'N', help: `jobs each local worker runs at once (default: the pool's share of the capacity units, at least ${DEFAULT_WORKER_CONCURRENCY}; the units still bound the total)`, schema: int(1, MAX_WORKER_CONCURRENCY) },
  { name: 'worker-nice', env: 'LEASEHOLD_WORKER_NICE', value: '0-19', help: 'how far the handlers of local workers, and the programs they run, yield the CPU to the host and the desktop (the OS niceness; 0 = not at all)', schema: int(0, 19), default: '10' },
  { name: 'worker-streams', env: 'LEASEHOLD_WORKER_STREAMS', value: 'QUEUES', help: 'the queues local workers take jobs from, comma-separated, in their order of preference', schema: workerStreams, default: 'default' },
  { name: 'worker-gpu', env: 'LEASEHOLD_WORKER_GPU', value: 'true|false', help: 'whether local workers have a GPU: only then do they take jobs submitted with constraints.gpu_required', schema: yesOrNo, default: 'false' },
  { name: 'exec-allow', env: 'LEASEHOLD_EXEC_ALLOW', value: 'PROGRAMS', help: "programs the exec handler of local workers may run, comma-separated (none: they take no exec jobs): absolute paths, or bare names looked up in the worker's own PATH (never the job's); a job's env may not set the variables that choose which code runs (PATH, LD_*, BASH_ENV, …: docs/workers.md). An entry allows what the job's arguments can make the program do: list a script of yours with fixed arguments, not a general tool (git, tar)", schema: execAllowList, default: '' },
  { name: 'write-allow', env: 'LEASEHOLD_WRITE_ALLOW', value: 'FOLDERS|none', help: "the folders the file.write handler of local workers may write under, comma-separated absolute paths (the file a write lands in, its links followed), or none for no file.write at all (default: anywhere the host's user may write; anyone with a token that may submit can then write any file of that user's)", schema: writeAllowList },
  { name: 'drain-grace-s', env: 'LEASEHOLD_DRAIN_GRACE_S', value: 'S', help: 'on shutdown, how long running jobs may finish before they are failed as retryable', schema: int(0, 3600), default: '10' },
  { name: 'total-units', env: 'LEASEHOLD_TOTAL_UNITS', value: 'N', help: `total capacity units (default: the stored setting, first ${FIRST_CAPACITY.total_units})`, schema: int(1, 1_000_000) },
  { name: 'busy', env: 'LEASEHOLD_BUSY', value: '0-10|auto', help: 'busy rating, or auto to measure CPU load (default: the stored setting, first auto)', schema: busyRating },
  { name: 'lease-ttl-s', env: 'LEASEHOLD_LEASE_TTL_S', value: 'S', help: 'lease time-to-live when a request names none', schema: int(1, 3600), default: String(DEFAULT_ENGINE_CONFIG.leaseTtlS) },
  { name: 'heartbeat-grace-s', env: 'LEASEHOLD_HEARTBEAT_GRACE_S', value: 'S', help: 'added to the TTL before a silent lease expires', schema: int(0, 3600), default: String(DEFAULT_ENGINE_CONFIG.heartbeatGraceS) },
  { name: 'claim-ttl-s', env: 'LEASEHOLD_CLAIM_TTL_S', value: 'S', help: `how long a claim through the queue API holds a job (at least 2: a lease request it makes and is denied is told to ask again after ${DEFAULT_ENGINE_CONFIG.leaseRetryAfterS} s, or half of it when that is less)`, schema: int(2, 86_400), default: String(DEFAULT_ENGINE_CONFIG.claimTtlS) },
  { name: 'max-attempts', env: 'LEASEHOLD_MAX_ATTEMPTS', value: 'N', help: 'attempts a job gets unless its submit says otherwise', schema: int(1, 1000), default: String(DEFAULT_ENGINE_CONFIG.maxAttempts) },
  { name: 'durability', env: 'LEASEHOLD_DURABILITY', value: 'normal|full', help: 'normal survives a killed process; full also survives power loss, slower', schema: z.enum(['normal', 'full'], { error: 'must be normal or full' }), default: 'normal' },
  { name: 'allowed-host', env: 'LEASEHOLD_ALLOWED_HOSTS', value: 'NAMES', help: 'extra Host header names to accept besides loopback and the --host address, comma-separated (names or addresses, no port)', schema: allowedHosts, default: '' },
  { name: 'body-limit', env: 'LEASEHOLD_BODY_LIMIT', value: 'BYTES', help: 'largest JSON body accepted', schema: int(1024, MAX_BODY_LIMIT_BYTES), default: String(1024 * 1024) },
  { name: 'stats-interval-s', env: 'LEASEHOLD_STATS_INTERVAL_S', value: 'S', help: 'how often the time-series gauges are sampled', schema: int(1, 3600), default: '10' },
  { name: 'redis', env: 'LEASEHOLD_REDIS', value: 'URL', help: `carry the queues over Redis Streams too: redis://[user:password@]host[:port][/db] (db 0 to ${MAX_REDIS_DB}), rediss:// for TLS (docs/redis.md)`, schema: redisUrl },
  { name: 'redis-prefix', env: 'LEASEHOLD_REDIS_PREFIX', value: 'PREFIX', help: `prefix of every Redis key the host writes, at most ${MAX_REDIS_PREFIX_CHARS} characters, without * ? [ ] or \\; one host per prefix, and none that begins another host's or begins with one`, schema: redisPrefix, default: 'leasehold:' },
  { name: 'retain-days', env: 'LEASEHOLD_RETAIN_DAYS', value: 'DAYS', help: 'days a finished job is kept, then deleted with its history (0 = forever)', schema: int(0, 36_500), default: '7' },
]

export function serveHelp(env: NodeJS.ProcessEnv = process.env): string {
  const rows = SERVE_FLAGS.map((f) => {
    const left = `  --${f.name} ${f.value}`
    // The data dir's default depends on the platform and the environment: show this machine's.
    const fallback = f.name === 'data-dir' ? defaultDataDir(env) : f.default
    const dflt = fallback ? ` [${fallback}]` : ''
    return `${left.padEnd(30)}${f.help}${dflt}\n${' '.repeat(30)}env ${f.env}`
  })
  return ['Usage: leasehold serve [flags]', '', 'Runs the Leasehold host without a window: the HTTP API and the scheduler.', '', 'Flags:', ...rows, '  -h, --help'].join('\n')
}

/**
 * Reads `serve` flags, then LEASEHOLD_* variables, then defaults. Throws {@link ConfigError}
 * naming the flag on the first bad value.
 */
export function parseServeArgs(argv: string[], env: NodeJS.ProcessEnv, defaults: { dataDir?: string } = {}): HostConfig {
  let parsed: ReturnType<typeof parseArgs>
  try {
    parsed = parseArgs({
      args: joinDashedValues(argv, new Set(SERVE_FLAGS.map((f) => f.name))),
      options: Object.fromEntries(SERVE_FLAGS.map((f) => [f.name, { type: 'string' as const }])),
      strict: true,
      allowPositionals: false,
      tokens: true,
    })
  } catch (error) {
    throw flagError(error, SERVE_FLAGS.map((f) => f.name))
  }
  // The command line's rules for every command: a flag given twice, empty, or in bytes that are not UTF-8 is a usage error.
  refuseRepeatedFlags(parsed.tokens ?? [])
  refuseEmptyValues(parsed.values)
  refuseUndecodedText(parsed.values)
  const values = parsed.values as Record<string, string | undefined>
  const read = (name: string): unknown => {
    const flag = SERVE_FLAGS.find((f) => f.name === name)!
    const fromFlag = values[name] as string | undefined
    const fromEnv = envSetting(env, flag.env)
    const raw = fromFlag ?? fromEnv ?? flag.default
    if (raw === undefined) return undefined
    const parsed = flag.schema.safeParse(raw)
    if (!parsed.success) {
      const source = fromFlag !== undefined ? `--${name}` : fromEnv !== undefined ? flag.env : `--${name}`
      // The value as JSON writes a string: a control character in it (a CR, say) cannot split the line.
      throw new ConfigError(`${source} ${parsed.error.issues[0]?.message ?? 'is not valid'} (got ${JSON.stringify(raw)})`)
    }
    return parsed.data
  }
  const walVfs = envSetting(env, WAL_VFS_VARIABLE)
  const walVfsProblem = walVfsSettingProblem(walVfs)
  if (walVfsProblem !== null) throw new ConfigError(`${WAL_VFS_VARIABLE} ${walVfsProblem} (got ${JSON.stringify(walVfs)})`)
  const busy = read('busy') as number | 'auto' | undefined
  const leaseTtlS = read('lease-ttl-s') as number
  const heartbeatGraceS = read('heartbeat-grace-s') as number
  // A worker heartbeats every second at the most often (heartbeat_interval_seconds is whole
  // seconds): a lease that expires a second after its grant would expire before that heartbeat.
  if (leaseTtlS + heartbeatGraceS < MIN_LEASE_WINDOW_S) {
    throw new ConfigError(
      `--lease-ttl-s ${leaseTtlS} with --heartbeat-grace-s ${heartbeatGraceS} would let a lease expire ${leaseTtlS + heartbeatGraceS} s after its last heartbeat, and a worker heartbeats every second at most: the two must add up to at least ${MIN_LEASE_WINDOW_S}`,
    )
  }
  return {
    // Absolute, so that every line naming a file in it (the start's, an error's, host.json's) names the same place.
    dataDir: resolve((read('data-dir') as string | undefined) ?? defaults.dataDir ?? defaultDataDir(env)),
    host: read('host') as string,
    port: read('port') as number,
    token: (read('token') as string | undefined) ?? null,
    workers: read('workers') as number,
    workerConcurrency: (read('worker-concurrency') as number | undefined) ?? null,
    workerNice: read('worker-nice') as number,
    workerStreams: read('worker-streams') as string[],
    workerGpu: read('worker-gpu') as boolean,
    execAllow: read('exec-allow') as string[],
    writeAllow: (read('write-allow') as WriteAllow | undefined) ?? null,
    drainGraceS: read('drain-grace-s') as number,
    totalUnits: (read('total-units') as number | undefined) ?? null,
    busy: busy ?? null,
    leaseTtlS,
    heartbeatGraceS,
    claimTtlS: read('claim-ttl-s') as number,
    maxAttempts: read('max-attempts') as number,
    durability: read('durability') as Durability,
    allowedHosts: listEntries(read('allowed-host') as string).map((h) => h.toLowerCase()),
    bodyLimitBytes: read('body-limit') as number,
    statsIntervalS: read('stats-interval-s') as number,
    retainDays: read('retain-days') as number,
    redisUrl: (read('redis') as string | undefined) ?? null,
    redisPrefix: read('redis-prefix') as string,
  }
}

/**
 * The variables some Leasehold command reads: serve's, the client commands' and the worker's, the
 * database's switch, and those the host sets for its local workers. Any other LEASEHOLD_* is a
 * warning at start ({@link unknownVariableWarnings}).
 */
const KNOWN_VARIABLES = [
  ...SERVE_FLAGS.map((f) => f.env),
  'LEASEHOLD_URL',
  'LEASEHOLD_TOKEN',
  'LEASEHOLD_TIMEOUT_S',
  WAL_VFS_VARIABLE,
  // A fault the Redis tests inject (redis/relay.ts).
  'LEASEHOLD_FAULT_KILL_BEFORE_XADD',
  ...['ID', 'LINK', 'LINK_TOKEN', 'HANDLERS', 'EXEC_ALLOW', 'WRITE_ALLOW', 'BODY_LIMIT'].map((name) => `LEASEHOLD_WORKER_${name}`),
]

/** The lines serve prints as it starts, one for each LEASEHOLD_* variable no command reads. */
export const serveVariableWarnings = (env: NodeJS.ProcessEnv): string[] => unknownVariableWarnings(env, KNOWN_VARIABLES)
