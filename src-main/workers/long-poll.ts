/**
 * The longest a long-poll waits in one request — a worker's claim, a file lease's retry wait —
 * whatever transport asked: HTTP's dialects and the local workers' IPC alike. A larger wait is
 * accepted and waits this long (the worker asks again); the server's request timeout sits above
 * it (host.ts).
 */
export const MAX_LONG_POLL_MS = 30_000

/** How long a long-poll that asked for `askedMs` waits: no longer than {@link MAX_LONG_POLL_MS}, and not at all when it asked for no wait. */
export function longPollMs(askedMs: number | undefined): number {
  return Math.min(askedMs ?? 0, MAX_LONG_POLL_MS)
}
