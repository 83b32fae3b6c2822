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
  /** How long the next claim waits yet, while jobs stream in one at a time ({@link ClaimPace}); 0 when it may go now. */
  claimDueInMs: number
}

/**
 * What the worker sends next: an exchange (a long-poll or not), a look again later, or nothing.
 * - Reports go as soon as no other exchange with reports is in flight. When no long-poll is in
 *   flight either, they carry one for the free slots — unless they hold heartbeats, whose
 *   answers may stop a job and must come back at once. A worker that runs short jobs one at a
 *   time so makes one round trip per job: its report and its next claim are one exchange.
 * - With nothing to report, free slots are claimed by a long-poll — but while every running job
 *   is a short one that should end within `reportsDueInMs`, the claim waits to go with its report.
 * - While jobs stream in one at a time, the next claim waits out its pace (`claimDueInMs`,
 *   {@link ClaimPace}), and the reports without heartbeats wait with it, to go in one exchange.
 */
export function nextExchange(state: SendState): { longPoll: boolean } | { pollInMs: number } | null {
  const { reports, heartbeats, reporting, polling, free, reportsDueInMs, claimDueInMs } = state
  const claimWaits = !polling && free > 0 && claimDueInMs > 0
  if (reports) {
    if (reporting) return null
    if (claimWaits && !heartbeats) return { pollInMs: claimDueInMs }
    return { longPoll: !polling && free > 0 && !heartbeats }
  }
  if (polling || reporting || free <= 0) return null
  if (claimWaits) return { pollInMs: claimDueInMs }
  return reportsDueInMs === null ? { longPoll: true } : { pollInMs: reportsDueInMs }
}

/**
 * A claim that waited less than this at the host for its jobs, and got fewer than it asked for,
 * says jobs are streaming in one at a time ({@link ClaimPace}): jobs were queued when it came, or
 * one came within a millisecond. Shorter than the gap between jobs that arrive 500 a second or
 * fewer, so that those are each picked up as they come.
 */
export const CLAIM_STREAM_MS = 1

/**
 * How far apart a talker's claims leave while jobs stream in: the longest a job then waits for
 * its worker's next claim, as a producer's linger is (Kafka's is 5 ms). The throughput and the
 * jobs an exchange it buys are in docs/workers.md.
 */
export const CLAIM_PACE_MS = 4

/**
 * The pace of a talker's claims. A claim that waits is answered by the first job that comes, so
 * jobs submitted one at a time, faster than a worker takes them, would each cost the host a
 * whole exchange of their own: one answer, one report, one commit, a wake-up of each side. When
 * a claim comes back with jobs, fewer than it asked for, having waited at the host less than
 * {@link CLAIM_STREAM_MS} for them, jobs are arriving one by one faster than that: the next
 * claim leaves {@link CLAIM_PACE_MS} after it, and takes in one answer the jobs that came
 * meanwhile. A claim that waited longer for its job, or that came back full (a backlog), or
 * empty (whose `claim_waited_ms` the host sets to 0), sets no pace: the next one leaves at once, and a job that arrives alone is picked up as
 * soon as it is submitted. Nor does a paced claim that came back with a single job: waiting out
 * the pace gathered nothing, so jobs come slower than the pace (a steady stream a few hundred a
 * second, whose jobs now and then arrive close together), and pacing the next claim would only
 * make the jobs that come meanwhile wait for it.
 *
 * The wait is the host's own reading (the answer's `claim_waited_ms`), not the round trip: a
 * busy host, a slow machine or a long way (a worker on another machine) lengthens the round trip
 * of a claim that did not wait at all. A host that does not send it leaves the round trip as
 * the best reading there is ({@link claimWaitedMs}).
 */
export class ClaimPace {
  private notBefore = 0
  /** The last answer set the pace, so the claim answered next is a paced one. */
  private pacing = false

  /** A claim that left at `sentAt` was answered with `got` of the `asked` jobs, having waited `waitedMs` at the host for them. */
  answered(sentAt: number, waitedMs: number, asked: number, got: number): void {
    const streaming = got > 0 && got < asked && waitedMs < CLAIM_STREAM_MS
    const gathered = !this.pacing || got > 1
    this.pacing = streaming && gathered
    if (this.pacing) this.notBefore = sentAt + CLAIM_PACE_MS
  }

  /** How long the next claim waits yet; 0 when it may go now. */
  dueInMs(now: number): number {
    return Math.max(0, this.notBefore - now)
  }
}

/** How long a claim sent at `sentAt` and answered at `now` waited at the host: as its answer says, else its whole round trip. */
export function claimWaitedMs(answer: { claim_waited_ms?: number }, sentAt: number, now: number): number {
  return typeof answer.claim_waited_ms === 'number' ? answer.claim_waited_ms : now - sentAt
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
