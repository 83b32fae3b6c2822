/**
 * A handler thread: runs job handlers away from the runtime's thread, so a handler that computes
 * (or blocks) for a long time cannot starve the heartbeats. Several jobs may run in one thread at
 * once (handlers are async); each has its own AbortSignal.
 */
import { rename, rm } from 'node:fs/promises'
import { inspect } from 'node:util'
import { parentPort, workerData } from 'node:worker_threads'
import { attemptErrorOf } from './attempt-error'
import { NotRegularFileError, writeRegularFile } from '../src-shared/regular-file'
import { GateRefusal, gatePath, shownPath } from './gate-path'
import type { GatedFiles, HandlerContext, JobInfo } from './handler-api'
import { failureOf, progressOf, resultOf } from './handler-output'
import { RunLog } from './run-log'
import { type HandlerOptions, loadHandlers } from './handlers'
import { type DriveAddress, Driver, type DriverDeps } from './driver'
import { lowerPriority } from './niceness'
import { type FromThread, jobInfo, MessageBatch, type RunProgress, type ToThread } from './thread-protocol'
import { type AttemptError, HostContact, reachedAgainLine } from './transport'
import { LinkTransport } from './transport-link'
import { openTransport } from './transport-open'

const port = parentPort!
/** The thread's own claims, when it drives them (the worker's first thread: driver.ts). */
let driver: Driver | null = null
/** The runtime has said to begin claiming (it may say so before the thread can drive). */
let begun = false
/** The runtime has said to drain, or that the host refuses the worker: said before the thread could drive, it is told the driver once there is one. */
let told: 'drain' | 'refused' | null = null
/** How long a batch may wait while a handler keeps the thread busy (see MessageBatch). */
const MAX_BATCH_AGE_MS = 20
/**
 * The progress each run reported since the last batch went, not sent yet: a run's calls in one
 * turn go as one message (the last fraction, the last note), or with its end if it ends then.
 */
const unsentProgress = new Map<number, RunProgress>()
/** A run's end waits in the batch (see {@link endsOut}). */
let endPending = false
const batch = new MessageBatch<FromThread>(
  (messages) => {
    endPending = false
    for (const [run, { fraction, note }] of unsentProgress) {
      if (driver?.holds(run)) continue // its progress goes with its end (driver.ts)
      messages.push({ type: 'progress', run, fraction, note })
      unsentProgress.delete(run)
    }
    if (messages.length > 0) post(messages)
  },
  setImmediate,
  MAX_BATCH_AGE_MS,
)

function post(messages: FromThread[]): void {
  try {
    port.postMessage(messages)
  } catch {
    // Something a handler gave cannot be cloned (a result is plain JSON by now: handler-output.ts).
    // Each message goes alone: a result that cannot go fails its own job, and the batch's other
    // jobs are unaffected; another message that cannot go is dropped.
    for (const message of messages) {
      try {
        port.postMessage([message])
      } catch (error) {
        if (message.type === 'done') port.postMessage([{ type: 'failed', run: message.run, error: attemptErrorOf(error) }])
      }
    }
  }
}
const send = (message: FromThread) => batch.send(message)

function progress(run: number, fraction: number | null, note: string | null): void {
  const unsent = unsentProgress.get(run)
  if (!unsent) unsentProgress.set(run, { fraction, note })
  else {
    if (fraction !== null) unsent.fraction = fraction
    if (note !== null) unsent.note = note
  }
  batch.touch()
}

/** The run's progress not sent yet, to go with its end. */
function takeProgress(run: number): { progress?: RunProgress } {
  const unsent = unsentProgress.get(run)
  if (!unsent) return {}
  unsentProgress.delete(run)
  return { progress: unsent }
}

/**
 * How this thread reaches the host, when it is to drive its own jobs. Taken out of workerData
 * before any handler loads: handlers have no use for its token.
 */
const address = (workerData as { drive?: DriveAddress }).drive
delete (workerData as { drive?: DriveAddress }).drive
// Before the handlers' own code runs.
if (!address) yieldCpu()
const { handlers, problems, fileOf } = await loadHandlers(workerData as HandlerOptions)
/** The largest result or error a run may report (handlers/index.ts, HandlerOptions.maxReportBytes). */
const maxReportBytes = (workerData as HandlerOptions).maxReportBytes
/** The runs in progress, by run number: how to abort each. */
const runs = new Map<number, RunStop>()
let nextGateId = 1
const gates = new Map<number, { resolve(): void; reject(error: Error): void }>()

/**
 * Error thrown into a handler when the gate halts its job (the host has made it BLOCKED), or
 * refuses its path for good (`retryable: false`: the attempt fails at once, not retried).
 */
class GateError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly retryable = true,
  ) {
    super(message)
    this.name = 'GateError'
  }
}

/**
 * Why a run's signal fired (`signal.reason`): its message is the stop's reason — `canceled`,
 * `max_runtime`, `lease_lost` or `shutdown` — and a handler that rethrows it fails as `aborted`.
 */
class JobStopped extends Error {
  readonly code = 'aborted'
  constructor(reason: string) {
    super(reason)
    this.name = 'JobStopped'
  }
}

function gate(run: number, file: string): Promise<void> {
  driver?.giveToRuntime(run) // the runtime keeps the gate, and the job while it holds files
  const id = nextGateId++
  return new Promise((resolve, reject) => {
    gates.set(id, { resolve, reject })
    send({ type: 'gate', run, id, file })
  })
}

/**
 * The gated file API of one run: its writes pass the gate under its job, asked for the file the
 * kernel will change (gate-path.ts): a write's target, past any symlink; the entry itself for
 * `rm` and `rename`, which act on a link, not on what it names.
 */
function filesOf(run: number): GatedFiles {
  return {
    async writeFile(path, data) {
      await gate(run, await gatePath(path, true))
      await writeRegular(path, data, false)
    },
    async appendFile(path, data) {
      await gate(run, await gatePath(path, true))
      await writeRegular(path, data, true)
    },
    async rm(path, options) {
      await gate(run, await gatePath(path, false))
      await rm(path, options)
    },
    async rename(from, to) {
      await gate(run, await gatePath(from, false))
      await gate(run, await gatePath(to, false))
      await rename(from, to)
    },
  }
}

/**
 * A write of `files.*`: to a regular file only. A FIFO, a socket or a device is refused at once,
 * not retryable (the next attempt finds the same file): a FIFO's opening would wait for a reader
 * beyond any cancel, holding a thread every later file write of the process needs
 * (regular-file.ts). It is made under the file's lease, the gate passed just before (`leased`:
 * a write that replaces the file clears what writes of it ended midway left beside it).
 */
async function writeRegular(path: string, data: string | Uint8Array, append: boolean): Promise<void> {
  try {
    await writeRegularFile(path, data, append, true)
  } catch (error) {
    if (!(error instanceof NotRegularFileError)) throw error
    throw new GateRefusal(error.code, `${shownPath(path)} is not written: ${error.message}, and files.* writes only regular files`)
  }
}

/**
 * How a run is told to stop. Its AbortSignal is made when the handler first reads `ctx.signal`
 * (an AbortController costs more than the rest of a no-op job's run); a run told to stop before
 * that gets a signal already aborted, with the same reason.
 */
class RunStop {
  private controller: AbortController | null = null
  private stopped: { reason: unknown } | null = null

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController()
      if (this.stopped) this.controller.abort(this.stopped.reason)
    }
    return this.controller.signal
  }

  abort(reason: unknown): void {
    if (this.controller) this.controller.abort(reason)
    else this.stopped ??= { reason }
  }
}

/**
 * What a handler gets. `progress` and `log` are its own functions (a handler may destructure
 * them); `signal` and `files` are getters that make them when first read (so a copy made by
 * spreading `ctx` has neither).
 */
class RunContext implements HandlerContext {
  readonly progress: HandlerContext['progress']
  readonly log: HandlerContext['log']
  readonly #run: number
  readonly #stop: RunStop
  readonly #lines: RunLog
  #files: GatedFiles | null = null

  constructor(
    readonly job: JobInfo,
    readonly payload: unknown,
    run: number,
    stop: RunStop,
  ) {
    this.#run = run
    this.#stop = stop
    this.progress = (fraction, note) => {
      const checked = progressOf(fraction, note)
      progress(run, checked.fraction, checked.note)
    }
    this.#lines = new RunLog((line) => send(driver?.claimed(run) ? { type: 'line', line: driver.logLine(run, line) } : { type: 'log', run, line }))
    this.log = (value) => this.#lines.line(logLineOf(value))
  }

  /** Says how many of the run's log lines were dropped (run-log.ts), before its end is sent. */
  endLog(): void {
    this.#lines.flush()
  }

  get signal(): AbortSignal {
    return this.#stop.signal
  }

  get files(): GatedFiles {
    return (this.#files ??= filesOf(this.#run))
  }
}

/**
 * What `ctx.log` writes of a value: a string as it is, anything else as util.inspect shows it,
 * on one line (`{ a: 1 }`, not `[object Object]`), as console.log would.
 */
function logLineOf(value: unknown): string {
  return typeof value === 'string' ? value : inspect(value, { breakLength: Number.POSITIVE_INFINITY })
}

async function runJob(run: number, job: JobInfo, payload: unknown): Promise<void> {
  const stop = new RunStop()
  runs.set(run, stop)
  const handler = handlers.get(job.type)
  const context = new RunContext(job, payload, run, stop)
  try {
    if (!handler) throw Object.assign(new Error(`No handler for job type "${job.type}"`), { code: 'no_handler', retryable: false })
    const value = await handler.run(context)
    context.endLog()
    end(run, resultOf(value, maxReportBytes))
  } catch (error) {
    context.endLog()
    end(run, { ok: false, error: attemptErrorOf(error) })
  } finally {
    runs.delete(run)
  }
}

/** A run has ended: the driving thread reports its own jobs; the runtime is told of the others. */
function end(run: number, ended: { ok: true; result: unknown } | { ok: false; error: AttemptError }): void {
  const outcome = ended.ok ? ended : { ok: false as const, error: failureOf(ended.error, maxReportBytes) }
  const progress = takeProgress(run)
  if (driver?.claimed(run) && driver.ended(run, outcome, progress.progress)) return
  send(outcome.ok ? { type: 'done', run, result: outcome.result, ...progress } : { type: 'failed', run, error: outcome.error, ...progress })
  endPending = true
}

function receive(message: ToThread): void {
  if (message.type === 'run') void runJob(message.run, message.job, message.payload)
  else if (message.type === 'abort') runs.get(message.run)?.abort(new JobStopped(message.reason))
  else if (message.type === 'gate-answer') {
    const waiter = gates.get(message.id)
    gates.delete(message.id)
    if (message.error) waiter?.reject(new GateError(message.error.code, message.error.message, message.error.retryable !== false))
    else waiter?.resolve()
  } else if (message.type === 'freed') driver?.freed(message.job_type, message.ms)
  else if (message.type === 'ping') send({ type: 'pong' })
  else if (message.type === 'begin') {
    begun = true
    driver?.pump()
  }
  else if (message.type === 'drain' || message.type === 'refused') {
    if (told !== 'refused') told = message.type
    if (message.type === 'drain') driver?.drain()
    else driver?.refused()
  }
}

/** Messages from the runtime not handled yet, in order: a message's runs start one after another (see {@link endsOut}). */
const inbox: ToThread[] = []
let reading = false

port.on('message', (messages: ToThread[]) => {
  inbox.push(...messages)
  if (!reading) void readInbox()
})

/**
 * Handles the runtime's messages in order. A run starts only once the ends of the runs before it
 * have left the thread ({@link endsOut}); what comes after it waits its turn, so an abort or a
 * gate's answer never overtakes the run it is about.
 */
async function readInbox(): Promise<void> {
  reading = true
  let started = false
  while (inbox.length > 0) {
    const message = inbox.shift()!
    if (message.type === 'run') {
      await endsOut(started)
      started = true
    }
    receive(message)
  }
  reading = false
}

/** Microtask turns given to the runs started before the next: enough for a handler that returns, or awaits what is already there, to end. */
const SETTLE_TICKS = 8

/**
 * Before a run starts, the ends of the runs that have returned leave the thread at once, with
 * the batch they are in: a handler that computes without yielding holds its thread from its
 * start, and an end still in the batch then would stay in the thread — a job that had returned
 * would fail `thread_exited` once that thread is replaced (or run twice, with attempts left).
 * After runs started in the same turn (`settle`), their handlers' continuations run first (a few
 * microtask turns), so that those that return at once have ended. What it costs: a message of
 * runs that all return at once answers in one message per run instead of one in all; runs that
 * await anything (a timer, I/O) have not ended by then, and their ends still go together.
 */
async function endsOut(settle: boolean): Promise<void> {
  if (settle) for (let tick = 0; tick < SETTLE_TICKS; tick++) await null
  if (endPending) batch.flush()
}
// A message from the runtime that cannot be read here (a job to run, an abort, a gate's answer)
// would leave its jobs waiting for ever: the thread ends on it instead, naming it, and its jobs
// end as thread_exited (handler-thread-client.ts).
port.on('messageerror', (error) => {
  throw new Error(`a message from the worker's main thread could not be read (${error.message})`)
})

/**
 * Opens this thread's way to the host and its driver (driver.ts). Resolves with the driver, or
 * null when a local worker's link could not be opened: the runtime then claims, and jobs come
 * from it. Over HTTP or Redis nothing is opened that could fail here: an exchange the host does
 * not answer is sent again, as the runtime's would be.
 */
async function drive({ route, ...options }: DriveAddress): Promise<Driver | null> {
  const deps: Omit<DriverDeps, 'exchange'> = { start: (claim, run) => void runJob(run, jobInfo(claim), claim.payload), tell: send }
  const contact = new HostContact(reachedAgainLine(options.worker_id, route))
  if (route.via === 'link') {
    let linked: Driver | null = null
    const link = await LinkTransport.open({ path: route.path, token: route.token, thread: options.thread }, options.worker_id, () => {
      linked?.linkLost()
      yieldCpu()
    })
    if (!link) {
      yieldCpu()
      return null
    }
    return (linked = new Driver(options, { ...deps, exchange: (request, signal) => link.exchange(request, signal) }, contact))
  }
  const transport = await openTransport(route, options.worker_id, `thread-${options.thread}`)
  return new Driver(options, { ...deps, exchange: (request, signal) => transport.exchange(request, signal) }, contact)
}

/**
 * Handlers are background work: a thread lowers its priority to the niceness its worker was given
 * (docs/workers.md, "Yielding the CPU"), and so do the programs the exec handler starts from it.
 * All but the driving thread, which runs only jobs of types known to be short and is the thread a
 * granted job wakes: nicer than the host, it would wait on the host's core for the host's turn to
 * end before its job starts. It yields too once its link is gone and it is one thread among others.
 */
function yieldCpu(): void {
  const { nice } = workerData as HandlerOptions
  const failure = nice ? lowerPriority(nice) : null
  if (failure) console.error(`leasehold worker: a handler thread ${failure}`)
}

// Ready once it can drive (or cannot): a driving thread claims once the runtime says to begin.
driver = address ? await drive({ ...address, jobTypes: [...handlers.keys()] }) : null
send({ type: 'ready', types: [...handlers.keys()], fileOf, problems, driving: driver !== null })
if (told === 'drain') driver?.drain()
else if (told === 'refused') driver?.refused()
else if (begun) driver?.pump()
