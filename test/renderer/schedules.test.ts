// @vitest-environment happy-dom
import { flushSync, mount, unmount } from 'svelte'
import { afterEach, describe, expect, test, vi } from 'vitest'
import SchedulesView from '../../src-renderer/components/SchedulesView.svelte'
import { ApiClient, type Schedule } from '../../src-renderer/lib/api'
import { describeCron } from '../../src-renderer/lib/cron-words'
import { outerSpaces } from '../../src-renderer/lib/names'
import { CHANGED_SINCE_OPENED, changeInput, createInput, draftOf, emptyDraft, hostProblem, localTimeZone } from '../../src-renderer/lib/schedule-form'
import { SchedulesState } from '../../src-renderer/lib/schedules.svelte'
import { event, fakeFetch, iso, T0, typeText } from './support'
import { until } from '../helpers/until'

const connection = { apiBase: 'http://127.0.0.1:7878', token: 't0k' }
const HOUR = 3_600_000

function schedule(overrides: Partial<Schedule> = {}): Schedule {
  return {
    id: 'sched-1',
    name: 'nightly',
    cron: '0 2 * * *',
    timezone: 'UTC',
    job: { job_type: 'backup', cost_units: 2 },
    overlap: 'allow',
    enabled: true,
    state: 'enabled',
    next_fire_at: iso(T0 + 2 * HOUR),
    next_fire_times: [iso(T0 + 2 * HOUR), iso(T0 + 26 * HOUR), iso(T0 + 50 * HOUR)],
    last_run: null,
    revision: 1,
    created_at: iso(T0),
    updated_at: iso(T0),
    ...overrides,
  }
}

describe('a cron expression in words', () => {
  test.each([
    ['0 2 * * *', 'At 02:00, every day'],
    ['30 2 * * *', 'At 02:30, every day'],
    ['@daily', 'At 00:00, every day'],
    ['*/15 * * * *', 'Every 15 minutes'],
    ['0 * * * *', 'Every hour'],
    ['0 9 * * 1-5', 'At 09:00, Monday through Friday'],
    ['0 0 1 * *', 'At 00:00, on day 1 of the month'],
    ['*/10 * * * * *', 'Every 10 seconds'],
    ['0 0 * * MON#2', 'At 00:00, on the second Monday of the month'],
  ])('%s reads "%s"', (cron, words) => {
    expect(describeCron(cron)).toEqual({ words, problem: null })
  })

  test('an expression it cannot read says why, and an empty one is empty', () => {
    expect(describeCron('61 * * * *')).toEqual({ words: null, problem: 'minutes part must be >= 0 and <= 59' })
    expect(describeCron('  ')).toEqual({ words: null, problem: 'empty' })
  })
})

describe('the schedule form', () => {
  test('a new draft becomes the POST body; the payload is JSON, an empty queue is left out', () => {
    const draft = { ...emptyDraft('Europe/Berlin'), name: ' nightly ', job_type: 'exec', cost_units: 3, payload: '{"program": "backup.sh"}', overlap: 'skip' as const }
    expect(createInput(draft)).toEqual({
      ok: true,
      value: {
        name: 'nightly',
        cron: '0 2 * * *',
        timezone: 'Europe/Berlin',
        job: { job_type: 'exec', cost_units: 3, priority: 'NORMAL', payload: { program: 'backup.sh' } },
        overlap: 'skip',
        enabled: true,
      },
    })
  })

  test('what the host need not be asked about is refused in the form, naming the field', () => {
    const draft = { ...emptyDraft('UTC'), name: 'n', job_type: 'x' }
    expect(createInput({ ...draft, name: '' })).toEqual({ ok: false, problems: [{ field: 'name', message: 'Name: required' }] })
    expect(createInput({ ...draft, job_type: '' })).toEqual({ ok: false, problems: [{ field: 'job_type', message: 'Job type: required' }] })
    const units = { ok: false, problems: [{ field: 'cost_units', message: 'Units: a whole number of at least 1' }] }
    // As a number field gives them: a fraction, zero, and nothing (emptied, or not a number).
    for (const cost_units of [1.5, 0, null, undefined]) expect(createInput({ ...draft, cost_units })).toEqual(units)
    expect(createInput({ ...draft, payload: '{nope' })).toMatchObject({ ok: false, problems: [{ field: 'payload', message: expect.stringMatching(/^Payload: not JSON/) }] })
  })

  test('an empty form names every required field it misses, the name and the job type alike', () => {
    expect(createInput(emptyDraft('UTC'))).toEqual({
      ok: false,
      problems: [
        { field: 'name', message: 'Name: required' },
        { field: 'job_type', message: 'Job type: required' },
      ],
    })
  })

  test("the host's refusal names the form's field it is about, or none", () => {
    expect(hostProblem('job.cost_units: Too big: expected number to be <=1000000')).toEqual({ field: 'cost_units', message: 'job.cost_units: Too big: expected number to be <=1000000' })
    expect(hostProblem('cron: minute 61 is out of range (0–59)')).toMatchObject({ field: 'cron' })
    expect(hostProblem('The host does not answer')).toMatchObject({ field: null })
  })

  test("a refusal the host answers by its code is the field's the code is about: a name taken is the Name's", () => {
    expect(hostProblem('A schedule named nightly exists', 'duplicate_schedule')).toEqual({ field: 'name', message: 'A schedule named nightly exists' })
    expect(hostProblem('Unknown time zone Mars/Base', 'invalid_timezone')).toMatchObject({ field: 'timezone' })
  })

  test("a length the host's validation refuses is said in words, not in the validator's terms", () => {
    expect(hostProblem('job.job_type: Too big: expected string to have <=200 characters', 'invalid_request')).toEqual({ field: 'job_type', message: 'job.job_type: at most 200 characters' })
  })

  test('editing sends back the job type and queue as the host has them, outer spaces and all; a typed one goes as typed', () => {
    const existing = schedule({ job: { job_type: ' padded ', cost_units: 1, queue: ' lead trail ' } })
    const changed = changeInput({ ...draftOf(existing), cron: '0 3 * * *' })
    expect(changed).toMatchObject({ ok: true, value: { cron: '0 3 * * *', job: { job_type: ' padded ', queue: ' lead trail ' } } })
    expect(createInput({ ...emptyDraft('UTC'), name: 'n', job_type: 'exec ', queue: ' io' })).toMatchObject({ ok: true, value: { job: { job_type: 'exec ', queue: ' io' } } })
    // A type of spaces alone is a name the host takes: sent, and the form says what it holds.
    expect(createInput({ ...emptyDraft('UTC'), name: 'n', job_type: '  ' })).toMatchObject({ ok: true, value: { job: { job_type: '  ' } } })
    expect(outerSpaces('  ')).toBe('is only 2 spaces')
    expect(outerSpaces('exec')).toBeNull()
  })

  test('editing keeps the job fields the form does not show (a PATCH replaces the job whole)', () => {
    const existing = schedule({ job: { job_type: 'backup', cost_units: 2, tags: ['nightly'], max_attempts: 5, constraints: { ssd: true }, queue: 'io', payload: { a: 1 } } })
    const draft = draftOf(existing)
    expect(draft).toMatchObject({ name: 'nightly', cron: '0 2 * * *', job_type: 'backup', cost_units: 2, queue: 'io', payload: '{\n  "a": 1\n}' })
    expect(changeInput({ ...draft, cron: '0 3 * * *' })).toEqual({
      ok: true,
      value: {
        cron: '0 3 * * *',
        timezone: 'UTC',
        job: { job_type: 'backup', cost_units: 2, priority: 'NORMAL', queue: 'io', payload: { a: 1 }, tags: ['nightly'], max_attempts: 5, constraints: { ssd: true } },
        overlap: 'allow',
      },
    })
  })
})

describe('the schedules store', () => {
  test('lists, creates (sorted in by name), disables and deletes through the API', async () => {
    const { fetcher, calls } = fakeFetch({
      'GET /api/schedules': { schedules: [schedule({ name: 'zeta' })] },
      'POST /api/schedules': (body: any) => ({ schedule: schedule({ name: body.name }) }),
      'PATCH /api/schedules/zeta': (body: any) => ({ schedule: schedule({ name: 'zeta', enabled: body.enabled, next_fire_at: null, next_fire_times: [] }) }),
      'DELETE /api/schedules/alpha': { schedule: schedule({ name: 'alpha' }) },
    })
    const store = new SchedulesState(new ApiClient(connection, fetcher))
    await store.refresh()
    expect(store.all.map((s) => s.name)).toEqual(['zeta'])
    expect(await store.create({ ...emptyDraft('UTC'), name: 'alpha', job_type: 'x' })).toBe(true)
    expect(store.all.map((s) => s.name)).toEqual(['alpha', 'zeta'])
    await store.setEnabled('zeta', false)
    expect(store.all.find((s) => s.name === 'zeta')).toMatchObject({ enabled: false, next_fire_at: null })
    expect(calls.find((c) => c.method === 'PATCH')!.body).toEqual({ enabled: false })
    await store.remove('alpha')
    expect(store.all.map((s) => s.name)).toEqual(['zeta'])
  })

  test("the host's refusal of a draft is the form's error, and nothing is added", async () => {
    const refusal = () => new Response(JSON.stringify({ code: 'invalid_cron', detail: 'cron: minute 61 is out of range (0–59)' }), { status: 400 })
    const { fetcher } = fakeFetch({ 'POST /api/schedules': refusal })
    const store = new SchedulesState(new ApiClient(connection, fetcher))
    expect(await store.create({ ...emptyDraft('UTC'), name: 'n', cron: '61 * * * *', job_type: 'x' })).toBe(false)
    expect(store.formErrors).toEqual([{ field: 'cron', message: 'cron: minute 61 is out of range (0–59)' }])
    expect(store.all).toEqual([])
  })

  test('a schedule event, or a move of a last run\'s job, calls for a fresh read; other jobs do not', async () => {
    const { fetcher } = fakeFetch({ 'GET /api/schedules': { schedules: [schedule({ last_run: { fire_at: iso(T0), outcome: 'FIRED', reason: null, job_id: 'job-7', job_state: 'QUEUED' } })] } })
    const store = new SchedulesState(new ApiClient(connection, fetcher))
    await store.refresh()
    expect(store.apply(event('SCHEDULE_FIRED', { entity_type: 'SCHEDULE', job_id: 'job-8' }))).toBe(true)
    expect(store.apply(event('JOB_DONE', { job_id: 'job-7' }))).toBe(true)
    expect(store.apply(event('JOB_DONE', { job_id: 'job-9' }))).toBe(false)
    expect(store.apply(event('LEASE_GRANTED', { job_id: 'job-7' }))).toBe(false)
  })
})

describe('the Schedules view', () => {
  const mounted: ReturnType<typeof mount>[] = []
  afterEach(() => {
    for (const component of mounted.splice(0)) unmount(component)
    document.body.innerHTML = ''
  })
  const text = (el: Element | null | undefined) => el?.textContent?.replace(/\s+/g, ' ').trim()

  async function view(schedules: Schedule[], routes: Parameters<typeof fakeFetch>[0] = {}) {
    const { fetcher, calls } = fakeFetch({ 'GET /api/schedules': { schedules }, ...routes })
    const store = new SchedulesState(new ApiClient(connection, fetcher))
    await store.refresh()
    const target = document.createElement('div')
    document.body.append(target)
    mounted.push(mount(SchedulesView, { target, props: { schedules: store, now: T0 } }))
    flushSync()
    return { el: target, store, calls }
  }

  /** Focuses New schedule and presses it, as a keyboard user does; answers the button. */
  const openNewSchedule = (el: HTMLElement): HTMLButtonElement => {
    const button = [...el.querySelectorAll<HTMLButtonElement>('button')].find((b) => b.textContent === 'New schedule')!
    button.focus()
    button.click()
    flushSync()
    return button
  }

  test("a schedule in another time zone than the browser's says which zone its next runs are shown in; one in the browser's zone needs not", async () => {
    const here = localTimeZone()
    const elsewhere = here === 'Asia/Kolkata' ? 'America/Lima' : 'Asia/Kolkata'
    const { el } = await view([schedule({ name: 'away', timezone: elsewhere }), schedule({ name: 'home', timezone: here })])
    expect(text(el.querySelector('tr[data-schedule="away"] [data-testid="schedule-next-zone"]'))).toBe(`shown in ${here}, this browser's time zone`)
    expect(el.querySelector('tr[data-schedule="home"] [data-testid="schedule-next-zone"]')).toBeNull()
  })

  test("a schedule's Delete is off while its delete is on its way to the host: it cannot be asked again meanwhile", async () => {
    let answer: ((response: Response) => void) | null = null
    const { el, calls } = await view([schedule()], { 'DELETE /api/schedules/nightly': () => new Promise<Response>((resolve) => (answer = resolve)) })
    ;(el.querySelector('button[aria-label="Delete schedule nightly"]') as HTMLButtonElement).click()
    flushSync()
    ;[...el.querySelectorAll<HTMLButtonElement>('button')].find((b) => b.textContent === 'Yes, delete')!.click()
    flushSync()
    await vi.waitFor(() => expect(answer).not.toBeNull())
    const remove = el.querySelector('button[aria-label="Delete schedule nightly"]') as HTMLButtonElement
    expect(remove.getAttribute('aria-disabled')).toBe('true')
    remove.click()
    flushSync()
    expect([...el.querySelectorAll<HTMLButtonElement>('button')].find((b) => b.textContent === 'Yes, delete')).toBeUndefined()
    answer!(new Response(JSON.stringify({ schedule: schedule() }), { status: 200, headers: { 'content-type': 'application/json' } }))
    await until(() => el.querySelector('button[aria-label="Delete schedule nightly"]') === null, 2000, 'the row went')
    expect(calls.filter((c) => c.method === 'DELETE')).toHaveLength(1)
  })

  test('New schedule opens its form with the focus in its first field: the button that had it is off while the form is open', async () => {
    const { el } = await view([schedule()])
    const button = openNewSchedule(el)
    expect(button.disabled).toBe(true)
    expect(document.activeElement).toBe(el.querySelector('[data-testid="schedule-form"] input[name="name"]'))
  })

  test('a form closed with Cancel gives the focus back to New schedule, not to the page', async () => {
    const { el } = await view([schedule()])
    const button = openNewSchedule(el)
    const cancel = [...el.querySelectorAll<HTMLButtonElement>('[data-testid="schedule-form"] button')].find((b) => b.textContent === 'Cancel')!
    cancel.focus()
    cancel.click()
    await until(() => el.querySelector('[data-testid="schedule-form"]') === null, 2000, 'the form closed')
    await until(() => document.activeElement === button, 2000, 'the focus back on New schedule')
    expect(button.disabled).toBe(false)
  })

  test('Escape closes a schedule form as its Cancel does, giving the focus back to New schedule', async () => {
    const { el } = await view([schedule()])
    const button = openNewSchedule(el)
    document.activeElement!.dispatchEvent(new KeyboardEvent('keydown', { key: 'Escape', bubbles: true, cancelable: true }))
    await until(() => el.querySelector('[data-testid="schedule-form"]') === null, 2000, 'the form closed')
    await until(() => document.activeElement === button, 2000, 'the focus back on New schedule')
  })

  test('each schedule shows its expression in words, its next runs (the first with the time left) and its last run', async () => {
    const { el } = await view([
      schedule(),
      schedule({ name: 'off', enabled: false, state: 'paused', next_fire_at: null, next_fire_times: [], last_run: { fire_at: iso(T0 - HOUR), outcome: 'SKIPPED', reason: 'overlap: the last run’s job j has not finished', job_id: null, job_state: null } }),
    ])
    const [nightly, off] = [...el.querySelectorAll('tbody tr')]
    expect(text(nightly!.querySelector('[data-testid="schedule-words"]'))).toBe('At 02:00, every day')
    const next = nightly!.querySelectorAll('[data-testid="schedule-next"] div')
    expect(next).toHaveLength(3)
    expect(text(next[0])).toContain('in 2 h')
    expect(text(nightly!.querySelector('[data-testid="schedule-last-run"]'))).toBe('never')
    expect((nightly!.querySelector('input[type="checkbox"]') as HTMLInputElement).checked).toBe(true)
    expect(text(off!.querySelector('[data-testid="schedule-next"]'))).toBe('disabled')
    expect(text(off!.querySelector('[data-testid="schedule-last-run"]'))).toContain('skipped: overlap')
    expect((off!.querySelector('input[type="checkbox"]') as HTMLInputElement).checked).toBe(false)
  })

  test('an enabled schedule that does not fire says why: its cron has no firing left, or this host can no longer read it', async () => {
    const none = { next_fire_at: null, next_fire_times: [] }
    const { el } = await view([schedule({ name: 'once', state: 'finished', ...none }), schedule({ name: 'zone-gone', state: 'stopped', ...none })])
    const [once, gone] = [...el.querySelectorAll('tbody tr')]
    expect(text(once!.querySelector('[data-testid="schedule-next"]'))).toBe('none: its cron has no firing left')
    expect(text(gone!.querySelector('[data-testid="schedule-next"]'))).toBe('none: this host can no longer read its cron or time zone; edit them')
  })

  test('the form puts the expression in words as it is typed, and creates the schedule', async () => {
    const created = vi.fn((body: any) => ({ schedule: schedule({ name: body.name, cron: body.cron }) }))
    const { el, calls } = await view([], { 'POST /api/schedules': created })
    expect(text(el.querySelector('[data-testid="schedules-empty"]'))).toContain('No schedules yet')
    ;(el.querySelector('header button.primary') as HTMLButtonElement).click()
    flushSync()
    const form = el.querySelector('[data-testid="schedule-form"]')!
    const type = (name: string, value: string) => typeText(form.querySelector(`[name="${name}"]`) as HTMLInputElement, value)
    type('name', 'weekdays')
    type('cron', '0 9 * * 1-5')
    type('timezone', 'Europe/Berlin')
    type('job_type', 'report')
    type('cost_units', '2')
    expect(text(form.querySelector('[data-testid="cron-words"]'))).toBe('At 09:00, Monday through Friday (Europe/Berlin)')
    ;(form.querySelector('button[type="submit"]') as HTMLButtonElement).click()
    await vi.waitFor(() => expect(el.querySelector('tr[data-schedule="weekdays"]')).not.toBeNull())
    expect(calls.find((c) => c.method === 'POST')!.body).toMatchObject({ name: 'weekdays', cron: '0 9 * * 1-5', timezone: 'Europe/Berlin', job: { job_type: 'report', cost_units: 2 } })
    expect(el.querySelector('[data-testid="schedule-form"]')).toBeNull()
  })

  test('an edit saved after the schedule changed since the form opened overwrites nothing: the form says so and stays open', async () => {
    const stale = () => new Response(JSON.stringify({ code: 'precondition_failed', detail: 'Schedule nightly changed since it was read' }), { status: 412 })
    const { el, calls } = await view([schedule({ revision: 4 })], { 'PATCH /api/schedules/nightly': stale })
    ;[...el.querySelectorAll<HTMLButtonElement>('tr[data-schedule="nightly"] button')].find((b) => b.textContent === 'Edit')!.click()
    flushSync()
    const form = el.querySelector('[data-testid="schedule-form"]')!
    typeText(form.querySelector('[name="cost_units"]') as HTMLInputElement, '3')
    ;(form.querySelector('button[type="submit"]') as HTMLButtonElement).click()
    await vi.waitFor(() => expect(form.querySelector('[data-testid="schedule-form-error"]')).not.toBeNull())
    expect(text(form.querySelector('[data-testid="schedule-form-error"]'))).toBe(CHANGED_SINCE_OPENED)
    // The save named the revision the form opened with.
    expect(calls.filter((c) => c.method === 'PATCH').map((c) => [c.headers['if-match'], c.body])).toEqual([['"4"', expect.objectContaining({ job: expect.objectContaining({ cost_units: 3 }) })]])
    expect(el.querySelector('[data-testid="schedule-form"]')).not.toBeNull()
  })

  test('a form that cannot be sent says why next to the field, and sends nothing', async () => {
    const { el, calls } = await view([])
    ;(el.querySelector('header button.primary') as HTMLButtonElement).click()
    flushSync()
    const form = el.querySelector('[data-testid="schedule-form"]')!
    const field = (name: string) => form.querySelector(`[name="${name}"]`) as HTMLInputElement
    typeText(field('name'), 'n')
    typeText(field('job_type'), 'x')
    typeText(field('cost_units'), '')
    ;(form.querySelector('button[type="submit"]') as HTMLButtonElement).click()
    await vi.waitFor(() => expect(form.querySelector('[data-testid="problem-cost_units"]')).not.toBeNull())
    expect(text(form.querySelector('[data-testid="problem-cost_units"]'))).toBe('Units: a whole number of at least 1')
    expect(form.querySelector('[name="cost_units"]')!.getAttribute('aria-invalid')).toBe('true')
    expect(calls.filter((c) => c.method === 'POST')).toEqual([])
  })

  test('an empty form marks the name and the job type invalid at once, each with its message under it', async () => {
    const { el, calls } = await view([])
    ;(el.querySelector('header button.primary') as HTMLButtonElement).click()
    flushSync()
    const form = el.querySelector('[data-testid="schedule-form"]')!
    ;(form.querySelector('button[type="submit"]') as HTMLButtonElement).click()
    await vi.waitFor(() => expect(form.querySelector('[data-testid="problem-job_type"]')).not.toBeNull())
    for (const [name, message] of [['name', 'Name: required'], ['job_type', 'Job type: required']]) {
      expect(form.querySelector(`[name="${name}"]`)!.getAttribute('aria-invalid'), name).toBe('true')
      expect(text(form.querySelector(`[data-testid="problem-${name}"]`))).toBe(message)
    }
    expect(calls.filter((c) => c.method === 'POST')).toEqual([])
  })

  test("the host's refusal of a taken name is shown under the Name field, which is marked invalid", async () => {
    const { el } = await view([], {
      'POST /api/schedules': () => new Response(JSON.stringify({ code: 'duplicate_schedule', detail: 'A schedule named nightly exists' }), { status: 409 }),
    })
    ;(el.querySelector('header button.primary') as HTMLButtonElement).click()
    flushSync()
    const form = el.querySelector('[data-testid="schedule-form"]')!
    typeText(form.querySelector('[name="name"]') as HTMLInputElement, 'nightly')
    typeText(form.querySelector('[name="job_type"]') as HTMLInputElement, 'x')
    ;(form.querySelector('button[type="submit"]') as HTMLButtonElement).click()
    await vi.waitFor(() => expect(form.querySelector('[data-testid="problem-name"]')).not.toBeNull())
    expect(text(form.querySelector('[data-testid="problem-name"]'))).toBe('A schedule named nightly exists')
    expect(form.querySelector('[name="name"]')!.getAttribute('aria-invalid')).toBe('true')
    expect(form.querySelector('[data-testid="schedule-form-error"]')).toBeNull()
  })

  test("the host's words that quote a name (a refusal, a skipped run's reason) are isolated, their bidi controls shown as escapes", async () => {
    const spoofed = 'night\u202Eylt'
    const reason = `invalid_job_type: job type ${spoofed} is not known`
    const { el } = await view([schedule({ name: 'off', last_run: { fire_at: iso(T0), outcome: 'SKIPPED', reason, job_id: null, job_state: null } })], {
      'POST /api/schedules': () => new Response(JSON.stringify({ code: 'duplicate_schedule', detail: `A schedule named ${spoofed} exists` }), { status: 409 }),
    })
    const skipped = el.querySelector('[data-testid="schedule-last-run"]')!
    expect(skipped.textContent).not.toMatch(/[\u202a-\u202e]/)
    expect(skipped.querySelector('bdi')).not.toBeNull()
    expect(skipped.querySelector('[title]')!.getAttribute('title')).toBe('invalid_job_type: job type night\\u202eylt is not known')
    ;(el.querySelector('header button.primary') as HTMLButtonElement).click()
    flushSync()
    const form = el.querySelector('[data-testid="schedule-form"]')!
    typeText(form.querySelector('[name="name"]') as HTMLInputElement, spoofed)
    typeText(form.querySelector('[name="job_type"]') as HTMLInputElement, 'x')
    ;(form.querySelector('button[type="submit"]') as HTMLButtonElement).click()
    await vi.waitFor(() => expect(form.querySelector('[data-testid="problem-name"]')).not.toBeNull())
    const problem = form.querySelector('[data-testid="problem-name"]')!
    expect(problem.textContent).toBe('A schedule named night\\u202eylt exists')
    expect(problem.querySelector('bdi')).not.toBeNull()
  })

  test("Create, off while the form is sent, hands focus to the field a refusal is about: never to the page", async () => {
    const { el } = await view([], {
      'POST /api/schedules': () => new Response(JSON.stringify({ code: 'duplicate_schedule', detail: 'A schedule named nightly exists' }), { status: 409 }),
    })
    openNewSchedule(el)
    flushSync()
    const form = el.querySelector('[data-testid="schedule-form"]')!
    typeText(form.querySelector('[name="name"]') as HTMLInputElement, 'nightly')
    typeText(form.querySelector('[name="job_type"]') as HTMLInputElement, 'x')
    const create = form.querySelector('button[type="submit"]') as HTMLButtonElement
    create.focus()
    create.click()
    flushSync()
    expect(create.disabled).toBe(true)
    // A browser takes focus from a button that goes off (happy-dom blurs no disabled element).
    create.disabled = false
    create.blur()
    create.disabled = true
    expect(document.activeElement).toBe(document.body)
    await vi.waitFor(() => expect(form.querySelector('[data-testid="problem-name"]')).not.toBeNull())
    flushSync()
    expect(document.activeElement).toBe(form.querySelector('[name="name"]'))
  })

  test('the text fields the host limits to 200 characters take no more (the time zone 100)', async () => {
    const { el } = await view([])
    ;(el.querySelector('header button.primary') as HTMLButtonElement).click()
    flushSync()
    const form = el.querySelector('[data-testid="schedule-form"]')!
    const limits = Object.fromEntries(['name', 'cron', 'timezone', 'job_type', 'queue'].map((name) => [name, form.querySelector(`[name="${name}"]`)!.getAttribute('maxlength')]))
    expect(limits).toEqual({ name: '200', cron: '200', timezone: '100', job_type: '200', queue: '200' })
  })
})
