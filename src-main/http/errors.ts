import type { Context, Next } from 'koa'
import type { z } from 'zod'
import { answerError } from '../error-answer'
import type { LogLimiter } from '../log-limiter'
import { pathParams } from './schemas'
import { HttpError } from './statuses'

/**
 * The one error middleware: every thrown error becomes `{detail, code}` (plus any extra body
 * fields) with its code's status (src-main/http/statuses.ts), through {@link answerError}, the
 * mapping the local workers' IPC shares. A bug is logged with its stack and answered as a plain
 * 500 — never a stack trace or an internal path; a storage fault (full disk) is logged at most
 * once a minute.
 */
export function errorMiddleware(log: (line: string) => void, limiter: LogLimiter, dataDir: () => string) {
  return async (ctx: Context, next: Next): Promise<void> => {
    try {
      await next()
      if (ctx.status === 404 && ctx.body === undefined) {
        throw new HttpError('not_found', `No route ${ctx.method} ${ctx.path}`)
      }
      // The router answered a known path with another method: its `Allow` header stays.
      if (ctx.status === 405 && ctx.body === undefined) {
        throw new HttpError('method_not_allowed', `${ctx.method} is not allowed on this route (allowed: ${ctx.response.get('Allow')})`)
      }
      if (ctx.status === 501 && ctx.body === undefined) throw new HttpError('not_implemented', `${ctx.method} is not implemented`)
    } catch (error) {
      const answer = answerError(error, dataDir())
      if (answer.internal) {
        log(`leasehold: internal error on ${ctx.method} ${ctx.path}: ${(error as Error)?.stack ?? String(error)}`)
      } else if (answer.status >= 500) {
        limiter.line(answer.code, `leasehold: ${answer.code} on ${ctx.method} ${ctx.path}: ${answer.detail}`)
      }
      ctx.status = answer.status
      ctx.body = { ...answer.body, detail: answer.detail, code: answer.code }
      // An answer that says when to come back says it as HTTP does too.
      if (typeof answer.body.retry_after_s === 'number') ctx.set('Retry-After', String(Math.max(0, answer.body.retry_after_s)))
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
  throw new HttpError('invalid_request', detail)
}

/** A path parameter, validated as an id; a failure is 400 naming the parameter. */
export function pathParam(ctx: { params: Record<string, string | undefined> }, name: string): string {
  return validate(pathParams(name), ctx.params)[name] as string
}
