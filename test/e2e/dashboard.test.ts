/**
 * The dashboard in Debian's Chromium against a real host with its pool of two local workers:
 * jobs appear, run and finish live; the busy rating changes usable capacity; a blocker halt is
 * answered from the page; a running job is canceled from the page; a schedule is created,
 * explained in words and disabled; a scheduled job is run now or canceled, a queue paused and
 * resumed, a failed job retried, jobs retried and purged in bulk; a running job's progress moves
 * as its worker reports it; a job that runs out of attempts is marked a dead letter live; a read
 * that got no answer is read again while the stream stays open; a worker's token is told it
 * cannot open the page, and a revoked admin token's page asks for a token. The host runs on a
 * ManualClock kept in step with real time, so the 180 s file-lease retry is reached by moving it;
 * lease countdowns follow the host's clock, also when it moves.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Browser, Locator, Page } from 'playwright-core'
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import { ManualClock, SECOND } from '../../src-main/engine/rules/clock'
import { buildRenderer, hasChromium, launchChromium, RENDERER_DIR } from '../helpers/chromium'
import { startTestHost, type TestHost } from '../helpers/host'
import { until } from '../helpers/until'
import { TestRedis } from '../redis/redis-server'
import { createScopedToken, revokeScopedToken } from '../../src-main/data-dir/worker-tokens'
import { METRICS } from '../../src-renderer/lib/api'

const ROOT = join(import.meta.dirname, '../..')
const SHOTS = join(ROOT, 'test-results/screenshots')
/** The README's screenshot, and where each named part of the window is in it (docs/dashboard.md). */
const README_SHOT = join(ROOT, 'docs/dashboard.png')
const README_LAYOUT = join(ROOT, 'docs/dashboard.layout.json')
/** How far (px) a part may move or grow before the screenshot no longer shows the window as it is. */
const LAYOUT_SLACK_PX = 24
const Q = '/api/scheduler'

let host: TestHost
let browser: Browser
let page: Page
let offset = 0
let clockTimer: ReturnType<typeof setInterval>
const clock = new ManualClock(Date.now())
const pageProblems: string[] = []
/** Every address the page asked for and did not find (a favicon, a script): there should be none. */
const notFound: string[] = []

/**
 * Reports of a page's trouble: an uncaught error, an error on its console, an answer of the host
 * that is a server error. `Failed to load resource` lines are the console's echo of an HTTP
 * error status, which the tests provoke on purpose (a refused run-now, a wrong token); a 404
 * is caught apart (`notFound`), a 5xx here.
 */
function watch(target: Page): void {
  target.on('console', (message) => {
    if (message.type() === 'error' && !/Failed to load resource/.test(message.text())) pageProblems.push(message.text())
  })
  target.on('pageerror', (error) => pageProblems.push(String(error)))
  target.on('response', (response) => {
    if (response.status() === 404) notFound.push(response.url())
    if (response.status() >= 500) pageProblems.push(`${response.status()} ${response.url()}`)
  })
}

/** Keeps the host's clock at real time plus `offset`. */
const syncClock = () => clock.set(Date.now() + offset)

async function json<T = any>(response: Response): Promise<T> {
  const body = await response.json()
  if (!response.ok) throw new Error(`${response.status} ${JSON.stringify(body)}`)
  return body as T
}

const submit = async (body: Record<string, unknown>): Promise<string> =>
  (await json(await host.call(`${Q}/jobs/submit`, { method: 'POST', json: { cost_units: 10, ...body } }))).job.job_id

const jobState = async (id: string): Promise<string> => (await json(await host.call(`${Q}/jobs/${id}`))).job.state

/** A job as the worker API hands it to a worker. */
interface Claim {
  job_id: string
  lease_id: string
  lease_token: string
  attempt_id: string
}

/**
 * Halts a job on a file another job holds: two writers of one file, on a queue the pool does not
 * take, driven through the worker API; the second is refused the file, and again at its one retry
 * 180 s later (the host's clock moved there, both jobs heartbeating), which halts it on a blocker.
 */
async function haltOnFile(file: string, queue: string): Promise<{ holder: string; waiter: string; holding: Claim }> {
  const holder = await submit({ job_type: 'file.write', queue, payload: { path: file, content: 'a' } })
  const waiter = await submit({ job_type: 'file.write', queue, payload: { path: file, content: 'b' } })
  const claim = async (): Promise<Claim> => json(await host.call('/internal/worker/claim', { method: 'POST', json: { worker_id: 'ext-1', streams: [queue], max_wait_ms: 0 } }))
  const claims = [await claim(), await claim()]
  const byJob = Object.fromEntries(claims.map((c) => [c.job_id, c]))
  const [a, b] = [byJob[holder]!, byJob[waiter]!]
  expect(a && b).toBeTruthy()
  const acquire = (c: Claim) => host.call('/api/files/leases/acquire', { method: 'POST', json: { file, owner_id: `job:${c.job_id}`, lease_id: c.lease_id } })
  expect((await acquire(a)).status).toBe(200)
  expect((await acquire(b)).status).toBe(409) // held: one retry at +180 s
  // Move the host's clock 184 s in steps, both workers (and the holder's file) heartbeating.
  const heartbeat = async () => {
    for (const c of [a, b]) {
      await json(await host.call('/internal/worker/heartbeat', { method: 'POST', json: { worker_id: 'ext-1', job_id: c.job_id, lease_token: c.lease_token } }))
    }
    await json(await host.call('/api/files/leases/heartbeat', { method: 'POST', json: { file, owner_id: `job:${a.job_id}` } }))
  }
  for (let step = 0; step < 23; step++) {
    offset += 8 * SECOND
    syncClock()
    await heartbeat()
  }
  const halted = await acquire(b)
  expect(halted.status).toBe(409)
  expect((await halted.json()).code).toBe('blocked')
  expect(await jobState(waiter)).toBe('BLOCKED')
  return { holder, waiter, holding: a }
}

/** `m:ss` or `h:mm:ss` in seconds; NaN for anything else (`expired`). */
const seconds = (clock: string): number => (/^\d+(:\d\d)+$/.test(clock) ? clock.split(':').reduce((total, part) => total * 60 + Number(part), 0) : NaN)

/** Seconds between the countdown the page shows for a lease and the host's own time left on it. */
async function countdownGap(leaseId: string): Promise<number> {
  const shown = seconds(((await page.locator(`tr[data-lease="${leaseId}"] .countdown`).textContent()) ?? '').trim())
  const { now, leases } = await json(await host.call('/api/leases'))
  const lease = leases.find((l: { lease_id: string }) => l.lease_id === leaseId)
  if (!lease) throw new Error(`lease ${leaseId} is not active`)
  return Math.abs(shown - (Date.parse(lease.expires_at) - Date.parse(now)) / 1000)
}

type Box = [x: number, y: number, width: number, height: number]

/** Where each named part of the page is: its headings, navigation entries and table columns, by their text. */
const layoutOf = (target: Page): Promise<Record<string, Box>> =>
  target.evaluate(() => {
    const boxes: Record<string, Box> = {}
    for (const el of document.querySelectorAll('h1, h2, nav a, th')) {
      const name = `${el.tagName.toLowerCase()} ${(el.textContent ?? '').replace(/\s+/g, ' ').trim()}`
      const r = el.getBoundingClientRect()
      boxes[name] ??= [Math.round(r.x), Math.round(r.y), Math.round(r.width), Math.round(r.height)]
    }
    return boxes
  })

/**
 * The parts whose place differs by more than the slack, or that one layout has and the other not.
 * A table column is held to its row (y and height) only: how wide a column is follows the text
 * in its cells (a state with its waiting line, a time in the locale's format), which differs
 * from run to run; the headings and the navigation are held whole.
 */
function layoutDrift(committed: Record<string, Box>, now: Record<string, Box>): string[] {
  const names = [...new Set([...Object.keys(committed), ...Object.keys(now)])]
  return names.filter((name) => {
    const [a, b] = [committed[name], now[name]]
    const held = name.startsWith('th ') ? [1, 3] : [0, 1, 2, 3]
    return !a || !b || held.some((i) => Math.abs(a[i]! - b[i]!) > LAYOUT_SLACK_PX)
  })
}

/** What holds keyboard focus, by a selector it matches; 'body' when focus fell to the page. */
const focusedMatches = (selector: string): Promise<boolean | 'body'> =>
  page.evaluate((selector) => (document.activeElement === null || document.activeElement === document.body ? 'body' : document.activeElement.matches(selector)), selector)

/** Types into a field as a person does: selects what is in it, then presses each key. */
async function typeInto(field: ReturnType<Page['locator']>, text: string): Promise<void> {
  await field.selectText()
  await field.pressSequentially(text)
}

/**
 * Whether a button can be brought into sight, and pressed, with the page not scrolled sideways:
 * it is in the window, or its table's own box scrolls to it (a table wider than a narrow window
 * scrolls in its box), and nothing covers it there.
 */
async function inSight(button: Locator): Promise<boolean> {
  await button.scrollIntoViewIfNeeded()
  return button.evaluate((el) => {
    const box = el.getBoundingClientRect()
    const hit = document.elementFromPoint(box.x + box.width / 2, box.y + box.height / 2)
    return window.scrollX === 0 && box.left >= 0 && box.right <= document.documentElement.clientWidth && hit !== null && el.contains(hit)
  })
}

const shoot = async (name: string) => {
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true })
}

describe.skipIf(!hasChromium())('dashboard in Chromium against a real host', () => {
  beforeAll(async () => {
    // The host serves the built renderer; build it once from the sources under test.
    buildRenderer()
    mkdirSync(SHOTS, { recursive: true })
    clockTimer = setInterval(syncClock, 50)
    host = await startTestHost(
      { workers: 2, leaseTtlS: 10, heartbeatGraceS: 2, statsIntervalS: 1 },
      { clock, rendererDir: RENDERER_DIR },
    )
    await until(async () => (await json(await host.call('/api/workers'))).workers.filter((w: any) => w.state === 'ready').length === 2, 20_000, 'two ready workers')
    browser = await launchChromium()
    // The locale is pinned (24-hour en-GB), so the times the tests read are known; a test of its
    // own opens the window in other locales.
    page = await browser.newPage({ viewport: { width: 1280, height: 900 }, locale: 'en-GB' })
    watch(page)
    await page.goto(`${host.url}/#token=${host.token}`)
  }, 150_000)

  // An uncaught error or a console error fails the test during which it happened.
  afterEach(() => {
    expect(pageProblems.splice(0)).toEqual([])
  })

  afterAll(async () => {
    await browser?.close()
    clearInterval(clockTimer)
    await host?.dispose()
  })

  test('overview shows capacity, live, and keeps the token out of the address bar', async () => {
    await page.getByTestId('stream-status').filter({ hasText: 'Live' }).waitFor()
    await expect.poll(() => page.getByTestId('cap-total').textContent()).toBe('100')
    expect(await page.getByTestId('cap-usable').textContent()).toBe('100')
    expect(page.url()).not.toContain(host.token)
    await page.getByTestId('leases-empty').waitFor()
    // The database's size and how long finished jobs are kept (GET /api/storage).
    await expect.poll(() => page.getByTestId('storage-retention').textContent()).toBe('7 days')
    expect(await page.getByTestId('storage-size').textContent()).toMatch(/^\d+(\.\d)? (KB|MB)$/)
  })

  test('submitted jobs appear, run and finish live, with their leases counting down', async () => {
    await page.goto(`${host.url}/#/overview`)
    const ids = [
      await submit({ job_type: 'sleep', addon_id: 'visuals', payload: { ms: 2500 } }),
      await submit({ job_type: 'sleep', addon_id: 'audio', payload: { ms: 2500 } }),
    ]
    // Both run at once (two workers): two active leases with a countdown and a heartbeat age.
    await page.locator('[data-testid="leases"] tbody tr').nth(1).waitFor({ timeout: 5000 })
    await expect.poll(() => page.getByTestId('cap-leased').textContent()).toBe('20')
    expect(await page.locator('[data-testid="leases"] .countdown').first().textContent()).toMatch(/0:\d\d/)
    // The recent jobs panel below the leases comes with the jobs list, which may land after them:
    // the layout is taken once it shows both jobs.
    for (const id of ids) await page.locator(`[data-testid="jobs"] tr[data-job="${id}"]`).waitFor({ timeout: 5000 })
    await shoot('overview')
    // The README's screenshot: refreshed on request (UPDATE_README_SCREENSHOT=1), so a plain run
    // never changes a tracked file; otherwise the window's layout now is held to the one it shows.
    const layout = await layoutOf(page)
    if (process.env.UPDATE_README_SCREENSHOT) {
      await page.screenshot({ path: README_SHOT })
      writeFileSync(README_LAYOUT, `{\n${Object.entries(layout).map(([name, box]) => `  ${JSON.stringify(name)}: ${JSON.stringify(box)}`).join(',\n')}\n}\n`)
    } else {
      const drift = layoutDrift(JSON.parse(readFileSync(README_LAYOUT, 'utf8')) as Record<string, Box>, layout)
      expect(drift.map((name) => `${name} ${JSON.stringify(layout[name] ?? null)}`), 'docs/dashboard.png no longer shows the window: UPDATE_README_SCREENSHOT=1 npx vitest run test/e2e/dashboard.test.ts, then commit it with docs/dashboard.layout.json').toEqual([])
    }

    await page.click('nav a[href="#/jobs"]')
    for (const id of ids) await page.locator(`tr[data-job="${id}"][data-state="RUNNING"]`).waitFor({ timeout: 5000 })
    // Made in the same second, the two ids share their start; the table shows their ends.
    expect(await Promise.all(ids.map((id) => page.locator(`tr[data-job="${id}"] td`).first().textContent()))).toEqual(ids.map((id) => `…${id.slice(-8)}`))
    await shoot('jobs-running')
    for (const id of ids) await page.locator(`tr[data-job="${id}"][data-state="DONE"]`).waitFor({ timeout: 10_000 })

    // Search by add-on, then by a type nothing has.
    await page.getByLabel('Add-on').fill('visuals')
    await page.getByRole('button', { name: 'Search' }).click()
    await expect.poll(() => page.locator('[data-testid="jobs"] tbody tr').count()).toBe(1)
    // The overview lists the newest jobs whatever the Jobs view's filter; back there, the filter holds.
    await page.click('nav a[href="#/overview"]')
    for (const id of ids) await page.locator(`[data-testid="jobs"] tr[data-job="${id}"]`).waitFor({ timeout: 5000 })
    await page.click('nav a[href="#/jobs"]')
    await expect.poll(() => page.locator('[data-testid="jobs"] tbody tr').count()).toBe(1)
    await page.getByLabel('Type').fill('nothing-like-this')
    await page.getByRole('button', { name: 'Search' }).click()
    await page.getByTestId('jobs-empty').waitFor()
    await page.getByRole('button', { name: 'Clear filters' }).click()
    await page.locator(`tr[data-job="${ids[0]}"]`).waitFor()
    // Search by a part of an id, as the table shows ids shortened; then by text of a type, in another case.
    const part = ids[1]!.slice(-6)
    await page.getByLabel('Id or text').fill(part)
    await page.getByRole('button', { name: 'Search' }).click()
    await expect.poll(() => page.locator('[data-testid="jobs"] tbody tr').count()).toBe(1)
    await page.locator(`tr[data-job="${ids[1]}"]`).waitFor()
    expect((await json(await host.call(`${Q}/jobs?search=${part}`))).jobs.map((j: { job_id: string }) => j.job_id)).toEqual([ids[1]])
    await page.getByLabel('Id or text').fill('SLE')
    await page.getByRole('button', { name: 'Search' }).click()
    await page.locator(`tr[data-job="${ids[0]}"]`).waitFor()
    expect(await page.getByTestId('bulk-purge').isDisabled()).toBe(true) // a search cannot select a bulk action's jobs
    await page.getByRole('button', { name: 'Clear filters' }).click()
    await expect.poll(() => page.getByLabel('Id or text').inputValue()).toBe('')
    await shoot('jobs')

    // The job page: result, the attempt the host reports (a local worker, succeeded), the timeline.
    await page.click(`tr[data-job="${ids[0]}"] a`)
    await page.getByTestId('job-result').waitFor()
    const attempts = page.locator('[data-testid="attempts"] tbody tr')
    expect(await attempts.count()).toBe(1)
    const [attempt] = (await json(await host.call(`${Q}/jobs/${ids[0]}/attempts`))).attempts
    expect(attempt).toMatchObject({ attempt: 1, outcome: 'SUCCEEDED', disposition: 'FINAL', error: null })
    expect(await attempts.first().textContent()).toContain(attempt.worker_id)
    expect(await attempts.first().getByTestId('attempt-outcome').textContent()).toBe('SUCCEEDED')
    expect(await attempts.first().getByTestId('attempt-disposition').textContent()).toBe('final')
    expect(await page.getByTestId('timeline').textContent()).toContain('JOB_DONE')
    // Times in the event data (expires_at=…) read as times, not epoch milliseconds.
    expect(await page.getByTestId('timeline').textContent()).toMatch(/expires_at=\d\d:\d\d:\d\d/)
    expect(await page.getByTestId('timeline').textContent()).not.toMatch(/=\d{13}\b/)
    await shoot('job-detail')
  })

  test('setting the busy rating changes usable capacity', async () => {
    await page.goto(`${host.url}/#/overview`)
    await page.getByTestId('cap-usable').waitFor()
    await page.getByLabel('Manual', { exact: true }).check()
    await page.getByLabel('Manual busy rating').fill('8')
    await page.getByRole('button', { name: 'Apply' }).click()
    await expect.poll(() => page.getByTestId('cap-usable').textContent()).toBe('20')
    // Apply is off once applied: focus goes back to the mode chosen, not to the page.
    await expect.poll(() => focusedMatches('input[name="busy-mode"][value="manual"]')).toBe(true)
    expect(await page.getByTestId('busy-label').textContent()).toBe('8 (manual)')
    expect(await page.getByTestId('cap-reserved').textContent()).toBe('80')
    expect((await json(await host.call('/api/capacity'))).usable).toBe(20)
    await shoot('capacity-busy-8')
    // A change through the API shows up by itself (CAPACITY_CHANGED on the stream); a rating
    // with decimals shows as stored, on the slider and its figure as in the label.
    await json(await host.call('/api/capacity', { method: 'PUT', json: { busy_rating: 9.95 } }))
    await expect.poll(() => page.getByTestId('busy-label').textContent()).toBe('9.95 (manual)')
    const slider = page.getByLabel('Manual busy rating')
    expect(await slider.inputValue()).toBe('9.95')
    expect(await page.locator('form.busy output').textContent()).toBe('9.95')
    expect(await page.getByRole('button', { name: 'Apply' }).isDisabled()).toBe(true)
    // Moved down a step by the keyboard, it stands for 9.
    await slider.focus()
    await slider.press('ArrowLeft')
    expect(await page.locator('form.busy output').textContent()).toBe('9')
    await json(await host.call('/api/capacity', { method: 'PUT', json: { busy_rating: 0 } }))
    await expect.poll(() => page.getByTestId('cap-usable').textContent()).toBe('100')

    // The total units number field, erased key by key and typed into.
    const total = page.getByLabel('Total units', { exact: true })
    await total.click()
    await total.press('End')
    for (let i = 0; i < 3; i++) await total.press('Backspace')
    expect(await total.inputValue()).toBe('')
    await page.getByRole('button', { name: 'Set', exact: true }).click()
    expect(await page.getByTestId('total-problem').textContent()).toBe('Total units: a whole number from 1 to 1,000,000')
    await total.pressSequentially('150')
    await page.getByRole('button', { name: 'Set', exact: true }).click()
    await expect.poll(() => page.getByTestId('cap-total').textContent()).toBe('150')
    await expect.poll(() => focusedMatches('input[aria-label="Total units"]')).toBe(true)
    expect((await json(await host.call('/api/capacity'))).total_units).toBe(150)
    await typeInto(total, '100')
    await page.getByRole('button', { name: 'Set', exact: true }).click()
    await expect.poll(async () => (await json(await host.call('/api/capacity'))).total_units).toBe(100)
  })

  test('a blocker halt is answered from the page and the job is requeued', async () => {
    const file = '/data/out/report.pdf'
    const { holder, waiter, holding: a } = await haltOnFile(file, 'manual')

    // The page shows it live: a count in the tab, the report on the blockers view.
    await page.getByTestId('blocker-count').filter({ hasText: '1' }).waitFor({ timeout: 5000 })
    await page.click('nav a[href="#/blockers"]')
    const card = page.locator('[data-testid="open-blockers"] [data-state="OPEN"]')
    await card.waitFor()
    expect(await card.textContent()).toContain(file)
    // The holder holds the file under its job's own name: named once, as the job.
    expect(await card.textContent()).toContain(`job …${holder.slice(-8)}`)
    expect(await card.textContent()).not.toContain(`job:${holder}`)
    await shoot('blockers-open')

    // The force-release question keeps Tab inside it while it is open; Escape gives the focus back to Force release.
    await card.getByRole('button', { name: 'Force release' }).focus()
    await page.keyboard.press('Enter')
    const [yes, keep] = ['[data-testid="confirm-force"] button.danger', '[data-testid="confirm-force"] [data-safe]']
    expect(await focusedMatches(keep)).toBe(true)
    await page.keyboard.press('Tab')
    expect(await focusedMatches(yes)).toBe(true)
    await page.keyboard.press('Shift+Tab')
    expect(await focusedMatches(keep)).toBe(true)
    await page.keyboard.press('Escape')
    await expect.poll(() => focusedMatches('[data-state="OPEN"] button:not(.primary):not(.danger)')).toBe(true)

    await card.getByLabel('Note').fill('holder is done with it soon')
    await card.getByRole('button', { name: 'Retry' }).click()
    const resolved = page.locator('[data-testid="resolved-blockers"] [data-state="RESOLVED"]')
    await resolved.waitFor({ timeout: 5000 })
    expect(await resolved.getByTestId('resolution').textContent()).toMatch(/Retry by dashboard .*holder is done with it soon/)
    await page.getByTestId('blockers-empty').waitFor()
    expect(await jobState(waiter)).toBe('QUEUED')
    await shoot('blockers-resolved')

    // The requeued job: its halted attempt with the host's error, and the timeline.
    await page.goto(`${host.url}/#/jobs/${waiter}`)
    await page.locator('[data-testid="job-detail"]').getByText('QUEUED').waitFor()
    expect(await page.getByTestId('timeline').textContent()).toContain('BLOCKER_RESOLVED')
    const halt = page.locator('[data-testid="attempts"] tr[data-attempt="1"]')
    expect(await halt.getByTestId('attempt-outcome').textContent()).toBe('BLOCKED')
    expect(await halt.getByTestId('attempt-disposition').textContent()).toBe('halted on a blocker')
    expect((await halt.getByTestId('attempt-error').textContent())?.replace(/\s+/g, ' ').trim()).toBe('blocked Halted by a file-lease blocker')
    expect(await halt.textContent()).toContain('ext-1')
    await shoot('job-blocked')

    // Each event's type fits its column, whatever the font (FILE_LEASE_CONTENDED is the longest
    // here): none runs into its data.
    const crowded = () =>
      page
        .locator('[data-testid="timeline"] li strong')
        .evaluateAll((all) => all.filter((el) => el.scrollWidth > el.clientWidth || el.getBoundingClientRect().right > el.nextElementSibling!.getBoundingClientRect().left).map((el) => el.textContent))
    expect(await page.locator('[data-testid="timeline"] li strong').allTextContents()).toContain('FILE_LEASE_CONTENDED')
    expect(await crowded()).toEqual([])
    // The timeline wraps between an event's fields, never inside one (unless a field is wider
    // than the whole line), also in a narrow window.
    await page.setViewportSize({ width: 760, height: 900 })
    try {
      expect(await crowded()).toEqual([])
      const pairs = page.locator('[data-testid="timeline"] .pair')
      expect(await pairs.count()).toBeGreaterThan(10)
      const broken = await pairs.evaluateAll((all) =>
        all
          .filter((el) => {
            const first = document.createRange()
            first.setStart(el.firstChild!, 0)
            first.setEnd(el.firstChild!, 1)
            const line = first.getBoundingClientRect().height
            const box = el.getBoundingClientRect()
            return box.height > line * 1.5 && box.width < el.parentElement!.clientWidth - 1
          })
          .map((el) => el.textContent),
      )
      expect(broken).toEqual([])
      await shoot('job-timeline-narrow')
    } finally {
      await page.setViewportSize({ width: 1280, height: 900 })
    }

    // A fresh page, the host's clock 184 s ahead and no lease event since: the countdown is the
    // host's. Then the holder's lease expiring (no more heartbeats): it flashes out.
    await page.goto(`${host.url}/#/overview`)
    await page.reload()
    await page.locator(`[data-testid="leases"] tr[data-lease="${a.lease_id}"]`).waitFor()
    await expect.poll(() => countdownGap(a.lease_id)).toBeLessThanOrEqual(1.5)
    offset += 15 * SECOND
    syncClock()
    await page.locator(`tr[data-lease="${a.lease_id}"].expired`).waitFor({ timeout: 5000 })
    await page.locator(`tr[data-lease="${a.lease_id}"]`).waitFor({ state: 'detached', timeout: 5000 })
    await json(await host.call(`${Q}/jobs/${waiter}/cancel`, { method: 'POST', json: {} }))
  })

  test('a running job is canceled from the page', async () => {
    const id = await submit({ job_type: 'sleep', payload: { ms: 60_000 } })
    await page.goto(`${host.url}/#/jobs`)
    const row = page.locator(`tr[data-job="${id}"]`)
    await page.locator(`tr[data-job="${id}"][data-state="RUNNING"]`).waitFor({ timeout: 5000 })
    await row.getByRole('button', { name: 'Cancel' }).click()
    // Running: the worker learns of the cancel from its next heartbeat (every ttl/3 ≈ 3 s) and stops.
    await page.locator(`tr[data-job="${id}"][data-state="CANCELED"]`).waitFor({ timeout: 10_000 })
    expect(await jobState(id)).toBe('CANCELED')
    // The button that had focus went off, then went: the row's state took it, not the page.
    expect(await focusedMatches(`tr[data-job="${id}"] [data-testid="job-state"]`)).toBe(true)
  })

  test("a failed job's long stack is wrapped inside the page, not cut off at its edge", async () => {
    const id = await submit({ job_type: 'fails', queue: 'stack', max_attempts: 1 })
    const claim = await json(await host.call('/internal/worker/claim', { method: 'POST', json: { worker_id: 'ext-1', streams: ['stack'], max_wait_ms: 0 } }))
    expect(claim.job_id).toBe(id)
    const frame = (i: number) => `    at frame${i} (/home/someone/projects/a-rather-deep/folder/structure/${'nested/'.repeat(12)}module-${i}.mjs:${i}:13)`
    const stack = ['Error: the handler gave up', ...Array.from({ length: 25 }, (_, i) => frame(i))].join('\n')
    const error = { code: 'E_GAVE_UP', message: 'the handler gave up', stack, retryable: false }
    await json(
      await host.call('/internal/worker/fail', { method: 'POST', json: { worker_id: 'ext-1', job_id: id, attempt_id: claim.attempt_id, lease_token: claim.lease_token, error } }),
    )
    await page.goto(`${host.url}/#/jobs/${id}`)
    const shown = page.getByTestId('job-error')
    await shown.waitFor()
    expect(await shown.textContent()).toContain(frame(24))
    const fits = await shown.evaluate((el) => ({
      wrapped: el.scrollWidth <= el.clientWidth,
      inside: el.getBoundingClientRect().right <= document.documentElement.clientWidth,
      page: document.documentElement.scrollWidth <= document.documentElement.clientWidth,
    }))
    expect(fits).toEqual({ wrapped: true, inside: true, page: true })
    await shoot('job-failed-stack')
  })

  test("an attempt's long error is clipped to a line or two in its row, and opens whole: three attempts of a 2,100-character word keep the page short", async () => {
    const id = await submit({ job_type: 'dumps', queue: 'dump', max_attempts: 1 })
    const word = 'E'.repeat(2100)
    for (let run = 1; run <= 3; run++) {
      if (run > 1) await json(await host.call(`/api/jobs/${id}/retry`, { method: 'POST', json: { requested_by: 'test' } }))
      const claim = await json(await host.call('/internal/worker/claim', { method: 'POST', json: { worker_id: 'ext-dump', streams: ['dump'], max_wait_ms: 0 } }))
      expect(claim.job_id).toBe(id)
      const error = { code: 'E_DUMP', message: word, retryable: false }
      await json(await host.call('/internal/worker/fail', { method: 'POST', json: { worker_id: 'ext-dump', job_id: id, attempt_id: claim.attempt_id, lease_token: claim.lease_token, error } }))
    }
    await page.goto(`${host.url}/#/jobs/${id}`)
    const rows = page.locator('[data-testid="attempts"] tbody tr')
    await expect.poll(() => rows.count(), { timeout: 5000 }).toBe(3)
    try {
      for (const width of [360, 1280]) {
        await page.setViewportSize({ width, height: 900 })
        // The error takes two lines at most (other cells of a narrow row may take more: a time and its duration).
        const heights = await rows.evaluateAll((trs) => trs.map((tr) => ({ row: tr.getBoundingClientRect().height, error: tr.querySelector('summary')!.getBoundingClientRect().height })))
        for (const { row, error } of heights) {
          expect(error, `an attempt's error at ${width} px`).toBeLessThan(50)
          expect(row, `an attempt's row at ${width} px`).toBeLessThan(150)
        }
        if (width === 1280) expect(await page.evaluate(() => document.documentElement.scrollHeight), 'the page').toBeLessThan(2200)
      }
      const first = rows.first().getByTestId('attempt-error')
      await first.locator('summary').click()
      const whole = first.getByTestId('attempt-error-whole')
      expect(await whole.textContent()).toBe(word)
      expect(await whole.evaluate((el) => el.getBoundingClientRect().height)).toBeLessThanOrEqual(20 * 16 + 1)
      await shoot('job-attempt-error-opened')
    } finally {
      await page.setViewportSize({ width: 1280, height: 900 })
    }
  })

  test('workers and charts', async () => {
    // An external worker, known to the host by its claim (this test's own: it runs alone too).
    await json(await host.call('/internal/worker/claim', { method: 'POST', json: { worker_id: 'ext-charts', streams: ['nothing-here'], max_wait_ms: 0 } }))
    // A local worker on a long job: busy with that job (its id's end), seen at its last heartbeat.
    const long = await submit({ job_type: 'sleep', payload: { ms: 60_000 } })
    await page.click('nav a[href="#/workers"]')
    await page.locator('[data-testid="workers-local"] tbody tr').nth(1).waitFor()
    const busy = page.locator(`[data-testid="workers-local"] tr:has(a[href="#/jobs/${long}"])`)
    await busy.waitFor({ timeout: 10_000 })
    expect(await busy.locator('a').textContent()).toBe(`…${long.slice(-8)}`)
    await expect.poll(() => busy.locator('.badge').textContent(), { timeout: 10_000 }).toBe('busy')
    // Twelve seconds into the job (heartbeats only: no event says the worker is alive), it was
    // seen at its last heartbeat (every ttl/3 ≈ 3 s; the page reads the workers every 5 s).
    await until(
      async () => {
        const lease = (await json(await host.call('/api/leases'))).leases.find((l: { job_id: string }) => l.job_id === long)
        return lease && Date.parse(lease.last_heartbeat_at) - Date.parse(lease.granted_at) >= 12_000
      },
      20_000,
      'a heartbeat 12 s into the job',
    )
    await expect.poll(() => busy.locator('td').nth(4).textContent(), { timeout: 10_000 }).toMatch(/^(just now|\d s ago)$/)
    await expect.poll(() => page.locator('[data-testid="workers-external"]').textContent(), { timeout: 10_000 }).toContain('ext-charts')
    // A worker's id may be one long word: it wraps in its cell, as a type does, and the table stays in the window.
    const longId = `ext-${'w'.repeat(186)}`
    await json(await host.call('/internal/worker/claim', { method: 'POST', json: { worker_id: longId, streams: ['nothing-here'], max_wait_ms: 0 } }))
    await expect.poll(() => page.locator('[data-testid="workers-external"]').textContent(), { timeout: 10_000 }).toContain(longId)
    expect(await page.getByTestId('workers-external').evaluate((table) => table.getBoundingClientRect().width <= document.documentElement.clientWidth)).toBe(true)
    await shoot('workers')
    await json(await host.call(`${Q}/jobs/${long}/cancel`, { method: 'POST', json: {} }))

    // A job completed in the last minute, for the chart of completions to show.
    const quick = await submit({ job_type: 'sleep', payload: { ms: 1 } })
    await until(async () => (await jobState(quick)) === 'DONE', 10_000, 'a quick job done')
    await page.click('nav a[href="#/charts"]')
    await page.getByLabel('Range', { exact: true }).selectOption('1h')
    await page.getByLabel('Bucket', { exact: true }).selectOption('1m')
    await page.locator('[data-testid="chart-jobs_completed"] canvas').waitFor()
    expect(await page.locator('.uplot').count()).toBe(METRICS.length) // a chart per metric of the time series
    await expect.poll(async () => page.getByTestId('chart-jobs_completed').textContent()).toMatch(/peak [1-9]/)
    await shoot('charts')
  })

  test('lease countdowns follow the host clock, also when it moves', async () => {
    // A 10 min lease through the pull API (URGENT: the head of every queue), on a queue the pool
    // does not take; nobody heartbeats.
    const id = await submit({ job_type: 'sleep', queue: 'clock', priority: 'URGENT', addon_id: 'visuals', payload: {} })
    const granted = await json(await host.call('/api/system/scheduler/leases/request', { method: 'POST', json: { worker_id: 'ext-clock', ttl_sec: 600 } }))
    expect(granted).toMatchObject({ denied: false, job: { job_id: id } })
    const leaseId: string = granted.lease.lease_id
    await page.goto(`${host.url}/#/overview`)
    const row = page.locator(`[data-testid="leases"] tr[data-lease="${leaseId}"]`)
    await row.waitFor()
    // Shown at once from the grant event; the read it calls for brings the job's type and add-on.
    await expect.poll(() => row.textContent()).toContain('sleep · visuals')
    await expect.poll(() => countdownGap(leaseId)).toBeLessThanOrEqual(1.5)
    const before = seconds(((await row.locator('.countdown').textContent()) ?? '').trim())
    expect(before).toBeGreaterThan(590)

    // The host's clock jumps 2 min: the countdown follows within a read (2 s), no event needed.
    offset += 120 * SECOND
    syncClock()
    await expect.poll(() => countdownGap(leaseId), { timeout: 5000 }).toBeLessThanOrEqual(1.5)
    expect(seconds(((await row.locator('.countdown').textContent()) ?? '').trim())).toBeLessThan(before - 110)
    await shoot('leases-clock-moved')

    await json(await host.call(`/api/system/scheduler/leases/${leaseId}/complete`, { method: 'POST', json: { worker_id: 'ext-clock', status: 'completed' } }))
    await row.waitFor({ state: 'detached', timeout: 5000 })
  })

  test('a schedule is created from the Schedules view: its next run and its expression in words show; it is disabled from the page', async () => {
    await page.click('nav a[href="#/schedules"]')
    await page.getByTestId('schedules-empty').waitFor()
    await page.getByRole('button', { name: 'New schedule' }).click()
    const form = page.getByTestId('schedule-form')
    await form.getByLabel('Name', { exact: true }).fill('nightly-report')
    await form.getByLabel('Cron expression', { exact: true }).fill('30 2 * * *')
    await form.getByLabel('Time zone', { exact: true }).fill('UTC')
    await form.getByLabel('Job type', { exact: true }).fill('noop')
    // The number field typed into as a person does: its text replaced, key by key.
    await typeInto(form.getByLabel('Units', { exact: true }), '2')
    await form.getByLabel('Priority').selectOption('HIGH')
    await form.getByLabel('Queue', { exact: true }).fill('reports')
    await form.getByLabel('When the last run is unfinished').selectOption('skip')
    await form.getByLabel('Payload (JSON)', { exact: true }).fill('{"ms": 10}')
    // Put in words as it is typed, before anything is sent.
    expect(await form.getByTestId('cron-words').textContent()).toBe('At 02:30, every day (UTC)')
    await shoot('schedule-form')
    await form.getByRole('button', { name: 'Create schedule' }).click()
    const row = page.locator('tr[data-schedule="nightly-report"]')
    await row.waitFor()
    await form.waitFor({ state: 'detached' })
    expect(await row.getByTestId('schedule-words').textContent()).toBe('At 02:30, every day')
    // Its next run is the host's, as the page writes times, with the time left.
    const { schedule } = await json(await host.call('/api/schedules/nightly-report'))
    expect(schedule).toMatchObject({
      cron: '30 2 * * *',
      timezone: 'UTC',
      enabled: true,
      overlap: 'skip',
      job: { job_type: 'noop', cost_units: 2, priority: 'HIGH', queue: 'reports', payload: { ms: 10 } },
    })
    const shown = await page.evaluate(
      (at) => new Date(at).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' }),
      schedule.next_fire_at,
    )
    const next = row.getByTestId('schedule-next')
    expect(await next.locator('div').first().textContent()).toContain(shown)
    // The time left is in seconds when the test runs in the minute before 02:30 UTC.
    expect(await next.locator('div').first().textContent()).toMatch(/in \d+ (h|min|s)\b/)
    expect(await next.locator('div').count()).toBe(3)
    await shoot('schedules')

    // Edit → Save, with the number field typed into again.
    await row.getByRole('button', { name: 'Edit' }).click()
    await typeInto(form.getByLabel('Units', { exact: true }), '3')
    await form.getByRole('button', { name: 'Save' }).click()
    await form.waitFor({ state: 'detached' })
    expect((await json(await host.call('/api/schedules/nightly-report'))).schedule.job).toMatchObject({ cost_units: 3, queue: 'reports', payload: { ms: 10 } })
    await expect.poll(() => row.textContent()).toContain('3 u')
    // A form that cannot be sent says why next to the field, and sends nothing.
    await row.getByRole('button', { name: 'Edit' }).click()
    await typeInto(form.getByLabel('Units', { exact: true }), '0')
    await form.getByRole('button', { name: 'Save' }).click()
    expect(await form.getByTestId('problem-cost_units').textContent()).toBe('Units: a whole number of at least 1')
    expect(await form.getByLabel('Units', { exact: true }).getAttribute('aria-invalid')).toBe('true')
    await shoot('schedule-form-refused')
    await form.getByRole('button', { name: 'Cancel' }).click()
    expect((await json(await host.call('/api/schedules/nightly-report'))).schedule.job.cost_units).toBe(3)
    // A name the host refuses: Create is off while it is sent, and the refusal hands focus to the Name field.
    await page.getByRole('button', { name: 'New schedule' }).click()
    await form.getByLabel('Name', { exact: true }).fill('nightly-report')
    await form.getByLabel('Job type', { exact: true }).fill('noop')
    await form.getByRole('button', { name: 'Create schedule' }).click()
    await form.getByTestId('problem-name').waitFor()
    await expect.poll(() => focusedMatches('[data-testid="schedule-form"] input[name="name"]')).toBe(true)
    await form.getByRole('button', { name: 'Cancel' }).click()

    await row.getByLabel('Enabled: nightly-report').uncheck()
    await page.locator('tr[data-schedule="nightly-report"][data-enabled="false"]').waitFor({ timeout: 5000 })
    expect(await next.textContent()).toContain('disabled')
    expect((await json(await host.call('/api/schedules/nightly-report'))).schedule).toMatchObject({ enabled: false, next_fire_at: null })
  })

  test('a scheduled job is listed with its time, run now from the page, and another one canceled', async () => {
    const runs = await submit({ job_type: 'sleep', payload: { ms: 1500 }, delay_ms: 3_600_000 })
    const waits = await submit({ job_type: 'sleep', payload: { ms: 200 }, delay_ms: 3_600_000 })
    await page.goto(`${host.url}/#/jobs`)
    const row = page.locator(`tr[data-job="${runs}"][data-scheduled="true"]`)
    await row.waitFor({ timeout: 5000 })
    expect(await row.textContent()).toContain('SCHEDULED')
    // Its time of day; with the date too when it is on another day than the page's now, in the
    // order the browser's locale writes a day ("Nov 30" or "30 Nov"). The page's now is the
    // host's clock once it has read the host's offset, this page's own before (the host's clock
    // here runs minutes ahead of real time), and it ticks every 250 ms: near midnight by either
    // clock, either way of writing it may be right.
    const runAt = (await row.getByTestId('run-at').getAttribute('title'))!
    const sameDays = await page.evaluate(
      ([at, hostNow]) =>
        [hostNow, Date.now()].flatMap((now) => [now - 5_000, now, now + 5_000]).map((then) => new Date(at).toDateString() === new Date(then).toDateString()),
      [runAt, clock.now()] as const,
    )
    const timeOnly = /^for \d\d:\d\d:\d\d$/
    const withDate = /^for (\w{3} \d{1,2}|\d{1,2} \w{3}) \d\d:\d\d:\d\d$/
    const shown = (await row.getByTestId('run-at').textContent())!
    expect(sameDays, shown).toContain(timeOnly.test(shown) ? true : withDate.test(shown) ? false : 'neither way of writing it')
    await shoot('jobs-scheduled')
    await row.getByRole('button', { name: `Run now: job …${runs.slice(-8)} sleep` }).click()
    // Eligible at once: a local worker takes it, and the row follows it through its run (whether
    // the answer to Run now comes before or after the grant on the stream) to its end, with the
    // attempt counted as the host counts it.
    await page.locator(`tr[data-job="${runs}"][data-state="RUNNING"]`).waitFor({ timeout: 5000 })
    const done = page.locator(`tr[data-job="${runs}"][data-state="DONE"]`)
    await done.waitFor({ timeout: 10_000 })
    const { job: ran } = await json(await host.call(`${Q}/jobs/${runs}`))
    expect(ran.attempts).toBe(1)
    expect(await done.locator('td.num').nth(1).textContent()).toBe(`${ran.attempts}/${ran.max_attempts}`)
    const timeline = (await json(await host.call(`${Q}/jobs/${runs}/events`))).events.map((e: { type: string }) => e.type)
    expect(timeline).toEqual(expect.arrayContaining(['JOB_RUN_NOW', 'JOB_DONE']))
    await page.locator(`tr[data-job="${waits}"][data-scheduled="true"]`).getByRole('button', { name: 'Cancel' }).click()
    await page.locator(`tr[data-job="${waits}"][data-state="CANCELED"]`).waitFor({ timeout: 5000 })
    expect(await jobState(waits)).toBe('CANCELED')
  })

  test('a queue is paused and resumed with its toggle; its jobs wait meanwhile', async () => {
    await page.goto(`${host.url}/#/queues`)
    // The local workers take the default queue: pause it by name.
    await page.getByLabel('Pause another queue').fill('default')
    await page.getByRole('button', { name: 'Pause', exact: true }).click()
    const row = page.locator('tr[data-queue="default"]')
    await page.locator('tr[data-queue="default"][data-paused="true"]').waitFor({ timeout: 5000 })
    await page.getByTestId('paused-count').filter({ hasText: '1' }).waitFor()
    const held = await submit({ job_type: 'sleep', payload: { ms: 100 } })
    const job = (await json(await host.call(`${Q}/jobs/${held}`))).job
    expect(job).toMatchObject({ state: 'QUEUED', waiting_reason: expect.stringContaining('queue default is paused') })
    const waiting = (await json(await host.call('/api/queues'))).queues.find((q: { queue: string }) => q.queue === 'default').counts.QUEUED
    expect(waiting).toBeGreaterThanOrEqual(1)
    await expect.poll(() => row.locator('td.num').first().textContent(), { timeout: 5000 }).toBe(String(waiting))
    await shoot('queues-paused')
    await row.getByRole('button', { name: 'Resume queue default' }).click()
    await page.locator('tr[data-queue="default"][data-paused="false"]').waitFor({ timeout: 5000 })
    await until(async () => (await jobState(held)) === 'DONE', 10_000, 'the held job done after the resume')
    expect((await json(await host.call('/api/queues'))).queues.some((q: { paused: boolean }) => q.paused)).toBe(false)
  })

  test("a queue paused and resumed from the keyboard keeps the focus on its button while each is sent", async () => {
    const id = await submit({ job_type: 'noop', queue: 'pause-focus-e2e' })
    await page.goto(`${host.url}/#/queues`)
    const button = 'tr[data-queue="pause-focus-e2e"] td.actions button'
    await page.getByRole('button', { name: 'Pause queue pause-focus-e2e' }).focus()
    await page.keyboard.press('Enter')
    await page.locator('tr[data-queue="pause-focus-e2e"][data-paused="true"]').waitFor({ timeout: 5000 })
    expect(await focusedMatches(button)).toBe(true)
    await page.keyboard.press('Enter')
    await page.locator('tr[data-queue="pause-focus-e2e"][data-paused="false"]').waitFor({ timeout: 5000 })
    expect(await focusedMatches(button)).toBe(true)
    await json(await host.call(`${Q}/jobs/${id}/cancel`, { method: 'POST', json: {} }))
  })

  test("a job's Cancel job and Retry, pressed from the keyboard on its page, hand the focus to its state as each goes", async () => {
    const id = await submit({ job_type: 'noop', queue: 'cancel-focus-e2e' })
    await page.goto(`${host.url}/#/jobs/${id}`)
    const detail = page.getByTestId('job-detail')
    const state = '[data-testid="job-detail"] [data-testid="job-state"]'
    await detail.getByRole('button', { name: 'Cancel job' }).focus()
    await page.keyboard.press('Enter')
    await detail.getByRole('button', { name: 'Retry' }).waitFor({ timeout: 5000 })
    await expect.poll(() => focusedMatches(state)).toBe(true)
    await detail.getByRole('button', { name: 'Retry' }).focus()
    await page.keyboard.press('Enter')
    await detail.getByRole('button', { name: 'Cancel job' }).waitFor({ timeout: 5000 })
    await expect.poll(() => focusedMatches(state)).toBe(true)
    await json(await host.call(`${Q}/jobs/${id}/cancel`, { method: 'POST', json: {} }))
    // Run now goes as the job is due: the state takes its focus too.
    const later = await submit({ job_type: 'noop', queue: 'cancel-focus-e2e', delay_ms: 3_600_000 })
    await page.goto(`${host.url}/#/jobs/${later}`)
    await detail.getByRole('button', { name: 'Run now' }).focus()
    await page.keyboard.press('Enter')
    await detail.getByRole('button', { name: 'Run now' }).waitFor({ state: 'detached', timeout: 5000 })
    await expect.poll(() => focusedMatches(state)).toBe(true)
    await json(await host.call(`${Q}/jobs/${later}/cancel`, { method: 'POST', json: {} }))
  })

  test("a schedule's Enabled box and its Delete question, used from the keyboard, keep the focus on the row, and on New schedule once the row goes", async () => {
    await json(await host.call('/api/schedules', { method: 'POST', json: { name: 'focus-e2e', cron: '0 3 * * *', timezone: 'UTC', job: { job_type: 'noop', cost_units: 1 } } }))
    await page.goto(`${host.url}/#/schedules`)
    const row = page.locator('tr[data-schedule="focus-e2e"]')
    await row.getByLabel('Enabled: focus-e2e').focus()
    await page.keyboard.press('Space')
    await page.locator('tr[data-schedule="focus-e2e"][data-enabled="false"]').waitFor({ timeout: 5000 })
    expect(await focusedMatches('tr[data-schedule="focus-e2e"] input[type="checkbox"]')).toBe(true)
    // The question takes the place of Delete: kept (Escape), it gives the focus back to Delete.
    const remove = 'tr[data-schedule="focus-e2e"] button[aria-label="Delete schedule focus-e2e"]'
    await page.locator(remove).focus()
    await page.keyboard.press('Enter')
    expect(await focusedMatches('[data-testid="confirm-delete"] [data-safe]')).toBe(true)
    await page.keyboard.press('Escape')
    await expect.poll(() => focusedMatches(remove)).toBe(true)
    await page.keyboard.press('Enter')
    await row.getByRole('button', { name: 'Yes, delete' }).focus()
    await page.keyboard.press('Enter')
    await row.waitFor({ state: 'detached', timeout: 5000 })
    await expect.poll(() => focusedMatches('section[aria-labelledby="schedules-heading"] > header button')).toBe(true)
  })

  test('Retry matching… pressed from the keyboard asks its question, and Escape gives the focus back to it', async () => {
    await page.goto(`${host.url}/#/jobs?state=CANCELED`)
    await page.getByTestId('bulk-retry').focus()
    await page.keyboard.press('Enter')
    await page.getByTestId('bulk-confirm').waitFor()
    expect(await focusedMatches('[data-testid="bulk-confirm"] [data-safe]')).toBe(true)
    await page.keyboard.press('Escape')
    await page.getByTestId('bulk-confirm').waitFor({ state: 'detached' })
    await expect.poll(() => focusedMatches('[data-testid="bulk-retry"]')).toBe(true)
    await page.goto(`${host.url}/#/jobs`)
    await page.getByRole('button', { name: 'Clear filters' }).click()
  })

  test('a queue with no jobs resumed from the keyboard leaves the list, and the focus goes to the Pause another queue field, not to the page', async () => {
    await page.goto(`${host.url}/#/queues`)
    await page.getByLabel('Pause another queue').fill('empty-focus-e2e')
    await page.keyboard.press('Enter')
    const row = page.locator('tr[data-queue="empty-focus-e2e"][data-paused="true"]')
    await row.getByRole('button', { name: 'Resume queue empty-focus-e2e' }).focus()
    await page.keyboard.press('Enter')
    await row.waitFor({ state: 'detached', timeout: 5000 })
    await expect.poll(() => focusedMatches('form.pause-other input[name="queue"]')).toBe(true)
  })

  test("a failed job is retried from its page: a new run, its first attempt kept", async () => {
    const id = await submit({ job_type: 'flaky', queue: 'retry', max_attempts: 1 })
    const take = async () => json(await host.call('/internal/worker/claim', { method: 'POST', json: { worker_id: 'ext-retry', streams: ['retry'], max_wait_ms: 0 } }))
    const first = await take()
    expect(first.job_id).toBe(id)
    const error = { code: 'E_FLAKY', message: 'not this time', retryable: true }
    await json(await host.call('/internal/worker/fail', { method: 'POST', json: { worker_id: 'ext-retry', job_id: id, attempt_id: first.attempt_id, lease_token: first.lease_token, error } }))
    expect(await jobState(id)).toBe('FAILED')
    await page.goto(`${host.url}/#/jobs/${id}`)
    const detail = page.getByTestId('job-detail')
    await detail.getByText('FAILED', { exact: true }).waitFor()
    await detail.getByRole('button', { name: 'Retry' }).click()
    await detail.getByText('QUEUED', { exact: true }).waitFor({ timeout: 5000 })
    await expect.poll(() => page.getByTestId('timeline').textContent(), { timeout: 5000 }).toContain('JOB_RETRIED')
    expect(await page.getByTestId('timeline').textContent()).toContain('requested_by=dashboard')
    const second = await take()
    expect(second.job_id).toBe(id)
    await json(await host.call('/internal/worker/complete', { method: 'POST', json: { worker_id: 'ext-retry', job_id: id, attempt_id: second.attempt_id, lease_token: second.lease_token } }))
    await detail.getByText('DONE', { exact: true }).waitFor({ timeout: 5000 })
    await expect.poll(() => page.locator('[data-testid="attempts"] tbody tr').count(), { timeout: 5000 }).toBe(2)
    expect(await page.locator('[data-testid="attempts"] tr[data-attempt="1"]').getByTestId('attempt-error').textContent()).toContain('E_FLAKY')
    await shoot('job-retried')
  })

  test("a job canceled then retried through the API says why it waits in the unfiltered jobs table and the overview's recent jobs, with no reload", async () => {
    // On a queue no worker takes: once retried it waits, and the host says why.
    const id = await submit({ job_type: 'noop', queue: 'unserved' })
    await json(await host.call(`${Q}/jobs/${id}/cancel`, { method: 'POST', json: {} }))
    await page.goto(`${host.url}/#/jobs`)
    await page.locator(`tr[data-job="${id}"][data-state="CANCELED"]`).waitFor({ timeout: 5000 })
    await json(await host.call(`/api/jobs/${id}/retry`, { method: 'POST', json: {} }))
    const { job } = await json(await host.call(`${Q}/jobs/${id}`))
    expect(job.waiting_reason).toBeTruthy()
    const row = page.locator(`tr[data-job="${id}"][data-state="QUEUED"]`)
    await row.getByTestId('row-waiting').waitFor({ timeout: 5000 })
    expect(await row.getByTestId('row-waiting').textContent()).toContain(job.waiting_reason.slice(0, 20))
    await page.click('nav a[href="#/overview"]')
    await page.locator(`tr[data-job="${id}"][data-state="QUEUED"]`).getByTestId('row-waiting').waitFor({ timeout: 5000 })
    await json(await host.call(`${Q}/jobs/${id}/cancel`, { method: 'POST', json: {} }))
  })

  test("a job that runs out of attempts while the page is open is marked 'dead letter' in the jobs table and the overview's recent jobs, with no reload", async () => {
    const take = async () => json<Claim>(await host.call('/internal/worker/claim', { method: 'POST', json: { worker_id: 'ext-dead', streams: ['dead'], max_wait_ms: 0 } }))
    const fail = async (claim: Claim) =>
      json(await host.call('/internal/worker/fail', { method: 'POST', json: { worker_id: 'ext-dead', job_id: claim.job_id, attempt_id: claim.attempt_id, lease_token: claim.lease_token, error: { message: 'boom', retryable: true } } }))
    for (const [view, table] of [['jobs', page.locator('main [data-testid="jobs"]')], ['overview', page.locator('main [data-testid="jobs"]')]] as const) {
      const id = await submit({ job_type: 'boom-e2e', queue: 'dead', max_attempts: 1 })
      await page.goto(`${host.url}/#/${view}`)
      const row = table.locator(`tr[data-job="${id}"]`)
      await row.waitFor({ timeout: 5000 })
      expect(await row.getByTestId('dead-letter').count()).toBe(0)
      await fail(await take())
      await expect.poll(() => row.getAttribute('data-state'), { timeout: 5000 }).toBe('FAILED')
      await row.getByTestId('dead-letter').waitFor({ timeout: 5000 })
    }
  })

  test('a read that gets no answer while the event stream stays open is read again by itself: its error goes and what it missed shows once the browser is back online', async () => {
    await page.goto(`${host.url}/#/jobs`)
    // The stream is open and the view has read its jobs (a table, or none yet when this test runs alone).
    await page.getByTestId('stream-status').filter({ hasText: 'Live' }).waitFor()
    await page.locator('main [data-testid="jobs"], main [data-testid="jobs-empty"]').first().waitFor()
    await page.context().setOffline(true)
    let id: string
    try {
      // A new job calls for a read of the first page: it gets no answer.
      id = await submit({ job_type: 'offline-e2e', queue: 'offline' })
      await page.getByText('Cannot list jobs:').waitFor({ timeout: 5000 })
    } finally {
      await page.context().setOffline(false)
    }
    await page.getByText('Cannot list jobs:').waitFor({ state: 'detached', timeout: 10_000 })
    await page.locator(`main [data-testid="jobs"] tr[data-job="${id}"]`).waitFor({ timeout: 5000 })
  })

  test("a running job's progress and note move on its page and in the jobs table as its worker reports them, with no reload", async () => {
    const id = await submit({ job_type: 'progress-e2e', queue: 'progress' })
    const claim = await json(await host.call('/internal/worker/claim', { method: 'POST', json: { worker_id: 'ext-progress', streams: ['progress'], max_wait_ms: 0 } }))
    expect(claim.job_id).toBe(id)
    const report = async (progress: number, note: string) =>
      json(await host.call('/internal/worker/heartbeat', { method: 'POST', json: { worker_id: 'ext-progress', job_id: id, lease_token: claim.lease_token, progress, note } }))
    await report(0.25, 'first quarter')
    await page.goto(`${host.url}/#/jobs/${id}`)
    const detail = page.getByTestId('job-detail')
    await detail.getByText('25 %').waitFor({ timeout: 5000 })
    await detail.getByText('first quarter').waitFor()
    // A heartbeat writes no event: the page re-reads a running job while it is shown.
    await report(0.75, 'three quarters')
    await detail.getByText('75 %').waitFor({ timeout: 6000 })
    await detail.getByText('three quarters').waitFor()
    await page.goto(`${host.url}/#/jobs?state=RUNNING`)
    const bar = page.locator(`tr[data-job="${id}"] progress`)
    await expect.poll(() => bar.getAttribute('value'), { timeout: 5000 }).toBe('0.75')
    await report(0.5, 'back to half')
    await expect.poll(() => bar.getAttribute('value'), { timeout: 6000 }).toBe('0.5')
    await json(await host.call('/internal/worker/complete', { method: 'POST', json: { worker_id: 'ext-progress', job_id: id, attempt_id: claim.attempt_id, lease_token: claim.lease_token } }))
    await page.locator(`tr[data-job="${id}"]`).waitFor({ state: 'detached', timeout: 5000 })
  })

  test('bulk retry and purge from the jobs view, each confirmed with the number of jobs it touches', async () => {
    const ids = [await submit({ job_type: 'bulk-e2e', queue: 'bulk' }), await submit({ job_type: 'bulk-e2e', queue: 'bulk' })]
    for (const id of ids) await json(await host.call(`${Q}/jobs/${id}/cancel`, { method: 'POST', json: {} }))
    await page.goto(`${host.url}/#/jobs`)
    await page.getByLabel('Type').fill('bulk-e2e')
    await page.getByRole('button', { name: 'Search' }).click()
    await page.getByRole('group', { name: 'Filter by state' }).getByRole('button', { name: 'CANCELED', exact: true }).click()
    await expect.poll(() => page.locator('[data-testid="jobs"] tbody tr').count()).toBe(2)

    await page.getByTestId('bulk-retry').click()
    const confirm = page.getByTestId('bulk-confirm')
    await confirm.waitFor()
    expect(await confirm.textContent()).toContain('Retry 2 jobs? The CANCELED jobs of type bulk-e2e will go back to the queue')
    await shoot('bulk-retry-confirm')
    await confirm.getByRole('button', { name: 'Retry 2 jobs' }).click()
    await expect.poll(() => page.getByTestId('bulk-result').textContent()).toBe('Retried 2 of 2 jobs.')
    expect(await Promise.all(ids.map(jobState))).toEqual(['QUEUED', 'QUEUED'])

    for (const id of ids) await json(await host.call(`${Q}/jobs/${id}/cancel`, { method: 'POST', json: {} }))
    await page.getByTestId('bulk-purge').click()
    await confirm.waitFor()
    expect(await confirm.textContent()).toContain('Purge 2 jobs?')
    await confirm.getByRole('button', { name: 'Keep them' }).click()
    await confirm.waitFor({ state: 'detached' })
    expect(await Promise.all(ids.map(jobState))).toEqual(['CANCELED', 'CANCELED'])
    await page.getByTestId('bulk-purge').click()
    await confirm.getByRole('button', { name: 'Purge 2 jobs' }).waitFor()
    // Between the count and the yes a third job of the filter is canceled: the yes was for two.
    // (The host's clock, moved in 50 ms steps by this test, most often has not moved since the
    // count: the yes holds the jobs counted by the event log's position, not by time.)
    const late = await submit({ job_type: 'bulk-e2e', queue: 'bulk' })
    await json(await host.call(`${Q}/jobs/${late}/cancel`, { method: 'POST', json: {} }))
    await confirm.getByRole('button', { name: 'Purge 2 jobs' }).click()
    await expect.poll(() => page.getByTestId('bulk-result').textContent()).toBe('Purged 2 of 2 jobs.')
    for (const id of ids) expect((await host.call(`${Q}/jobs/${id}`)).status).toBe(404)
    expect(await jobState(late)).toBe('CANCELED')
    await page.locator(`tr[data-job="${late}"]`).waitFor({ timeout: 5000 })
    await page.getByTestId('bulk-purge').click()
    await confirm.getByRole('button', { name: 'Purge 1 job' }).click()
    await expect.poll(() => page.getByTestId('bulk-result').textContent()).toBe('Purged 1 of 1 job.')
    await page.getByTestId('jobs-empty').waitFor({ timeout: 5000 })
    await page.getByRole('button', { name: 'Clear filters' }).click()
  })

  test('the jobs filter is in the address bar: a reload, or the link, shows the same jobs', async () => {
    await page.goto(`${host.url}/#/jobs`)
    const failed = page.getByRole('group', { name: 'Filter by state' }).getByRole('button', { name: 'FAILED', exact: true })
    await failed.click()
    await page.getByLabel('Type').fill('filter-e2e')
    await page.getByRole('button', { name: 'Search' }).click()
    await expect.poll(() => page.evaluate(() => location.hash)).toBe('#/jobs?state=FAILED&type=filter-e2e')
    await page.reload()
    await expect.poll(() => failed.getAttribute('aria-pressed')).toBe('true')
    expect(await page.getByLabel('Type').inputValue()).toBe('filter-e2e')
    await page.getByRole('button', { name: 'Clear filters' }).click()
    await expect.poll(() => page.evaluate(() => location.hash)).toBe('#/jobs')
  })

  test('a wrong token gets the token form, the right one the dashboard', async () => {
    const other = await browser.newPage({ viewport: { width: 1280, height: 720 } })
    watch(other)
    await other.goto(`${host.url}/#token=not-the-token`)
    await other.getByText('The host refused this token').waitFor()
    await other.screenshot({ path: join(SHOTS, 'token-form.png') })
    await other.getByLabel('Token', { exact: true }).fill(host.token)
    await other.getByRole('button', { name: 'Connect' }).click()
    await other.getByTestId('cap-total').waitFor()
    await other.close()
  })

  test("a worker's token is told it cannot open the dashboard, and the host's token then opens it", async () => {
    const { token } = createScopedToken(host.dataDir, 'worker')
    const other = await browser.newPage({ viewport: { width: 1280, height: 720 } })
    watch(other)
    await other.goto(`${host.url}/#token=${token}`)
    await other.getByText('A worker token cannot open the dashboard').waitFor()
    expect(await other.getByTestId('cap-total').count()).toBe(0)
    await other.getByLabel('Token', { exact: true }).fill(host.token)
    await other.getByRole('button', { name: 'Connect' }).click()
    await other.getByTestId('cap-total').waitFor()
    await other.close()
  })

  test('an admin token revoked while its page is open ends its event stream within a second or so, and the page asks for a token, with no job event needed', async () => {
    const { id, token } = createScopedToken(host.dataDir, 'admin')
    const other = await browser.newPage({ viewport: { width: 1280, height: 720 } })
    watch(other)
    await other.goto(`${host.url}/#token=${token}`)
    await other.getByTestId('stream-status').filter({ hasText: 'Live' }).waitFor()
    revokeScopedToken(host.dataDir, id)
    // The host sees the revoke within a second and ends the stream; the page's fresh ticket is refused.
    await other.getByText('The host refused this token').waitFor({ timeout: 6000 })
    await other.close()
  })

  test("every time in the window follows the user's locale, written the same way in each part", async () => {
    const later = await submit({ job_type: 'sleep', payload: {}, delay_ms: 3_600_000 })
    const clocks = { 'en-US': /\d{1,2}:\d\d:\d\d\s[AP]M$/, 'de-DE': /(^|\s)\d\d:\d\d:\d\d$/ }
    for (const [locale, clock] of Object.entries(clocks)) {
      const other = await browser.newPage({ viewport: { width: 1280, height: 900 }, locale })
      watch(other)
      await other.goto(`${host.url}/#token=${host.token}`)
      await other.getByTestId('storage-size').waitFor()
      const shown: string[] = []
      const lastPass = other.locator('[data-testid="storage-note"] time')
      if (await lastPass.count()) shown.push((await lastPass.textContent())!)
      await other.goto(`${host.url}/#/jobs`)
      const row = other.locator(`tr[data-job="${later}"]`)
      await row.waitFor()
      shown.push((await row.getByTestId('run-at').textContent())!.replace(/^for /, ''), (await row.locator('td.num').nth(2).textContent())!)
      await other.goto(`${host.url}/#/jobs/${later}`)
      await other.getByTestId('job-run-at').waitFor()
      shown.push((await other.getByTestId('job-run-at').textContent())!)
      for (const at of await other.locator('[data-testid="timeline"] li > span.num').allTextContents()) shown.push(at)
      expect(shown.length).toBeGreaterThanOrEqual(4)
      for (const at of shown) expect(at.trim(), locale).toMatch(clock)
      await other.close()
    }
    await json(await host.call(`${Q}/jobs/${later}/cancel`, { method: 'POST', json: {} }))
  })

  test('a host whose Redis does not answer says so across the window, with the messages waiting; the line goes when Redis is back', async () => {
    const redis = await TestRedis.start()
    const withRedis = await startTestHost({ redisUrl: redis.url }, { rendererDir: RENDERER_DIR })
    const other = await browser.newPage({ viewport: { width: 1280, height: 900 }, locale: 'en-GB' })
    try {
      watch(other)
      await other.goto(`${withRedis.url}/#token=${withRedis.token}`)
      await other.getByTestId('cap-total').waitFor()
      await until(async () => (await json(await withRedis.call('/api/health'))).redis.connected, 5000, 'Redis connected')
      expect(await other.getByTestId('redis-away').count()).toBe(0)

      await redis.kill()
      const banner = other.getByTestId('redis-away')
      await banner.waitFor({ timeout: 5000 })
      for (let i = 0; i < 3; i++) await json(await withRedis.call(`${Q}/jobs/submit`, { method: 'POST', json: { job_type: 'sleep', cost_units: 1 } }))
      // The host tells the window again every few seconds while Redis is away (no request of the page's).
      await expect.poll(() => banner.textContent(), { timeout: 10_000 }).toMatch(/3 messages wait to be published, the oldest for \d+ s\./)
      expect(await banner.textContent()).toMatch(new RegExp(`Redis at ${redis.url} does not answer \\(for \\d+ s\\)\\.`))
      await other.screenshot({ path: join(SHOTS, 'redis-away.png') })

      await redis.restart()
      await banner.waitFor({ state: 'detached', timeout: 10_000 })
    } finally {
      await other.close()
      await withRedis.dispose()
      await redis.stop()
    }
  })

  test('a window too narrow for the header wraps it: nothing scrolls sideways, and a short id is never broken after its "…"', async () => {
    // No capacity usable (busy rating 10): of two jobs, the second waits "behind job …<id>".
    await json(await host.call('/api/capacity', { method: 'PUT', json: { busy_rating: 10 } }))
    const ids = [await submit({ job_type: 'sleep' }), await submit({ job_type: 'sleep' })]
    await page.setViewportSize({ width: 760, height: 900 })
    try {
      await page.goto(`${host.url}/#/jobs`)
      await page.locator('[data-testid="row-waiting"]').filter({ hasText: 'behind job' }).first().waitFor({ timeout: 10_000 })
      expect(await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth)).toBe(0)
      // An inline element broken across lines has one box a line.
      const shortIds = page.locator('tr[data-job] a[title], [data-testid="row-waiting"] .id')
      expect(await shortIds.count()).toBeGreaterThan(2)
      expect(await shortIds.evaluateAll((all) => all.filter((el) => el.getClientRects().length > 1).map((el) => el.textContent))).toEqual([])
      await shoot('jobs-narrow')
    } finally {
      await page.setViewportSize({ width: 1280, height: 900 })
      for (const id of ids) await host.call(`${Q}/jobs/${id}/cancel`, { method: 'POST', json: {} })
      await json(await host.call('/api/capacity', { method: 'PUT', json: { busy_rating: 0 } }))
    }
  })

  test("a job type of one long word wraps in its cell: the Jobs and Recent jobs tables, a job's page and the schedules fit the window, wide or narrow", async () => {
    // No space and no hyphen, after which a browser would break the line by itself.
    const type = 'export.thumbnails.for_the_whole_library.with_a_very_long_name_that_never_breaks'
    const id = await submit({ job_type: type, queue: 'narrow-e2e' })
    await host.call(`${Q}/jobs/${id}/status`, { method: 'POST', json: { note: `note_${'y'.repeat(300)}` } })
    await host.call('/api/schedules', { method: 'POST', json: { name: 'long-type-e2e', cron: '0 0 1 1 *', enabled: false, job: { job_type: `${type}_${'z'.repeat(80)}`, cost_units: 1 } } })
    const sideways = () => page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth)
    try {
      for (const width of [1280, 760]) {
        await page.setViewportSize({ width, height: 900 })
        for (const view of ['jobs', 'overview']) {
          await page.goto(`${host.url}/#/${view}`)
          const row = page.locator(`[data-testid="jobs"] tr[data-job="${id}"]`)
          await row.waitFor({ timeout: 5000 })
          expect(await row.textContent()).toContain(type)
          expect(await sideways(), `${view} at ${width} px`).toBe(0)
          // The row's Cancel button is on screen, not past its edge.
          const cancel = await row.getByRole('button', { name: 'Cancel' }).boundingBox()
          expect(cancel!.x + cancel!.width, `${view} at ${width} px`).toBeLessThanOrEqual(width)
        }
        // A waiting line that names it, the job's own page with a note of one long word, a schedule of that type.
        await page.goto(`${host.url}/#/jobs/${id}`)
        await page.locator('[data-testid="job-waiting"]').waitFor({ timeout: 5000 })
        expect(await sideways(), `the job's page at ${width} px`).toBe(0)
        await page.goto(`${host.url}/#/schedules`)
        await page.locator(`tr[data-schedule="long-type-e2e"]`).waitFor({ timeout: 5000 })
        expect(await sideways(), `schedules at ${width} px`).toBe(0)
      }
      await shoot('jobs-long-type-narrow')
    } finally {
      await page.setViewportSize({ width: 1280, height: 900 })
      await host.call(`${Q}/jobs/${id}/cancel`, { method: 'POST', json: {} })
      await host.call('/api/schedules/long-type-e2e', { method: 'DELETE' })
    }
  })

  test("every view fits a window 360 or 640 px wide: the tabs wrap in rows, nothing scrolls sideways, each button is in sight or in its table's own scroll box", async () => {
    // What the views show on a busy host: an open blocker, a paused queue with a job waiting in
    // it, two jobs running with their leases, a schedule. (The blocker first: it moves the
    // host's clock 184 s, past the leases of any job running then.)
    const blocked = await haltOnFile('/data/out/narrow.pdf', 'narrow-files')
    await json(await host.call('/api/queues/narrow-paused/pause', { method: 'POST', json: { requested_by: 'e2e' } }))
    const waiting = await submit({ job_type: 'sleep', queue: 'narrow-paused' })
    const running = [await submit({ job_type: 'sleep', addon_id: 'visuals', payload: { ms: 60_000 } }), await submit({ job_type: 'sleep', addon_id: 'audio', payload: { ms: 60_000 } })]
    await json(await host.call('/api/schedules', { method: 'POST', json: { name: 'narrow-e2e', cron: '0 0 1 1 *', enabled: true, job: { job_type: 'sleep', cost_units: 1 } } }))
    // Each view, what shows it has its data, and the buttons that must be in reach.
    const views: { view: string; path?: string; shown: string; buttons: () => Locator[] }[] = [
      {
        view: 'overview',
        shown: `[data-testid="leases"] tr[data-lease]:has(a[href="#/jobs/${running[1]}"])`,
        buttons: () => [page.getByRole('button', { name: 'Apply' }), page.getByRole('button', { name: 'Set', exact: true }), page.getByRole('button', { name: `Cancel job ${running[1]}` })],
      },
      { view: 'jobs', shown: `tr[data-job="${waiting}"]`, buttons: () => [page.getByRole('button', { name: `Cancel job ${waiting}` })] },
      {
        view: 'queues',
        shown: 'tr[data-queue="narrow-paused"][data-paused="true"]',
        buttons: () => [page.getByRole('button', { name: 'Resume queue narrow-paused' }), page.getByRole('button', { name: 'Pause queue default' })],
      },
      {
        view: 'blockers',
        shown: `[data-testid="open-blockers"] [data-state="OPEN"]:has-text("narrow.pdf")`,
        buttons: () => [page.locator('[data-testid="open-blockers"] [data-state="OPEN"]:has-text("narrow.pdf")').getByRole('button', { name: 'Cancel job' })],
      },
      { view: 'workers', shown: `[data-testid="workers-local"] tr:has(a[href="#/jobs/${running[0]}"])`, buttons: () => [] },
      { view: 'schedules', shown: 'tr[data-schedule="narrow-e2e"]', buttons: () => [page.locator('tr[data-schedule="narrow-e2e"]').getByRole('button', { name: 'Edit' })] },
      { view: 'charts', shown: '[data-testid="chart-jobs_running"]', buttons: () => [] },
      { view: 'job', path: `jobs/${running[0]}`, shown: '[data-testid="attempts"] tbody tr', buttons: () => [page.getByRole('button', { name: 'Cancel job' })] },
    ]
    const sideways = () => page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth)
    /** The lines the header's tabs are on, by their tops. */
    const tabLines = () => page.locator('nav[aria-label="Views"] a').evaluateAll((tabs) => [...new Set(tabs.map((tab) => Math.round(tab.getBoundingClientRect().top)))])
    try {
      for (const width of [360, 640]) {
        await page.setViewportSize({ width, height: 900 })
        for (const { view, path, shown, buttons } of views) {
          await page.goto(`${host.url}/#/${path ?? view}`)
          await page.locator(shown).first().waitFor({ timeout: 10_000 })
          expect(await sideways(), `${view} at ${width} px`).toBe(0)
          for (const button of buttons()) expect(await inSight(button), `${await button.textContent()} on ${view} at ${width} px`).toBe(true)
          if (width === 360) await shoot(`narrow-${view}`)
        }
        // The seven tabs in rows of several, not a column of one a line.
        expect((await tabLines()).length, `lines of tabs at ${width} px`).toBeLessThanOrEqual(width < 480 ? 3 : 2)
      }
    } finally {
      await page.setViewportSize({ width: 1280, height: 900 })
      const { blockers } = await json(await host.call('/api/blockers'))
      const blocker = blockers.find((b: { requester: { job_id: string | null }; state: string }) => b.requester.job_id === blocked.waiter && b.state === 'OPEN')
      if (blocker) await host.call(`/api/blockers/${blocker.blocker_id}/resolve`, { method: 'POST', json: { action: 'cancel', by: 'e2e' } })
      for (const id of [blocked.holder, waiting, ...running]) await host.call(`${Q}/jobs/${id}/cancel`, { method: 'POST', json: {} })
      await host.call('/api/queues/narrow-paused/resume', { method: 'POST', json: { requested_by: 'e2e' } })
      await host.call('/api/schedules/narrow-e2e', { method: 'DELETE' })
    }
  })

  test("a job's page at 360 and 400 px: no timeline field is split across lines, nor a word of the detail list", async () => {
    // A failed job: its timeline has its priority, a lease's expires_at and dead_letter.
    const id = await submit({ job_type: 'fails', queue: 'narrow-page', max_attempts: 1 })
    const claim = await json(await host.call('/internal/worker/claim', { method: 'POST', json: { worker_id: 'ext-1', streams: ['narrow-page'], max_wait_ms: 0 } }))
    expect(claim.job_id).toBe(id)
    const error = { code: 'E_NARROW', message: 'gave up', retryable: false }
    await json(await host.call('/internal/worker/fail', { method: 'POST', json: { worker_id: 'ext-1', job_id: id, attempt_id: claim.attempt_id, lease_token: claim.lease_token, error } }))
    /**
     * The texts split across lines: a timeline field whose text is on more than one line though
     * it would fit on one, or a word of the detail list (a range over it has boxes on two lines).
     */
    const split = () =>
      page.evaluate(() => {
        const found: string[] = []
        for (const pair of document.querySelectorAll<HTMLElement>('[data-testid="timeline"] .pair')) {
          const whole = document.createRange()
          whole.selectNodeContents(pair)
          const lines = new Set([...whole.getClientRects()].map((r) => Math.round(r.top))).size
          // Its width on one line: a field wider than the whole line (a long path) may break.
          pair.style.whiteSpace = 'nowrap'
          const natural = whole.getBoundingClientRect().width
          pair.style.whiteSpace = ''
          if (lines > 1 && natural <= pair.parentElement!.clientWidth) found.push(pair.textContent!)
        }
        for (const dd of document.querySelectorAll<HTMLElement>('[data-testid="job-detail"] dl dd')) {
          const walker = document.createTreeWalker(dd, NodeFilter.SHOW_TEXT)
          for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            for (const match of node.textContent!.matchAll(/\S+/g)) {
              const word = document.createRange()
              word.setStart(node, match.index!)
              word.setEnd(node, match.index! + match[0].length)
              if (new Set([...word.getClientRects()].map((r) => Math.round(r.top))).size > 1) found.push(match[0])
            }
          }
        }
        return found
      })
    try {
      for (const width of [360, 400]) {
        await page.setViewportSize({ width, height: 900 })
        await page.goto(`${host.url}/#/jobs/${id}`)
        await page.locator('[data-testid="timeline"] li').filter({ hasText: 'JOB_FAILED' }).waitFor({ timeout: 5000 })
        const pairs = await page.locator('[data-testid="timeline"] .pair').allTextContents()
        for (const field of ['dead_letter=', 'priority=', 'expires_at=']) expect(pairs.some((p) => p.startsWith(field)), field).toBe(true)
        expect(await split(), `at ${width} px`).toEqual([])
        expect(await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth), `at ${width} px`).toBe(0)
        if (width === 360) await shoot('job-page-360')
      }
    } finally {
      await page.setViewportSize({ width: 1280, height: 900 })
    }
  })

  test('at 760 px a jobs table is as wide as its box: the row\'s Cancel is whole inside it, nothing to scroll (the Jobs view, its RUNNING filter, the Overview)', async () => {
    const running = await submit({ job_type: 'sleep', addon_id: 'visuals', payload: { ms: 60_000 } })
    await page.setViewportSize({ width: 760, height: 900 })
    try {
      for (const path of ['jobs', 'jobs?state=RUNNING', 'overview']) {
        await page.goto(`${host.url}/#/${path}`)
        const row = page.locator(`[data-testid="jobs"] tr[data-job="${running}"][data-state="RUNNING"]`)
        await row.waitFor({ timeout: 10_000 })
        const fit = await row.getByRole('button', { name: 'Cancel' }).evaluate((button) => {
          const box = button.closest('.table-box')!
          return { cancelInside: button.getBoundingClientRect().right <= box.getBoundingClientRect().right, scrolls: box.scrollWidth > box.clientWidth }
        })
        expect(fit, path).toMatchObject({ cancelInside: true, scrolls: false })
      }
    } finally {
      await page.setViewportSize({ width: 1280, height: 900 })
      await host.call(`${Q}/jobs/${running}/cancel`, { method: 'POST', json: {} })
    }
  })

  test('the page asked for nothing it could not find (a favicon included)', () => {
    expect(notFound).toEqual([])
  })
})
