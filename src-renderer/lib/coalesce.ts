/**
 * Runs `fn` once, `waitMs` after the first of a burst of calls: a run of events (a job that
 * starts, runs and finishes within a few milliseconds) costs one refetch, not one each.
 */
export function coalesce(fn: () => void, waitMs: number): () => void {
  let timer: ReturnType<typeof setTimeout> | null = null
  return () => {
    if (timer !== null) return
    timer = setTimeout(() => {
      timer = null
      fn()
    }, waitMs)
  }
}
