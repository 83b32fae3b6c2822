import type { Capacity } from './api'

/**
 * The capacity bar: where each part of `total_units` goes, as fractions 0–1 of the total.
 * `inUse` is what leases hold, `free` what can still be leased, `reserved` what the busy rating
 * holds back (`total − usable`). Raising the rating never takes a lease away, so leases can
 * reach into the reserved part: `over` is that overlap, and `available` is then negative.
 */
export interface CapacityBar {
  inUse: number
  free: number
  reserved: number
  over: number
  /** Where `usable` ends: the marker on the bar. */
  usableAt: number
  /** Units the busy rating holds back. */
  reservedUnits: number
}

export function capacityBar(c: Capacity): CapacityBar {
  const total = Math.max(0, c.total_units)
  const reservedUnits = Math.max(0, total - c.usable)
  if (total === 0) return { inUse: 0, free: 0, reserved: 0, over: 0, usableAt: 0, reservedUnits }
  const part = (units: number) => Math.min(1, Math.max(0, units / total))
  const leased = Math.min(c.leased, total)
  return {
    inUse: part(Math.min(leased, c.usable)),
    free: part(c.usable - leased),
    over: part(leased - c.usable),
    reserved: part(total - Math.max(c.usable, leased)),
    usableAt: part(c.usable),
    reservedUnits,
  }
}

/** `8 (manual)` / `3.4 (auto)` / `9.95 (manual)`: the rating as the host measured or was told it, as stored. */
export function busyLabel(c: Capacity): string {
  return `${c.busy_rating} (${c.busy_mode})`
}

/**
 * The whole point the busy-rating slider stands for once moved from `shown` to `moved`. The
 * slider steps by whole points, but a rating stored with decimals (9.95, a measured 3.4) sits
 * between two of them and is shown where it is; the first move from there goes to the whole
 * point on the side it moved to (9.95 moved down is 9, moved up 10), and from then on by steps.
 */
export function sliderPoint(shown: number, moved: number): number {
  return moved < shown ? Math.floor(moved) : Math.ceil(moved)
}
