import { type Handler, JobError } from '../handler-api'

/**
 * `sleep {ms}`: waits, reporting progress; honours the abort signal. For demos and tests. Timed on
 * the monotonic clock: a wall clock set ahead or back meanwhile (NTP, a user) neither ends the
 * wait early nor stretches it.
 */
export const sleep: Handler = {
  type: 'sleep',
  async run({ payload, signal, progress }) {
    const ms = sleepMs(payload)
    const started = performance.now()
    let left = ms
    while (left > 0) {
      signal.throwIfAborted()
      const step = Math.min(left, 250)
      await pause(step, signal)
      // The last step ends the wait as its timer fires: Node's timers count whole milliseconds of
      // a clock of their own, and can fire a little before this one reads the whole step.
      left = step === left ? 0 : ms - (performance.now() - started)
      progress(left > 0 ? (ms - left) / ms : 1)
    }
    signal.throwIfAborted()
    return { slept_ms: Math.round(performance.now() - started) }
  },
}

/** Waits `ms`, or until `signal` aborts. One listener at a time on the run's signal: each step takes its own away when it ends. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    const wake = () => {
      clearTimeout(timer)
      signal.removeEventListener('abort', wake)
      resolve()
    }
    const timer = setTimeout(wake, ms)
    signal.addEventListener('abort', wake, { once: true })
  })
}

/**
 * How long a `sleep` payload says to wait: `ms`, a number of milliseconds ≥ 0; 0 for a job with
 * no payload or an object without `ms`. Anything else — `ms` of another kind (`null`, `"100"`),
 * a payload that is not an object (an array, a string) — is refused, not taken for 0.
 */
function sleepMs(payload: unknown): number {
  if (payload === null || payload === undefined) return 0
  if (typeof payload !== 'object' || Array.isArray(payload)) throw invalidPayload('sleep: the payload must be an object {ms}')
  if (!('ms' in payload)) return 0
  const { ms } = payload as { ms: unknown }
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) throw invalidPayload('sleep: payload.ms must be a number of milliseconds ≥ 0')
  return ms
}

const invalidPayload = (message: string) => new JobError(message, { code: 'invalid_payload', retryable: false })
