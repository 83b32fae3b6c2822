// @vitest-environment happy-dom
import { flushSync, mount, unmount } from 'svelte'
import { afterEach, expect, test, vi } from 'vitest'
import BlockerCard from '../../src-renderer/components/BlockerCard.svelte'
import CapacityPanel from '../../src-renderer/components/CapacityPanel.svelte'
import LeasesTable from '../../src-renderer/components/LeasesTable.svelte'
import TokenForm from '../../src-renderer/components/TokenForm.svelte'
import { ApiClient, type Blocker } from '../../src-renderer/lib/api'
import { CapacityState } from '../../src-renderer/lib/capacity.svelte'
import type { LeaseRow } from '../../src-renderer/lib/lease-events'
import { fakeFetch, iso, SECOND, T0 } from './support'

const mounted: ReturnType<typeof mount>[] = []
function render<P extends Record<string, any>>(component: any, props: P): HTMLElement {
  const target = document.createElement('div')
  document.body.append(target)
  mounted.push(mount(component, { target, props }))
  flushSync()
  return target
}
afterEach(() => {
  for (const component of mounted.splice(0)) unmount(component)
  document.body.innerHTML = ''
})
const text = (el: Element | null | undefined) => el?.textContent?.replace(/\s+/g, ' ').trim()

test('the leases table counts down to expiry, shows the heartbeat age, and marks an expired lease', () => {
  const lease = (lease_id: string, ended: LeaseRow['ended'] = null): LeaseRow => ({
    lease_id,
    job_id: `${lease_id}-job-0000`,
    worker_id: 'local-1.1',
    cost_units: 10,
    granted_at: T0,
    expires_at: T0 + 35 * SECOND,
    last_heartbeat_at: T0 + 2 * SECOND,
    ended,
  })
  const el = render(LeasesTable, { rows: [lease('l1'), lease('l2', { how: 'expired', at: T0 })], jobTypes: { 'l1-job-0000': 'sleep' }, now: T0 + 10_500 })
  const rows = el.querySelectorAll('tbody tr')
  expect(rows).toHaveLength(2)
  expect(text(rows[0]!.querySelector('.countdown'))).toBe('0:25')
  expect(text(rows[0])).toContain('8 s ago')
  expect(text(rows[0])).toContain('sleep')
  expect(rows[1]!.classList.contains('expired')).toBe(true)
  expect(text(rows[1]!.querySelector('.countdown'))).toBe('expired')
})

test('no leases: an empty state, not an empty table', () => {
  const el = render(LeasesTable, { rows: [], jobTypes: {}, now: T0 })
  expect(el.querySelector('table')).toBeNull()
  expect(text(el.querySelector('[data-testid="leases-empty"]'))).toContain('No active leases')
})

test('the capacity panel shows the figures and sends a manual busy rating', async () => {
  const figures = { total_units: 50, busy_rating: 0, busy_mode: 'auto', usable: 50, leased: 10, available: 40 }
  const { fetcher, calls } = fakeFetch({
    'GET /api/capacity': figures,
    'PUT /api/capacity': (body) => ({ ...figures, busy_rating: 8, busy_mode: 'manual', usable: 10, available: 0, ...(body as object) }),
  })
  const capacity = new CapacityState(new ApiClient({ apiBase: 'http://127.0.0.1:1', token: 't' }, fetcher))
  await capacity.refresh()
  const el = render(CapacityPanel, { capacity })
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

test('an open blocker offers retry, force release and cancel, each with the note', () => {
  const blocker: Blocker = {
    blocker_id: 'b1',
    file: '/data/a.txt',
    holder: { owner_id: 'job:h', job_id: 'holder-job', acquired_at: iso(T0), last_heartbeat_at: iso(T0) },
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
    created_at: iso(T0 + 185 * SECOND),
  }
  const answers: [string, string][] = []
  const el = render(BlockerCard, { blocker, now: T0 + 245 * SECOND, onresolve: (action: string, note: string) => answers.push([action, note]) })
  expect(text(el)).toContain('/data/a.txt')
  expect(text(el)).toContain('held 3 min 5 s')
  expect(text(el)).toContain('1 min ago')
  const note = el.querySelector<HTMLInputElement>('input[type="text"]')!
  note.value = 'done soon'
  note.dispatchEvent(new Event('input', { bubbles: true }))
  flushSync()
  for (const label of ['Retry', 'Force release', 'Cancel job']) {
    ;[...el.querySelectorAll('button')].find((b) => b.textContent === label)!.click()
  }
  expect(answers).toEqual([
    ['retry', 'done soon'],
    ['force_release', 'done soon'],
    ['cancel', 'done soon'],
  ])
})

test('a resolved blocker says who answered what, and offers nothing', () => {
  const el = render(BlockerCard, {
    blocker: {
      blocker_id: 'b2',
      file: '/f',
      holder: { owner_id: 'job:h', job_id: null, acquired_at: iso(T0), last_heartbeat_at: null },
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
      created_at: iso(T0),
    } satisfies Blocker,
    now: T0,
    onresolve: () => {},
  })
  expect(el.querySelector('button')).toBeNull()
  expect(text(el.querySelector('[data-testid="resolution"]'))).toMatch(/^cancel by dashboard · .* · “not needed”$/)
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
