import { MAX_LONG_POLL_MS } from '../../src-shared/worker-exchange'

/**
 * The longest a long-poll waits in one request, whatever transport asked, is the worker
 * exchange's {@link MAX_LONG_POLL_MS}; the server's request timeout sits above it (host.ts).
 */
export { MAX_LONG_POLL_MS }

/** How long a long-poll that asked for `askedMs` waits: no longer than {@link MAX_LONG_POLL_MS}, and not at all when it asked for no wait. */
export function longPollMs(askedMs: number | undefined): number {
  return Math.min(askedMs ?? 0, MAX_LONG_POLL_MS)
}

/**
 * While the host stops, a long-poll waits at most this long, for nothing: its client (told
 * nothing of the stop) asks again no faster than once a second, and no wait holds the stop up
 * for more than this.
 */
export const STOPPING_WAIT_MS = 1000
