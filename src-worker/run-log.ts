import { MAX_NOTE_CHARS } from '../src-shared/limits'
import { printable } from '../src-shared/printable'
import { shortId } from '../src-shared/short-id'
import { cut } from './attempt-error'
import type { Claim } from './transport'

/**
 * What a handler's `log()` may write into its worker's log (the host's, for a local worker):
 * each line cut as a progress note is, and each job's lines held to a rate. Unbounded, one
 * buggy handler filled the host's log and its disk — a 5 MB line in one call, 13.5 MB in 3.5 s
 * from a loop. Applied in the handler's thread, before a line is copied anywhere.
 */

/**
 * A line a job's handler logged, as the worker's log writes it, whichever thread claimed the job:
 * under the job's type and short id (`[thumbnail …81c03f9a] …`), every control character escaped.
 * The line carries what the job's program wrote, and the job type is the submitter's: an escape
 * sequence would reach the operator's terminal, a carriage return forge a line of the log.
 */
export function jobLogLine(claim: Pick<Claim, 'job_type' | 'job_id'>, line: string): string {
  return printable(`[${claim.job_type} ${shortId(claim.job_id)}] ${line}`)
}

/** The longest line a handler logs: a longer one is cut, with the mark `… (cut)`, as a note is. */
export const MAX_LOG_LINE_CHARS = MAX_NOTE_CHARS
/** The lines a job may log at once, before the steady rate holds. */
export const LOG_BURST_LINES = 100
/** The lines a job may log a second, once its burst is spent. */
export const LOG_LINES_PER_S = 10

/**
 * The log lines of one run: a token bucket of {@link LOG_BURST_LINES} filled at
 * {@link LOG_LINES_PER_S}. A line with no token left is dropped, and counted: the count goes into
 * the log as one line before the next line that is written, or as the run ends ({@link flush}).
 */
export class RunLog {
  private tokens = LOG_BURST_LINES
  private filledAt: number
  private dropped = 0

  constructor(
    private readonly write: (line: string) => void,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.filledAt = now()
  }

  /** Writes `line`, cut to {@link MAX_LOG_LINE_CHARS}, unless the job has logged more than its rate. */
  line(line: string): void {
    const now = this.now()
    this.tokens = Math.min(LOG_BURST_LINES, this.tokens + ((now - this.filledAt) / 1000) * LOG_LINES_PER_S)
    this.filledAt = now
    if (this.tokens < 1) {
      this.dropped++
      return
    }
    this.tokens--
    this.flush()
    this.write(cut(line, MAX_LOG_LINE_CHARS))
  }

  /** Says how many lines were dropped since it last said so, if any. */
  flush(): void {
    if (this.dropped === 0) return
    this.write(`… ${this.dropped} log line(s) of this job dropped: more than ${LOG_BURST_LINES} at once, or ${LOG_LINES_PER_S} a second after`)
    this.dropped = 0
  }
}
