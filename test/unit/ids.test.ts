import { describe, expect, it } from 'vitest'
import { newId, newToken } from '../../src-main/engine/ids'

describe('ids and lease tokens', () => {
  it('ids are UUID version 7 and sort by the time they were made', async () => {
    const first = newId()
    await new Promise((resolve) => setTimeout(resolve, 5))
    const later = newId()
    for (const id of [first, later]) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
    expect(later > first).toBe(true)
  })

  it('no id or token repeats, across many refills of the random pool', () => {
    const ids = Array.from({ length: 20_000 }, newId)
    const tokens = Array.from({ length: 20_000 }, newToken)
    expect(new Set(ids).size).toBe(ids.length)
    expect(new Set(tokens).size).toBe(tokens.length)
    // 24 random bytes, base64url: 32 characters.
    for (const token of tokens.slice(0, 100)) expect(token).toMatch(/^[A-Za-z0-9_-]{32}$/)
  })
})
