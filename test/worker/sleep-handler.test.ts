/**
 * The built-in `sleep` handler waits in steps of 250 ms on the run's one AbortSignal: a step
 * that ends must take its abort listener with it, or a sleep of a few seconds stacks up more
 * than ten and Node warns of a leak (MaxListenersExceededWarning) from the worker.
 */
import { getEventListeners } from 'node:events'
import { afterEach, expect, test, vi } from 'vitest'
import { sleep } from '../../src-worker/handlers/sleep'
import type { HandlerContext } from '../../src-worker/handler-api'

afterEach(() => {
  vi.useRealTimers()
  vi.restoreAllMocks()
})

test('a long sleep keeps at most one abort listener on the run signal, and an abort still ends it at once', async () => {
  vi.useFakeTimers()
  const stop = new AbortController()
  const most: number[] = []
  const ctx = { payload: { ms: 10_000 }, signal: stop.signal, progress: () => most.push(getEventListeners(stop.signal, 'abort').length) } as unknown as HandlerContext
  const running = sleep.run(ctx)
  await vi.advanceTimersByTimeAsync(5_000)
  expect(most.length).toBeGreaterThanOrEqual(19)
  expect(Math.max(...most)).toBeLessThanOrEqual(1)
  stop.abort(new Error('stop'))
  await expect(running).rejects.toThrow('stop')
  expect(getEventListeners(stop.signal, 'abort')).toHaveLength(0)
})

test('sleep takes ms, a number of milliseconds ≥ 0, or none (no payload, an object without ms: 0); any other payload is invalid_payload, not retried', async () => {
  const run = (payload: unknown) => sleep.run({ payload, signal: new AbortController().signal, progress: () => {} } as unknown as HandlerContext)
  for (const payload of [null, {}, { ms: 0 }]) await expect(run(payload)).resolves.toEqual({ slept_ms: expect.any(Number) })
  for (const payload of [[], 'str', 5, { ms: null }, { ms: '100' }, { ms: -1 }, { ms: Number.NaN }]) {
    await expect(run(payload)).rejects.toMatchObject({ code: 'invalid_payload', retryable: false })
  }
})

test('a sleep lasts its ms on the monotonic clock: a wall clock set ahead meanwhile does not end it early', async () => {
  const wall = Date.now
  const start = wall()
  // Three hours ahead from the first step on, as NTP or a user might set it.
  vi.spyOn(Date, 'now').mockImplementation(() => (wall() - start > 50 ? wall() + 3 * 3_600_000 : wall()))
  const began = performance.now()
  const result = await sleep.run({ payload: { ms: 400 }, signal: new AbortController().signal, progress: () => {} } as unknown as HandlerContext)
  const took = performance.now() - began
  expect(took).toBeGreaterThanOrEqual(390)
  expect(result).toEqual({ slept_ms: expect.any(Number) })
  expect((result as { slept_ms: number }).slept_ms).toBeGreaterThanOrEqual(390)
  expect((result as { slept_ms: number }).slept_ms).toBeLessThan(60_000)
})

test('a sleep shorter than one step takes one step: its one progress report, not a second for a timer that fired a fraction of a millisecond early', async () => {
  for (let i = 0; i < 20; i++) {
    const reports: number[] = []
    await sleep.run({ payload: { ms: 20 }, signal: new AbortController().signal, progress: (value: number) => reports.push(value) } as unknown as HandlerContext)
    expect(reports).toHaveLength(1)
  }
})
