/**
 * When a worker talks to the host: the rule both of its talkers follow — the runtime on the
 * worker's main thread, and a local worker's driving thread (driver.ts).
 */

/** What a talker knows when it decides what to send (see {@link nextExchange}). */
export interface SendState {
  /** Heartbeats, completions or failures wait to be sent. */
  reports: boolean
  /** Some of them are heartbeats. */
  heartbeats: boolean
  /** An exchange with reports and no long-poll is in flight. */
  reporting: boolean
  /** A long-poll is in flight. */
  polling: boolean
  /** Slots neither running a job nor asked for. */
  free: number
  /** How soon the running jobs should report, when they are all short jobs; else null. */
  reportsDueInMs: number | null
}

/**
 * What the worker sends next: an exchange (a long-poll or not), a look again later, or nothing.
 * - Reports go as soon as no other exchange with reports is in flight. When no long-poll is in
 *   flight either, they carry one for the free slots — unless they hold heartbeats, whose
 *   answers may stop a job and must come back at once. A worker that runs short jobs one at a
 *   time so makes one round trip per job: its report and its next claim are one exchange.
 * - With nothing to report, free slots are claimed by a long-poll — but while every running job
 *   is a short one that should end within `reportsDueInMs`, the claim waits to go with its report.
 */
export function nextExchange(state: SendState): { longPoll: boolean } | { pollInMs: number } | null {
  const { reports, heartbeats, reporting, polling, free, reportsDueInMs } = state
  if (reports) return reporting ? null : { longPoll: !polling && free > 0 && !heartbeats }
  if (polling || reporting || free <= 0) return null
  return reportsDueInMs === null ? { longPoll: true } : { pollInMs: reportsDueInMs }
}

/**
 * `run`, once at the end of the turn however often the returned function is called during it:
 * what a talker sends is decided once this turn's other changes are in.
 */
export function onceThisTurn(run: () => void): () => void {
  let queued = false
  return () => {
    if (queued) return
    queued = true
    setImmediate(() => {
      queued = false
      run()
    })
  }
}
