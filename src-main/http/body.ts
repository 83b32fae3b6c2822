import type { Context } from 'koa'
import type { z } from 'zod'
import { HttpError } from './statuses'

/**
 * Answers with `body`, typed by the route's response schema (the one its OpenAPI entry names):
 * a view that drifts from the documented schema does not compile. The schema is not checked
 * at run time; the contract tests hold every answer they receive to the document.
 */
export function reply<S extends z.ZodType>(ctx: Context, _schema: S, body: z.output<S>, status = 200): void {
  ctx.status = status
  ctx.body = body
}

/**
 * Answers now, as {@link reply} and then Koa's own `respond` would for a JSON body: the same
 * status and headers (set through Koa's setters), the same bytes. For an answer that is ready
 * before the route's promise settles — a waiting claim is answered from the commit that grants
 * it (docs/performance.md) — so it leaves without the turns of promises and middleware that
 * Koa's unwinding takes. `ctx.respond = false` is Koa's documented way to write the response
 * yourself; the route must not touch `ctx` after this.
 */
function replyNow<S extends z.ZodType>(ctx: Context, schema: S, body: z.output<S>): void {
  reply(ctx, schema, body)
  const text = JSON.stringify(body)
  ctx.length = Buffer.byteLength(text)
  // From here the response is ours to write (anything that threw above leaves it to Koa).
  ctx.respond = false
  if (!ctx.writable) ctx.res.end() // the client is gone, as Koa's respond would find it
  else ctx.res.end(text)
}

/**
 * The answer of a route that may be answered before its promise settles (a waiting claim, from
 * the commit that grants it): `now` writes it at once ({@link replyNow}); `settled` replies as
 * {@link reply} does, unless `now` already answered.
 */
export function earlyReply<S extends z.ZodType>(ctx: Context, schema: S): { now(body: z.output<S>): void; settled(body: () => z.output<S>): void } {
  let answered = false
  return {
    now(body) {
      replyNow(ctx, schema, body)
      answered = true
    },
    settled(body) {
      if (!answered) reply(ctx, schema, body())
    },
  }
}

/**
 * Whether a request's `Prefer` header (RFC 7240) asks for `return=minimal`: an answer without
 * the representation of what was created. Preferences are comma-separated, each a
 * case-insensitive token with an optional value and `;` parameters; an unknown one is ignored.
 */
export function prefersMinimal(header: string | undefined): boolean {
  if (!header) return false
  return header.split(',').some((preference) => /^\s*return\s*=\s*"?minimal"?\s*(;|$)/i.test(preference))
}

/**
 * Reads a JSON request body: only `application/json` (415 otherwise), at most `limit` bytes
 * (413, and reading stops there), well-formed and nested at most {@link MAX_JSON_DEPTH} levels
 * (400). An empty body reads as `{}`.
 */
export async function readJson(ctx: Context, limit: number): Promise<unknown> {
  const headers = ctx.req.headers
  const length = Number(headers['content-length'] || 0)
  const chunked = headers['transfer-encoding'] !== undefined && headers['transfer-encoding'] !== ''
  if (!(length > 0 || chunked)) return {}
  // The common type spelled exactly is JSON without asking type-is.
  if (headers['content-type'] !== 'application/json' && !ctx.is('application/json')) {
    throw new HttpError('unsupported_media_type', 'The body must be JSON (Content-Type: application/json)')
  }
  if (length > limit) throw tooLarge(ctx, limit)
  const text = (chunked ? await streamed(ctx, limit) : await buffered(ctx, length, limit)).toString('utf8')
  if (text.trim() === '') return {}
  let value: unknown
  try {
    value = JSON.parse(text) as unknown
  } catch {
    throw new HttpError('invalid_json', 'The body is not well-formed JSON')
  }
  if (nestedDeeperThan(value, MAX_JSON_DEPTH)) {
    throw new HttpError('invalid_request', `(body): JSON nested deeper than ${MAX_JSON_DEPTH} levels`)
  }
  return value
}

/**
 * A body of a declared `length` (at most the limit). A route reads its body from within the
 * request's own event, before Node's parser has pushed the bytes that came with the headers:
 * one turn of the microtask queue later a small body is usually all buffered, and is taken at
 * once — without an async iterator, and without waiting for the stream's `end`, which Node
 * emits only after further steps of its parser and of the stream. A body still on its way is
 * read as it streams in.
 */
async function buffered(ctx: Context, length: number, limit: number): Promise<Buffer> {
  const req = ctx.req
  if (req.readableLength < length) await undefined
  if (req.readableLength !== length) return streamed(ctx, limit)
  const body = req.read() as Buffer
  // The end of the message is all that is left: let the stream see it and close.
  req.resume()
  return body
}

/** Reads the body as it comes, stopping past `limit` bytes (413). */
async function streamed(ctx: Context, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of ctx.req as AsyncIterable<Buffer>) {
    size += chunk.length
    if (size > limit) {
      throw tooLarge(ctx, limit)
    }
    chunks.push(chunk)
  }
  return Buffer.concat(chunks)
}

/**
 * JSON.parse accepts any depth, but storing a value (JSON.stringify) overflows the stack at a
 * few thousand levels: deeper bodies are refused up front rather than failing with a 500.
 */
export const MAX_JSON_DEPTH = 512

/** Walks the value without recursion (a recursive walk would overflow on the very input it guards against). */
function nestedDeeperThan(value: unknown, max: number): boolean {
  const pending: [unknown, number][] = [[value, 1]]
  while (pending.length > 0) {
    const [item, depth] = pending.pop()!
    if (item === null || typeof item !== 'object') continue
    if (depth > max) return true
    for (const child of Array.isArray(item) ? item : Object.values(item)) pending.push([child, depth + 1])
  }
  return false
}

/** Stops reading; the connection closes after the answer, so the rest of the body is never read. */
function tooLarge(ctx: Context, limit: number): HttpError {
  ctx.set('Connection', 'close')
  return new HttpError('payload_too_large', `The body is larger than ${limit} bytes`)
}

/**
 * A signal that aborts when the client hangs up before its answer is sent: a long-poll stops
 * waiting for it. (Not after a normal answer: an abort creates a DOMException, which is not free.
 * Asked for only by a request that may wait: a controller and a listener are not free either.)
 */
export function clientGone(ctx: Context): AbortSignal {
  const gone = new AbortController()
  ctx.res.once('close', () => {
    if (!ctx.res.writableFinished) gone.abort()
  })
  return gone.signal
}
