/**
 * A local worker process, started by the host's pool (child_process.fork under Node, Electron's
 * utilityProcess in the desktop app). Its settings come in LEASEHOLD_WORKER_* variables.
 */
import { IpcTransport, processChannel } from './transport-ipc'
import { WorkerRuntime } from './runtime'
import { LINK_PATH_ENV, LINK_TOKEN_ENV } from '../src-shared/thread-link'
import { limitRetryLines } from '../src-shared/log-limiter'
import { ExecGroupWatch } from './exec-groups'
import { MAX_BODY_LIMIT_BYTES } from '../src-shared/limits'
import { writeAllowFromVariable } from '../src-shared/write-allow'

/** A whole number of at least 1 from the environment, or the default. */
function wholeNumberFrom(value: string | undefined, fallback: number): number {
  const n = Number(value)
  return Number.isSafeInteger(n) && n >= 1 ? n : fallback
}

const env = process.env
const workerId = env.LEASEHOLD_WORKER_ID ?? `local-${process.pid}`
// The driving thread's link to the host (src-shared/thread-link.ts). The token is taken out of the
// environment before any thread starts: handlers have no use for it.
const linkPath = env[LINK_PATH_ENV]
const linkToken = env[LINK_TOKEN_ENV]
delete env[LINK_TOKEN_ENV]
const channel = processChannel()
const transport = new IpcTransport(channel, (command) => {
  if (command.type === 'drain') {
    endBy({ by: 'drain' })
    void runtime.stop(command.grace_ms).then(() => process.exit(0))
  }
})
const runtime = new WorkerRuntime({
  transport,
  workerId,
  streams: (env.LEASEHOLD_WORKER_STREAMS ?? 'default').split(',').filter(Boolean),
  concurrency: wholeNumberFrom(env.LEASEHOLD_WORKER_CONCURRENCY, 1), // the host always says (--worker-concurrency)
  gpu: env.LEASEHOLD_WORKER_GPU === 'true', // serve --worker-gpu
  handlers: {
    handlersDir: env.LEASEHOLD_WORKER_HANDLERS || null,
    execAllow: (env.LEASEHOLD_WORKER_EXEC_ALLOW ?? '').split(',').filter(Boolean),
    execAllowSetBy: "the host's --exec-allow, or LEASEHOLD_EXEC_ALLOW",
    writeAllow: writeAllowFromVariable(env.LEASEHOLD_WORKER_WRITE_ALLOW),
    writeAllowSetBy: "the host's --write-allow, or LEASEHOLD_WRITE_ALLOW",
    nice: Number(env.LEASEHOLD_WORKER_NICE ?? 0) || 0,
    maxReportBytes: wholeNumberFrom(env.LEASEHOLD_WORKER_BODY_LIMIT, MAX_BODY_LIMIT_BYTES), // the host's --body-limit
  },
  // Retry lines at most once a minute per fault (a full disk answers every exchange with 507).
  log: limitRetryLines((line) => console.error(line)),
  drive: linkPath && linkToken ? { via: 'link', path: linkPath, token: linkToken } : undefined,
  // A host that refuses this process (none should: nothing revokes a local worker's link) sees it
  // exit, and its pool starts another.
  onRefused: () => void runtime.stop(0).then(() => process.exit(1)),
  onProblem: (problem) => void reportProblem(problem),
})

// The host is told of each exec program's process group, to end those this worker leaves
// running should it die (src-worker/exec-groups.ts).
const execGroups = new ExecGroupWatch((notice) => {
  if (process.connected !== false) channel.send(notice)
})

// A worker outlives its host only as an orphan holding nothing: when the host goes (even killed
// with SIGKILL), the IPC channel closes and the worker ends; its leases expire on the host's side.
// Its exec programs end first: nothing else is left that knows them.
function hostGone(): void {
  endBy({ by: 'host_gone' })
  void execGroups.endAll().finally(() => process.exit(1))
}
process.on('disconnect', hostGone)
// A send to a host that is gone fails (EPIPE) as an 'error' of the process, and may come before
// the channel's close is seen (a worker stopped while its host died sends what waited as soon as
// it runs again): dropped, not a crash before the programs end. The close follows.
process.on('error', () => {})

// SIGHUP and SIGINT reach a local worker only with its host: sent to the whole process group, by
// a terminal that closes (and the shell it ran) or by Ctrl-C. The host takes them as a stop and
// drains its workers; a worker that died of one would leave its jobs' attempts charged and, its
// host dying with it, its exec programs running. So the worker lets its host stop it, and if its
// host is gone (a stopped worker whose host was killed is sent SIGHUP by the kernel) it ends its
// programs as the channel's close above has it.
for (const signal of ['SIGHUP', 'SIGINT'] as const) process.on(signal, () => {})

/**
 * How long a local worker sent SIGTERM waits for its host's drain before it dies of the signal.
 * A host sends the drain in the turn it takes its own SIGTERM (pool/supervisor.ts `stop`), so a
 * SIGTERM to both comes with a drain within the host's event-loop delay and the message's trip:
 * milliseconds, a few hundred on a loaded machine. A SIGTERM meant for the worker alone costs it
 * only this long.
 */
const HOST_DRAIN_WAIT_MS = 500

/**
 * How this worker is ending, if it is: drained by its host; sent SIGTERM, waiting to learn whether
 * its host stops too; or its host gone.
 */
type Ending = { by: 'drain' } | { by: 'SIGTERM'; timer: NodeJS.Timeout } | { by: 'host_gone' }
let ending: Ending | null = null

/** The worker ends as `next` has it; a SIGTERM's wait for the drain is over either way. */
function endBy(next: Ending): void {
  if (ending?.by === 'SIGTERM') clearTimeout(ending.timer)
  ending = next
}

// SIGTERM comes from one of two senders, told apart only by whether the host's drain follows. A
// stop of the host's whole process group or control group (`systemctl stop` with systemd's default
// KillMode=control-group, `kill -- -PGID`, `timeout`) signals the host too, which drains its
// workers: a worker that died of it would leave its jobs' attempts charged (`worker_exited`)
// instead of given back. A `kill` of this worker alone must still end it, as SIGTERM's default
// does: its host then ends its exec programs, expires its leases and starts another (the worker
// leaves its programs to the host, which hears of its exit at once: ended from here, a program's
// death would be reported as its job's failure). A SIGTERM while the worker drains or its host is
// gone changes nothing: its host kills a worker still draining after the grace.
process.on('SIGTERM', () => {
  if (ending) return
  const timer = setTimeout(() => {
    process.removeAllListeners('SIGTERM')
    process.kill(process.pid, 'SIGTERM')
  }, HOST_DRAIN_WAIT_MS)
  endBy({ by: 'SIGTERM', timer })
})

// A host gone while this code loaded (a pool stopped as it started its workers) closed the channel
// before anyone listened: told to nobody, the worker would run on for ever, an orphan.
if (process.connected === false) hostGone()

/** A handler module that did not load, or whose threads die as it loads (the runtime's onProblem): logged, and reported to the host. */
async function reportProblem(problem: { file: string; error: string }): Promise<void> {
  console.error(`leasehold worker ${workerId}: handler ${problem.file} did not load: ${problem.error}`)
  await transport.report({ worker_id: workerId, kind: 'handler_load_failed', detail: `${problem.file}: ${problem.error}` }).catch(() => {})
}

const { types, problems } = await runtime.start()
for (const problem of problems) await reportProblem(problem)
channel.send({ type: 'ready', worker_id: workerId, types })
runtime.begin()
