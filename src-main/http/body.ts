import type { Context } from 'koa'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { z } from 'zod'
import { HttpError } from './http-error'
import { faultDetail, faultIn } from '../../src-shared/json-faults'

/**
 * Answers with `body`, typed by the route's response schema (the one its OpenAPI entry names):
 * a view that drifts from the documented schema does not compile. The schema is not checked
 * at run time; the contract tests hold every answer they receive to the document.
 */
export function reply<S extends z.ZodType>(ctx: Context, _schema: S, body: z.output<S>, status = 200): void {
  ctx.status = status
  ctx.body = body
}

/** The headers of every API answer (src-main/http/server.ts sets them first of all). */
export const API_HEADERS = { 'Cache-Control': 'no-store', 'X-Content-Type-Options': 'nosniff' } as const

/**
 * Answers a request outside Koa (the lane, lane.ts) as Koa answers a JSON body: {@link API_HEADERS},
 * any `headers` given, then the type and length, and `JSON.stringify`'s bytes. Nothing once the
 * response has ended (the first answer is the one sent), and nothing but the end when the client
 * is gone (Koa's `ctx.writable`).
 */
export function writeJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.writableEnded || (res.socket !== null && !res.socket.writable)) {
    res.end()
    return
  }
  const text = JSON.stringify(body)
  res.writeHead(status, { ...API_HEADERS, ...headers, 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(text) })
  res.end(text)
}

/**
 * Answers now, as {@link reply} and then Koa's own `respond` would for a JSON body: the same
 * status and headers (set through Koa's setters), the same bytes. For an answer that is ready
 * before the route's promise settles — a waiting claim is answered from the commit that grants
 * it (docs/performance.md) — so it leaves without the turns of promises and middleware that
 * Koa's unwinding takes. `ctx.respond = false` is Koa's documented way to write the response
 * yourself; the route must not touch `ctx` after this.
 */
function replyNow<S extends z.ZodType>(ctx: Context, schema: S, body: z.output<S>, status: number): void {
  reply(ctx, schema, body, status)
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
 * {@link reply} does, unless `now` already answered. Either way with `status`.
 */
export function earlyReply<S extends z.ZodType>(
  ctx: Context,
  schema: S,
  status = 200,
): { now(body: z.output<S>): void; settled(body: () => z.output<S>): void } {
  let answered = false
  return {
    now(body) {
      replyNow(ctx, schema, body, status)
      answered = true
    },
    settled(body) {
      if (!answered) reply(ctx, schema, body(), status)
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
 * (413, and reading stops there), JSON as {@link parseJson} takes it (400). An empty body reads
 * as `{}`.
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
  // A compressed body is not JSON as it stands, and the host inflates none (RFC 9110 §8.4: 415).
  const encoding = headers['content-encoding']?.trim().toLowerCase()
  if (encoding && encoding !== 'identity') {
    throw new HttpError('unsupported_media_type', `Content-Encoding ${encoding} is not supported: send the JSON body as it is`)
  }
  const tooLarge = () => {
    // The connection closes after the answer: what is left of the body is never parsed.
    ctx.set('Connection', 'close')
    return new HttpError('payload_too_large', `The body is larger than ${limit} bytes`)
  }
  if (length > limit) {
    await discardBody(ctx.req, length)
    throw tooLarge()
  }
  return parseJson(chunked ? await streamed(ctx.req, limit, tooLarge) : await buffered(ctx.req, length, limit, tooLarge))
}

/** At most this much of a refused body is read and thrown away before its answer (see {@link discardBody}). */
export const DISCARD_LIMIT_BYTES = 64 * 1024 * 1024
/** For at most this long. */
export const DISCARD_LIMIT_MS = 10_000

/**
 * Reads and throws away the rest of a refused request's body, for at most
 * {@link DISCARD_LIMIT_MS} and {@link DISCARD_LIMIT_BYTES}, before the refusal is answered with
 * `Connection: close`. Many clients (Node's among them) write their whole body before they read
 * an answer: had the connection closed while they were still writing, the bytes still coming
 * would meet a reset, the client's write would fail (EPIPE) and it would never read the answer.
 * A body declared larger than the bound is not read at all: it is answered at once.
 */
async function discardBody(req: IncomingMessage, declared = 0): Promise<void> {
  if (req.readableEnded || req.destroyed || declared > DISCARD_LIMIT_BYTES) return
  await new Promise<void>((resolve) => {
    let read = 0
    const done = () => {
      clearTimeout(timer)
      req.off('data', onData).off('end', done).off('close', done).off('error', done)
      req.pause()
      resolve()
    }
    const onData = (chunk: Buffer) => {
      read += chunk.length
      if (read > DISCARD_LIMIT_BYTES) done()
    }
    const timer = setTimeout(done, DISCARD_LIMIT_MS)
    req.on('data', onData).once('end', done).once('close', done).once('error', done)
  })
}

/**
 * The body of a request already known to be JSON of a declared `length` within the body limit
 * (the lane takes only such requests, src-main/http/lane.ts), read as
 * {@link readJson} reads it.
 */
export async function readDeclaredJson(req: IncomingMessage, length: number): Promise<unknown> {
  // Node's parser never passes more than the declared length: the limit is that length.
  return parseJson(await buffered(req, length, length, () => new HttpError('payload_too_large', `The body is larger than ${length} bytes`)))
}

/**
 * Decodes UTF-8 strictly: a byte sequence that is not UTF-8 throws, where Buffer's decoding
 * would put U+FFFD in its place and let a damaged name or payload through as if it had been sent so.
 * A byte order mark is kept, so JSON.parse refuses it (400 `invalid_json`).
 */
const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/**
 * A body's bytes as JSON: UTF-8, well-formed, nested at most MAX_JSON_DEPTH levels (src-shared/json-faults.ts), its
 * strings well-formed Unicode and its numbers doubles (400; see FaultKind there); blank reads as `{}`.
 */
export function parseJson(body: Buffer): unknown {
  let text: string
  try {
    text = strictUtf8.decode(body)
  } catch {
    throw new HttpError('invalid_json', 'The body is not valid UTF-8')
  }
  if (text.trim() === '') return {}
  let value: unknown
  try {
    value = JSON.parse(text) as unknown
  } catch {
    throw new HttpError('invalid_json', 'The body is not well-formed JSON')
  }
  const fault = faultIn(value, false)
  if (fault !== null) throw new FaultyJson(value, faultDetail(value, fault.kind))
  return value
}

/**
 * A body that is JSON but holds a value JSON.parse reads otherwise than it was sent (a fault of
 * src-shared/json-faults.ts): 400 `invalid_request`, with the value as read, for a route whose
 * items are answered each on its own (the worker's batch: route.ts `itemwise`) to refuse only
 * the items that hold it.
 */
export class FaultyJson extends HttpError {
  constructor(
    readonly value: unknown,
    detail: string,
  ) {
    super('invalid_request', detail)
  }
}

/**
 * A body of a declared `length` (at most the limit). A route reads its body from within the
 * request's own event, before Node's parser has pushed the bytes that came with the headers:
 * one turn of the microtask queue later a small body is usually all buffered, and is taken at
 * once — without an async iterator, and without waiting for the stream's `end`, which Node
 * emits only after further steps of its parser and of the stream. A body still on its way is
 * read as it streams in.
 */
async function buffered(req: IncomingMessage, length: number, limit: number, tooLarge: () => Error): Promise<Buffer> {
  if (req.readableLength < length) await undefined
  if (req.readableLength !== length) return streamed(req, limit, tooLarge)
  const body = req.read() as Buffer
  // The end of the message is all that is left: let the stream see it and close.
  req.resume()
  return body
}

/**
 * The refusal of a request whose client hung up before its whole body came: `400 bad_request`
 * as for any request that is not whole HTTP. Nobody reads it (the connection is gone); what
 * matters is that it is a client's error, which the host does not log as its own (errors.ts).
 */
const clientHungUp = () => new HttpError('bad_request', 'The client closed the connection before its whole body arrived')

/** Reads the body as it comes; past `limit` bytes, the rest is discarded ({@link discardBody}) and it fails with `tooLarge`'s error. */
async function streamed(req: IncomingMessage, limit: number, tooLarge: () => Error): Promise<Buffer> {
  // Gone already, before these listeners could hear it.
  if (req.destroyed && !req.readableEnded) throw clientHungUp()
  const chunks: Buffer[] = []
  let size = 0
  const over = await new Promise<boolean>((resolve, reject) => {
    // A client that hangs up mid-body (Node's `aborted` error, then `close`) ends the read with a
    // refusal, not a fault: nothing of the request is run, and it is no bug of the host's to log.
    const gone = () => reject(clientHungUp())
    const onData = (chunk: Buffer) => {
      size += chunk.length
      if (size <= limit) return void chunks.push(chunk)
      req.off('data', onData).off('end', onEnd).off('error', gone)
      resolve(true)
    }
    const onEnd = () => resolve(false)
    req.on('data', onData).once('end', onEnd).once('error', gone)
    req.once('close', () => (req.readableEnded ? undefined : gone()))
  })
  if (over) {
    await discardBody(req)
    throw tooLarge()
  }
  return Buffer.concat(chunks)
}

/**
 * A signal that aborts when the client hangs up before its answer is sent: a long-poll stops
 * waiting for it. (Not after a normal answer: an abort creates a DOMException, which is not free.
 * Asked for only by a request that may wait: a controller and a listener are not free either.)
 */
export function clientGone(res: ServerResponse): AbortSignal {
  const gone = new AbortController()
  res.once('close', () => {
    if (!res.writableFinished) gone.abort()
  })
  return gone.signal
}
