import type { Connection } from './connection'

/** `GET /api/capacity` (CONTRACTS.md, "Defaults and small decisions"). */
export interface Capacity {
  total_units: number
  busy_rating: number
  busy_mode: 'auto' | 'manual'
  usable: number
  leased: number
  available: number
}

/** An error answer of the host: `{detail, code}` with its status. */
export class ApiError extends Error {
  override name = 'ApiError'
  constructor(
    readonly status: number,
    readonly code: string,
    detail: string,
  ) {
    super(detail)
  }
}

/** The renderer's only way to the host: HTTP with the bearer token, as any other client. */
export class ApiClient {
  constructor(private readonly connection: Connection) {}

  getCapacity(): Promise<Capacity> {
    return this.get<Capacity>('/api/capacity')
  }

  private async get<T>(path: string): Promise<T> {
    const response = await fetch(new URL(path, this.connection.apiBase), {
      headers: { Authorization: `Bearer ${this.connection.token}`, Accept: 'application/json' },
    })
    const body: unknown = await response.json().catch(() => null)
    if (!response.ok) {
      const error = (body ?? {}) as { code?: string; detail?: string }
      throw new ApiError(response.status, error.code ?? 'http_error', error.detail ?? `HTTP ${response.status}`)
    }
    return body as T
  }
}
