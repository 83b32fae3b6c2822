import { ENGINE_ERROR_CODES, type EngineErrorCode } from '../../../src-shared/error-codes'
import { printable } from '../../../src-shared/printable'

// The codes are shared with the transports and the workers; the engine knows no status.
export { ENGINE_ERROR_CODES, type EngineErrorCode }

/** What a refusal carries beside its code and detail, for the caller to act on. Times are epoch ms. */
export interface ErrorExtra {
  /** the worker API: the attempt had already ended, so its stream message may be acknowledged. */
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

/**
 * The 404 for an id (or name) that names nothing: its detail quotes the id printably, control
 * characters written as `\u0000` (src-shared/printable.ts). The id is whatever the caller sent —
 * a path's `%00` arrives as U+0000 — and a detail is shown in terminals, logs and the dashboard.
 */
export const notFound = (code: Extract<EngineErrorCode, `${string}_not_found`>, what: string, id: string) => new EngineError(code, `No ${what} ${printable(id)}`)
export const jobNotFound = (id: string) => notFound('job_not_found', 'job', id)
export const leaseNotFound = (id: string) => notFound('lease_not_found', 'lease', id)
export const workerMismatch = (leaseId: string, workerId: string) =>
  new EngineError('worker_mismatch', `Lease ${leaseId} is not held by worker ${workerId}`)
