import { eventMoves } from '../../src-shared/event-types'
import { describeError, type ApiClient, type LogEvent, type Worker } from './api'

/** Local and external workers, with the jobs they hold leases on. */
export class WorkersState {
  workers = $state<Worker[]>([])
  error = $state<string | null>(null)
  loaded = $state(false)
  readonly local = $derived(this.workers.filter((w) => w.kind === 'local'))
  readonly external = $derived(this.workers.filter((w) => w.kind !== 'local'))

  constructor(private readonly api: ApiClient) {}

  async refresh(): Promise<void> {
    try {
      this.workers = (await this.api.listWorkers()).workers
      this.error = null
    } catch (error) {
      this.error = describeError(error)
    } finally {
      this.loaded = true
    }
  }

  /** Whether this event calls for a fresh read (a worker took or gave up a job, or reported a problem). */
  static moves(event: LogEvent): boolean {
    return eventMoves(event.type, 'leases', 'workers')
  }
}
