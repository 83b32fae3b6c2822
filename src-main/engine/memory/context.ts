import type { Database } from 'better-sqlite3'
import type { CapacitySettings } from '../rules/capacity'
import type { Clock } from '../rules/clock'
import type { EngineConfig } from '../rules/engine-config'
import { StoreContext } from '../store/context'
import { ActiveLeases } from './active-leases'
import { CapacityStore } from './capacity-store'
import { JobTally } from './job-tally'
import { PausedQueues } from './paused-queues'
import { QueuedRows } from './queued-rows'
import { RecentCounts } from './recent-counts'

/**
 * What every engine operation works with: the store's context (the database, the clock, the
 * config, the transaction unit, the event log, the counters, the write journal:
 * store/context.ts) and the caches of hot state kept in memory in step with the rows. The caches
 * that follow job and lease rows subscribe to the write journal here, once; no verb names a
 * cache (each module here exports the questions the verbs ask of it), and
 * test/unit/engine-imports.test.ts holds the verbs to that.
 */
/** How many of the machine's sleeps {@link EngineContext.sleeps} keeps: a lease lives minutes, not a hundred sleeps. */
export const SLEEPS_KEPT = 100

export class EngineContext extends StoreContext {
  /** The queues an operator paused, kept in memory for the pick path. */
  readonly pausedQueues = new PausedQueues(this)
  /** The ACTIVE leases and their jobs, kept in memory for the hot verbs. */
  readonly activeLeases: ActiveLeases = new ActiveLeases(this)
  /** The QUEUED jobs per queue and priority, and the waiting jobs per cost, kept in memory for the pick path and the snapshot. */
  readonly jobTally = new JobTally(this)
  /** The rows of QUEUED jobs as last written, so that a pick need not read them back. */
  readonly queuedRows = new QueuedRows()
  /** The counted events: the last 24 h by minute in memory, and stats_counts kept up to date. */
  readonly counts = new RecentCounts(this)
  /**
   * The capacity settings and the busy rating last measured: here, not only with the verbs that
   * grant, so that any verb that puts a job back in line can weigh it against the total.
   */
  readonly capacityStore: CapacityStore
  /**
   * The machine's sleeps made good since the host started (Engine.noticeSleep), the latest
   * {@link SLEEPS_KEPT}: when each woke, and how long it slept. A worker asleep with the machine
   * ran nothing meanwhile, so the time a heartbeat limit allows it (verbs/lease-limits.ts) does
   * not count a sleep.
   */
  readonly sleeps: Array<{ wokeAt: number; sleptMs: number }> = []
  /** The wall clock at the reaper's last pass, null before the first: a pass that reads it further back sees the clock set back (verbs/reaper.ts). */
  reapedAt: number | null = null

  /** `capacity`: the settings used until an operator changes them (then the stored ones win). */
  constructor(db: Database, clock: Clock, config: EngineConfig, capacity: CapacitySettings) {
    super(db, clock, config)
    this.capacityStore = new CapacityStore(this, capacity)
    for (const cache of [this.activeLeases, this.jobTally, this.queuedRows]) this.rowWrites.subscribe(cache)
    this.counters.keepFloors(this.jobTally, this.activeLeases)
  }

  /** Reads every cache from the database (the engine does so once, at start). */
  load(): void {
    this.counts.load()
    this.pausedQueues.load()
    this.activeLeases.load()
    this.jobTally.load()
  }
}
