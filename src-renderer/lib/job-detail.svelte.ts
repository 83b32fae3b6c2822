import { describeError, type ApiClient, type Job, type JobResult, type LogEvent } from './api'
import { attemptsFromEvents, reduceJob } from './job-events'

/** One job: its fields, result or error, its event timeline and the attempts read from it. */
export class JobDetailState {
  job = $state<Job | null>(null)
  result = $state<JobResult | null>(null)
  events = $state<LogEvent[]>([])
  error = $state<string | null>(null)
  notFound = $state(false)
  loading = $state(false)
  cancelError = $state<string | null>(null)
  readonly attempts = $derived(attemptsFromEvents(this.events))

  constructor(
    private readonly api: ApiClient,
    readonly jobId: string,
  ) {}

  async refresh(): Promise<void> {
    this.loading = true
    try {
      const [{ job, result }, { events }] = await Promise.all([this.api.getJob(this.jobId), this.api.jobEvents(this.jobId)])
      this.job = job
      this.result = result
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
