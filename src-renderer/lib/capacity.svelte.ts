import type { ApiClient, Capacity } from './api'

/** The capacity pool as last read from the host, for components to show. */
export class CapacityState {
  /** The last answer; null until the first one arrives. */
  current = $state<Capacity | null>(null)
  /** Why the last read failed; null after a success. */
  error = $state<string | null>(null)
  loading = $state(false)

  /** Null client: no token is known, so there is nothing to read. */
  constructor(private readonly api: ApiClient | null) {
    if (!api) this.error = 'No API token: open the link `leasehold serve` prints (it ends in #token=…).'
  }

  async refresh(): Promise<void> {
    if (!this.api) return
    this.loading = true
    try {
      this.current = await this.api.getCapacity()
      this.error = null
    } catch (error) {
      this.error = error instanceof Error ? error.message : String(error)
    } finally {
      this.loading = false
    }
  }
}
