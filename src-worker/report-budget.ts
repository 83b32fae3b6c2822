import { MAX_BATCH_ITEMS, MAX_ERROR_CHARS } from '../src-shared/limits'
import { cut, SHORT_MESSAGE_CHARS, shortened } from './attempt-error'
import { type ExchangeAnswer, type ExchangeRequest, HostError, type ReportAnswer, UnsentRequest } from './transport'

/** The completions and failures of one exchange. */
export interface Reports {
  complete: NonNullable<ExchangeRequest['complete']>
  fail: NonNullable<ExchangeRequest['fail']>
}

/** Reports that did not reach the host, back at the head of `outbox`: they go with the next exchange (completions and failures are idempotent). */
export function putBackReports(outbox: Reports, reports: Reports): void {
  outbox.complete.unshift(...reports.complete)
  outbox.fail.unshift(...reports.fail)
}

/**
 * What the host answered of the completions `sent` and the failures of an exchange: each
 * refusal is logged ({@link refusedReportLine}), and the completions refused though their lease
 * holds go into `outbox` as failures ({@link failuresOfRefusedCompletions}).
 */
export function reportsAnswered(answer: ExchangeAnswer, sent: Reports['complete'], outbox: Reports, log: (line: string) => void): void {
  for (const a of answer.completed) if (!a.ok) log(refusedReportLine(a, 'completion'))
  for (const a of answer.failed) if (!a.ok) log(refusedReportLine(a, 'failure'))
  outbox.fail.push(...failuresOfRefusedCompletions(sent, answer.completed))
}

/**
 * The host refused an exchange for what it carried: as larger than it accepts (413, its
 * `--body-limit`) or as invalid (400); or the worker could not send it at all (transport.ts
 * UnsentRequest: it cannot be written as JSON, or is too long for its way). Sent again unchanged,
 * it would fail again.
 */
export const refusesReports = (error: unknown): error is HostError | UnsentRequest =>
  error instanceof UnsentRequest || (error instanceof HostError && (error.status === 413 || error.status === 400))

/** The exchange was refused or not sent for its size: what it carried may go again smaller (heartbeats without their notes). */
export const tooLarge = (error: HostError | UnsentRequest): boolean => (error instanceof HostError ? error.status === 413 : error.code === 'result_too_large')

/**
 * The completions of `sent` the host refused though their lease still holds, as failures to
 * report instead, rather than hold the job's capacity until the lease expires and be recorded
 * as a missed heartbeat. Sent again, such a completion would be refused again:
 * - an operator took a file from its lease (force_release, `file_lease_lost`): the job cannot
 *   succeed under that lease; its attempt fails naming why, retryable (the job runs again);
 * - the completion failed its own schema (`invalid_request`: a result JSON cannot carry as sent,
 *   a note too long): its attempt fails `report_refused` with the host's word, not retryable
 *   (the same run would return the same result).
 * The host answers the completions in the order sent, so the nth answer is the nth completion's
 * (two attempts of one job may be in one exchange: the job id alone would not tell them apart).
 */
export function failuresOfRefusedCompletions(sent: Reports['complete'], answers: readonly ReportAnswer[]): Reports['fail'] {
  const failures: Reports['fail'] = []
  sent.forEach(({ job_id, attempt_id, lease_token }, i) => {
    const answer = answers[i]
    if (answer === undefined || answer.ok) return
    if (answer.code === 'file_lease_lost') {
      failures.push({ job_id, attempt_id, lease_token, error: { code: 'file_lease_lost', message: 'An operator took a file from this job (force release): its result was dropped', retryable: true } })
    } else if (answer.code === 'invalid_request') {
      const message = cut(`The host refused the completion as invalid, so its result was dropped: ${answer.detail}`, MAX_ERROR_CHARS)
      failures.push({ job_id, attempt_id, lease_token, error: { code: 'report_refused', message, retryable: false } })
    }
  })
  return failures
}

/**
 * What the worker logs of a completion or failure the host refused: a lost lease drops its
 * report; one refused as invalid is not sent again (a completion becomes a failure,
 * {@link failuresOfRefusedCompletions}; a failure is dropped, and its lease expires on the host).
 */
export function refusedReportLine(answer: ReportAnswer & { ok: false }, kind: 'completion' | 'failure'): string {
  if (answer.code === 'invalid_request') {
    const then = kind === 'completion' ? 'its attempt fails as report_refused' : 'dropped, its lease expires on the host'
    return `leasehold worker: the host refuses the ${kind} of ${answer.job_id} as invalid (${answer.detail}); ${then}`
  }
  return `leasehold worker: lost the lease of ${answer.job_id} (${answer.code}: ${answer.detail}); its result is dropped`
}

/**
 * How many reports a talker (the runtime, a driving thread) sends in one exchange. The host's
 * body limit is its own (`serve --body-limit`), so the worker learns it from refusals: an
 * exchange the host refuses as too large (413) or invalid (400) is sent again as halves, until
 * the report it refuses is alone, and that report is made small or dropped (see
 * {@link afterRefused}). Sent again unchanged, they would be refused every second, and every
 * report after them would wait forever. The budget grows back with each exchange the host takes.
 */
export class ReportBudget {
  private max = MAX_BATCH_ITEMS

  /** Takes the completions and failures the next exchange carries out of `outbox` (completions first). */
  take(outbox: Reports): Reports {
    const complete = outbox.complete.splice(0, this.max)
    const fail = outbox.fail.splice(0, this.max - complete.length)
    return { complete, fail }
  }

  /** The host took an exchange. */
  taken(): void {
    this.max = Math.min(MAX_BATCH_ITEMS, this.max * 2)
  }

  /**
   * The host refused `sent` (see {@link refusesReports}): what to send again. Several reports go
   * again, half as many at a time. A report refused as invalid on its own is dropped: its lease
   * expires on the host, and the job is retried there. A completion too large on its own (its
   * result) becomes a failure of its attempt, `result_too_large`, not retryable: the same run
   * would return the same result; one that could not be sent on its own fails the same way, or as
   * `result_not_json` when JSON cannot write it. A failure too large on its own goes again with its
   * message cut short and no stack, and is dropped should even that fail.
   */
  afterRefused(sent: Reports, refusal: HostError | UnsentRequest, log: (line: string) => void): Reports {
    const count = sent.complete.length + sent.fail.length
    if (count > 1) {
      this.max = Math.max(1, Math.floor(count / 2))
      return sent
    }
    const unsent = refusal instanceof UnsentRequest
    const why = unsent ? refusal.message : `${refusal.status} ${refusal.code}: ${refusal.message}`
    if (!unsent && refusal.status !== 413) {
      const report = sent.complete[0] ?? sent.fail[0]
      if (report) log(`leasehold worker: the host refuses the report of ${report.job_id} as invalid (${why}); dropped, its lease expires on the host`)
      return { complete: [], fail: [] }
    }
    const [completion] = sent.complete
    if (completion) {
      const { job_id, attempt_id, lease_token } = completion
      const code = unsent ? refusal.code : 'result_too_large'
      const message = unsent ? `The result could not be sent to the host: ${why}` : `The result is larger than the host accepts (${why})`
      log(`leasehold worker: ${unsent ? `the result of ${job_id} could not be sent (${why})` : `the result of ${job_id} is larger than the host accepts (${why})`}; its attempt fails as ${code}`)
      return { complete: [], fail: [{ job_id, attempt_id, lease_token, error: { code, message, retryable: false } }] }
    }
    const [failure] = sent.fail
    if (!failure) return { complete: [], fail: [] }
    const { stack, message = '' } = failure.error
    if (stack === undefined && message.length <= SHORT_MESSAGE_CHARS) {
      log(`leasehold worker: the failure of ${failure.job_id} ${unsent ? `could not be sent (${why})` : `is larger than the host accepts (${why})`} even cut short; dropped, its lease expires on the host`)
      return { complete: [], fail: [] }
    }
    return { complete: [], fail: [{ ...failure, error: shortened(failure.error) }] }
  }
}
