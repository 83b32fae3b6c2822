/**
 * A handler thread: runs one job's handler at a time, away from the runtime's thread, so a
 * handler that computes (or blocks) for a long time cannot starve the heartbeats.
 */
import { appendFile, rename, rm, writeFile } from 'node:fs/promises'
import { parentPort, workerData } from 'node:worker_threads'
import type { GatedFiles, HandlerContext, JobInfo } from './handler-api'
import { type HandlerOptions, loadHandlers } from './handlers'
import type { FromThread, ToThread } from './thread-protocol'

const port = parentPort!
const send = (message: FromThread) => port.postMessage(message)

const { handlers, problems } = await loadHandlers(workerData as HandlerOptions)
let abort: AbortController | null = null
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

function gate(file: string): Promise<void> {
  const id = nextGateId++
  return new Promise((resolve, reject) => {
    gates.set(id, { resolve, reject })
    send({ type: 'gate', id, file })
  })
}

const files: GatedFiles = {
  async writeFile(path, data) {
    await gate(path)
    await writeFile(path, data)
  },
  async appendFile(path, data) {
    await gate(path)
    await appendFile(path, data)
  },
  async rm(path, options) {
    await gate(path)
    await rm(path, options)
  },
  async rename(from, to) {
    await gate(from)
    await gate(to)
    await rename(from, to)
  },
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

async function run(job: JobInfo, payload: unknown): Promise<void> {
  abort = new AbortController()
  const handler = handlers.get(job.type)
  try {
    if (!handler) throw Object.assign(new Error(`No handler for job type "${job.type}"`), { code: 'no_handler', retryable: false })
    const ctx: HandlerContext = {
      job,
      payload,
      signal: abort.signal,
      progress: (fraction, note) => send({ type: 'progress', fraction, note: note ?? null }),
      log: (line) => send({ type: 'log', line: String(line) }),
      files,
    }
    const result = await handler.run(ctx)
    send({ type: 'done', result: result === undefined ? null : result })
  } catch (error) {
    send({ type: 'failed', error: describe(error) })
  } finally {
    abort = null
  }
}

port.on('message', (message: ToThread) => {
  if (message.type === 'run') void run(message.job, message.payload)
  else if (message.type === 'abort') abort?.abort(new GateError('aborted', message.reason))
  else if (message.type === 'gate-answer') {
    const waiter = gates.get(message.id)
    gates.delete(message.id)
    if (message.error) waiter?.reject(new GateError(message.error.code, message.error.message))
    else waiter?.resolve()
  }
})

send({ type: 'ready', types: [...handlers.keys()], problems })
