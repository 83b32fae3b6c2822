import type { paths } from '../src-shared/api-types'
import { HostConnection, UnwrittenBody } from '../src-shared/host-connection'
import { STATUS_CODES } from 'node:http'
import { notLeaseholdAnswer, NotJsonAnswer } from '../src-shared/http-json'
import { type ExchangeAnswer, type ExchangeRequest, type FileAcquireAnswer, type GateRequest, HostError, LeaseLostError, noAnswer, NOT_LEASEHOLD, unsentOf, type WorkerTransport } from './transport'

/**
 * The statuses of a page (not JSON) that may stand for a Leasehold host away for a moment: a
 * proxy's error while the host behind it restarts. Asked again; any other page is not a
 * Leasehold host's, which answers every request with JSON.
 */
const GATEWAY_PAGES: ReadonlySet<number> = new Set([500, 502, 503, 504])

/** The statuses a server that serves no such route or method answers: a Leasehold host answers them with its `{detail, code}`, another server without. */
const NO_SUCH_ROUTE: ReadonlySet<number> = new Set([405, 501])

/**
 * The routes a worker calls, each a POST with a JSON body, typed by the OpenAPI document
 * (src-shared/api-types.ts, generated): a body the host would not accept, or an answer read
 * as something the host does not send, fails to compile. The generated types rather than
 * openapi-fetch: fetch's Request and Response objects cost a worker half again its CPU per job
 * (`npm run bench -- --only=batched`); undici's Pool (src-shared/host-connection.ts), which fetch
 * is built on, costs about half of what node:http does.
 */
type WorkerRoute = '/internal/worker/batch' | '/internal/worker/report' | '/api/files/leases/acquire' | '/api/files/leases/wait' | '/api/files/leases/heartbeat'
type Responses<R extends WorkerRoute> = paths[R]['post']['responses']
type JsonOf<T> = T extends { content: { 'application/json': infer B } } ? B : never
type RequestBody<R extends WorkerRoute> = paths[R]['post']['requestBody']['content']['application/json']
/** What a route answers: its 200 body, or one of the error bodies the document lists for it. */
type Answer<R extends WorkerRoute> =
  | { ok: true; body: JsonOf<Responses<R>[200]> }
  | { ok: false; status: number; body: JsonOf<Responses<R>[Exclude<keyof Responses<R>, 200>]> }

/** the worker API and /api/files over HTTP, for workers outside the host (`leasehold worker`). */
export class HttpTransport implements WorkerTransport {
  private readonly host: HostConnection
  /** The host's URL as the worker was given it, for the line that says it is not a Leasehold host. */
  private readonly url: string

  constructor(baseUrl: string, token: string) {
    this.host = new HostConnection(baseUrl, token)
    this.url = baseUrl.replace(/\/+$/, '')
  }

  /**
   * Every route a worker calls may be sent twice (the connection resends one whose keep-alive
   * connection the host had just closed): heartbeats are; completions and failures name their
   * attempt and are idempotent; an acquire by the file's holder is granted again; the runtime
   * resends a failed exchange anyway. A claim whose answer was lost leaves its jobs leased to
   * this worker until the lease expires, as it would with no resend.
   */
  private async post<R extends WorkerRoute>(route: R, body: RequestBody<R>, signal?: AbortSignal): Promise<Answer<R>> {
    let status: number
    let answer: unknown
    try {
      ;({ status, body: answer } = await this.host.request(route, { method: 'POST', body, signal, idempotent: true }))
    } catch (error) {
      // An answer that is not JSON (a proxy's page, another server at that address) is an answer
      // all the same: a gateway's error may be a host away for a moment, asked again; any other
      // is not a Leasehold host, and the worker stops (refusesWorker).
      if (error instanceof NotJsonAnswer) {
        if (GATEWAY_PAGES.has(error.status)) throw new HostError(error.status, 'not_json', error.message)
        throw new HostError(error.status, NOT_LEASEHOLD, notLeaseholdAnswer(this.url, error.status, error.statusText, error.text))
      }
      if (error instanceof UnwrittenBody) throw unsentOf(error.cause)
      throw error
    }
    return (status === 200 ? { ok: true, body: answer } : { ok: false, status, body: answer }) as Answer<R>
  }

  /** The 200 body; 409 means the lease is gone; anything else unexpected is an error. */
  private check<R extends WorkerRoute>(answer: Answer<R>): JsonOf<Responses<R>[200]> {
    if (answer.ok) return answer.body
    // A body that is not the host's (a proxy's page, an empty answer) still ends as an error.
    const body: { code?: unknown; detail?: unknown } = answer.body ?? {}
    if (NO_SUCH_ROUTE.has(answer.status) && (typeof body.code !== 'string' || typeof body.detail !== 'string')) {
      throw new HostError(answer.status, NOT_LEASEHOLD, notLeaseholdAnswer(this.url, answer.status, STATUS_CODES[answer.status] ?? '', JSON.stringify(answer.body)))
    }
    const code = String(body.code ?? 'http_error')
    const detail = String(body.detail ?? `HTTP ${answer.status}`)
    if (answer.status === 409) throw new LeaseLostError(code, detail)
    throw new HostError(answer.status, code, detail)
  }

  async exchange(request: ExchangeRequest, signal?: AbortSignal): Promise<ExchangeAnswer> {
    try {
      return this.check(await this.post('/internal/worker/batch', request, signal))
    } catch (error) {
      if (signal?.aborted) return noAnswer()
      throw error
    }
  }

  async acquireFile(request: GateRequest): Promise<FileAcquireAnswer> {
    const answer = await this.post('/api/files/leases/acquire', request)
    if (answer.ok) return { granted: true }
    if (answer.status === 409 && 'contention' in answer.body) {
      const { retry_at, holder } = answer.body.contention
      return { granted: false, code: 'file_lease_held', retry_at, holder }
    }
    if (answer.status === 409 && 'blocker' in answer.body) return { granted: false, code: 'blocked', blocker: answer.body.blocker }
    return this.check(answer) as never
  }

  async waitFileRetry(request: { file: string; owner_id: string; max_wait_ms: number }, signal: AbortSignal): Promise<boolean> {
    try {
      return this.check(await this.post('/api/files/leases/wait', request, signal)).ready
    } catch (error) {
      if (signal.aborted) return false
      throw error
    }
  }

  async heartbeatFile(request: GateRequest): Promise<void> {
    this.check(await this.post('/api/files/leases/heartbeat', request))
  }

  async report(problem: { worker_id: string; kind: string; detail: string }): Promise<void> {
    this.check(await this.post('/internal/worker/report', problem))
  }

  close(): void {
    void this.host.close()
  }
}
