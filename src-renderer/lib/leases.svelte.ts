import { describeError, type ApiClient, type LogEvent } from './api'
import type { HostTime } from './host-time.svelte'
import { leaseRow, mergeLeases, movesLeases, reduceLeases, sweepLeases, type LeaseRow } from './lease-events'
import { ms } from './time-format'

/**
 * The active job leases: who holds them, for what, until when, and how recently the holder
 * heartbeat. `GET /api/leases` lists them with the host's clock, which sets the page's idea of
 * the host's time; grants, expiries and job ends arrive as events (a row appears or flashes out
 * at once, then the store reads again); heartbeats are not events, so while any lease is
 * active `refresh` runs on a timer too.
 */
export class LeasesState {
  /** Replaced whole, never changed in place: not made deeply reactive (a burst would proxy every row anew). */
  rows = $state.raw<LeaseRow[]>([])
  error = $state<string | null>(null)
  loaded = $state(false)
  /** Reads started, and the latest one whose answer is shown: an older answer that comes later is dropped. */
  private started = 0
  private shown = 0

  /** Whether any lease is active: only then do heartbeats move expiries, and only then are the leases read on a timer. */
  readonly holding = $derived(this.rows.some((row) => row.ended === null))

  constructor(
    private readonly api: ApiClient,
    private readonly time: HostTime,
  ) {}

  async refresh(): Promise<void> {
    const read = ++this.started
    const sentAt = this.time.localNow()
    try {
      const answer = await this.api.listLeases()
      if (read < this.shown) return
      this.shown = read
      this.time.sync(answer.now, sentAt, this.time.localNow())
      this.rows = mergeLeases(this.rows, answer.leases.map(leaseRow), ms(answer.now) ?? this.time.now)
      this.error = null
    } catch (error) {
      if (read < this.shown) return
      this.error = describeError(error)
    } finally {
      this.loaded = true
    }
  }

  /** Shows what a run of events did to the leases, in one pass; true when they should be read again. */
  apply(events: readonly LogEvent[]): boolean {
    const next = reduceLeases(this.rows, events, this.time.localNow())
    if (next !== this.rows) this.rows = next
    return events.some(movesLeases)
  }

  /** Removes leases whose flash-out is over; called on each clock tick. */
  sweep(): void {
    const next = sweepLeases(this.rows, this.time.localNow())
    if (next !== this.rows) this.rows = next
  }
}
