/**
 * The restart after a failure of something started again on failure (a local worker: the pool's
 * supervisor; a handler thread that keeps dying before it runs a job: the worker runtime): the
 * failures in a row counted with this one, and the delay before it starts again — `firstMs`,
 * twice that, four times … up to `maxMs`. One that stayed up starts the series over.
 */
export function nextRestart(failures: number, stayedUp: boolean, maxMs: number, firstMs = 1000): { failures: number; delayMs: number } {
  const counted = stayedUp ? 1 : failures + 1
  return { failures: counted, delayMs: Math.min(firstMs * 2 ** (counted - 1), maxMs) }
}
