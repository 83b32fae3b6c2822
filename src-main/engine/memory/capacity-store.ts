import { capacityFigures, type CapacityFigures, type CapacitySettings, usableUnits } from '../rules/capacity'
import { invalid } from '../rules/errors'
import { readSetting, writeSetting } from '../store/settings'
import type { EngineContext } from './context'

export interface CapacityChange {
  total_units?: number
  busy_rating?: number | null
}

const SETTINGS_KEY = 'capacity'

/** The settings a change may name: a change naming none is refused, as an empty schedule PATCH is. */
const CHANGEABLE = ['total_units', 'busy_rating'] as const satisfies readonly (keyof CapacityChange)[]

export function checkCapacityChange(change: CapacityChange): void {
  if (CHANGEABLE.every((key) => change[key] === undefined)) throw invalid(`(body): give at least one of ${CHANGEABLE.join(', ')}`)
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
  /** The rating the last `BUSY_MEASURED` event gave; null before the first of this start. */
  private loggedBusy: number | null = null

  constructor(
    private readonly ctx: EngineContext,
    defaults: CapacitySettings,
  ) {
    const stored = readSetting(ctx, SETTINGS_KEY)
    this.settings = stored !== undefined ? { ...defaults, ...(JSON.parse(stored) as Partial<CapacitySettings>) } : defaults
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
   * Whether the change sets a value other than the one in force (a busy rating of null, auto,
   * is a value too): one that does not writes nothing and logs no event, so that a client
   * repeating its PUT, or a host restarted with the same flags, adds nothing to the event log.
   */
  changes(change: CapacityChange): boolean {
    return CHANGEABLE.some((key) => change[key] !== undefined && change[key] !== this.settings[key])
  }

  /**
   * The operator changes total units and/or the busy rating (null = auto), inside the verb's
   * transaction (verbs/capacity.ts): the settings row and a `CAPACITY_CHANGED` event record it.
   * Returns the settings it replaced.
   */
  change(change: CapacityChange): CapacitySettings {
    const previous = this.settings
    const next = { ...previous, ...change }
    // In force before the commit, so listeners woken by the event already see the new figures;
    // put back should the commit not happen.
    this.settings = next
    this.ctx.onRollback(() => (this.settings = previous))
    writeSetting(this.ctx, SETTINGS_KEY, JSON.stringify(next))
    this.ctx.appendEvent('CAPACITY', 'capacity', 'CAPACITY_CHANGED', { ...next })
    return previous
  }

  /**
   * The host's measurement of how busy the machine is (0–10), which counts only on `auto`. There
   * it is a `BUSY_MEASURED` event when it has moved a whole point from the rating last logged,
   * or reached 0 or 10 (and the first measure of a start), so that the event log follows capacity
   * within a point without an event every sample, and the event's commit offers waiting claims the
   * queue. Returns whether the usable units grew with no event: the host then offers it itself.
   */
  reportMeasuredBusy(rating: number): boolean {
    const measured = Math.min(10, Math.max(0, rating))
    const usableBefore = usableUnits(this.settings.total_units, this.busyRating())
    this.measuredBusy = measured
    if (this.settings.busy_rating !== null) return false
    const logged = this.loggedBusy
    const tenthsMoved = logged === null ? Infinity : Math.abs(Math.round(measured * 10) - Math.round(logged * 10))
    if (tenthsMoved >= 10 || ((measured === 0 || measured === 10) && tenthsMoved > 0)) {
      this.loggedBusy = measured
      this.ctx.transact(() => this.ctx.appendEvent('CAPACITY', 'capacity', 'BUSY_MEASURED', { busy_rating: measured }))
      return false
    }
    return usableUnits(this.settings.total_units, measured) > usableBefore
  }
}

/** The operator's total units, as the transaction in progress sees them (a verb names no cache). */
export const totalUnits = (ctx: EngineContext): number => ctx.capacityStore.totalUnits()
