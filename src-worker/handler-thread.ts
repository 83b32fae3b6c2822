/**
 * A handler thread: runs job handlers away from the runtime's thread, so a handler that computes
 * (or blocks) for a long time cannot starve the heartbeats. Several jobs may run in one thread at
 * once (handlers are async); each has its own AbortSignal.
 */
import { appendFile, rename, rm, writeFile } from 'node:fs/promises'
import { parentPort, workerData } from 'node:worker_threads'
import type { GatedFiles, HandlerContext, JobInfo } from './handler-api'
import { type HandlerOptions, loadHandlers } from './handlers'
import type { FromThread, ToThread } from './thread-protocol'

const port = parentPort!
const send = (message: FromThread) => port.postMessage(message)

const { handlers, problems } = await loadHandlers(workerData as HandlerOptions)
/** The runs in progress, by run number: how to abort each. */
const runs = new Map<number, AbortController>()
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

function describe(error: unknown) {
  const e = (error ?? {}) as { name?: string; code?: unknown; message?: unknown; stack?: unknown; retryable?: unknown }
  return {
    code: typeof e.code === 'string' ? e.code : e.name === 'AbortError' ? 'aborted' : 'handler_error',
    message: typeof e.message === 'string' ? e.message : String(error),
    stack: typeof e.stack === 'string' ? e.stack : undefined,
    retryable: e.retryable !== false,
  }
}

async function runJob(run: number, job: JobInfo, payload: unknown): Promise<void> {
  const abort = new AbortController()
  runs.set(run, abort)
  const handler = handlers.get(job.type)
  try {
    if (!handler) throw Object.assign(new Error(`No handler for job type "${job.type}"`), { code: 'no_handler', retryable: false })
    const ctx: HandlerContext = {
      job,
      payload,
      signal: abort.signal,
      progress: (fraction, note) => send({ type: 'progress', run, fraction, note: note ?? null }),
      log: (line) => send({ type: 'log', run, line: String(line) }),
      files: filesOf(run),
    }
    const result = await handler.run(ctx)
    send({ type: 'done', run, result: result === undefined ? null : result })
  } catch (error) {
    send({ type: 'failed', run, error: describe(error) })
  } finally {
    runs.delete(run)
  }
}

port.on('message', (message: ToThread) => {
  if (message.type === 'run') void runJob(message.run, message.job, message.payload)
  else if (message.type === 'abort') runs.get(message.run)?.abort(new GateError('aborted', message.reason))
  else if (message.type === 'gate-answer') {
    const waiter = gates.get(message.id)
    gates.delete(message.id)
    if (message.error) waiter?.reject(new GateError(message.error.code, message.error.message))
    else waiter?.resolve()
  }
})

send({ type: 'ready', types: [...handlers.keys()], problems })
