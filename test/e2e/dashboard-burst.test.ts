/**
 * The Overview in Debian's Chromium while a real host with two local workers runs a burst of
 * 2,000 short jobs (two batches of 1,000): the page takes the burst's events in one pass per
 * turn, so it keeps answering, and the Active leases table holds the active leases and at most
 * a few that just ended (docs/dashboard.md), none once the burst is over.
 */
import type { Browser, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { FLASHING_AT_MOST } from '../../src-renderer/lib/lease-events'
import { buildRenderer, hasChromium, launchChromium, RENDERER_DIR } from '../helpers/chromium'
import { startTestHost, type TestHost } from '../helpers/host'
import { until } from '../helpers/until'

/**
 * How long the page may take to answer while the burst's events pour in: far above what a page
 * that keeps up takes on a loaded two-core machine (well under a second), far below the tens of
 * seconds a page that redraws a growing table for each event is frozen.
 */
const ANSWER_WITHIN_MS = 8000

let host: TestHost
let browser: Browser
let page: Page
const pageProblems: string[] = []

async function json<T = any>(response: Response): Promise<T> {
  const body = await response.json()
  if (!response.ok) throw new Error(`${response.status} ${JSON.stringify(body)}`)
  return body as T
}

/** Jobs not yet DONE, over every queue (the host counts no DONE job). */
const unfinished = async (): Promise<number> =>
  (await json(await host.call('/api/queues'))).queues.reduce(
    (sum: number, q: { counts: Record<string, number> }) => sum + Object.values(q.counts).reduce((a, b) => a + b, 0),
    0,
  )

describe.skipIf(!hasChromium())('the overview through a burst of jobs', () => {
  beforeAll(async () => {
    buildRenderer()
    host = await startTestHost({ workers: 2 }, { rendererDir: RENDERER_DIR })
    await until(async () => (await json(await host.call('/api/workers'))).workers.filter((w: any) => w.state === 'ready').length === 2, 20_000, 'two ready workers')
    browser = await launchChromium()
    page = await browser.newPage({ viewport: { width: 1280, height: 900 }, locale: 'en-GB' })
    page.on('console', (message) => {
      if (message.type() === 'error') pageProblems.push(message.text())
    })
    page.on('pageerror', (error) => pageProblems.push(String(error)))
    await page.goto(`${host.url}/#token=${host.token}`)
    await page.getByTestId('stream-status').filter({ hasText: 'Live' }).waitFor()
    await page.getByTestId('leases-empty').waitFor()
  }, 150_000)

  afterAll(async () => {
    await browser?.close()
    await host?.dispose()
  })

  test(`the overview keeps answering through a burst of 2,000 jobs, shows at most ${FLASHING_AT_MOST} ended leases at any time, and none once it is over`, async () => {
    const batch = { jobs: Array.from({ length: 1000 }, (_, i) => (i % 2 === 0 ? { job_type: 'noop', cost_units: 1 } : { job_type: 'sleep', cost_units: 1, payload: { ms: 0 } })) }
    for (let i = 0; i < 2; i++) {
      const answer = await json(await host.call('/api/scheduler/jobs/submit-batch', { method: 'POST', json: batch, headers: { prefer: 'return=minimal' } }))
      expect(answer.results.every((r: { ok: boolean }) => r.ok)).toBe(true)
    }
    // While the jobs run: the page answers a round trip, and its table never holds more ended leases than the bound.
    let slowest = 0
    let mostEnded = 0
    let rounds = 0
    while ((await unfinished()) > 0) {
      const sent = Date.now()
      const ended = await page.evaluate(() => document.querySelectorAll('[data-testid="leases"] tr.released, [data-testid="leases"] tr.expired').length)
      slowest = Math.max(slowest, Date.now() - sent)
      mostEnded = Math.max(mostEnded, ended)
      rounds++
      expect(slowest, `the page took ${slowest} ms to answer during the burst`).toBeLessThan(ANSWER_WITHIN_MS)
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    expect(rounds).toBeGreaterThan(0)
    expect(mostEnded).toBeLessThanOrEqual(FLASHING_AT_MOST)
    // Once over, the ended leases flash out and go: the table says no lease is active, as the header does.
    await page.getByTestId('leases-empty').waitFor({ timeout: 15_000 })
    expect(await page.locator('[data-testid="leases-panel"] header .num').textContent()).toBe('0 active')
    expect(pageProblems).toEqual([])
  }, 240_000)
})
