import { describeError, type ApiClient, type Storage } from './api'

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

/** The database's size and the retention setting, as last read from the host. */
export class StorageState {
  current = $state<Storage | null>(null)
  error = $state<string | null>(null)

  constructor(private readonly api: ApiClient) {}

  async refresh(): Promise<void> {
    try {
      this.current = await this.api.getStorage()
      this.error = null
    } catch (error) {
      this.error = describeError(error)
    }
  }
}
