/**
 * Every error code an answer carries, and its HTTP status: the one table. The engine raises
 * domain errors by code ({@link ENGINE_ERROR_CODES}) and knows no status; the HTTP layer's own
 * refusals (a malformed request, the request guard, a storage fault) have codes of their own.
 * Every answer's status comes from here, over HTTP and the local workers' IPC alike, and the
 * workers read refusals by these codes.
 */

/** Every code the engine refuses with: the one list. */
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
  /** A write made from an old read (If-Match naming a revision the thing is no longer at). */
  'precondition_failed',
] as const

export type EngineErrorCode = (typeof ENGINE_ERROR_CODES)[number]

/** The codes only the HTTP layer (and the host around the engine) answers with. */
export const HTTP_ERROR_CODES = [
  /** Refused by Node's HTTP parser, before Koa sees the request (src-main/host.ts). */
  'bad_request',
  'request_timeout',
  'headers_too_large',
  /** An `Expect` header other than `100-continue` (Node's server refuses it before any route). */
  'expectation_failed',
  'invalid_json',
  'unsupported_media_type',
  'payload_too_large',
  'unauthorized',
  'forbidden_host',
  'forbidden_origin',
  'not_found',
  'method_not_allowed',
  'not_implemented',
  /** the queue API: a submit repeating a known client_request_id (the engine answers the existing job). */
  'duplicate_request',
  'internal_error',
  'storage_error',
  /** A commit whose sync failed, and whose outcome could not be made certain (src-main/db/commit-outcome.ts). */
  'storage_uncertain',
  'storage_full',
  /** A backup whose `<data-dir>/backups` is a file, or a link to nothing or to a file (src-main/db/backup.ts): the operator's to mend, not the disk's. */
  'backup_folder_unusable',
] as const
export type HttpErrorCode = (typeof HTTP_ERROR_CODES)[number]

/**
 * The `detail` of the 401 a worker-scoped token gets on a route it does not open (the request
 * guard's): its code is `unauthorized` as for any refused token, and the dashboard tells this
 * one apart by it, to say that a worker token cannot open it rather than that the token is wrong.
 */
export const WORKER_TOKEN_REFUSAL = "A worker token opens only the worker routes and the file-lease requests of its jobs; this route needs the host's token or an admin token"

/**
 * The `detail` of the 401 a revoked scoped token gets (the request guard's): its code is
 * `unauthorized` as for any refused token, but a worker told so knows to stop, where one told
 * its token is not valid would look for a mistyped or misconfigured one.
 */
export const REVOKED_TOKEN_REFUSAL = 'This token was revoked (leasehold token revoke): it opens nothing any more'

/** The codes of a file acquire's refusals, which the engine answers (not throws) and the route sends as errors. */
export const ACQUIRE_REFUSAL_CODES = ['file_lease_held', 'blocked'] as const
export type AcquireRefusalCode = (typeof ACQUIRE_REFUSAL_CODES)[number]

export type ErrorCode = EngineErrorCode | AcquireRefusalCode | HttpErrorCode

export const ERROR_STATUS = {
  invalid_request: 400,
  bad_request: 400,
  invalid_json: 400,
  cost_exceeds_capacity: 400,
  invalid_cron: 400,
  invalid_timezone: 400,
  unauthorized: 401,
  forbidden_host: 403,
  forbidden_origin: 403,
  worker_mismatch: 403,
  not_found: 404,
  job_not_found: 404,
  lease_not_found: 404,
  blocker_not_found: 404,
  file_lease_not_found: 404,
  schedule_not_found: 404,
  method_not_allowed: 405,
  request_timeout: 408,
  expectation_failed: 417,
  illegal_transition: 409,
  duplicate_request: 409,
  lease_expired: 409,
  lease_not_active: 409,
  lease_token_mismatch: 409,
  attempt_mismatch: 409,
  job_mismatch: 409,
  cost_mismatch: 409,
  file_lease_held: 409,
  blocked: 409,
  file_lease_lost: 409,
  file_lease_not_held: 409,
  blocker_resolved: 409,
  duplicate_schedule: 409,
  not_scheduled: 409,
  backup_folder_unusable: 409,
  precondition_failed: 412,
  payload_too_large: 413,
  unsupported_media_type: 415,
  retry_too_early: 429,
  headers_too_large: 431,
  internal_error: 500,
  not_implemented: 501,
  storage_error: 503,
  storage_uncertain: 503,
  storage_full: 507,
} as const satisfies Record<ErrorCode, number>

export const statusOf = (code: ErrorCode): number => ERROR_STATUS[code]
