import { describeError, type ApiClient, type Attempt, type Job, type JobResult, type LogEvent } from './api'
import { reduceJob } from './job-events'

/**
 * One job: its fields, result or error, its attempts (each with its worker, outcome and error)
 * and its event timeline. An event of the job joins the timeline at once and asks for a fresh
 * read, which brings the attempts up to date.
 */
export class JobDetailState {
  job = $state<Job | null>(null)
  result = $state<JobResult | null>(null)
  events = $state<LogEvent[]>([])
  attempts = $state<Attempt[]>([])
  error = $state<string | null>(null)
  notFound = $state(false)
  loading = $state(false)
  cancelError = $state<string | null>(null)

  constructor(
    private readonly api: ApiClient,
    readonly jobId: string,
  ) {}

  async refresh(): Promise<void> {
    this.loading = true
    try {
      const [{ job, result }, { attempts }, { events }] = await Promise.all([
        this.api.getJob(this.jobId),
        this.api.jobAttempts(this.jobId),
        this.api.jobEvents(this.jobId),
      ])
      this.job = job
      this.result = result
      this.attempts = attempts
      this.events = events
      this.error = null
    } catch (error) {
      this.notFound = (error as { status?: number }).status === 404
      this.error = describeError(error)
    } finally {
      this.loading = false
    }
  }

  /** Adds an event of this job to the timeline; true when the job should be read again. */
  apply(event: LogEvent): boolean {
    if (event.job_id !== this.jobId) return false
    if (!this.events.some((e) => e.id === event.id)) this.events = [...this.events, event]
    if (this.job) this.job = reduceJob(this.job, event)
    return true
  }

  async cancel(): Promise<void> {
    try {
      this.job = (await this.api.cancelJob(this.jobId, 'canceled from the dashboard')).job
      this.cancelError = null
    } catch (error) {
      this.cancelError = describeError(error)
    }
  }
}
