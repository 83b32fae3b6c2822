import { statSync } from 'node:fs'
import { hostname } from 'node:os'
import { openTransport } from './transport-open'
import { hostPlace, type RemoteRoute } from './transport'
import { WorkerRuntime } from './runtime'
import { DEFAULT_REDIS_PREFIX, MAX_REDIS_PREFIX_CHARS, redactedUrl, redisPrefixRefusal, redisUrlProblem } from '../src-shared/redis-streams'
import { checkToken, resolveClientTarget } from '../src-shared/client-target'
import { checkActorName, ConfigError, emptyListProblem, envSetting, parseFlags, runClient, TARGET_HELP, watchClosedOutput, wholeNumber } from '../src-shared/command-line'
import { limitRetryLines } from '../src-shared/log-limiter'
import { EXEC_ALLOW_RULE, execAllowEntries, relativeExecEntry } from '../src-shared/exec-allow'
import { type WriteAllow, writeAllowEntries, writeAllowProblem } from '../src-shared/write-allow'
import { DEFAULT_WORKER_CONCURRENCY, HANDLER_LOAD_TIMEOUT_MS, MAX_STREAMS, MAX_WORKER_CONCURRENCY, QueueName } from '../src-shared/worker-exchange'
import { isLocalWorkerId, localWorkerIdRefused } from '../src-shared/local-worker-id'

export const WORKER_HELP = `Usage: leasehold worker [flags]

Runs jobs for a Leasehold host over HTTP (the worker API): the same runtime as the host's local
workers, anywhere that can reach the host. With --redis it needs no connection to the host at
all: the same exchange is carried over Redis Streams to a host started with serve --redis
(docs/redis.md); --token (or LEASEHOLD_TOKEN) is then required, and --url is not used.

Flags:
${TARGET_HELP}
  --redis URL          talk to the host through this Redis only (env LEASEHOLD_REDIS, which a
                       --url flag overrides; --redis and --url do not go together):
                       redis://[user:password@]host[:port][/db], rediss:// for TLS
  --redis-prefix P     the host's --redis-prefix (env LEASEHOLD_REDIS_PREFIX), at most 100
                       characters, without * ? [ ] or \\
                       [leasehold:]
  --streams a,b        streams (job queues) to take jobs from, in priority order [default]
  --concurrency N      jobs at once (1–${MAX_WORKER_CONCURRENCY}), sharing up to 4 handler threads [${DEFAULT_WORKER_CONCURRENCY}]
  --gpu                this worker has a GPU: it is given jobs submitted with
                       constraints.gpu_required, which a worker without the flag never is
  --handlers DIR       a folder of user handlers (*.mjs exporting {type, run}); one that is
                       missing or not a folder is reported as a handler that did not load, and
                       so is a module that throws, exports a job type the host refuses, or has
                       not loaded within ${HANDLER_LOAD_TIMEOUT_MS / 1000} s: it is skipped, and the others run
  --exec-allow P,Q     programs the exec handler may run (none by default: no exec jobs are taken): absolute paths, or
                       bare names looked up in this worker's own PATH, never the job's; a
                       relative path (bin/x) is refused. A job's env may not set the variables
                       that choose which code runs (PATH, LD_*, BASH_ENV, …: docs/workers.md).
                       An entry allows what its arguments can make the program do: list a
                       script of yours with fixed arguments, not a general tool (git, tar)
  --write-allow F,G    the folders file.write may write under: absolute paths, the file a
                       write lands in judged with its links followed; none: no file.write at
                       all (its jobs fail as write_not_allowed). Without it, anywhere this
                       worker's user may write: whoever may submit jobs to the host can then
                       write any file of that user's (~/.bashrc, ~/.ssh/authorized_keys).
                       Give it on every worker on another machine than the host's
  --worker-id ID       this worker's name [<hostname>-<pid>]; not local-<slot>.<generation>,
                       the names the host's own local workers have
  --grace-s S          on SIGTERM, SIGINT, SIGHUP or a refusal, how long running jobs may finish before they are failed as retryable (a second Ctrl-C ends it) [10]
  -h, --help

It runs until SIGTERM, SIGINT or SIGHUP (exit status 0), or until the host refuses it: a token it does
not know or has revoked, no worker API at --url (a server there that is not Leasehold: an answer
not JSON, or a 405 or 501 without Leasehold's {detail, code}), or a claim it finds invalid (a host
of another version) (exit status 1, with the host's reason). A worker that cannot run — a handler thread
that ends before it is ready, as one out of file descriptors does loading its modules — exits
at once, status 1, with the error, having stopped whatever it started. Refused, it sends the host nothing more:
running jobs get --grace-s, and their reports are dropped, counted in one line. A host or a
Redis that does not answer is retried; the line that says so is printed at most once a minute for
each kind of fault, with the count of those held back.`

export interface WorkerFlags {
  url?: string
  token?: string
  'data-dir'?: string
  streams?: string
  concurrency?: string
  handlers?: string
  'exec-allow'?: string
  'write-allow'?: string
  'worker-id'?: string
  'grace-s'?: string
  redis?: string
  'redis-prefix'?: string
  gpu?: boolean
}

const list = (value: string | undefined): string[] => (value ?? '').split(',').map((s) => s.trim()).filter(Boolean)

export function parseWorkerArgs(argv: string[]): WorkerFlags {
  return parseFlags<WorkerFlags>(argv, ['streams', 'concurrency', 'handlers', 'exec-allow', 'write-allow', 'worker-id', 'grace-s', 'redis', 'redis-prefix'], ['gpu'])
}

/** Over Redis the worker names no host: its token is all it needs of one (a URL only to say where it takes jobs from). */
function redisTarget(url: string, flags: WorkerFlags, env: NodeJS.ProcessEnv): { url: string; token: string; tokenSource: string } {
  const token = flags.token ?? envSetting(env, 'LEASEHOLD_TOKEN')
  if (!token) throw new ConfigError('--redis needs --token (or LEASEHOLD_TOKEN): the host checks it on every request')
  const tokenSource = flags.token !== undefined ? '--token' : 'LEASEHOLD_TOKEN'
  checkToken(tokenSource, token)
  return { url: redactedUrl(url), token, tokenSource }
}

/**
 * The Redis the worker talks through, if any: `--redis`, else LEASEHOLD_REDIS unless a `--url`
 * flag names the host (a flag beats a variable, as everywhere), with its key prefix:
 * `--redis-prefix`, else LEASEHOLD_REDIS_PREFIX (what serve reads: a worker on another prefix
 * than its host's is only ever unanswered), else the default.
 */
function redisRoute(flags: WorkerFlags, env: NodeJS.ProcessEnv): { url: string; prefix: string } | null {
  if (flags.redis !== undefined && flags.url !== undefined) throw new ConfigError('--redis and --url: give one (--redis reaches the host through Redis only)')
  const url = flags.redis ?? (flags.url === undefined ? envSetting(env, 'LEASEHOLD_REDIS') : undefined)
  if (url === undefined) return null
  const urlProblem = redisUrlProblem(url)
  if (urlProblem !== null) throw new ConfigError(`${flags.redis !== undefined ? '--redis' : 'LEASEHOLD_REDIS'} ${urlProblem} (got ${JSON.stringify(url)})`)
  const prefix = flags['redis-prefix'] ?? envSetting(env, 'LEASEHOLD_REDIS_PREFIX') ?? DEFAULT_REDIS_PREFIX
  const source = flags['redis-prefix'] !== undefined ? '--redis-prefix' : 'LEASEHOLD_REDIS_PREFIX'
  if (prefix.length > MAX_REDIS_PREFIX_CHARS) throw new ConfigError(`${source} must be at most ${MAX_REDIS_PREFIX_CHARS} characters (got ${prefix.length})`)
  // As serve refuses it: no host can be on such a prefix, and the worker's requests would wait unread.
  const refusal = redisPrefixRefusal(prefix)
  if (refusal !== null) throw new ConfigError(`${source} ${refusal} (got ${JSON.stringify(prefix)})`)
  return { url, prefix }
}

/** `leasehold worker`: an external worker until SIGTERM/SIGINT, then a drain. */
export async function workerCommand(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const flags = parseWorkerArgs(argv)
  // The flags' values are checked before the host is looked for: a usage error is said as one.
  const concurrency = wholeNumber('concurrency', flags.concurrency, 1, MAX_WORKER_CONCURRENCY) ?? DEFAULT_WORKER_CONCURRENCY
  const graceS = wholeNumber('grace-s', flags['grace-s'], 0, 3600) ?? 10
  const workerId = flags['worker-id'] ?? `${hostname()}-${process.pid}`
  // Refused here as the host would refuse its every request, said before it starts.
  checkActorName('worker-id', workerId)
  if (isLocalWorkerId(workerId)) throw new ConfigError(`--worker-id: ${localWorkerIdRefused(workerId)}`)
  if (flags.streams !== undefined && list(flags.streams).length === 0) throw new ConfigError('--streams needs at least one queue name (leave it out for the default queue)')
  const streams = flags.streams === undefined ? ['default'] : list(flags.streams)
  const emptyExecAllow = emptyListProblem(flags['exec-allow'] ?? '', 'program')
  if (emptyExecAllow !== null) throw new ConfigError(`--exec-allow ${emptyExecAllow} (got ${JSON.stringify(flags['exec-allow'])})`)
  const execAllow = execAllowEntries(flags['exec-allow'] ?? '')
  const relative = relativeExecEntry(execAllow)
  if (relative !== undefined) throw new ConfigError(`--exec-allow ${EXEC_ALLOW_RULE(relative)}`)
  const writeAllow = writeAllowFlag(flags['write-allow'])
  checkStreams(streams)
  const redis = redisRoute(flags, env)
  const target = redis ? redisTarget(redis.url, flags, env) : await resolveClientTarget(flags, env)
  const log = limitRetryLines((line: string) => console.error(line))
  const route: RemoteRoute = redis ? { via: 'redis', url: redis.url, token: target.token, prefix: redis.prefix } : { via: 'http', url: target.url, token: target.token }
  // It stops once, on SIGTERM/SIGINT/SIGHUP (exit status 0) or when the host refuses it (1),
  // letting running jobs finish for --grace-s either way.
  let stopping = false
  let exit!: (code: number) => void
  const stopped = new Promise<number>((resolve) => (exit = resolve))
  const stop = (code: number) => {
    if (stopping) return
    stopping = true
    log(`leasehold worker: stopping; running jobs have ${graceS} s to finish`)
    runtime.stop(graceS * 1000).then(() => exit(code), () => exit(1))
  }
  // A signal again while it stops never kills it: a worker gone at once would leave its exec
  // programs running (nothing else knows them). A SIGTERM or SIGHUP again is ignored (process
  // managers, and a closing terminal with its shell, send two); a second Ctrl-C ends the grace:
  // the running jobs are stopped now, their programs with them.
  const signalled = (signal: 'SIGTERM' | 'SIGINT' | 'SIGHUP') => {
    if (!stopping) return stop(0)
    if (signal !== 'SIGINT') return log(`leasehold worker: ${signal} again: already stopping`)
    log('leasehold worker: SIGINT again: stopping the running jobs now')
    void runtime.stop(0)
  }
  const runtime = new WorkerRuntime({
    transport: await openTransport(route, workerId, undefined, log),
    // The first handler thread claims, runs and reports its jobs over a transport of its own (driver.ts).
    drive: route,
    workerId,
    streams,
    concurrency,
    gpu: flags.gpu === true,
    handlers: { handlersDir: flags.handlers ?? null, execAllow, execAllowSetBy: 'leasehold worker --exec-allow', writeAllow, writeAllowSetBy: 'leasehold worker --write-allow' },
    log,
    tokenSource: target.tokenSource,
    onRefused: () => stop(1),
    onProblem: (problem) => void reportProblem(problem),
  })
  /** A handler module that did not load, or whose threads die as it loads (the runtime's onProblem): logged, and reported to the host. */
  async function reportProblem(problem: { file: string; error: string }): Promise<void> {
    log(`leasehold worker: handler ${problem.file} did not load: ${problem.error}`)
    const reporter = await openTransport(route, workerId)
    await reporter.report({ worker_id: workerId, kind: 'handler_load_failed', detail: `${problem.file}: ${problem.error}` }).catch(() => {})
    reporter.close()
  }
  const { types, problems } = await runtime.start()
  const missing = missingHandlersDir(flags.handlers)
  for (const problem of missing ? [missing, ...problems] : problems) await reportProblem(problem)
  // The signal handlers go in before the "taking" line: whoever reads that line may stop the
  // worker at once, and a SIGTERM with no handler yet would kill it without its drain. SIGHUP
  // (its terminal closed) stops it as SIGTERM does.
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(signal, () => signalled(signal))
  runtime.begin()
  // Over Redis the prefix too: a worker on another prefix than its host's is only ever unanswered.
  console.log(`leasehold worker ${workerId} taking ${types.join(', ')} from ${hostPlace(route)}`)
  return stopped
}

/**
 * Where file.write may write (src-shared/write-allow.ts): the folders of `--write-allow`, none,
 * or anywhere without the flag. Like --exec-allow, it has no variable: serve's
 * LEASEHOLD_WRITE_ALLOW, set for the host's local workers, is not this command's.
 */
function writeAllowFlag(value: string | undefined): WriteAllow {
  const entries = writeAllowEntries(value)
  const problem = value === undefined ? null : writeAllowProblem(value, entries)
  if (problem !== null) throw new ConfigError(`--write-allow ${problem} (got ${JSON.stringify(value)})`)
  return entries
}

/** The queues of --streams, held to the names a claim may carry (the host would refuse the first claim). */
function checkStreams(streams: string[]): void {
  if (streams.length > MAX_STREAMS) throw new ConfigError(`--streams names at most ${MAX_STREAMS} queues (got ${streams.length})`)
  for (const stream of streams) {
    const problem = QueueName.safeParse(stream).error?.issues[0]
    if (problem) throw new ConfigError(`--streams: ${JSON.stringify(stream.length > 40 ? `${stream.slice(0, 40)}…` : stream)} is not a queue name: ${problem.message}`)
  }
}

/**
 * A --handlers folder that is not there, as a handler that did not load. The loader skips a
 * missing folder without a word (a local worker's default folder need not exist), but one the
 * user named and mistyped must not pass for a folder with no handlers in it.
 */
function missingHandlersDir(dir: string | undefined): { file: string; error: string } | null {
  if (dir === undefined) return null
  try {
    statSync(dir)
    return null
  } catch (error) {
    const e = error as NodeJS.ErrnoException
    return e.code === 'ENOENT' ? { file: dir, error: `ENOENT: no such folder, ${dir}` } : null
  }
}

/**
 * The worker program's command line: `leasehold worker …` and `leasehold help worker`.
 * bin/leasehold.js hands these to it, and every other command to the host's (src-main/cli.ts).
 */
export async function main(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const [command, ...rest] = argv
  // A worker runs jobs: nobody reading what it prints is no reason to stop them.
  watchClosedOutput('ignore')
  if (command === 'help' || rest.includes('-h') || rest.includes('--help')) {
    console.log(WORKER_HELP)
    return 0
  }
  return runClient(() => workerCommand(rest, env))
}
