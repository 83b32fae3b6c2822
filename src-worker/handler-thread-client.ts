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

/** One handler thread, reused job after job; replaced when a handler will not stop. */
export class HandlerThread {
  private worker: Worker
  private readonly ready: Promise<FromThread & { type: 'ready' }>
  private listener: ((message: FromThread) => void) | null = null

  constructor(options: HandlerOptions) {
    const entry = new URL(fromSources ? './handler-thread.ts' : './handler-thread.js', import.meta.url)
    this.worker = fromSources
      ? new Worker(new URL('./thread-boot.mjs', import.meta.url), { workerData: { ...options, entry: entry.href } })
      : new Worker(entry, { workerData: options })
    this.ready = new Promise((resolve, reject) => {
      const onMessage = (message: FromThread) => {
        if (message.type === 'ready') resolve(message)
        else this.listener?.(message)
      }
      this.worker.on('message', onMessage)
      this.worker.once('error', reject)
      this.worker.once('exit', (code) => reject(new Error(`handler thread exited with ${code}`)))
    })
    this.ready.catch(() => {}) // observed by whoever awaits whenReady()
  }

  whenReady() {
    return this.ready
  }

  private post(message: ToThread): void {
    this.worker.postMessage(message)
  }

  /** Runs one job in the thread; resolves with its result or its error (never rejects for a handler's fault). */
  async run(job: JobInfo, payload: unknown, callbacks: RunCallbacks): Promise<RunOutcome> {
    await this.ready
    return new Promise<RunOutcome>((resolve) => {
      const onExit = (code: number) => resolve({ ok: false, error: { code: 'thread_exited', message: `handler thread exited with ${code}`, retryable: true } })
      this.worker.once('exit', onExit)
      this.listener = (message) => {
        switch (message.type) {
          case 'progress':
            return callbacks.progress(message.fraction, message.note)
          case 'log':
            return callbacks.log(message.line)
          case 'gate':
            return void callbacks.gate(message.file).then(
              () => this.post({ type: 'gate-answer', id: message.id, error: null }),
              (error: { code?: string; message?: string }) =>
                this.post({ type: 'gate-answer', id: message.id, error: { code: error.code ?? 'gate_failed', message: error.message ?? 'gate failed' } }),
            )
          case 'done':
          case 'failed':
            this.worker.off('exit', onExit)
            this.listener = null
            return resolve(message.type === 'done' ? { ok: true, result: message.result } : { ok: false, error: message.error })
        }
      }
      this.post({ type: 'run', job, payload })
    })
  }

  abort(reason: string): void {
    this.post({ type: 'abort', reason })
  }

  terminate(): Promise<number> {
    return this.worker.terminate()
  }
}
