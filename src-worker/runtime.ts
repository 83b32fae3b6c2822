import { resolve } from 'node:path'
import { jobOwnerId } from '../src-shared/file-owner'
import { boundHeapGrowth } from '../src-shared/heap-growth'
import { DRAIN_KILL_AFTER_MS } from '../src-shared/limits'
import { GateRefusal, shownPath } from './gate-path'
import { HandlerThread, type RunListener, type RunOutcome } from './handler-thread-client'
import { type HandlerOptions, ignoredHandlerFiles } from './handlers'
import { jobLogLine } from './run-log'
import { placeBatch, RunTimes } from './thread-placement'
import { diedBeforeWork, moduleAtFault, nextThreadRestart, type ThreadDeath } from './thread-crashes'
import { jobInfo } from './thread-protocol'
import { nextExchange, onceThisTurn } from './exchange-plan'
import { claimSize, exchangeRequest, ExchangeSteps } from './exchange-steps'
import { JobTable, type TakenJob } from './job-table'
import { putBackReports, refusesReports, reportsAnswered, tooLarge } from './report-budget'
import { type AttemptError, type Claim, droppedLine, type ExchangeAnswer, type ExchangeRequest, exchangeFailure, type FileAcquireAnswer, type GateRequest, type HeartbeatAnswer, HostContact, HostError, type HostRoute, LeaseLostError, reachedAgainLine, refusedLine, refusesWorker, type WorkerTransport } from './transport'

export interface RuntimeOptions {
  transport: WorkerTransport
  workerId: string
  /** Streams (job queues) to claim from, in priority order. */
  streams: string[]
  /** Jobs run at once. */
  concurrency: number
  /** The worker has a GPU: its claims say so, and are granted jobs with `constraints.gpu_required` (no other worker is). */
  gpu?: boolean
  /** Handler threads the jobs share (default: one per job up to 4; see thread-placement.ts for which runs where). */
  threads?: number
  handlers: HandlerOptions
  log: (line: string) => void
  /** Where the worker's token came from, for the line a refused token stops it with (transport.ts refusedLine). */
  tokenSource?: string
  /** How long a claim long-polls when the worker has nothing else to say (default CLAIM_WAIT_MS, exchange-steps.ts). */
  claimWaitMs?: number
  /** How long an aborted handler may take to stop before its thread is replaced. */
  abortGraceMs?: number
  /** How short a job type's typical run must be for a batch of such jobs to share one thread (default SHORT_RUN_MS). */
  shortRunMs?: number
  /** How long the watch over a driving thread's jobs keeps its pace with no job taken before it slows down (default WATCH_IDLE_MS). */
  watchIdleMs?: number
  /**
   * How the first handler thread reaches the host to drive its own jobs (driver.ts): a local
   * worker's link, or the worker's own transport opened again from that thread. None: the
   * runtime claims every job itself.
   */
  drive?: HostRoute
  /**
   * The host refuses this worker itself (transport.ts refusesWorker): called once, after the
   * worker has logged why and stopped claiming; the caller stops it.
   */
  onRefused?: (error: HostError) => void
  /**
   * A handler module found at fault once the threads run (thread-crashes.ts): its threads die on
   * its uncaught error as soon as it has loaded. To be logged and reported as a module that did
   * not load (the next threads skip it), as {@link WorkerRuntime.start}'s problems are; one found
   * before start resolves is among those instead.
   */
  onProblem?: (problem: { file: string; error: string }) => void
}

/** Why a running job was told to stop. */
type StopReason = 'canceled' | 'max_runtime' | 'lease_lost' | 'blocked' | 'shutdown'

const STOP_ERRORS: Record<Exclude<StopReason, 'lease_lost' | 'blocked'>, AttemptError> = {
  canceled: { code: 'canceled', message: 'Canceled while running', retryable: false },
  max_runtime: { code: 'max_runtime_exceeded', message: 'Ran past its max_runtime_s', retryable: false },
  shutdown: { code: 'shutdown', message: 'The worker shut down before the job finished', retryable: true },
}

/**
 * How long the watch over the driving threads' jobs looks every second at most with none taken,
 * before it slows to what keeps a lease alone: every half the shortest heartbeat interval (5 s
 * at the default TTL), so an idle worker's main thread wakes that seldom.
 */
const WATCH_IDLE_MS = 10_000

/**
 * How long a handler stopped by the worker's shutdown may take to stop before the worker reports
 * it failed `shutdown` and ends its thread (at most the usual abort grace). Shorter than the time a
 * host's pool gives a draining local worker past its grace ({@link DRAIN_KILL_AFTER_MS}), with
 * room to report and exit: a worker that waited the usual 5 s was killed as it reported, and the
 * attempt was recorded as a crashed worker's (`lease_expired`, `worker_exited`).
 */
export const SHUTDOWN_ABORT_GRACE_MS = DRAIN_KILL_AFTER_MS - 2_000

/** The default number of handler threads: enough for handlers that compute, few enough to stay cheap. */
const MAX_DEFAULT_THREADS = 4
/**
 * Threads a slot starts before the worker's start fails. A module at fault is skipped after the
 * one death that names it (thread-crashes.ts); deaths nothing explains (EMFILE loading the
 * modules, say) that last through this many replacements, ~1.5 s of backoff, end the start: the
 * worker exits 1 rather than stays up taking nothing.
 */
const START_ATTEMPTS = 5

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
 * An attempt this worker runs now. Everything the runtime keeps of a run is the attempt's, keyed
 * by its `attempt_id`, never by its job's id: a job whose lease was lost while its handler still
 * runs (the worker stalled past the lease's TTL) may be granted again to this same worker, and
 * its two attempts then run side by side, each heartbeated, answered and ended as its own.
 */
interface Running {
  claim: Claim
  thread: HandlerThread<Running>
  /** Its run's number in its thread. */
  run: number
  /** Its entry in the job table, for a job a driving thread claimed (-1: one the runtime claimed). */
  entry: number
  startedAt: number
  /** The files it holds through the gate (none until it passes the gate). */
  heldFiles: Set<string> | null
  progress: number | null
  note: string | null
  stopReason: StopReason | null
  /** The handler has returned: a late answer must not stop anything. */
  ended: boolean
  /** Abort the job's calls at the file gate while they wait there (a handler may write several files at once). */
  gateStops: Set<AbortController> | null
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
  /** At most one heartbeat per attempt (keyed by its attempt_id): the latest progress wins. */
  heartbeat: Map<string, NonNullable<ExchangeRequest['heartbeat']>[number]>
  complete: NonNullable<ExchangeRequest['complete']>
  fail: NonNullable<ExchangeRequest['fail']>
}

const emptyOutbox = (): Outbox => ({ heartbeat: new Map(), complete: [], fail: [] })

/** Heartbeats without their notes (up to 10,000 characters each): what is left of a job's heartbeat is small. */
const withoutNotes = (heartbeats: Outbox['heartbeat']): Outbox['heartbeat'] =>
  new Map([...heartbeats].map(([attemptId, { note: _note, ...beat }]) => [attemptId, beat]))

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
 * shares one thread (thread-placement.ts): a batch of no-op jobs wakes one thread once (their
 * ends come back one by one: handler-thread.ts `endsOut`).
 *
 * A worker's first thread claims, runs and reports its own jobs straight to the host instead
 * (driver.ts: over a local worker's link, or over HTTP or Redis in `leasehold worker`); the
 * runtime then claims nothing — but for the other threads while a handler blocks that thread
 * ({@link askIfBlocked}) — and answers for those jobs through the job table the two threads
 * share (job-table.ts): it takes over any it finds there when it looks, and those the thread
 * gives it.
 */
export class WorkerRuntime {
  private readonly stopClaiming = new AbortController()
  /** The attempts running now, by attempt_id (see {@link Running}). */
  private readonly running = new Map<string, Running>()
  /** How long each job type's runs typically take (see thread-placement.ts). */
  private readonly runTimes: RunTimes
  private threads: HandlerThread<Running>[] = []
  private outbox = emptyOutbox()
  /** Slots asked for by claims in flight. */
  private reserved = 0
  private polling = false
  private reporting = false
  /** Resolves once the worker has stopped claiming and every job has ended and been reported. */
  private drained: (() => void) | null = null
  /** Once {@link stop} is asked: when its grace ends, the timer that ends it, and the stop itself. */
  private stopping: { graceEnds: number; timer: NodeJS.Timeout; done: Promise<void> } | null = null
  /** After a failed exchange, the next one waits until then. */
  private pauseUntil = 0
  /** Why the host refuses this worker, once it has (see {@link refused}). */
  private refusal: HostError | null = null
  /** Completions and failures dropped since the host refused this worker: said in one line as it stops. */
  private droppedAfterRefusal = 0
  /** Looks again when the claim's pace allows it, or sends the long-poll that short jobs' reports were to carry, should they end late. */
  private pollTimer: NodeJS.Timeout | undefined
  /** When {@link pollTimer} fires (performance.now()). */
  private pollAt = Infinity
  /**
   * What the runtime keeps from one exchange to the next: the report budget, the claims' pace,
   * whether the host is out of reach (for the log: the runtime's own transport goes where its
   * driving thread's route does, so the route names the host).
   */
  private readonly steps: ExchangeSteps
  /** The slots a driving thread claims for (job-table.ts); none when no thread drives. */
  private readonly table: JobTable | null
  /** The runtime claims the worker's jobs itself: no thread drives them (no route, or a link that failed or closed). */
  private claimsHere: boolean
  /** The driving threads (one, or two while one is replaced) and their numbers in the table, until they exit, unlink or drain. */
  private readonly drivers = new Map<HandlerThread<Running>, number>()
  private lastOwner = 0
  /** {@link begin} has been called: a driving thread that starts later begins at once. */
  private begun = false
  /**
   * The job types the handler threads run, and the file each user module's types came from: the
   * runtime's claims take only those (less a module's once it is skipped, see {@link claimTypes}),
   * so no job is granted here only to fail `no_handler`.
   */
  private handlerTypes: { types: string[]; fileOf: Record<string, string> } | undefined
  /** Looks in the table for the driving threads' jobs (see {@link watch}). */
  private watchTimer: NodeJS.Timeout | undefined
  /** How many jobs the threads had taken at the watch's last tick that saw the count move, and when. */
  private watched = { takes: 0, since: performance.now() }
  /** The watch looks only every half the shortest heartbeat interval (see {@link watchMaySlow}). */
  private watchSlow = false
  /** Handler threads that died in a row before running a job (thread-crashes.ts), and the timers of their replacements. */
  private deathsBeforeWork = 0
  private readonly restartTimers = new Set<NodeJS.Timeout>()
  /** Handler modules found at fault so (absolute paths): the threads started from now on skip them. */
  private readonly skipped = new Set<string>()
  /** The modules each thread was started to skip: one that did not skip a module found at fault since has it loaded. */
  private readonly skipsOf = new Map<HandlerThread<Running>, ReadonlySet<string>>()
  /** Threads that loaded a module found at fault and still ran jobs then: they take no more, and are replaced once their jobs end (see {@link retireLoaders}). */
  private readonly retiring = new Set<HandlerThread<Running>>()
  /** Modules found at fault before {@link start} resolved: among its problems; null once it has. */
  private startProblems: { file: string; error: string }[] | null = []
  /** How many jobs the table had had taken when each driving thread started: one that took any ran jobs. */
  private readonly takesAtStart = new Map<HandlerThread<Running>, number>()
  /** Threads started so far, and the number of the one whose types {@link handlerTypes} are (see {@link typesOf}). */
  private threadsStarted = 0
  private typesFrom = 0
  /** Called when a thread takes the place of one that exited (see {@link readyThread}). */
  private readonly onReplaced = new Set<() => void>()
  /** Driving threads asked at a tick of the watch whether their turns still come, not answered yet (see {@link askIfBlocked}). */
  private readonly pinged = new Set<HandlerThread<Running>>()
  /** Driving threads a handler blocks (a ping unanswered for a tick): the runtime claims for the other threads until they answer. */
  private readonly blocked = new Set<HandlerThread<Running>>()

  /** Where the handler threads' messages go, for every job. */
  private readonly listener: RunListener<Running> = {
    // Progress goes to the host with the next exchange (one heartbeat per job at most).
    progress: (job, fraction, note) => {
      if (fraction !== null) job.progress = fraction
      if (note !== null) job.note = note
      this.queueBeat(job)
    },
    log: (job, line) => this.options.log(jobLogLine(job.claim, line)),
    gate: (job, file) => this.gate(job, file),
    end: (job, outcome) => this.finish(job, outcome),
    line: (text) => this.options.log(text),
    exited: (thread, death) => this.threadExited(thread, death),
    adopt: (thread, entries) => this.adopt(thread, entries.map((entry) => this.table!.read(entry))),
    handOver: (_thread, entry, claim) => this.startJobs([{ claim, thread: this.threads[this.leastLoaded()]!, entry }]),
    unlinked: (thread, reports) => {
      this.putBack({ heartbeat: new Map(), ...reports })
      this.driverGone(thread, false)
    },
    pong: (thread) => this.threadAnswered(thread),
    look: () => {
      this.watchSlow = false
      clearTimeout(this.watchTimer)
      this.watchTimer = undefined
      this.watch()
    },
    drained: (thread) => {
      this.drivers.delete(thread)
      this.retireIfIdle(thread)
      this.checkDrained()
    },
    refused: (error) => this.refused(error),
  }

  constructor(private readonly options: RuntimeOptions) {
    this.runTimes = new RunTimes(options.shortRunMs)
    this.steps = new ExchangeSteps(new HostContact(reachedAgainLine(options.workerId, options.drive)), options.claimWaitMs)
    this.table = options.drive ? new JobTable(options.concurrency) : null
    this.claimsHere = !this.table
  }

  private get threadCount(): number {
    return Math.max(1, this.options.threads ?? Math.min(this.options.concurrency, MAX_DEFAULT_THREADS))
  }

  /** Starts the handler threads; says which job types they run and which modules failed to load. */
  async start(): Promise<{ types: string[]; problems: { file: string; error: string }[] }> {
    // The worker's process (a local worker, `leasehold worker`) keeps its heaps near what they use.
    boundHeapGrowth()
    const ignored = ignoredHandlerFiles(this.options.handlers.handlersDir)
    if (ignored.length > 0) this.options.log(`leasehold worker: ${ignored.join(', ')} in ${this.options.handlers.handlersDir} not loaded: only *.mjs files are loaded as handlers`)
    this.threads = Array.from({ length: this.threadCount }, (_, index) => this.newThread(index))
    try {
      const ready = await Promise.all(this.threads.map((_, index) => this.readyThread(index)))
      const problems = [...ready[0]!.problems, ...this.startProblems!]
      this.startProblems = null
      return { types: this.claimTypes()!, problems }
    } catch (error) {
      // Threads that kept ending before they were ready (EMFILE loading their modules, say): the
      // worker cannot run. What it started ends — the other threads, the replacements, the
      // transport — so that its process exits rather than stays up taking nothing.
      this.stopClaiming.abort()
      await this.end()
      throw error
    }
  }

  /**
   * The thread at `index` once it is ready: one that dies first is waited for in its replacement
   * (see {@link threadExited}), up to {@link START_ATTEMPTS} threads in all; then the start fails.
   */
  private async readyThread(index: number): Promise<Awaited<ReturnType<HandlerThread<Running>['whenReady']>>> {
    for (let attempt = 1; ; attempt++) {
      const thread = this.threads[index]!
      try {
        return await thread.whenReady()
      } catch (error) {
        if (this.stopClaiming.signal.aborted || attempt >= START_ATTEMPTS) throw error
        if (this.threads[index] === thread) await new Promise<void>((resolve) => this.onReplaced.add(resolve))
      }
    }
  }

  /**
   * A handler thread. The first drives its own jobs (driver.ts) when the worker has a route for
   * it and no driving thread has failed to link or lost its link: the runtime then claims
   * nothing and watches that thread's jobs through the table.
   */
  private newThread(index: number): HandlerThread<Running> {
    const handlers = { ...this.options.handlers, skip: [...this.skipped] }
    const { drive: route, workerId, streams, gpu } = this.options
    const drives = index === 0 && route !== undefined && this.table !== null && !this.claimsHere && !this.stopClaiming.signal.aborted
    if (!drives) return this.typesOf(new HandlerThread(handlers, this.listener))
    const owner = ++this.lastOwner
    const drive = { table: this.table.buffer as SharedArrayBuffer, owner, worker_id: workerId, streams, gpu, claimWaitMs: this.steps.claimWaitMs, handsOverLong: this.threadCount > 1, shortRunMs: this.options.shortRunMs }
    const thread = new HandlerThread(handlers, this.listener, { route, thread: index, ...drive })
    this.drivers.set(thread, owner)
    this.takesAtStart.set(thread, this.table.takes())
    if (this.begun) thread.post({ type: 'begin' })
    void thread.whenReady().then(
      ({ driving }) => (driving ? this.watch() : this.driverGone(thread, false)),
      () => {}, // it exited: see driverGone
    )
    return this.typesOf(thread)
  }

  /**
   * The job types the runtime claims are those of the thread started last that is ready (one that
   * skips a module at fault runs fewer), whichever thread is ready first.
   */
  private typesOf(thread: HandlerThread<Running>): HandlerThread<Running> {
    const started = ++this.threadsStarted
    this.skipsOf.set(thread, new Set(this.skipped))
    thread.whenReady().then(
      ({ types, fileOf }) => {
        if (started < this.typesFrom) return
        this.typesFrom = started
        this.handlerTypes = { types, fileOf }
      },
      () => {},
    )
    return thread
  }

  /** The job types claimed: those of {@link typesOf}'s thread, less those of modules skipped since it loaded them. */
  private claimTypes(): string[] | undefined {
    const loaded = this.handlerTypes
    if (!loaded || this.skipped.size === 0) return loaded?.types
    return loaded.types.filter((type) => {
      const file = loaded.fileOf[type]
      return file === undefined || !this.skipped.has(file)
    })
  }

  /**
   * Every so often — half the shortest heartbeat interval of the jobs the driving threads have
   * claimed, at most a second; a thread that claims a job with a shorter one says so at once — the
   * runtime takes over every job they still run (job-table.ts),
   * and heartbeats it from then on. A job that ends before that is never seen here; one that
   * runs longer, or blocks its thread from its start, has its first heartbeat at most about one
   * and a half intervals after its grant: half its lease's TTL. With no job taken for
   * `watchIdleMs` the watch looks only every half interval, which still keeps that bound, and
   * the thread that takes the next job tells it to keep its pace again, with the messages of
   * that turn: not before the handler starts, which waking the runtime's thread would delay
   * (docs/performance.md, "An idle host"), so a handler that blocks its thread from its start is
   * taken over at the slow pace.
   */
  private watch(): void {
    if (this.watchTimer || this.drivers.size === 0) return
    this.watchTimer = setTimeout(() => {
      this.watchTimer = undefined
      for (const [thread, owner] of this.drivers) {
        this.adopt(thread, this.table!.takeOver(owner))
        this.askIfBlocked(thread)
      }
      this.watchSlow = this.watchMaySlow()
      this.watch()
    }, this.watchSlow ? this.table!.shortestBeatMs() / 2 : Math.min(1000, this.table!.shortestBeatMs() / 2))
  }

  /**
   * At a tick, a driving thread that still runs a job the runtime took over may be blocked by it
   * (a handler that computes without yielding), and a blocked thread claims nothing: the worker
   * would take no job while it has free slots and idle threads. The thread is asked to answer (a
   * ping, a message it answers in its next turn); one that has not answered by the next tick is
   * blocked, and the runtime claims for the worker's other threads until it answers
   * ({@link threadAnswered}). Only a thread that runs a job past a tick is asked: a driving thread's
   * short jobs cost no message.
   */
  private askIfBlocked(thread: HandlerThread<Running>): void {
    if (this.threads.length < 2) return // no other thread to claim for
    if (!this.pinged.has(thread)) {
      if (thread.load === 0) return
      this.pinged.add(thread)
      return thread.post({ type: 'ping' })
    }
    if (this.blocked.has(thread)) return
    this.blocked.add(thread)
    const jobs = [...this.running.values()].filter((job) => job.thread === thread).map((job) => job.claim.job_id)
    this.options.log(`leasehold worker: the driving thread does not answer, a handler blocking it (${jobs.join(', ')}); the runtime claims for the other threads until it answers`)
    this.pump()
  }

  /**
   * A driving thread answered a ping: its turns come, and if it was blocked it claims again. A
   * long-poll the runtime has in flight for it runs its course (given up, the jobs the host
   * grants it as it is given up would be leased to no one until their leases expired): its jobs
   * go to the other threads, and the thread claims meanwhile for the slots it leaves.
   */
  private threadAnswered(thread: HandlerThread<Running>): void {
    this.pinged.delete(thread)
    if (this.blocked.delete(thread)) this.options.log('leasehold worker: the driving thread answers again; it claims again, the runtime no more')
  }

  /**
   * After a tick, which took over every job the threads still ran: whether the watch slows down,
   * no job having been taken for `watchIdleMs`. The next job taken says to look (`look`).
   */
  private watchMaySlow(): boolean {
    const takes = this.table!.takes()
    const now = performance.now()
    if (takes !== this.watched.takes) {
      this.watched = { takes, since: now }
      return false
    }
    return now - this.watched.since >= (this.options.watchIdleMs ?? WATCH_IDLE_MS) && this.table!.slowWatch(takes)
  }

  /**
   * A handler thread has exited: a handler ended it (`process.exit`, running out of memory, an
   * uncaught error), or it was terminated as stuck or retired (see {@link retireLoaders}). Its runs
   * have ended as `thread_exited`; a driving thread's own jobs are taken over and end so too.
   * Unless the worker is stopping, a new thread takes its place (a thread replaced as stuck or
   * retired already has one, and is no death before work, thread-crashes.ts): without it, every job
   * later placed there would end at once, and a dead thread, running nothing, is the one the
   * runtime finds least loaded.
   */
  private threadExited(thread: HandlerThread<Running>, death: ThreadDeath): void {
    const takes = this.takesAtStart.get(thread)
    this.takesAtStart.delete(thread)
    this.skipsOf.delete(thread)
    this.retiring.delete(thread)
    const ranJobs = death.ranJobs || (takes !== undefined && this.table!.takes() > takes)
    this.driverGone(thread, true)
    const index = this.threads.indexOf(thread)
    const stopping = this.stopClaiming.signal.aborted
    const early = index >= 0 && diedBeforeWork({ ...death, ranJobs })
    const module = early && death.cause ? moduleAtFault(death.cause, this.options.handlers.handlersDir) : null
    if (module !== null && !this.skipped.has(module)) this.blame(module, death.cause!)
    // The next thread skips a module at fault, and so need not wait; otherwise the deaths in a
    // row before any job wait longer and longer (thread-crashes.ts).
    const restart = early && module === null ? nextThreadRestart(this.deathsBeforeWork) : { failures: 0, delayMs: 0 }
    if (index >= 0 || ranJobs) this.deathsBeforeWork = early ? restart.failures : 0
    if (death.cause) {
      const again = restart.failures > 1 ? `; ${restart.failures} threads in a row died so before running a job, the next starts in ${restart.delayMs} ms` : ''
      this.options.log(`leasehold worker: a handler thread ended on an uncaught error: ${death.cause.stack ?? death.cause.message}${again}`)
    }
    if (index < 0 || stopping) return this.pump()
    const replace = () => {
      if (!this.stopClaiming.signal.aborted && this.threads[index] === thread) this.replaceAt(index)
    }
    if (restart.delayMs === 0) return replace()
    const timer = setTimeout(() => {
      this.restartTimers.delete(timer)
      replace()
    }, restart.delayMs)
    this.restartTimers.add(timer)
    this.pump()
  }

  /**
   * A handler module whose uncaught error ended a thread just after it loaded: reported once as a
   * module that did not load, and skipped by the threads started from now on. Its job types are
   * claimed no more, and the other threads that loaded it are replaced (see {@link retireLoaders}).
   */
  private blame(module: string, cause: Error): void {
    this.skipped.add(module)
    const problem = { file: module, error: `threw as it loaded, ending its thread (skipped from now on): ${cause.message.split('\n')[0]}` }
    if (this.startProblems) this.startProblems.push(problem)
    else this.options.onProblem?.(problem)
    this.retireLoaders(module)
  }

  /**
   * The other threads that loaded a module found at fault run its code too, and would most likely
   * die of it soon after: a job placed there would lose its attempt to another module's fault.
   * Each takes no more jobs, and is replaced by a thread that skips the module once it runs none:
   * at once if it runs none now. A driving thread is told to drain first (it claims no more, and
   * reports what it ran), and is replaced once it has.
   */
  private retireLoaders(module: string): void {
    for (const thread of this.threads) {
      if (thread.exited || this.retiring.has(thread) || this.skipsOf.get(thread)?.has(module)) continue
      this.retiring.add(thread)
      if (this.drivers.has(thread)) thread.post({ type: 'drain' })
      else this.retireIfIdle(thread)
    }
  }

  /** A thread being retired (see {@link retireLoaders}) that runs no job any more ends, and a new thread takes its place. */
  private retireIfIdle(thread: HandlerThread<Running>): void {
    if (!this.retiring.has(thread) || thread.load > 0 || this.drivers.has(thread)) return
    this.retiring.delete(thread)
    const index = this.threads.indexOf(thread)
    if (index < 0 || this.stopClaiming.signal.aborted) return
    this.replaceAt(index)
    void thread.terminate()
  }

  /** A new thread at `index`: what waited for a replacement there ({@link readyThread}) waits for it. */
  private replaceAt(index: number): void {
    this.threads[index] = this.newThread(index)
    for (const replaced of this.onReplaced) replaced()
    this.onReplaced.clear()
    this.pump()
  }

  /**
   * A driving thread has gone: it exited (the jobs it still reported itself end now as
   * thread_exited; {@link threadExited} starts a new first thread, which drives), failed to link,
   * or lost its link (it gave the runtime its jobs and reports first): the runtime claims from now on.
   */
  private driverGone(thread: HandlerThread<Running>, exited: boolean): void {
    const owner = this.drivers.get(thread)
    if (owner === undefined) return
    this.drivers.delete(thread)
    this.pinged.delete(thread)
    this.blocked.delete(thread)
    this.adopt(thread, this.table!.takeOver(owner, exited))
    if (!exited) this.claimsHere = true
    this.pump()
  }

  /**
   * Takes on jobs a driving thread started (found in the table, or given by the thread): from
   * now on the runtime heartbeats them, holds them to their runtime limit, and reports their end.
   */
  private adopt(thread: HandlerThread<Running>, taken: TakenJob[]): void {
    if (taken.length === 0) return
    const now = Date.now()
    const jobs: Running[] = []
    for (const { entry, claim, run, startedAt, outcome } of taken) {
      this.options.transport.leaseHeld?.(claim.lease_ttl_seconds)
      const job = this.track(claim, thread, entry, performance.now() - (now - startedAt))
      job.run = run
      // Its handler had ended, the thread's report of it not sent before the thread exited: that end is reported.
      if (outcome) this.finish(job, outcome)
      else {
        thread.adopt(run, job)
        jobs.push(job)
      }
    }
    this.heartbeat(jobs)
  }

  /** Begins claiming, once {@link start} has succeeded (a worker that failed to start takes no work). */
  begin(): void {
    this.begun = true
    for (const thread of this.drivers.keys()) thread.post({ type: 'begin' })
    this.pump()
  }

  /**
   * Drains: stops claiming, lets running jobs finish for up to `graceMs`, then aborts them and
   * fails them as retryable, reports everything, and ends the handler threads. Asked again while
   * it drains, it is the same stop, its grace ending sooner if the new one does (`leasehold
   * worker`'s second Ctrl-C: 0).
   */
  stop(graceMs: number): Promise<void> {
    const graceEnds = performance.now() + graceMs
    if (!this.stopping) {
      this.stopping = { graceEnds, timer: setTimeout(() => this.graceOver(), graceMs), done: this.drain() }
    } else if (graceEnds < this.stopping.graceEnds) {
      clearTimeout(this.stopping.timer)
      this.stopping.graceEnds = graceEnds
      this.stopping.timer = setTimeout(() => this.graceOver(), graceMs)
    }
    return this.stopping.done
  }

  /** A stop's grace is over: the jobs still running are stopped, as `shutdown`. */
  private graceOver(): void {
    for (const [thread, owner] of this.drivers) this.adopt(thread, this.table!.takeOver(owner))
    for (const job of this.running.values()) this.stopJob(job, 'shutdown')
  }

  private async drain(): Promise<void> {
    this.stopClaiming.abort()
    clearTimeout(this.pollTimer)
    for (const thread of this.drivers.keys()) thread.post({ type: 'drain' })
    const drained = new Promise<void>((resolve) => (this.drained = resolve))
    this.checkDrained()
    await drained
    clearTimeout(this.stopping!.timer)
    for (const restart of this.restartTimers) clearTimeout(restart)
    clearTimeout(this.watchTimer)
    if (this.droppedAfterRefusal > 0) this.options.log(`leasehold worker: ${this.droppedAfterRefusal} report(s) dropped on the way out, the host refusing this worker; their leases expire on the host`)
    await this.end()
  }

  /** Ends the handler threads and the transport: the last step of a stop, or of a start that failed. */
  private async end(): Promise<void> {
    await Promise.all(this.threads.map((t) => t.terminate()))
    this.options.transport.close()
  }

  /**
   * The host refuses this worker itself, not one request (its token, say, was revoked): asking
   * again cannot help, and each request would be refused again. The worker says why, once, and
   * from then on sends the host nothing: no claim, no report, no call of the file gate. Its
   * driving threads give it their jobs and reports; the running jobs end as the owner's stop
   * lets them (its grace), and their reports are dropped, counted in one line as it stops.
   */
  private refused(error: HostError): void {
    if (this.refusal) return
    this.refusal = error
    this.options.log(refusedLine(error, this.options.tokenSource))
    this.stopClaiming.abort()
    clearTimeout(this.pollTimer)
    for (const thread of this.drivers.keys()) thread.post({ type: 'refused' })
    this.options.onRefused?.(error)
  }

  /** Drops what waits to be sent to a host that refuses this worker, counting its completions and failures. */
  private dropOutbox(): void {
    this.droppedAfterRefusal += this.outbox.complete.length + this.outbox.fail.length
    this.outbox = emptyOutbox()
  }

  /**
   * The slots the runtime claims for: the worker's free slots when it claims every job itself;
   * while a driving thread is blocked ({@link askIfBlocked}), the job table's free entries less
   * those the thread's claims in flight and the runtime's ask for; otherwise none.
   */
  private get free(): number {
    // No thread takes jobs (each waits for its replacement, thread-crashes.ts): a job claimed now would end at once.
    if (this.stopClaiming.signal.aborted || this.threads.every((thread) => this.takesNoJob(thread) || this.blocked.has(thread))) return 0
    if (this.claimsHere) return this.options.concurrency - this.running.size - this.reserved
    return this.blocked.size > 0 ? this.table!.freeForRuntime() : 0
  }

  private get hasReports(): boolean {
    return this.outbox.heartbeat.size + this.outbox.complete.length + this.outbox.fail.length > 0
  }

  /** Something changed: look at what to send once this turn's other changes are in. */
  private readonly pump = onceThisTurn(() => this.send())

  private send(): void {
    if (this.refusal) {
      this.dropOutbox()
      return this.checkDrained()
    }
    const wait = this.pauseUntil - performance.now()
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
      claimDueInMs: this.steps.pace.dueInMs(performance.now()),
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

  /** Looks again in `ms` (or sooner, if it already meant to): the claim's pace, or the short jobs' reports that were to carry the long-poll are late. */
  private pollLater(ms: number): void {
    const at = performance.now() + ms
    if (this.pollTimer && this.pollAt <= at) return
    clearTimeout(this.pollTimer)
    this.pollAt = at
    this.pollTimer = setTimeout(() => {
      this.pollTimer = undefined
      this.pollAt = Infinity
      this.pump()
    }, Math.ceil(ms))
  }

  /** One round trip: the reports gathered so far, and a claim for the free slots. */
  private async exchange(longPoll: boolean): Promise<void> {
    const { transport, workerId, streams, log } = this.options
    const outbox: Outbox = { heartbeat: this.outbox.heartbeat, ...this.steps.budget.take(this.outbox) }
    // The host answers each heartbeat in the order sent: the nth answer is for the nth attempt.
    const beaten = [...outbox.heartbeat.keys()]
    this.outbox = { ...this.outbox, heartbeat: new Map() }
    const maxJobs = claimSize(this.free)
    const heartbeat = outbox.heartbeat.size > 0 ? [...outbox.heartbeat.values()] : undefined
    const request = exchangeRequest(workerId, heartbeat, outbox, this.steps.claim(streams, this.claimTypes(), this.options.gpu, maxJobs, longPoll))
    this.reserved += maxJobs
    if (!this.claimsHere) this.table?.runtimeAsks(this.reserved)
    if (longPoll) this.polling = true
    else this.reporting = true
    let answer: ExchangeAnswer | null = null
    const sentAt = performance.now()
    try {
      answer = await transport.exchange(request, longPoll ? this.stopClaiming.signal : undefined)
    } catch (error) {
      const ends = outbox.complete.length + outbox.fail.length
      if (refusesWorker(error, ends)) this.refused(error)
      const reports = outbox.heartbeat.size + ends
      if (this.refusal) {
        this.droppedAfterRefusal += ends
      } else if (this.stopClaiming.signal.aborted) {
        // Stopping: a host that does not answer now is not waited for; the leases expire there.
        if (reports > 0) log(droppedLine(error as Error, reports))
      } else if (refusesReports(error)) {
        // Sent again at once, smaller (report-budget.ts); the heartbeats without their notes,
        // should they be what made the exchange too large.
        const heartbeat = tooLarge(error) ? withoutNotes(outbox.heartbeat) : outbox.heartbeat
        this.putBack({ heartbeat, ...this.steps.budget.afterRefused(outbox, error, log) })
      } else {
        this.pauseUntil = this.steps.retryAt(error as Error, log)
        this.putBack(outbox)
      }
    } finally {
      this.reserved -= maxJobs
      if (longPoll) this.polling = false
      else this.reporting = false
    }
    if (answer && longPoll && this.stopClaiming.signal.aborted && (outbox.complete.length > 0 || outbox.fail.length > 0)) {
      // The long-poll was given up on the way out, so its reports may not have reached the
      // host: they go again with the next exchange (completions and failures are idempotent).
      this.putBack(outbox)
    }
    if (answer) {
      this.steps.answered(answer, sentAt, maxJobs, longPoll && this.stopClaiming.signal.aborted, log)
      answer.heartbeats.forEach((a, i) => this.onHeartbeatAnswer(a, beaten[i]))
      reportsAnswered(answer, outbox.complete, this.outbox, log)
      this.place(answer.jobs)
    }
    // Only now that its jobs hold their entries: a driving thread never counts a slot twice.
    if (!this.claimsHere) this.table?.runtimeAsks(this.reserved)
    this.pump()
  }

  /**
   * Reports of an exchange that did not reach the host go out with the next one: completions
   * and failures are idempotent, and a heartbeat sent late is still a heartbeat. (Should the
   * host stay away past the leases' TTL, they expire there and the reports are refused.) A
   * stopping worker does not wait for a host that does not answer.
   */
  private putBack(outbox: Outbox): void {
    for (const [attemptId, beat] of outbox.heartbeat) if (!this.outbox.heartbeat.has(attemptId)) this.outbox.heartbeat.set(attemptId, beat)
    putBackReports(this.outbox, outbox)
  }

  /** The host's answer to the heartbeat of the attempt `attemptId`. */
  private onHeartbeatAnswer(answer: HeartbeatAnswer, attemptId: string | undefined): void {
    const job = attemptId === undefined ? undefined : this.running.get(attemptId)
    if (!job || job.ended || job.claim.job_id !== answer.job_id) return // a late answer for an attempt that has ended
    // A heartbeat refused as invalid (its note or progress) leaves the lease as it was: the job runs on, and its next beat may hold.
    if (!answer.ok && answer.code === 'invalid_request') return this.options.log(`leasehold worker: the host refuses the heartbeat of ${answer.job_id} as invalid (${answer.detail})`)
    if (!answer.ok) return this.stopJob(job, 'lease_lost')
    if (answer.cancel_requested) return this.stopJob(job, 'canceled')
    if (this.refusal) return // an answer to an exchange sent before the refusal: the host is asked nothing more
    for (const file of job.heldFiles ?? []) {
      // A file the host says the job no longer holds (it went idle while the host was away, an
      // operator took it) is no longer heartbeated; the job's next change to it asks the gate
      // again, as every change does. A host that did not answer is asked with the next beat.
      void this.options.transport.heartbeatFile({ file, ...gateRequest(job.claim) }).catch((error: unknown) => {
        if (!hostAway(error)) job.heldFiles?.delete(file)
      })
    }
  }

  private checkDrained(): void {
    if (this.drained && this.running.size === 0 && this.drivers.size === 0 && !this.hasReports && !this.reporting && !this.polling) {
      this.drained()
      this.drained = null
    }
  }

  /**
   * Starts a batch of claimed jobs, on the threads thread-placement.ts picks (a batch of short
   * jobs shares one thread). The jobs of the batch heartbeat together.
   */
  private place(claims: Claim[]): void {
    const threads = this.threads
    // Claimed while a driving thread was blocked: the jobs go to the other threads, and each holds
    // an entry of the job table, so that the driving thread's claims leave its slot to it.
    const standIn = !this.claimsHere && this.table !== null
    const placed = placeBatch(
      claims.map((claim) => claim.job_type),
      threads.map((thread) => (this.takesNoJob(thread) || (standIn && this.drivers.has(thread)) ? Number.POSITIVE_INFINITY : thread.load)),
      (type) => this.runTimes.isShort(type),
    )
    this.startJobs(claims.map((claim, i) => ({ claim, thread: threads[placed[i]!]!, entry: standIn ? this.table!.reserve() : -1 })))
  }

  /** The least-loaded thread that does not drive, for a job a driving thread gave the runtime (any, when there is one thread). */
  private leastLoaded(): number {
    const loads = this.threads.map((thread) => ((this.drivers.has(thread) && this.threads.length > 1) || this.takesNoJob(thread) ? Number.POSITIVE_INFINITY : thread.load))
    return loads.indexOf(Math.min(...loads))
  }

  /** The thread has exited (it waits for its replacement), or is being retired (see {@link retireLoaders}). */
  private takesNoJob(thread: HandlerThread<Running>): boolean {
    return thread.exited || this.retiring.has(thread)
  }

  /** Starts jobs on their threads, and heartbeats them together. */
  private startJobs(jobs: { claim: Claim; thread: HandlerThread<Running>; entry: number }[]): void {
    this.heartbeat(
      jobs.map(({ claim, thread, entry }) => {
        const job = this.track(claim, thread, entry, performance.now())
        job.run = thread.start(jobInfo(claim), claim.payload, job)
        return job
      }),
    )
  }

  /** Heartbeats jobs together, those of one interval on one timer. */
  private heartbeat(jobs: Running[]): void {
    const byInterval = new Map<number, Running[]>()
    for (const job of jobs) {
      const seconds = job.claim.heartbeat_interval_seconds
      const together = byInterval.get(seconds)
      if (together) together.push(job)
      else byInterval.set(seconds, [job])
    }
    for (const [seconds, together] of byInterval) this.beatTogether(together, seconds * 1000)
  }

  /** A job the worker runs from now on (started at `startedAt`, by performance.now()): its runtime limit is timed from then. */
  private track(claim: Claim, thread: HandlerThread<Running>, entry: number, startedAt: number): Running {
    const job: Running = {
      claim,
      thread,
      run: 0,
      entry,
      startedAt,
      heldFiles: null,
      progress: null,
      note: null,
      stopReason: null,
      ended: false,
      gateStops: null,
      beats: null,
      runtimeTimer: undefined,
      graceTimer: undefined,
    }
    this.running.set(claim.attempt_id, job)
    if (claim.max_runtime_s) {
      const left = claim.max_runtime_s * 1000 - (performance.now() - startedAt)
      job.runtimeTimer = setTimeout(() => this.stopJob(job, 'max_runtime'), Math.max(0, left))
    }
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
    const { job_id, attempt_id, lease_token } = job.claim
    this.outbox.heartbeat.set(attempt_id, { job_id, lease_token, progress: job.progress, note: job.note })
    this.pump()
  }

  /** Tells the job's handler to stop; once told, it gets `abortGraceMs` before its thread is replaced. */
  private stopJob(job: Running, reason: StopReason): void {
    // Once the handler has ended, a late answer (a heartbeat in flight) must not abort anything.
    if (job.stopReason || job.ended) return
    job.stopReason = reason
    for (const stop of job.gateStops ?? []) stop.abort()
    job.thread.abort(job.run, reason)
    const graceMs = this.options.abortGraceMs ?? 5000
    job.graceTimer = setTimeout(() => this.replaceStuck(job), reason === 'shutdown' ? Math.min(graceMs, SHUTDOWN_ABORT_GRACE_MS) : graceMs)
  }

  private replaceStuck(job: Running): void {
    if (job.ended) return
    // A stopping worker starts no thread in its place: it would only load the handlers to be ended.
    const replace = !this.stopClaiming.signal.aborted
    this.options.log(`leasehold worker: the handler of ${job.claim.job_id} did not stop; ${replace ? 'replacing' : 'ending'} its thread`)
    const index = this.threads.indexOf(job.thread)
    if (index >= 0 && replace) this.threads[index] = this.newThread(index)
    void job.thread.terminate(`the handler of ${job.claim.job_id} did not stop, and its thread was ${replace ? 'replaced' : 'ended'}`) // other jobs of that thread end as thread_exited (retryable), naming it
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
    this.running.delete(claim.attempt_id)
    this.retireIfIdle(job.thread)
    if (job.entry >= 0) {
      // A job a driving thread claimed: its entry is free for that thread's next claim.
      this.table!.free(job.entry)
      for (const thread of this.drivers.keys()) thread.post({ type: 'freed', job_type: claim.job_type, ms: performance.now() - job.startedAt })
    }
    const { log } = this.options
    const { job_id, attempt_id, lease_token } = claim
    if (job.stopReason === 'lease_lost') {
      this.outbox.heartbeat.delete(attempt_id)
      log(`leasehold worker: lost the lease of ${job_id}; its result is dropped`)
    } else if (job.stopReason === 'blocked') {
      this.outbox.heartbeat.delete(attempt_id)
      log(`leasehold worker: ${job_id} halted on a file-lease blocker; an operator decides`)
    } else if (outcome.ok) {
      const completion: Outbox['complete'][number] = { job_id, attempt_id, lease_token, result: outcome.result }
      // A heartbeat not yet sent goes with the completion: its progress reaches the host all the same.
      const beat = this.outbox.heartbeat.get(attempt_id)
      if (beat) {
        this.outbox.heartbeat.delete(attempt_id)
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
   * the host has halted the job on a blocker, and the handler is stopped. A host that does not
   * answer, or answers that it is stopping, is asked again every second, as an exchange is: a
   * restart of the host costs the job no attempt. The wait ends as soon as the job is stopped
   * (cancelled, out of time, its lease lost) or the worker shuts down, so a handler waiting here
   * is never taken for one that would not stop.
   *
   * Every change asks, even of a file the job already holds (the host grants it again, as a
   * heartbeat): the job may have lost it since (an operator took it, or it went idle while the
   * host was away), and a write after that must be refused, not made beside its new holder's.
   */
  private async gate(job: Running, file: string): Promise<void> {
    const { transport, log } = this.options
    const { claim } = job
    const key = resolve(file)
    const held = (job.heldFiles ??= new Set())
    const request = { file: key, ...gateRequest(claim) }
    const stop = this.gateStop(job)
    try {
      const acquire = () => this.askGate(job, stop.signal, () => transport.acquireFile(request).catch((error) => tooEarlyAsHeld(error, key)))
      let answer = await acquire()
      if (!answer.granted && answer.code === 'file_lease_held') {
        log(`leasehold worker: ${key} is held; ${claim.job_id} waits for its one retry${answer.retry_at ? ` at ${answer.retry_at}` : ''}`)
        const wait = { file: key, owner_id: request.owner_id, max_wait_ms: 30_000 }
        while (!(await this.askGate(job, stop.signal, () => transport.waitFileRetry(wait, stop.signal)))) {
          if (stop.signal.aborted) throw stoppedAtGate(job)
        }
        answer = await acquire()
      }
      if (answer.granted) {
        held.add(key)
        return
      }
    } finally {
      stop.done()
    }
    this.stopJob(job, 'blocked')
    throw new GateStop('blocked', `${key} is still held after the retry: the job is halted until an operator answers`)
  }

  /**
   * A signal that aborts when the job is stopped or the worker begins to shut down (not
   * `AbortSignal.any`, which on Node 20 keeps every signal made from a long-lived one); `done`
   * once the job has left the gate.
   */
  private gateStop(job: Running): { signal: AbortSignal; done: () => void } {
    const stop = new AbortController()
    ;(job.gateStops ??= new Set()).add(stop)
    if (job.stopReason) stop.abort()
    const shutdown = () => stop.abort()
    this.stopClaiming.signal.addEventListener('abort', shutdown, { once: true })
    if (this.stopClaiming.signal.aborted) stop.abort()
    return {
      signal: stop.signal,
      done: () => {
        job.gateStops!.delete(stop)
        this.stopClaiming.signal.removeEventListener('abort', shutdown)
      },
    }
  }

  /** One call of the gate, asked again every second while the host does not answer or is stopping (5xx), until `signal` aborts. */
  private async askGate<T>(job: Running, signal: AbortSignal, call: () => Promise<T>): Promise<T> {
    for (let failures = 0; ; failures++) {
      if (signal.aborted) throw stoppedAtGate(job)
      try {
        return await call()
      } catch (error) {
        if (signal.aborted) throw stoppedAtGate(job)
        if (!hostAway(error)) throw error
        if (failures === 0) this.options.log(`leasehold worker: the file gate for ${job.claim.job_id}: ${exchangeFailure(error as Error)}; asking again every second`)
        await new Promise<void>((resolve) => {
          const timer = setTimeout(done, GATE_RETRY_MS)
          function done() {
            clearTimeout(timer)
            signal.removeEventListener('abort', done)
            resolve()
          }
          signal.addEventListener('abort', done, { once: true })
        })
      }
    }
  }
}

/** Whether a call failed because the host did not answer or answered that it is stopping (5xx), not because it refused it. */
function hostAway(error: unknown): boolean {
  return !(error instanceof LeaseLostError) && !(error instanceof GateRefusal) && !(error instanceof HostError && error.status < 500)
}

/** How long the gate waits before it asks a host that did not answer again. */
const GATE_RETRY_MS = 1000

/** Why a job left the gate without its file: it was stopped, or the worker is shutting down. */
function stoppedAtGate(job: Running): GateStop {
  return job.stopReason ? new GateStop(job.stopReason, `The job was stopped (${job.stopReason}) while it waited at the file gate`) : new GateStop('shutdown', 'The worker is shutting down')
}

/**
 * An acquire answered 429 `retry_too_early`: the host had already denied this requester (an
 * answer lost to a restart, say), so its one retry is fixed: the gate waits for it as for a denial.
 * One answered 400 is the host refusing the path itself (one it cannot key): every attempt would
 * ask for it the same way, so the change fails at once, not retried, naming the path.
 */
function tooEarlyAsHeld(error: unknown, file: string): FileAcquireAnswer {
  if (error instanceof HostError && error.status === 429) return { granted: false, code: 'file_lease_held', retry_at: null, holder: null }
  if (error instanceof HostError && error.status === 400) throw new GateRefusal(error.code, `The file gate refused ${shownPath(file)}: ${error.message}`)
  throw error
}

/**
 * A job's identity at the file-lease gate: its owner id, which blocker reports show (the job's),
 * and its lease with the lease's token, which proves the job is the worker's own.
 */
function gateRequest(claim: Claim): Omit<GateRequest, 'file'> {
  return { owner_id: jobOwnerId(claim.job_id), lease_id: claim.lease_id, lease_token: claim.lease_token }
}
