import { describe, expect, it } from 'vitest'
import { backoffDelay, nextRetryAt } from '../../src-main/engine/rules/backoff'
import { DEFAULT_ENGINE_CONFIG } from '../../src-main/engine'
import { MINUTE, SECOND } from '../../src-main/engine/rules/clock'
import { T0 } from '../helpers/engine'

const policy = { baseMs: 2 * SECOND, maxMs: 10 * MINUTE }

describe('backoff', () => {
  it('delay doubles with each attempt: base × 2^(attempt − 1)', () => {
    expect([1, 2, 3, 4, 5].map((n) => backoffDelay(n, policy))).toEqual([2, 4, 8, 16, 32].map((s) => s * SECOND))
  })

  it('delay is capped at maxMs', () => {
    expect(backoffDelay(9, policy)).toBe(512 * SECOND)
    expect(backoffDelay(10, policy)).toBe(10 * MINUTE)
    expect(backoffDelay(1000, policy)).toBe(10 * MINUTE)
  })

  it('an attempt number below 1 gets the base delay', () => {
    expect(backoffDelay(0, policy)).toBe(2 * SECOND)
    expect(backoffDelay(-3, policy)).toBe(2 * SECOND)
  })

  it('nextRetryAt is now plus the delay', () => {
    expect(nextRetryAt(T0, 3, policy)).toBe(T0 + 8 * SECOND)
  })

  it('the default policy starts at 2 s and caps at 10 min', () => {
    expect(DEFAULT_ENGINE_CONFIG.backoff).toEqual(policy)
  })

  it('delays never decrease as attempts grow', () => {
    let previous = 0
    for (let n = 1; n <= 64; n++) {
      const d = backoffDelay(n, policy)
      expect(d).toBeGreaterThanOrEqual(previous)
      expect(Number.isFinite(d)).toBe(true)
      previous = d
    }
  })
})
