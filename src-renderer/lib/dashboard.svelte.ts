import { WORKER_TOKEN_REFUSAL } from '../../src-shared/error-codes'
import { eventMoves } from '../../src-shared/event-types'
import { ApiClient, ApiError, type FetchLike, type Job, type LogEvent } from './api'
import { BlockersState } from './blockers.svelte'
import { BulkState } from './bulk.svelte'
import { CapacityState } from './capacity.svelte'
import { ChartsState } from './charts.svelte'
import { coalesce } from './coalesce'
import type { Connection } from './connection'
import { HostTime } from './host-time.svelte'
import { isJobId, JobDetailState } from './job-detail.svelte'
import { filterOfQuery, JobsState, RECENT_JOBS, sameFilter, unreadQuery } from './jobs.svelte'
import { LeasesState } from './leases.svelte'
import { LiveStream, type EventSourceLike } from './live.svelte'
import { QueuesState } from './queues.svelte'
import { ReadRetries } from './read-retries'
import type { Place, View } from './route.svelte'
import { SchedulesState } from './schedules.svelte'
import { RedisState } from './redis.svelte'
import { StorageState } from './storage.svelte'
import { WorkersState } from './workers.svelte'

/**
 * `ok`: calls are answered; `missing`: no token is known; `rejected`: the host refused it (401);
 * `worker`: it is a worker-scoped token, which the host takes on the worker routes only.
 */
export type AuthState = 'ok' | 'missing' | 'rejected' | 'worker'

export interface DashboardOptions {
  fetcher?: FetchLike
  openSource?: (url: string) => EventSourceLike
  /** Keeps a token the operator typed in; returns the connection to use. */
  saveToken?: (token: string) => Connection
}

/**
 * What is read on a timer, because no event says it changed, and only while it is on screen
 * (docs/dashboard.md): the leases while any is active (a heartbeat moves its expiry and is not an
 * event; the read also sets the host's clock), a running job shown on its page or in a jobs
 * table (a heartbeat brings its progress and note), the workers while their view is open (a
 * worker's last heartbeat), the charts while theirs is (time moves their buckets). Everything
 * else is read again on the events that change it, so an idle dashboard asks nothing.
 */
const POLL_MS = { leases: 2000, running: 2000, workers: 5000, charts: 15_000 } as const

/** How often the parts whose read failed are looked at, each read again after its own backoff (read-retries.ts). */
const RETRY_CHECK_MS = 1000

/** A job whose worker heartbeats: its progress and note move without an event (the queue API shows LEASED as RUNNING). */
const running = (job: Job): boolean => job.state === 'RUNNING'

/** The database's size moves with every write: read again at most this often while events come. */
const STORAGE_EVERY_MS = 60_000

/**
 * The composition root of the renderer's state: one API client, one event stream, and one store
 * per part of the page. Events go to every store; a store that cannot apply an event by itself
 * asks for a (coalesced) read. Components get these stores and call their methods.
 */
export class Dashboard {
  auth = $state<AuthState>('ok')
  /** The last call got no answer at all (the host is down or unreachable). */
  unreachable = $state(false)
  detail = $state<JobDetailState | null>(null)
  place = $state<Place>({ view: 'overview', jobId: null })

  readonly time = new HostTime()
  readonly api: ApiClient
  readonly stream: LiveStream
  readonly capacity: CapacityState
  readonly leases: LeasesState
  /** The Jobs view's list, with its filter and pages. */
  readonly jobs: JobsState
  /** The Overview's newest jobs, whatever the Jobs view selects. */
  readonly recent: JobsState
  readonly schedules: SchedulesState
  readonly bulk: BulkState
  readonly queues: QueuesState
  readonly blockers: BlockersState
  readonly workers: WorkersState
  readonly charts: ChartsState
  readonly storage: StorageState
  readonly redis: RedisState

  private timers: ReturnType<typeof setInterval>[] = []
  private readonly retries = new ReadRetries()
  private readonly later = {
    capacity: coalesce(() => void this.capacity.refresh(), 150),
    leases: coalesce(() => void this.leases.refresh(), 150),
    jobs: coalesce(() => void this.jobs.refresh(), 300),
    recent: coalesce(() => void this.recent.refresh(), 300),
    queues: coalesce(() => void this.queues.refresh(), 300),
    detail: coalesce(() => void this.detail?.refresh(), 300),
    blockers: coalesce(() => void this.blockers.refresh(), 150),
    schedules: coalesce(() => void this.schedules.refresh(), 300),
    workers: coalesce(() => void this.workers.refresh(), 300),
    storage: coalesce(() => void this.storage.refresh(), STORAGE_EVERY_MS),
  }

  constructor(
    connection: Connection | null,
    private readonly options: DashboardOptions = {},
  ) {
    this.api = new ApiClient(connection ?? { apiBase: location.origin, token: '' }, options.fetcher)
    this.api.onOutcome = (error) => this.observe(error)
    this.auth = connection ? 'ok' : 'missing'
    this.stream = new LiveStream(this.api, options.openSource, (error) => this.rejected(error))
    this.capacity = new CapacityState(this.api)
    this.leases = new LeasesState(this.api, this.time)
    this.jobs = new JobsState(this.api)
    this.recent = new JobsState(this.api, RECENT_JOBS)
    // A purge deletes jobs without an event for each: both lists are read again.
    this.bulk = new BulkState(this.api, () => {
      this.later.jobs()
      this.later.recent()
    })
    this.queues = new QueuesState(this.api)
    this.blockers = new BlockersState(this.api)
    this.schedules = new SchedulesState(this.api)
    this.workers = new WorkersState(this.api)
    this.charts = new ChartsState(this.api)
    this.storage = new StorageState(this.api)
    this.redis = new RedisState(() => this.time.now)
    this.stream.subscribe((events) => this.receive(events))
    this.stream.onRedis((health) => this.redis.hear(health))
    this.stream.onStorage((change) => this.storage.hear(change))
    // Whether the stream reopens after the last event it saw or from the host's present, what the
    // host answered to an action before is no longer known to be true.
    this.stream.onGap(() => {
      this.refreshAll()
      this.forgetAnswers()
    })
    this.stream.onResume(() => {
      this.readFailed()
      this.forgetAnswers()
    })
  }

  /** Connects and reads everything; nothing happens without a token. */
  start(): void {
    if (this.auth !== 'ok') return
    this.time.start()
    this.stream.start()
    this.refreshAll()
    this.stopPolling()
    this.timers = [
      setInterval(() => this.leases.sweep(), 250),
      setInterval(() => {
        if (this.leases.holding) void this.leases.refresh()
      }, POLL_MS.leases),
      setInterval(() => this.readRunning(), POLL_MS.running),
      setInterval(() => {
        if (this.place.view === 'workers') void this.workers.refresh()
      }, POLL_MS.workers),
      setInterval(() => {
        if (this.place.view === 'charts') void this.charts.refresh()
      }, POLL_MS.charts),
      // While the stream is live no reopen reads what failed: each such part tries again by itself.
      setInterval(() => {
        if (this.stream.status === 'live') this.retries.retry(this.parts())
      }, RETRY_CHECK_MS),
    ]
  }

  stop(): void {
    this.stopPolling()
    this.retries.clear()
    this.stream.stop()
    this.time.stop()
    this.storage.stop()
  }

  refreshAll(): void {
    void this.capacity.refresh()
    void this.leases.refresh()
    void this.jobs.refresh()
    void this.recent.refresh()
    void this.queues.refresh()
    void this.blockers.refresh()
    void this.schedules.refresh()
    void this.workers.refresh()
    void this.charts.refresh()
    void this.storage.refresh()
    void this.detail?.refresh()
  }

  /**
   * The stream is open again after a drop (a restarted host, a lost connection); the host replays
   * what was missed. A part whose last read failed reads again, so its error goes as soon as the
   * host answers rather than at its next event.
   */
  private readFailed(): void {
    for (const part of this.parts()) if (part?.error) void part.refresh()
  }

  /** The parts read from the host, each with the error of its last read. */
  private parts() {
    return [this.capacity, this.leases, this.jobs, this.recent, this.queues, this.blockers, this.schedules, this.workers, this.charts, this.storage, this.detail]
  }

  /**
   * The stream (re)opened, resuming or from the host's present (a drop before any event came, a
   * gap): what the host said to an action (a row's Cancel, a pause, a blocker's answer) before,
   * or its silence then, is no longer known to be true, and goes.
   */
  private forgetAnswers(): void {
    this.jobs.rowErrors = {}
    this.recent.rowErrors = {}
    this.queues.failures = {}
    this.blockers.failures = {}
    this.schedules.failures = {}
    if (this.detail) this.detail.actionError = null
  }

  /** The operator typed a token, or opened a link with one: keep it and start again with it (a stream open with the old one reconnects). */
  useToken(token: string): void {
    const trimmed = token.trim()
    if (!trimmed) return
    const connection = this.options.saveToken?.(trimmed) ?? { apiBase: this.api.connection.apiBase, token: trimmed }
    this.api.connection = connection
    this.auth = 'ok'
    this.stop()
    this.start()
  }

  /** Follows the page's place; the job view gets a store of its own. */
  show(place: Place): void {
    this.place = place
    if (place.view === 'job' && place.jobId) {
      if (this.detail?.jobId !== place.jobId) {
        this.detail = new JobDetailState(this.api, place.jobId, !place.malformed && isJobId(place.jobId))
        if (this.auth === 'ok') void this.detail.refresh()
      }
    } else {
      this.detail = null
    }
    // A fragment that names a filter (a reload, a link) sets it; one that names none keeps the filter in force.
    const filter = place.view === 'jobs' && place.query ? filterOfQuery(place.query) : null
    if (filter && !sameFilter(filter, this.jobs.filter)) {
      if (this.auth === 'ok') void this.jobs.setFilter(filter)
      else this.jobs.filter = filter // read once the token is taken
    } else if (this.auth === 'ok') void this.readAsShown(place.view)?.refresh()
    // Said after the filter is set (which forgets what the last link asked).
    if (filter) this.jobs.unread = unreadQuery(place.query!)
    if (place.view !== 'jobs') this.bulk.dismiss()
  }

  /** A run of events that came together (a burst): the leases take it in one pass; the other stores' rows are few. */
  private receive(events: readonly LogEvent[]): void {
    if (this.leases.apply(events)) this.later.leases()
    for (const event of events) this.receiveOne(event)
  }

  private receiveOne(event: LogEvent): void {
    if (CapacityState.moves(event)) this.later.capacity()
    if (this.jobs.apply(event)) this.later.jobs()
    if (this.recent.apply(event)) this.later.recent()
    // Counts move with every job; they are read again only while someone looks (a pause or resume always).
    if (QueuesState.moves(event) && (this.place.view === 'queues' || eventMoves(event.type, 'queues'))) this.later.queues()
    if (this.detail?.apply(event)) this.later.detail()
    if (BlockersState.moves(event)) this.later.blockers()
    if (this.schedules.apply(event)) this.later.schedules()
    if (WorkersState.moves(event)) this.later.workers()
    this.later.storage()
  }

  /**
   * Reads again what shows a running job: its page, or the jobs table (the Jobs view's, or the
   * Overview's recent jobs) with such a row. A heartbeat moves the job's progress and note and
   * is no event, so nothing else would bring them. Only while the tab is seen and the stream is
   * live: a hidden tab needs no progress, and a stream that reopens reads what it must itself.
   * It stops by itself as the job ends (an event moves its row or page out of RUNNING).
   */
  private readRunning(): void {
    if (this.stream.status !== 'live' || document.visibilityState !== 'visible') return
    if (this.place.view === 'job' && this.detail?.job && running(this.detail.job)) void this.detail.refresh()
    if (this.place.view === 'jobs' && this.jobs.rows.some(running)) void this.jobs.refresh()
    if (this.place.view === 'overview' && this.recent.rows.some(running)) void this.recent.refresh()
  }

  /** The part a view shows that is not kept up by every event (read on a timer, or seldom): read as the view comes on screen. */
  private readAsShown(view: View): { refresh(): Promise<void> } | null {
    switch (view) {
      case 'charts':
        return this.charts
      case 'queues':
        return this.queues
      case 'workers':
        return this.workers
      case 'overview':
        return this.storage
      default:
        return null
    }
  }

  private observe(error: ApiError | null): void {
    if (error?.unauthorized) {
      this.rejected(error)
      return
    }
    this.unreachable = error?.unreachable ?? false
  }

  private rejected(error: ApiError): void {
    if (this.auth !== 'ok') return
    this.auth = !this.api.connection.token ? 'missing' : error.message === WORKER_TOKEN_REFUSAL ? 'worker' : 'rejected'
    this.stop()
  }

  private stopPolling(): void {
    for (const timer of this.timers) clearInterval(timer)
    this.timers = []
  }
}
