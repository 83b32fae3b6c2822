import { eventMoves } from '../../src-shared/event-types'
import type { ActiveLease, LogEvent } from './api'
import { LEASE_ENDING_EVENTS } from './job-events'
import { ms } from './time-format'

/** How long an ended lease stays on screen, flashing, before it goes. */
export const FLASH_MS = 2500

/**
 * An active job lease as the dashboard shows it; times in epoch ms of the host's clock, except
 * `ended.at`, which is this page's (the flash-out is the page's own animation).
 */
export interface LeaseRow {
  lease_id: string
  job_id: string
  /** Null for a lease known only from its grant event, until the next read. */
  job_type: string | null
  addon_id: string | null
  worker_id: string
  cost_units: number
  granted_at: number
  expires_at: number
  last_heartbeat_at: number | null
  /** Set once the lease is gone: it flashes out for {@link FLASH_MS}. */
  ended: { how: 'expired' | 'released'; at: number } | null
}

const time = (value: unknown): number | null => (typeof value === 'number' ? value : typeof value === 'string' ? ms(value) : null)

export function leaseRow(lease: ActiveLease): LeaseRow {
  return {
    lease_id: lease.lease_id,
    job_id: lease.job_id,
    job_type: lease.job_type,
    addon_id: lease.addon_id,
    worker_id: lease.worker_id,
    cost_units: lease.cost_units,
    granted_at: ms(lease.granted_at) ?? 0,
    expires_at: ms(lease.expires_at) ?? 0,
    last_heartbeat_at: ms(lease.last_heartbeat_at),
    ended: null,
  }
}

/** Whether an event grants or ends a lease: the store then reads the leases again. */
export const movesLeases = (event: LogEvent): boolean =>
  eventMoves(event.type, 'leases')

/**
 * At most this many ended leases flash at once: in a burst (thousands of short jobs) the leases
 * that ended before the last ones go at once, so the table holds the active leases and a few more.
 */
export const FLASHING_AT_MOST = 10

/**
 * The active leases as a run of events changes them, in one pass (a burst of thousands costs one
 * copy, not one per event): a grant adds one, an expiry or the end of its job marks it ended at
 * `localNow` (this page's clock; it then flashes out), and of the ended ones only the last
 * {@link FLASHING_AT_MOST} to end stay. Heartbeats are not events; the store polls for them.
 * The same array when no event changed a lease.
 */
export function reduceLeases(rows: readonly LeaseRow[], events: readonly LogEvent[], localNow: number): LeaseRow[] {
  // Built at the first event that concerns a lease: lease id → row (in the rows' order, new
  // grants last), and job id → its leases not yet ended.
  let byId: Map<string, LeaseRow> | null = null
  let activeByJob: Map<string, Set<string>> | null = null
  const edit = () => {
    if (byId === null) {
      byId = new Map(rows.map((r) => [r.lease_id, r]))
      activeByJob = new Map()
      for (const r of rows) if (r.ended === null) leasesOf(activeByJob, r.job_id).add(r.lease_id)
    }
    return { byId, activeByJob: activeByJob! }
  }
  let grantedAny = false
  /** The leases ended by these events, in the order they ended. */
  const endedNow: string[] = []
  const end = (leaseId: string, how: 'expired' | 'released') => {
    const { byId, activeByJob } = edit()
    const row = byId.get(leaseId)
    if (!row || row.ended) return
    byId.set(leaseId, { ...row, ended: { how, at: localNow } })
    activeByJob.get(row.job_id)?.delete(leaseId)
    endedNow.push(leaseId)
  }
  for (const event of events) {
    const data = event.data ?? {}
    if (event.type === 'LEASE_GRANTED' && event.job_id) {
      const { byId, activeByJob } = edit()
      if (byId.has(event.entity_id)) continue // replayed after a reconnect
      const granted = ms(event.ts) ?? 0
      grantedAny = true
      byId.set(event.entity_id, {
        lease_id: event.entity_id,
        job_id: event.job_id,
        job_type: null,
        addon_id: null,
        worker_id: typeof data['worker_id'] === 'string' ? data['worker_id'] : '?',
        cost_units: typeof data['cost_units'] === 'number' ? data['cost_units'] : 0,
        granted_at: granted,
        expires_at: time(data['expires_at']) ?? granted,
        last_heartbeat_at: granted,
        ended: null,
      })
      leasesOf(activeByJob, event.job_id).add(event.entity_id)
    } else if (event.type === 'LEASE_EXPIRED') {
      end(event.entity_id, 'expired')
    } else if (LEASE_ENDING_EVENTS.has(event.type) && event.job_id) {
      for (const leaseId of [...(edit().activeByJob.get(event.job_id) ?? [])]) end(leaseId, 'released')
    }
  }
  if (!grantedAny && endedNow.length === 0) return rows as LeaseRow[]
  const next: LeaseRow[] = [...byId!.values()]
  return endedNow.length > 0 ? boundFlashing(next, endedNow) : next
}

function leasesOf(byJob: Map<string, Set<string>>, jobId: string): Set<string> {
  let leases = byJob.get(jobId)
  if (!leases) byJob.set(jobId, (leases = new Set()))
  return leases
}

/** Keeps the last {@link FLASHING_AT_MOST} leases to end: those ended before these events by their time, then `endedNow` in its order. */
function boundFlashing(rows: LeaseRow[], endedNow: readonly string[]): LeaseRow[] {
  const justEnded = new Set(endedNow)
  const before = rows.filter((r) => r.ended !== null && !justEnded.has(r.lease_id)).sort((a, b) => a.ended!.at - b.ended!.at)
  const order = [...before.map((r) => r.lease_id), ...endedNow]
  if (order.length <= FLASHING_AT_MOST) return rows
  const gone = new Set(order.slice(0, order.length - FLASHING_AT_MOST))
  return rows.filter((r) => !gone.has(r.lease_id))
}

/** Drops the leases whose flash is over (`localNow` on this page's clock). */
export function sweepLeases(rows: readonly LeaseRow[], localNow: number): LeaseRow[] {
  const over = (r: LeaseRow) => r.ended !== null && localNow - r.ended.at >= FLASH_MS
  return rows.some(over) ? rows.filter((r) => !over(r)) : (rows as LeaseRow[])
}

/**
 * The leases the host listed at `hostNow` (its clock, from the same answer) replace the known
 * ones, except those still flashing out (the host no longer lists them) and those granted at or
 * after `hostNow` (their event got here before the answer did).
 */
export function mergeLeases(known: readonly LeaseRow[], fetched: readonly LeaseRow[], hostNow: number): LeaseRow[] {
  const fetchedIds = new Set(fetched.map((r) => r.lease_id))
  const kept = known.filter((r) => r.ended !== null || (!fetchedIds.has(r.lease_id) && r.granted_at >= hostNow))
  const endedIds = new Set(known.filter((r) => r.ended).map((r) => r.lease_id))
  return [...fetched.filter((r) => !endedIds.has(r.lease_id)), ...kept].sort((a, b) => a.granted_at - b.granted_at)
}
