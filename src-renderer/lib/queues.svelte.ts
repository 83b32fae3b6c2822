import { eventMoves } from '../../src-shared/event-types'
import { DOT_SEGMENT_REFUSAL, isDotSegment } from '../../src-shared/queue-name'
import { describeError, type ApiClient, type LogEvent, type QueueInfo } from './api'

/** The queues with their jobs by state, and a pause toggle for each. */
export class QueuesState {
  queues = $state<QueueInfo[]>([])
  error = $state<string | null>(null)
  loaded = $state(false)
  /** Queue → the pause (true) or resume (false) being sent. */
  pending = $state<Record<string, boolean>>({})
  /** Queue → why a pause or resume failed. */
  failures = $state<Record<string, string>>({})

  readonly paused = $derived(this.queues.filter((q) => q.paused).length)

  constructor(private readonly api: ApiClient) {}

  async refresh(): Promise<void> {
    try {
      this.queues = (await this.api.listQueues()).queues
      this.error = null
    } catch (error) {
      this.error = describeError(error)
    } finally {
      this.loaded = true
    }
  }

  /**
   * Pauses or resumes a queue (one that has no jobs yet too), then reads the list again. True
   * once done; a failure is kept under the queue's name (in `failures`), for the row or the form
   * that asked to show it. The name is sent as given, never trimmed: a row's is the host's own,
   * a typed one is the operator's, and the host tells " reports " from "reports".
   */
  async setPaused(name: string, paused: boolean): Promise<boolean> {
    if (name === '') return false
    if (isDotSegment(name)) {
      // As the command line refuses it: in a URL's path the name would be another route.
      this.failures[name] = `A queue name ${DOT_SEGMENT_REFUSAL}`
      return false
    }
    this.pending[name] = paused
    try {
      const answer = await this.api.setQueuePaused(name, paused)
      const known = this.queues.some((q) => q.queue === name)
      this.queues = known
        ? this.queues.map((q) => (q.queue === name ? { ...q, ...answer.queue } : q))
        : [...this.queues, { ...answer.queue, counts: {} }].sort((a, b) => a.queue.localeCompare(b.queue))
      delete this.failures[name]
      void this.refresh()
      return true
    } catch (error) {
      this.failures[name] = describeError(error)
      return false
    } finally {
      delete this.pending[name]
    }
  }

  /** Whether this event calls for a fresh read (a queue paused or resumed, or a job moved). */
  static moves(event: LogEvent): boolean {
    return eventMoves(event.type, 'queues', 'job-list')
  }
}
