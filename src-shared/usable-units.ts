/**
 * The usable units a busy rating leaves (docs/capacity.md): one formula for the host, which
 * leases by it, and the window, which previews it before a rating is applied.
 */

/** `floor(total × (10 − busy) / 10)`, exact for a rating with decimals. */
export function usableUnits(totalUnits: number, busyRating: number): number {
  // In binary floating point 100 × (10 − 0.3) / 10 is 96.99999999999999, and 350 × (10 − 9.8) / 10
  // 6.999999999999974: the arithmetic's error, not the rating's, must not cost a whole unit. So
  // the share is taken to a millionth of a unit (totals are at most 1,000,000) before the floor.
  return Math.floor(Math.round((totalUnits * (10 - busyRating)) * 100_000) / 1_000_000)
}
