import { type Handler, JobError } from '../handler-api'

/** `sleep {ms}`: waits, reporting progress; honours the abort signal. For demos and tests. */
export const sleep: Handler = {
  type: 'sleep',
  async run({ payload, signal, progress }) {
    const ms = (payload as { ms?: unknown } | null)?.ms ?? 0
    if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
      throw new JobError('sleep: payload.ms must be a number of milliseconds ≥ 0', { code: 'invalid_payload', retryable: false })
    }
    const started = Date.now()
    while (Date.now() - started < ms) {
      signal.throwIfAborted()
      const left = ms - (Date.now() - started)
      // One listener at a time on the run's signal: each step takes its own away when it ends.
      await new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer)
          signal.removeEventListener('abort', wake)
          resolve()
        }
        const timer = setTimeout(wake, Math.min(left, 250))
        signal.addEventListener('abort', wake, { once: true })
      })
      progress(Math.min(1, (Date.now() - started) / Math.max(ms, 1)))
    }
    signal.throwIfAborted()
    return { slept_ms: Date.now() - started }
  },
}
