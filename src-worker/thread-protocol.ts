import type { AttemptError, Claim } from './transport'
import type { JobInfo } from './handler-api'

/**
 * Messages between the worker's main thread (the runtime) and a handler thread. A thread runs
 * several jobs at once (handlers are async); each run has a number, `run`, that its messages
 * carry. They travel in batches: each `postMessage` carries an array of them (see
 * {@link MessageBatch}).
 */

export type ToThread =
  | { type: 'run'; run: number; job: JobInfo; payload: unknown }
  | { type: 'abort'; run: number; reason: string }
  | { type: 'gate-answer'; id: number; error: { code: string; message: string } | null }

/** A run's latest progress: the last fraction and the last note given (null: none given). */
export interface RunProgress {
  fraction: number | null
  note: string | null
}

export type FromThread =
  /** `linked`: the thread's own link to the host is up (src-shared/thread-link.ts). */
  | { type: 'ready'; types: string[]; problems: { file: string; error: string }[]; linked: boolean }
  | ({ type: 'progress'; run: number } & RunProgress)
  | { type: 'log'; run: number; line: string }
  | { type: 'gate'; run: number; id: number; file: string }
  /** A run's end carries the progress it reported in the turn it ended in, if any. */
  | { type: 'done'; run: number; result: unknown; progress?: RunProgress }
  | { type: 'failed'; run: number; error: AttemptError; progress?: RunProgress }
  /** The thread's own link to the host (src-shared/thread-link.ts), up since it was ready, has closed. */
  | { type: 'unlinked' }
  /**
   * An answer the host wrote to the thread's link that did not go through the mailbox (see
   * src-shared/thread-link.ts), passed on before the thread runs its jobs: `runs` are their run numbers in
   * the thread, in the order of the answer's jobs (negative, so they never meet the numbers the
   * runtime gives the runs it starts).
   */
  | { type: 'delivered'; response: unknown; runs: number[] }
  /** The thread has left an answer in its mailbox and started its job: the runtime takes it now. */
  | { type: 'mail' }

/** What a handler is told about its job, from the job's claim. */
export function jobInfo(claim: Claim): JobInfo {
  return { id: claim.job_id, type: claim.job_type, attempt_id: claim.attempt_id, max_runtime_s: claim.max_runtime_s }
}

/**
 * The messages one side sends the other during a turn, posted together as one array when the
 * turn ends (`schedule` says when: a microtask on the runtime's thread, which never blocks;
 * `setImmediate` in a handler thread, so a job's `done` joins the messages its handler sent
 * before returning, and the jobs started together end together). Each `postMessage` costs a
 * structured clone and a wake-up of the other thread: a batch of 16 no-op jobs so crosses in two
 * messages, not 48.
 *
 * A handler that computes for long without yielding holds its thread's turn open: a message it
 * sends while the batch has waited `maxAgeMs` or more goes at once with the batch, so its
 * progress still reaches the runtime as it goes (what it sends just before it blocks waits for
 * its next message or the end of the turn).
 */
export class MessageBatch<M> {
  private pending: M[] = []
  private due = false
  private firstAt = 0

  /** `post` gets the batch and may add to it what its side kept aside until now (see {@link touch}). */
  constructor(
    private readonly post: (batch: M[]) => void,
    private readonly schedule: (flush: () => void) => void,
    private readonly maxAgeMs = Number.POSITIVE_INFINITY,
  ) {}

  send(message: M): void {
    this.pending.push(message)
    this.touch()
  }

  /** Something will go with the next batch (added by `post`): makes sure a batch goes. */
  touch(): void {
    const timed = this.maxAgeMs !== Number.POSITIVE_INFINITY
    if (!this.due) {
      this.due = true
      if (timed) this.firstAt = performance.now()
      this.schedule(this.flush)
    } else if (timed && performance.now() - this.firstAt >= this.maxAgeMs) {
      this.flush()
    }
  }

  /** Posts what is due now (nothing if nothing is). */
  readonly flush = (): void => {
    if (!this.due) return
    this.due = false
    const batch = this.pending
    this.pending = []
    this.post(batch)
  }
}
