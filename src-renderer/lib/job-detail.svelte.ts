import { eventMoves } from '../../src-shared/event-types'
import { describeError, overtaken, TERMINAL_STATES, type ApiClient, type Attempt, type Job, type JobResult, type LogEvent } from './api'
import { MAX_ID_CHARS } from '../../src-shared/limits'
import { newerJob, reduceJob } from './job-events'

/** Whether a text can be a job's id at all: the host takes no longer one (a longer one is refused, not looked up). */
export const isJobId = (id: string): boolean => id.length >= 1 && id.length <= MAX_ID_CHARS

/**
 * One job: its fields, result or error, its attempts (each with its worker, outcome and error)
 * and its event timeline. An event of the job joins the timeline at once and asks for a fresh
 * read, which brings the attempts up to date.
 */
export class JobDetailState {
  job = $state<Job | null>(null)
  result = $state<JobResult | null>(null)
  events = $state<LogEvent[]>([])
  /** Where the timeline's earlier events start, when the host holds more than it has sent (a long job's progress notes); null when every event is here. */
  earlierCursor = $state<string | null>(null)
  /** Whether earlier events were asked for: a refresh then keeps them and where they end. */
  private readEarlier = false
  attempts = $state<Attempt[]>([])
  /**
   * The action last asked of the host from this page: its button goes off or goes as the job
   * moves (Cancel job gives way to Retry, Retry to Cancel job), and the page hands the focus the
   * button had to the job's state.
   */
  asked = $state<'cancel' | 'retry' | 'run now' | null>(null)
  error = $state<string | null>(null)
  notFound = $state(false)
  loading = $state(false)
  /** Why the last cancel, retry or run-now failed. */
  actionError = $state<string | null>(null)
  /** Whether a cancel, retry or run-now is on its way to the host: the page's buttons are off until it is answered, so a double click sends one. */
  acting = $state(false)

  constructor(
    private readonly api: ApiClient,
    readonly jobId: string,
    /** False when the address names no job at all (a broken escape, an id longer than any): nothing is asked, and the page says there is no such job. */
    private readonly possible = isJobId(jobId),
  ) {
    if (!possible) this.notFound = true
  }

  async refresh(): Promise<void> {
    if (!this.possible) return
    this.loading = true
    try {
      const [{ job, result }, { attempts }, newest] = await Promise.all([
        this.api.getJob(this.jobId),
        this.api.jobAttempts(this.jobId),
        this.api.jobEvents(this.jobId),
      ])
      this.job = this.job ? newerJob(this.job, job) : job
      this.result = result
      this.attempts = attempts
      // Events never change once written: the newest page joins those already here.
      this.events = joinEvents(this.events, newest.events)
      if (!this.readEarlier) this.earlierCursor = newest.next_cursor
      this.error = null
    } catch (error) {
      this.notFound = (error as { status?: number }).status === 404
      this.error = describeError(error)
    } finally {
      this.loading = false
    }
  }

  /** Reads the page of the timeline before the earliest event read so far. */
  async loadEarlier(): Promise<void> {
    const cursor = this.earlierCursor
    if (cursor === null) return
    try {
      const page = await this.api.jobEvents(this.jobId, cursor)
      this.events = joinEvents(this.events, page.events)
      this.earlierCursor = page.next_cursor
      this.readEarlier = true
    } catch (error) {
      this.error = describeError(error)
    }
  }

  /** Adds an event of this job to the timeline; true when the job should be read again. */
  apply(event: LogEvent): boolean {
    // A queue paused or resumed changes why a job that has not ended waits: its waiting line is read again.
    if (eventMoves(event.type, 'queues')) return this.job !== null && !TERMINAL_STATES.has(this.job.state)
    if (event.job_id !== this.jobId) return false
    if (!this.events.some((e) => e.id === event.id)) this.events = [...this.events, event]
    if (this.job) this.job = reduceJob(this.job, event)
    return true
  }

  cancel(): Promise<void> {
    this.asked = 'cancel'
    return this.act(() => this.api.cancelJob(this.jobId, 'canceled from the dashboard'))
  }

  /** A failed, dead-lettered or canceled job back to the queue as a new run. */
  retry(): Promise<void> {
    this.asked = 'retry'
    return this.act(() => this.api.retryJob(this.jobId))
  }

  /** A scheduled (delayed) job runs now. */
  runNow(): Promise<void> {
    this.asked = 'run now'
    return this.act(() => this.api.runJobNow(this.jobId))
  }

  private async act(call: () => Promise<{ job: Job }>): Promise<void> {
    if (this.acting) return
    this.acting = true
    try {
      const { job } = await call()
      this.job = this.job ? newerJob(this.job, { ...this.job, ...job }) : job
      this.actionError = null
      void this.refresh() // the result, waiting reason and timeline as they now are
    } catch (error) {
      this.actionError = describeError(error)
      // Refused as overtaken (the job ended meanwhile): the page is behind the host, its event still to come.
      if (overtaken(error)) void this.refresh()
    } finally {
      this.acting = false
    }
  }
}

/** Two lists of a job's events as one, each event once, in id order. */
function joinEvents(had: LogEvent[], read: LogEvent[]): LogEvent[] {
  const ids = new Set(had.map((event) => event.id))
  return [...had, ...read.filter((event) => !ids.has(event.id))].sort((a, b) => a.id - b.id)
}
