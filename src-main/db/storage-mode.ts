/**
 * Whether the host takes writes. A host that starts on a full disk opens its database for reads
 * only (db/open.ts `openOnFullDisk`): it serves reads, the dashboard and `leasehold status`, and
 * refuses every write with 507 `storage_full` until space returns, which it checks on a timer;
 * then it takes writes again without a restart.
 */
export type StorageState = 'read_write' | 'read_only'

/** The host's storage mode as `/api/health` reports it. */
export interface StorageMode {
  state: StorageState
  /** Why the host is read-only (`disk full`); null while it takes writes. */
  reason: string | null
}

/** Methods that never change anything. */
const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS'])

/** Requests of a writing method that write nothing to the database: a ticket for the event stream is held in memory. */
const MEMORY_ONLY = new Set(['POST /api/events/ticket'])

/**
 * Whether a request may write to the database: every request to the API (`/api`, `/internal`)
 * of a method other than GET, HEAD or OPTIONS, but the few that change memory only. A read-only
 * host refuses these before they reach a route, so that no write gets as far as the disk.
 */
export function mayWrite(method: string, path: string): boolean {
  if (READ_METHODS.has(method.toUpperCase())) return false
  const normal = `/${path.split('?')[0]!.replace(/^\/+/, '').replace(/\/+$/, '')}`
  if (!/^\/(api|internal)(\/|$)/i.test(normal)) return false
  return !MEMORY_ONLY.has(`${method.toUpperCase()} ${normal.toLowerCase()}`)
}

/** The intervals between probes for space while read-only: 2 s, growing to 5 s, so a freed disk is noticed within seconds. */
export function probeDelays(): () => number {
  let delay = 2_000
  return () => {
    const now = delay
    delay = Math.min(5_000, Math.round(delay * 1.5))
    return now
  }
}
