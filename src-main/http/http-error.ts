import { type ErrorCode, statusOf } from '../../src-shared/error-codes'

/**
 * A refusal by the HTTP layer itself, or an engine refusal re-dressed by an API (the worker API's
 * `ok: false`). `body` holds the fields the wire shows beside `{detail, code}`, already in wire
 * form; the status comes from the one table (src-shared/error-codes.ts).
 */
export class HttpError extends Error {
  constructor(
    readonly code: ErrorCode,
    readonly detail: string,
    readonly body: Record<string, unknown> = {},
  ) {
    super(detail)
    this.name = 'HttpError'
  }

  get status(): number {
    return statusOf(this.code)
  }
}
