import { fork } from 'node:child_process'
import { createRequire } from 'node:module'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { lineReader } from '../../src-shared/line-reader'

/** A local worker process as the pool sees it, however it was started. */
export interface WorkerProcess {
  readonly pid: number | null
  send(message: unknown): void
  onMessage(listener: (message: unknown) => void): void
  onExit(listener: (code: number | null) => void): void
  kill(): void
  /** Lines the worker writes to stdout/stderr. */
  onOutput(listener: (line: string) => void): void
}

/** Starts a local worker process with the given environment. */
export type Spawner = (env: Record<string, string>) => WorkerProcess

const fromSources = import.meta.url.endsWith('.ts')

/** The worker entry beside this build: src-worker/main.ts from sources, or the built one. */
export function workerEntry(): string {
  return fileURLToPath(new URL(fromSources ? '../../src-worker/main.ts' : './worker.js', import.meta.url))
}

function lines(stream: NodeJS.ReadableStream | null, listener: (line: string) => void): void {
  if (!stream) return
  const read = lineReader((line) => line && listener(line))
  stream.setEncoding('utf8')
  stream.on('data', (chunk: string) => read.push(chunk))
}

/**
 * The Node flags a worker starts with: from sources, tsx's loader, by its own path. A bare `tsx`
 * is looked for from the worker's working directory, the host's, which need not be this project
 * (`leasehold serve` started from anywhere), and every worker would exit at once.
 */
export function workerExecArgv(): string[] {
  return fromSources ? ['--import', pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href] : []
}

/** Under plain Node: `child_process.fork` of the worker entry (through tsx when running from sources). */
export const forkSpawner: Spawner = (env) => {
  const child = fork(workerEntry(), [], {
    execArgv: workerExecArgv(),
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  })
  const outputListeners: ((line: string) => void)[] = []
  lines(child.stdout, (line) => outputListeners.forEach((l) => l(line)))
  lines(child.stderr, (line) => outputListeners.forEach((l) => l(line)))
  child.on('error', () => {}) // a failed spawn also ends in 'exit', which the pool handles
  return {
    pid: child.pid ?? null,
    send: (message) => {
      if (child.connected) child.send(message as object)
    },
    onMessage: (listener) => child.on('message', listener),
    onExit: (listener) => child.once('exit', (code) => listener(code)),
    kill: () => child.kill('SIGKILL'),
    onOutput: (listener) => outputListeners.push(listener),
  }
}
