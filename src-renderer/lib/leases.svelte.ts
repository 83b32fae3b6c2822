import { describeError, type ApiClient, type LogEvent } from './api'
import { leaseRow, mergeLeases, reduceLeases, sweepLeases, type LeaseRow } from './lease-events'

/**
 * The active job leases: who holds them, for what, until when, and how recently the holder
 * heartbeat. Read as the RUNNING/LEASED jobs and their leases; grants, expiries and job ends
 * arrive as events; heartbeats are not events, so `refresh` runs on a timer too.
 */
export class LeasesState {
  rows = $state<LeaseRow[]>([])
  error = $state<string | null>(null)
  loaded = $state(false)
  /** Job types by job id, for the table (leases do not carry them). */
  jobTypes = $state<Record<string, string>>({})

  constructor(
    private readonly api: ApiClient,
    private readonly hostNow: () => number,
  ) {}

  async refresh(): Promise<void> {
    const startedAt = this.hostNow()
    try {
      const pages = await Promise.all([this.api.listJobs({ state: 'RUNNING', limit: 500 }), this.api.listJobs({ state: 'LEASED', limit: 500 })])
      const jobs = pages.flatMap((p) => p.jobs)
      const leases = await Promise.all(
        jobs.filter((j) => j.lease_id).map((j) => this.api.getLease(j.lease_id!).then((r) => r.lease, () => null)),
      )
      const fetched = leases.filter((l) => l !== null && l.state === 'ACTIVE').map((l) => leaseRow(l!))
      this.jobTypes = { ...this.jobTypes, ...Object.fromEntries(jobs.map((j) => [j.job_id, j.job_type])) }
      this.rows = mergeLeases(this.rows, fetched, startedAt)
      this.error = null
    } catch (error) {
      this.error = describeError(error)
    } finally {
      this.loaded = true
    }
  }

  apply(event: LogEvent): void {
    if (event.type === 'JOB_SUBMITTED' && event.job_id && typeof event.data?.['job_type'] === 'string') {
      this.jobTypes[event.job_id] = event.data['job_type']
    }
    const next = reduceLeases(this.rows, event, this.hostNow())
    if (next !== this.rows) this.rows = next
  }

  /** Removes leases whose flash-out is over; called on each clock tick. */
  sweep(): void {
    const next = sweepLeases(this.rows, this.hostNow())
    if (next !== this.rows) this.rows = next
  }
}
