/**
 * A handler thread: runs job handlers away from the runtime's thread, so a handler that computes
 * (or blocks) for a long time cannot starve the heartbeats. Several jobs may run in one thread at
 * once (handlers are async); each has its own AbortSignal.
 */
import { appendFile, rename, rm, writeFile } from 'node:fs/promises'
import { connect } from 'node:net'
import { parentPort, workerData } from 'node:worker_threads'
import { attemptErrorOf } from './attempt-error'
import type { GatedFiles, HandlerContext, JobInfo } from './handler-api'
import { type HandlerOptions, loadHandlers } from './handlers'
import { lineReader } from '../src-shared/line-reader'
import { type LinkAddress, Mailbox } from './mailbox'
import { type FromThread, jobInfo, MessageBatch, type RunProgress, type ToThread } from './thread-protocol'
import type { Claim } from './transport'

const port = parentPort!
/** How long a batch may wait while a handler keeps the thread busy (see MessageBatch). */
const MAX_BATCH_AGE_MS = 20
/**
 * The progress each run reported since the last batch went, not sent yet: a run's calls in one
 * turn go as one message (the last fraction, the last note), or with its end if it ends then.
 */
const unsentProgress = new Map<number, RunProgress>()
const batch = new MessageBatch<FromThread>(
  (messages) => {
    for (const [run, { fraction, note }] of unsentProgress) messages.push({ type: 'progress', run, fraction, note })
    unsentProgress.clear()
    if (messages.length > 0) post(messages)
  },
  setImmediate,
  MAX_BATCH_AGE_MS,
)

function post(messages: FromThread[]): void {
  try {
    port.postMessage(messages)
  } catch {
    // Something a handler gave cannot be cloned (a function in its result, say). Each message
    // goes alone: a result that cannot go fails its own job, and the batch's other jobs are
    // unaffected; another message that cannot go is dropped.
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

const { handlers, problems } = await loadHandlers(workerData as HandlerOptions)
/** The runs in progress, by run number: how to abort each. */
const runs = new Map<number, RunStop>()
let nextGateId = 1
const gates = new Map<number, { resolve(): void; reject(error: Error): void }>()

/** Error thrown into a handler when the gate halts its job (the host has made it BLOCKED). */
class GateError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message)
    this.name = 'GateError'
  }
}

function gate(run: number, file: string): Promise<void> {
  const id = nextGateId++
  return new Promise((resolve, reject) => {
    gates.set(id, { resolve, reject })
    send({ type: 'gate', run, id, file })
  })
}

/** The gated file API of one run: its writes pass the gate under its job. */
function filesOf(run: number): GatedFiles {
  return {
    async writeFile(path, data) {
      await gate(run, path)
      await writeFile(path, data)
    },
    async appendFile(path, data) {
      await gate(run, path)
      await appendFile(path, data)
    },
    async rm(path, options) {
      await gate(run, path)
      await rm(path, options)
    },
    async rename(from, to) {
      await gate(run, from)
      await gate(run, to)
      await rename(from, to)
    },
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
  #files: GatedFiles | null = null

  constructor(
    readonly job: JobInfo,
    readonly payload: unknown,
    run: number,
    stop: RunStop,
  ) {
    this.#run = run
    this.#stop = stop
    this.progress = (fraction, note) => progress(run, fraction, note ?? null)
    this.log = (line) => send({ type: 'log', run, line: String(line) })
  }

  get signal(): AbortSignal {
    return this.#stop.signal
  }

  get files(): GatedFiles {
    return (this.#files ??= filesOf(this.#run))
  }
}

async function runJob(run: number, job: JobInfo, payload: unknown): Promise<void> {
  const stop = new RunStop()
  runs.set(run, stop)
  const handler = handlers.get(job.type)
  try {
    if (!handler) throw Object.assign(new Error(`No handler for job type "${job.type}"`), { code: 'no_handler', retryable: false })
    const result = await handler.run(new RunContext(job, payload, run, stop))
    send({ type: 'done', run, result: result === undefined ? null : result, ...takeProgress(run) })
  } catch (error) {
    send({ type: 'failed', run, error: attemptErrorOf(error), ...takeProgress(run) })
  } finally {
    runs.delete(run)
  }
}

function receive(message: ToThread): void {
  if (message.type === 'run') void runJob(message.run, message.job, message.payload)
  else if (message.type === 'abort') runs.get(message.run)?.abort(new GateError('aborted', message.reason))
  else if (message.type === 'gate-answer') {
    const waiter = gates.get(message.id)
    gates.delete(message.id)
    if (message.error) waiter?.reject(new GateError(message.error.code, message.error.message))
    else waiter?.resolve()
  }
}

port.on('message', (messages: ToThread[]) => {
  for (const message of messages) receive(message)
})

/** A link not up by then is given up on (a local socket connects at once, or fails at once). */
const LINK_CONNECT_TIMEOUT_MS = 2000

/** The run number of the next job that comes over the link: negative, apart from the runtime's. */
let nextLinkRun = -1

/**
 * An answer the host wrote to this thread's link. The runtime must know its jobs whatever their
 * handlers then do, to heartbeat them. An answer of one job that fits the mailbox is left there,
 * the job started, and the runtime told after (it also looks there on its own while it waits for
 * this thread: src-shared/thread-link.ts); any other goes to the runtime by message before its jobs run.
 */
function receiveFromLink(line: string, mailbox: Mailbox): void {
  let response: { result?: { jobs?: unknown } }
  try {
    response = JSON.parse(line)
  } catch {
    return // not an answer: the host writes nothing else
  }
  const jobs = Array.isArray(response?.result?.jobs) ? (response.result.jobs as Claim[]) : []
  const runs = jobs.map(() => nextLinkRun--)
  batch.flush() // what the thread said before goes first
  const mailed = jobs.length === 1 && mailbox.put(line, runs[0]!)
  if (!mailed) post([{ type: 'delivered', response, runs }])
  jobs.forEach((claim, i) => void runJob(runs[i]!, jobInfo(claim), claim.payload))
  if (mailed) post([{ type: 'mail' }])
}

/**
 * Opens the thread's own link to the host (src-shared/thread-link.ts). Resolves once it is up (true) or
 * could not be opened (false): without one, jobs come from the runtime only.
 */
function link({ path, token, worker_id, thread, mailbox }: LinkAddress & { mailbox: SharedArrayBuffer }): Promise<boolean> {
  const socket = connect(path)
  let up = false
  socket.setEncoding('utf8')
  const shared = new Mailbox(mailbox)
  const read = lineReader((line) => receiveFromLink(line, shared))
  socket.on('data', (chunk: string) => read.push(chunk))
  socket.on('error', () => {}) // 'close' follows
  const giveUp = setTimeout(() => socket.destroy(), LINK_CONNECT_TIMEOUT_MS)
  return new Promise((resolve) => {
    socket.on('connect', () => {
      clearTimeout(giveUp)
      up = true
      socket.write(`${JSON.stringify({ worker_id, thread, token })}\n`)
      resolve(true)
    })
    socket.on('close', () => {
      clearTimeout(giveUp)
      if (up) send({ type: 'unlinked' })
      resolve(false)
    })
  })
}

// Ready once linked (or not): the runtime's first claim can then name this thread.
const address = (workerData as { link?: LinkAddress & { mailbox: SharedArrayBuffer } }).link
const linked = address ? await link(address) : false
send({ type: 'ready', types: [...handlers.keys()], problems, linked })
