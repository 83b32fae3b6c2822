// @vitest-environment happy-dom
import { flushSync } from 'svelte'
import { afterEach, expect, test, vi } from 'vitest'
import BlockerCard from '../../src-renderer/components/BlockerCard.svelte'
import BlockersView from '../../src-renderer/components/BlockersView.svelte'
import CapacityPanel from '../../src-renderer/components/CapacityPanel.svelte'
import JobDetailView from '../../src-renderer/components/JobDetailView.svelte'
import JobsTable from '../../src-renderer/components/JobsTable.svelte'
import JobsView from '../../src-renderer/components/JobsView.svelte'
import LeasesTable from '../../src-renderer/components/LeasesTable.svelte'
import RedisBanner from '../../src-renderer/components/RedisBanner.svelte'
import StoragePanel from '../../src-renderer/components/StoragePanel.svelte'
import TokenForm from '../../src-renderer/components/TokenForm.svelte'
import WaitingLine from '../../src-renderer/components/WaitingLine.svelte'
import WorkersView from '../../src-renderer/components/WorkersView.svelte'
import { ApiClient, type Blocker, type RedisHealth } from '../../src-renderer/lib/api'
import { BlockersState } from '../../src-renderer/lib/blockers.svelte'
import { BulkState } from '../../src-renderer/lib/bulk.svelte'
import { CapacityState } from '../../src-renderer/lib/capacity.svelte'
import { JobDetailState } from '../../src-renderer/lib/job-detail.svelte'
import { JobsState } from '../../src-renderer/lib/jobs.svelte'
import type { LeaseRow } from '../../src-renderer/lib/lease-events'
import { RedisState } from '../../src-renderer/lib/redis.svelte'
import { READ_ONLY_POLL_MS, StorageState } from '../../src-renderer/lib/storage.svelte'
import { formatClock } from '../../src-renderer/lib/time-format'
import { WorkersState } from '../../src-renderer/lib/workers.svelte'
import { event, fakeFetch, iso, job, render, SECOND, T0, text, typeText, unmountAll } from './support'

afterEach(unmountAll)

test('the leases table counts down to expiry, shows the job type and heartbeat age, and marks an expired lease', () => {
  const lease = (lease_id: string, ended: LeaseRow['ended'] = null): LeaseRow => ({
    lease_id,
    job_id: `${lease_id}-job-0000`,
    job_type: lease_id === 'l1' ? 'sleep' : null,
    addon_id: lease_id === 'l1' ? 'visuals' : null,
    worker_id: 'local-1.1',
    cost_units: 10,
    granted_at: T0,
    expires_at: T0 + 35 * SECOND,
    last_heartbeat_at: T0 + 2 * SECOND,
    ended,
  })
  const el = render(LeasesTable, { rows: [lease('l1'), lease('l2', { how: 'expired', at: T0 })], now: T0 + 10_500 })
  const rows = el.querySelectorAll('tbody tr')
  expect(rows).toHaveLength(2)
  expect(text(rows[0]!.querySelector('.countdown'))).toBe('0:25')
  expect(text(rows[0])).toContain('8 s ago')
  expect(text(rows[0])).toContain('sleep · visuals')
  expect(rows[1]!.classList.contains('expired')).toBe(true)
  expect(text(rows[1]!.querySelector('.countdown'))).toBe('expired')
  // A type with outer spaces shows them, marked.
  const padded = render(LeasesTable, { rows: [{ ...lease('l1'), job_type: ' padded ' }], now: T0 })
  expect(padded.querySelector('[data-spaces]')!.getAttribute('data-spaces')).toBe('begins with a space and ends with a space')
})

test('no leases: an empty state, not an empty table', () => {
  const el = render(LeasesTable, { rows: [], now: T0 })
  expect(el.querySelector('table')).toBeNull()
  expect(text(el.querySelector('[data-testid="leases-empty"]'))).toContain('No active leases')
})

test('the job page lists the attempts the host reports, each with worker, times, outcome, disposition and error; the timeline stays', async () => {
  const attempt = (n: number, fields: Record<string, unknown>) => ({
    attempt_id: `att-${n}`,
    attempt: n,
    worker_id: `w${n}`,
    lease_id: `lease-${n}`,
    started_at: iso(T0 + n * 60 * SECOND),
    finished_at: null,
    outcome: null,
    disposition: null,
    error: null,
    ...fields,
  })
  const { fetcher, calls } = fakeFetch({
    'GET /api/scheduler/jobs/job-1': { job: job({ state: 'RUNNING', attempts: 3 }), result: null },
    'GET /api/scheduler/jobs/job-1/attempts': {
      attempts: [
        attempt(1, {
          finished_at: iso(T0 + 72 * SECOND),
          outcome: 'TIMEOUT',
          disposition: 'REQUEUED',
          error: { code: 'lease_expired', message: 'The lease expired without a heartbeat' },
        }),
        attempt(2, { finished_at: iso(T0 + 125 * SECOND), outcome: 'FAILED', disposition: 'REQUEUED', error: { code: 'E_IO', message: 'disk full', retryable: true } }),
        attempt(3, {}),
      ],
    },
    // The events would tell of other attempts: the page shows the host's.
    'GET /api/scheduler/jobs/job-1/events': {
      events: [
        event('JOB_SUBMITTED', { data: { state: 'QUEUED' } }),
        event('LEASE_GRANTED', { entity_type: 'LEASE', entity_id: 'lease-x', data: { attempt: 9, worker_id: 'ghost' } }),
      ],
    },
  })
  const detail = new JobDetailState(new ApiClient({ apiBase: 'http://127.0.0.1:1', token: 't' }, fetcher), 'job-1')
  await detail.refresh()
  expect(calls.map((c) => c.path)).toContain('/api/scheduler/jobs/job-1/attempts')
  const el = render(JobDetailView, { detail, now: T0 + 200 * SECOND })
  const rows = [...el.querySelectorAll('[data-testid="attempts"] tbody tr')]
  expect(rows.map((r) => r.getAttribute('data-attempt'))).toEqual(['1', '2', '3'])
  const cell = (row: Element, id: string) => text(row.querySelector(`[data-testid="${id}"]`))
  expect(text(rows[0]!.children[1])).toBe('w1')
  expect(text(rows[0]!.children[2])).toBe(formatClock(T0 + 60 * SECOND, T0 + 60 * SECOND))
  expect(text(rows[0]!.children[3])).toMatch(/ after 12 s$/)
  expect([cell(rows[0]!, 'attempt-outcome'), cell(rows[0]!, 'attempt-disposition'), cell(rows[0]!, 'attempt-error')]).toEqual([
    'TIMEOUT',
    'requeued',
    'lease_expired The lease expired without a heartbeat',
  ])
  expect(rows[1]!.querySelector('[data-testid="attempt-error"] code')!.textContent).toBe('E_IO')
  expect(cell(rows[1]!, 'attempt-error')).toBe('E_IO disk full')
  expect([cell(rows[2]!, 'attempt-outcome'), cell(rows[2]!, 'attempt-disposition'), cell(rows[2]!, 'attempt-error')]).toEqual(['RUNNING', '—', '—'])
  expect(text(rows[2]!.children[3])).toBe('running for 20 s')
  expect(text(el.querySelector('[data-testid="attempts"]'))).not.toContain('ghost')
  expect(text(el.querySelector('[data-testid="timeline"]'))).toContain('LEASE_GRANTED')
})

test("an attempt's long error shows clipped to two lines (broken at any character) that open it whole, so that three attempts of the same dump stay rows of a line or two", async () => {
  const dump = 'x'.repeat(2100)
  const failed = (n: number) => ({ attempt_id: `att-${n}`, attempt: n, lease_id: `lease-${n}`, worker_id: 'w1', started_at: iso(T0), finished_at: iso(T0 + SECOND), outcome: 'FAILED', disposition: n < 3 ? 'REQUEUED' : 'DEAD_LETTERED', error: { code: 'E_DUMP', message: dump } })
  const { fetcher } = fakeFetch({
    'GET /api/scheduler/jobs/job-1': { job: job({ state: 'FAILED', attempts: 3 }), result: null },
    'GET /api/scheduler/jobs/job-1/attempts': { attempts: [failed(1), failed(2), failed(3), { ...failed(4), error: { code: 'E_IO', message: 'disk full' } }] },
    'GET /api/scheduler/jobs/job-1/events': { events: [], next_cursor: null },
  })
  const detail = new JobDetailState(new ApiClient({ apiBase: 'http://127.0.0.1:1', token: 't' }, fetcher), 'job-1')
  await detail.refresh()
  const el = render(JobDetailView, { detail, now: T0 })
  const cells = [...el.querySelectorAll('[data-testid="attempt-error"]')]
  for (const cell of cells.slice(0, 3)) {
    const whole = cell.querySelector('details')!
    expect(whole.open).toBe(false)
    expect(whole.querySelector('summary .clipped')!.textContent).toBe(dump)
    expect(whole.querySelector('summary code')!.textContent).toBe('E_DUMP')
    expect(whole.querySelector('[data-testid="attempt-error-whole"]')!.textContent).toBe(dump)
  }
  // A short one is shown as it is.
  expect(cells[3]!.querySelector('details')).toBeNull()
  expect(text(cells[3])).toBe('E_IO disk full')
})

test('a job that succeeded returning nothing (null) says so under its Result heading, rather than show an empty one', async () => {
  const page = async (result_data: unknown) => {
    const { fetcher } = fakeFetch({
      'GET /api/scheduler/jobs/job-1': { job: job({ state: 'DONE', attempts: 1 }), result: { status: 'SUCCEEDED', result_data, error: null } },
      'GET /api/scheduler/jobs/job-1/attempts': { attempts: [] },
      'GET /api/scheduler/jobs/job-1/events': { events: [], next_cursor: null },
    })
    const detail = new JobDetailState(new ApiClient({ apiBase: 'http://127.0.0.1:1', token: 't' }, fetcher), 'job-1')
    await detail.refresh()
    return render(JobDetailView, { detail, now: T0 })
  }
  const none = await page(null)
  expect(text(none.querySelector('[data-testid="job-result-none"]'))).toBe('It returned nothing.')
  expect(none.querySelector('[data-testid="job-result"]')).toBeNull()
  const some = await page({ rows: 3 })
  expect(some.querySelector('[data-testid="job-result-none"]')).toBeNull()
  expect(text(some.querySelector('[data-testid="job-result"]'))).toContain('"rows": 3')
})

test("a failed job's page shows its stack line by line, and times in the timeline as clock times, not epoch milliseconds", async () => {
  const stack = ['Error: disk on fire', ...Array.from({ length: 30 }, (_, i) => `    at step${i} (/very/long/path/${'x'.repeat(120)}/module${i}.mjs:${i}:7)`)].join('\n')
  const expires = T0 + 35 * SECOND
  const { fetcher } = fakeFetch({
    'GET /api/scheduler/jobs/job-1': { job: job({ state: 'FAILED', attempts: 1 }), result: { status: 'FAILED', result_data: null, error: { code: 'E_FIRE', message: 'disk on fire', stack } } },
    'GET /api/scheduler/jobs/job-1/attempts': { attempts: [] },
    'GET /api/scheduler/jobs/job-1/events': {
      events: [event('LEASE_GRANTED', { entity_type: 'LEASE', entity_id: 'lease-1', data: { attempt: 1, worker_id: 'local-1.1', expires_at: expires, fence: 3 } })],
    },
  })
  const detail = new JobDetailState(new ApiClient({ apiBase: 'http://127.0.0.1:1', token: 't' }, fetcher), 'job-1')
  await detail.refresh()
  const el = render(JobDetailView, { detail, now: T0 + 40 * SECOND })
  const shown = el.querySelector('[data-testid="job-error"]')!.textContent!
  expect(shown).toContain('"code": "E_FIRE"')
  expect(shown).not.toContain('\\n') // the stack is not squeezed into a JSON string
  expect(shown.split('\n')).toEqual(expect.arrayContaining(stack.split('\n')))
  const timeline = text(el.querySelector('[data-testid="timeline"]'))!
  expect(timeline).not.toContain(String(expires))
  expect(timeline).toContain(`expires_at=${formatClock(expires, T0 + 40 * SECOND)}`)
  expect(timeline).toContain('fence=3')
})

test("a long timeline shows its newest events and an 'Earlier events' button that reads the page before; a refresh keeps the earlier events read", async () => {
  const [submitted, claimed, granted, note1, note2] = [
    event('JOB_SUBMITTED', { data: { state: 'QUEUED' } }),
    event('JOB_CLAIMED', { data: { worker_id: 'w' } }),
    event('LEASE_GRANTED', { entity_type: 'LEASE', entity_id: 'lease-1', data: { attempt: 1 } }),
    event('JOB_STATUS', { data: { note: 'one' } }),
    event('JOB_STATUS', { data: { note: 'two' } }),
  ]
  const { fetcher, calls } = fakeFetch({
    'GET /api/scheduler/jobs/job-1': { job: job({ state: 'RUNNING', attempts: 1 }), result: null },
    'GET /api/scheduler/jobs/job-1/attempts': { attempts: [] },
    'GET /api/scheduler/jobs/job-1/events': { events: [note1, note2], next_cursor: 'before-note1' },
    'GET /api/scheduler/jobs/job-1/events?cursor=before-note1': { events: [claimed, granted], next_cursor: 'before-claimed' },
    'GET /api/scheduler/jobs/job-1/events?cursor=before-claimed': { events: [submitted], next_cursor: null },
  })
  const detail = new JobDetailState(new ApiClient({ apiBase: 'http://127.0.0.1:1', token: 't' }, fetcher), 'job-1')
  await detail.refresh()
  const el = render(JobDetailView, { detail, now: T0 })
  const types = () => [...el.querySelectorAll('[data-testid="timeline"] li strong')].map((s) => s.textContent)
  const earlier = () => [...el.querySelectorAll('button')].find((b) => b.textContent === 'Earlier events')
  expect(types()).toEqual(['JOB_STATUS', 'JOB_STATUS'])
  earlier()!.click()
  await vi.waitFor(() => expect(types()).toEqual(['JOB_STATUS', 'JOB_STATUS', 'LEASE_GRANTED', 'JOB_CLAIMED']))
  await detail.refresh() // the newest page again: the earlier events stay, and so does where they end
  flushSync()
  expect(types()).toEqual(['JOB_STATUS', 'JOB_STATUS', 'LEASE_GRANTED', 'JOB_CLAIMED'])
  earlier()!.click()
  await vi.waitFor(() => expect(types()).toHaveLength(5))
  expect(types().at(-1)).toBe('JOB_SUBMITTED')
  expect(earlier()).toBeUndefined()
  expect(calls.filter((c) => c.path.includes('cursor=')).map((c) => c.path)).toEqual([
    '/api/scheduler/jobs/job-1/events?cursor=before-note1',
    '/api/scheduler/jobs/job-1/events?cursor=before-claimed',
  ])
})

test("a finished job's result is headed with the word of its state badge: DONE, not the result's SUCCEEDED", async () => {
  const { fetcher } = fakeFetch({
    'GET /api/scheduler/jobs/job-1': { job: job({ state: 'DONE', attempts: 1 }), result: { status: 'SUCCEEDED', result_data: { rows: 3 }, error: null } },
    'GET /api/scheduler/jobs/job-1/attempts': { attempts: [] },
    'GET /api/scheduler/jobs/job-1/events': { events: [], next_cursor: null },
  })
  const detail = new JobDetailState(new ApiClient({ apiBase: 'http://127.0.0.1:1', token: 't' }, fetcher), 'job-1')
  await detail.refresh()
  const el = render(JobDetailView, { detail, now: T0 })
  expect(text(el.querySelector('[data-testid="result-status"]'))).toBe('(DONE)')
  expect(text(el)).not.toContain('SUCCEEDED')
})

test('a job canceled before it ever ran shows no result (it returned nothing because it never ran), and its attempts say it never ran', async () => {
  const { fetcher } = fakeFetch({
    'GET /api/scheduler/jobs/job-1': { job: job({ state: 'CANCELED', attempts: 0 }), result: { status: 'CANCELED', result_data: null, error: null, attempts: 0 } },
    'GET /api/scheduler/jobs/job-1/attempts': { attempts: [] },
    'GET /api/scheduler/jobs/job-1/events': { events: [], next_cursor: null },
  })
  const detail = new JobDetailState(new ApiClient({ apiBase: 'http://127.0.0.1:1', token: 't' }, fetcher), 'job-1')
  await detail.refresh()
  const el = render(JobDetailView, { detail, now: T0 })
  expect(el.querySelector('[data-testid="job-result-none"]')).toBeNull()
  expect([...el.querySelectorAll('h3')].map(text)).toEqual(['Payload'])
  expect(text(el.querySelector('[data-testid="attempts-empty"]'))).toBe('It never ran.')
})

test('a job scheduled far in the future says how long until it in years, beside its exact time', () => {
  const at = Date.UTC(2099, 5, 1, 12)
  const now = Date.UTC(2026, 11, 7, 15)
  const el = render(WaitingLine, { job: job({ waiting_reason: 'scheduled', waiting_until: iso(at) }), now })
  expect(text(el.querySelector('[data-testid="waiting-until"]'))).toBe(`· until ${formatClock(at, now)} (in 72 years)`)
})

test('a job not run yet has no attempts', async () => {
  const { fetcher } = fakeFetch({
    'GET /api/scheduler/jobs/job-1': { job: job(), result: null },
    'GET /api/scheduler/jobs/job-1/attempts': { attempts: [] },
    'GET /api/scheduler/jobs/job-1/events': { events: [event('JOB_SUBMITTED', { data: { state: 'QUEUED' } })] },
  })
  const detail = new JobDetailState(new ApiClient({ apiBase: 'http://127.0.0.1:1', token: 't' }, fetcher), 'job-1')
  await detail.refresh()
  const el = render(JobDetailView, { detail, now: T0 })
  expect(el.querySelector('[data-testid="attempts"]')).toBeNull()
  expect(text(el.querySelector('[data-testid="attempts-empty"]'))).toBe('Not run yet.')
})

test('the job page says why a waiting job waits, and says nothing for a running one', async () => {
  const reason = 'first in line; needs 40 units; 10 available (busy rating 8 leaves 20 of 100 units, 10 leased)'
  const routes = (waiting_reason: string | null) => ({
    'GET /api/scheduler/jobs/job-1': { job: job({ waiting_reason }), result: null },
    'GET /api/scheduler/jobs/job-1/attempts': { attempts: [] },
    'GET /api/scheduler/jobs/job-1/events': { events: [] },
  })
  const waiting = new JobDetailState(new ApiClient({ apiBase: 'http://127.0.0.1:1', token: 't' }, fakeFetch(routes(reason)).fetcher), 'job-1')
  await waiting.refresh()
  expect(text(render(JobDetailView, { detail: waiting, now: T0 }).querySelector('[data-testid="job-waiting"]'))).toBe(reason)
  const running = new JobDetailState(new ApiClient({ apiBase: 'http://127.0.0.1:1', token: 't' }, fakeFetch(routes(null)).fetcher), 'job-1')
  await running.refresh()
  expect(render(JobDetailView, { detail: running, now: T0 }).querySelector('[data-testid="job-waiting"]')).toBeNull()
})

test('a job halted on a blocker says so on its page, with the way to the Blockers view where an operator answers it', async () => {
  const reason = 'halted on /data/a.txt, held by job …holder01 (blocker …b8265bf4); waits for an operator to retry, force release or cancel'
  const { fetcher } = fakeFetch({
    'GET /api/scheduler/jobs/job-1': { job: job({ state: 'BLOCKED', waiting_reason: reason }), result: null },
    'GET /api/scheduler/jobs/job-1/attempts': { attempts: [] },
    'GET /api/scheduler/jobs/job-1/events': { events: [] },
  })
  const detail = new JobDetailState(new ApiClient({ apiBase: 'http://127.0.0.1:1', token: 't' }, fetcher), 'job-1')
  await detail.refresh()
  const waiting = render(JobDetailView, { detail, now: T0 }).querySelector('[data-testid="job-waiting"]')
  expect(waiting?.querySelector('[data-testid="answer-blocker"]')?.getAttribute('href')).toBe('#/blockers')
  // The reason and the way to answer it are apart: a space either side of the "·", as the words show.
  expect(waiting?.textContent).toBe(`${reason} · answer it in Blockers`)
})

test('a wait that ends by itself shows its time as every other time, on the job page and in the jobs table, once', async () => {
  const until = T0 + 150 * SECOND
  const waiting = job({ state: 'QUEUED', attempts: 1, waiting_reason: 'retry after a failed attempt', waiting_until: iso(until), next_retry_at: iso(until) })
  const { fetcher } = fakeFetch({
    'GET /api/scheduler/jobs/job-1': { job: waiting, result: null },
    'GET /api/scheduler/jobs/job-1/attempts': { attempts: [] },
    'GET /api/scheduler/jobs/job-1/events': { events: [] },
  })
  const detail = new JobDetailState(new ApiClient({ apiBase: 'http://127.0.0.1:1', token: 't' }, fetcher), 'job-1')
  await detail.refresh()
  const page = render(JobDetailView, { detail, now: T0 })
  const line = `retry after a failed attempt · until ${formatClock(until, T0)} (in 2 min 30 s)`
  expect(text(page.querySelector('[data-testid="job-waiting"]'))).toBe(line)
  expect(text(page.querySelector('[data-testid="job-detail"]'))).not.toContain('Next retry') // the same time, said once
  const table = render(JobsTable, { jobs: [waiting], now: T0, oncancel: () => {} })
  expect(text(table.querySelector('[data-testid="row-waiting"]'))).toBe(line)
})

test('the short id of the job a waiting job is behind is one element of its line, kept whole (the narrow window in the e2e test)', () => {
  const reason = 'waiting its turn behind job …042100cc, which needs 10 units'
  const table = render(JobsTable, { jobs: [job({ state: 'QUEUED', waiting_reason: reason })], now: T0, oncancel: () => {} })
  const line = table.querySelector('[data-testid="row-waiting"]')!
  expect(text(line)).toBe(reason)
  expect([...line.querySelectorAll('span.id')].map((span) => span.textContent)).toEqual(['…042100cc'])
})

/** The capacity panel over a host whose capacity is `figures`; a PUT answers them changed by its body, or by `answer`. */
async function capacityPanel(figures: Record<string, unknown>, answer: (body: object) => object = (body) => ({ ...figures, ...body })) {
  const { fetcher, calls } = fakeFetch({ 'GET /api/capacity': figures, 'PUT /api/capacity': (body) => answer(body as object) })
  const capacity = new CapacityState(new ApiClient({ apiBase: 'http://127.0.0.1:1', token: 't' }, fetcher))
  await capacity.refresh()
  return { el: render(CapacityPanel, { capacity }), calls }
}

test("the total units field keeps what is typed, an emptied field too, and says why it cannot send what it cannot", async () => {
  const figures = { total_units: 100, busy_rating: 0, busy_mode: 'auto', usable: 100, leased: 0, available: 100 }
  const { el, calls } = await capacityPanel(figures)
  const field = el.querySelector<HTMLInputElement>('input[aria-label="Total units"]')!
  const set = el.querySelector<HTMLButtonElement>('form.total button[type="submit"]')!
  // Backspaced to nothing, it stays empty while the person types on (it does not refill with 100).
  typeText(field, '10', '1', '')
  expect(field.value).toBe('')
  set.click()
  await vi.waitFor(() => expect(text(el.querySelector('[data-testid="total-problem"]'))).toBe('Total units: a whole number from 1 to 1,000,000'))
  expect(field.getAttribute('aria-invalid')).toBe('true')
  typeText(field, '1', '15', '150')
  expect(field.value).toBe('150')
  set.click()
  await vi.waitFor(() => expect(text(el.querySelector('[data-testid="cap-total"]'))).toBe('150'))
  expect(calls.filter((c) => c.method === 'PUT').map((c) => c.body)).toEqual([{ total_units: 150 }])
  expect(el.querySelector('[data-testid="total-problem"]')).toBeNull()
})

test('a total set below the units in use shows none available, not a negative count, and says how many more than the total are in use (leases are not taken back)', async () => {
  const { el } = await capacityPanel({ total_units: 2, busy_rating: 8, busy_mode: 'manual', usable: 0, leased: 5, available: -5 })
  expect(text(el.querySelector('[data-testid="cap-available"]'))).toBe('0')
  expect(text(el)).not.toContain('-5')
  expect(text(el.querySelector('[data-testid="cap-beyond-total"]'))).toBe(
    '3 units more than the total are in use: a smaller total takes no lease back, and no new one is granted until enough are released.',
  )
  const within = await capacityPanel({ total_units: 50, busy_rating: 8, busy_mode: 'manual', usable: 10, leased: 12, available: -2 })
  expect(text(within.el.querySelector('[data-testid="cap-available"]'))).toBe('0')
  expect(within.el.querySelector('[data-testid="cap-beyond-total"]')).toBeNull()
})

test('the capacity panel shows the figures and sends a manual busy rating', async () => {
  const figures = { total_units: 50, busy_rating: 0, busy_mode: 'auto', usable: 50, leased: 10, available: 40 }
  const { el, calls } = await capacityPanel(figures, (body) => ({ ...figures, busy_rating: 8, busy_mode: 'manual', usable: 10, available: 0, ...body }))
  const figure = (id: string) => text(el.querySelector(`[data-testid="${id}"]`))
  expect([figure('cap-total'), figure('cap-usable'), figure('cap-leased'), figure('cap-available'), figure('cap-reserved')]).toEqual(['50', '50', '10', '40', '0'])
  expect(figure('busy-label')).toBe('0 (auto)')
  expect(el.querySelector('[data-testid="capacity-bar"]')!.getAttribute('aria-label')).toContain('10 of 50 usable units in use')

  const manual = el.querySelector<HTMLInputElement>('input[value="manual"]')!
  manual.checked = true
  manual.dispatchEvent(new Event('change', { bubbles: true }))
  const slider = el.querySelector<HTMLInputElement>('input[type="range"]')!
  flushSync()
  expect(slider.disabled).toBe(false)
  slider.value = '8'
  slider.dispatchEvent(new Event('input', { bubbles: true }))
  flushSync()
  expect(text(el.querySelector('.hint'))).toBe('usable would be 10 of 50')
  el.querySelector<HTMLFormElement>('form.busy')!.requestSubmit()
  await vi.waitFor(() => expect(calls.at(-1)).toMatchObject({ method: 'PUT', body: { busy_rating: 8 } }))
  await vi.waitFor(() => {
    flushSync()
    expect(figure('cap-usable')).toBe('10')
  })
  expect(figure('busy-label')).toBe('8 (manual)')
})

test('a manual busy rating stored with decimals shows as stored in the label, on the slider and in its figure, with nothing to apply', async () => {
  const figures = { total_units: 100, busy_rating: 9.95, busy_mode: 'manual', usable: 0, leased: 0, available: 0 }
  const { el, calls } = await capacityPanel(figures)
  const slider = el.querySelector<HTMLInputElement>('input[type="range"]')!
  flushSync()
  expect(text(el.querySelector('[data-testid="busy-label"]'))).toBe('9.95 (manual)')
  expect(slider.value).toBe('9.95')
  expect(text(el.querySelector('form.busy output'))).toBe('9.95')
  expect(el.querySelector<HTMLButtonElement>('form.busy button[type="submit"]')!.disabled).toBe(true)
  expect(el.querySelector('.hint')).toBeNull()
  // Moved down from 9.95, the slider stands for the whole point below; then it steps by points.
  slider.value = '9.85'
  slider.dispatchEvent(new Event('input', { bubbles: true }))
  flushSync()
  expect(text(el.querySelector('form.busy output'))).toBe('9')
  expect(slider.step).toBe('1')
  el.querySelector<HTMLFormElement>('form.busy')!.requestSubmit()
  await vi.waitFor(() => expect(calls.at(-1)).toMatchObject({ method: 'PUT', body: { busy_rating: 9 } }))
})

test("switched to manual at a measured rating with decimals, the panel previews the usable units the host would leave (97 of 100 at 0.3, not 96)", async () => {
  const { el } = await capacityPanel({ total_units: 100, busy_rating: 0.3, busy_mode: 'auto', usable: 97, leased: 0, available: 97 })
  const manual = el.querySelector<HTMLInputElement>('input[value="manual"]')!
  manual.checked = true
  manual.dispatchEvent(new Event('change', { bubbles: true }))
  flushSync()
  expect(text(el.querySelector('.hint'))).toBe('usable would be 97 of 100')
})

test('a measured busy rating shows as measured on the disabled slider and its figure', async () => {
  const figures = { total_units: 100, busy_rating: 3.4, busy_mode: 'auto', usable: 66, leased: 0, available: 66 }
  const { el } = await capacityPanel(figures)
  const slider = el.querySelector<HTMLInputElement>('input[type="range"]')!
  flushSync()
  expect(slider.disabled).toBe(true)
  expect(slider.value).toBe('3.4')
  expect(text(el.querySelector('form.busy output'))).toBe('3.4')
})

/** An open blocker report: job:h holds /data/a.txt, and job w was refused it. */
const openBlocker = (): Blocker => ({
  blocker_id: 'b1',
  file: '/data/a.txt',
  holder: { file: '/data/a.txt', owner_id: 'job:h', job_id: 'holder-job', acquired_at: iso(T0), last_heartbeat_at: iso(T0), holds_now: true, holds_again: false, held_s: 245 },
  age_s: 185,
  retry_s: 180,
  denied_at: iso(T0 + 5 * SECOND),
  retried_at: iso(T0 + 185 * SECOND),
  requester: { owner_id: 'job:w', job_id: 'waiting-job', lease_id: 'l' },
  state: 'OPEN',
  resolution: null,
  note: null,
  resolved_by: null,
  resolved_at: null,
  taken_from_holder: null,
  created_at: iso(T0 + 185 * SECOND),
})

test('an open blocker offers retry, force release and cancel, each with the note; force release asks first', () => {
  const blocker = openBlocker()
  const answers: [string, string][] = []
  const el = render(BlockerCard, { blocker, now: T0 + 245 * SECOND, onresolve: (action: string, note: string) => answers.push([action, note]) })
  expect(text(el)).toContain('/data/a.txt')
  expect(text(el)).toContain('held 3 min 5 s')
  expect(text(el.querySelector('[data-testid="holder-now"]'))).toBe('holds it still (4 min 5 s)')
  expect(text(el)).toContain('1 min ago')
  // The holder's time counts on with the clock, as the halt's age does, between reads.
  const later = render(BlockerCard, { blocker, now: T0 + 305 * SECOND, onresolve: () => {} })
  expect(text(later.querySelector('[data-testid="holder-now"]'))).toBe('holds it still (5 min 5 s)')
  const note = el.querySelector<HTMLInputElement>('input[type="text"]')!
  note.value = 'done soon'
  note.dispatchEvent(new Event('input', { bubbles: true }))
  flushSync()
  const click = (label: string) => {
    ;[...el.querySelectorAll('button')].find((b) => b.textContent === label)!.click()
    flushSync()
  }
  click('Retry')
  click('Force release')
  expect(answers).toEqual([['retry', 'done soon']]) // not yet: it asks
  const ask = el.querySelector('[data-testid="confirm-force"]')
  expect(text(ask)).toContain('Take /data/a.txt from job:h?')
  click("Keep the holder's lease")
  expect(el.querySelector('[data-testid="confirm-force"]')).toBeNull()
  click('Force release')
  click('Yes, force release')
  expect(el.querySelector('[data-testid="confirm-force"]')).toBeNull()
  click('Cancel job')
  expect(answers).toEqual([
    ['retry', 'done soon'],
    ['force_release', 'done soon'],
    ['cancel', 'done soon'],
  ])
})

test("a blocker's card, and the group of its answers, are named by its file: several open cards' Retry, Force release and Cancel job are told apart", () => {
  const el = render(BlockerCard, { blocker: { ...openBlocker(), file: '/data/\u202Eevil' }, now: T0 + 245 * SECOND, onresolve: () => {} })
  expect(el.querySelector('article')!.getAttribute('aria-label')).toBe('Blocker on "/data/\\u202eevil"')
  expect(el.querySelector('[role="group"]')!.getAttribute('aria-label')).toBe('Answer the blocker on "/data/\\u202eevil"')
})

test('a confirmation takes the keyboard to its safe choice, Escape takes that choice, and focus goes back to the button that asked', async () => {
  const blocker = openBlocker()
  const answers: string[] = []
  const el = render(BlockerCard, { blocker, now: T0 + 245 * SECOND, onresolve: (action: string) => answers.push(action) })
  const force = [...el.querySelectorAll('button')].find((b) => b.textContent === 'Force release')!
  force.focus()
  force.click()
  flushSync()
  expect(document.activeElement?.textContent).toBe("Keep the holder's lease")
  document.activeElement!.dispatchEvent(new KeyboardEvent('keydown', { key: 'Escape', bubbles: true }))
  flushSync()
  expect(el.querySelector('[data-testid="confirm-force"]')).toBeNull()
  await Promise.resolve()
  expect(document.activeElement).toBe(force)
  expect(answers).toEqual([])
})

/** A resolved blocker report whose holder let go of `/f`. */
const resolvedBlocker = (fields: Partial<Blocker> = {}): Blocker => ({
  blocker_id: 'b2',
  file: '/f',
  holder: { file: '/f', owner_id: 'job:h', job_id: null, acquired_at: iso(T0), last_heartbeat_at: iso(T0), holds_now: false, holds_again: false, held_s: null },
  age_s: 1,
  retry_s: 180,
  denied_at: iso(T0),
  retried_at: iso(T0),
  requester: { owner_id: 'job:w', job_id: null, lease_id: null },
  state: 'RESOLVED',
  resolution: 'cancel',
  note: 'not needed',
  resolved_by: 'dashboard',
  resolved_at: iso(T0),
  taken_from_holder: null,
  created_at: iso(T0),
  ...fields,
}) as Blocker

test('a resolved blocker says who answered what (in the words of its button), whether the holder still holds the file, and offers nothing', () => {
  const el = render(BlockerCard, { blocker: resolvedBlocker(), now: T0, onresolve: () => {} })
  expect(el.querySelector('button')).toBeNull()
  expect(text(el.querySelector('[data-testid="resolution"]'))).toMatch(/^Cancel job by dashboard · .* · “not needed”$/)
  expect(text(el.querySelector('[data-testid="holder-now"]'))).toBe('no longer holds it')
  expect(el.querySelector('[data-testid="taken"]')).toBeNull()
})

test('a force-released blocker says what the release did, its answer in the words of its button: the file taken from the holder, or nothing when it had already let go', () => {
  const card = (taken: boolean) =>
    text(render(BlockerCard, { blocker: resolvedBlocker({ resolution: 'force_release', note: null, taken_from_holder: taken }), now: T0, onresolve: () => {} }).querySelector('[data-testid="resolution"]'))
  expect(card(false)).toMatch(/^Force release by dashboard · .* · job:h had already let go of \/f: nothing was taken$/)
  expect(card(true)).toMatch(/^Force release by dashboard · .* · \/f was taken from job:h$/)
})

test('an open blocker says what each answer does, and Retry is no default while the holder still holds the file (a retry would halt again)', () => {
  const held = render(BlockerCard, { blocker: openBlocker(), now: T0 + 245 * SECOND, onresolve: () => {} })
  const retry = (el: HTMLElement) => [...el.querySelectorAll('button')].find((b) => b.textContent === 'Retry')!
  expect(retry(held).classList.contains('primary')).toBe(false)
  const help = [...held.querySelectorAll('[data-testid="answer-help"] li')].map(text)
  expect(help).toEqual([
    'Retry runs the waiting job again: the holder still holds the file, so it will most likely wait 180 s more and halt here again.',
    'Force release takes the file from the holder (its later writes to it are refused) and runs the waiting job with it.',
    'Cancel job cancels the waiting job; the holder keeps the file.',
  ])
  const blocker = openBlocker()
  const letGo = render(BlockerCard, { blocker: { ...blocker, holder: { ...blocker.holder, holds_now: false, held_s: null } }, now: T0 + 245 * SECOND, onresolve: () => {} })
  expect(retry(letGo).classList.contains('primary')).toBe(true)
  expect(text(letGo.querySelector('[data-testid="answer-help"] li'))).toBe('Retry runs the waiting job again: the holder has let go of the file, so the job should get it.')
})

test("the force release question speaks of the holder's job only when a job holds the file, not when its holder is a plain owner id", () => {
  const ask = (holder: Partial<Blocker['holder']>) => {
    const blocker = openBlocker()
    const el = render(BlockerCard, { blocker: { ...blocker, holder: { ...blocker.holder, ...holder } }, now: T0, onresolve: () => {} })
    ;[...el.querySelectorAll('button')].find((b) => b.textContent === 'Force release')!.click()
    flushSync()
    return text(el.querySelector('[data-testid="confirm-force"] p'))
  }
  expect(ask({})).toBe('Take /data/a.txt from job:h? The holder loses the file — its later writes under it are refused and its job can no longer succeed — and the waiting job is requeued.')
  expect(ask({ owner_id: 'backup-tool', job_id: null })).toBe('Take /data/a.txt from backup-tool? The holder loses the file — its later writes under it are refused — and the waiting job is requeued.')
})

test("a blocker's waiting job is named by its type, read from the host once, with a link to the job: a person sees what was trying to write", async () => {
  const { fetcher, calls } = fakeFetch({
    'GET /api/blockers': { blockers: [openBlocker()] },
    'GET /api/scheduler/jobs/waiting-job': { job: job({ job_id: 'waiting-job', job_type: 'export.thumbnails', state: 'BLOCKED' }), result: null },
  })
  const blockers = new BlockersState(new ApiClient({ apiBase: 'http://127.0.0.1:1', token: 't' }, fetcher))
  await blockers.refresh()
  await blockers.refresh()
  expect(calls.filter((c) => c.path === '/api/scheduler/jobs/waiting-job')).toHaveLength(1)
  const waiting = render(BlockersView, { blockers, now: T0 }).querySelector('[data-testid="waiting-job"]')!
  expect(text(waiting)).toBe('export.thumbnails …ting-job')
  expect(waiting.querySelector('a')!.getAttribute('href')).toBe('#/jobs/waiting-job')
})

test("a file a worker's gate took under its job's name is held by that job, named once: in the card, the force release's question and its answer", () => {
  const job = '01a24941-a54a-8000-8000-00000778931b'
  const holder = { file: '/f', owner_id: `job:${job}`, job_id: job, acquired_at: iso(T0), last_heartbeat_at: iso(T0), holds_now: true, holds_again: false, held_s: 10 }
  const open = render(BlockerCard, { blocker: resolvedBlocker({ holder, state: 'OPEN', resolution: null, resolved_by: null, resolved_at: null }), now: T0, onresolve: () => {} })
  expect(text(open)).not.toContain(`job:${job}`)
  expect(text(open)).toContain('job …0778931b · held')
  expect(open.querySelector(`a[href="#/jobs/${job}"]`)).not.toBeNull()
  ;[...open.querySelectorAll('button')].find((b) => b.textContent === 'Force release')!.click()
  flushSync()
  expect(text(open.querySelector('[data-testid="confirm-force"]'))).toContain('Take /f from job …0778931b?')
  const released = render(BlockerCard, { blocker: resolvedBlocker({ holder, resolution: 'force_release', note: null, taken_from_holder: true }), now: T0, onresolve: () => {} })
  expect(text(released.querySelector('[data-testid="resolution"]'))).toMatch(/ · \/f was taken from job …0778931b$/)
})

test('the token form hands over the typed token', () => {
  const tokens: string[] = []
  const el = render(TokenForm, { reason: 'rejected', onsubmit: (t: string) => tokens.push(t) })
  expect(text(el.querySelector('h2'))).toBe('The host refused this token')
  const input = el.querySelector<HTMLInputElement>('#token-input')!
  input.value = 'abc'
  input.dispatchEvent(new Event('input', { bubbles: true }))
  flushSync()
  el.querySelector('form')!.requestSubmit()
  expect(tokens).toEqual(['abc'])
})

test('the token form has the focus as it appears, so a keyboard user types the token at once', () => {
  for (const reason of ['rejected', 'missing', 'worker'] as const) {
    const el = render(TokenForm, { reason, onsubmit: () => {} })
    expect(document.activeElement, reason).toBe(el.querySelector('#token-input'))
    unmountAll()
  }
})

test('a worker token is said to be one, which cannot open the dashboard, not a token the host does not know; the host\'s token or an admin token can', () => {
  const el = render(TokenForm, { reason: 'worker', onsubmit: () => {} })
  expect(text(el.querySelector('h2'))).toBe('A worker token cannot open the dashboard')
  expect(text(el.querySelector('p'))).toContain("The dashboard needs the host's token or an admin token")
  expect(text(el.querySelector('p'))).not.toContain('may have been replaced')
})

test('a busy worker shows its jobs by the end of their ids (jobs of one minute share the start), each a link with the whole id on hover', () => {
  const ids = ['0190f3a2-7c1e-7b3d-9a4f-2e6d81c03f9a', '0190f3a2-7c1e-7b3d-a1b2-77aa00bb11cc']
  const workers = new WorkersState(new ApiClient({ apiBase: 'http://127.0.0.1:1', token: 't' }, fakeFetch({}).fetcher))
  workers.workers = [
    { worker_id: 'local-1.1', kind: 'local', pid: 4242, state: 'busy', current_job_ids: ids, last_seen_at: iso(T0), started_at: iso(T0 - 600 * SECOND), restarts: 0 },
    { worker_id: 'local-2.1', kind: 'local', pid: 4243, state: 'ready', current_job_ids: [], last_seen_at: iso(T0), started_at: iso(T0 - 600 * SECOND), restarts: 0 },
  ]
  workers.loaded = true
  const el = render(WorkersView, { workers, now: T0 + 2 * SECOND })
  const busy = el.querySelector('tr[data-worker="local-1.1"]')!
  const links = [...busy.querySelectorAll('a')]
  expect(links.map((a) => a.textContent)).toEqual(['…81c03f9a', '…00bb11cc'])
  expect(links.map((a) => a.getAttribute('href'))).toEqual(ids.map((id) => `#/jobs/${id}`))
  expect(links.map((a) => a.getAttribute('title'))).toEqual(ids)
  expect(text(busy)).toContain('busy')
  expect(text(busy)).toContain('2 s ago')
  expect(text(el.querySelector('tr[data-worker="local-2.1"]'))).toContain('idle')
})

test('a worker running many jobs shows five of them and how many more', () => {
  const ids = Array.from({ length: 12 }, (_, i) => `0190f3a2-7c1e-7b3d-9a4f-2e6d81c03f${String(i).padStart(2, '0')}`)
  const workers = new WorkersState(new ApiClient({ apiBase: 'http://127.0.0.1:1', token: 't' }, fakeFetch({}).fetcher))
  workers.workers = [{ worker_id: 'local-1.1', kind: 'local', pid: 4242, state: 'busy', current_job_ids: ids, last_seen_at: iso(T0), started_at: iso(T0), restarts: 0 }]
  workers.loaded = true
  const row = render(WorkersView, { workers, now: T0 }).querySelector('tr[data-worker="local-1.1"]')!
  expect([...row.querySelectorAll('a')].map((a) => a.getAttribute('title'))).toEqual(ids.slice(0, 5))
  expect(text(row.querySelector('[data-testid="more-jobs"]'))).toBe('+7 more')
})

test('an external worker is shown without a pid or restarts: the host neither starts nor restarts it', () => {
  const workers = new WorkersState(new ApiClient({ apiBase: 'http://127.0.0.1:1', token: 't' }, fakeFetch({}).fetcher))
  workers.workers = [
    { worker_id: 'local-1.1', kind: 'local', pid: 4242, state: 'ready', current_job_ids: [], last_seen_at: iso(T0), started_at: iso(T0 - 600 * SECOND), restarts: 2 },
    { worker_id: 'ext-1', kind: 'external', pid: null, state: 'active', current_job_ids: [], last_seen_at: iso(T0), started_at: iso(T0 - 60 * SECOND), restarts: 0 },
  ]
  workers.loaded = true
  const el = render(WorkersView, { workers, now: T0 + 2 * SECOND })
  const headings = (id: string) => [...el.querySelectorAll(`[data-testid="workers-${id}"] th`)].map((th) => text(th))
  expect(headings('local')).toEqual(['Worker', 'State', 'PID', 'Current jobs', 'Last seen', 'Restarts'])
  expect(headings('external')).toEqual(['Worker', 'State', 'Current jobs', 'Last seen'])
  expect([...el.querySelectorAll('tr[data-worker="local-1.1"] td')].map((td) => text(td))).toEqual(['local-1.1', 'ready', '4242', 'idle', '2 s ago', '2'])
  expect([...el.querySelectorAll('tr[data-worker="ext-1"] td')].map((td) => text(td))).toEqual(['ext-1', 'active', 'idle', '2 s ago'])
})

test('the storage panel shows the database size (file + WAL) and how long finished jobs are kept', async () => {
  const answer = {
    database_bytes: 13 * 1024 * 1024,
    file_bytes: 12 * 1024 * 1024,
    wal_bytes: 1024 * 1024,
    free_bytes: 300 * 1024,
    auto_vacuum: 'incremental',
    retain_days: 7,
    stats_retain_days: 90,
    last_prune: { at: iso(T0), jobs_deleted: 1234, events_deleted: 0, pages_returned: 0, longest_step_ms: 3.2 },
  }
  const { fetcher } = fakeFetch({ 'GET /api/storage': () => answer, 'GET /api/health': () => ({ ok: true, version: '1', storage: 'read_write' }) })
  const storage = new StorageState(new ApiClient({ apiBase: 'http://127.0.0.1:1', token: 't' }, fetcher))
  await storage.refresh()
  expect(storage.readOnly).toBeNull()
  const el = render(StoragePanel, { storage, now: T0 })
  expect(text(el.querySelector('[data-testid="storage-size"]'))).toBe('13.0 MB')
  expect(text(el.querySelector('[data-testid="storage-retention"]'))).toBe('7 days')
  expect(text(el.querySelector('[data-testid="storage-note"]'))).toContain(
    `deleted with their history 7 days after they finish; the last pass, at ${formatClock(T0, T0)}, deleted 1,234. Statistics are kept 90 days.`,
  )

  answer.retain_days = 0
  await storage.refresh()
  flushSync()
  expect(text(el.querySelector('[data-testid="storage-retention"]'))).toBe('forever')
  expect(text(el.querySelector('[data-testid="storage-note"]'))).toContain('Finished jobs are never deleted (--retain-days 0).')
})

/** A `redis` frame: Redis answers, nothing waits, unless `over` says otherwise. */
const redisHealth = (over: Partial<RedisHealth> = {}): RedisHealth => ({
  url: 'redis://127.0.0.1:6379/0',
  connected: true,
  unanswered_ms: null,
  prefix: 'leasehold:',
  prefix_taken_by: null,
  refused: null,
  waiting: 0,
  oldest_wait_ms: null,
  ...over,
})

test('a Redis that does not answer is shown with how long it has not, the messages waiting for it and how long the oldest has; nothing shows while it answers', () => {
  const redis = new RedisState(() => T0)
  const el = render(RedisBanner, { redis, now: T0, workers: [] })
  const banner = () => el.querySelector('[data-testid="redis-away"]')
  expect(banner()).toBeNull() // no Redis
  redis.hear(redisHealth())
  flushSync()
  expect(banner()).toBeNull()
  redis.hear(redisHealth({ connected: false }))
  flushSync()
  expect(text(banner())).toBe(
    'Redis at redis://127.0.0.1:6379/0 does not answer. Jobs still run on this machine and nothing is lost; workers that reach the host only through Redis wait until it is back.',
  )
  redis.hear(redisHealth({ connected: false, unanswered_ms: 8 * SECOND, waiting: 1204, oldest_wait_ms: 65 * SECOND }))
  flushSync()
  expect(text(banner())).toContain('does not answer (for 8 s). 1,204 messages wait to be published, the oldest for 1 min 5 s. Jobs still run')
  expect(banner()!.getAttribute('role')).toBe('alert')
})

test('a host that found another on its Redis prefix says so, names it and how to part them, though Redis answers', () => {
  const redis = new RedisState(() => T0)
  const el = render(RedisBanner, { redis, now: T0, workers: [] })
  redis.hear(redisHealth({ prefix_taken_by: 'pid 42 on box, data dir /srv/a', waiting: 2, oldest_wait_ms: 5 * SECOND }))
  flushSync()
  expect(text(el.querySelector('[data-testid="redis-away"]'))).toBe(
    'Redis at redis://127.0.0.1:6379/0 is no longer used: another Leasehold host (pid 42 on box, data dir /srv/a) uses the prefix leasehold:. ' +
      'Give one of them another --redis-prefix and restart it. 2 messages wait to be published, the oldest for 5 s. ' +
      'Jobs still run on this machine; workers that reach the host only through Redis get no answer.',
  )
})

test('a Redis that answers and refuses what the host sends (out of memory) is shown with its words and the messages waiting', () => {
  const redis = new RedisState(() => T0)
  const el = render(RedisBanner, { redis, now: T0, workers: [] })
  redis.hear(redisHealth({ refused: "OOM command not allowed when used memory > 'maxmemory'.", waiting: 3 }))
  flushSync()
  expect(text(el.querySelector('[data-testid="redis-away"]'))).toBe(
    "Redis at redis://127.0.0.1:6379/0 answers, and refuses what the host sends: OOM command not allowed when used memory > 'maxmemory'. 3 messages wait to be published. " +
      'Jobs still run on this machine and nothing is lost; workers that reach the host only through Redis wait until it takes them again.',
  )
})

test("while Redis is not used the banner says that jobs still run only of workers that can run them: all without remote workers over Redis, none with only those, local and HTTP workers' with both", () => {
  const sentence = (workers: { kind: string }[], health: Partial<RedisHealth>) => {
    const redis = new RedisState(() => T0)
    redis.hear(redisHealth(health))
    const el = render(RedisBanner, { redis, now: T0, workers })
    flushSync()
    return (text(el.querySelector('[data-testid="redis-away"]')) ?? '').replace(/^.*\. /, '')
  }
  const [local, http, remote] = [{ kind: 'local' }, { kind: 'external' }, { kind: 'redis' }]
  const away = { connected: false }
  expect(sentence([local, http], away)).toBe('Jobs still run on this machine and nothing is lost; workers that reach the host only through Redis wait until it is back.')
  expect(sentence([remote, remote], away)).toBe('No job runs meanwhile: the only workers reach the host through Redis, and wait until it is back; nothing is lost.')
  expect(sentence([local, remote, http], away)).toBe(
    'The jobs of local workers and workers over HTTP still run and nothing is lost; remote workers over Redis run nothing until it is back.',
  )
  const refused = { refused: 'OOM command not allowed.' }
  expect(sentence([remote], refused)).toBe('No job runs meanwhile: the only workers reach the host through Redis, and wait until it takes them again; nothing is lost.')
  expect(sentence([http, remote], refused)).toBe(
    'The jobs of local workers and workers over HTTP still run and nothing is lost; remote workers over Redis run nothing until it takes them again.',
  )
  const taken = { prefix_taken_by: 'pid 42 on box, data dir /srv/a' }
  expect(sentence([remote], taken)).toBe('No job runs meanwhile: the only workers reach the host through Redis, and get no answer.')
  expect(sentence([local, remote], taken)).toBe('The jobs of local workers and workers over HTTP still run; remote workers over Redis run nothing and get no answer.')
  expect(sentence([local], taken)).toBe('Jobs still run on this machine; workers that reach the host only through Redis get no answer.')
})

test('a host read-only on a full disk is shown as such, and asked again until it takes writes', async () => {
  vi.useFakeTimers()
  try {
    const health: Record<string, unknown> = { ok: true, version: '1', storage: 'read_only', reason: 'disk full' }
    const storageAnswer = { database_bytes: 0, file_bytes: 0, wal_bytes: 0, free_bytes: 0, auto_vacuum: 'incremental', retain_days: 7, stats_retain_days: 90, last_prune: null }
    const { fetcher } = fakeFetch({ 'GET /api/storage': () => storageAnswer, 'GET /api/health': () => health })
    const storage = new StorageState(new ApiClient({ apiBase: 'http://127.0.0.1:1', token: 't' }, fetcher))
    await storage.refresh()
    expect(storage.readOnly).toBe('disk full')
    health.storage = 'read_write'
    delete health.reason
    await vi.advanceTimersByTimeAsync(READ_ONLY_POLL_MS)
    expect(storage.readOnly).toBeNull()
    storage.stop()
  } finally {
    vi.useRealTimers()
  }
})

test('a host whose database file went while it ran shows what it says of it: where its commits are and what to do', async () => {
  const detail = 'The database file /d/leasehold.db was deleted while the host ran: it takes no more writes (reads still work). Everything it had committed is in /d/leasehold.db: restart the host to take writes again'
  const health = { ok: true, version: '1', storage: 'read_only', reason: 'database file deleted' }
  const storageAnswer = { database_bytes: 0, file_bytes: 0, wal_bytes: 0, free_bytes: 0, auto_vacuum: 'incremental', retain_days: 7, stats_retain_days: 90, last_prune: null, read_only: { reason: 'database file deleted', detail } }
  const { fetcher } = fakeFetch({ 'GET /api/storage': () => storageAnswer, 'GET /api/health': () => health })
  const storage = new StorageState(new ApiClient({ apiBase: 'http://127.0.0.1:1', token: 't' }, fetcher))
  await storage.refresh()
  storage.stop()
  expect(storage.readOnly).toBe('database file deleted')
  expect(storage.readOnlyDetail).toBe(detail)
})

/** The characters that must never reach the page as they are in a name or a path: bidi controls, newlines, zero-width spaces. */
const RAW_INVISIBLE = /[\u0000-\u0008\u000a-\u001f\u061c\u200b\u200e\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]/

test('a job type with bidi controls is isolated and shows them as escapes, in its cell and in the waiting line: it cannot reverse the text after it', () => {
  const type = '\u202Eevil\u202D'
  const reason = `no worker connected runs job type ${type}; it waits for one that does`
  const table = render(JobsTable, { jobs: [job({ state: 'QUEUED', job_type: type, waiting_reason: reason })], now: T0, oncancel: () => {} })
  const cell = table.querySelector('td.name-cell')!
  expect(cell.textContent).not.toMatch(RAW_INVISIBLE)
  expect(cell.querySelector('bdi')).not.toBeNull()
  expect(text(cell)).toContain('\\u202eevil\\u202d')
  expect(cell.querySelector('[data-note]')!.getAttribute('data-note')).toBe('holds invisible characters: \\u202e, \\u202d')
  const line = table.querySelector('[data-testid="row-waiting"]')!
  expect(line.textContent).not.toMatch(RAW_INVISIBLE)
  expect(text(line)).toContain('runs job type \\u202eevil\\u202d')
  expect(line.querySelector('bdi.name')).not.toBeNull()
})

test("the waiting line marks a padded job type's outer spaces as the type cell does", () => {
  const reason = 'no worker connected runs job type   padded  ; it waits for one that does'
  const table = render(JobsTable, { jobs: [job({ state: 'QUEUED', job_type: '  padded  ', waiting_reason: reason })], now: T0, oncancel: () => {} })
  const line = table.querySelector('[data-testid="row-waiting"]')!
  expect(line.querySelector('[data-spaces]')!.getAttribute('data-spaces')).toBe('begins with 2 spaces and ends with 2 spaces')
  expect(line.querySelectorAll('.outer-space')).toHaveLength(2)
})

test("a blocker's file and holder are isolated, their bidi controls and newlines shown as escapes: a path never reads as another, nor '/a\\nb' as '/a b'", () => {
  const blocker = openBlocker()
  const spoofed: Blocker = {
    ...blocker,
    file: '/tmp/qa/a\nb',
    holder: { ...blocker.holder, file: '/tmp/qa/\u202Etxt.exe\u202C/rtl', owner_id: 'holder-\u202Ertl', job_id: null },
  }
  const el = render(BlockerCard, { blocker: spoofed, now: T0, onresolve: () => {} })
  expect(el.textContent).not.toMatch(RAW_INVISIBLE)
  expect(text(el.querySelector('h3'))).toContain('/tmp/qa/a\\u000ab (holds an invisible character: \\u000a)')
  expect(text(el.querySelector('[data-testid="holder-file"]'))).toContain('/tmp/qa/\\u202etxt.exe\\u202c/rtl')
  expect(text(el.querySelector('[data-testid="holder-owner"]'))).toContain('holder-\\u202ertl')
  for (const part of [el.querySelector('h3'), el.querySelector('[data-testid="holder-file"]'), el.querySelector('[data-testid="holder-owner"]')]) expect(part!.querySelector('bdi')).not.toBeNull()
  ;[...el.querySelectorAll('button')].find((b) => b.textContent === 'Force release')!.click()
  flushSync()
  const question = el.querySelector('[data-testid="confirm-force"]')!
  expect(question.textContent).not.toMatch(/[\u202a-\u202e\u2066-\u2069]/) // (the question's own lines break in its markup)
  expect(text(question)).toContain('Take /tmp/qa/\\u202etxt.exe\\u202c/rtl')
  expect(text(question)).toContain('from holder-\\u202ertl')
})

test("a force release's answer names the file and the holder isolated, their bidi controls shown as escapes, whatever the release did", () => {
  const holder = { ...resolvedBlocker().holder, file: '/home/ann/\u202Etxt.exe\u202C/rtl', owner_id: 'holder-\u202Ertl' }
  for (const taken of [true, false]) {
    const el = render(BlockerCard, { blocker: resolvedBlocker({ holder, resolution: 'force_release', note: null, taken_from_holder: taken }), now: T0, onresolve: () => {} })
    const line = el.querySelector('[data-testid="taken"]')!
    expect(line.textContent).not.toMatch(RAW_INVISIBLE)
    expect(line.querySelectorAll('bdi.name')).toHaveLength(2)
    expect(text(line)).toContain('/home/ann/\\u202etxt.exe\\u202c/rtl')
    expect(text(line)).toContain('holder-\\u202ertl')
    expect(text(line)).toMatch(taken ? / was taken from / : / had already let go of .*: nothing was taken/)
  }
})

test("a job's error keeps its lines and shows the bidi controls in it as escapes", async () => {
  const { fetcher } = fakeFetch({
    'GET /api/scheduler/jobs/job-1': { job: job({ state: 'FAILED' }), result: { status: 'FAILED', error: { message: 'cannot write /tmp/\u202Etxt.exe' }, result_data: null } },
    'GET /api/scheduler/jobs/job-1/attempts': { attempts: [] },
    'GET /api/scheduler/jobs/job-1/events': { events: [] },
  })
  const detail = new JobDetailState(new ApiClient({ apiBase: 'http://127.0.0.1:1', token: 't' }, fetcher), 'job-1')
  await detail.refresh()
  const error = render(JobDetailView, { detail, now: T0 }).querySelector('[data-testid="job-error"]')!
  expect(error.textContent).toBe('{\n  "message": "cannot write /tmp/\\u202etxt.exe"\n}')
})

test("a blocker answered from the keyboard hands focus to its answer in the resolved list, not to the page: the button that had it is gone", async () => {
  const open = openBlocker()
  const { fetcher } = fakeFetch({
    'GET /api/blockers': { blockers: [open] },
    'POST /api/blockers/b1/resolve': { blocker: { ...open, state: 'RESOLVED', resolution: 'retry', resolved_by: 'dashboard', resolved_at: iso(T0), note: 'soon' }, job_state: 'QUEUED' },
  })
  const blockers = new BlockersState(new ApiClient({ apiBase: 'http://127.0.0.1:1', token: 't' }, fetcher))
  await blockers.refresh()
  const el = render(BlockersView, { blockers, now: T0 })
  const retry = [...el.querySelectorAll<HTMLButtonElement>('[data-testid="open-blockers"] button')].find((b) => b.textContent === 'Retry')!
  retry.focus()
  retry.click()
  await vi.waitFor(() => expect(el.querySelector('[data-testid="resolved-blockers"] [data-testid="resolution"]')).not.toBeNull())
  flushSync()
  expect(document.activeElement).toBe(el.querySelector('[data-testid="resolved-blockers"] [data-testid="resolution"]'))
})

test("a job row's Cancel, pressed from the keyboard, hands focus to the row's state as the button goes: never to the page", async () => {
  const { fetcher } = fakeFetch({
    'GET /api/scheduler/jobs?payload=false&limit=25': { jobs: [job({ state: 'QUEUED' })], next_cursor: null },
    'POST /api/scheduler/jobs/job-1/cancel': { job: job({ state: 'CANCELED', updated_at: iso(T0 + SECOND) }) },
  })
  const api = new ApiClient({ apiBase: 'http://127.0.0.1:1', token: 't' }, fetcher)
  const jobs = new JobsState(api)
  await jobs.refresh()
  const el = render(JobsView, { jobs, now: T0, bulk: new BulkState(api) })
  const cancel = el.querySelector<HTMLButtonElement>('tr[data-job="job-1"] button.danger')!
  cancel.focus()
  cancel.click()
  await vi.waitFor(() => {
    flushSync()
    expect(el.querySelector('tr[data-job="job-1"]')!.getAttribute('data-state')).toBe('CANCELED')
  })
  flushSync()
  expect(el.querySelector('tr[data-job="job-1"] button.danger')).toBeNull()
  expect(document.activeElement).toBe(el.querySelector('tr[data-job="job-1"] [data-testid="job-state"]'))
})

test('Apply and Set, which go off once their change is made, hand focus back to the control that was set: never to the page', async () => {
  let figures = { total_units: 50, busy_rating: 0, busy_mode: 'auto', usable: 50, leased: 0, available: 50 }
  const { fetcher } = fakeFetch({
    'GET /api/capacity': () => figures,
    'PUT /api/capacity': (body: { busy_rating?: number; total_units?: number }) => {
      figures = { ...figures, ...(body.busy_rating === undefined ? {} : { busy_rating: body.busy_rating, busy_mode: 'manual' }), ...(body.total_units === undefined ? {} : { total_units: body.total_units }) }
      return figures
    },
  })
  const capacity = new CapacityState(new ApiClient({ apiBase: 'http://127.0.0.1:1', token: 't' }, fetcher))
  await capacity.refresh()
  const el = render(CapacityPanel, { capacity })
  const manual = el.querySelector<HTMLInputElement>('input[value="manual"]')!
  manual.checked = true
  manual.dispatchEvent(new Event('change', { bubbles: true }))
  flushSync()
  const apply = el.querySelector<HTMLButtonElement>('form.busy button[type="submit"]')!
  apply.focus()
  apply.click()
  flushSync()
  await vi.waitFor(() => {
    flushSync()
    expect(apply.disabled).toBe(true)
    expect(document.activeElement).toBe(manual)
  })

  const field = el.querySelector<HTMLInputElement>('input[aria-label="Total units"]')!
  typeText(field, '6', '60')
  flushSync()
  const set = el.querySelector<HTMLButtonElement>('form.total button[type="submit"]')!
  set.focus()
  set.click()
  flushSync()
  await vi.waitFor(() => {
    flushSync()
    expect(figures.total_units).toBe(60)
    expect(document.activeElement).toBe(field)
  })
})

test('an answer refused as too late (the blocker was answered elsewhere, its event not come yet) reads the blocker again: its card shows that answer and who gave it, not its buttons', async () => {
  const open = openBlocker()
  const { fetcher } = fakeFetch({
    'GET /api/blockers': { blockers: [open] },
    'POST /api/blockers/b1/resolve': new Response(JSON.stringify({ code: 'blocker_resolved', detail: 'Blocker b1 was already resolved (cancel)' }), { status: 409 }),
    'GET /api/blockers/b1': { blocker: { ...open, state: 'RESOLVED', resolution: 'cancel', resolved_by: 'ann', resolved_at: iso(T0) } },
  })
  const blockers = new BlockersState(new ApiClient({ apiBase: 'http://127.0.0.1:1', token: 't' }, fetcher))
  await blockers.refresh()
  const el = render(BlockersView, { blockers, now: T0 })
  ;[...el.querySelectorAll<HTMLButtonElement>('[data-testid="open-blockers"] button')].find((b) => b.textContent === 'Retry')!.click()
  await vi.waitFor(() => {
    flushSync()
    expect(el.querySelector('[data-testid="resolved-blockers"] [data-blocker="b1"]')).not.toBeNull()
  })
  const card = el.querySelector('[data-testid="resolved-blockers"] [data-blocker="b1"]')!
  expect(el.querySelector('[data-testid="open-blockers"]')).toBeNull()
  expect(card.querySelector('button')).toBeNull()
  expect(text(card.querySelector('[data-testid="resolution"]'))).toMatch(/ by ann · /)
  expect(text(card.querySelector('[role="alert"]'))).toBe('Blocker b1 was already resolved (cancel) by ann')
})

test("a row's Cancel refused as too late (the job ended, its event not come yet) reads the job again: the row shows how it ended, without its Cancel", async () => {
  const { fetcher } = fakeFetch({
    'GET /api/scheduler/jobs?payload=false&limit=25': { jobs: [job({ state: 'RUNNING', attempts: 1 })], next_cursor: null },
    'POST /api/scheduler/jobs/job-1/cancel': new Response(JSON.stringify({ code: 'illegal_transition', detail: 'Job job-1 has already ended (DONE): there is nothing to cancel' }), { status: 409 }),
    'GET /api/scheduler/jobs/job-1': { job: job({ state: 'DONE', attempts: 1, updated_at: iso(T0 + SECOND) }), result: null },
  })
  const api = new ApiClient({ apiBase: 'http://127.0.0.1:1', token: 't' }, fetcher)
  const jobs = new JobsState(api)
  await jobs.refresh()
  const el = render(JobsView, { jobs, now: T0, bulk: new BulkState(api) })
  el.querySelector<HTMLButtonElement>('tr[data-job="job-1"] button.danger')!.click()
  await vi.waitFor(() => {
    flushSync()
    expect(el.querySelector('tr[data-job="job-1"]')!.getAttribute('data-state')).toBe('DONE')
  })
  expect(el.querySelector('tr[data-job="job-1"] button.danger')).toBeNull()
  expect(text(el.querySelector('tr[data-job="job-1"] [role="alert"]'))).toContain('has already ended (DONE)')
})

test("a job page's Cancel refused as too late (the job ended, its event not come yet) reads the job again: the page shows how it ended", async () => {
  let reads = 0
  const { fetcher } = fakeFetch({
    'POST /api/scheduler/jobs/job-1/cancel': new Response(JSON.stringify({ code: 'illegal_transition', detail: 'Job job-1 has already ended (DONE): there is nothing to cancel' }), { status: 409 }),
    'GET /api/scheduler/jobs/job-1': () => ({ job: job({ state: reads++ === 0 ? 'RUNNING' : 'DONE', attempts: 1, updated_at: iso(T0 + reads * SECOND) }), result: null }),
    'GET /api/scheduler/jobs/job-1/attempts': { attempts: [] },
    'GET /api/scheduler/jobs/job-1/events': { events: [] },
  })
  const detail = new JobDetailState(new ApiClient({ apiBase: 'http://127.0.0.1:1', token: 't' }, fetcher), 'job-1')
  await detail.refresh()
  expect(detail.job!.state).toBe('RUNNING')
  await detail.cancel()
  await vi.waitFor(() => expect(detail.job!.state).toBe('DONE'))
  expect(detail.actionError).toContain('has already ended (DONE)')
})
