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
 * The active leases as an event changes them: a grant adds one, an expiry or the end of its
 * job marks it ended at `localNow` (this page's clock; it then flashes out). Heartbeats are not
 * events; the store polls for them.
 */
export function reduceLeases(rows: readonly LeaseRow[], event: LogEvent, localNow: number): LeaseRow[] {
  const data = event.data ?? {}
  if (event.type === 'LEASE_GRANTED' && event.job_id) {
    if (rows.some((r) => r.lease_id === event.entity_id)) return rows as LeaseRow[]
    const granted = ms(event.ts) ?? 0
    return [
      ...rows,
      {
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
      },
    ]
  }
  if (event.type === 'LEASE_EXPIRED') {
    return rows.map((r) => (r.lease_id === event.entity_id && !r.ended ? { ...r, ended: { how: 'expired', at: localNow } } : r))
  }
  if (LEASE_ENDING_EVENTS.has(event.type) && event.job_id) {
    return rows.map((r) => (r.job_id === event.job_id && !r.ended ? { ...r, ended: { how: 'released', at: localNow } } : r))
  }
  return rows as LeaseRow[]
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
