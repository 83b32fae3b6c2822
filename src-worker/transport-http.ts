import { type JsonAnswer, requestJson } from './http-json'
import { type ExchangeAnswer, type ExchangeRequest, type FileAcquireAnswer, LeaseLostError, type WorkerTransport } from './transport'

/** An HTTP answer the transport cannot act on. */
export class HostError extends Error {
  override name = 'HostError'
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message)
  }
}

/** Dialect 003 and /api/files over HTTP, for workers outside the host (`leasehold worker`). */
export class HttpTransport implements WorkerTransport {
  constructor(
    private readonly baseUrl: string,
    private readonly token: string,
  ) {}

  private post(path: string, body: unknown, signal?: AbortSignal): Promise<JsonAnswer> {
    return requestJson(new URL(path, this.baseUrl), { method: 'POST', token: this.token, body, signal })
  }

  /** 409 means the lease is gone; anything else unexpected is an error. */
  private check(answer: JsonAnswer): Record<string, unknown> {
    if (answer.status === 200) return answer.body
    const code = String(answer.body.code ?? 'http_error')
    const detail = String(answer.body.detail ?? `HTTP ${answer.status}`)
    if (answer.status === 409) throw new LeaseLostError(code, detail)
    throw new HostError(answer.status, code, detail)
  }

  async exchange(request: ExchangeRequest, signal?: AbortSignal): Promise<ExchangeAnswer> {
    try {
      return this.check(await this.post('/internal/worker/batch', request, signal)) as unknown as ExchangeAnswer
    } catch (error) {
      if (signal?.aborted) return { heartbeats: [], completed: [], failed: [], jobs: [] }
      throw error
    }
  }

  async acquireFile(request: { file: string; owner_id: string; lease_id: string }): Promise<FileAcquireAnswer> {
    const answer = await this.post('/api/files/leases/acquire', request)
    if (answer.status === 200) return { granted: true }
    if (answer.status === 409 && answer.body.code === 'file_lease_held') {
      const contention = answer.body.contention as { retry_at: string; holder: unknown }
      return { granted: false, code: 'file_lease_held', retry_at: contention.retry_at, holder: contention.holder }
    }
    if (answer.status === 409 && answer.body.code === 'blocked') return { granted: false, code: 'blocked', blocker: answer.body.blocker }
    return this.check(answer) as never
  }

  async waitFileRetry(request: { file: string; owner_id: string; max_wait_ms: number }, signal: AbortSignal): Promise<boolean> {
    try {
      const body = this.check(await this.post('/api/files/leases/wait', request, signal))
      return body.ready === true
    } catch (error) {
      if (signal.aborted) return false
      throw error
    }
  }

  async heartbeatFile(request: { file: string; owner_id: string }): Promise<void> {
    this.check(await this.post('/api/files/leases/heartbeat', request))
  }

  async report(problem: { worker_id: string; kind: string; detail: string }): Promise<void> {
    this.check(await this.post('/internal/worker/report', problem))
  }

  close(): void {}
}
