import { resolve } from 'node:path'
import { HandlerThread, type RunOutcome } from './handler-thread-client'
import type { HandlerOptions } from './handlers'
import { type AttemptError, type Claim, LeaseLostError, type WorkerTransport } from './transport'

export interface RuntimeOptions {
  transport: WorkerTransport
  workerId: string
  /** Streams (job queues) to claim from, in priority order. */
  streams: string[]
  /** Jobs run at once, each in its own handler thread. */
  concurrency: number
  handlers: HandlerOptions
  log: (line: string) => void
  /** How long one claim long-polls. */
  claimWaitMs?: number
  /** How long an aborted handler may take to stop before its thread is replaced. */
  abortGraceMs?: number
  /** Told when a slot starts or ends a job (the pool reports it to the host). */
  onJob?: (jobId: string | null) => void
}

/** Why a running job was told to stop. */
type StopReason = 'canceled' | 'max_runtime' | 'lease_lost' | 'blocked' | 'shutdown'

const STOP_ERRORS: Record<Exclude<StopReason, 'lease_lost' | 'blocked'>, AttemptError> = {
  canceled: { code: 'canceled', message: 'Canceled while running', retryable: false },
  max_runtime: { code: 'max_runtime_exceeded', message: 'Ran past its max_runtime_s', retryable: false },
  shutdown: { code: 'shutdown', message: 'The worker shut down before the job finished', retryable: true },
}

/** A heartbeat every interval, ±10 %, so many workers do not beat in step. */
export function jitter(intervalMs: number, random = Math.random): number {
  return Math.round(intervalMs * (0.9 + 0.2 * random()))
}

class GateStop extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message)
  }
}

/**
 * The worker loop, the same for local and external workers: claim (long-poll) → run the
 * handler in a handler thread → heartbeat every ttl/3 with jitter while it runs → complete or
 * fail. The heartbeat runs on this thread, the handler on its own, so a busy handler cannot
 * starve it.
 */
export class WorkerRuntime {
  private readonly stopClaiming = new AbortController()
  private readonly running = new Map<string, (reason: StopReason) => void>()
  private slots: Promise<void>[] = []
  private threads: HandlerThread[] = []

  constructor(private readonly options: RuntimeOptions) {}

  /** Starts the handler threads; says which job types they run and which modules failed to load. */
  async start(): Promise<{ types: string[]; problems: { file: string; error: string }[] }> {
    this.threads = Array.from({ length: this.options.concurrency }, () => new HandlerThread(this.options.handlers))
    const ready = await Promise.all(this.threads.map((t) => t.whenReady()))
    return { types: ready[0]!.types, problems: ready[0]!.problems }
  }

  /** Begins claiming, once {@link start} has succeeded (a worker that failed to start takes no work). */
  begin(): void {
    this.slots = this.threads.map((_, i) => this.slot(i))
  }

  /**
   * Drains: stops claiming, lets running jobs finish for up to `graceMs`, then aborts them and
   * fails them as retryable, and ends the handler threads.
   */
  async stop(graceMs: number): Promise<void> {
    this.stopClaiming.abort()
    const drained = Promise.all(this.slots)
    const timer = setTimeout(() => {
      for (const stop of this.running.values()) stop('shutdown')
    }, graceMs)
    await drained
    clearTimeout(timer)
    await Promise.all(this.threads.map((t) => t.terminate()))
    this.options.transport.close()
  }

  private async slot(index: number): Promise<void> {
    const { transport, workerId, streams, log } = this.options
    while (!this.stopClaiming.signal.aborted) {
      let claim: Claim | null
      try {
        claim = await transport.claim({ worker_id: workerId, streams, max_wait_ms: this.options.claimWaitMs ?? 20_000 }, this.stopClaiming.signal)
      } catch (error) {
        if (this.stopClaiming.signal.aborted) return
        log(`leasehold worker: claim failed (${(error as Error).message}); retrying in 1 s`)
        await new Promise((r) => setTimeout(r, 1000))
        continue
      }
      if (claim) await this.execute(index, claim)
    }
  }

  private async execute(index: number, claim: Claim): Promise<void> {
    const { transport, workerId, log } = this.options
    const ref = { job_id: claim.job_id, attempt_id: claim.attempt_id, lease_token: claim.lease_token, worker_id: workerId }
    const thread = this.threads[index]!
    const heldFiles = new Set<string>()
    let progress: number | null = null
    let note: string | null = null
    let stopReason: StopReason | null = null
    let ended = false
    let stopped: () => void = () => {}
    const whenStopped = new Promise<void>((r) => (stopped = r))
    const stop = (reason: StopReason) => {
      // Once the handler has ended, a late answer (a heartbeat in flight) must not abort the
      // thread: it may already run the next job.
      if (stopReason || ended) return
      stopReason = reason
      thread.abort(reason)
      stopped()
    }
    this.running.set(claim.job_id, stop)
    this.options.onJob?.(claim.job_id)

    let beating = true
    let beatTimer: NodeJS.Timeout | undefined
    const beat = async () => {
      try {
        const answer = await transport.heartbeat({ ...ref, progress, note })
        if (answer.cancel_requested) stop('canceled')
        for (const file of heldFiles) await transport.heartbeatFile({ file, owner_id: ownerOf(claim) }).catch(() => {})
      } catch (error) {
        if (error instanceof LeaseLostError) stop('lease_lost')
        else log(`leasehold worker: heartbeat for ${claim.job_id} failed: ${(error as Error).message}`)
      }
      if (beating) beatTimer = setTimeout(beat, jitter(claim.heartbeat_interval_seconds * 1000))
    }
    beatTimer = setTimeout(beat, jitter(claim.heartbeat_interval_seconds * 1000))
    const runtimeTimer = claim.max_runtime_s ? setTimeout(() => stop('max_runtime'), claim.max_runtime_s * 1000) : undefined

    const outcome = this.runWithGrace(index, claim, whenStopped, {
      progress: (fraction, text) => {
        if (fraction !== null) progress = fraction
        if (text !== null) note = text
      },
      log: (line) => log(`[${claim.job_type} ${claim.job_id.slice(0, 8)}] ${line}`),
      gate: (file) => this.gate(claim, file, heldFiles, (reason) => stop(reason)),
    })
    const result = await outcome
    ended = true
    beating = false
    clearTimeout(beatTimer)
    clearTimeout(runtimeTimer)
    this.running.delete(claim.job_id)
    this.options.onJob?.(null)
    await this.report(claim, ref, result, stopReason)
  }

  /** Runs the handler; once told to stop, it gets `abortGraceMs` before its thread is replaced. */
  private async runWithGrace(index: number, claim: Claim, whenStopped: Promise<void>, callbacks: Parameters<HandlerThread['run']>[2]): Promise<RunOutcome> {
    const thread = this.threads[index]!
    const run = thread.run({ id: claim.job_id, type: claim.job_type, attempt_id: claim.attempt_id, max_runtime_s: claim.max_runtime_s }, claim.payload, callbacks)
    const grace = whenStopped.then(() => new Promise<'stuck'>((r) => setTimeout(() => r('stuck'), this.options.abortGraceMs ?? 5000)))
    const first = await Promise.race([run, grace])
    if (first !== 'stuck') return first
    this.options.log(`leasehold worker: the handler of ${claim.job_id} did not stop; replacing its thread`)
    void thread.terminate()
    this.threads[index] = new HandlerThread(this.options.handlers)
    return { ok: false, error: { code: 'handler_stuck', message: 'The handler did not stop when aborted', retryable: true } }
  }

  private async report(claim: Claim, ref: { job_id: string; attempt_id: string; lease_token: string; worker_id: string }, outcome: RunOutcome, stopReason: StopReason | null): Promise<void> {
    const { transport, log } = this.options
    if (stopReason === 'lease_lost') return log(`leasehold worker: lost the lease of ${claim.job_id}; its result is dropped`)
    if (stopReason === 'blocked') return log(`leasehold worker: ${claim.job_id} halted on a file-lease blocker; an operator decides`)
    try {
      if (outcome.ok) await transport.complete({ ...ref, result: outcome.result })
      else await transport.fail({ ...ref, error: stopReason ? { ...STOP_ERRORS[stopReason], stack: outcome.error.stack } : outcome.error })
    } catch (error) {
      // 409: the lease ended while the handler ran (expired, or the job was taken over): the
      // host refused the report, and the result is dropped, as when a heartbeat finds it gone.
      if (error instanceof LeaseLostError) log(`leasehold worker: lost the lease of ${claim.job_id} (${error.code}: ${error.message}); its result is dropped`)
      else log(`leasehold worker: could not report ${claim.job_id}: ${(error as Error).message}`)
    }
  }

  /**
   * The file-lease gate behind a handler's `files` calls: acquire; if held, wait (the job keeps
   * heartbeating) until the host's clock reaches the one retry, then retry once; still held →
   * the host has halted the job on a blocker, and the handler is stopped.
   */
  private async gate(claim: Claim, file: string, held: Set<string>, stop: (reason: StopReason) => void): Promise<void> {
    const { transport, log } = this.options
    const key = resolve(file)
    if (held.has(key)) return
    const request = { file: key, owner_id: ownerOf(claim), lease_id: claim.lease_id }
    let answer = await transport.acquireFile(request)
    if (!answer.granted && answer.code === 'file_lease_held') {
      log(`leasehold worker: ${key} is held; ${claim.job_id} waits for its one retry at ${answer.retry_at}`)
      while (!(await transport.waitFileRetry({ file: key, owner_id: request.owner_id, max_wait_ms: 30_000 }, this.stopClaiming.signal))) {
        if (this.stopClaiming.signal.aborted) throw new GateStop('shutdown', 'The worker is shutting down')
      }
      answer = await transport.acquireFile(request)
    }
    if (answer.granted) {
      held.add(key)
      return
    }
    stop('blocked')
    throw new GateStop('blocked', `${key} is still held after the retry: the job is halted until an operator answers`)
  }
}

/** A job's identity at the file-lease gate: blocker reports name the job. */
function ownerOf(claim: Claim): string {
  return `job:${claim.job_id}`
}
