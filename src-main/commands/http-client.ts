import { type Client, createFinalURL, createQuerySerializer, defaultPathSerializer, type ClientPathsWithMethod, type FetchResponse, type MaybeOptionalInit } from 'openapi-fetch'
import type { components, paths } from '../../src-shared/api-types'
import { answerTimeoutMs, type ClientTarget } from '../../src-shared/client-target'
import { NoAnswerError, notLeaseholdAnswer, NotJsonAnswer, requestJson, type JsonRequest } from '../../src-shared/http-json'
import { shellWord } from '../../src-shared/others-may-write'

/** Shared by the host's client commands (submit, jobs, status, …): the typed client of the host and its one-line errors; their flags follow src-shared/command-line.ts. */

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

/**
 * Turns a failed request to `target` into one line naming the host; the system error stays
 * attached as its cause (`submit --each` reads ECONNREFUSED in it: nothing was sent). A failed
 * fetch (the event stream's) holds it as its own cause; a failed node:http request is it.
 */
export function unreachable(target: ClientTarget, error: unknown): Error {
  const { url } = target
  if (error instanceof NoAnswerError) return new Error(`the host at ${url} did not answer within ${error.timeoutMs / 1000} s (LEASEHOLD_TIMEOUT_S sets how long to wait)`, { cause: error })
  if ((error as Error).name === 'AbortError') return error as Error
  const cause = ((error as { cause?: unknown }).cause ?? error) as { code?: string; message?: string }
  if (cause.code === 'ECONNREFUSED') return new Error(refusedConnection(target), { cause })
  const why = cause.code ?? cause.message ?? String(error)
  return new Error(`cannot reach the host at ${url}: ${why}`, { cause })
}

/**
 * Host names that reach this machine: `localhost` and its subdomains, 127.0.0.0/8, `::1` (also
 * as an IPv4-mapped 127.x address), and the unspecified addresses, which a connection takes to
 * this machine.
 */
const THIS_MACHINE = /^(?:localhost|.+\.localhost|127(?:\.\d{1,3}){3}|0\.0\.0\.0|\[::1?\]|\[::ffff:7f[0-9a-f]{2}:[0-9a-f]{1,4}\])$/i

/**
 * A refused connection: nothing listens at the host's address. A host of this machine (found
 * through its data dir's host.json, or at a loopback address) has not been started, or is
 * starting or stopping, and `leasehold serve` is the way out; another machine's host is not
 * this command's to start, and a wrong address refuses as a stopped host does.
 */
export function refusedConnection(target: ClientTarget): string {
  const { url, dataDir } = target
  if (dataDir === undefined && !THIS_MACHINE.test(new URL(url).hostname)) {
    return `the host at ${url} is not running or cannot be reached (connection refused): check that it runs, and that the address and port are right`
  }
  const serve = dataDir === undefined ? 'leasehold serve' : `leasehold serve --data-dir ${shellWord(dataDir)}`
  return `the host at ${url} is not running (connection refused), or is still starting or stopping: try again in a moment, or start it with ${serve}`
}

/**
 * Whether a request that failed may have reached the host all the same, and been acted on: one
 * the host did not answer in time ({@link unreachable}'s NoAnswerError), or whose connection was
 * cut after it was sent (ECONNRESET, "socket hang up"; EPIPE). A connection that was refused, or
 * a name that did not resolve, carried nothing.
 */
export function mayHaveArrived(error: unknown): boolean {
  const cause = (error as { cause?: unknown }).cause
  if (cause instanceof NoAnswerError) return true
  const code = (cause as { code?: unknown } | undefined)?.code
  return code === 'ECONNRESET' || code === 'EPIPE'
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
 * The host's 401, naming the host and where the token it refused came from (--token,
 * LEASEHOLD_TOKEN, the URL's #token=, the data dir's token file): the host's own detail names
 * neither, and a token picked up from a file or the environment is easily not the one meant.
 */
export function refusedToken(target: ClientTarget, error: HostError): HostError {
  const from = target.tokenSource === undefined ? 'the token' : `the token from ${target.tokenSource}`
  return new HostError(error.status, error.code, `the host at ${target.url} refused ${from}: ${error.detail}`, error.body)
}

/** The status of an answer: what {@link answered} reads of it. */
export interface AnswerHead {
  ok: boolean
  status: number
  statusText: string
}

/** What a call settles to, as {@link answered} reads it: the data of a success, or the error answer. */
interface Outcome<D> {
  data?: D
  error?: unknown
  response: AnswerHead
}

type Method = 'get' | 'post' | 'patch' | 'delete'
/** The keys of T a caller must give. */
type RequiredKeys<T> = { [K in keyof T]-?: {} extends Pick<T, K> ? never : K }[keyof T]
/** A call's options (its parameters, body and headers): required when the route requires some. */
type InitArgument<I> = RequiredKeys<I> extends never ? [init?: I] : [init: I]
/** A route's answer as openapi-fetch types it (its data, or its error answer), with the status {@link answered} reads in place of fetch's Response. */
type Settled<R> = R extends unknown ? Omit<R, 'response'> & { response: AnswerHead } : never
type HostCall<M extends Method> = <P extends ClientPathsWithMethod<Client<paths>, M>, I extends MaybeOptionalInit<paths[P], M>>(
  path: P,
  ...init: InitArgument<I>
) => Promise<Settled<FetchResponse<NonNullable<paths[P][M]>, I, `${string}/${string}`>>>

/**
 * The host's API, typed from its OpenAPI document (src-shared/api-types.ts, generated): a call
 * names its route, and its parameters, body and answer are the route's own. The types, and the
 * way a route's path and query parameters are written into its URL, are openapi-fetch's; the
 * requests are node:http's (src-shared/http-json.ts), not fetch's: a command then loads neither
 * undici nor web streams, and runs ~0.1 s sooner (docs/performance.md, "The command line's
 * start"). A read, or a submit that names its `client_request_id`, whose reused connection was
 * cut before any answer is sent once more on a fresh one.
 */
export interface HostApi {
  GET: HostCall<'get'>
  POST: HostCall<'post'>
  PATCH: HostCall<'patch'>
  DELETE: HostCall<'delete'>
}

const querySerializer = createQuerySerializer()

/**
 * The routes that need no token (the host's guard, src-main/http/guard.ts): sent without it, so
 * that the token goes nowhere it is not needed — a host's health is what any client may ask of
 * whatever answers at an address.
 */
const OPEN_ROUTES = new Set(['/api/health'])

/** The route's options as a call gives them: any of its parameters, its body, extra headers. */
interface CallOptions {
  params?: { path?: Record<string, unknown>; query?: Record<string, unknown> }
  body?: unknown
  headers?: Record<string, unknown>
}

export function hostApi(target: ClientTarget): HostApi {
  const baseUrl = target.url.replace(/\/+$/, '')
  const call =
    (method: JsonRequest['method']) =>
    async (path: string, init: CallOptions = {}): Promise<Outcome<unknown>> => {
      const url = createFinalURL(path, { baseUrl, params: init.params ?? {}, querySerializer, pathSerializer: defaultPathSerializer })
      const headers: Record<string, string> = { accept: 'application/json' }
      for (const [name, value] of Object.entries(init.headers ?? {})) if (value !== undefined && value !== null) headers[name] = String(value)
      try {
        const token = OPEN_ROUTES.has(path) ? undefined : target.token
        const { status, statusText, body } = await requestJson(url, { method, token, body: init.body, headers, timeoutMs: answerTimeoutMs(target) })
        const response = { ok: status >= 200 && status < 300, status, statusText }
        return response.ok ? { data: body, response } : { error: body, response }
      } catch (error) {
        // An answer that is not JSON is the host's (or whatever answers there) all the same: its text is the error.
        if (error instanceof NotJsonAnswer) return { error: error.text, response: { ok: false, status: error.status, statusText: error.statusText } }
        throw error
      }
    }
  return { GET: call('GET'), POST: call('POST'), PATCH: call('PATCH'), DELETE: call('DELETE') } as unknown as HostApi
}

/** A call's answer: its data; an error answer throws a HostError, a host that cannot be reached one line. */
export async function answered<D>(target: ClientTarget, call: Promise<Outcome<D>>): Promise<D> {
  let settled: Outcome<D>
  try {
    settled = await call
  } catch (error) {
    throw unreachable(target, error)
  }
  const { response } = settled
  if (!response.ok) {
    // Text, not Leasehold's JSON: another program answers there, or a proxy between.
    if (typeof settled.error === 'string') {
      throw new HostError(response.status, `http_${response.status}`, notLeaseholdAnswer(target.url, response.status, response.statusText, settled.error), {})
    }
    const error = hostError(response.status, response.statusText, settled.error)
    if (error.status === 401) throw refusedToken(target, error)
    // Every route a command calls is one its own release's host serves: a host that has no such
    // route runs an older release, whose own command line is the one that speaks to it.
    if (error.code === 'not_found' && error.detail.startsWith('No route ')) {
      // A URL with a path (a proxy's prefix) that is not where the host is served reaches a host
      // all the same, which serves none of it: the path is the mistake, not the host's release.
      const path = new URL(target.url).pathname
      if (path !== '/') {
        throw new HostError(
          error.status,
          error.code,
          `the host at ${target.url} serves no Leasehold API under the path ${path} (it answered "${error.detail}"): give the URL without the path (its scheme, address and port), or the prefix a proxy serves the host under`,
          error.body,
        )
      }
      throw olderRelease(target, error)
    }
    // Every field a command sends (its body's and its query's keys) is one its own release's host
    // takes, whatever the user gave: a host that does not know one runs an older release too.
    if (error.status === 400 && error.code === 'invalid_request' && error.detail.includes('Unrecognized key')) throw olderRelease(target, error, 'older_release')
    throw error
  }
  return settled.data as D
}

/**
 * A host that does not know a route or a field this command sends: an older release, whose own
 * command line is the one that speaks to it. Exit 1 (not a usage error: the user typed nothing wrong).
 */
function olderRelease(target: ClientTarget, error: HostError, code = error.code): HostError {
  return new HostError(
    error.status,
    code,
    `the host at ${target.url} runs an older release of Leasehold than this command (it answered "${error.detail}"): start this release's host in its place, or use the release's own command`,
    error.body,
  )
}

/** Every open (or every) blocker report, the host's pages read one after another. */
export async function allBlockers(target: ClientTarget, state: 'OPEN' | 'RESOLVED' | 'all'): Promise<components['schemas']['Blocker'][]> {
  const api = hostApi(target)
  const blockers: components['schemas']['Blocker'][] = []
  let cursor: string | undefined
  do {
    const page = await answered(target, api.GET('/api/blockers', { params: { query: { state, ...(cursor ? { cursor } : {}) } } }))
    blockers.push(...page.blockers)
    cursor = page.next_cursor ?? undefined
  } while (cursor)
  return blockers
}

/** The queue API view of a job as the reads show it (with why it waits). */
export type QueueJob = components['schemas']['QueueJobRead']
