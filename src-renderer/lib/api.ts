import type { Connection } from './connection'

/** `GET /api/capacity` (docs/capacity.md). */
export interface Capacity {
  total_units: number
  busy_rating: number
  busy_mode: 'auto' | 'manual'
  usable: number
  leased: number
  available: number
}

/** `GET /api/storage` (docs/retention.md): the database's size on disk and the retention setting. */
export interface Storage {
  database_bytes: number
  file_bytes: number
  wal_bytes: number
  free_bytes: number
  auto_vacuum: 'none' | 'full' | 'incremental'
  /** 0: finished jobs are kept forever. */
  retain_days: number
  stats_retain_days: number
  last_prune: { at: string; jobs_deleted: number; events_deleted: number; pages_returned: number; longest_step_ms: number } | null
}

/** `PUT /api/capacity`: a busy rating of null switches to auto. */
export interface CapacityChange {
  total_units?: number
  busy_rating?: number | null
}

/** The canonical job states (src-main/engine/states.ts); dialect 002 shows LEASED as RUNNING. */
export const JOB_STATES = ['QUEUED', 'CLAIMED', 'PREPARING', 'LEASE_PENDING', 'RUNNING', 'BLOCKED', 'DONE', 'FAILED', 'CANCELED', 'TIMEOUT'] as const
export type JobState = (typeof JOB_STATES)[number]
export const TERMINAL_STATES: ReadonlySet<string> = new Set(['DONE', 'FAILED', 'CANCELED', 'TIMEOUT'])

/** A job as dialect 002 shows it. */
export interface Job {
  job_id: string
  addon_id: string | null
  job_type: string
  priority: string
  cost_units: number
  payload: unknown
  state: string
  created_at: string
  updated_at: string
  claimed_by: string | null
  lease_id: string | null
  attempts: number
  max_attempts: number
  next_retry_at: string | null
  queue: string
  cancel_requested: boolean
  progress: number | null
  note: string | null
  dead_letter: boolean
  /** Why it is not running yet (null when it runs or has ended); only the reads carry it. */
  waiting_reason?: string | null
}

/** Dialect 002's JobResult: null until the job ends. */
export interface JobResult {
  job_id: string
  status: string | null
  result_data: unknown
  error: unknown
  started_at: string | null
  finished_at: string | null
  attempts: number
}

export interface JobPage {
  jobs: Job[]
  next_cursor: string | null
}

export interface JobQuery {
  state?: string
  job_type?: string
  addon_id?: string
  limit?: number
  cursor?: string
}

/** An ACTIVE job lease as `GET /api/leases` lists it. */
export interface ActiveLease {
  lease_id: string
  job_id: string
  job_type: string
  addon_id: string | null
  worker_id: string
  cost_units: number
  granted_at: string
  last_heartbeat_at: string | null
  expires_at: string
}

/** `GET /api/leases`: every ACTIVE lease, and the host's clock when it read them. */
export interface ActiveLeases {
  now: string
  leases: ActiveLease[]
}

/** One run of a job, as `GET /jobs/{id}/attempts` lists it (first first). */
export interface Attempt {
  attempt_id: string
  attempt: number
  worker_id: string
  lease_id: string
  started_at: string
  finished_at: string | null
  /** SUCCEEDED, FAILED, CANCELED, TIMEOUT or BLOCKED; null while it runs. */
  outcome: string | null
  /** What became of the job: REQUEUED, DEAD_LETTERED, FINAL or BLOCKED; null while it runs. */
  disposition: string | null
  /** What the worker (or the host) reported, usually `{code, message}`; null without one. */
  error: unknown
}

/** One entry of the event log, as `/jobs/{id}/events` and the SSE stream carry it. */
export interface LogEvent {
  id: number
  ts: string
  type: string
  entity_type: string
  entity_id: string
  job_id?: string | null
  data: Record<string, unknown> | null
}

export interface Blocker {
  blocker_id: string
  file: string
  holder: { owner_id: string; job_id: string | null; acquired_at: string; last_heartbeat_at: string | null }
  age_s: number
  retry_s: number
  denied_at: string
  retried_at: string
  requester: { owner_id: string; job_id: string | null; lease_id: string | null }
  state: 'OPEN' | 'RESOLVED'
  resolution: string | null
  note: string | null
  resolved_by: string | null
  resolved_at: string | null
  created_at: string
}

export const BLOCKER_ACTIONS = ['retry', 'force_release', 'cancel'] as const
export type BlockerAction = (typeof BLOCKER_ACTIONS)[number]

export interface Worker {
  worker_id: string
  kind: 'local' | 'external'
  pid: number | null
  state: string
  current_job_ids: string[]
  last_seen_at: string
  started_at: string
  restarts: number
}

export const METRICS = ['leases_active', 'jobs_queued', 'jobs_running', 'capacity_used', 'busy_rating', 'jobs_completed', 'jobs_failed'] as const
export type Metric = (typeof METRICS)[number]
export const RANGES = ['1h', '6h', '24h', '7d'] as const
export type Range = (typeof RANGES)[number]
export const BUCKETS = ['1m', '5m', '15m', '1h'] as const
export type Bucket = (typeof BUCKETS)[number]

export interface Timeseries {
  metric: Metric
  bucket: Bucket
  range: Range
  /** Where the host's history starts (its first sample or event); null before either. Buckets before it are 0 by contract. */
  since: string | null
  points: { ts: string; value: number }[]
}

/**
 * An error answer of the host (`{detail, code}` with its status), or status 0 with code
 * `unreachable` when no answer came at all.
 */
export class ApiError extends Error {
  override name = 'ApiError'
  constructor(
    readonly status: number,
    readonly code: string,
    detail: string,
  ) {
    super(detail)
  }

  get unauthorized(): boolean {
    return this.status === 401
  }

  get unreachable(): boolean {
    return this.status === 0
  }
}

type FetchLike = (input: URL, init: RequestInit) => Promise<Response>

const Q = '/api/scheduler'

/** The renderer's only way to the host: HTTP with the bearer token, as any other client. */
export class ApiClient {
  /** Told of every call's outcome: the error, or null after an answer came (even an error answer other than 401). */
  onOutcome: (error: ApiError | null) => void = () => {}

  constructor(
    /** Replaced when the operator enters another token. */
    public connection: Connection,
    private readonly fetcher: FetchLike = (input, init) => fetch(input, init),
  ) {}

  getCapacity = (): Promise<Capacity> => this.call('GET', '/api/capacity')
  setCapacity = (change: CapacityChange): Promise<Capacity> => this.call('PUT', '/api/capacity', change)

  listJobs = (query: JobQuery): Promise<JobPage> => this.call('GET', `${Q}/jobs${queryString(query)}`)
  getJob = (id: string): Promise<{ job: Job; result: JobResult | null }> => this.call('GET', `${Q}/jobs/${encodeURIComponent(id)}`)
  jobEvents = (id: string): Promise<{ events: LogEvent[] }> => this.call('GET', `${Q}/jobs/${encodeURIComponent(id)}/events`)
  cancelJob = (id: string, reason?: string): Promise<{ job: Job }> =>
    this.call('POST', `${Q}/jobs/${encodeURIComponent(id)}/cancel`, reason ? { reason } : {})
  jobAttempts = (id: string): Promise<{ attempts: Attempt[] }> => this.call('GET', `${Q}/jobs/${encodeURIComponent(id)}/attempts`)
  timeseries = (metric: Metric, range: Range, bucket: Bucket): Promise<Timeseries> =>
    this.call('GET', `${Q}/stats/timeseries${queryString({ metric, range, bucket })}`)

  listLeases = (): Promise<ActiveLeases> => this.call('GET', '/api/leases')

  listBlockers = (): Promise<{ blockers: Blocker[] }> => this.call('GET', '/api/blockers')
  resolveBlocker = (id: string, action: BlockerAction, note: string | null): Promise<{ blocker: Blocker; job_state: string | null }> =>
    this.call('POST', `/api/blockers/${encodeURIComponent(id)}/resolve`, { action, note, by: 'dashboard' })

  listWorkers = (): Promise<{ workers: Worker[] }> => this.call('GET', '/api/workers')

  getStorage = (): Promise<Storage> => this.call('GET', '/api/storage')

  /** A ticket that opens the event stream (an EventSource cannot send the token). */
  eventTicket = (): Promise<{ ticket: string; expires_at: string }> => this.call('POST', '/api/events/ticket', {})

  streamUrl(ticket: string, lastEventId: string | null): string {
    const url = new URL('/api/events/stream', this.connection.apiBase)
    url.searchParams.set('ticket', ticket)
    if (lastEventId) url.searchParams.set('last_event_id', lastEventId)
    return url.toString()
  }

  private async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = { Authorization: `Bearer ${this.connection.token}`, Accept: 'application/json' }
    if (body !== undefined) headers['Content-Type'] = 'application/json'
    let response: Response
    try {
      response = await this.fetcher(new URL(path, this.connection.apiBase), {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      })
    } catch {
      const error = new ApiError(0, 'unreachable', 'The host does not answer')
      this.onOutcome(error)
      throw error
    }
    const answer: unknown = response.status === 204 ? null : await response.json().catch(() => null)
    if (!response.ok) {
      const body = (answer ?? {}) as { code?: string; detail?: string }
      const error = new ApiError(response.status, body.code ?? 'http_error', body.detail ?? `HTTP ${response.status}`)
      this.onOutcome(error.unauthorized ? error : null)
      throw error
    }
    this.onOutcome(null)
    return answer as T
  }
}

/** `?a=1&b=2` of the defined, non-empty values; '' when there are none. */
export function queryString(params: object): string {
  const search = new URLSearchParams()
  for (const [key, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== '') search.set(key, String(value))
  }
  const text = search.toString()
  return text ? `?${text}` : ''
}

/** A message for people from anything thrown. */
export function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
