/**
 * What the worker runtime needs from the host, behind one interface with two implementations:
 * HTTP (dialect 003 + /api/files, for external workers) and IPC (local workers the host
 * spawns). Both speak the same semantics; the runtime does not know which it has.
 */

/** A claimed job: a lease, an attempt and a token (dialect 003's claim). */
export interface Claim {
  job_id: string
  attempt_id: string
  /** The job lease's id: file leases taken by the job are held under it. */
  lease_id: string
  lease_token: string
  job_type: string
  payload: unknown
  max_runtime_s: number | null
  lease_ttl_seconds: number
  heartbeat_interval_seconds: number
}

/** One round trip with the host: reports on the jobs a worker runs, then a claim for its free slots. */
export interface ExchangeRequest {
  worker_id: string
  heartbeat?: { job_id: string; lease_token: string; progress?: number | null; note?: string | null }[]
  /** A completion may carry the job's last progress and note, instead of a heartbeat before it. */
  complete?: (AttemptRef & { result: unknown; progress?: number | null; note?: string | null })[]
  fail?: (AttemptRef & { error: AttemptError })[]
  /** Up to `max_jobs` more; waits up to `max_wait_ms` if none can be leased now. */
  claim?: {
    streams: string[]
    max_jobs: number
    max_wait_ms: number
    /** Local workers: the idle handler thread an answer granting one job may go straight to (thread-link.ts). */
    thread?: number
  }
}

/** The host's answer to one report, in the order sent. `ok: false` carries the 409's code. */
export interface ReportAnswer {
  job_id: string
  ok: boolean
  code?: string
  detail?: string
  /** Heartbeats: stop the job, an operator canceled it. */
  cancel_requested?: boolean
}

export interface ExchangeAnswer {
  heartbeats: ReportAnswer[]
  completed: ReportAnswer[]
  failed: ReportAnswer[]
  jobs: Claim[]
}

export interface AttemptError {
  code: string
  message: string
  stack?: string
  retryable: boolean
}

/** The attempt's identity, sent with every call made under its lease. */
export interface AttemptRef {
  job_id: string
  attempt_id: string
  lease_token: string
}

export type FileAcquireAnswer =
  | { granted: true }
  | { granted: false; code: 'file_lease_held'; retry_at: string; holder: unknown }
  | { granted: false; code: 'blocked'; blocker: unknown }

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

export interface WorkerTransport {
  /**
   * Reports and a claim in one round trip (dialect 003's /batch, IPC `exchange`). When `signal`
   * aborts while the claim waits, resolves with the reports answered and no jobs.
   */
  exchange(request: ExchangeRequest, signal?: AbortSignal): Promise<ExchangeAnswer>
  acquireFile(request: { file: string; owner_id: string; lease_id: string }): Promise<FileAcquireAnswer>
  /** Resolves once the host's clock reaches the one retry of `file` for `owner_id` (or after `max_wait_ms`). */
  waitFileRetry(request: { file: string; owner_id: string; max_wait_ms: number }, signal: AbortSignal): Promise<boolean>
  heartbeatFile(request: { file: string; owner_id: string }): Promise<void>
  /** Tells the host something an operator should see (e.g. a handler module that failed to load). */
  report(problem: { worker_id: string; kind: string; detail: string }): Promise<void>
  /** Frees what the transport holds (connections, listeners). */
  close(): void
  /**
   * Local workers: an answer the host wrote to a handler thread's own link, passed on by that
   * thread; it settles its exchange as if it had come the usual way (thread-link.ts).
   */
  accept?(message: unknown): void
  /** Local workers: thread `index` can no longer pass answers on; exchanges whose claim named it fail. */
  threadGone?(index: number): void
}
