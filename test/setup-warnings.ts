/**
 * Every test file's setup: a MaxListenersExceededWarning (a listener added again and again to
 * one emitter or AbortSignal, never taken away) fails the test during which it was raised, so a
 * leak cannot land unnoticed. The worker tests also fail on one that a worker process printed
 * (test/worker/support.ts `cleanUp`).
 */
import { afterEach } from 'vitest'

/** The warnings seen in this process and not yet reported; one listener per process, whatever the number of test files it runs. */
const KEY = Symbol.for('leasehold.test.listenerLeaks')
const store = globalThis as { [KEY]?: string[] }
if (!store[KEY]) {
  const leaks: string[] = (store[KEY] = [])
  process.on('warning', (warning) => {
    if (warning.name === 'MaxListenersExceededWarning') leaks.push(warning.message)
  })
}
const leaks = store[KEY]

afterEach(async () => {
  // process.emitWarning emits on the next tick: let one raised at the test's end arrive.
  await new Promise((resolve) => setImmediate(resolve))
  if (leaks.length > 0) throw new Error(`MaxListenersExceededWarning during this test: ${leaks.splice(0).join('; ')}`)
})
