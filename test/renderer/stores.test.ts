// @vitest-environment happy-dom
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest'
import { flushSync } from 'svelte'
import App from '../../src-renderer/App.svelte'
import { WORKER_TOKEN_REFUSAL } from '../../src-shared/error-codes'
import JobsView from '../../src-renderer/components/JobsView.svelte'
import OverviewView from '../../src-renderer/components/OverviewView.svelte'
import { ApiClient, type ActiveLease, type ActiveLeases, type Blocker, type Job } from '../../src-renderer/lib/api'
import { BlockersState } from '../../src-renderer/lib/blockers.svelte'
import { followTokenLinks, storeToken } from '../../src-renderer/lib/connection'
import { Dashboard } from '../../src-renderer/lib/dashboard.svelte'
import { parseRoute } from '../../src-renderer/lib/route.svelte'
import { HostTime } from '../../src-renderer/lib/host-time.svelte'
import { FLASH_MS } from '../../src-renderer/lib/lease-events'
import { LeasesState } from '../../src-renderer/lib/leases.svelte'
import { JobsState } from '../../src-renderer/lib/jobs.svelte'
import { LiveStream, reconnectDelayMs, type EventSourceLike } from '../../src-renderer/lib/live.svelte'
import { event, fakeFetch, iso, job, render, SECOND, T0, text, unmountAll } from './support'

const connection = { apiBase: 'http://127.0.0.1:7878', token: 't0k' }

/** An EventSource the test drives. */
class FakeSource implements EventSourceLike {
  readyState = 0
  onopen: ((event: Event) => void) | null = null
  onerror: ((event: Event) => void) | null = null
  closed = false
  readonly listeners = new Map<string, ((event: MessageEvent<string>) => void)[]>()
  constructor(readonly url: string) {}
  addEventListener(type: string, listener: (event: MessageEvent<string>) => void) {
    this.listeners.set(type, [...(this.listeners.get(type) ?? []), listener])
  }
  close() {
    this.closed = true
    this.readyState = 2
  }
  open() {
    this.readyState = 1
    this.onopen?.(new Event('open'))
  }
  emit(type: string, data: unknown, lastEventId: string) {
    for (const listener of this.listeners.get(type) ?? []) listener(new MessageEvent(type, { data: JSON.stringify(data), lastEventId }))
  }
  fail(readyState: number) {
    this.readyState = readyState
    this.onerror?.(new Event('error'))
  }
}


/** A dashboard whose host answers while `up()` says so (a fetch that fails otherwise, as for a stopped host); its streams are pushed to `sources`. */
function dashboardOfHostThatGoes(fetcher: (request: Request) => Promise<Response>, up: () => boolean, sources: FakeSource[]): Dashboard {
  const restarting = async (request: Request) => {
    if (!up()) throw new TypeError('fetch failed')
    return fetcher(request)
  }
  return new Dashboard(connection, { fetcher: restarting, openSource: (url) => sources[sources.push(new FakeSource(url)) - 1]! })
}
describe('the live stream', () => {
  test('opens with a ticket, hands on the events of a turn together as it ends, and when it drops resumes after the last one with a fresh ticket, never letting the browser resend the old one', async () => {
    vi.useFakeTimers()
    try {
      let tickets = 0
      const { fetcher } = fakeFetch({ 'POST /api/events/ticket': () => ({ ticket: `ticket-${++tickets}` }) })
      const api = new ApiClient(connection, fetcher)
      const sources: FakeSource[] = []
      const stream = new LiveStream(api, (url) => {
        const source = new FakeSource(url)
        sources.push(source)
        return source
      })
      const seen: string[][] = []
      stream.subscribe((events) => seen.push(events.map((e) => e.type)))
      stream.start()
      expect(stream.status).toBe('connecting')
      await vi.waitFor(() => expect(sources).toHaveLength(1))
      expect(sources[0]!.url).toBe('http://127.0.0.1:7878/api/events/stream?ticket=ticket-1')
      sources[0]!.open()
      expect(stream.status).toBe('live')
      sources[0]!.emit('JOB_SUBMITTED', event('JOB_SUBMITTED', { id: 41 }), '41')
      sources[0]!.emit('JOB_DONE', event('JOB_DONE', { id: 42 }), '42')
      expect(seen).toEqual([])
      await vi.advanceTimersByTimeAsync(0)
      expect(seen).toEqual([['JOB_SUBMITTED', 'JOB_DONE']]) // one run: each store applies it in one pass

      // The connection drops (the host restarted, say). The browser would reconnect by itself with
      // the same ticket, which the host no longer knows (a 401 in the console): the stream closes
      // it at once, and a fresh ticket resumes after 42.
      sources[0]!.fail(0)
      expect(stream.status).toBe('reconnecting')
      expect(sources[0]!.closed).toBe(true)
      await vi.advanceTimersByTimeAsync(reconnectDelayMs(1))
      expect(sources).toHaveLength(2)
      expect(sources[1]!.url).toBe('http://127.0.0.1:7878/api/events/stream?ticket=ticket-2&last_event_id=42')
      sources[1]!.open()
      expect(stream.status).toBe('live')
      stream.stop()
      expect(stream.status).toBe('stopped')
    } finally {
      vi.useRealTimers()
    }
  })

  test('an open with no event to resume after asks the stores to read again (what changed before it would never come); a resuming one tells only that it resumed', async () => {
    vi.useFakeTimers()
    try {
      let tickets = 0
      const { fetcher } = fakeFetch({ 'POST /api/events/ticket': () => ({ ticket: `ticket-${++tickets}` }) })
      const sources: FakeSource[] = []
      const stream = new LiveStream(new ApiClient(connection, fetcher), (url) => sources[sources.push(new FakeSource(url)) - 1]!)
      let [reads, resumes] = [0, 0]
      stream.onGap(() => reads++)
      stream.onResume(() => resumes++)
      stream.start()
      await vi.waitFor(() => expect(sources).toHaveLength(1))
      sources[0]!.open()
      expect([reads, resumes]).toEqual([1, 0])
      // Dropped before any event came: the reopen has nothing to resume after either.
      sources[0]!.fail(0)
      await vi.advanceTimersByTimeAsync(reconnectDelayMs(1))
      sources[1]!.open()
      expect([reads, resumes]).toEqual([2, 0])
      sources[1]!.emit('JOB_SUBMITTED', event('JOB_SUBMITTED', { id: 41 }), '41')
      sources[1]!.fail(0)
      await vi.advanceTimersByTimeAsync(reconnectDelayMs(1))
      sources[2]!.open() // resumes after 41: the host replays what it missed
      expect([reads, resumes]).toEqual([2, 1])
      stream.stop()
    } finally {
      vi.useRealTimers()
    }
  })

  test('backs off 1 s, 2 s, 4 s … at most 15 s between fresh tickets', () => {
    expect([1, 2, 3, 4, 5, 9].map(reconnectDelayMs)).toEqual([1000, 2000, 4000, 8000, 15_000, 15_000])
  })
})

describe("the host's clock", () => {
  test("is read from an answer's now, taken halfway through the round trip; jitter leaves it; a moved host clock moves it", () => {
    let local = T0 + 200
    const time = new HostTime(() => local)
    // Sent at T0, answered at T0 + 200: the host read its clock (5 min ahead) at about T0 + 100.
    time.sync(iso(T0 + 100 + 300 * SECOND), T0, T0 + 200)
    expect(time.offsetMs).toBe(300 * SECOND)
    expect(time.now).toBe(T0 + 200 + 300 * SECOND)
    time.sync(iso(T0 + 130 + 300 * SECOND), T0, T0 + 200) // within the round trip: the same clock
    expect(time.offsetMs).toBe(300 * SECOND)
    local = T0 + 10 * SECOND
    time.sync(iso(T0 + 10 * SECOND + 315 * SECOND), T0 + 10 * SECOND, T0 + 10 * SECOND) // a test moved it 15 s on
    expect(time.now).toBe(T0 + 10 * SECOND + 315 * SECOND)
    time.sync(iso(T0 + 7 * SECOND), T0 + 10 * SECOND, T0 + 10 * SECOND) // a host behind this page
    expect(time.offsetMs).toBe(-3 * SECOND)
    time.sync('not a time', T0, T0)
    expect(time.offsetMs).toBe(-3 * SECOND)
  })
})

describe('the leases store', () => {
  const active = (lease_id: string, fields: Partial<ActiveLease> = {}): ActiveLease => ({
    lease_id,
    job_id: `job-${lease_id}`,
    job_type: 'sleep',
    addon_id: null,
    worker_id: 'local-1.1',
    cost_units: 10,
    granted_at: iso(T0),
    last_heartbeat_at: iso(T0 + 180 * SECOND),
    expires_at: iso(T0 + 190 * SECOND),
    ...fields,
  })

  test('reads GET /api/leases alone, counts down on the host clock it answers, and follows events between reads', async () => {
    let local = T0 // this page's clock; the host's runs 184 s ahead
    let answer: ActiveLeases = { now: iso(T0 + 184 * SECOND), leases: [active('l1')] }
    const { fetcher, calls } = fakeFetch({ 'GET /api/leases': () => answer })
    const time = new HostTime(() => local)
    const leases = new LeasesState(new ApiClient(connection, fetcher), time)
    await leases.refresh()
    expect(calls.map((c) => `${c.method} ${c.path}`)).toEqual(['GET /api/leases'])
    expect(leases.rows).toMatchObject([{ lease_id: 'l1', job_type: 'sleep', worker_id: 'local-1.1' }])
    expect(leases.rows[0]!.expires_at - time.now).toBe(6 * SECOND)

    // The test moves the host's clock 3 s on: the next read shows it.
    answer = { now: iso(T0 + 187 * SECOND), leases: [active('l1')] }
    await leases.refresh()
    expect(leases.rows[0]!.expires_at - time.now).toBe(3 * SECOND)

    // A grant shows at once (its job type comes with the next read); the expiry flashes l1 out.
    local += 100
    const grant = event('LEASE_GRANTED', {
      entity_type: 'LEASE',
      entity_id: 'l2',
      job_id: 'job-l2',
      ts: iso(T0 + 188 * SECOND),
      data: { worker_id: 'w2', cost_units: 5, expires_at: T0 + 200 * SECOND },
    })
    expect(leases.apply([grant])).toBe(true)
    expect(leases.apply([event('LEASE_EXPIRED', { entity_type: 'LEASE', entity_id: 'l1', job_id: 'job-l1' })])).toBe(true)
    expect(leases.apply([event('JOB_SUBMITTED', { job_id: 'other' })])).toBe(false)
    expect(leases.rows.map((r) => [r.lease_id, r.job_type, r.ended?.how ?? null])).toEqual([
      ['l1', 'sleep', 'expired'],
      ['l2', null, null],
    ])
    // An answer the host gave before the grant lists neither: l1 keeps flashing, l2 stays.
    answer = { now: iso(T0 + 187.5 * SECOND), leases: [] }
    await leases.refresh()
    expect(leases.rows.map((r) => r.lease_id)).toEqual(['l1', 'l2'])
    // One after it lists l2, with its type.
    answer = { now: iso(T0 + 189 * SECOND), leases: [active('l2', { job_id: 'job-l2', job_type: 'render', granted_at: iso(T0 + 188 * SECOND) })] }
    await leases.refresh()
    expect(leases.rows.map((r) => [r.lease_id, r.job_type])).toEqual([
      ['l1', 'sleep'],
      ['l2', 'render'],
    ])
    // The flash lasts its time on this page's clock, whatever the host's did meanwhile.
    local += FLASH_MS - 1
    leases.sweep()
    expect(leases.rows).toHaveLength(2)
    local += 1
    leases.sweep()
    expect(leases.rows.map((r) => r.lease_id)).toEqual(['l2'])
  })

  test('an older answer that comes after a newer one is dropped', async () => {
    const pending: ((answer: ActiveLeases) => void)[] = []
    const fetcher = () =>
      new Promise<Response>((resolve) => pending.push((answer) => resolve(new Response(JSON.stringify(answer), { status: 200 }))))
    const time = new HostTime(() => T0)
    const leases = new LeasesState(new ApiClient(connection, fetcher), time)
    const first = leases.refresh()
    const second = leases.refresh()
    pending[1]!({ now: iso(T0 + 10 * SECOND), leases: [active('new')] })
    await second
    pending[0]!({ now: iso(T0 + 5 * SECOND), leases: [active('old')] })
    await first
    expect(leases.rows.map((r) => r.lease_id)).toEqual(['new'])
    expect(time.now).toBe(T0 + 10 * SECOND)
  })

  test('the dashboard reads the leases every 2 s while one is active, soon after a lease event, and nothing else for them', async () => {
    vi.useFakeTimers({ now: T0 })
    try {
      let leases: ActiveLease[] = [active('l0', { expires_at: iso(Date.now() + 600 * SECOND) })]
      const { fetcher, calls } = fakeFetch({
        'POST /api/events/ticket': { ticket: 'ticket-1' },
        'GET /api/leases': () => ({ now: iso(Date.now() + 184 * SECOND), leases }),
      })
      const sources: FakeSource[] = []
      const dashboard = new Dashboard(connection, { fetcher, openSource: (url) => sources[sources.push(new FakeSource(url)) - 1]! })
      const leaseReads = () => calls.filter((c) => c.path === '/api/leases').length
      dashboard.start()
      await vi.advanceTimersByTimeAsync(0)
      expect(leaseReads()).toBe(1)
      expect(dashboard.time.now).toBe(Date.now() + 184 * SECOND)
      sources[0]!.open()
      await vi.advanceTimersByTimeAsync(0)
      expect(leaseReads()).toBe(2) // the stream opened with no event to resume after: read again
      sources[0]!.emit('LEASE_GRANTED', event('LEASE_GRANTED', { id: 7, entity_type: 'LEASE', entity_id: 'l1', data: { worker_id: 'w1', cost_units: 1 } }), '7')
      sources[0]!.emit('LEASE_EXPIRED', event('LEASE_EXPIRED', { id: 8, entity_type: 'LEASE', entity_id: 'l1' }), '8')
      await vi.advanceTimersByTimeAsync(200)
      expect(leaseReads()).toBe(3) // one read for the burst
      sources[0]!.emit('CAPACITY_CHANGED', event('CAPACITY_CHANGED', { id: 9, job_id: null, entity_type: 'CAPACITY', entity_id: 'capacity' }), '9')
      await vi.advanceTimersByTimeAsync(1000)
      expect(leaseReads()).toBe(3)
      await vi.advanceTimersByTimeAsync(800) // 2 s after the start
      expect(leaseReads()).toBe(4)
      // The last lease ends: once it has flashed out, its heartbeats are over and so are the reads.
      leases = []
      await vi.advanceTimersByTimeAsync(2000)
      expect(leaseReads()).toBe(5)
      await vi.advanceTimersByTimeAsync(FLASH_MS + 30 * SECOND)
      expect(leaseReads()).toBe(5)
      // No job lists or lease reads per job any more.
      expect(calls.filter((c) => /[?&]state=|\/lease\//.test(c.path))).toEqual([])
      dashboard.stop()
    } finally {
      vi.useRealTimers()
    }
  })
})

describe('an idle dashboard', () => {
  beforeEach(() => vi.useFakeTimers({ now: T0 }))
  afterEach(() => vi.useRealTimers())

  /** What GET /api/health answers of the host's storage. */
  let health: { storage: 'read_write' | 'read_only'; reason?: string } = { storage: 'read_write' }

  /** A dashboard started on a host where nothing happens, its first reads done. */
  async function startIdle() {
    health = { storage: 'read_write' }
    const { fetcher, calls } = fakeFetch({
      'GET /api/health': () => ({ ok: true, version: '1', ...health }),
      'POST /api/events/ticket': { ticket: 'ticket-1' },
      'GET /api/leases': () => ({ now: iso(Date.now()), leases: [] }),
      'GET /api/capacity': { total_units: 100, busy_rating: 0, busy_mode: 'auto', usable: 100, leased: 0, available: 100 },
      'GET /api/scheduler/jobs': { jobs: [], next_cursor: null },
      'GET /api/queues': { queues: [] },
      'GET /api/blockers': { blockers: [] },
      'GET /api/schedules': { schedules: [] },
      'GET /api/workers': { workers: [] },
      'GET /api/storage': { database_bytes: 1, file_bytes: 1, wal_bytes: 0, free_bytes: 0, auto_vacuum: 'incremental', retain_days: 7, stats_retain_days: 90, last_prune: null },
    })
    const sources: FakeSource[] = []
    const dashboard = new Dashboard(connection, { fetcher, openSource: (url) => sources[sources.push(new FakeSource(url)) - 1]! })
    dashboard.start()
    await vi.advanceTimersByTimeAsync(1000)
    sources[0]!.open() // with no event to resume after: every view is read again
    await vi.advanceTimersByTimeAsync(1000)
    const reads = (path: string) => calls.filter((c) => c.path === path).length
    return { dashboard, calls, stream: sources[0]!, reads }
  }

  test('asks nothing once it has read each view: no lease, no event, no request in a minute', async () => {
    const { dashboard, calls } = await startIdle()
    const first = calls.length
    await vi.advanceTimersByTimeAsync(60 * SECOND)
    expect(calls.slice(first).map((c) => c.path)).toEqual([])
    dashboard.stop()
  })

  test("the read-only banner follows the host's storage frames while the page is open: shown as the database goes, gone as writes resume, with no timer asking", async () => {
    const { dashboard, stream, reads } = await startIdle()
    const el = render(App, { dashboard })
    expect(el.querySelector('[data-testid="read-only"]')).toBeNull()
    const detail = 'The database file was deleted while the host ran; restart it'
    health = { storage: 'read_only', reason: 'database file deleted' }
    stream.emit('storage', { storage: 'read_only', reason: 'database file deleted', detail }, '')
    flushSync()
    expect(el.querySelector('[data-testid="read-only"]')?.textContent).toContain(detail)
    await vi.advanceTimersByTimeAsync(1000)
    health = { storage: 'read_write' }
    stream.emit('storage', { storage: 'read_write', reason: null, detail: null }, '')
    flushSync()
    expect(el.querySelector('[data-testid="read-only"]')).toBeNull()
    // Writable again: nothing more is asked of an idle host.
    await vi.advanceTimersByTimeAsync(10 * SECOND)
    const asked = reads('/api/health')
    await vi.advanceTimersByTimeAsync(60 * SECOND)
    expect(reads('/api/health')).toBe(asked)
    dashboard.stop()
  })

  test('reads on the events that change a view: capacity on a busy measurement, storage at most once a minute while events come', async () => {
    const { dashboard, stream, reads } = await startIdle()
    const [capacity, storage] = [reads('/api/capacity'), reads('/api/storage')]
    for (let id = 1; id <= 30; id++) {
      stream.emit('BUSY_MEASURED', event('BUSY_MEASURED', { id, job_id: null, entity_type: 'CAPACITY', entity_id: 'capacity', data: { busy_rating: id % 10 } }), String(id))
      await vi.advanceTimersByTimeAsync(4 * SECOND)
    }
    expect(reads('/api/capacity') - capacity).toBe(30)
    expect(reads('/api/storage') - storage).toBe(2) // two minutes of events
    dashboard.stop()
  })

  test("learns what Redis is from the stream's redis frames alone, asking nothing; a reopened stream forgets it until told again", async () => {
    const { dashboard, calls, stream } = await startIdle()
    expect(dashboard.redis.current).toBeNull() // no frame: no Redis
    const first = calls.length
    const url = 'redis://127.0.0.1:6379/0'
    stream.emit('redis', { url, connected: true, unanswered_ms: null, prefix: 'leasehold:', prefix_taken_by: null, refused: null, waiting: 0, oldest_wait_ms: null }, '')
    expect(dashboard.redis.away).toBe(false)
    stream.emit('redis', { url, connected: false, unanswered_ms: 2 * SECOND, prefix: 'leasehold:', prefix_taken_by: null, refused: null, waiting: 3, oldest_wait_ms: 2 * SECOND }, '')
    expect(dashboard.redis.away).toBe(true)
    expect(dashboard.redis.current?.waiting).toBe(3)
    await vi.advanceTimersByTimeAsync(10 * SECOND)
    dashboard.time.tick()
    // The oldest message's wait grows on the host's clock between frames.
    expect(dashboard.redis.oldestWaitMs(dashboard.time.now)).toBe(12 * SECOND)
    expect(calls.slice(first).map((c) => c.path)).toEqual([])
    expect(dashboard.stream.lastEventId).toBeNull() // a frame without an id moves no resume point
    stream.open()
    expect(dashboard.redis.current).toBeNull()
    dashboard.stop()
  })

  test('a Jobs view whose fragment names a filter (a reload, a link) reads the jobs it selects; one that names none keeps the filter in force', async () => {
    const { dashboard, calls } = await startIdle()
    dashboard.show(parseRoute('#/jobs?state=FAILED&type=sleep'))
    await vi.advanceTimersByTimeAsync(100)
    expect(dashboard.jobs.filter).toMatchObject({ state: 'FAILED', job_type: 'sleep' })
    expect(calls.at(-1)!.path).toMatch(/^\/api\/scheduler\/jobs\?.*state=FAILED.*job_type=sleep|^\/api\/scheduler\/jobs\?.*job_type=sleep.*state=FAILED/)
    dashboard.show(parseRoute('#/overview'))
    dashboard.show(parseRoute('#/jobs'))
    expect(dashboard.jobs.filter).toMatchObject({ state: 'FAILED', job_type: 'sleep' })
    dashboard.stop()
  })

  test("a link whose filter the page does not know says so in the Jobs view, until the filter is changed", async () => {
    const { dashboard } = await startIdle()
    dashboard.show(parseRoute('#/jobs?state=NOPE'))
    await vi.advanceTimersByTimeAsync(100)
    const el = render(JobsView, { jobs: dashboard.jobs, now: T0, bulk: dashboard.bulk })
    expect(el.querySelector('[data-testid="filter-unread"]')?.textContent).toContain('(state=NOPE)')
    await dashboard.jobs.setFilter({ state: 'FAILED' })
    flushSync()
    expect(el.querySelector('[data-testid="filter-unread"]')).toBeNull()
    dashboard.stop()
  })

  test('reads the workers on a timer only while their view is open (a heartbeat is not an event)', async () => {
    const { dashboard, reads } = await startIdle()
    const before = reads('/api/workers')
    dashboard.show({ view: 'workers', jobId: null })
    await vi.advanceTimersByTimeAsync(20 * SECOND)
    expect(reads('/api/workers') - before).toBeGreaterThanOrEqual(4)
    dashboard.show({ view: 'overview', jobId: null })
    const after = reads('/api/workers')
    await vi.advanceTimersByTimeAsync(20 * SECOND)
    expect(reads('/api/workers')).toBe(after)
    dashboard.stop()
  })
})

describe('a running job', () => {
  beforeEach(() => vi.useFakeTimers({ now: T0 }))
  afterEach(() => {
    vi.useRealTimers()
    Object.defineProperty(document, 'visibilityState', { value: 'visible', configurable: true })
  })

  /** A dashboard on a host where job-1 runs, its progress moving with heartbeats (no events), the stream live. */
  async function startRunning() {
    let shown = job({ state: 'RUNNING', progress: 0.1, note: 'starting' })
    const { fetcher, calls } = fakeFetch({
      'POST /api/events/ticket': { ticket: 'ticket-1' },
      'GET /api/scheduler/jobs': () => ({ jobs: [shown], next_cursor: null }),
      'GET /api/scheduler/jobs/job-1': () => ({ job: shown, result: null }),
      'GET /api/scheduler/jobs/job-1/attempts': { attempts: [] },
      'GET /api/scheduler/jobs/job-1/events': { events: [] },
    })
    const sources: FakeSource[] = []
    const dashboard = new Dashboard(connection, { fetcher, openSource: (url) => sources[sources.push(new FakeSource(url)) - 1]! })
    dashboard.start()
    await vi.advanceTimersByTimeAsync(100)
    sources[0]!.open()
    await vi.advanceTimersByTimeAsync(100)
    /** A heartbeat: the job's progress and note move on the host, and no event says so. */
    const beat = (progress: number, note: string, state: Job['state'] = 'RUNNING') => {
      shown = { ...shown, state, progress, note, updated_at: iso(Date.now()) }
    }
    const reads = (path: string) => calls.filter((c) => c.path === path).length
    return { dashboard, beat, reads, stream: sources[0]! }
  }

  test("its page reads it again every 2 s, so its progress and note move, and stops as it ends", async () => {
    const { dashboard, beat, reads } = await startRunning()
    dashboard.show(parseRoute('#/jobs/job-1'))
    await vi.advanceTimersByTimeAsync(100)
    expect(dashboard.detail!.job).toMatchObject({ progress: 0.1, note: 'starting' })
    beat(0.5, 'half way')
    await vi.advanceTimersByTimeAsync(2000)
    expect(dashboard.detail!.job).toMatchObject({ progress: 0.5, note: 'half way' })
    const before = reads('/api/scheduler/jobs/job-1')
    await vi.advanceTimersByTimeAsync(10_000)
    expect(reads('/api/scheduler/jobs/job-1') - before).toBe(5)
    // It ends: one more read shows it, then none.
    beat(1, 'done', 'DONE')
    await vi.advanceTimersByTimeAsync(2000)
    expect(dashboard.detail!.job!.state).toBe('DONE')
    const ended = reads('/api/scheduler/jobs/job-1')
    await vi.advanceTimersByTimeAsync(10_000)
    expect(reads('/api/scheduler/jobs/job-1')).toBe(ended)
    dashboard.stop()
  })

  test('the jobs table and the overview\'s recent jobs read their page again every 2 s while a row is RUNNING; another view does not', async () => {
    const { dashboard, beat, reads } = await startRunning()
    const page = (limit: number) => `/api/scheduler/jobs?payload=false&limit=${limit}`
    dashboard.show(parseRoute('#/jobs'))
    beat(0.7, 'most of it')
    await vi.advanceTimersByTimeAsync(2000)
    expect(dashboard.jobs.rows[0]).toMatchObject({ progress: 0.7, note: 'most of it' })
    dashboard.show(parseRoute('#/overview'))
    beat(0.8, 'nearly')
    await vi.advanceTimersByTimeAsync(2000)
    expect(dashboard.recent.rows[0]).toMatchObject({ progress: 0.8 })
    dashboard.show(parseRoute('#/schedules'))
    const [jobs, recent] = [reads(page(25)), reads(page(6))]
    await vi.advanceTimersByTimeAsync(10_000)
    expect([reads(page(25)), reads(page(6))]).toEqual([jobs, recent])
    dashboard.stop()
  })

  test('is read on no timer while the tab is hidden or the stream is not live', async () => {
    const { dashboard, reads, stream } = await startRunning()
    dashboard.show(parseRoute('#/jobs/job-1'))
    await vi.advanceTimersByTimeAsync(100)
    const before = reads('/api/scheduler/jobs/job-1')
    Object.defineProperty(document, 'visibilityState', { value: 'hidden', configurable: true })
    await vi.advanceTimersByTimeAsync(10_000)
    expect(reads('/api/scheduler/jobs/job-1')).toBe(before)
    Object.defineProperty(document, 'visibilityState', { value: 'visible', configurable: true })
    stream.fail(0)
    expect(dashboard.stream.status).toBe('reconnecting')
    await vi.advanceTimersByTimeAsync(10_000) // a fresh ticket, its stream not open yet
    expect(dashboard.stream.status).toBe('reconnecting')
    expect(reads('/api/scheduler/jobs/job-1')).toBe(before)
    dashboard.stop()
  })
})

describe('stores fed by the API and the stream', () => {
  test('the jobs table asks for its rows without payloads (payload=false), whatever its filter or page: it shows none, and one may be megabytes', async () => {
    const { fetcher, calls } = fakeFetch({
      'GET /api/scheduler/jobs?payload=false&limit=25': { jobs: [job({ job_id: 'b' })], next_cursor: 'c1' },
      'GET /api/scheduler/jobs?payload=false&limit=25&cursor=c1': { jobs: [job({ job_id: 'a' })], next_cursor: null },
      'GET /api/scheduler/jobs?job_type=big&dead_letter=true&payload=false&limit=25': { jobs: [], next_cursor: null },
    })
    const jobs = new JobsState(new ApiClient(connection, fetcher))
    await jobs.setFilter({})
    await jobs.nextPage()
    await jobs.setFilter({ job_type: 'big', dead_letter: true })
    expect(calls.length).toBe(3)
    for (const call of calls) expect(new URL(call.path, 'http://host').searchParams.get('payload'), call.path).toBe('false')
  })

  test('the jobs table pages by cursor and asks for the first page again on a new job', async () => {
    const { fetcher, calls } = fakeFetch({
      'GET /api/scheduler/jobs?state=QUEUED&payload=false&limit=25': { jobs: [job({ job_id: 'b' })], next_cursor: 'c1' },
      'GET /api/scheduler/jobs?state=QUEUED&payload=false&limit=25&cursor=c1': { jobs: [job({ job_id: 'a' })], next_cursor: null },
    })
    const jobs = new JobsState(new ApiClient(connection, fetcher))
    await jobs.setFilter({ state: 'QUEUED' })
    expect(jobs.rows.map((r) => r.job_id)).toEqual(['b'])
    expect([jobs.page, jobs.hasNext, jobs.hasPrevious]).toEqual([1, true, false])
    await jobs.nextPage()
    expect(jobs.rows.map((r) => r.job_id)).toEqual(['a'])
    expect([jobs.page, jobs.hasNext, jobs.hasPrevious]).toEqual([2, false, true])
    // Not on the first page: the rows move, no re-read.
    expect(jobs.apply(event('JOB_CLAIMED', { job_id: 'a', data: { state: 'CLAIMED' } }))).toBe(false)
    expect(jobs.rows[0]!.state).toBe('CLAIMED')
    await jobs.previousPage()
    expect(jobs.page).toBe(1)
    expect(jobs.apply(event('JOB_SUBMITTED', { job_id: 'new' }))).toBe(true)
    expect(calls.map((c) => c.path)).toEqual([
      '/api/scheduler/jobs?state=QUEUED&payload=false&limit=25',
      '/api/scheduler/jobs?state=QUEUED&payload=false&limit=25&cursor=c1',
      '/api/scheduler/jobs?state=QUEUED&payload=false&limit=25',
    ])
  })

  test('a job not yet on screen that moves while the read is on its way shows as its events left it once the read lands', async () => {
    let answer!: () => void
    const held = new Promise<void>((resolve) => (answer = resolve))
    const at = (seconds: number) => new Date(T0 + seconds * 1000).toISOString()
    const { fetcher } = fakeFetch({
      'GET /api/scheduler/jobs?payload=false&limit=25': async () => {
        await held // the host read the jobs at second 1; its answer comes after the events below
        return { jobs: [job({ job_id: 'ended', state: 'RUNNING', updated_at: at(1) }), job({ job_id: 'queued', state: 'QUEUED', updated_at: at(1) })], next_cursor: null }
      },
    })
    const jobs = new JobsState(new ApiClient(connection, fetcher))
    const read = jobs.refresh()
    jobs.apply(event('JOB_DONE', { job_id: 'ended', ts: at(2), data: { state: 'DONE', attempt: 1 } }))
    jobs.apply(event('JOB_SUBMITTED', { job_id: 'queued', ts: at(0), data: { state: 'QUEUED' } })) // older than the read: it changes nothing
    answer()
    await read
    expect(jobs.rows.map((row) => [row.job_id, row.state])).toEqual([
      ['ended', 'DONE'],
      ['queued', 'QUEUED'],
    ])
  })

  test("rows that move back to waiting (retried, requeued) in an unfiltered list have why they wait now read, once for the burst", async () => {
    vi.useFakeTimers({ now: T0 })
    try {
      const reason = 'first in line; waiting for a worker to take it'
      let ids = ['a', 'b', 'c']
      let answer = (id: string) => job({ job_id: id, state: 'CANCELED', updated_at: iso(T0) })
      const { fetcher, calls } = fakeFetch({
        'POST /api/events/ticket': { ticket: 'ticket-1' },
        'GET /api/scheduler/jobs': () => ({ jobs: ids.map(answer), next_cursor: null }),
      })
      const sources: FakeSource[] = []
      const dashboard = new Dashboard(connection, { fetcher, openSource: (url) => sources[sources.push(new FakeSource(url)) - 1]! })
      dashboard.start()
      await vi.advanceTimersByTimeAsync(1000)
      sources[0]!.open()
      await vi.advanceTimersByTimeAsync(1000)
      const reads = () => calls.filter((c) => c.path.startsWith('/api/scheduler/jobs')).length
      const before = reads()
      answer = (id: string) => job({ job_id: id, state: 'QUEUED', updated_at: iso(T0 + SECOND), waiting_reason: reason })
      ids.forEach((id, i) => sources[0]!.emit('JOB_RETRIED', event('JOB_RETRIED', { id: 10 + i, job_id: id, ts: iso(T0 + SECOND), data: { state: 'QUEUED' } }), String(10 + i)))
      await vi.advanceTimersByTimeAsync(1000)
      expect(dashboard.jobs.rows.map((r) => [r.state, r.waiting_reason])).toEqual(ids.map(() => ['QUEUED', reason]))
      expect(dashboard.recent.rows.map((r) => r.waiting_reason)).toEqual(ids.map(() => reason))
      expect(reads() - before).toBe(2) // the Jobs view's list and the Overview's, once each
      // A move between two states that are not waiting reads nothing.
      ids = ['a']
      const after = reads()
      sources[0]!.emit('LEASE_GRANTED', event('LEASE_GRANTED', { id: 20, job_id: 'a', entity_type: 'LEASE', entity_id: 'l-a', ts: iso(T0 + 2 * SECOND), data: { state: 'LEASED', attempt: 1 } }), '20')
      sources[0]!.emit('JOB_DONE', event('JOB_DONE', { id: 21, job_id: 'a', ts: iso(T0 + 3 * SECOND), data: { state: 'DONE', attempt: 1 } }), '21')
      await vi.advanceTimersByTimeAsync(1000)
      expect(dashboard.jobs.rows.find((r) => r.job_id === 'a')!.state).toBe('DONE')
      expect(reads() - after).toBe(0)
      dashboard.stop()
    } finally {
      vi.useRealTimers()
    }
  })

  test("a queue paused or resumed reads again the jobs lists and an open job's page, so their waiting lines say why the jobs wait now", async () => {
    vi.useFakeTimers({ now: T0 })
    try {
      let reason = 'first in line; waiting for a worker to take it'
      const queued = () => job({ job_id: 'q1', waiting_reason: reason })
      const { fetcher, calls } = fakeFetch({
        'POST /api/events/ticket': { ticket: 'ticket-1' },
        'GET /api/scheduler/jobs': () => ({ jobs: [queued()], next_cursor: null }),
        'GET /api/scheduler/jobs/q1': () => ({ job: queued(), result: null }),
        'GET /api/scheduler/jobs/q1/attempts': { attempts: [] },
        'GET /api/scheduler/jobs/q1/events': { events: [] },
      })
      const sources: FakeSource[] = []
      const dashboard = new Dashboard(connection, { fetcher, openSource: (url) => sources[sources.push(new FakeSource(url)) - 1]! })
      dashboard.start()
      dashboard.show({ view: 'job', jobId: 'q1' })
      await vi.advanceTimersByTimeAsync(1000)
      sources[0]!.open()
      sources[0]!.emit('JOB_SUBMITTED', event('JOB_SUBMITTED', { id: 1, job_id: 'q1' }), '1')
      await vi.advanceTimersByTimeAsync(1000)
      expect(dashboard.jobs.rows[0]!.waiting_reason).toBe(reason)
      const reads = () => calls.filter((c) => c.path.startsWith('/api/scheduler/jobs')).length
      const before = reads()

      reason = 'queue default is paused; nothing is taken from it until it is resumed'
      const pause = { job_id: null, entity_type: 'QUEUE', entity_id: 'default', data: { queue: 'default', requested_by: 'cli' } } as const
      sources[0]!.emit('QUEUE_PAUSED', event('QUEUE_PAUSED', { id: 2, ...pause }), '2')
      await vi.advanceTimersByTimeAsync(1000)
      expect(dashboard.jobs.rows[0]!.waiting_reason).toBe(reason)
      expect(dashboard.detail!.job!.waiting_reason).toBe(reason)
      expect(dashboard.detail!.events.map((e) => e.type)).not.toContain('QUEUE_PAUSED') // not an event of the job
      expect(dashboard.recent.rows[0]!.waiting_reason).toBe(reason)
      expect(reads() - before).toBe(5) // the Jobs view's list, the Overview's, and the job with its attempts and events

      reason = 'first in line; waiting for a worker to take it'
      sources[0]!.emit('QUEUE_RESUMED', event('QUEUE_RESUMED', { id: 3, ...pause }), '3')
      await vi.advanceTimersByTimeAsync(1000)
      expect(dashboard.jobs.rows[0]!.waiting_reason).toBe(reason)
      expect(dashboard.detail!.job!.waiting_reason).toBe(reason)
      dashboard.stop()
    } finally {
      vi.useRealTimers()
    }
  })

  test("after a drop, each part whose last read failed reads again as the stream resumes, so its error goes at once; an action's error goes too", async () => {
    vi.useFakeTimers({ now: T0 })
    try {
      let up = true
      const { fetcher, calls } = fakeFetch({
        'POST /api/events/ticket': { ticket: 'ticket-1' },
        'GET /api/capacity': { total_units: 100, busy_rating: 0, busy_mode: 'auto', usable: 100, leased: 0, available: 100 },
        'GET /api/scheduler/jobs': { jobs: [job({ job_id: 'q1' })], next_cursor: null },
        'GET /api/storage': { database_bytes: 1, file_bytes: 1, wal_bytes: 0, free_bytes: 0, auto_vacuum: 'incremental', retain_days: 7, stats_retain_days: 90, last_prune: null },
        'GET /api/health': { storage: 'ok' },
      })
      const sources: FakeSource[] = []
      const dashboard = dashboardOfHostThatGoes(fetcher, () => up, sources)
      dashboard.start()
      await vi.advanceTimersByTimeAsync(1000)
      sources[0]!.open()
      sources[0]!.emit('JOB_SUBMITTED', event('JOB_SUBMITTED', { id: 1, job_id: 'q1' }), '1')
      await vi.advanceTimersByTimeAsync(1000)
      expect(dashboard.storage.error).toBeNull()

      // The host goes away: the storage read and a row's Cancel fail, and the stream drops.
      up = false
      await dashboard.storage.refresh()
      await dashboard.jobs.cancel('q1')
      expect(dashboard.storage.error).toBe('The host does not answer')
      expect(dashboard.jobs.rowErrors).toEqual({ q1: 'The host does not answer' })
      sources[0]!.fail(0)
      // Back: the fresh ticket reopens the stream after event 1, and what failed reads again.
      up = true
      const capacityReads = calls.filter((c) => c.path === '/api/capacity').length
      await vi.advanceTimersByTimeAsync(reconnectDelayMs(1))
      sources[1]!.open()
      await vi.advanceTimersByTimeAsync(0)
      expect(dashboard.storage.error).toBeNull()
      expect(dashboard.jobs.rowErrors).toEqual({})
      expect(calls.filter((c) => c.path === '/api/capacity').length).toBe(capacityReads) // it read well: not again
      dashboard.stop()
    } finally {
      vi.useRealTimers()
    }
  })

  test('a part whose read failed while the stream stays open reads again by itself, 1 s, 2 s, 4 s … apart, and its error and stale rows go as the host answers', async () => {
    vi.useFakeTimers({ now: T0 })
    try {
      let up = true
      let state: Job['state'] = 'RUNNING'
      const { fetcher } = fakeFetch({
        'POST /api/events/ticket': { ticket: 'ticket-1' },
        'GET /api/scheduler/jobs': () => ({ jobs: [job({ job_id: 'q1', state, updated_at: iso(state === 'DONE' ? T0 + 3 * SECOND : T0) })], next_cursor: null }),
      })
      const asked: string[] = [] // every request, answered or not
      const offline = async (request: Request) => {
        asked.push(new URL(request.url).pathname + new URL(request.url).search)
        if (!up) throw new TypeError('Failed to fetch')
        return fetcher(request)
      }
      const sources: FakeSource[] = []
      const dashboard = new Dashboard(connection, { fetcher: offline, openSource: (url) => sources[sources.push(new FakeSource(url)) - 1]! })
      dashboard.start()
      await vi.advanceTimersByTimeAsync(1000)
      sources[0]!.open()
      await vi.advanceTimersByTimeAsync(1000)
      expect(dashboard.stream.status).toBe('live')

      // The requests fail (the browser offline), the stream stays up; the job ends meanwhile.
      up = false
      await dashboard.jobs.refresh()
      expect(dashboard.jobs.error).toBe('The host does not answer')
      state = 'DONE'
      const reads = () => asked.filter((path) => path === '/api/scheduler/jobs?payload=false&limit=25').length // the Jobs view's (the Overview's is read again too)
      const before = reads()
      await vi.advanceTimersByTimeAsync(2000)
      expect(reads()).toBe(before + 1) // read again, and failed again: the next read waits 2 s
      await vi.advanceTimersByTimeAsync(1000)
      expect(reads()).toBe(before + 1)
      await vi.advanceTimersByTimeAsync(1000)
      expect(reads()).toBe(before + 2)
      expect(dashboard.jobs.error).toBe('The host does not answer')

      up = true
      await vi.advanceTimersByTimeAsync(4000)
      expect(dashboard.jobs.error).toBeNull()
      expect(dashboard.jobs.rows.map((row) => row.state)).toEqual(['DONE'])
      // Read well: no more reads without a reason.
      const after = reads()
      await vi.advanceTimersByTimeAsync(30_000)
      expect(reads()).toBe(after)
      expect(sources).toHaveLength(1) // the stream never dropped
      dashboard.stop()
    } finally {
      vi.useRealTimers()
    }
  })

  test("a row action's answer from before a drop goes as the stream opens again, also when no event came before it (the stream reopens from the host's present)", async () => {
    vi.useFakeTimers({ now: T0 })
    try {
      let up = true
      const { fetcher } = fakeFetch({
        'POST /api/events/ticket': { ticket: 'ticket-1' },
        'GET /api/scheduler/jobs': { jobs: [job({ job_id: 'q1' })], next_cursor: null },
        'GET /api/queues': { queues: [] },
      })
      const sources: FakeSource[] = []
      const dashboard = dashboardOfHostThatGoes(fetcher, () => up, sources)
      dashboard.start()
      await vi.advanceTimersByTimeAsync(1000)
      sources[0]!.open()
      await vi.advanceTimersByTimeAsync(1000)

      // An idle host goes away: no event came, so the stream has nothing to resume after.
      up = false
      await dashboard.jobs.cancel('q1')
      await dashboard.recent.cancel('q1')
      await dashboard.queues.setPaused('default', true)
      expect(dashboard.jobs.rowErrors).toEqual({ q1: 'The host does not answer' })
      sources[0]!.fail(0)
      up = true
      await vi.advanceTimersByTimeAsync(reconnectDelayMs(1))
      expect(dashboard.stream.lastEventId).toBeNull()
      sources[1]!.open()
      await vi.advanceTimersByTimeAsync(0)
      expect(dashboard.stream.status).toBe('live')
      expect(dashboard.jobs.rowErrors).toEqual({})
      expect(dashboard.recent.rowErrors).toEqual({})
      expect(dashboard.queues.failures).toEqual({})
      dashboard.stop()
    } finally {
      vi.useRealTimers()
    }
  })

  test("the Overview lists the newest jobs whatever the Jobs view's filter or page, and a new job joins them", async () => {
    vi.useFakeTimers({ now: T0 })
    try {
      let newest: Job[] = ['n3', 'n2', 'n1'].map((job_id) => job({ job_id }))
      const { fetcher } = fakeFetch({
        'POST /api/events/ticket': { ticket: 'ticket-1' },
        'GET /api/scheduler/jobs?payload=false&limit=6': () => ({ jobs: newest, next_cursor: null }),
        'GET /api/scheduler/jobs?payload=false&limit=25': () => ({ jobs: newest, next_cursor: null }),
        'GET /api/scheduler/jobs?state=FAILED&payload=false&limit=25': { jobs: [job({ job_id: 'f1', state: 'FAILED' })], next_cursor: 'c1' },
        'GET /api/scheduler/jobs?state=FAILED&payload=false&limit=25&cursor=c1': { jobs: [job({ job_id: 'f0', state: 'FAILED' })], next_cursor: null },
      })
      const sources: FakeSource[] = []
      const dashboard = new Dashboard(connection, { fetcher, openSource: (url) => sources[sources.push(new FakeSource(url)) - 1]! })
      dashboard.start()
      await vi.advanceTimersByTimeAsync(1000)
      sources[0]!.open()
      await vi.advanceTimersByTimeAsync(1000)
      // The Jobs view filtered to FAILED, on its second page.
      await dashboard.jobs.setFilter({ state: 'FAILED' })
      await dashboard.jobs.nextPage()
      expect(dashboard.jobs.rows.map((r) => r.job_id)).toEqual(['f0'])

      dashboard.show({ view: 'overview', jobId: null })
      const el = render(OverviewView, { dashboard })
      const recent = () => [...el.querySelectorAll('[data-testid="jobs"] tbody tr')].map((row) => row.getAttribute('data-job'))
      expect(el.querySelector('#recent-heading')?.textContent).toBe('Recent jobs')
      expect(recent()).toEqual(['n3', 'n2', 'n1'])

      newest = [job({ job_id: 'n4' }), ...newest]
      sources[0]!.emit('JOB_SUBMITTED', event('JOB_SUBMITTED', { id: 1, job_id: 'n4', data: { state: 'QUEUED' } }), '1')
      await vi.advanceTimersByTimeAsync(1000)
      flushSync()
      expect(recent()).toEqual(['n4', 'n3', 'n2', 'n1'])
      expect(dashboard.jobs.rows.map((r) => r.job_id)).toEqual(['f0']) // the Jobs view keeps its page
      dashboard.stop()
    } finally {
      unmountAll()
      vi.useRealTimers()
    }
  })

  test('a blocker answer is sent with its note and the report moves to resolved', async () => {
    const open = { blocker_id: 'b1', state: 'OPEN', file: '/f', requester: { owner_id: 'o', job_id: null, lease_id: null } }
    const { fetcher, calls } = fakeFetch({
      'GET /api/blockers': { blockers: [open] },
      'POST /api/blockers/b1/resolve': (body) => ({ blocker: { ...open, state: 'RESOLVED', resolution: (body as { action: string }).action }, job_state: 'QUEUED' }),
    })
    const blockers = new BlockersState(new ApiClient(connection, fetcher))
    await blockers.refresh()
    expect(blockers.open).toHaveLength(1)
    expect(await blockers.resolve('b1', 'force_release', '  it is stuck ')).toBe(true)
    expect(calls.at(-1)).toMatchObject({ method: 'POST', body: { action: 'force_release', note: 'it is stuck', by: 'dashboard' } })
    expect(blockers.open).toHaveLength(0)
    expect(blockers.resolved[0]).toMatchObject({ resolution: 'force_release' })
    expect(BlockersState.moves(event('BLOCKER_OPENED'))).toBe(true)
    expect(BlockersState.moves(event('JOB_DONE'))).toBe(false)
  })

  test('a refused token (401) asks for a token; a typed one is used from then on', async () => {
    let accepted = 'right'
    const { fetcher, calls } = fakeFetch({})
    const guarded = async (request: Request) => {
      const token = request.headers.get('authorization')
      if (token !== `Bearer ${accepted}`) return new Response(JSON.stringify({ code: 'unauthorized', detail: 'no' }), { status: 401 })
      return fetcher(request)
    }
    const dashboard = new Dashboard({ ...connection, token: 'wrong' }, { fetcher: guarded, openSource: (url) => new FakeSource(url) })
    await dashboard.capacity.refresh()
    expect(dashboard.auth).toBe('rejected')
    dashboard.useToken('  right ')
    expect(dashboard.auth).toBe('ok')
    expect(dashboard.api.connection.token).toBe('right')
    await vi.waitFor(() => expect(calls.length).toBeGreaterThan(0))
    dashboard.stop()
    accepted = ''
  })

  test("a worker token (the host refuses it on the dashboard's routes, saying so) asks for the host's token as a worker token, not as a wrong one", async () => {
    const refused = async () => new Response(JSON.stringify({ code: 'unauthorized', detail: WORKER_TOKEN_REFUSAL }), { status: 401 })
    const dashboard = new Dashboard({ ...connection, token: 'worker-token' }, { fetcher: refused, openSource: (url) => new FakeSource(url) })
    await dashboard.capacity.refresh()
    expect(dashboard.auth).toBe('worker')
    const other = new Dashboard({ ...connection, token: 'stale' }, { fetcher: async () => new Response(JSON.stringify({ code: 'unauthorized', detail: 'A valid Authorization: Bearer token is required' }), { status: 401 }) })
    await other.capacity.refresh()
    expect(other.auth).toBe('rejected')
  })

  test('a #token= link pasted into the open tab is taken as at the first load: kept, out of the address bar, and the stream reconnects with it', async () => {
    const { fetcher } = fakeFetch({ 'POST /api/events/ticket': { ticket: 'ticket-1' } })
    const tokens: string[] = []
    const seen = async (request: Request) => {
      if (request.url.endsWith('/api/events/ticket')) tokens.push(request.headers.get('authorization') ?? '')
      return fetcher(request)
    }
    const sources: FakeSource[] = []
    const dashboard = new Dashboard({ apiBase: location.origin, token: 'old' }, { fetcher: seen, openSource: (url) => sources[sources.push(new FakeSource(url)) - 1]!, saveToken: storeToken })
    const stopFollowing = followTokenLinks((token) => dashboard.useToken(token))
    try {
      dashboard.start()
      await vi.waitFor(() => expect(sources).toHaveLength(1))
      sources[0]!.open()
      location.hash = '#token=new-token'
      window.dispatchEvent(new HashChangeEvent('hashchange'))
      expect(sessionStorage.getItem('leasehold.token')).toBe('new-token')
      expect(location.href).not.toContain('new-token')
      expect(dashboard.api.connection.token).toBe('new-token')
      expect(sources[0]!.closed).toBe(true)
      await vi.waitFor(() => expect(sources).toHaveLength(2))
      expect(tokens).toEqual(['Bearer old', 'Bearer new-token'])
      // A fragment without a token (a view) is no token.
      location.hash = '#/jobs'
      window.dispatchEvent(new HashChangeEvent('hashchange'))
      expect(dashboard.api.connection.token).toBe('new-token')
      expect(sources).toHaveLength(2)
    } finally {
      stopFollowing()
      dashboard.stop()
      sessionStorage.clear()
    }
  })

  test('no answer at all shows the host as unreachable until one comes', async () => {
    let up = false
    const fetcher = async () => {
      if (!up) throw new TypeError('fetch failed')
      return new Response(JSON.stringify({ total_units: 10, busy_rating: 0, busy_mode: 'manual', usable: 10, leased: 0, available: 10 }), { status: 200 })
    }
    const dashboard = new Dashboard(connection, { fetcher })
    await dashboard.capacity.refresh()
    expect(dashboard.unreachable).toBe(true)
    expect(dashboard.capacity.error).toBe('The host does not answer')
    up = true
    await dashboard.capacity.refresh()
    expect(dashboard.unreachable).toBe(false)
    expect(dashboard.capacity.bar).toMatchObject({ free: 1 })
  })

  test('an address that names no job (a broken escape, an id longer than any) shows "No job …" without asking the host, never the job shown before', async () => {
    const { fetcher, calls } = fakeFetch({
      'GET /api/scheduler/jobs/job-1': { job: job({ state: 'RUNNING' }), result: null },
      'GET /api/scheduler/jobs/job-1/attempts': { attempts: [] },
      'GET /api/scheduler/jobs/job-1/events': { events: [] },
    })
    const dashboard = new Dashboard(connection, { fetcher })
    try {
      dashboard.show(parseRoute('#/jobs/job-1'))
      const el = render(App, { dashboard })
      await vi.waitFor(() => expect(el.querySelector('[data-testid="job-detail"]')).not.toBeNull())
      const asked = calls.length
      for (const [hash, shown] of [['#/jobs/%FF', '%FF'], [`#/jobs/${'x'.repeat(250)}`, 'x'.repeat(250)]] as const) {
        dashboard.show(parseRoute(hash))
        flushSync()
        expect(el.querySelector('[data-testid="job-detail"]'), hash).toBeNull()
        expect(el.querySelector('button.danger'), hash).toBeNull()
        expect(el.querySelector('main')!.textContent!.trim()).toBe(`← All jobs No job ${shown}.`)
      }
      expect(calls.length).toBe(asked)
    } finally {
      unmountAll()
      dashboard.stop()
    }
  })

  test('a navigation badge says what it counts: its link is named "Queues, 1 paused", "Blockers, 2 open", the tab\'s own word first', () => {
    const dashboard = new Dashboard(connection, { fetcher: fakeFetch({}).fetcher })
    try {
      dashboard.queues.queues = [{ queue: 'reports', paused: true, paused_at: iso(T0), paused_by: 'dashboard', counts: {} }]
      dashboard.blockers.all = [{ state: 'OPEN' }, { state: 'OPEN' }, { state: 'RESOLVED' }] as Blocker[]
      const el = render(App, { dashboard })
      const names = [...el.querySelectorAll('nav a')].map((a) => a.getAttribute('aria-label') ?? text(a))
      expect(names).toEqual(['Overview', 'Jobs', 'Schedules', 'Queues, 1 paused', 'Blockers, 2 open', 'Workers', 'Charts'])
    } finally {
      unmountAll()
    }
  })

  test('without a token nothing is called', () => {
    const { fetcher, calls } = fakeFetch({})
    const dashboard = new Dashboard(null, { fetcher })
    dashboard.start()
    expect(dashboard.auth).toBe('missing')
    expect(calls).toEqual([])
  })
})
