import type { EngineContext } from '../store/context'
import { capacityFigures, type CapacityFigures } from '../rules/capacity'
import { invalid } from '../rules/errors'
import { reportJobsOverCapacity } from '../reads/waiting'

/** The operator's capacity settings, kept in the settings table so they outlive a restart. */
export interface CapacitySettings {
  total_units: number
  /** A manual busy rating 0–10, or null for `auto` (measured from the host). */
  busy_rating: number | null
}

export interface CapacityChange {
  total_units?: number
  busy_rating?: number | null
}

const SETTINGS_KEY = 'capacity'

export function checkCapacityChange(change: CapacityChange): void {
  if (change.total_units !== undefined && !(Number.isSafeInteger(change.total_units) && change.total_units >= 0)) {
    throw invalid('total_units: must be a whole number of at least 0')
  }
  if (change.busy_rating != null && !(Number.isFinite(change.busy_rating) && change.busy_rating >= 0 && change.busy_rating <= 10)) {
    throw invalid('busy_rating: must be a number from 0 to 10, or null for auto')
  }
}

/**
 * Capacity as the engine sees it: the persisted settings plus the busy rating last measured
 * from the host (used while the rating is on `auto`).
 */
export class CapacityStore {
  private settings: CapacitySettings
  private measuredBusy = 0

  constructor(
    private readonly ctx: EngineContext,
    defaults: CapacitySettings,
  ) {
    const row = ctx.one<{ value: string }>('SELECT value FROM settings WHERE key = ?', SETTINGS_KEY)
    this.settings = row ? { ...defaults, ...(JSON.parse(row.value) as Partial<CapacitySettings>) } : defaults
  }

  /** The operator's total units (before the busy rating): no job costing more can ever run. */
  totalUnits(): number {
    return this.settings.total_units
  }

  busyRating(): number {
    return this.settings.busy_rating ?? this.measuredBusy
  }

  /** The figures now, with the units held by ACTIVE leases (kept in memory: see ActiveLeases). */
  figures(): CapacityFigures {
    const leased = this.ctx.activeLeases.units
    return capacityFigures(
      this.settings.total_units,
      this.busyRating(),
      this.settings.busy_rating === null ? 'auto' : 'manual',
      leased,
    )
  }

  /**
   * The operator changes total units and/or the busy rating (null = auto); an event records it,
   * and a lower total reports each waiting job it leaves unable ever to run.
   */
  set(change: CapacityChange): CapacityFigures {
    checkCapacityChange(change)
    const previous = this.settings
    const next = { ...previous, ...change }
    // In force before the commit, so listeners woken by the event already see the new figures;
    // put back should the commit not happen.
    this.settings = next
    this.ctx.transact(() => {
      this.ctx.onRollback(() => (this.settings = previous))
      this.ctx.run(
        'INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
        SETTINGS_KEY,
        JSON.stringify(next),
      )
      this.ctx.appendEvent('CAPACITY', 'capacity', 'CAPACITY_CHANGED', { ...next })
      reportJobsOverCapacity(this.ctx, previous.total_units, next.total_units)
    })
    return this.figures()
  }

  /**
   * The host's measurement of how busy the machine is (0–10). It matters only on `auto`; a change
   * of the rating's whole number is logged, so the event log (and waiting claims) see capacity move.
   */
  reportMeasuredBusy(rating: number): void {
    const clamped = Math.min(10, Math.max(0, rating))
    const changed = Math.round(clamped) !== Math.round(this.measuredBusy)
    this.measuredBusy = clamped
    if (changed && this.settings.busy_rating === null) {
      this.ctx.transact(() => this.ctx.appendEvent('CAPACITY', 'capacity', 'BUSY_MEASURED', { busy_rating: clamped }))
    }
  }
}
