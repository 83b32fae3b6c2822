import { describeError, type ApiClient, type Storage, type StorageChange } from './api'

/** Bytes as the dashboard writes a file's size: `812 KB`, `12.3 MB`, `1.24 GB`. */
export function formatBytes(bytes: number): string {
  if (bytes < 1024 * 1024) return `${Math.round(bytes / 1024)} KB`
  if (bytes < 1024 * 1024 * 1024) return `${(bytes / 1024 / 1024).toFixed(1)} MB`
  return `${(bytes / 1024 / 1024 / 1024).toFixed(2)} GB`
}

/** How long finished jobs are kept, in words: `7 days`, `1 day`, `forever`. */
export function retentionText(retainDays: number): string {
  if (retainDays === 0) return 'forever'
  return `${retainDays} ${retainDays === 1 ? 'day' : 'days'}`
}

/** While the host is read-only, how often it is asked whether writes work again (no event says so). */
export const READ_ONLY_POLL_MS = 5_000

/** The database's size and the retention setting, as last read from the host, and whether it takes writes. */
export class StorageState {
  current = $state<Storage | null>(null)
  error = $state<string | null>(null)
  /** Why the host is read-only (its disk was full at start, or its database file went: every change is refused), or null while it takes writes. */
  readOnly = $state<string | null>(null)
  /** What the host says of it: what happened and what to do (null while it takes writes, or from a host that does not say). */
  readOnlyDetail = $state<string | null>(null)
  private poll: ReturnType<typeof setTimeout> | null = null

  constructor(private readonly api: ApiClient) {}

  async refresh(): Promise<void> {
    try {
      const [current, health] = await Promise.all([this.api.getStorage(), this.api.getHealth()])
      this.current = current
      this.readOnly = health.storage === 'read_only' ? (health.reason ?? 'disk full') : null
      this.readOnlyDetail = this.readOnly === null ? null : (current.read_only?.detail ?? null)
      this.error = null
    } catch (error) {
      this.error = describeError(error)
    }
    if (this.readOnly !== null && this.poll === null) {
      this.poll = setTimeout(() => {
        this.poll = null
        void this.refresh()
      }, READ_ONLY_POLL_MS)
    }
  }

  /**
   * The host said its storage mode changed (the event stream's `storage` frame): the banner
   * follows at once, then the figures are read (and, while read-only, read again until it takes writes).
   */
  hear(change: StorageChange): void {
    this.readOnly = change.storage === 'read_only' ? (change.reason ?? 'disk full') : null
    this.readOnlyDetail = this.readOnly === null ? null : change.detail
    void this.refresh()
  }

  stop(): void {
    if (this.poll !== null) clearTimeout(this.poll)
    this.poll = null
  }
}
