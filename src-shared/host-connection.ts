import { STATUS_CODES } from 'node:http'
import { Client, type Dispatcher, Pool } from 'undici'
import { type JsonAnswer, type JsonRequest, mayResend, readJsonAnswer } from './http-json'

// The JSON client of a process that talks to one host for a long time and often: a `leasehold
// worker` (src-worker/transport-http.ts) and the bench. Keep-alive connections from undici's
// Pool, which spends about half of node:http's CPU a request (~70–110 µs of CPU a small JSON
// request on a 2-core machine, against ~150–200 for node:http's `request`) — CPU a worker
// otherwise takes from the host and from the person at the desk. Loading undici costs a process
// ~35 ms, so the one-shot commands keep requestJson (src-shared/http-json.ts), which is node:http.

/** The socket failures of a request whose connection closed under it, before its answer began. */
const CUT_CONNECTION = new Set(['UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE'])

/** A request body JSON cannot write (a string too long, a BigInt, a cycle): nothing was sent. `cause` is JSON.stringify's error. */
export class UnwrittenBody extends Error {
  override name = 'UnwrittenBody'
  constructor(override readonly cause: unknown) {
    super(`the request body cannot be written as JSON (${cause instanceof Error ? cause.message : String(cause)})`)
  }
}

/**
 * Keep-alive connections to one host (its origin: scheme, name and port), with its bearer token.
 * A URL with a path (a host behind a proxy under a prefix) has every request's path under it, as
 * the one-shot commands do.
 */
export class HostConnection {
  private readonly origin: string
  private readonly prefix: string
  private readonly pool: Pool

  constructor(
    url: string | URL,
    private readonly token: string,
  ) {
    this.origin = new URL(url).origin
    this.prefix = new URL(url).pathname.replace(/\/+$/, '')
    // At most 64 keep-alive connections at once; undici closes an idle one before the host would,
    // by the host's Keep-Alive hint.
    this.pool = new Pool(this.origin, { connections: 64 })
  }

  /**
   * Sends a JSON request to `path` and reads the JSON answer (a body that is not JSON rejects
   * with NotJsonAnswer). A request whose connection was cut before any byte of its answer (the
   * host closed an idle keep-alive connection as it left) is sent once more, on a connection of
   * its own, when sending it twice is harmless (`mayResend`); any other failure is the caller's.
   */
  async request(path: string, options: Omit<JsonRequest, 'token'>): Promise<JsonAnswer> {
    let data: string | undefined
    try {
      data = options.body === undefined ? undefined : JSON.stringify(options.body)
    } catch (error) {
      throw new UnwrittenBody(error)
    }
    const headers: Record<string, string> = { ...options.headers, authorization: `Bearer ${this.token}` }
    if (data !== undefined) headers['content-type'] = 'application/json'
    const request = { path: this.prefix + path, method: options.method, headers, body: data, signal: options.signal }
    let answer: Dispatcher.ResponseData
    try {
      answer = await this.pool.request(request)
    } catch (error) {
      const code = (error as { code?: unknown }).code
      if (!mayResend(options) || options.signal?.aborted || typeof code !== 'string' || !CUT_CONNECTION.has(code)) throw error
      // Another idle connection of the pool may have been closed at the same moment.
      const fresh = new Client(this.origin)
      try {
        answer = await fresh.request(request)
      } finally {
        void fresh.close() // once its answer has been read
      }
    }
    return readJsonAnswer(answer.statusCode, STATUS_CODES[answer.statusCode] ?? '', await answer.body.text())
  }

  /** Closes the connections once their requests are answered. */
  close(): Promise<void> {
    return this.pool.close()
  }
}
