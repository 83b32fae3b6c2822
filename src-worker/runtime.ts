import { resolve } from 'node:path'
import { HandlerThread, type RunListener, type RunOutcome } from './handler-thread-client'
import type { HandlerOptions } from './handlers'
import { placeBatch, RunTimes } from './thread-placement'
import { jobInfo } from './thread-protocol'
import type { LinkAddress } from './mailbox'
import type { AttemptError, Claim, ExchangeAnswer, ExchangeRequest, HeartbeatAnswer, WorkerTransport } from './transport'

export interface RuntimeOptions {
  transport: WorkerTransport
  workerId: string
  /** Streams (job queues) to claim from, in priority order. */
  streams: string[]
  /** Jobs run at once. */
  concurrency: number
  /** Handler threads the jobs share (default: one per job up to 4; see thread-placement.ts for which runs where). */
  threads?: number
  handlers: HandlerOptions
  log: (line: string) => void
  /** How long a claim long-polls when the worker has nothing else to say. */
  claimWaitMs?: number
  /** How long an aborted handler may take to stop before its thread is replaced. */
  abortGraceMs?: number
  /** How short a job type's typical run must be for a batch of such jobs to share one thread (default SHORT_RUN_MS). */
  shortRunMs?: number
  /** Local workers: where each handler thread links itself to the host (src-shared/thread-link.ts); none over HTTP. */
  link?: Pick<LinkAddress, 'path' | 'token'>
}

/** Why a running job was told to stop. */
type StopReason = 'canceled' | 'max_runtime' | 'lease_lost' | 'blocked' | 'shutdown'

const STOP_ERRORS: Record<Exclude<StopReason, 'lease_lost' | 'blocked'>, AttemptError> = {
  canceled: { code: 'canceled', message: 'Canceled while running', retryable: false },
  max_runtime: { code: 'max_runtime_exceeded', message: 'Ran past its max_runtime_s', retryable: false },
  shutdown: { code: 'shutdown', message: 'The worker shut down before the job finished', retryable: true },
}

/** The default number of handler threads: enough for handlers that compute, few enough to stay cheap. */
const MAX_DEFAULT_THREADS = 4

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

/** What the runtime knows when it decides what to send (see {@link nextExchange}). */
export interface SendState {
  /** Heartbeats, completions or failures wait to be sent. */
  reports: boolean
  /** Some of them are heartbeats. */
  heartbeats: boolean
  /** An exchange with reports and no long-poll is in flight. */
  reporting: boolean
  /** A long-poll is in flight. */
  polling: boolean
  /** Slots neither running a job nor asked for. */
  free: number
  /** How soon the running jobs should report, when they are all short jobs; else null. */
  reportsDueInMs: number | null
}

/**
 * What the worker sends next: an exchange (a long-poll or not), a look again later, or nothing.
 * - Reports go as soon as no other exchange with reports is in flight. When no long-poll is in
 *   flight either, they carry one for the free slots — unless they hold heartbeats, whose
 *   answers may stop a job and must come back at once. A worker that runs short jobs one at a
 *   time so makes one round trip per job: its report and its next claim are one exchange.
 * - With nothing to report, free slots are claimed by a long-poll — but while every running job
 *   is a short one that should end within `reportsDueInMs`, the claim waits to go with its report.
 */
export function nextExchange(state: SendState): { longPoll: boolean } | { pollInMs: number } | null {
  const { reports, heartbeats, reporting, polling, free, reportsDueInMs } = state
  if (reports) return reporting ? null : { longPoll: !polling && free > 0 && !heartbeats }
  if (polling || reporting || free <= 0) return null
  return reportsDueInMs === null ? { longPoll: true } : { pollInMs: reportsDueInMs }
}

/** A job this worker runs now. */
interface Running {
  claim: Claim
  thread: HandlerThread<Running>
  /** Its run's number in its thread. */
  run: number
  startedAt: number
  /** The files it holds through the gate (none until it passes the gate). */
  heldFiles: Set<string> | null
  progress: number | null
  note: string | null
  stopReason: StopReason | null
  /** The handler has returned: a late answer must not stop anything. */
  ended: boolean
  beats: BeatGroup | null
  runtimeTimer: NodeJS.Timeout | undefined
  /** Runs from the stop until the handler's thread is replaced, unless the handler ends first. */
  graceTimer: NodeJS.Timeout | undefined
}

/** The jobs started together with one heartbeat interval: one timer beats them all. */
interface BeatGroup {
  jobs: Running[]
  /** How many of them still run: the timer ends with the last. */
  live: number
  timer: NodeJS.Timeout | undefined
}

/** What the worker has to tell the host, sent with its next exchange. */
interface Outbox {
  /** At most one heartbeat per job: the latest progress wins. */
  heartbeat: Map<string, NonNullable<ExchangeRequest['heartbeat']>[number]>
  complete: NonNullable<ExchangeRequest['complete']>
  fail: NonNullable<ExchangeRequest['fail']>
}

const emptyOutbox = (): Outbox => ({ heartbeat: new Map(), complete: [], fail: [] })

/**
 * The worker loop, the same for local and external workers. Up to `concurrency` jobs run at
 * once in a few shared handler threads; the runtime's own thread only talks to the host. It
 * talks in exchanges: one round trip carries the heartbeats, completions and failures gathered
 * since the last one, and a claim for the slots that are free. At most two exchanges are in
 * flight: a long-poll for the free slots, and one that carries reports (and claims the slots
 * they free, without waiting); reports sent while no long-poll is in flight carry it, and
 * whatever arrives meanwhile goes with the next (nextExchange decides). So a busy worker sends
 * one request per batch of finished jobs, not three per job, and one that runs short jobs one
 * at a time one request per job. The heartbeat timers run on this thread, the handlers on
 * theirs, so a busy handler cannot starve them. Messages between this thread and a handler
 * thread go in one batch per turn each way (thread-protocol.ts), and a batch of short jobs
 * shares one thread (thread-placement.ts): a batch of no-op jobs wakes one thread once.
 */
export class WorkerRuntime {
  private readonly stopClaiming = new AbortController()
  private readonly running = new Map<string, Running>()
  /** How long each job type's runs typically take (see thread-placement.ts). */
  private readonly runTimes: RunTimes
  private threads: HandlerThread<Running>[] = []
  private outbox = emptyOutbox()
  /** Slots asked for by claims in flight. */
  private reserved = 0
  private polling = false
  private reporting = false
  private pumpQueued = false
  /** Resolves once the worker has stopped claiming and every job has ended and been reported. */
  private drained: (() => void) | null = null
  /** After a failed exchange, the next one waits until then. */
  private pauseUntil = 0
  /** Sends the long-poll that short jobs' reports were to carry, should they end late. */
  private pollTimer: NodeJS.Timeout | undefined
  /** Threads named by claims in flight (src-shared/thread-link.ts): no job is placed on them meanwhile. */
  private readonly named = new Set<number>()
  /** Looks in the named threads' mailboxes while any is named (see {@link watchNamed}). */
  private mailCheck: NodeJS.Timeout | undefined
  /** The heartbeat interval of the last jobs claimed: how often {@link mailCheck} looks, at most. */
  private beatIntervalMs = 1000
  /**
   * The attempts taken on from a thread's link (see {@link delivered}), until their exchange's
   * answer is placed: placing skips them, even if they have ended by then.
   */
  private readonly takenOn = new Set<string>()

  /** Where the handler threads' messages go, for every job. */
  private readonly listener: RunListener<Running> = {
    // Progress goes to the host with the next exchange (one heartbeat per job at most).
    progress: (job, fraction, note) => {
      if (fraction !== null) job.progress = fraction
      if (note !== null) job.note = note
      this.queueBeat(job)
    },
    log: (job, line) => this.options.log(`[${job.claim.job_type} ${job.claim.job_id.slice(-8)}] ${line}`),
    gate: (job, file) => this.gate(job, file),
    end: (job, outcome) => this.finish(job, outcome),
    delivered: (thread, response, runs) => this.delivered(thread, response, runs),
    linkLost: (thread) => {
      const index = this.threads.indexOf(thread) // a thread already replaced was named by no claim
      if (index >= 0) this.options.transport.threadGone?.(index)
    },
  }

  constructor(private readonly options: RuntimeOptions) {
    this.runTimes = new RunTimes(options.shortRunMs)
  }

  /** Starts the handler threads; says which job types they run and which modules failed to load. */
  async start(): Promise<{ types: string[]; problems: { file: string; error: string }[] }> {
    const count = this.options.threads ?? Math.min(this.options.concurrency, MAX_DEFAULT_THREADS)
    this.threads = Array.from({ length: Math.max(1, count) }, (_, index) => this.newThread(index))
    const ready = await Promise.all(this.threads.map((t) => t.whenReady()))
    return { types: ready[0]!.types, problems: ready[0]!.problems }
  }

  private newThread(index: number): HandlerThread<Running> {
    const { link, workerId } = this.options
    return new HandlerThread(this.options.handlers, this.listener, link && { ...link, worker_id: workerId, thread: index })
  }

  /** Begins claiming, once {@link start} has succeeded (a worker that failed to start takes no work). */
  begin(): void {
    this.pump()
  }

  /**
   * Drains: stops claiming, lets running jobs finish for up to `graceMs`, then aborts them and
   * fails them as retryable, reports everything, and ends the handler threads.
   */
  async stop(graceMs: number): Promise<void> {
    this.stopClaiming.abort()
    clearTimeout(this.pollTimer)
    const drained = new Promise<void>((resolve) => (this.drained = resolve))
    this.checkDrained()
    const timer = setTimeout(() => {
      for (const job of this.running.values()) this.stopJob(job, 'shutdown')
    }, graceMs)
    await drained
    clearTimeout(timer)
    await Promise.all(this.threads.map((t) => t.terminate()))
    this.options.transport.close()
  }

  private get free(): number {
    return this.stopClaiming.signal.aborted ? 0 : this.options.concurrency - this.running.size - this.reserved
  }

  private get hasReports(): boolean {
    return this.outbox.heartbeat.size + this.outbox.complete.length + this.outbox.fail.length > 0
  }

  /** Something changed: look at what to send once this turn's other changes are in. */
  private pump(): void {
    if (this.pumpQueued) return
    this.pumpQueued = true
    setImmediate(() => {
      this.pumpQueued = false
      this.send()
    })
  }

  private send(): void {
    const wait = this.pauseUntil - Date.now()
    if (wait > 0) {
      setTimeout(() => this.pump(), wait)
      return
    }
    const next = nextExchange({
      reports: this.hasReports,
      heartbeats: this.outbox.heartbeat.size > 0,
      reporting: this.reporting,
      polling: this.polling,
      free: this.free,
      reportsDueInMs: this.reportsDueIn(),
    })
    if (next && 'longPoll' in next) void this.exchange(next.longPoll)
    else if (next) this.pollLater(next.pollInMs)
    this.checkDrained()
  }

  /**
   * How soon the jobs running now will report, if every one of them is a job whose runs are
   * short and it has not yet overrun (RunTimes.expectedEnd); null if some job may run long.
   */
  private reportsDueIn(): number | null {
    if (this.running.size === 0) return null
    const now = performance.now()
    let latest = 0
    for (const job of this.running.values()) {
      const left = this.runTimes.expectedEnd(job.claim.job_type, job.startedAt) - now
      if (left <= 0) return null
      latest = Math.max(latest, left)
    }
    return latest
  }

  /** Looks again in `ms`: the short jobs' reports were to carry the long-poll, but are late. */
  private pollLater(ms: number): void {
    if (this.pollTimer) return
    this.pollTimer = setTimeout(() => {
      this.pollTimer = undefined
      this.pump()
    }, Math.ceil(ms))
  }

  /** One round trip: the reports gathered so far, and a claim for the free slots. */
  private async exchange(longPoll: boolean): Promise<void> {
    const { transport, workerId, streams, log } = this.options
    const outbox = this.outbox
    this.outbox = emptyOutbox()
    const maxJobs = Math.min(this.free, 256)
    const request: ExchangeRequest = { worker_id: workerId }
    if (outbox.heartbeat.size > 0) request.heartbeat = [...outbox.heartbeat.values()]
    if (outbox.complete.length > 0) request.complete = outbox.complete
    if (outbox.fail.length > 0) request.fail = outbox.fail
    const thread = maxJobs > 0 ? this.threadToName() : -1
    if (maxJobs > 0) request.claim = { streams, max_jobs: maxJobs, max_wait_ms: longPoll ? (this.options.claimWaitMs ?? 20_000) : 0 }
    if (thread >= 0) {
      request.claim!.thread = thread
      this.named.add(thread)
      this.watchNamed()
    }
    this.reserved += maxJobs
    if (longPoll) this.polling = true
    else this.reporting = true
    let answer: ExchangeAnswer | null = null
    try {
      answer = await transport.exchange(request, longPoll ? this.stopClaiming.signal : undefined)
    } catch (error) {
      const reports = (request.heartbeat?.length ?? 0) + (request.complete?.length ?? 0) + (request.fail?.length ?? 0)
      if (this.stopClaiming.signal.aborted) {
        // Stopping: a host that does not answer now is not waited for; the leases expire there.
        if (reports > 0) log(`leasehold worker: the host did not answer (${(error as Error).message}); ${reports} report(s) dropped on the way out`)
      } else {
        log(`leasehold worker: the host did not answer (${(error as Error).message}); retrying in 1 s`)
        this.pauseUntil = Date.now() + 1000
        this.putBack(outbox)
      }
    } finally {
      this.reserved -= maxJobs
      this.named.delete(thread)
      this.watchNamed()
      if (longPoll) this.polling = false
      else this.reporting = false
    }
    if (answer && longPoll && this.stopClaiming.signal.aborted && (outbox.complete.length > 0 || outbox.fail.length > 0)) {
      // The long-poll was given up on the way out, so its reports may not have reached the
      // host: they go again with the next exchange (completions and failures are idempotent).
      this.putBack(outbox)
    }
    if (answer) {
      answer.heartbeats.forEach((a) => this.onHeartbeatAnswer(a))
      for (const a of [...answer.completed, ...answer.failed]) {
        if (!a.ok) log(`leasehold worker: lost the lease of ${a.job_id} (${a.code}: ${a.detail}); its result is dropped`)
      }
      this.place(answer.jobs)
    }
    this.pump()
  }

  /**
   * The handler thread a claim may name for an answer that grants one job (src-shared/thread-link.ts): one
   * that is linked, runs nothing, and no other claim in flight names; -1 for none. No job is
   * placed on a named thread until its claim is answered, so the thread reads the answer and
   * starts its job at once: one busy with a handler that computes could not, and the runtime
   * would not know of the job. That leaves a thread to place on only with two threads or more
   * (two exchanges may be in flight) — or with one slot, where nothing else runs while a claim
   * waits.
   */
  private threadToName(): number {
    if (this.threads.length < 2 && this.options.concurrency > 1) return -1
    return this.threads.findIndex((thread, index) => thread.linked && thread.load === 0 && !this.named.has(index))
  }

  /**
   * While a claim names a thread, looks in that thread's mailbox every half heartbeat interval
   * (at most every second): a thread that has left an answer there tells the runtime once its
   * job has started, but a handler that blocks the thread from its start keeps it from telling.
   * Looking finds the job in time for its heartbeats all the same: once the runtime knows the
   * interval (from any claim), the job's first beat goes at most one and a half intervals after
   * the grant, half the lease's TTL.
   */
  private watchNamed(): void {
    if (this.named.size === 0) {
      clearInterval(this.mailCheck)
      this.mailCheck = undefined
    } else {
      this.mailCheck ??= setInterval(() => {
        for (const index of this.named) this.threads[index]?.collect()
      }, Math.min(1000, this.beatIntervalMs / 2))
    }
  }

  /**
   * An answer the host wrote to `thread`'s link, passed on by the thread, which runs its jobs as
   * `runs`: the runtime takes them on now, as jobs it started (heartbeats, timers, reports);
   * then the answer settles its exchange, whose placing skips them.
   */
  private delivered(thread: HandlerThread<Running>, response: unknown, runs: number[]): void {
    const jobs = (response as { result?: { jobs?: Claim[] } }).result?.jobs ?? []
    for (const claim of jobs) this.takenOn.add(claim.attempt_id)
    this.startJobs(jobs, () => thread, runs)
    this.options.transport.accept?.(response)
  }

  /**
   * Reports of an exchange that did not reach the host go out with the next one: completions
   * and failures are idempotent, and a heartbeat sent late is still a heartbeat. (Should the
   * host stay away past the leases' TTL, they expire there and the reports are refused.) A
   * stopping worker does not wait for a host that does not answer.
   */
  private putBack(outbox: Outbox): void {
    for (const [jobId, beat] of outbox.heartbeat) if (!this.outbox.heartbeat.has(jobId)) this.outbox.heartbeat.set(jobId, beat)
    this.outbox.complete.unshift(...outbox.complete)
    this.outbox.fail.unshift(...outbox.fail)
  }

  private onHeartbeatAnswer(answer: HeartbeatAnswer): void {
    const job = this.running.get(answer.job_id)
    if (!job || job.ended) return // a late answer for a job that has ended
    if (!answer.ok) return this.stopJob(job, 'lease_lost')
    if (answer.cancel_requested) return this.stopJob(job, 'canceled')
    for (const file of job.heldFiles ?? []) {
      void this.options.transport.heartbeatFile({ file, owner_id: ownerOf(job.claim) }).catch(() => {})
    }
  }

  private checkDrained(): void {
    if (this.drained && this.running.size === 0 && !this.hasReports && !this.reporting && !this.polling) {
      this.drained()
      this.drained = null
    }
  }

  /**
   * Starts a batch of claimed jobs, on the threads thread-placement.ts picks (a batch of short
   * jobs shares one thread). The jobs of the batch heartbeat together.
   */
  private place(answered: Claim[]): void {
    // Jobs that came through a thread's link were taken on already (see delivered).
    const claims = answered.filter((claim) => !this.takenOn.delete(claim.attempt_id))
    const threads = this.threads
    const placed = placeBatch(
      claims.map((claim) => claim.job_type),
      threads.map((thread, index) => (this.named.has(index) ? Number.POSITIVE_INFINITY : thread.load)),
      (type) => this.runTimes.isShort(type),
    )
    this.startJobs(claims, (i) => threads[placed[i]!]!)
  }

  /**
   * Starts jobs on the given threads — or, with `runs`, takes them on as the runs their thread
   * started already — and heartbeats them together.
   */
  private startJobs(claims: Claim[], threadOf: (index: number) => HandlerThread<Running>, runs?: number[]): void {
    const byInterval = new Map<number, Running[]>()
    claims.forEach((claim, i) => {
      this.beatIntervalMs = claim.heartbeat_interval_seconds * 1000
      const job = this.execute(claim, threadOf(i), runs?.[i])
      const together = byInterval.get(claim.heartbeat_interval_seconds)
      if (together) together.push(job)
      else byInterval.set(claim.heartbeat_interval_seconds, [job])
    })
    for (const [seconds, jobs] of byInterval) this.beatTogether(jobs, seconds * 1000)
  }

  /** Starts the job on `thread`, or takes it on as the thread's run `run` (a job from its link). */
  private execute(claim: Claim, thread: HandlerThread<Running>, run?: number): Running {
    const job: Running = {
      claim,
      thread,
      run: 0,
      startedAt: performance.now(),
      heldFiles: null,
      progress: null,
      note: null,
      stopReason: null,
      ended: false,
      beats: null,
      runtimeTimer: undefined,
      graceTimer: undefined,
    }
    this.running.set(claim.job_id, job)
    if (claim.max_runtime_s) job.runtimeTimer = setTimeout(() => this.stopJob(job, 'max_runtime'), claim.max_runtime_s * 1000)
    if (run === undefined) job.run = thread.start(jobInfo(claim), claim.payload, job)
    else thread.adopt((job.run = run), job)
    return job
  }

  /** Heartbeats for `jobs` every `intervalMs` (±10 %) while any of them runs: one timer, not one per job. */
  private beatTogether(jobs: Running[], intervalMs: number): void {
    const group: BeatGroup = { jobs, live: jobs.length, timer: undefined }
    const beat = () => {
      group.jobs = group.jobs.filter((job) => !job.ended)
      for (const job of group.jobs) this.queueBeat(job)
      group.timer = setTimeout(beat, jitter(intervalMs))
    }
    group.timer = setTimeout(beat, jitter(intervalMs))
    for (const job of jobs) job.beats = group
  }

  /** The job's heartbeat, with its latest progress, goes with the next exchange. */
  private queueBeat(job: Running): void {
    const { job_id, lease_token } = job.claim
    this.outbox.heartbeat.set(job_id, { job_id, lease_token, progress: job.progress, note: job.note })
    this.pump()
  }

  /** Tells the job's handler to stop; once told, it gets `abortGraceMs` before its thread is replaced. */
  private stopJob(job: Running, reason: StopReason): void {
    // Once the handler has ended, a late answer (a heartbeat in flight) must not abort anything.
    if (job.stopReason || job.ended) return
    job.stopReason = reason
    job.thread.abort(job.run, reason)
    job.graceTimer = setTimeout(() => this.replaceStuck(job), this.options.abortGraceMs ?? 5000)
  }

  private replaceStuck(job: Running): void {
    if (job.ended) return
    this.options.log(`leasehold worker: the handler of ${job.claim.job_id} did not stop; replacing its thread`)
    const index = this.threads.indexOf(job.thread)
    if (index >= 0) this.threads[index] = this.newThread(index)
    void job.thread.terminate() // other jobs of that thread end as thread_exited (retryable)
    this.finish(job, { ok: false, error: { code: 'handler_stuck', message: 'The handler did not stop when aborted', retryable: true } })
  }

  /** The job has ended (once: the thread of a job finished as stuck ends it again when it exits). */
  private finish(job: Running, outcome: RunOutcome): void {
    if (job.ended) return
    const { claim } = job
    this.runTimes.learn(claim.job_type, performance.now() - job.startedAt)
    job.ended = true
    if (job.beats && --job.beats.live === 0) clearTimeout(job.beats.timer)
    clearTimeout(job.runtimeTimer)
    clearTimeout(job.graceTimer)
    this.running.delete(claim.job_id)
    const { log } = this.options
    const { job_id, attempt_id, lease_token } = claim
    if (job.stopReason === 'lease_lost') {
      this.outbox.heartbeat.delete(job_id)
      log(`leasehold worker: lost the lease of ${job_id}; its result is dropped`)
    } else if (job.stopReason === 'blocked') {
      this.outbox.heartbeat.delete(job_id)
      log(`leasehold worker: ${job_id} halted on a file-lease blocker; an operator decides`)
    } else if (outcome.ok) {
      const completion: Outbox['complete'][number] = { job_id, attempt_id, lease_token, result: outcome.result }
      // A heartbeat not yet sent goes with the completion: its progress reaches the host all the same.
      const beat = this.outbox.heartbeat.get(job_id)
      if (beat) {
        this.outbox.heartbeat.delete(job_id)
        completion.progress = beat.progress
        completion.note = beat.note
      }
      this.outbox.complete.push(completion)
    } else {
      const error = job.stopReason ? { ...STOP_ERRORS[job.stopReason], stack: outcome.error.stack } : outcome.error
      this.outbox.fail.push({ job_id, attempt_id, lease_token, error })
    }
    this.pump()
  }

  /**
   * The file-lease gate behind a handler's `files` calls: acquire; if held, wait (the job keeps
   * heartbeating) until the host's clock reaches the one retry, then retry once; still held →
   * the host has halted the job on a blocker, and the handler is stopped.
   */
  private async gate(job: Running, file: string): Promise<void> {
    const { transport, log } = this.options
    const { claim } = job
    const key = resolve(file)
    const held = (job.heldFiles ??= new Set())
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
    this.stopJob(job, 'blocked')
    throw new GateStop('blocked', `${key} is still held after the retry: the job is halted until an operator answers`)
  }
}

/** A job's identity at the file-lease gate: blocker reports name the job. */
function ownerOf(claim: Claim): string {
  return `job:${claim.job_id}`
}
