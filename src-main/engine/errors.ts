/**
 * Every code the engine refuses with: the one list. The engine knows no HTTP: a transport maps
 * each code to its own terms (the HTTP layer to a status in one table, src-main/http/statuses.ts,
 * which a test holds to this list).
 */
export const ENGINE_ERROR_CODES = [
  /** A field the rules refuse; the detail names it. */
  'invalid_request',
  /** A job costing more than the whole capacity could never run. */
  'cost_exceeds_capacity',
  'invalid_cron',
  'invalid_timezone',
  /** A write naming a lease or job held by another worker. */
  'worker_mismatch',
  'job_not_found',
  'lease_not_found',
  'blocker_not_found',
  'file_lease_not_found',
  'schedule_not_found',
  /** A move the transition table does not allow. */
  'illegal_transition',
  /** A write under a lease that expired. */
  'lease_expired',
  /** A write under a lease that was released. */
  'lease_not_active',
  /** A token that is not a lease of the job it names. */
  'lease_token_mismatch',
  'attempt_mismatch',
  'job_mismatch',
  'cost_mismatch',
  /** An operator took the file from this owner (force release). */
  'file_lease_lost',
  'file_lease_not_held',
  'blocker_resolved',
  'duplicate_schedule',
  /** Run now on a job that does not wait for its run_at. */
  'not_scheduled',
  /** A file acquire before its one retry is due. */
  'retry_too_early',
] as const

export type EngineErrorCode = (typeof ENGINE_ERROR_CODES)[number]

/** What a refusal carries beside its code and detail, for the caller to act on. Times are epoch ms. */
export interface ErrorExtra {
  /** Dialect 003: the attempt had already ended, so its stream message may be acknowledged. */
  ack?: boolean
  /** When the one retry of a file is due (`retry_too_early`). */
  retry_at?: number
  /** Seconds until then. */
  retry_after_s?: number
}

/**
 * The one error type of the engine: a refusal by a rule, with its code, a detail a person can
 * read, and any {@link ErrorExtra}. Anything else the engine throws is a bug or a storage fault.
 */
export class EngineError extends Error {
  constructor(
    readonly code: EngineErrorCode,
    readonly detail: string,
    readonly extra: ErrorExtra = {},
  ) {
    super(detail)
    this.name = 'EngineError'
  }
}

export const invalid = (detail: string) => new EngineError('invalid_request', detail)
export const jobNotFound = (id: string) => new EngineError('job_not_found', `No job ${id}`)
export const leaseNotFound = (id: string) => new EngineError('lease_not_found', `No lease ${id}`)
export const workerMismatch = (leaseId: string, workerId: string) =>
  new EngineError('worker_mismatch', `Lease ${leaseId} is not held by worker ${workerId}`)
