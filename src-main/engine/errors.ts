/**
 * The one error type of the engine. Every refusal carries the HTTP status and the contract's
 * code, so the HTTP layer maps it without knowing any rule. `body` adds fields a dialect puts
 * beside `{detail, code}` (dialect 002's existing job on a duplicate submit, say).
 */
export class EngineError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly detail: string,
    readonly body: Record<string, unknown> = {},
  ) {
    super(detail)
    this.name = 'EngineError'
  }
}

export const invalid = (detail: string) => new EngineError(400, 'invalid_request', detail)
export const jobNotFound = (id: string) => new EngineError(404, 'job_not_found', `No job ${id}`)
export const leaseNotFound = (id: string) => new EngineError(404, 'lease_not_found', `No lease ${id}`)
export const workerMismatch = (leaseId: string, workerId: string) =>
  new EngineError(403, 'worker_mismatch', `Lease ${leaseId} is not held by worker ${workerId}`)
