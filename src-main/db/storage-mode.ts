/**
 * Whether the host takes writes. It serves reads, the dashboard and `leasehold status` either
 * way, and refuses every write while read-only:
 * - a host that starts on a full disk opens its database for reads only (db/open.ts
 *   `openOnFullDisk`) and answers writes 507 `storage_full` until space returns, which it checks
 *   on a timer; then it takes writes again without a restart;
 * - a host whose database file or log was deleted or replaced while it ran (db/file-watch.ts)
 *   answers writes 503 `storage_error` from then on, and saves what it holds where a start finds
 *   it: a restart takes writes again;
 * - a host whose disk failed a sync (a commit's or the checkpointer's) no longer knows what is on
 *   the disk: it answers writes 503 `storage_error` until a restart, never resuming by itself.
 */
export type StorageState = 'read_write' | 'read_only'

/** The host's storage mode as `/api/health` reports it. */
export interface StorageMode {
  state: StorageState
  /** Why the host is read-only (`disk full`, `database file deleted`…); null while it takes writes. */
  reason: string | null
  /** What a person reads of it: what happened and what to do (null while it takes writes). */
  detail: string | null
}

/** The reason of a host read-only because its disk was full at start: it takes writes again once space returns. */
export const DISK_FULL = 'disk full'

/** The reason of a host read-only because the disk failed a sync: only a restart takes writes again. */
export const SYNC_FAILED = 'disk sync failed'

/** What the host says once the disk failed a sync (`where`: a commit, the checkpointer): what it means and what to do. */
export function syncFailedDetail(error: unknown, where: string, dataDir: string): string {
  const code = (error as { code?: unknown } | null)?.code
  return (
    `The disk failed to sync ${where}'s writes (${typeof code === 'string' ? code : (error as Error)?.message}): the host can no longer know what is on the disk, ` +
    `so it takes no more writes until it is restarted (reads still work). Stop the host, check the disk that holds the data dir ${dataDir} ` +
    '(its free space, the system log), and start it again: the start checks the database. Commits acknowledged since the last good sync may be lost'
  )
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
