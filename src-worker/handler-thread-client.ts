import { Worker } from 'node:worker_threads'
import type { JobInfo } from './handler-api'
import type { HandlerOptions } from './handlers'
import type { FromThread, ToThread } from './thread-protocol'
import type { AttemptError } from './transport'

export interface RunCallbacks {
  progress(fraction: number | null, note: string | null): void
  log(line: string): void
  /** Passes one file through the gate; rejects with {code, message} when the job must stop. */
  gate(file: string): Promise<void>
}

export type RunOutcome = { ok: true; result: unknown } | { ok: false; error: AttemptError }

const fromSources = import.meta.url.endsWith('.ts')

const exited = (code: number): RunOutcome => ({ ok: false, error: { code: 'thread_exited', message: `handler thread exited with ${code}`, retryable: true } })

/** A run in progress in a thread: where its messages go, and how it ends. */
interface Run {
  callbacks: RunCallbacks
  resolve(outcome: RunOutcome): void
}

/**
 * One handler thread, reused job after job and shared by several jobs at once; replaced when a
 * handler will not stop (the jobs it still ran then end as `thread_exited`, retryable).
 */
export class HandlerThread {
  private worker: Worker
  private readonly ready: Promise<FromThread & { type: 'ready' }>
  private readonly runs = new Map<number, Run>()
  private nextRun = 1
  /** Set once the thread has exited: a run started after that ends at once. */
  private exitCode: number | null = null

  constructor(options: HandlerOptions) {
    const entry = new URL(fromSources ? './handler-thread.ts' : './handler-thread.js', import.meta.url)
    this.worker = fromSources
      ? new Worker(new URL('./thread-boot.mjs', import.meta.url), { workerData: { ...options, entry: entry.href } })
      : new Worker(entry, { workerData: options })
    this.ready = new Promise((resolve, reject) => {
      this.worker.on('message', (message: FromThread) => {
        if (message.type === 'ready') resolve(message)
        else this.route(message)
      })
      this.worker.once('error', reject)
      this.worker.once('exit', (code) => {
        this.exitCode = code
        reject(new Error(`handler thread exited with ${code}`))
        for (const run of this.runs.values()) run.resolve(exited(code))
        this.runs.clear()
      })
    })
    this.ready.catch(() => {}) // observed by whoever awaits whenReady()
  }

  whenReady() {
    return this.ready
  }

  /** Jobs running in this thread now. */
  get load(): number {
    return this.runs.size
  }

  private post(message: ToThread): void {
    this.worker.postMessage(message)
  }

  private route(message: Exclude<FromThread, { type: 'ready' }>): void {
    const run = this.runs.get(message.run)
    if (!run) return
    switch (message.type) {
      case 'progress':
        return run.callbacks.progress(message.fraction, message.note)
      case 'log':
        return run.callbacks.log(message.line)
      case 'gate':
        return void run.callbacks.gate(message.file).then(
          () => this.post({ type: 'gate-answer', id: message.id, error: null }),
          (error: { code?: string; message?: string }) =>
            this.post({ type: 'gate-answer', id: message.id, error: { code: error.code ?? 'gate_failed', message: error.message ?? 'gate failed' } }),
        )
      case 'done':
      case 'failed':
        this.runs.delete(message.run)
        return run.resolve(message.type === 'done' ? { ok: true, result: message.result } : { ok: false, error: message.error })
    }
  }

  /**
   * Runs one job in the thread; resolves with its result or its error (never rejects for a
   * handler's fault). Returns the run's number, for {@link abort}, before it ends.
   */
  start(job: JobInfo, payload: unknown, callbacks: RunCallbacks): { run: number; outcome: Promise<RunOutcome> } {
    const run = this.nextRun++
    if (this.exitCode !== null) return { run, outcome: Promise.resolve(exited(this.exitCode)) }
    const outcome = new Promise<RunOutcome>((resolve) => this.runs.set(run, { callbacks, resolve }))
    void this.ready.then(
      () => this.post({ type: 'run', run, job, payload }),
      () => {}, // the exit handler has ended the run
    )
    return { run, outcome }
  }

  abort(run: number, reason: string): void {
    if (this.runs.has(run)) this.post({ type: 'abort', run, reason })
  }

  terminate(): Promise<number> {
    return this.worker.terminate()
  }
}
