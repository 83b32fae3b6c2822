import type { Context, Next } from 'koa'
import type { z } from 'zod'
import { safeParseFast } from '../../src-shared/fast-parse'
import { answerError } from '../error-answer'
import type { LogLimiter } from '../../src-shared/log-limiter'
import { HttpError } from './http-error'

/** An error as the API answers it: its status, `{detail, code}` (plus any extra body fields), and headers. */
export interface ErrorReply {
  status: number
  body: Record<string, unknown>
  headers: Record<string, string>
}

/** Turns a thrown error into its answer (see {@link errorReplies}). */
export type ErrorReplies = (error: unknown, method: string, path: string) => ErrorReply

/**
 * The one way a thrown error becomes an answer: `{detail, code}` (plus any extra body fields)
 * with its code's status (src-shared/error-codes.ts), through {@link answerError}, the mapping
 * the local workers' IPC shares. A bug is logged with its stack and answered as a plain 500 —
 * never a stack trace or an internal path; a storage fault (full disk) is logged at most once a
 * minute. Koa's error middleware and the lane (lane.ts) share one.
 */
export function errorReplies(log: (line: string) => void, limiter: LogLimiter, dataDir: () => string): ErrorReplies {
  return (error, method, path) => {
    const answer = answerError(error, dataDir())
    if (answer.internal) {
      log(`leasehold: internal error on ${method} ${path}: ${(error as Error)?.stack ?? String(error)}`)
    } else if (answer.status >= 500) {
      limiter.line(answer.code, `leasehold: ${answer.code} on ${method} ${path}: ${answer.detail}`)
    }
    // An answer that says when to come back says it as HTTP does too.
    const headers: Record<string, string> =
      typeof answer.body.retry_after_s === 'number' ? { 'Retry-After': String(Math.max(0, answer.body.retry_after_s)) } : {}
    // A 401 names the scheme that would open the route (RFC 9110 §11.6.1).
    if (answer.status === 401) headers['WWW-Authenticate'] = 'Bearer'
    return { status: answer.status, body: { ...answer.body, detail: answer.detail, code: answer.code }, headers }
  }
}

/**
 * The error middleware: every error thrown below it, and the router's bare 404, 405 and 501,
 * answered through `replies`.
 */
export function errorMiddleware(replies: ErrorReplies) {
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
      const reply = replies(error, ctx.method, ctx.path)
      ctx.status = reply.status
      ctx.body = reply.body
      ctx.set(reply.headers)
    }
  }
}

/** What a request's part is called in a refusal about the part as a whole (an unknown key, a missing body field). */
export type InputPart = '(body)' | '(query)' | '(path)'

/**
 * Validates with a zod schema; a failure is 400 `invalid_request` naming each failing field, or
 * the `part` of the request (`(query): Unrecognized key: "foo"`) when the issue is about it whole.
 * A value that is a part of the body is named from the body, `at` (`complete.1` for a batch's
 * second completion: `complete.1.note: …`).
 */
export function validate<S extends z.ZodType>(schema: S, value: unknown, part: InputPart = '(body)', at: readonly (string | number)[] = []): z.infer<S> {
  const named = (path: readonly PropertyKey[]) => (at.length + path.length > 0 ? [...at, ...path].map(String).join('.') : part)
  const result = safeParseFast(schema, value)
  if (result.success) {
    // (A value taken as it is, by the fast way through, has lost nothing.)
    const dropped = result.data === value ? null : droppedProtoKey(value, result.data, [])
    if (dropped === null) return result.data
    throw new HttpError('invalid_request', `${named(dropped)}: a key named "__proto__" is not taken`)
  }
  const detail = result.error.issues
    .slice(0, 10)
    .map((issue) => `${named(issue.path)}: ${issue.message}`)
    .join('; ')
  throw new HttpError('invalid_request', detail)
}

/**
 * Where zod dropped a `__proto__` key of `input` from an object whose every other key it kept
 * (a record: `constraints`), or null. zod never copies that key into what it returns (the
 * assignment would set the object's prototype), where it refuses any other key it does not take
 * or keeps it: silently gone, it would be neither stored as sent nor refused. (Objects that strip
 * unknown keys strip it with the rest.)
 */
function droppedProtoKey(input: unknown, output: unknown, path: (string | number)[]): (string | number)[] | null {
  if (input === null || typeof input !== 'object' || output === null || typeof output !== 'object') return null
  if (Array.isArray(input)) {
    if (!Array.isArray(output)) return null
    for (let i = 0; i < input.length && i < output.length; i++) {
      const dropped = droppedProtoKey(input[i], output[i], [...path, i])
      if (dropped !== null) return dropped
    }
    return null
  }
  const kept = output as Record<string, unknown>
  if (Object.hasOwn(input, '__proto__') && !Object.hasOwn(kept, '__proto__') && Object.keys(input).every((key) => key === '__proto__' || Object.hasOwn(kept, key))) return path
  for (const key of Object.keys(input)) {
    if (key === '__proto__' || !Object.hasOwn(kept, key)) continue
    const dropped = droppedProtoKey((input as Record<string, unknown>)[key], kept[key], [...path, key])
    if (dropped !== null) return dropped
  }
  return null
}
