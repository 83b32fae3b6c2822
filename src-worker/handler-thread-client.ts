import { Worker } from 'node:worker_threads'
import type { JobInfo } from './handler-api'
import type { HandlerOptions } from './handlers'
import type { DriveAddress } from './driver'
import type { ThreadDeath } from './thread-crashes'
import { type FromThread, MessageBatch, type ToThread } from './thread-protocol'
import { type AttemptError, type Claim, type ExchangeRequest, HostError } from './transport'

/**
 * What becomes of the messages of the runs in a thread: one listener for all of them, told
 * which run each message is about by the run's own value (`R`, given to {@link HandlerThread.start}).
 * A job so costs no callbacks of its own.
 */
export interface RunListener<R> {
  progress(run: R, fraction: number | null, note: string | null): void
  log(run: R, line: string): void
  /** Passes one file through the gate; rejects with {code, message} when the job must stop. */
  gate(run: R, file: string): Promise<void>
  /** The run has ended: its handler returned or threw, or the thread exited. Called once. */
  end(run: R, outcome: RunOutcome): void
  /** A line for the worker's log, as it is. */
  line(text: string): void
  /** The thread has exited (after its runs have ended); `death` says how (it names the uncaught error that ended it, unsaid until now). */
  exited?(thread: HandlerThread<R>, death: ThreadDeath): void
  /** A driving thread's messages about the jobs it claims (driver.ts). */
  adopt?(thread: HandlerThread<R>, entries: number[]): void
  handOver?(thread: HandlerThread<R>, entry: number, claim: Claim): void
  unlinked?(thread: HandlerThread<R>, reports: Required<Pick<ExchangeRequest, 'complete' | 'fail'>>): void
  drained?(thread: HandlerThread<R>): void
  look?(): void
  /** The driving thread answers a ping (thread-protocol.ts): its turns come again. */
  pong?(thread: HandlerThread<R>): void
  /** The host refuses the worker itself (transport.ts refusesWorker). */
  refused?(error: HostError): void
}

export type RunOutcome = { ok: true; result: unknown } | { ok: false; error: AttemptError }

const fromSources = import.meta.url.endsWith('.ts')

/**
 * How a run ends when its thread exits: with the exit code, and the uncaught error that ended the
 * thread if one did (a handler's stray rejection, a throw in its timer), or why the worker ended
 * it (`ended`: the job whose handler did not stop), so that whoever reads the failed job learns
 * what went wrong, even when it was another job's handler.
 */
const exited = (code: number, cause: Error | null, ended: string | null): RunOutcome => ({
  ok: false,
  error: {
    code: 'thread_exited',
    message: cause ? `handler thread exited with ${code}: ${cause.message}` : ended ? `handler thread exited with ${code}: ${ended}` : `handler thread exited with ${code}`,
    ...(cause?.stack ? { stack: cause.stack } : {}),
    retryable: true,
  },
})

/**
 * One handler thread, reused job after job and shared by several jobs at once; replaced when a
 * handler will not stop (the jobs it still ran then end as `thread_exited`, retryable).
 */
export class HandlerThread<R> {
  private worker: Worker
  /** Messages to the thread, posted together at the end of the runtime's turn. */
  private readonly batch: MessageBatch<ToThread>
  private readonly ready: Promise<FromThread & { type: 'ready' }>
  private isReady = false
  /** The runs in progress, by number. */
  private readonly runs = new Map<number, R>()
  private nextRun = 1
  /** Set once the thread has exited: a run started after that ends at once. */
  private exitCode: number | null = null
  /** The uncaught error that ended the thread, if one did. */
  private exitCause: Error | null = null
  /** Why the worker ended the thread ({@link terminate}), if it said. */
  private endedBecause: string | null = null
  /** The exit came from an uncaught error in the thread (not a message that could not be read, nor a terminate). */
  private uncaught = false
  /** When its handlers had loaded (performance.now()), once they have. */
  private readyAt: number | null = null
  /** It has run or taken over a job. */
  private ranJobs = false
  /** The thread claims, runs and reports its own jobs straight to the host (driver.ts). */
  driving = false

  /** `drive`: the thread reaches the host this way and drives its own jobs (driver.ts). */
  constructor(
    options: HandlerOptions,
    private readonly listener: RunListener<R>,
    drive?: DriveAddress,
  ) {
    const entry = new URL(fromSources ? './handler-thread.ts' : './handler-thread.js', import.meta.url)
    const workerData = { ...options, drive }
    this.worker = fromSources
      ? new Worker(new URL('./thread-boot.mjs', import.meta.url), { workerData: { ...workerData, entry: entry.href } })
      : new Worker(entry, { workerData })
    this.batch = new MessageBatch((messages) => this.worker.postMessage(messages), queueMicrotask)
    this.ready = new Promise((resolve, reject) => {
      this.worker.on('message', (messages: FromThread[]) => {
        for (const message of messages) {
          if (message.type !== 'ready') this.route(message)
          else {
            this.isReady = true
            this.readyAt = performance.now()
            this.driving = message.driving
            resolve(message)
          }
        }
      })
      // A message that cannot be read here (structured clone gave up on it) carried what, no one
      // can say: a job's end, a gate request, a job the thread claimed. Its jobs would wait for
      // ever, so the thread goes, with that as its cause: its jobs end as thread_exited, or are
      // taken over if it drove them, and a new thread takes its place.
      this.worker.on('messageerror', (error) => {
        if (this.exitCause) return
        this.exitCause = new Error(`a message from the handler thread could not be read (${error.message}); the thread is replaced`)
        listener.line(`leasehold worker: ${this.exitCause.message}`)
        void this.worker.terminate()
      })
      // Said by the listener with the exit (`exited`), which holds back the lines of threads that die again and again.
      this.worker.once('error', (error) => {
        this.exitCause = error instanceof Error ? error : new Error(String(error))
        this.uncaught = true
        reject(error)
      })
      this.worker.once('exit', (code) => {
        this.exitCode = code
        reject(new Error(`handler thread exited with ${code}`))
        const ended = [...this.runs.values()]
        this.runs.clear()
        for (const run of ended) listener.end(run, exited(code, this.exitCause, this.endedBecause))
        const death = { cause: this.uncaught ? this.exitCause : null, ranJobs: this.ranJobs, readyForMs: this.readyAt === null ? null : performance.now() - this.readyAt }
        listener.exited?.(this, death) // the jobs it claimed and still reported itself end now as thread_exited, not at their leases' expiry
      })
    })
    this.ready.catch(() => {}) // observed by whoever awaits whenReady()
  }

  whenReady() {
    return this.ready
  }

  /** The thread has exited: a job placed on it would end at once. */
  get exited(): boolean {
    return this.exitCode !== null
  }

  /** Jobs running in this thread now. */
  get load(): number {
    return this.runs.size
  }

  /** A message to the thread, posted with the others of this turn. */
  post(message: ToThread): void {
    this.batch.send(message)
  }

  private route(message: Exclude<FromThread, { type: 'ready' }>): void {
    switch (message.type) {
      case 'line':
        return this.listener.line(message.line)
      case 'adopt':
        return this.listener.adopt?.(this, message.entries)
      case 'hand-over':
        return this.listener.handOver?.(this, message.entry, message.claim)
      case 'unlinked':
        return this.listener.unlinked?.(this, { complete: message.complete, fail: message.fail })
      case 'drained':
        return this.listener.drained?.(this)
      case 'look':
        return this.listener.look?.()
      case 'pong':
        return this.listener.pong?.(this)
      case 'refused':
        return this.listener.refused?.(new HostError(message.status, message.code, message.detail))
    }
    const run = this.runs.get(message.run)
    if (run === undefined) return
    switch (message.type) {
      case 'progress':
        return this.listener.progress(run, message.fraction, message.note)
      case 'log':
        return this.listener.log(run, message.line)
      case 'gate':
        return void this.listener.gate(run, message.file).then(
          () => this.post({ type: 'gate-answer', id: message.id, error: null }),
          (error: { code?: string; message?: string; retryable?: boolean }) =>
            this.post({
              type: 'gate-answer',
              id: message.id,
              error: { code: error.code ?? 'gate_failed', message: error.message ?? 'gate failed', ...(error.retryable === false ? { retryable: false as const } : {}) },
            }),
        )
      case 'done':
      case 'failed':
        this.runs.delete(message.run)
        if (message.progress) this.listener.progress(run, message.progress.fraction, message.progress.note)
        return this.listener.end(run, message.type === 'done' ? { ok: true, result: message.result } : { ok: false, error: message.error })
    }
  }

  /**
   * Runs one job in the thread; its messages and its end (its result or its error, never a
   * throw for a handler's fault) go to the listener with `run`. Returns the run's number, for
   * {@link abort}. The end never comes before this returns.
   */
  start(job: JobInfo, payload: unknown, run: R): number {
    const number = this.nextRun++
    this.ranJobs = true
    const exitCode = this.exitCode
    if (exitCode !== null) {
      queueMicrotask(() => this.listener.end(run, exited(exitCode, this.exitCause, this.endedBecause)))
      return number
    }
    this.runs.set(number, run)
    const message: ToThread = { type: 'run', run: number, job, payload }
    if (this.isReady) this.post(message)
    else
      void this.ready.then(
        () => this.post(message),
        () => {}, // the exit handler has ended the run
      )
    return number
  }

  /**
   * Takes on a run the thread started itself, a job it claimed (driver.ts; numbered by the
   * thread): from now on its messages and its end go to the listener as any run's. On a thread
   * that has exited, the run ends at once.
   */
  adopt(number: number, run: R): void {
    this.ranJobs = true
    const exitCode = this.exitCode
    if (exitCode !== null) queueMicrotask(() => this.listener.end(run, exited(exitCode, this.exitCause, this.endedBecause)))
    else this.runs.set(number, run)
  }

  abort(run: number, reason: string): void {
    if (this.runs.has(run)) this.post({ type: 'abort', run, reason })
  }

  /** Ends the thread; `because` (the handler that did not stop, say) is told to the runs it ends. */
  terminate(because?: string): Promise<number> {
    if (because !== undefined && this.exitCode === null) this.endedBecause ??= because
    return this.worker.terminate()
  }
}
