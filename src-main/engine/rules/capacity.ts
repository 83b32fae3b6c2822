/**
 * Capacity arithmetic, pure. The busy rating (0 idle … 10 fully busy) holds back part of the
 * total so background work yields to the person at the desk.
 */
import { usableUnits } from '../../../src-shared/usable-units'

export { usableUnits }

/** The operator's capacity settings, kept in the settings table so they outlive a restart. */
export interface CapacitySettings {
  total_units: number
  /** A manual busy rating 0–10, or null for `auto` (measured from the host). */
  busy_rating: number | null
}

/** A data dir's capacity until the operator sets one (`--total-units`, `--busy`, the API): 100 units, the busy rating measured. */
export const FIRST_CAPACITY: Readonly<CapacitySettings> = { total_units: 100, busy_rating: null }

export interface CapacityFigures {
  total_units: number
  busy_rating: number
  busy_mode: 'auto' | 'manual'
  /** floor(total × (10 − busy) / 10) */
  usable: number
  /** Units held by ACTIVE leases. */
  leased: number
  /** usable − leased; negative when the busy rating rose under running work. */
  available: number
}

export function capacityFigures(
  totalUnits: number,
  busyRating: number,
  busyMode: 'auto' | 'manual',
  leased: number,
): CapacityFigures {
  const usable = usableUnits(totalUnits, busyRating)
  return { total_units: totalUnits, busy_rating: busyRating, busy_mode: busyMode, usable, leased, available: usable - leased }
}

/**
 * Why a job of `cost` units cannot be leased now, in the words the contracts use, or null if
 * it fits. "No capacity" when nothing is available at all; "Capacity exceeded" when some is,
 * but not enough for this job.
 */
export function capacityDenial(c: CapacityFigures, cost: number): string | null {
  if (c.available <= 0) {
    return `No capacity (busy=${c.busy_rating}, usable=${c.usable}, leased=${c.leased})`
  }
  if (cost > c.available) {
    return `Capacity exceeded: used=${c.leased}, requested=${cost}, capacity=${c.usable}`
  }
  return null
}
