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
