import { describe, expect, it, vi } from 'vitest'
import { idKey, keyedId, newId, newToken } from '../../src-main/engine/store/ids'

const T0 = Date.UTC(2026, 0, 1)

describe('ids and lease tokens', () => {
  it('ids are UUID version 7 that start with the millisecond they were made, and sort by it', () => {
    const now = vi.spyOn(Date, 'now').mockReturnValue(T0)
    try {
      const first = newId()
      now.mockReturnValue(T0 + 1)
      const later = newId()
      for (const [id, made] of [[first, T0], [later, T0 + 1]] as const) {
        expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
        expect(parseInt(id.slice(0, 8) + id.slice(9, 13), 16)).toBe(made)
      }
      expect(later > first).toBe(true)
    } finally {
      now.mockRestore()
    }
    // The bits after the version and the variant are random: every hex digit turns up in each place.
    const ids = Array.from({ length: 2_000 }, newId)
    for (const at of [15, 20, 35]) expect(new Set(ids.map((id) => id[at])).size, `place ${at}`).toBe(16)
    expect(new Set(ids.map((id) => id[19]))).toEqual(new Set(['8', '9', 'a', 'b']))
  })

  it('no id or token repeats, across many refills of the random pool', () => {
    const ids = Array.from({ length: 20_000 }, newId)
    const tokens = Array.from({ length: 20_000 }, newToken)
    expect(new Set(ids).size).toBe(ids.length)
    expect(new Set(tokens).size).toBe(tokens.length)
    // 24 random bytes, base64url: 32 characters.
    for (const token of tokens.slice(0, 100)) expect(token).toMatch(/^[A-Za-z0-9_-]{32}$/)
  })

  it("a job's or lease's id names its row's key, is a UUID version 8 that sorts by time, and no other string names a key", () => {
    const keys = [0, 1, 4095, 4096, 123_456_789, 2 ** 48 - 1]
    const ids = keys.map(keyedId)
    for (const [i, id] of ids.entries()) {
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
      expect(idKey(id)).toBe(keys[i])
    }
    const now = vi.spyOn(Date, 'now').mockReturnValue(T0)
    const first = keyedId(7)
    now.mockReturnValue(T0 + 1)
    expect(keyedId(7) > first).toBe(true)
    now.mockRestore()
    // Random bits after the key. A row's key alone makes its id unique; these only vary. 24 bits
    // of them: 1,000 draws within a few milliseconds repeat one about 3 % of the time (a birthday
    // collision), so the rule is that they vary, not that 1,000 never meet.
    expect(new Set(Array.from({ length: 1000 }, () => keyedId(7))).size).toBeGreaterThanOrEqual(990)
    for (const other of [newId(), first.toUpperCase(), first.slice(1), `${first}0`, 'job-1', '']) expect(idKey(other)).toBeNull()
    for (const bad of [-1, 2 ** 48, 1.5, Number.NaN]) expect(() => keyedId(bad)).toThrow(RangeError)
  })
})
