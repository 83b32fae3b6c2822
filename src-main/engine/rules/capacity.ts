/**
 * Capacity arithmetic, pure. The busy rating (0 idle … 10 fully busy) holds back part of the
 * total so background work yields to the person at the desk.
 */
/** The operator's capacity settings, kept in the settings table so they outlive a restart. */
export interface CapacitySettings {
  total_units: number
  /** A manual busy rating 0–10, or null for `auto` (measured from the host). */
  busy_rating: number | null
}

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

export function usableUnits(totalUnits: number, busyRating: number): number {
  // In binary floating point 100 × (10 − 0.3) / 10 is 96.99999999999999, and 350 × (10 − 9.8) / 10
  // 6.999999999999974: the arithmetic's error, not the rating's, must not cost a whole unit. So
  // the share is taken to a millionth of a unit (totals are at most 1,000,000) before the floor.
  return Math.floor(Math.round((totalUnits * (10 - busyRating)) * 100_000) / 1_000_000)
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
