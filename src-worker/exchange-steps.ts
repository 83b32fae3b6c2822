import { MAX_CLAIM_JOBS } from '../src-shared/limits'
import { ClaimPace, claimWaitedMs } from './exchange-plan'
import { ReportBudget, type Reports } from './report-budget'
import { type ExchangeAnswer, type ExchangeRequest, type HostContact, RETRY_MS } from './transport'

/** How long a long-poll's claim waits at the host for jobs, unless the worker says otherwise (RuntimeOptions.claimWaitMs). */
export const CLAIM_WAIT_MS = 20_000

type ExchangeClaim = NonNullable<ExchangeRequest['claim']>

/** How many jobs a claim for `free` slots asks for: no more than the host grants in one answer. */
export const claimSize = (free: number): number => Math.min(free, MAX_CLAIM_JOBS)

/** The request of one exchange: its heartbeats, completions, failures and claim, each only when there is one. */
export function exchangeRequest(worker_id: string, heartbeat: ExchangeRequest['heartbeat'], reports: Reports, claim: ExchangeClaim | undefined): ExchangeRequest {
  const request: ExchangeRequest = { worker_id }
  if (heartbeat) request.heartbeat = heartbeat
  if (reports.complete.length > 0) request.complete = reports.complete
  if (reports.fail.length > 0) request.fail = reports.fail
  if (claim) request.claim = claim
  return request
}

/**
 * What each talker of a worker (the runtime on its main thread, a driving thread: driver.ts)
 * keeps from one of its exchanges to the next, and the steps of an exchange both take with it:
 * how many reports an exchange carries, how soon the next claim may go, whether the host is out
 * of reach.
 */
export class ExchangeSteps {
  /** How many reports an exchange carries (report-budget.ts). */
  readonly budget = new ReportBudget()
  /** How soon the next claim may go while jobs stream in (exchange-plan.ts). */
  readonly pace = new ClaimPace()

  constructor(
    /** What the talker says of the host being out of reach, and back (transport.ts HostContact). */
    readonly contact: HostContact,
    /** How long a long-poll's claim waits at the host for jobs. */
    readonly claimWaitMs = CLAIM_WAIT_MS,
  ) {}

  /**
   * The claim of an exchange for `max_jobs` jobs ({@link claimSize}; none for 0 or fewer: a
   * talker's free slots go below 0 while the other claims for some of them). A long-poll's waits
   * at the host for them, but not while the host is out of reach (HostContact.claimWaitMs).
   */
  claim(streams: string[], job_types: string[] | undefined, gpu_available: boolean | undefined, max_jobs: number, longPoll: boolean): ExchangeClaim | undefined {
    if (max_jobs <= 0) return undefined
    return { streams, job_types, gpu_available, max_jobs, max_wait_ms: longPoll ? this.contact.claimWaitMs(this.claimWaitMs) : 0 }
  }

  /**
   * The host answered an exchange that left at `sentAt` (performance.now()) asking for `asked`
   * jobs: the line that it is reached again is logged (not for a long-poll given up on, `quiet`:
   * its answer may be the transport's own), the claims' pace is set, and the report budget grows.
   */
  answered(answer: ExchangeAnswer, sentAt: number, asked: number, quiet: boolean, log: (line: string) => void): void {
    const again = quiet ? null : this.contact.answered()
    if (again !== null) log(again)
    this.pace.answered(sentAt, claimWaitedMs(answer, sentAt, performance.now()), asked, answer.jobs.length)
    this.budget.taken()
  }

  /**
   * An exchange the host did not answer: says so, and when the next may leave, its reports with
   * it: on the monotonic clock (performance.now()), so that a wall clock set back meanwhile (NTP
   * stepping it as the machine boots, say) does not hold the worker back for as long as it went.
   */
  retryAt(error: Error, log: (line: string) => void): number {
    log(this.contact.retrying(error))
    return performance.now() + RETRY_MS
  }
}
