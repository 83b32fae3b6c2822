import type { Context } from 'koa'
import { EngineError } from '../engine/errors'

/**
 * Reads a JSON request body: only `application/json` (415 otherwise), at most `limit` bytes
 * (413, and reading stops there), well-formed (400). An empty body reads as `{}`.
 */
export async function readJson(ctx: Context, limit: number): Promise<unknown> {
  const length = Number(ctx.get('content-length') || 0)
  const hasBody = length > 0 || ctx.get('transfer-encoding') !== ''
  if (!hasBody) return {}
  if (!ctx.is('application/json')) {
    throw new EngineError(415, 'unsupported_media_type', 'The body must be JSON (Content-Type: application/json)')
  }
  if (length > limit) throw tooLarge(ctx, limit)
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of ctx.req as AsyncIterable<Buffer>) {
    size += chunk.length
    if (size > limit) {
      throw tooLarge(ctx, limit)
    }
    chunks.push(chunk)
  }
  const text = Buffer.concat(chunks).toString('utf8')
  if (text.trim() === '') return {}
  try {
    return JSON.parse(text) as unknown
  } catch {
    throw new EngineError(400, 'invalid_json', 'The body is not well-formed JSON')
  }
}

/** Stops reading; the connection closes after the answer, so the rest of the body is never read. */
function tooLarge(ctx: Context, limit: number): EngineError {
  ctx.set('Connection', 'close')
  return new EngineError(413, 'payload_too_large', `The body is larger than ${limit} bytes`)
}
