/**
 * The usable units a busy rating leaves (docs/capacity.md): one formula for the host, which
 * leases by it, and the window, which previews it before a rating is applied.
 */

/** `floor(total × (10 − busy) / 10)`, exact for a rating with any number of decimals. */
export function usableUnits(totalUnits: number, busyRating: number): number {
  // The host asks at every grant, with the same two numbers until a setting or the measured
  // rating changes: the last answer is kept (the exact arithmetic below takes about a microsecond).
  if (totalUnits === last.total && busyRating === last.busy) return last.usable
  last = { total: totalUnits, busy: busyRating, usable: exactUsable(totalUnits, busyRating) }
  return last.usable
}

let last = { total: NaN, busy: NaN, usable: 0 }

function exactUsable(totalUnits: number, busyRating: number): number {
  // In binary floating point 100 × (10 − 0.3) / 10 is 96.99999999999999, and 350 × (10 − 9.8) / 10
  // 6.999999999999974: the arithmetic's error, not the rating's, must not cost a whole unit. Nor
  // may rounding it away lift a share just under an integer across it (1,000,000 units at busy
  // 9.999950000004 leave 4.99996 units, so 4). So the formula runs in whole numbers on the
  // decimal digits the numbers were given with: busy = b / 10^s makes usable
  // floor(total × (10^(s+1) − b) / 10^(s+1)), and the same for the total's own decimals.
  const total = decimalOf(totalUnits)
  const busy = decimalOf(busyRating)
  const tenScaled = 10n ** BigInt(busy.scale + 1)
  const numerator = total.digits * (tenScaled - busy.digits)
  const denominator = 10n ** BigInt(total.scale) * tenScaled
  return Number(floorDivide(numerator, denominator))
}

/**
 * A finite number as `digits / 10^scale`, from the shortest decimal that reads back as it
 * (`String(n)`): the decimals a rating was typed or sent with, not its binary approximation.
 */
function decimalOf(value: number): { digits: bigint; scale: number } {
  const [coefficient = '', exponentText] = String(value).split('e')
  const [whole = '', fraction = ''] = coefficient.split('.')
  const scale = fraction.length - Number(exponentText ?? 0)
  const digits = BigInt(whole + fraction)
  return scale >= 0 ? { digits, scale } : { digits: digits * 10n ** BigInt(-scale), scale: 0 }
}

/** ⌊a / b⌋ for b > 0: BigInt division truncates toward zero, which differs for a negative a. */
function floorDivide(a: bigint, b: bigint): bigint {
  const quotient = a / b
  return a % b !== 0n && a < 0n ? quotient - 1n : quotient
}
