import { nextExchange, onceThisTurn } from './exchange-plan'
import { claimSize, exchangeRequest, ExchangeSteps } from './exchange-steps'
import { JobTable } from './job-table'
import { jobLogLine } from './run-log'
import { putBackReports, type Reports, refusesReports, reportsAnswered } from './report-budget'
import { RunTimes } from './thread-placement'
import type { FromThread, RunProgress } from './thread-protocol'
import { type AttemptError, type Claim, droppedLine, type ExchangeAnswer, type ExchangeRequest, HostContact, type HostRoute, refusesWorker } from './transport'

/**
 * A worker's driving thread: its first handler thread claims, runs and reports its own jobs
 * straight to the host — over its link (src-shared/thread-link.ts) in a local worker, over the
 * worker API or Redis Streams in `leasehold worker` — so a short job never wakes the worker's
 * main thread nor crosses from thread to thread: one round trip per batch of jobs, from the
 * thread that runs them. The runtime on the main thread still answers for each job through the
 * shared job table (job-table.ts): it takes over any job it finds running there when it looks,
 * and from then on heartbeats it, cancels it, holds it to its runtime limit and reports its end.
 * The thread gives the runtime a job itself when the job may run long (the runtime places it on
 * another thread), when its handler passes the file gate, and when the link closes.
 *
 * It talks to the host as the runtime does (exchange-plan.ts), with the same steps
 * (exchange-steps.ts): reports go as soon as no other report is in flight, and carry the claim
 * for the free entries when no long-poll is in flight.
 */

export interface DriveOptions {
  /** The table both threads share, and this thread's number in it. */
  table: SharedArrayBuffer
  owner: number
  worker_id: string
  streams: string[]
  /** The worker has a GPU (RuntimeOptions.gpu): its claims say so. */
  gpu?: boolean
  /** The job types this thread has handlers for: its claims take only those (set by the thread itself, once it has loaded them). */
  jobTypes?: string[]
  claimWaitMs: number
  /** Jobs that may run long go to the runtime, for its other threads (false when this is the only thread). */
  handsOverLong: boolean
  /** How short a job type's typical run must be for this thread to run it (thread-placement.ts). */
  shortRunMs?: number
}

/** What a handler thread is given to drive: the options, how it reaches the host, and its index among its worker's threads. */
export interface DriveAddress extends DriveOptions {
  route: HostRoute
  thread: number
}

export interface DriverDeps {
  /**
   * One exchange with the host; rejects when the host did not answer it. A long-poll whose
   * signal aborts resolves at once, with no jobs.
   */
  exchange(request: ExchangeRequest, signal?: AbortSignal): Promise<ExchangeAnswer>
  /** Starts the handler of a claimed job in this thread as run `run`. */
  start(claim: Claim, run: number): void
  /** A message to the runtime. */
  tell(message: FromThread): void
}

type Outcome = { ok: true; result: unknown } | { ok: false; error: AttemptError }

interface InFlight {
  longPoll: boolean
  asked: number
  /** When it left (performance.now()), for the claims' pace. */
  sentAt: number
  reports: Reports
  /** Aborts a long-poll given up on (the thread is draining): its answer's jobs are not run, its reports go again. */
  abandon: AbortController | null
  abandoned: boolean
}

/** What the thread knows of a job it runs. */
interface OwnRun {
  entry: number
  claim: Claim
  startedAt: number
}

const noReports = (): Reports => ({ complete: [], fail: [] })

/** Microtask turns the handlers started so far get before the next of an answer's jobs starts: enough for one that returns, or awaits what is already there, to end. */
const SETTLE_TICKS = 8

export class Driver {
  private outbox = noReports()
  private readonly inFlight = new Map<number, InFlight>()
  private nextId = 1
  /** Run numbers of the jobs this thread claims: negative, apart from those the runtime gives. */
  private nextRun = -1
  private readonly runs = new Map<number, OwnRun>()
  /**
   * The table entries of the jobs whose end this thread reports, by attempt: each is held
   * (job-table.ts, REPORTING) until the host has answered its report, so that should the thread
   * die first — a handler's stray rejection ends it just after the handler returned — the
   * runtime ends the job as `thread_exited` instead of its lease expiring unreported.
   */
  private readonly reportEntries = new Map<string, number>()
  private readonly runTimes: RunTimes
  private pauseUntil = 0
  /** What this thread keeps from one exchange to the next: the report budget, the claims' pace, the host's being out of reach. */
  private readonly steps: ExchangeSteps
  private lookAgain: NodeJS.Timeout | null = null
  private draining = false
  private saidDrained = false
  /** The link has closed: everything has gone to the runtime. */
  private unlinked = false
  /** While an answer's jobs start ({@link startAll}): the ends of its jobs since the last start. */
  private endedMeanwhile: { entry: number; outcome: Outcome }[] | null = null
  /** Answers whose jobs are starting. */
  private starting = 0

  private readonly table: JobTable

  /** `contact`: what it says of the host being out of reach, and back (transport.ts HostContact). */
  constructor(
    private readonly options: DriveOptions,
    private readonly deps: DriverDeps,
    contact = new HostContact(null),
  ) {
    this.table = new JobTable(options.table)
    this.runTimes = new RunTimes(options.shortRunMs)
    this.steps = new ExchangeSteps(contact, options.claimWaitMs)
  }

  private get polling(): boolean {
    return [...this.inFlight.values()].some((x) => x.longPoll && !x.abandoned)
  }

  private get reporting(): boolean {
    return [...this.inFlight.values()].some((x) => !x.longPoll)
  }

  private get free(): number {
    if (this.draining || this.unlinked) return 0
    return this.table.freeCount() - this.asked
  }

  /** The slots this thread's claims in flight ask for. */
  private get asked(): number {
    let asked = 0
    for (const x of this.inFlight.values()) if (!x.abandoned) asked += x.asked
    return asked
  }

  /**
   * Tells the table what this thread's claims in flight ask for, once per exchange that leaves or
   * is answered: a runtime that claims while this thread is blocked leaves those slots to it.
   */
  private publishAsked(): void {
    this.table.threadAsks(this.asked)
  }

  private get hasReports(): boolean {
    return this.outbox.complete.length + this.outbox.fail.length > 0
  }

  /** Something changed: look at what to send once this turn's other changes are in. */
  readonly pump = onceThisTurn(() => this.send())

  private send(): void {
    if (this.unlinked) return
    const wait = this.pauseUntil - performance.now()
    if (wait > 0) return void setTimeout(() => this.pump(), wait)
    const next = nextExchange({
      reports: this.hasReports,
      heartbeats: false,
      reporting: this.reporting,
      polling: this.polling,
      free: this.free,
      reportsDueInMs: null,
      claimDueInMs: this.steps.pace.dueInMs(performance.now()),
    })
    if (next && 'longPoll' in next) this.exchange(next.longPoll)
    else if (next) this.lookAgainIn(next.pollInMs)
    this.checkDrained()
  }

  private lookAgainIn(ms: number): void {
    if (this.lookAgain) return
    this.lookAgain = setTimeout(() => {
      this.lookAgain = null
      this.pump()
    }, Math.ceil(ms))
  }

  private exchange(longPoll: boolean): void {
    const { worker_id, streams, gpu, jobTypes } = this.options
    const reports = this.steps.budget.take(this.outbox)
    const asked = claimSize(this.free)
    const params = exchangeRequest(worker_id, undefined, reports, this.steps.claim(streams, jobTypes, gpu, asked, longPoll))
    const id = this.nextId++
    const abandon = longPoll ? new AbortController() : null
    this.inFlight.set(id, { longPoll, asked, sentAt: performance.now(), reports, abandon, abandoned: false })
    if (asked > 0) this.publishAsked()
    this.deps.exchange(params, abandon?.signal).then(
      (answer) => this.answered(id, answer),
      (error: Error) => this.failed(id, error),
    )
  }

  /** The host's answer to one of this thread's exchanges. */
  private answered(id: number, answer: ExchangeAnswer): void {
    const sent = this.inFlight.get(id)
    if (!sent) return // the link closed meanwhile: its reports went to the runtime
    this.inFlight.delete(id)
    this.steps.answered(answer, sent.sentAt, sent.asked, sent.abandoned, this.line)
    reportsAnswered(answer, sent.reports.complete, this.outbox, this.line)
    this.settled(sent.reports)
    // Jobs granted to a claim given up on are not run: the host expires their leases (it saw the
    // request abandoned, or sees the worker exit). The others all take their entries before any
    // handler starts, and only then is the claim no longer counted as asking: a handler that
    // blocks this thread leaves the table saying which slots are the worker's.
    const started = !sent.abandoned && !this.draining ? answer.jobs.map((claim) => this.take(claim)) : []
    if (sent.asked > 0) this.publishAsked()
    void this.startAll(started.filter((own) => own !== null))
    this.pump()
  }

  /**
   * Starts the handlers of an answer's jobs, one after another. Between two starts the handlers
   * started so far get a few microtask turns, so that those that return at once have ended, and
   * the ends whose reports have not left yet are kept in their table entries (keepOutcome): a
   * handler that computes without yielding holds this thread from its start, and its reports with
   * it, and should the thread then be replaced (the handler cancelled, or out of time), the
   * runtime reports those jobs done, not `thread_exited` (with attempts left, they would run
   * again). It costs no message: the reports still go together in the next exchange.
   */
  private async startAll(runs: { claim: Claim; run: number }[]): Promise<void> {
    this.starting++
    this.endedMeanwhile ??= []
    for (const [i, { claim, run }] of runs.entries()) {
      if (i > 0) {
        for (let tick = 0; tick < SETTLE_TICKS; tick++) await null
        this.keepUnsent()
      }
      this.deps.start(claim, run)
    }
    if (--this.starting === 0) this.endedMeanwhile = null
  }

  /** Keeps in the table how the jobs that ended while an answer's jobs start ended, their reports not having left. */
  private keepUnsent(): void {
    for (const { entry, outcome } of this.endedMeanwhile ?? []) this.table.keepOutcome(entry, outcome)
    this.endedMeanwhile = []
  }

  /**
   * An exchange that failed. One the host did not answer: its reports go with the next, in a
   * second. One whose reports the host refused (too large, invalid): they go again at once, as
   * the report budget says. A draining thread does not wait for a host that does not answer (as
   * the runtime does not): the reports are dropped, and their leases expire on the host. A host
   * that refuses the worker itself (refusesWorker) is not asked again: the runtime is told, to
   * stop the worker, and is given this thread's jobs and reports ({@link refused}).
   */
  private failed(id: number, error: Error): void {
    const sent = this.inFlight.get(id)
    if (!sent) return
    this.inFlight.delete(id)
    if (sent.asked > 0) this.publishAsked()
    const reports = sent.reports.complete.length + sent.reports.fail.length
    if (refusesWorker(error, reports)) {
      if (!sent.abandoned) putBackReports(this.outbox, sent.reports)
      this.deps.tell({ type: 'refused', status: error.status, code: error.code, detail: error.message })
      return this.refused()
    }
    if (this.draining) {
      if (reports > 0 && !sent.abandoned) this.line(droppedLine(error, reports))
      if (!sent.abandoned) this.settled(sent.reports)
    } else if (refusesReports(error)) {
      // Sent again at once, smaller (report-budget.ts); one dropped is settled.
      if (!sent.abandoned) {
        putBackReports(this.outbox, this.steps.budget.afterRefused(sent.reports, error, this.line))
        this.settled(sent.reports)
      }
    } else {
      this.pauseUntil = this.steps.retryAt(error, this.line)
      if (!sent.abandoned) putBackReports(this.outbox, sent.reports)
    }
    this.pump()
  }

  /**
   * Takes a table entry for a granted job, to run here (the run to start), or gives the job to
   * the runtime when it may run long (or its claim does not fit the table): null.
   */
  private take(claim: Claim): { claim: Claim; run: number } | null {
    const run = this.nextRun--
    const keep = !this.options.handsOverLong || this.runTimes.isShort(claim.job_type)
    const { entry, kept, look } = this.table.take(claim, run, this.options.owner, keep)
    if (look) this.deps.tell({ type: 'look' })
    if (!kept) {
      this.deps.tell({ type: 'hand-over', entry, claim })
      return null
    }
    this.runs.set(run, { entry, claim, startedAt: performance.now() })
    return { claim, run }
  }

  /** Whether `run` is a job this thread claimed. */
  claimed(run: number): boolean {
    return this.runs.has(run)
  }

  /** Whether this thread still reports `run` itself (the runtime has not taken it over). */
  holds(run: number): boolean {
    const own = this.runs.get(run)
    return own !== undefined && this.table.threadHolds(own.entry)
  }

  /** A log line of one of this thread's jobs, as the runtime writes a job's lines. */
  logLine(run: number, line: string): string {
    return jobLogLine(this.runs.get(run)!.claim, line)
  }

  /** Gives one of this thread's jobs to the runtime now (its handler is at the file gate, which the runtime keeps). */
  giveToRuntime(run: number): void {
    const own = this.runs.get(run)
    if (own && this.table.handOver(own.entry)) this.deps.tell({ type: 'adopt', entries: [own.entry] })
  }

  /**
   * A job this thread claimed has ended. True if the thread reports it (with the next exchange);
   * false if the runtime took it over, and is to be told of the end as of any run it knows.
   */
  ended(run: number, outcome: Outcome, progress: RunProgress | undefined): boolean {
    const own = this.runs.get(run)!
    this.runs.delete(run)
    this.runTimes.learn(own.claim.job_type, performance.now() - own.startedAt)
    if (!this.table.release(own.entry)) return false
    const { job_id, attempt_id, lease_token } = own.claim
    const latest = progress?.fraction != null || progress?.note != null ? { progress: progress.fraction, note: progress.note } : {}
    this.reportEntries.set(attempt_id, own.entry)
    this.endedMeanwhile?.push({ entry: own.entry, outcome })
    if (outcome.ok) this.outbox.complete.push({ job_id, attempt_id, lease_token, result: outcome.result, ...latest })
    else this.outbox.fail.push({ job_id, attempt_id, lease_token, error: outcome.error })
    this.pump()
    return true
  }

  /** A job the runtime ran for this thread's claim has ended after `ms`: its entry is free, and its type's run time is known. */
  freed(type: string, ms: number): void {
    this.runTimes.learn(type, ms)
    this.pump()
  }

  /**
   * The worker drains: no more claims. A long-poll in flight is given up on (its reports go
   * again: completions and failures are idempotent). Once every job of this thread has ended and
   * been reported, the runtime is told.
   */
  drain(): void {
    this.draining = true
    for (const sent of this.inFlight.values()) {
      if (!sent.longPoll || sent.abandoned) continue
      sent.abandoned = true
      putBackReports(this.outbox, sent.reports)
      sent.abandon?.abort()
    }
    this.publishAsked()
    this.pump()
    this.checkDrained()
  }

  private checkDrained(): void {
    if (!this.draining || this.saidDrained || this.hasReports || this.reporting) return
    if (this.table.heldBy(this.options.owner).length > 0) return
    this.saidDrained = true
    this.deps.tell({ type: 'drained' })
  }

  /**
   * A local worker's link has closed: the runtime takes every job this thread still reports, and
   * every report not known to have reached the host (completions and failures are idempotent),
   * and claims from now on itself.
   */
  linkLost(): void {
    this.leaveToRuntime()
  }

  /**
   * The host refuses this worker (the runtime heard it, or this thread did): the thread sends it
   * nothing more, each request would be refused again. It gives the runtime its jobs and its
   * reports as when its link closes; the runtime, stopping, drops the reports and says so once.
   */
  refused(): void {
    this.leaveToRuntime()
  }

  /** Gives the runtime every job this thread still reports and every report not known to have reached the host; the thread sends nothing more. */
  private leaveToRuntime(): void {
    if (this.unlinked) return
    this.unlinked = true
    const entries = this.table.heldBy(this.options.owner).filter((entry) => this.table.handOver(entry))
    if (entries.length > 0) this.deps.tell({ type: 'adopt', entries })
    for (const sent of this.inFlight.values()) if (!sent.abandoned) putBackReports(this.outbox, sent.reports)
    this.inFlight.clear()
    this.publishAsked()
    this.deps.tell({ type: 'unlinked', ...this.outbox })
    this.outbox = noReports()
    for (const entry of this.reportEntries.values()) this.table.reported(entry) // the runtime reports them now
    this.reportEntries.clear()
  }

  /**
   * The host has answered (or will never be asked again about) the reports `sent`: the entries of
   * those that are not to go again are free.
   */
  private settled(sent: Reports): void {
    const again = new Set([...this.outbox.complete, ...this.outbox.fail].map((r) => r.attempt_id))
    for (const { attempt_id } of [...sent.complete, ...sent.fail]) {
      const entry = this.reportEntries.get(attempt_id)
      if (entry === undefined || again.has(attempt_id)) continue
      this.reportEntries.delete(attempt_id)
      this.table.reported(entry)
    }
  }

  /** A line for the worker's log (one function for the driver's life, handed to the steps that log). */
  private readonly line = (text: string): void => this.deps.tell({ type: 'line', line: text })
}
