import type { AttemptError, Claim, ExchangeRequest } from './transport'
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
  /** `retryable: false`: the gate refused the path itself, and every attempt would meet that refusal (gate-path.ts's GateRefusal). */
  | { type: 'gate-answer'; id: number; error: { code: string; message: string; retryable?: false } | null }
  /** To the driving thread (driver.ts): a job of its claims that the runtime ran has ended after `ms`; its entry is free. */
  | { type: 'freed'; job_type: string; ms: number }
  /** To the driving thread: begin claiming (the worker has told the host it is ready). */
  | { type: 'begin' }
  /** To the driving thread: the worker drains; say `drained` once your own jobs are reported. */
  | { type: 'drain' }
  /** To the driving thread: the host refuses the worker; send it nothing more, and give the runtime your jobs and reports (`unlinked`). */
  | { type: 'refused' }
  /** To the driving thread, which runs a job the runtime has taken over: answer (`pong`), to show your turns still come (the runtime's watch, runtime.ts). */
  | { type: 'ping' }

/** A run's latest progress: the last fraction and the last note given (null: none given). */
export interface RunProgress {
  fraction: number | null
  note: string | null
}

export type FromThread =
  /** `driving`: the thread claims, runs and reports its own jobs over its link to the host (driver.ts). */
  | { type: 'ready'; types: string[]; fileOf: Record<string, string>; problems: { file: string; error: string }[]; driving: boolean }
  | ({ type: 'progress'; run: number } & RunProgress)
  | { type: 'log'; run: number; line: string }
  /** A line for the worker's log as it is (a driving thread's jobs' lines, written as the runtime writes a job's). */
  | { type: 'line'; line: string }
  | { type: 'gate'; run: number; id: number; file: string }
  /** A run's end carries the progress it reported in the turn it ended in, if any. */
  | { type: 'done'; run: number; result: unknown; progress?: RunProgress }
  | { type: 'failed'; run: number; error: AttemptError; progress?: RunProgress }
  /** The driving thread gives the runtime the jobs of these entries of the job table, which it runs (job-table.ts). */
  | { type: 'adopt'; entries: number[] }
  /** The driving thread gives the runtime a job it claimed, to run elsewhere (-1: it has no entry in the table). */
  | { type: 'hand-over'; entry: number; claim: Claim }
  /** The driving thread's link has closed, or the host refuses the worker: these reports may not have reached the host; the runtime takes them, and claims from now on. */
  | { type: 'unlinked'; complete: NonNullable<ExchangeRequest['complete']>; fail: NonNullable<ExchangeRequest['fail']> }
  /** The driving thread, draining, has reported all its jobs. */
  | { type: 'drained' }
  /** The host refuses the worker (transport.ts refusesWorker): the worker is to stop; the driving thread gives the runtime its jobs and reports (`unlinked`) and sends nothing more. */
  | { type: 'refused'; status: number; code: string; detail: string }
  /** The runtime is to look at the job table now (job-table.ts `take`): a job beats more often than any before, or its watch slept. */
  | { type: 'look' }
  /** The driving thread's answer to a `ping`: its turns come again. */
  | { type: 'pong' }

/** What a handler is told about its job, from the job's claim. */
export function jobInfo(claim: Claim): JobInfo {
  return { id: claim.job_id, type: claim.job_type, attempt_id: claim.attempt_id, max_runtime_s: claim.max_runtime_s }
}

/**
 * The messages one side sends the other during a turn, posted together as one array when the
 * turn ends (`schedule` says when: a microtask on the runtime's thread, which never blocks;
 * `setImmediate` in a handler thread, so a job's `done` joins the messages its handler sent
 * before returning, and the jobs started together that await something end together). Each
 * `postMessage` costs a structured clone and a wake-up of the other thread: a batch of 16 jobs
 * that each await a timer so crosses in two messages, not 48. (A handler thread sends the ends
 * waiting in its batch before it starts each further job, handler-thread.ts `endsOut`: 16 no-op
 * jobs, which end before the next starts, come back in 16.)
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
