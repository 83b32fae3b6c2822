import type { IpcParams } from '../src-shared/ipc-protocol'
import { redactedUrl } from '../src-shared/redis-streams'
import type { AttemptFailure, FileHeartbeat, WorkerClaimed, WorkerExchangeAnswer } from '../src-shared/worker-exchange'

/**
 * What the worker runtime needs from the host, behind one interface with two implementations:
 * HTTP (the worker API + the files API, for external workers) and IPC (local workers the host
 * spawns). Both carry the same messages (src-shared/worker-exchange.ts); the runtime does not
 * know which it has.
 */

/** A claimed job: a lease, an attempt and a token (the worker API's claim). */
export type Claim = WorkerClaimed

/** One round trip with the host: reports on the jobs a worker runs, then a claim for its free slots. */
export type ExchangeRequest = IpcParams<'exchange'>

/** The host's answer to one report, in the order sent: as its one-job route answers it, or refused (`ok: false` with the 409's code). */
export type ReportAnswer = WorkerExchangeAnswer['heartbeats' | 'completed' | 'failed'][number]
export type HeartbeatAnswer = WorkerExchangeAnswer['heartbeats'][number]

export type ExchangeAnswer = WorkerExchangeAnswer

/** What an exchange given up on (its signal aborted) comes to: nothing reported back, nothing claimed. */
export const noAnswer = (): ExchangeAnswer => ({ heartbeats: [], completed: [], failed: [], jobs: [], claim_waited_ms: 0 })

/** How an attempt failed, as the runtime always reports it: every field the exchange allows, filled. */
export type AttemptError = Required<Pick<AttemptFailure, 'code' | 'message' | 'retryable'>> & Pick<AttemptFailure, 'stack'>

export type FileAcquireAnswer =
  | { granted: true }
  | { granted: false; code: 'file_lease_held'; retry_at: string | null; holder: unknown }
  | { granted: false; code: 'blocked'; blocker: unknown }

/** An answer of the host the transport cannot act on: its HTTP status and error code. */
export class HostError extends Error {
  override name = 'HostError'
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message)
  }
}

/**
 * The code of a {@link HostError} for an answer that is not Leasehold's at all (transport-http.ts):
 * its message is the whole line that says so ({@link notLeaseholdAnswer}).
 */
export const NOT_LEASEHOLD = 'not_leasehold'

/**
 * The host refuses the worker itself, not one of its reports: its token is missing, wrong or
 * revoked (401), it may not act (403), nothing at that address answers as a worker API (404, or
 * an answer that is not Leasehold's: {@link NOT_LEASEHOLD}), or the host finds invalid (400) an
 * exchange that carried no completion or failure, so what it cannot read is the worker's claim
 * or heartbeats (a worker of another version than its host's). Asking again cannot change that,
 * so the worker stops (with the reason, and exit status 1) instead of retrying every second. A
 * host that is stopping (503), or one that does not answer at all, is asked again. `reports`
 * counts the exchange's completions and failures.
 */
export function refusesWorker(error: unknown, reports: number): error is HostError {
  return error instanceof HostError && (error.status === 401 || error.status === 403 || error.status === 404 || error.code === NOT_LEASEHOLD || (error.status === 400 && reports === 0))
}

/**
 * The line a worker the host refuses stops with; one that is not a Leasehold host is said as the
 * client commands say it. A refused token (401) is named by where it came from (`--token`,
 * `LEASEHOLD_TOKEN`, a data dir's token file), as the client commands name it: a token picked up
 * from the environment or a file is easily not the one meant.
 */
export function refusedLine(error: HostError, tokenSource?: string): string {
  if (error.code === NOT_LEASEHOLD) return `leasehold worker: ${error.message}; stopping`
  const from = error.status === 401 && tokenSource !== undefined ? `; the token came from ${tokenSource}` : ''
  return `leasehold worker: the host refuses this worker (${error.status} ${error.code}: ${error.message}${from}); stopping`
}

/**
 * The way to the host refused a call before the host saw it (Redis's ACL refused the worker's
 * user): the message says what, and the worker asks again, as when the host did not answer.
 */
export class TransportRefusal extends Error {
  override name = 'TransportRefusal'
}

/**
 * The way to the host itself did not answer (a Redis paused, or behind a network that drops
 * packets), so no answer could come: the message says so, rather than blame the host.
 */
export class TransportSilence extends Error {
  override name = 'TransportSilence'
}

/** Why an exchange failed, for the worker's log: the host's refusal, the transport's, or no answer at all. */
export const exchangeFailure = (error: Error): string =>
  error instanceof HostError
    ? `the host answered ${error.status} ${error.code} (${error.message})`
    : error instanceof TransportRefusal || error instanceof TransportSilence
      ? error.message
      : `the host did not answer (${error.message})`

/** The line of a stopping talker whose exchange failed: it does not wait for a host that does not answer, and the leases of the `count` reports it carried expire there. */
export const droppedLine = (error: Error, count: number): string => `leasehold worker: ${exchangeFailure(error)}; ${count} report(s) dropped on the way out`

/** How long a talker waits after an exchange the host did not answer before it sends the next, with that one's reports. */
export const RETRY_MS = 1000

/**
 * What a talker of the worker (its runtime, its driving thread: each exchanges with the host on
 * its own) says of the host being out of reach: the line of an exchange it asks again in a second,
 * and, at the first answer after such a line, the line that it reached the host again — so the log
 * tells where each outage of the host ends (limitRetryLines prints that line once, however many
 * talkers say it). Only a worker outside the host says it, naming the host as its "taking" line
 * does: a local worker's IPC and link end with their host, and come back with a new process.
 */
export class HostContact {
  private lost = false
  /** `againLine`: what to say when the host answers after a retry line; null to say nothing. */
  constructor(private readonly againLine: string | null) {}

  /** The line of an exchange that failed and is sent again in a second; the host counts as lost until one is answered. */
  retrying(error: Error): string {
    this.lost = true
    return `leasehold worker: ${exchangeFailure(error)}; retrying in ${RETRY_MS / 1000} s`
  }

  /**
   * How long a long-poll's claim waits at the host for jobs: not at all while the host is lost,
   * so that the first exchange it answers comes back at once and says so, rather than after
   * `ms` with no job to take.
   */
  claimWaitMs(ms: number): number {
    return this.lost ? 0 : ms
  }

  /** An exchange was answered: the line to log if the host had been lost, else null. */
  answered(): string | null {
    if (!this.lost) return null
    this.lost = false
    return this.againLine
  }
}

/**
 * The line a `leasehold worker` says when it reaches its host again after it logged a retry line
 * (HostContact), worded as `leasehold submit --wait` says it; none for a local worker's link.
 */
export function reachedAgainLine(workerId: string, route: HostRoute | undefined): string | null {
  if (route === undefined || route.via === 'link') return null
  return `leasehold worker ${workerId}: connected to the host at ${hostPlace(route)} again`
}

/** Where a `leasehold worker` takes its jobs from, as its log names it: the host's URL, or Redis's (its password hidden) with the prefix. */
export function hostPlace(route: RemoteRoute): string {
  return route.via === 'redis' ? `${redactedUrl(route.url)} (prefix ${route.prefix})` : route.url
}

/**
 * An exchange the worker could not send, found before it left: its request cannot be written as
 * JSON (a string longer than the engine makes, a BigInt, an object that contains itself), or is
 * longer than its way to the host carries. Sent again unchanged, it would fail again: its reports
 * go again in halves, as after the host's 413 (report-budget.ts), until the one at fault is alone
 * and fails its attempt with `code`.
 */
export class UnsentRequest extends Error {
  override name = 'UnsentRequest'
  constructor(
    readonly code: 'result_too_large' | 'result_not_json',
    message: string,
  ) {
    super(message)
  }
}

/** Why a request could not be written as JSON: `JSON.stringify` throws a RangeError for a text too long, a TypeError for a BigInt or a cycle. */
export function unsentOf(error: unknown): UnsentRequest {
  const why = error instanceof Error ? error.message : String(error)
  return error instanceof RangeError
    ? new UnsentRequest('result_too_large', `The request is too large to write (${why})`)
    : new UnsentRequest('result_not_json', `The request cannot be written as JSON (${why})`)
}

/** `message` as one JSON text of at most `maxChars` characters; else throws an {@link UnsentRequest}. */
export function requestText(message: unknown, maxChars = Number.POSITIVE_INFINITY): string {
  let text: string
  try {
    text = JSON.stringify(message)
  } catch (error) {
    throw unsentOf(error)
  }
  if (text.length > maxChars) throw new UnsentRequest('result_too_large', `The request is longer than the way to the host carries (${text.length} characters; at most ${maxChars})`)
  return text
}

/** The lease is gone (409 from the host): stop the job, report nothing more under it. */
export class LeaseLostError extends Error {
  override name = 'LeaseLostError'
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message)
  }
}

/**
 * How a worker's driving thread reaches the host (driver.ts): a local worker's link
 * (src-shared/thread-link.ts), or the transport of `leasehold worker` — the worker API over
 * HTTP, or Redis Streams — opened again from that thread.
 */
export type HostRoute =
  | { via: 'link'; path: string; token: string }
  | { via: 'http'; url: string; token: string }
  | { via: 'redis'; url: string; token: string; prefix: string }

/** The routes `leasehold worker` reaches its host by: the worker API over HTTP, or Redis Streams. */
export type RemoteRoute = Exclude<HostRoute, { via: 'link' }>

/**
 * A file request of the gate: the file, the job's owner id, and the job's lease with its token,
 * which a host proves when the worker's token is a worker token (it acts for its own jobs only).
 */
export interface GateRequest {
  file: string
  owner_id: string
  lease_id: string
  lease_token: string
}

export interface WorkerTransport {
  /**
   * Reports and a claim in one round trip (the worker API's /batch, IPC `exchange`). When `signal`
   * aborts while the claim waits, resolves with the reports answered and no jobs.
   */
  exchange(request: ExchangeRequest, signal?: AbortSignal): Promise<ExchangeAnswer>
  acquireFile(request: GateRequest): Promise<FileAcquireAnswer>
  /** Resolves once the host's clock reaches the one retry of `file` for `owner_id` (or after `max_wait_ms`). */
  waitFileRetry(request: { file: string; owner_id: string; max_wait_ms: number }, signal: AbortSignal): Promise<boolean>
  heartbeatFile(request: GateRequest): Promise<void>
  /**
   * The worker holds a lease of `ttlS` seconds that this transport did not grant (a job a driving
   * thread claimed, taken over by the runtime): a transport whose wait for an answer must fit the
   * worker's leases (transport-redis.ts) learns it. Those it grants it learns from their answers.
   */
  leaseHeld?(ttlS: number): void
  /** Tells the host something an operator should see (e.g. a handler module that failed to load). */
  report(problem: { worker_id: string; kind: string; detail: string }): Promise<void>
  /** Frees what the transport holds (connections, listeners). */
  close(): void
}
