import createClient, { type Client } from 'openapi-fetch'
import type { components, paths } from '../../src-shared/api-types'
import { entityTag } from '../../src-shared/entity-tag'

import type { Connection } from './connection'

/** The states' groups: the host's own (src-shared/job-states.ts). */
export { DEAD_LETTER_STATES, RETRYABLE_STATES, TERMINAL_STATES, WAITING_STATES } from '../../src-shared/job-states'

/*
 * The wire types are the API's own, generated from its OpenAPI document into
 * src-shared/api-types.ts (npm run api:types): nothing here is copied by hand. The lists below
 * are checked against the generated unions at compile time, so a value the host adds is missed
 * nowhere.
 */
type Schemas = components['schemas']

/** A list that names every member of the union `T`, checked at compile time both ways. */
const every =
  <T extends string>() =>
  <const L extends readonly T[]>(list: L & ([Exclude<T, L[number]>] extends [never] ? unknown : { missing: Exclude<T, L[number]> })): L =>
    list

/** `GET /api/capacity` (docs/capacity.md). */
export type Capacity = Schemas['Capacity']

/** The JSON body of an operation. */
type JsonBody<O extends { requestBody?: unknown }> = NonNullable<O['requestBody']> extends { content: { 'application/json': infer B } } ? B : never

/** `GET /api/storage` (docs/retention.md): the database's size on disk and the retention setting. */
export type Storage = Schemas['Storage']

/** What the host says of Redis when it carries the queues (`GET /api/health`, the event stream's `redis` frames; docs/redis.md). */
export type RedisHealth = Schemas['RedisHealth']
/** The host's storage mode as the event stream's `storage` frames tell it when it changes. */
export type StorageChange = Schemas['StorageChange']

/** `PUT /api/capacity`: a busy rating of null switches to auto. */
export type CapacityChange = JsonBody<paths['/api/capacity']['put']>

/** The job states as the queue API shows them (LEASED shows as RUNNING). */
export type JobState = Schemas['QueueJobState']
export const JOB_STATES = every<JobState>()(['QUEUED', 'CLAIMED', 'PREPARING', 'LEASE_PENDING', 'RUNNING', 'BLOCKED', 'DONE', 'FAILED', 'CANCELED', 'TIMEOUT'])

/**
 * A job as the queue API shows it; the reads (GET /jobs, GET /jobs/{id}) add why it waits, until
 * when (if the wait ends by itself), and the schedule firing that made it. The jobs table's rows
 * have no payload: it lists them without (`payload=false`).
 */
export type Job = Omit<Schemas['QueueJob'], 'payload'> &
  Partial<Pick<Schemas['QueueJobRead'], 'payload' | 'waiting_reason' | 'waiting_until' | 'schedule'>>

/** the queue API's JobResult: null until the job ends. */
export type JobResult = Schemas['QueueResult']

export type JobPage = Schemas['JobPage']

export type JobQuery = NonNullable<paths['/api/scheduler/jobs']['get']['parameters']['query']>

/** An ACTIVE job lease as `GET /api/leases` lists it. */
export type ActiveLease = Schemas['ActiveLease']

/** `GET /api/leases`: every ACTIVE lease, and the host's clock when it read them. */
export type ActiveLeases = Schemas['ActiveLeases']

/** One run of a job, as `GET /jobs/{id}/attempts` lists it (first first). */
export type Attempt = Schemas['QueueAttempt']

/** One entry of the event log: as `/jobs/{id}/events` lists it, and the SSE stream carries it (with its job). */
export type LogEvent = Schemas['QueueEvent'] & Partial<Pick<Schemas['StreamEvent'], 'job_id'>>

export type Blocker = Schemas['Blocker']

export type BlockerAction = NonNullable<Blocker['resolution']>
export const BLOCKER_ACTIONS = every<BlockerAction>()(['retry', 'force_release', 'cancel'])


/** A queue as `GET /api/queues` lists it: its jobs by state (DONE not counted), paused or not. */
export type QueueInfo = Schemas['QueueSummary']

/** A queue paused or resumed (`POST /api/queues/{queue}/pause|resume`). */
export type QueuePause = Schemas['QueuePause']

export type BulkAnswer = Schemas['BulkAnswer']
export type BulkAction = BulkAnswer['action']
export const BULK_ACTIONS = every<BulkAction>()(['retry', 'cancel', 'purge'])

/** The states each bulk action applies to (src-main/engine/verbs/bulk.ts BULK_STATES), in the dashboard's names. */
export const BULK_STATES: Readonly<Record<BulkAction, readonly string[]>> = {
  retry: ['FAILED', 'CANCELED', 'TIMEOUT'],
  cancel: ['QUEUED', 'CLAIMED', 'PREPARING', 'LEASE_PENDING', 'LEASED', 'RUNNING', 'BLOCKED'],
  purge: ['DONE', 'FAILED', 'CANCELED', 'TIMEOUT'],
}

/** `POST /api/jobs/bulk/{action}`: which jobs (every field must match), and how; the client says who asks. */
export type BulkRequest = Omit<JsonBody<paths['/api/jobs/bulk/retry']['post']>, 'requested_by'>

export type Worker = Schemas['Worker']

export type Metric = Schemas['Metric']
export const METRICS = every<Metric>()([
  'leases_active',
  'jobs_queued',
  'jobs_running',
  'capacity_used',
  'busy_rating',
  'jobs_completed',
  'jobs_failed',
  'leases_expired',
])
export type Range = Schemas['Range']
export const RANGES = every<Range>()(['1h', '6h', '24h', '7d'])
export type Bucket = Schemas['Bucket']
export const BUCKETS = every<Bucket>()(['1m', '5m', '15m', '1h'])

export type Timeseries = Schemas['Timeseries']

export type Priority = Schemas['Priority']

/** The job a schedule submits at each firing: submit's fields, less client_request_id. */
export type JobTemplate = Schemas['JobTemplate']

/** A recurring schedule as `/api/schedules` shows it (docs/schedules.md). */
export type Schedule = Schemas['Schedule']

export type Overlap = Schedule['overlap']
export const OVERLAP_POLICIES = every<Overlap>()(['allow', 'skip'])

/** `POST /api/schedules`. */
export type ScheduleInput = JsonBody<paths['/api/schedules']['post']>

/** `PATCH /api/schedules/{name}`: each field given replaces its own. */
export type ScheduleChange = JsonBody<paths['/api/schedules/{name}']['patch']>

/**
 * An error answer of the host (`{detail, code}` with its status), or status 0 with code
 * `unreachable` when no answer came at all.
 */
/** What a call that got no answer says (the host down or unreachable, the browser offline). */
export const NO_ANSWER = 'The host does not answer'

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

/** What the client calls to fetch: the global fetch, or a test's fake. */
export type FetchLike = (request: Request) => Promise<Response>

/** What an openapi-fetch call settles to. */
interface Settled<D> {
  data?: D
  error?: unknown
  response: Response
}

/**
 * The renderer's only way to the host: HTTP with the bearer token, as any other client, through
 * openapi-fetch typed by the generated paths (a call names its route; its parameters, body and
 * answer are the route's own).
 */
export class ApiClient {
  /** Told of every call's outcome: the error, or null after an answer came (even an error answer other than 401). */
  onOutcome: (error: ApiError | null) => void = () => {}
  private client: { connection: Connection; api: Client<paths> } | null = null

  constructor(
    /** Replaced when the operator enters another token. */
    public connection: Connection,
    private readonly fetcher: FetchLike = (request) => fetch(request),
  ) {}

  /** The typed client for the current connection. */
  private get api(): Client<paths> {
    const { connection } = this
    if (this.client?.connection !== connection) {
      const headers = { Authorization: `Bearer ${connection.token}`, Accept: 'application/json' }
      this.client = { connection, api: createClient<paths>({ baseUrl: connection.apiBase, headers, fetch: (request) => this.fetcher(request) }) }
    }
    return this.client.api
  }

  getCapacity = (): Promise<Capacity> => this.call(this.api.GET('/api/capacity'))
  setCapacity = (change: CapacityChange): Promise<Capacity> => this.call(this.api.PUT('/api/capacity', { body: change }))

  listJobs = (query: JobQuery): Promise<JobPage> => this.call(this.api.GET(`${Q}/jobs`, { params: { query: defined(query) } }))
  getJob = (id: string): Promise<{ job: Job; result: JobResult | null }> => this.call(this.api.GET(`${Q}/jobs/{job_id}`, { params: { path: { job_id: id } } }))
  /** A page of a job's timeline: its newest events, or with `cursor` those before the page that gave it. */
  jobEvents = (id: string, cursor?: string): Promise<{ events: LogEvent[]; next_cursor: string | null }> =>
    this.call(this.api.GET(`${Q}/jobs/{job_id}/events`, { params: { path: { job_id: id }, query: cursor === undefined ? {} : { cursor } } }))
  cancelJob = (id: string, reason?: string): Promise<{ job: Job }> =>
    this.call(this.api.POST(`${Q}/jobs/{job_id}/cancel`, { params: { path: { job_id: id } }, body: { ...(reason ? { reason } : {}), requested_by: BY } }))
  jobAttempts = (id: string): Promise<{ attempts: Attempt[] }> => this.call(this.api.GET(`${Q}/jobs/{job_id}/attempts`, { params: { path: { job_id: id } } }))
  retryJob = (id: string): Promise<{ job: Job }> =>
    this.call(this.api.POST('/api/jobs/{job_id}/retry', { params: { path: { job_id: id } }, body: { requested_by: BY } }))
  runJobNow = (id: string): Promise<{ job: Job }> =>
    this.call(this.api.POST('/api/jobs/{job_id}/run-now', { params: { path: { job_id: id } }, body: { requested_by: BY } }))
  bulk = (action: BulkAction, request: BulkRequest): Promise<BulkAnswer> =>
    this.call(this.api.POST(`/api/jobs/bulk/${action}`, { body: { ...request, requested_by: BY } }))

  listQueues = (): Promise<{ queues: QueueInfo[] }> => this.call(this.api.GET('/api/queues'))
  setQueuePaused = (queue: string, paused: boolean): Promise<{ queue: QueuePause }> =>
    this.call(this.api.POST(paused ? '/api/queues/{queue}/pause' : '/api/queues/{queue}/resume', { params: { path: { queue } }, body: { requested_by: BY } }))
  timeseries = (metric: Metric, range: Range, bucket: Bucket): Promise<Timeseries> =>
    this.call(this.api.GET(`${Q}/stats/timeseries`, { params: { query: { metric, range, bucket } } }))

  listLeases = (): Promise<ActiveLeases> => this.call(this.api.GET('/api/leases'))

  listBlockers = (): Promise<{ blockers: Blocker[] }> => this.call(this.api.GET('/api/blockers'))
  getBlocker = (id: string): Promise<{ blocker: Blocker }> => this.call(this.api.GET('/api/blockers/{blocker_id}', { params: { path: { blocker_id: id } } }))
  resolveBlocker = (id: string, action: BlockerAction, note: string | null): Promise<Schemas['BlockerResolved']> =>
    this.call(this.api.POST('/api/blockers/{blocker_id}/resolve', { params: { path: { blocker_id: id } }, body: { action, note, by: 'dashboard' } }))

  listWorkers = (): Promise<{ workers: Worker[] }> => this.call(this.api.GET('/api/workers'))

  listSchedules = (): Promise<{ schedules: Schedule[] }> => this.call(this.api.GET('/api/schedules'))
  createSchedule = (input: ScheduleInput): Promise<{ schedule: Schedule }> => this.call(this.api.POST('/api/schedules', { body: input }))
  /** With `revision`, made only if the schedule is still at it (If-Match): else ApiError `precondition_failed`. */
  updateSchedule = (name: string, change: ScheduleChange, revision?: number): Promise<{ schedule: Schedule }> =>
    this.call(
      this.api.PATCH('/api/schedules/{name}', { params: { path: { name }, header: revision === undefined ? {} : { 'If-Match': entityTag(revision) } }, body: change }),
    )
  deleteSchedule = (name: string): Promise<{ schedule: Schedule }> => this.call(this.api.DELETE('/api/schedules/{name}', { params: { path: { name } } }))
  getStorage = (): Promise<Storage> => this.call(this.api.GET('/api/storage'))
  getHealth = (): Promise<Schemas['Health']> => this.call(this.api.GET('/api/health'))

  /** A ticket that opens the event stream (an EventSource cannot send the token). */
  eventTicket = (): Promise<{ ticket: string; expires_at: string }> => this.call(this.api.POST('/api/events/ticket'))

  streamUrl(ticket: string, lastEventId: string | null): string {
    const url = new URL('/api/events/stream', this.connection.apiBase)
    url.searchParams.set('ticket', ticket)
    if (lastEventId) url.searchParams.set('last_event_id', lastEventId)
    return url.toString()
  }

  private async call<D>(request: Promise<Settled<D>>): Promise<D> {
    let settled: Settled<D>
    try {
      settled = await request
    } catch {
      const error = new ApiError(0, 'unreachable', NO_ANSWER)
      this.onOutcome(error)
      throw error
    }
    if (!settled.response.ok) {
      const body = (settled.error ?? {}) as { code?: string; detail?: string }
      const error = new ApiError(settled.response.status, body.code ?? 'http_error', body.detail ?? `HTTP ${settled.response.status}`)
      this.onOutcome(error.unauthorized ? error : null)
      throw error
    }
    this.onOutcome(null)
    return settled.data as D
  }
}

const Q = '/api/scheduler'

/** Who asks, in the events of the operator's actions taken here. */
const BY = 'dashboard'

/** The query without its empty values (a filter left blank is no filter). */
function defined<T extends object>(query: T): T {
  return Object.fromEntries(Object.entries(query).filter(([, value]) => value !== undefined && value !== null && value !== '')) as T
}

/**
 * Whether the host refused an action as no longer possible (409: the job had ended, a blocker
 * was answered elsewhere): what the page shows of it is behind the host (its event may not have
 * come yet), and is read again.
 */
export const overtaken = (error: unknown): boolean => error instanceof ApiError && error.status === 409

/** A message for people from anything thrown. */
export function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
