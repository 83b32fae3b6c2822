import { eventMoves } from '../../src-shared/event-types'
import { describeError, type ApiClient, type Capacity, type CapacityChange, type LogEvent } from './api'
import { capacityBar } from './capacity-bar'

/** The capacity pool as last read from the host, and the operator's changes to it. */
export class CapacityState {
  /** The last answer; null until the first one arrives. */
  current = $state<Capacity | null>(null)
  /** Why the last read or change failed; null after a success. */
  error = $state<string | null>(null)
  loading = $state(false)
  saving = $state(false)
  readonly bar = $derived(this.current ? capacityBar(this.current) : null)

  constructor(private readonly api: ApiClient) {}

  async refresh(): Promise<void> {
    this.loading = true
    try {
      this.current = await this.api.getCapacity()
      this.error = null
    } catch (error) {
      this.error = describeError(error)
    } finally {
      this.loading = false
    }
  }

  /** `PUT /api/capacity`: total units and/or a busy rating (null = auto). */
  async change(change: CapacityChange): Promise<boolean> {
    this.saving = true
    try {
      this.current = await this.api.setCapacity(change)
      this.error = null
      return true
    } catch (error) {
      this.error = describeError(error)
      return false
    } finally {
      this.saving = false
    }
  }

  /** Whether this event calls for a fresh read: a lease taken or given back, or the pool or the busy rating changed. */
  static moves(event: LogEvent): boolean {
    return eventMoves(event.type, 'leases', 'capacity')
  }
}
