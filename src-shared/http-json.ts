import http from 'node:http'
import { Readable } from 'node:stream'

// The JSON client over node:http that the worker's HTTP transport, the host's client commands
// (src-main/commands/http-client.ts) and the bench share: keep-alive connections, the bearer
// token, and one resend of a harmless request whose reused connection was cut. And the one
// answer read as it comes, the event stream that `submit --wait` follows (openStream).

/** What a JSON request answered: its status and its body (`{}` when empty). */
export interface JsonAnswer {
  status: number
  /** The status line's reason phrase ("Not Found"), as the server sent it. */
  statusText: string
  body: Record<string, unknown>
}

/** An answer whose body is not JSON (another server on the port, a proxy's error page): its status and its text. */
export class NotJsonAnswer extends Error {
  constructor(
    readonly status: number,
    readonly statusText: string,
    readonly text: string,
  ) {
    super(`the answer (HTTP ${status}) is not JSON: ${text.replace(/\s+/g, ' ').trim().slice(0, 200)}`)
    this.name = 'NotJsonAnswer'
  }
}

/**
 * The one line for an answer that is not Leasehold's (`url`: where it came from): a page, or JSON
 * without Leasehold's `{detail, code}`. Another program answers there (the host.json of a host
 * long gone, its port taken since; a URL that names another server), or a proxy between. Its
 * page, cut to a few words, would say nothing more to the user. Shared by the client commands and
 * the worker.
 */
export function notLeaseholdAnswer(url: string, status: number, statusText: string, text: string): string {
  const page = text.replace(/<[^>]*>/g, ' ').replace(/\s+/g, ' ').trim().slice(0, 80)
  const head = `HTTP ${status}${statusText ? ` ${statusText}` : ''}`
  return `the server at ${url} answered ${head} without Leasehold's JSON${page ? ` ("${page}")` : ''}: it is not a Leasehold host, or a proxy stands between (another program may listen on a port a host left)`
}

/**
 * A request the host did not answer in time: one that a stopped host (SIGSTOP), or a port that
 * accepts connections and never answers, would otherwise leave waiting forever.
 */
export class NoAnswerError extends Error {
  constructor(readonly timeoutMs: number) {
    super(`no answer within ${timeoutMs / 1000} s`)
    this.name = 'NoAnswerError'
  }
}

/**
 * A timer that ends a wait for an answer after `timeoutMs` (none when undefined): its signal,
 * joined to the caller's, and what a request it cut short rejects with. The timer holds no
 * process alive; the socket it waits on does.
 */
function answerDeadline(timeoutMs: number | undefined, signal: AbortSignal | undefined): { signal: AbortSignal | undefined; failure(error: unknown): unknown } {
  if (timeoutMs === undefined) return { signal, failure: (error) => error }
  const deadline = AbortSignal.timeout(timeoutMs)
  return {
    signal: signal ? AbortSignal.any([signal, deadline]) : deadline,
    failure: (error) => (deadline.aborted && !signal?.aborted ? new NoAnswerError(timeoutMs) : error),
  }
}

/**
 * How long an idle keep-alive connection is kept when the host names no shorter time. An agent
 * with a `timeout` is what makes Node honour the host's `Keep-Alive: timeout=N` hint (it then
 * closes an idle socket a second before the host would); without one the hint is ignored, and
 * a request can leave on a socket the host has just closed.
 */
const IDLE_SOCKET_MS = 30_000

/**
 * Keep-alive connections to the host, shared by every request of the process. node:http rather
 * than fetch: fetch costs ~700 µs of CPU a request on a 2-core machine, node:http ~240 µs, and
 * a worker's requests (claim, heartbeat, complete) are all small; and a command that loads
 * fetch's Request, Headers and Response (undici, web streams) takes ~0.1 s longer to run. (The
 * agent's `timeout` only ever closes idle sockets: a request in flight, a long-poll too, is not
 * timed by it; and it keeps no process alive: an idle socket holds no reference.)
 */
const agent = new http.Agent({ keepAlive: true, maxSockets: 64, timeout: IDLE_SOCKET_MS })

/** How a request goes out: node:http, or node:https for a host behind TLS (`https:` URLs). */
interface Protocol {
  request: typeof http.request
  agent: http.Agent
}

const PLAIN: Protocol = { request: http.request, agent }
/** node:https, loaded by the first `https:` request: loading it costs every command ~40 ms. */
let secure: Promise<Protocol> | undefined

function httpsProtocol(): Promise<Protocol> {
  secure ??= import('node:https').then((https) => ({ request: https.request, agent: new https.Agent({ keepAlive: true, maxSockets: 64, timeout: IDLE_SOCKET_MS }) }))
  return secure
}

export interface JsonRequest {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE'
  /** The bearer token; none for a route that needs none (GET /api/health), which is sent without one. */
  token?: string
  body?: unknown
  signal?: AbortSignal
  headers?: Record<string, string>
  /**
   * Whether sending the request twice does what sending it once does, so that it may be resent
   * when its connection fails (see {@link requestJson}). A GET is; a POST only when its caller says
   * so, or when its body carries a `client_request_id` (the host answers a repeat with the job it
   * already made).
   */
  idempotent?: boolean
  /** How long to wait for the whole answer (resends included); then the request fails with {@link NoAnswerError}. */
  timeoutMs?: number
}

/**
 * Sends a JSON request with the bearer token (if given) and reads the JSON answer.
 *
 * A request that fails on a reused keep-alive connection before any byte of its answer (the
 * host closed the idle connection as the request left: ECONNRESET, "socket hang up") is sent
 * once more on a fresh connection, if it is idempotent. Node's agent honours the host's
 * keep-alive hint, which makes the race rare; a client whose event loop was busy across the
 * host's timeout still meets it. A failure on a fresh connection, or after the answer began, is
 * the caller's.
 */
export function requestJson(url: string | URL, options: JsonRequest): Promise<JsonAnswer> {
  const data = options.body === undefined ? undefined : JSON.stringify(options.body)
  const headers: http.OutgoingHttpHeaders = { ...options.headers, ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }) }
  if (data !== undefined) Object.assign(headers, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) })
  const deadline = answerDeadline(options.timeoutMs, options.signal)
  return send(url, { ...options, signal: deadline.signal }, headers, data, mayResend(options) ? 'may-resend' : 'once').catch((error: unknown) => {
    throw deadline.failure(error)
  })
}

/**
 * Whether a request may be sent twice when its connection was cut before its answer: when its
 * caller says so (`idempotent`), else a GET, or a POST whose body carries a `client_request_id`.
 */
export function mayResend(options: Pick<JsonRequest, 'method' | 'body' | 'idempotent'>): boolean {
  return options.idempotent ?? (options.method === 'GET' || hasClientRequestId(options.body))
}

/** An answer's status and JSON body (`{}` when empty); a body that is not JSON throws NotJsonAnswer. */
export function readJsonAnswer(status: number, statusText: string, text: string): JsonAnswer {
  let body: Record<string, unknown>
  try {
    body = text ? (JSON.parse(text) as Record<string, unknown>) : {}
  } catch {
    throw new NotJsonAnswer(status, statusText, text)
  }
  return { status, statusText, body }
}

function hasClientRequestId(body: unknown): boolean {
  const id = (body as { client_request_id?: unknown } | null | undefined)?.client_request_id
  return typeof id === 'string' && id !== ''
}

/** `may-resend`: on the shared agent, resent once if its reused socket fails; `once`: on the shared agent, never resent; `fresh`: the resend. */
type Sending = 'may-resend' | 'once' | 'fresh'

function send(url: string | URL, options: JsonRequest, headers: http.OutgoingHttpHeaders, data: string | undefined, sending: Sending): Promise<JsonAnswer> {
  const scheme = typeof url === 'string' ? url.slice(0, url.indexOf(':') + 1).toLowerCase() : url.protocol
  if (scheme === 'https:') return httpsProtocol().then((protocol) => sendWith(protocol, url, options, headers, data, sending))
  return sendWith(PLAIN, url, options, headers, data, sending)
}

function sendWith(protocol: Protocol, url: string | URL, options: JsonRequest, headers: http.OutgoingHttpHeaders, data: string | undefined, sending: Sending): Promise<JsonAnswer> {
  return new Promise((resolve, reject) => {
    let answered = false
    // The resend goes on a connection of its own (no agent): another idle socket of the pool
    // may have been closed by the host at the same moment as the one that failed.
    const request = protocol.request(url, { method: options.method, agent: sending === 'fresh' ? false : protocol.agent, headers, signal: options.signal }, (response) => {
      answered = true
      const chunks: Buffer[] = []
      response.on('data', (chunk: Buffer) => chunks.push(chunk))
      response.on('end', () => {
        try {
          resolve(readJsonAnswer(response.statusCode ?? 0, response.statusMessage ?? '', Buffer.concat(chunks).toString('utf8')))
        } catch (error) {
          reject(error)
        }
      })
      response.on('error', reject)
    })
    request.on('error', (error) => {
      if (sending === 'may-resend' && request.reusedSocket && !answered && !options.signal?.aborted) resolve(send(url, options, headers, data, 'fresh'))
      else reject(error)
    })
    request.end(data)
  })
}

/**
 * An answer read as it comes (the event stream): what an EventSource reads of a fetch Response
 * (the `eventsource` package takes such a `fetch`), and its text for an error answer.
 */
export interface StreamAnswer {
  readonly status: number
  readonly statusText: string
  readonly ok: boolean
  readonly url: string
  /** Never: a redirect is answered as it is, as any other status. */
  readonly redirected: false
  readonly headers: { get(name: string): string | null }
  /** The body, as a web stream. */
  readonly body: ReadableStream<Uint8Array>
  /** The whole body as text (for an answer that is not the stream: a refusal). */
  text(): Promise<string>
}

/**
 * A GET with the bearer token whose answer is handed over as soon as its head has come, the body
 * still coming. On a connection of its own: a stream may stay silent longer than a keep-alive
 * connection idles. Rejects if the request fails before the answer's head (the host unreachable),
 * or (NoAnswerError) if the head has not come within `timeoutMs`: the body, once it comes, is
 * waited on as long as the caller likes.
 */
export function openStream(url: URL, options: { token: string; headers?: Record<string, string>; signal?: AbortSignal; timeoutMs?: number }): Promise<StreamAnswer> {
  const protocol = url.protocol === 'https:' ? httpsProtocol() : PLAIN
  return Promise.resolve(protocol).then(
    ({ request }) =>
      new Promise<StreamAnswer>((resolve, reject) => {
        const headers = { ...options.headers, authorization: `Bearer ${options.token}` }
        const headTimer = options.timeoutMs === undefined ? undefined : setTimeout(() => sent.destroy(new NoAnswerError(options.timeoutMs!)), options.timeoutMs).unref()
        const sent = request(url, { method: 'GET', agent: false, headers, signal: options.signal }, (response) => {
          clearTimeout(headTimer)
          const status = response.statusCode ?? 0
          // The body is read one way only: as a web stream, or as text (made when first asked for).
          let body: ReadableStream<Uint8Array> | undefined
          resolve({
            status,
            statusText: response.statusMessage ?? '',
            ok: status >= 200 && status < 300,
            url: url.href,
            redirected: false,
            headers: { get: (name) => headerValue(response.headers[name.toLowerCase()]) },
            get body() {
              return (body ??= Readable.toWeb(response) as ReadableStream<Uint8Array>)
            },
            text: async () => {
              let text = ''
              for await (const chunk of response) text += (chunk as Buffer).toString('utf8')
              return text
            },
          })
        })
        sent.on('error', (error) => {
          clearTimeout(headTimer)
          reject(error)
        })
        sent.end()
      }),
  )
}

function headerValue(value: string | string[] | undefined): string | null {
  return value === undefined ? null : Array.isArray(value) ? value.join(', ') : value
}
