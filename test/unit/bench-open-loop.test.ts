/**
 * The bench's open loop (scripts/bench/http.ts) sends requests without waiting for the earlier
 * ones: one that fails must not end the bench (a rejection nothing observes until the end ends
 * the process), and the loop says how many failed once all are in.
 */
import { expect, test } from 'vitest'
import { openLoop } from '../../scripts/bench/http'

test('a failed request in the open loop is held until all are in, then the loop rejects saying how many failed', async () => {
  let settled = 0
  let lastSent!: () => void
  const allSent = new Promise<void>((resolve) => (lastSent = resolve))
  const run = openLoop({ jobsPerS: 1000, seconds: 0.05 }, async (i) => {
    // The failures come first, long before the loop ends: every other answer waits for the last request.
    if (i < 2) throw new Error(`refused ${i}`)
    if (i === 49) lastSent()
    await allSent
    settled += 1
    return i
  })
  await expect(run).rejects.toThrow('2 of 50 requests failed (the first: refused 0)')
  expect(settled).toBe(48)
})

test('with no failure the open loop resolves with every answer, in order', async () => {
  expect(await openLoop({ jobsPerS: 1000, seconds: 0.01 }, async (i) => i * 2)).toEqual(Array.from({ length: 10 }, (_, i) => i * 2))
})
