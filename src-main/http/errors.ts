import type { Context, Next } from 'koa'
import type { z } from 'zod'
import { EngineError } from '../engine/errors'

/**
 * The one error middleware: an EngineError becomes `{detail, code}` (plus any extra body fields)
 * with its status; anything else is logged and answered as a plain 500 — never a stack trace or
 * an internal path.
 */
export function errorMiddleware(log: (line: string) => void) {
  return async (ctx: Context, next: Next): Promise<void> => {
    try {
      await next()
      if (ctx.status === 404 && ctx.body === undefined) {
        throw new EngineError(404, 'not_found', `No route ${ctx.method} ${ctx.path}`)
      }
    } catch (error) {
      if (error instanceof EngineError) {
        ctx.status = error.status
        ctx.body = { ...error.body, detail: error.detail, code: error.code }
      } else {
        log(`leasehold: internal error on ${ctx.method} ${ctx.path}: ${(error as Error)?.stack ?? String(error)}`)
        ctx.status = 500
        ctx.body = { detail: 'Internal error', code: 'internal_error' }
      }
    }
  }
}

/** Validates with a zod schema; a failure is 400 `invalid_request` naming each failing field. */
export function validate<S extends z.ZodType>(schema: S, value: unknown): z.infer<S> {
  const result = schema.safeParse(value)
  if (result.success) return result.data
  const detail = result.error.issues
    .slice(0, 10)
    .map((issue) => `${issue.path.length > 0 ? issue.path.join('.') : '(body)'}: ${issue.message}`)
    .join('; ')
  throw new EngineError(400, 'invalid_request', detail)
}
