import { performance } from 'node:perf_hooks'
import { type Engine, PRUNE_BATCH, pruneCutoff } from '../engine'
import { MINUTE, SECOND } from '../engine/rules/clock'
import { DeletionLog } from './deletion-log'

/** How often retention runs, and how soon after the host starts. */
export const PRUNE_INTERVAL_MS = MINUTE
export const PRUNE_FIRST_DELAY_MS = 10 * SECOND

/** Rows that name no job deleted per step: events, schedule runs, and the file gate's rows of owners without a job. */
export const JOBLESS_EVENTS_BATCH = 500

/** Free pages given back per step: each step moves at most this many pages (a few ms). */
export const VACUUM_STEP_PAGES = 256

/**
 * Steps between two checkpoints of the WAL, per kind of step: about 500 pages written each time
 * (a few ms to copy). A checkpoint after every step would pay the file's sync each time; none
 * would leave the automatic one, every 10,000 pages, to make some commit copy 40 MB at once.
 */
const CHECKPOINT_EVERY = { jobs: 8, events: 8, stats: 8, pages: 2 } as const

/** What one pass did. */
export interface PrunePass {
  /** When it started, by the engine's clock (epoch ms). */
  at: number
  /** The retention period it applied, in days (0: finished jobs are kept). */
  retain_days: number
  jobs_deleted: number
  /** Events that named no job (capacity, busy rating, workers), deleted after the same period. */
  events_deleted: number
  /** Statistics rows deleted or thinned. */
  stats_rows: number
  /** Pages given back to the file system. */
  pages_returned: number
  /** The longest time one step (one transaction) held the write lock, ms. */
  longest_step_ms: number
  /** The longest checkpoint of the WAL between steps (it holds no lock, but the event loop waits), ms. */
  longest_checkpoint_ms: number
  /** Wall time of the whole pass, pauses between steps included, ms. */
  duration_ms: number
}

/** How the host hears of a pass's outcome (it logs failures at most once a minute). */
export interface PassHealth {
  ok(): void
  failed(error: unknown): void
}

export interface PrunerOptions {
  engine: Engine
  /** Days a finished job is kept after it finished; 0 keeps every job. */
  retainDays: number
  health: PassHealth
  /** Where what the passes deleted is said (deletion-log.ts): the first pass that deletes, then at most a line an hour. */
  log?: (line: string) => void
  intervalMs?: number
  firstDelayMs?: number
}

/** Lets the event loop run what waits (requests, their commits) between two steps. */
const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve))

/**
 * Retention on a timer (docs/retention.md): a pass soon after start and then once a minute
 * deletes the finished jobs older than the retention period (and the events, schedule runs and
 * file leases that name no job),
 * applies the statistics' own retention, and gives surplus free pages back to the file system.
 * Every step is one short transaction of the engine's, with a checkpoint of the WAL every few
 * steps; between steps the pass yields to the event loop, so a claim waits at most for one
 * step. What a pass deletes is decided by the engine's clock and the setting alone
 * (pruneCutoff); this class only paces the steps.
 */
export class Pruner {
  /** The last pass that completed, or null before the first. */
  last: PrunePass | null = null
  private timers: ReturnType<typeof setTimeout>[] = []
  private running: Promise<void> | null = null
  private stopped = false
  private readonly deletions: DeletionLog | null

  constructor(private readonly options: PrunerOptions) {
    this.deletions = options.log ? new DeletionLog(options.log) : null
  }

  get retainDays(): number {
    return this.options.retainDays
  }

  start(): void {
    const tick = () => void this.runPass()
    this.timers = [setTimeout(tick, this.options.firstDelayMs ?? PRUNE_FIRST_DELAY_MS), setInterval(tick, this.options.intervalMs ?? PRUNE_INTERVAL_MS)]
  }

  /** Runs a pass now, or joins the one in progress. Never rejects: a failure goes to `health`. */
  runPass(): Promise<void> {
    if (this.stopped) return Promise.resolve()
    this.running ??= this.pass()
      .then(
        (pass) => {
          if (pass) {
            this.last = pass
            this.deletions?.passed(pass)
          }
          this.options.health.ok()
        },
        (error: unknown) => this.options.health.failed(error),
      )
      .finally(() => (this.running = null))
    return this.running
  }

  /** Resolves once no pass is in progress (at once if none is). */
  async idle(): Promise<void> {
    await this.running
  }

  /** Stops the timers and waits for a pass in progress to end at its next step. */
  async stop(): Promise<void> {
    this.stopped = true
    for (const timer of this.timers) clearInterval(timer)
    this.timers = []
    await this.idle()
    this.deletions?.flush()
  }

  /** One pass; null when stopped before it finished. */
  private async pass(): Promise<PrunePass | null> {
    const { engine, retainDays } = this.options
    const started = performance.now()
    const at = engine.now()
    const cutoff = pruneCutoff(at, retainDays)
    let longestStep = 0
    let longestCheckpoint = 0
    const timed = (fn: () => unknown): number => {
      const t = performance.now()
      fn()
      return performance.now() - t
    }
    const checkpoint = async () => {
      await yieldToEventLoop()
      longestCheckpoint = Math.max(longestCheckpoint, timed(() => engine.checkpoint()))
    }
    /**
     * Runs steps until one reports it is done, with a checkpoint of the WAL every `every` steps
     * that wrote something and after the last; returns the sum of what they did, or null when
     * stopped.
     */
    const steps = async (fn: () => number, done: (n: number) => boolean, every: number): Promise<number | null> => {
      let total = 0
      let unchecked = 0
      for (;;) {
        if (this.stopped) return null
        let n = 0
        longestStep = Math.max(longestStep, timed(() => (n = fn())))
        total += n
        if (n > 0) unchecked += 1
        const finished = done(n)
        if (unchecked >= every || (finished && unchecked > 0)) {
          await checkpoint()
          unchecked = 0
        }
        if (finished) return total
        await yieldToEventLoop()
      }
    }
    let swept = false // retention's sweep over the jobs has ended its pass (prune.ts pruneFinishedJobs)
    const sweepStep = (before: number) => {
      const step = engine.pruneFinishedJobs(before, PRUNE_BATCH)
      swept = step.done
      return step.deleted
    }
    const jobs = cutoff === null ? 0 : await steps(() => sweepStep(cutoff), () => swept, CHECKPOINT_EVERY.jobs)
    if (jobs === null) return null
    // What names no job goes after the same period: a batch a step, until a step finds fewer.
    const jobless = (prune: (cutoff: number, limit: number) => number) =>
      cutoff === null ? 0 : steps(() => prune(cutoff, JOBLESS_EVENTS_BATCH), (n) => n < JOBLESS_EVENTS_BATCH, CHECKPOINT_EVERY.events)
    const events = await jobless(engine.pruneJoblessEvents)
    if (events === null) return null
    if ((await jobless(engine.pruneScheduleRuns)) === null) return null
    if ((await jobless(engine.pruneJoblessFiles)) === null) return null
    const stats = await steps(() => engine.pruneStats(), (n) => n === 0, CHECKPOINT_EVERY.stats)
    if (stats === null) return null
    const pages = await steps(() => engine.returnFreePages(VACUUM_STEP_PAGES), (n) => n === 0, CHECKPOINT_EVERY.pages)
    if (pages === null) return null
    return {
      at,
      retain_days: retainDays,
      jobs_deleted: jobs,
      events_deleted: events,
      stats_rows: stats,
      pages_returned: pages,
      longest_step_ms: longestStep,
      longest_checkpoint_ms: longestCheckpoint,
      duration_ms: performance.now() - started,
    }
  }
}
