import http from 'node:http'
import { setFlagsFromString } from 'node:v8'
import createClient, { type Client } from 'openapi-fetch'
import type { components, paths } from '../../src-shared/api-types'
import type { ClientTarget } from '../../src-shared/client-target'

/** Shared by the host's client commands (submit, jobs, status, …): the typed client of the host and its one-line errors; their flags follow src-shared/command-line.ts. */

// fetch reads answers with undici's HTTP parser, which is WebAssembly. V8 compiles it quickly
// (Liftoff), then again optimised on background threads, and Node waits for that compile before
// it exits: ~150 ms at the end of every command here. A command reads a few answers, which the
// quick code parses as well. Set before the first fetch compiles the parser; it touches nothing
// but WebAssembly, which only fetch uses in a client command.
setFlagsFromString('--liftoff-only')

/** An answer from the host that is not a success: its `{detail, code}` as one line (exit 1). */
export class HostError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly detail: string,
    readonly body: Record<string, unknown>,
  ) {
    super(`${detail} (${code})`)
    this.name = 'HostError'
  }
}

const oneLine = (text: string) => text.replace(/\s+/g, ' ').trim()

/** Turns a failed fetch into one line; the cause stays attached (the CLI recognises ECONNREFUSED). */
export function unreachable(url: string, error: unknown): Error {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause
  if ((error as Error).name === 'AbortError') return error as Error
  const why = cause?.code ?? cause?.message ?? (error as Error).message
  return new Error(`cannot reach the host at ${url}: ${why}`, { cause })
}

/** An error answer as a HostError, whatever its shape: its `{detail, code}`, else its text. */
export function hostError(status: number, statusText: string, answer: unknown): HostError {
  const body = answer !== null && typeof answer === 'object' ? (answer as Record<string, unknown>) : {}
  const text = typeof answer === 'string' ? answer : ''
  const detail = typeof body.detail === 'string' ? body.detail : oneLine(text).slice(0, 200) || statusText || 'no detail'
  const code = typeof body.code === 'string' ? body.code : `http_${status}`
  return new HostError(status, code, oneLine(detail), body)
}

/**
 * The host's API, typed from its OpenAPI document (src-shared/api-types.ts, generated): a call
 * names its route, and its parameters, body and answer are the route's own.
 */
export type HostApi = Client<paths>

export function hostApi(target: ClientTarget): HostApi {
  return createClient<paths>({ baseUrl: target.url, headers: { authorization: `Bearer ${target.token}`, accept: 'application/json' }, fetch: resendingFetch })
}

/** How fetch reports a connection that was cut before any answer (undici's "other side closed", a reset, a broken pipe). */
const CUT_CONNECTION = new Set(['UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE'])

function connectionCut(error: unknown): boolean {
  const code = (error as { cause?: { code?: unknown } }).cause?.code
  return typeof code === 'string' && CUT_CONNECTION.has(code)
}

/**
 * Whether a request does the same sent twice: a read, or a submit that names its
 * `client_request_id` (the host answers a repeat with the job it already made).
 */
async function resendable(request: Request): Promise<boolean> {
  if (request.method === 'GET' || request.method === 'HEAD') return true
  if (!request.headers.get('content-type')?.includes('application/json')) return false
  try {
    const body = (await request.clone().json()) as { client_request_id?: unknown } | null
    return typeof body?.client_request_id === 'string'
  } catch {
    return false
  }
}

/**
 * fetch, with one resend of a request whose connection was cut before any answer, if it is
 * {@link resendable}. fetch keeps connections alive between a command's requests (`submit
 * --wait`'s reads), and the host closes one idle for 5 s: a request that leaves on it just then
 * fails without having reached the host.
 */
export async function resendingFetch(request: Request): Promise<Response> {
  const spare = (await resendable(request)) ? request.clone() : null
  try {
    return await fetch(request)
  } catch (error) {
    if (spare === null || !connectionCut(error)) throw error
    return onFreshConnection(spare)
  }
}

/**
 * A request sent on a connection of its own, as fetch would send it. Not through fetch: its
 * other idle connections may have been closed by the host at the same moment as the cut one,
 * and fetch cannot be told to open a new one.
 */
async function onFreshConnection(request: Request): Promise<Response> {
  const body = request.body === null ? undefined : Buffer.from(await request.arrayBuffer())
  return new Promise((resolve, reject) => {
    // As fetch fails: a TypeError whose cause says why (unreachable() reads it).
    const failed = (error: Error) => reject(new TypeError('fetch failed', { cause: error }))
    const headers = Object.fromEntries(request.headers)
    const sent = http.request(request.url, { method: request.method, headers, agent: false, signal: request.signal }, (answer) => {
      const chunks: Buffer[] = []
      answer.on('data', (chunk: Buffer) => chunks.push(chunk))
      answer.on('error', failed)
      answer.on('end', () => {
        const status = answer.statusCode ?? 502
        const pairs: [string, string][] = []
        for (let i = 0; i < answer.rawHeaders.length; i += 2) pairs.push([answer.rawHeaders[i]!, answer.rawHeaders[i + 1]!])
        const empty = status === 204 || status === 304 || request.method === 'HEAD'
        resolve(new Response(empty ? null : Buffer.concat(chunks), { status, statusText: answer.statusMessage, headers: pairs }))
      })
    })
    sent.on('error', failed)
    sent.end(body)
  })
}

/** What an openapi-fetch call settles to. */
interface Settled<D> {
  data?: D
  error?: unknown
  response: Response
}

/** A call's answer: its data; an error answer throws a HostError, a host that cannot be reached one line. */
export async function answered<D>(target: ClientTarget, call: Promise<Settled<D>>): Promise<D> {
  let settled: Settled<D>
  try {
    settled = await call
  } catch (error) {
    throw unreachable(target.url, error)
  }
  const { response } = settled
  if (!response.ok) throw hostError(response.status, response.statusText, settled.error)
  return settled.data as D
}

/** The queue API view of a job as the reads show it (with why it waits). */
export type QueueJob = components['schemas']['QueueJobRead']

/** Pads columns to their widest cell; the last column is not padded. */
export function table(header: string[], rows: string[][]): string {
  const all = [header, ...rows]
  const widths = header.map((_, i) => Math.max(...all.map((row) => (row[i] ?? '').length)))
  return all.map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  ')).join('\n')
}
