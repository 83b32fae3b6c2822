/**
 * Waits until `check` returns something truthy (polling every 25 ms), at most `ms`; returns it.
 * The one wait of the tests that watch a host or a worker get somewhere.
 */
export async function until<T>(check: () => T | Promise<T>, ms = 3000, what = 'condition'): Promise<NonNullable<T>> {
  const deadline = Date.now() + ms
  for (;;) {
    const value = await check()
    if (value) return value as NonNullable<T>
    if (Date.now() > deadline) throw new Error(`${what}: not reached within ${ms} ms`)
    await new Promise((r) => setTimeout(r, 25))
  }
}
