// @vitest-environment happy-dom
/**
 * The dashboard's side of delayed jobs, paused queues, retries and bulk actions: what the
 * stores send the host, and what the components show.
 */
import { flushSync } from 'svelte'
import { afterEach, describe, expect, test, vi } from 'vitest'
import JobDetailView from '../../src-renderer/components/JobDetailView.svelte'
import JobsTable from '../../src-renderer/components/JobsTable.svelte'
import JobsView from '../../src-renderer/components/JobsView.svelte'
import QueuesView from '../../src-renderer/components/QueuesView.svelte'
import { ApiClient } from '../../src-renderer/lib/api'
import { BulkState, bulkOutcome, bulkQuestion } from '../../src-renderer/lib/bulk.svelte'
import { JobDetailState } from '../../src-renderer/lib/job-detail.svelte'
import { reduceJob } from '../../src-renderer/lib/job-events'
import { filterOfQuery, filterQuery, JobsState, NO_FILTER, type JobFilter } from '../../src-renderer/lib/jobs.svelte'
import { QueuesState } from '../../src-renderer/lib/queues.svelte'
import { formatClock } from '../../src-renderer/lib/time-format'
import { until } from '../helpers/until'
import { event, fakeFetch, iso, job, render, SECOND, T0, text, unmountAll } from './support'

const connection = { apiBase: 'http://127.0.0.1:7878', token: 't0k' }
const filter = (fields: Partial<JobFilter> = {}): JobFilter => ({ ...NO_FILTER, ...fields })

afterEach(unmountAll)

describe('scheduled jobs', () => {
  test('a QUEUED job waiting for its run_at shows as SCHEDULED with its time and a run-now button; once due it is QUEUED', () => {
    const scheduled = job({ job_id: 'job-s', run_at: iso(T0 + 60 * SECOND) })
    let ran = ''
    const el = render(JobsTable, { jobs: [scheduled], now: T0, oncancel: () => {}, onrunnow: (id: string) => (ran = id) })
    const row = el.querySelector('tr[data-job="job-s"]')!
    expect(row.getAttribute('data-scheduled')).toBe('true')
    expect(text(row)).toContain('SCHEDULED')
    expect(text(row.querySelector('[data-testid="run-at"]'))).toBe(`for ${formatClock(T0 + 60 * SECOND, T0)}`)
    ;(row.querySelector('button[aria-label="Run now: job job-s sleep"]') as HTMLButtonElement).click()
    expect(ran).toBe('job-s')
    const due = render(JobsTable, { jobs: [scheduled], now: T0 + 60 * SECOND, oncancel: () => {}, onrunnow: () => {} })
    expect(due.querySelector('tr[data-job="job-s"]')!.getAttribute('data-scheduled')).toBeNull()
    expect(due.querySelector('button[aria-label="Run now: job job-s sleep"]')).toBeNull()
  })

  test("a row's Run now is named by its visible words first, then the job by its short id and type (WCAG 2.5.3: what speech control hears is what it sees)", () => {
    const scheduled = job({ job_id: '01a25128-9402-7fc2-966a-8646624eb1d4', job_type: ' report.build', run_at: iso(T0 + 60 * SECOND) })
    const el = render(JobsTable, { jobs: [scheduled], now: T0, oncancel: () => {}, onrunnow: () => {} })
    const runNow = [...el.querySelectorAll('button')].find((b) => b.textContent === 'Run now')!
    expect(runNow.getAttribute('aria-label')).toBe('Run now: job …624eb1d4 " report.build"')
  })

  test('run now and retry are sent as the dashboard, and the row or page shows the job the host answers', async () => {
    const { fetcher, calls } = fakeFetch({
      'POST /api/jobs/job-1/run-now': { job: job({ run_at: null }) },
      'POST /api/jobs/job-1/retry': { job: job({ state: 'QUEUED', max_attempts: 6, updated_at: iso(T0 + SECOND) }) },
      'GET /api/scheduler/jobs/job-1': { job: job({ state: 'QUEUED', max_attempts: 6, updated_at: iso(T0 + SECOND) }), result: null },
      'GET /api/scheduler/jobs/job-1/attempts': { attempts: [] },
      'GET /api/scheduler/jobs/job-1/events': { events: [] },
    })
    const api = new ApiClient(connection, fetcher)
    const jobs = new JobsState(api)
    jobs.rows = [job({ run_at: iso(T0 + 60 * SECOND) })]
    await jobs.runNow('job-1')
    expect(jobs.rows[0]!.run_at).toBeNull()
    const detail = new JobDetailState(api, 'job-1')
    detail.job = job({ state: 'FAILED', dead_letter: true })
    await detail.retry()
    expect(detail.job).toMatchObject({ state: 'QUEUED', max_attempts: 6 })
    expect(calls.filter((c) => c.method === 'POST').map((c) => [c.path, c.body])).toEqual([
      ['/api/jobs/job-1/run-now', { requested_by: 'dashboard' }],
      ['/api/jobs/job-1/retry', { requested_by: 'dashboard' }],
    ])
  })

  test('an answer older than the events that moved the job does not take its row back (run now: RUNNING, then DONE 1/3)', async () => {
    const ran = T0 + SECOND
    let answer: ((response: Response) => void) | null = null
    const { fetcher } = fakeFetch({
      'POST /api/jobs/job-1/run-now': () => new Promise<Response>((resolve) => (answer = resolve)),
      'GET /api/scheduler/jobs': { jobs: [job({ state: 'QUEUED', run_at: null, updated_at: iso(ran) })], next_cursor: null },
    })
    const jobs = new JobsState(new ApiClient(connection, fetcher))
    jobs.rows = [job({ run_at: iso(T0 + 600 * SECOND) })]
    const running = jobs.runNow('job-1')
    // The stream brings the run-now and the grant before the answer to the POST arrives.
    jobs.apply(event('JOB_RUN_NOW', { ts: iso(ran), data: { state: 'QUEUED' } }))
    jobs.apply(event('LEASE_GRANTED', { ts: iso(ran + 40), entity_type: 'LEASE', entity_id: 'lease-1', data: { state: 'RUNNING', attempt: 1, worker_id: 'local-1' } }))
    await vi.waitFor(() => expect(answer).not.toBeNull())
    answer!(new Response(JSON.stringify({ job: job({ state: 'QUEUED', run_at: null, updated_at: iso(ran) }) }), { status: 200, headers: { 'content-type': 'application/json' } }))
    await running
    expect(jobs.rows[0]).toMatchObject({ state: 'RUNNING', attempts: 1 })
    // A list read started before the grant and answered after it does not either.
    await jobs.refresh()
    expect(jobs.rows[0]).toMatchObject({ state: 'RUNNING', attempts: 1 })
    jobs.apply(event('JOB_DONE', { ts: iso(ran + 4 * SECOND), data: { state: 'DONE', attempt: 1 } }))
    expect(jobs.rows[0]).toMatchObject({ state: 'DONE', attempts: 1, max_attempts: 3 })
  })

  test('a job that ends counts the attempt that ended, even if its grant was missed', () => {
    expect(reduceJob(job({ state: 'RUNNING', attempts: 0 }), event('JOB_DONE', { data: { state: 'DONE', attempt: 1 } }))).toMatchObject({ state: 'DONE', attempts: 1 })
  })

  test('a job run now from the table loses its waiting line at once (the answer has none), and the page is read again for why it waits now', async () => {
    const { fetcher } = fakeFetch({
      'POST /api/jobs/job-1/run-now': { job: job({ state: 'QUEUED', run_at: null, updated_at: iso(T0 + SECOND) }) },
    })
    const jobs = new JobsState(new ApiClient(connection, fetcher))
    jobs.rows = [job({ run_at: iso(T0 + 600 * SECOND), waiting_reason: 'scheduled', waiting_until: iso(T0 + 600 * SECOND) })]
    await jobs.runNow('job-1')
    expect(jobs.rows[0]).toMatchObject({ run_at: null, waiting_reason: null, waiting_until: null })
    expect(jobs.apply(event('JOB_RUN_NOW', { ts: iso(T0 + SECOND), data: { state: 'QUEUED' } }))).toBe(true)
  })

  test('a refused run now is shown on its row', async () => {
    const { fetcher } = fakeFetch({
      'POST /api/jobs/job-1/run-now': new Response(JSON.stringify({ code: 'not_scheduled', detail: 'Job job-1 is QUEUED and eligible' }), { status: 409 }),
    })
    const jobs = new JobsState(new ApiClient(connection, fetcher))
    await jobs.runNow('job-1')
    expect(jobs.rowErrors['job-1']).toBe('Job job-1 is QUEUED and eligible')
  })

  test('a row action on its way to the host turns its buttons off: a double-clicked Run now or Cancel sends one request', async () => {
    const answers: ((response: Response) => void)[] = []
    const { fetcher, calls } = fakeFetch({
      'POST /api/jobs/job-s/run-now': () => new Promise<Response>((resolve) => answers.push(resolve)),
      'POST /api/scheduler/jobs/job-q/cancel': () => new Promise<Response>((resolve) => answers.push(resolve)),
    })
    const jobs = new JobsState(new ApiClient(connection, fetcher))
    jobs.rows = [job({ job_id: 'job-s', run_at: iso(T0 + 600 * SECOND) }), job({ job_id: 'job-q' })]
    const el = render(JobsView, { jobs, now: T0, bulk: new BulkState(new ApiClient(connection, fetcher)) })
    const runNow = el.querySelector('button[aria-label^="Run now: job"]') as HTMLButtonElement
    const cancel = el.querySelector('button[aria-label="Cancel job job-q"]') as HTMLButtonElement
    runNow.click()
    runNow.click()
    cancel.click()
    cancel.click()
    flushSync()
    // Off while sent, and keeping the keyboard's focus: aria-disabled, not disabled.
    expect(runNow.getAttribute('aria-disabled')).toBe('true')
    expect(cancel.getAttribute('aria-disabled')).toBe('true')
    expect((el.querySelector('button[aria-label="Cancel job job-s"]') as HTMLButtonElement).getAttribute('aria-disabled')).toBe('true')
    // The store sends one as well when asked twice (a second table of the same list).
    void jobs.runNow('job-s')
    await vi.waitFor(() => expect(answers).toHaveLength(2))
    expect(calls.filter((c) => c.method === 'POST').map((c) => c.path)).toEqual(['/api/jobs/job-s/run-now', '/api/scheduler/jobs/job-q/cancel'])
    const answered = (body: object) => new Response(JSON.stringify(body), { status: 200, headers: { 'content-type': 'application/json' } })
    answers[0]!(answered({ job: job({ job_id: 'job-s', run_at: null, updated_at: iso(T0 + SECOND) }) }))
    answers[1]!(answered({ job: job({ job_id: 'job-q', cancel_requested: true, updated_at: iso(T0 + SECOND) }) }))
    await vi.waitFor(() => expect(jobs.pending).toEqual({}))
    flushSync()
    expect((el.querySelector('button[aria-label="Cancel job job-s"]') as HTMLButtonElement).getAttribute('aria-disabled')).toBe('false')
  })

  test("a job page's Run now, Retry or Cancel on its way to the host turns its buttons off: a double click sends one request", async () => {
    let answer: ((response: Response) => void) | null = null
    const { fetcher, calls } = fakeFetch({
      'POST /api/jobs/job-1/run-now': () => new Promise<Response>((resolve) => (answer = resolve)),
      'GET /api/scheduler/jobs/job-1': { job: job({ run_at: null, updated_at: iso(T0 + SECOND) }), result: null },
      'GET /api/scheduler/jobs/job-1/attempts': { attempts: [] },
      'GET /api/scheduler/jobs/job-1/events': { events: [] },
    })
    const detail = new JobDetailState(new ApiClient(connection, fetcher), 'job-1')
    detail.job = job({ run_at: iso(T0 + 600 * SECOND) })
    const el = render(JobDetailView, { detail, now: T0 })
    const runNow = [...el.querySelectorAll('button')].find((b) => text(b) === 'Run now')!
    runNow.click()
    runNow.click()
    flushSync()
    expect(runNow.getAttribute('aria-disabled')).toBe('true')
    expect([...el.querySelectorAll('button')].find((b) => text(b) === 'Cancel job')!.getAttribute('aria-disabled')).toBe('true')
    await vi.waitFor(() => expect(answer).not.toBeNull())
    expect(calls.filter((c) => c.method === 'POST')).toHaveLength(1)
    answer!(new Response(JSON.stringify({ job: job({ run_at: null, updated_at: iso(T0 + SECOND) }) }), { status: 200, headers: { 'content-type': 'application/json' } }))
    await vi.waitFor(() => expect(detail.acting).toBe(false))
  })

  test('events move a job: run now clears its run_at and why it waited (its time), a retry its dead letter and budget', () => {
    const scheduled = job({ run_at: iso(T0), waiting_reason: 'scheduled', waiting_until: iso(T0) })
    expect(reduceJob(scheduled, event('JOB_RUN_NOW', { data: { state: 'QUEUED' } }))).toMatchObject({ run_at: null, waiting_reason: null, waiting_until: null })
    const retried = reduceJob(job({ state: 'FAILED', dead_letter: true }), event('JOB_RETRIED', { data: { state: 'QUEUED', max_attempts: 6 } }))
    expect(retried).toMatchObject({ state: 'QUEUED', dead_letter: false, max_attempts: 6 })
  })
})

describe('paused queues', () => {
  test('the toggle pauses and resumes a queue, and the view shows it paused with its counts', async () => {
    let paused = false
    const { fetcher, calls } = fakeFetch({
      'GET /api/queues': () => ({ queues: [{ queue: 'reports', paused, paused_at: paused ? iso(T0) : null, paused_by: paused ? 'dashboard' : null, counts: { QUEUED: 2, FAILED: 1 } }] }),
      'POST /api/queues/reports/pause': () => ((paused = true), { queue: { queue: 'reports', paused, paused_at: iso(T0), paused_by: 'dashboard' } }),
      'POST /api/queues/reports/resume': () => ((paused = false), { queue: { queue: 'reports', paused, paused_at: null, paused_by: null } }),
    })
    const queues = new QueuesState(new ApiClient(connection, fetcher))
    await queues.refresh()
    const el = render(QueuesView, { queues, now: T0 })
    const row = () => el.querySelector('tr[data-queue="reports"]')!
    expect(row().getAttribute('data-paused')).toBe('false')
    expect([...row().querySelectorAll('td.num')].map((td) => td.textContent)).toEqual(['2', '0', '0', '1', '0', '0'])
    ;(row().querySelector('td.actions button') as HTMLButtonElement).click()
    await until(() => queues.paused === 1, 2000, 'the pause answered')
    flushSync()
    expect(row().getAttribute('data-paused')).toBe('true')
    expect(queues.paused).toBe(1)
    expect(text(row())).toContain('by dashboard')
    await queues.setPaused('reports', false)
    flushSync()
    expect(row().getAttribute('data-paused')).toBe('false')
    expect(calls.filter((c) => c.method === 'POST').map((c) => c.path)).toEqual(['/api/queues/reports/pause', '/api/queues/reports/resume'])
  })

  test("a queue's button is named by what it does, Pause or Resume, and is no toggle besides (a pressed Resume would read as resumed)", async () => {
    const { fetcher } = fakeFetch({
      'GET /api/queues': { queues: ['mail', 'reports'].map((queue) => ({ queue, paused: queue === 'mail', paused_at: null, paused_by: null, counts: { QUEUED: 1 } })) },
    })
    const queues = new QueuesState(new ApiClient(connection, fetcher))
    await queues.refresh()
    const el = render(QueuesView, { queues, now: T0 })
    const buttons = [...el.querySelectorAll('td.actions button')]
    expect(buttons.map((b) => [b.textContent, b.getAttribute('aria-label'), b.getAttribute('aria-pressed')])).toEqual([
      ['Resume', 'Resume queue mail', null],
      ['Pause', 'Pause queue reports', null],
    ])
  })

  test("a paused queue's line says since when and by whom, a space between the time and \"by\"", async () => {
    const { fetcher } = fakeFetch({
      'GET /api/queues': { queues: [{ queue: 'reports', paused: true, paused_at: iso(T0), paused_by: 'dashboard', counts: { QUEUED: 1 } }] },
    })
    const queues = new QueuesState(new ApiClient(connection, fetcher))
    await queues.refresh()
    const el = render(QueuesView, { queues, now: T0 })
    expect(el.querySelector('tr[data-queue="reports"] span.muted.small')!.textContent).toBe(`since ${formatClock(iso(T0), T0)} by dashboard`)
  })

  test('who paused a queue is shown isolated, its invisible characters drawn as escapes: a name from the pause request cannot reorder the row', async () => {
    const { fetcher } = fakeFetch({
      'GET /api/queues': { queues: [{ queue: 'reports', paused: true, paused_at: iso(T0), paused_by: 'ops\u202Eevil', counts: { QUEUED: 1 } }] },
    })
    const queues = new QueuesState(new ApiClient(connection, fetcher))
    await queues.refresh()
    const el = render(QueuesView, { queues, now: T0 })
    const row = el.querySelector('tr[data-queue="reports"]')!
    expect(row.querySelector('span.muted bdi')?.textContent).toBe('ops\\u202eevil')
    expect(text(row)).toContain('by ops\\u202eevil')
  })

  test('a queue with no jobs yet can be paused by name', async () => {
    const { fetcher } = fakeFetch({
      'GET /api/queues': { queues: [] },
      'POST /api/queues/later/pause': { queue: { queue: 'later', paused: true, paused_at: iso(T0), paused_by: 'dashboard' } },
    })
    const queues = new QueuesState(new ApiClient(connection, fetcher))
    await queues.setPaused('later', true)
    expect(queues.queues).toEqual([expect.objectContaining({ queue: 'later', paused: true, counts: {} })])
  })

  test('a queue name is never trimmed: a row pauses its own queue (" lead trail ", shown with its spaces marked), the form pauses the queue as typed', async () => {
    const padded = ' lead trail '
    const info = (queue: string, paused: boolean) => ({ queue, paused, paused_at: paused ? iso(T0) : null, paused_by: paused ? 'dashboard' : null })
    const { fetcher, calls } = fakeFetch({
      'GET /api/queues': { queues: [{ ...info(padded, false), counts: { QUEUED: 1 } }, { ...info('lead trail', false), counts: { QUEUED: 2 } }] },
      'POST /api/queues/%20lead%20trail%20/pause': { queue: info(padded, true) },
      'POST /api/queues/%20other/pause': { queue: info(' other', true) },
    })
    const queues = new QueuesState(new ApiClient(connection, fetcher))
    await queues.refresh()
    const el = render(QueuesView, { queues, now: T0 })
    const row = el.querySelector(`tr[data-queue="${padded}"]`)!
    expect(row.querySelector('.name-cell')!.textContent).toContain(padded)
    expect(row.querySelector('[data-spaces]')!.getAttribute('data-spaces')).toBe('begins with a space and ends with a space')
    ;(row.querySelector('td.actions button') as HTMLButtonElement).click()
    await until(() => calls.some((c) => c.method === 'POST'), 2000, 'the pause sent')
    const input = el.querySelector('form.pause-other input') as HTMLInputElement
    input.value = ' other'
    input.dispatchEvent(new Event('input'))
    flushSync()
    expect(text(el.querySelector('[data-testid="spaces-note"]')!)).toBe('Queue " other" begins with a space: sent as typed')
    ;(el.querySelector('form.pause-other button') as HTMLButtonElement).click()
    await until(() => calls.filter((c) => c.method === 'POST').length === 2, 2000, 'the typed pause sent')
    expect(calls.filter((c) => c.method === 'POST').map((c) => c.path)).toEqual(['/api/queues/%20lead%20trail%20/pause', '/api/queues/%20other/pause'])
  })

  test('the form that pauses a queue by name says why it could not, beside the field, and keeps the name; "." and ".." are refused before sending', async () => {
    const { fetcher, calls } = fakeFetch({
      'GET /api/queues': { queues: [] },
      'POST /api/queues/full/pause': () => new Response(JSON.stringify({ code: 'storage_full', detail: 'The disk is full' }), { status: 507 }),
    })
    const queues = new QueuesState(new ApiClient(connection, fetcher))
    await queues.refresh()
    const el = render(QueuesView, { queues, now: T0 })
    const input = el.querySelector('form.pause-other input') as HTMLInputElement
    const send = async (name: string) => {
      input.value = name
      input.dispatchEvent(new Event('input'))
      flushSync()
      ;(el.querySelector('form.pause-other button') as HTMLButtonElement).click()
      await until(() => el.querySelector('[data-testid="pause-other-error"]'), 2000, `the failure of ${name} shown`)
      flushSync()
    }
    await send('..')
    expect(text(el.querySelector('[data-testid="pause-other-error"]')!)).toContain('cannot be "." or ".."')
    expect(input.value).toBe('..')
    expect(input.getAttribute('aria-invalid')).toBe('true')
    await send('full')
    expect(text(el.querySelector('[data-testid="pause-other-error"]')!)).toContain('The disk is full')
    expect(input.value).toBe('full')
    expect(calls.filter((c) => c.method === 'POST').map((c) => c.path)).toEqual(['/api/queues/full/pause'])
  })
})

describe('bulk actions', () => {
  test('the request follows the jobs filter; an action that cannot apply to the filtered state has none; no filter means all', () => {
    expect(BulkState.requestFor('retry', filter({ state: 'FAILED', job_type: 'render' }))).toEqual({ states: ['FAILED'], job_type: 'render' })
    expect(BulkState.requestFor('retry', filter({ state: 'RUNNING' }))).toBeNull()
    expect(BulkState.requestFor('purge', filter({ state: 'QUEUED' }))).toBeNull()
    expect(BulkState.requestFor('purge', filter())).toEqual({ all: true })
    expect(BulkState.requestFor('purge', filter({ addon_id: 'a' }))).toEqual({ addon_id: 'a' })
    // The host matches whole values: " padded " is another type than "padded", and the question says which.
    const padded = BulkState.requestFor('purge', filter({ state: 'CANCELED', job_type: ' padded ', addon_id: 'a ' }))
    expect(padded).toEqual({ states: ['CANCELED'], job_type: ' padded ', addon_id: 'a ' })
    expect(bulkQuestion({ action: 'purge', request: padded!, matched: 1 })).toContain('The CANCELED jobs of type " padded " of add-on "a " will be deleted')
    // A search selects by parts of ids and text; a bulk call selects by whole values: none for a search.
    expect(BulkState.requestFor('purge', filter({ search: 'a3f9' }))).toBeNull()
  })

  test('with the dead-letter filter a retry or a purge asks for dead letters only; a cancel, or a state no dead letter is in, has no request', () => {
    expect(BulkState.requestFor('retry', filter({ dead_letter: true }))).toEqual({ dead_letter: true })
    expect(BulkState.requestFor('purge', filter({ dead_letter: true, job_type: 'render' }))).toEqual({ dead_letter: true, job_type: 'render' })
    expect(BulkState.requestFor('retry', filter({ dead_letter: true, state: 'TIMEOUT' }))).toEqual({ dead_letter: true, states: ['TIMEOUT'] })
    expect(BulkState.requestFor('retry', filter({ dead_letter: true, state: 'CANCELED' }))).toBeNull()
    expect(BulkState.requestFor('cancel', filter({ dead_letter: true }))).toBeNull()
    expect(bulkQuestion({ action: 'retry', request: { dead_letter: true }, matched: 4 })).toBe(
      'Retry 4 jobs? The dead-lettered jobs will go back to the queue, each as a new run with a fresh attempt budget.',
    )
    expect(bulkQuestion({ action: 'purge', request: { dead_letter: true, states: ['TIMEOUT'] }, matched: 0 })).toBe('No job matches: nothing to purge (the dead-lettered TIMEOUT jobs).')
  })

  test('counts first (a dry run), asks, then acts on the jobs it counted and says how many it changed', async () => {
    const counted = { counted_at: iso(T0), counted_through: 812 }
    const { fetcher, calls } = fakeFetch({
      'POST /api/jobs/bulk/purge': (body: { dry_run?: boolean }) =>
        body.dry_run
          ? { action: 'purge', matched: 3, changed: 0, dry_run: true, ...counted }
          : { action: 'purge', matched: 3, changed: 3, dry_run: false, counted_at: null, counted_through: null },
    })
    let reloads = 0
    const bulk = new BulkState(new ApiClient(connection, fetcher), () => (reloads += 1))
    await bulk.prepare('purge', filter({ state: 'FAILED' }))
    expect(bulk.pending).toEqual({ action: 'purge', request: { states: ['FAILED'], counted_through: 812 }, matched: 3 })
    expect(bulkQuestion(bulk.pending!)).toBe('Purge 3 jobs? The FAILED jobs will be deleted with their attempts and events. This cannot be undone.')
    await bulk.confirm()
    expect(bulk.pending).toBeNull()
    expect(bulkOutcome(bulk.result!)).toBe('Purged 3 of 3 jobs.')
    expect(reloads).toBe(1)
    expect(calls.map((c) => c.body)).toEqual([
      { states: ['FAILED'], dry_run: true, requested_by: 'dashboard' },
      { states: ['FAILED'], counted_through: 812, requested_by: 'dashboard' },
    ])
  })

  test('a bulk action cut short by a full disk shows its answer, which says how many jobs it changed before, and the list is read again', async () => {
    const detail = 'The bulk purge stopped part way: 1500 job(s) were purged by the steps before (each its own transaction), and stay so; the rest were not. The disk is full: …'
    const { fetcher } = fakeFetch({
      'POST /api/jobs/bulk/purge': (body: { dry_run?: boolean }) =>
        body.dry_run
          ? { action: 'purge', matched: 15000, changed: 0, dry_run: true, counted_at: iso(T0), counted_through: 812 }
          : new Response(JSON.stringify({ code: 'storage_full', detail }), { status: 507, headers: { 'content-type': 'application/json' } }),
    })
    let reloads = 0
    const bulk = new BulkState(new ApiClient(connection, fetcher), () => (reloads += 1))
    await bulk.prepare('purge', filter({ state: 'FAILED' }))
    await bulk.confirm()
    expect(bulk.error).toContain('1500 job(s) were purged by the steps before')
    expect(reloads).toBe(1)
  })

  test('a question goes with the filter it was counted for: another filter drops it (and a count that comes back after the change asks nothing), so a yes never acts on jobs no longer shown', async () => {
    let answer: (value: unknown) => void = () => {}
    const { fetcher, calls } = fakeFetch({
      'POST /api/jobs/bulk/retry': () => new Promise((resolve) => (answer = resolve)),
    })
    const bulk = new BulkState(new ApiClient(connection, fetcher))
    const canceled = filter({ state: 'CANCELED' })
    const counting = bulk.prepare('retry', canceled)
    await vi.waitFor(() => expect(calls).toHaveLength(1))
    answer({ action: 'retry', matched: 5, changed: 0, dry_run: true, counted_at: iso(T0), counted_through: 9 })
    await counting
    expect(bulk.pending?.matched).toBe(5)
    bulk.keepFor(canceled) // the same filter: kept
    expect(bulk.pending?.matched).toBe(5)
    bulk.keepFor(filter({ state: 'FAILED' }))
    expect(bulk.pending).toBeNull()
    await bulk.confirm()
    // Counted, then the filter changed before the count came back.
    const late = bulk.prepare('retry', canceled)
    await vi.waitFor(() => expect(calls).toHaveLength(2))
    bulk.keepFor(filter({ state: 'CANCELED', job_type: 'render' }))
    answer({ action: 'retry', matched: 5, changed: 0, dry_run: true, counted_at: iso(T0), counted_through: 9 })
    await late
    expect(bulk.pending).toBeNull()
    expect(calls.filter((c) => !(c.body as { dry_run?: boolean }).dry_run)).toEqual([])
  })

  test('the question names what is selected, and says when nothing matches', () => {
    expect(bulkQuestion({ action: 'retry', request: { all: true }, matched: 2 })).toBe(
      'Retry 2 jobs? Every one of the FAILED, CANCELED, TIMEOUT jobs will go back to the queue, each as a new run with a fresh attempt budget.',
    )
    expect(bulkQuestion({ action: 'retry', request: { job_type: 'render' }, matched: 0 })).toBe('No job matches: nothing to retry (the FAILED, CANCELED, TIMEOUT jobs of type render).')
    expect(bulkOutcome({ action: 'retry', matched: 3, changed: 2, dry_run: false, over_capacity: [], over_capacity_count: 0, counted_at: null, counted_through: null })).toBe('Retried 2 of 3 jobs; 1 was not (moved on meanwhile, or refused).')
  })

  test('a retry names the jobs it refused for their cost, the first three by their short ids, apart from those that moved on', () => {
    const ids = ['0190f3a2-7c1e-7b3d-9a4f-2e6d81c03f9a', '0190f3a2-7c1e-7b3d-a1b2-77aa00bb11cc', '0190f3a2-7c1e-7b3d-a1b2-77aa00bb22dd', '0190f3a2-7c1e-7b3d-a1b2-77aa00bb33ee']
    const answer = { action: 'retry' as const, matched: 6, changed: 1, dry_run: false, counted_at: null, counted_through: null }
    expect(bulkOutcome({ ...answer, over_capacity: ids.slice(0, 1), over_capacity_count: 1 })).toBe('Retried 1 of 6 jobs; 1 costs more than the total capacity (…81c03f9a); 4 were not (moved on meanwhile, or refused).')
    expect(bulkOutcome({ ...answer, over_capacity: ids, over_capacity_count: 5 })).toBe('Retried 1 of 6 jobs; 5 cost more than the total capacity (…81c03f9a, …00bb11cc, …00bb22dd, …).')
  })

  test("a retry's question says how many of the jobs counted cost more than the total capacity, which it will not retry", () => {
    const ids = ['0190f3a2-7c1e-7b3d-9a4f-2e6d81c03f9a', '0190f3a2-7c1e-7b3d-a1b2-77aa00bb11cc']
    const asked = { action: 'retry' as const, request: { job_type: 'render' } }
    expect(bulkQuestion({ ...asked, matched: 5, overCost: { ids, count: 2 } })).toBe(
      'Retry 5 jobs? The FAILED, CANCELED, TIMEOUT jobs of type render will go back to the queue, each as a new run with a fresh attempt budget. 2 of them (…81c03f9a, …00bb11cc) cost more than the total capacity, and will not be retried until it is raised.',
    )
    expect(bulkQuestion({ ...asked, matched: 1, overCost: { ids: ids.slice(0, 1), count: 1 } })).toMatch(/ It costs more than the total capacity, and will not be retried until it is raised\.$/)
  })

  test("a retry's count carries the jobs the host's dry run named as costing more than the total capacity into its question", async () => {
    const ids = ['0190f3a2-7c1e-7b3d-9a4f-2e6d81c03f9a']
    const { fetcher } = fakeFetch({
      'POST /api/jobs/bulk/retry': () => ({ action: 'retry', matched: 2, changed: 0, dry_run: true, over_capacity: ids, over_capacity_count: 1, counted_at: iso(T0), counted_through: 5 }),
    })
    const bulk = new BulkState(new ApiClient(connection, fetcher))
    await bulk.prepare('retry', filter({ state: 'FAILED' }))
    expect(bulk.pending?.overCost).toEqual({ ids, count: 1 })
    expect(bulkQuestion(bulk.pending!)).toMatch(/ 1 of them \(…81c03f9a\) costs more than the total capacity, and will not be retried until it is raised\.$/)
  })
})

describe('the jobs view', () => {
  test('a type, add-on or search goes to the host as it came, outer spaces and all (" padded " is not "padded"): from a link, from the fields, and to Purge matching', async () => {
    const padded = job({ job_id: 'job-padded', job_type: ' padded ', state: 'CANCELED' })
    const listed = 'GET /api/scheduler/jobs?state=CANCELED&job_type=%20padded%20&payload=false&limit=25'
    const { fetcher, calls } = fakeFetch({
      [listed]: { jobs: [padded], next_cursor: null },
      'GET /api/scheduler/jobs?state=CANCELED&job_type=%20padded%20&addon_id=a%20&search=%20x&payload=false&limit=25': { jobs: [], next_cursor: null },
      'POST /api/jobs/bulk/purge': { action: 'purge', matched: 1, changed: 0, dry_run: true, counted_at: iso(T0), counted_through: 5 },
    })
    const api = new ApiClient(connection, fetcher)
    const jobs = new JobsState(api)
    const linked = filterOfQuery(new URLSearchParams('type=%20padded%20&state=CANCELED'))
    expect(linked).toEqual(filter({ state: 'CANCELED', job_type: ' padded ' }))
    expect(filterOfQuery(filterQuery(linked))).toEqual(linked)
    await jobs.setFilter(linked)
    expect(calls.map((c) => `${c.method} ${c.path}`)).toEqual([listed])
    const bulk = new BulkState(api)
    const el = render(JobsView, { jobs, now: T0, bulk })
    const cell = el.querySelector('tr[data-job="job-padded"] td.name-cell')!
    expect(cell.textContent).toContain(' padded ')
    expect(cell.querySelectorAll('.outer-space')).toHaveLength(2)
    ;(el.querySelector('[data-testid="bulk-purge"]') as HTMLButtonElement).click()
    await vi.waitFor(() => expect(bulk.pending).not.toBeNull())
    expect(calls.at(-1)!.body).toEqual({ states: ['CANCELED'], job_type: ' padded ', dry_run: true, requested_by: 'dashboard' })
    const type = (name: string, value: string) => {
      const input = el.querySelector(`input[name="${name}"]`) as HTMLInputElement
      input.value = value
      input.dispatchEvent(new Event('input', { bubbles: true }))
    }
    type('addon_id', 'a ')
    type('search', ' x')
    flushSync()
    expect([...el.querySelectorAll('[data-testid="spaces-note"]')].map(text)).toEqual([
      'Id or text " x" begins with a space: sent as typed',
      'Type " padded " begins with a space and ends with a space: sent as typed',
      'Add-on "a " ends with a space: sent as typed',
    ])
    ;(el.querySelector('form[role="search"] button[type="submit"]') as HTMLButtonElement).click()
    await vi.waitFor(() => expect(calls.at(-1)!.path).toBe('/api/scheduler/jobs?state=CANCELED&job_type=%20padded%20&addon_id=a%20&search=%20x&payload=false&limit=25'))
  })

  test('searches by any part of an id, type or add-on as typed, and asks the host with the search', async () => {
    const found = job({ job_id: '01a2248b-543a-8000-8000-0000015c8d60', job_type: 'render' })
    const { fetcher, calls } = fakeFetch({
      'GET /api/scheduler/jobs?payload=false&limit=25': { jobs: [found, job({ job_id: 'job-2' })], next_cursor: null },
      'GET /api/scheduler/jobs?search=5c8d&payload=false&limit=25': { jobs: [found], next_cursor: null },
    })
    const api = new ApiClient(connection, fetcher)
    const jobs = new JobsState(api)
    await jobs.refresh()
    const el = render(JobsView, { jobs, now: T0, bulk: new BulkState(api) })
    const box = el.querySelector('input[name="search"]') as HTMLInputElement
    box.value = '5c8d'
    box.dispatchEvent(new Event('input', { bubbles: true }))
    ;(el.querySelector('form[role="search"] button[type="submit"]') as HTMLButtonElement).click()
    await vi.waitFor(() => expect(el.querySelectorAll('tbody tr')).toHaveLength(1))
    expect(el.querySelector(`tr[data-job="${found.job_id}"]`)).not.toBeNull()
    expect(calls.at(-1)!.path).toBe('/api/scheduler/jobs?search=5c8d&payload=false&limit=25')
    // Bulk actions cannot take a search: they are off, and the view says why.
    expect((el.querySelector('[data-testid="bulk-purge"]') as HTMLButtonElement).disabled).toBe(true)
    expect(text(el.querySelector('.bulk'))).toContain('clear the id-or-text search')
  })

  test('the Dead letters filter asks the host for the jobs out of attempts, and the table marks each dead-lettered job', async () => {
    const dead = job({ job_id: 'job-dead', state: 'FAILED', dead_letter: true, attempts: 3, max_attempts: 3 })
    const failed = job({ job_id: 'job-failed', state: 'FAILED', attempts: 1 })
    const { fetcher, calls } = fakeFetch({
      'GET /api/scheduler/jobs?payload=false&limit=25': { jobs: [dead, failed], next_cursor: null },
      'GET /api/scheduler/jobs?dead_letter=true&payload=false&limit=25': { jobs: [dead], next_cursor: null },
    })
    const api = new ApiClient(connection, fetcher)
    const jobs = new JobsState(api)
    await jobs.refresh()
    const el = render(JobsView, { jobs, now: T0, bulk: new BulkState(api) })
    expect(el.querySelector('tr[data-job="job-dead"] [data-testid="dead-letter"]')).not.toBeNull()
    expect(el.querySelector('tr[data-job="job-failed"] [data-testid="dead-letter"]')).toBeNull()
    const toggle = el.querySelector('[data-testid="filter-dead-letter"]') as HTMLButtonElement
    toggle.click()
    await vi.waitFor(() => expect(el.querySelectorAll('tbody tr')).toHaveLength(1))
    expect(calls.at(-1)!.path).toBe('/api/scheduler/jobs?dead_letter=true&payload=false&limit=25')
    expect(toggle.getAttribute('aria-pressed')).toBe('true')
    // What the filter selects can be retried or purged in bulk.
    expect((el.querySelector('[data-testid="bulk-retry"]') as HTMLButtonElement).disabled).toBe(false)
    toggle.click()
    await vi.waitFor(() => expect(el.querySelectorAll('tbody tr')).toHaveLength(2))
    expect(jobs.filter.dead_letter).toBe(false)
  })

  test('a type, add-on or text longer than any job has (a link may carry one) matches no job, said plainly, without asking the host; the fields take no more than 200 characters', async () => {
    const { fetcher, calls } = fakeFetch({})
    const api = new ApiClient(connection, fetcher)
    const jobs = new JobsState(api)
    for (const change of [{ job_type: 'y'.repeat(300) }, { job_type: '', addon_id: 'a'.repeat(201) }, { addon_id: '', search: 's'.repeat(201) }]) {
      await jobs.setFilter(change)
      const el = render(JobsView, { jobs, now: T0, bulk: new BulkState(api) })
      expect(text(el.querySelector('[data-testid="jobs-empty"]'))).toBe('No jobs match these filters.')
      expect(el.querySelector('[role="alert"]')).toBeNull()
      unmountAll()
    }
    expect(calls).toEqual([])
    const el = render(JobsView, { jobs, now: T0, bulk: new BulkState(api) })
    expect(['search', 'job_type', 'addon_id'].map((name) => el.querySelector(`input[name="${name}"]`)!.getAttribute('maxlength'))).toEqual(['200', '200', '200'])
  })

  test('a bulk question on screen goes away as the operator picks another filter', async () => {
    const { fetcher } = fakeFetch({
      'GET /api/scheduler/jobs?payload=false&limit=25': { jobs: [], next_cursor: null },
      'GET /api/scheduler/jobs?state=CANCELED&payload=false&limit=25': { jobs: [], next_cursor: null },
      'GET /api/scheduler/jobs?state=FAILED&payload=false&limit=25': { jobs: [], next_cursor: null },
      'POST /api/jobs/bulk/retry': { action: 'retry', matched: 5, changed: 0, dry_run: true, counted_at: iso(T0), counted_through: 9 },
    })
    const api = new ApiClient(connection, fetcher)
    const jobs = new JobsState(api)
    await jobs.setFilter({ state: 'CANCELED' })
    const el = render(JobsView, { jobs, now: T0, bulk: new BulkState(api) })
    ;(el.querySelector('[data-testid="bulk-retry"]') as HTMLButtonElement).click()
    await vi.waitFor(() => expect(el.querySelector('[data-testid="bulk-confirm"]')).not.toBeNull())
    ;[...el.querySelectorAll('.states button')].find((b) => b.textContent === 'FAILED')!.dispatchEvent(new MouseEvent('click', { bubbles: true }))
    await vi.waitFor(() => expect(el.querySelector('[data-testid="bulk-confirm"]')).toBeNull())
  })
})
