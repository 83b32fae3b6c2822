import { type ChildProcess, fork } from 'node:child_process'
import { createRequire } from 'node:module'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { lineReader } from '../../src-shared/line-reader'

/** A local worker process as the pool sees it, however it was started. */
export interface WorkerProcess {
  readonly pid: number | null
  send(message: unknown): void
  onMessage(listener: (message: unknown) => void): void
  /**
   * Called once when the process has ended — or never started: then `code` is null and
   * `failedToStart` says why (spawn EMFILE when the host is out of descriptors, say). A spawn
   * that fails is an exit like any other, so the pool restarts the slot and a stop waits on
   * nothing that does not exist.
   */
  onExit(listener: (code: number | null, failedToStart?: Error) => void): void
  /** Ends the process; for one that never started, nothing (its exit was already reported). */
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
export const forkSpawner: Spawner = (env) =>
  childWorker(
    fork(workerEntry(), [], {
      execArgv: workerExecArgv(),
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    }),
  )

/**
 * A child process as a {@link WorkerProcess}. A spawn that fails (EMFILE, ENOENT, EAGAIN) gives
 * the child no pid and emits 'error' but never 'exit': that error is reported as its exit.
 */
export function childWorker(child: ChildProcess): WorkerProcess {
  const outputListeners: ((line: string) => void)[] = []
  const exitListeners: ((code: number | null, failedToStart?: Error) => void)[] = []
  let exited = false
  const exit = (code: number | null, failedToStart?: Error) => {
    if (exited) return
    exited = true
    for (const listener of exitListeners) listener(code, failedToStart)
  }
  lines(child.stdout, (line) => outputListeners.forEach((l) => l(line)))
  lines(child.stderr, (line) => outputListeners.forEach((l) => l(line)))
  child.on('error', (error) => {
    // Other errors (a failed kill or send) come from a process that exists, and end in 'exit'.
    if (child.pid === undefined) exit(null, error)
  })
  child.once('exit', (code) => exit(code))
  return {
    pid: child.pid ?? null,
    send: (message) => {
      if (child.connected) child.send(message as object)
    },
    onMessage: (listener) => child.on('message', listener),
    onExit: (listener) => void exitListeners.push(listener),
    kill: () => void (child.pid !== undefined && child.kill('SIGKILL')),
    onOutput: (listener) => outputListeners.push(listener),
  }
}
