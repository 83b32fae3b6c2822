import { describe, expect, test } from 'vitest'
import { busyLabel, capacityBar, sliderPoint } from '../../src-renderer/lib/capacity-bar'
import { usableUnits } from '../../src-shared/usable-units'
import { chartSeries, pointCount } from '../../src-renderer/lib/charts.svelte'
import { AXIS_LABEL_GAP_PX, axisLabels, axisTickSpace, formatAge, formatClock, formatCountdown, formatDuration, VALUE_AXIS_MIN_PX, VALUE_AXIS_PAD_PX, valueAxisWidth } from '../../src-renderer/lib/time-format'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseRoute, hrefOf } from '../../src-renderer/lib/route.svelte'
import { filterOfQuery, filterQuery, NO_FILTER, unreadQuery } from '../../src-renderer/lib/jobs.svelte'
import { shortId } from '../../src-shared/short-id'
import { formatBytes, retentionText } from '../../src-renderer/lib/storage.svelte'
import { eventPairs } from '../../src-renderer/lib/event-text'
import { errorText } from '../../src-renderer/lib/attempts'
import { newId } from '../../src-main/engine/store/ids'

const T0 = Date.UTC(2026, 0, 1)
const SECOND = 1000
const MINUTE = 60 * SECOND

describe('countdown to a lease expiry', () => {
  test('m:ss, rounded up so 0:00 never shows before the deadline', () => {
    expect(formatCountdown(27_400)).toBe('0:28')
    expect(formatCountdown(60_000)).toBe('1:00')
    expect(formatCountdown(1)).toBe('0:01')
    expect(formatCountdown(3 * 3600_000 + 5 * MINUTE + 7 * SECOND)).toBe('3:05:07')
  })
  test('expired at and after the deadline', () => {
    expect(formatCountdown(0)).toBe('expired')
    expect(formatCountdown(-5000)).toBe('expired')
  })
})

describe('ages and durations', () => {
  test('two largest units', () => {
    expect(formatDuration(4 * SECOND)).toBe('4 s')
    expect(formatDuration(2 * MINUTE + 5 * SECOND)).toBe('2 min 5 s')
    expect(formatDuration(3 * 3600_000 + 12 * MINUTE)).toBe('3 h 12 min')
    expect(formatDuration(50 * 3600_000)).toBe('2 d 2 h')
  })
  test('a duration over about 60 days reads in months, and over two years in years: no "26473 d 20 h"', () => {
    const DAY = 24 * 3600_000
    expect(formatDuration(59 * DAY + 5 * 3600_000)).toBe('59 d 5 h')
    expect(formatDuration(60 * DAY)).toBe('2 months')
    expect(formatDuration(200 * DAY)).toBe('7 months')
    expect(formatDuration(700 * DAY)).toBe('23 months')
    expect(formatDuration(26473 * DAY + 20 * 3600_000)).toBe('72 years')
  })
  test('age of a heartbeat', () => {
    expect(formatAge(T0, T0 + 300)).toBe('just now')
    expect(formatAge(T0, T0 + 12 * SECOND)).toBe('12 s ago')
    expect(formatAge(null, T0)).toBe('never')
  })
})

describe('capacity arithmetic on the bar', () => {
  const capacity = (total_units: number, busy_rating: number, leased: number) => {
    const usable = usableUnits(total_units, busy_rating)
    return { total_units, busy_rating, busy_mode: 'manual' as const, usable, leased, available: usable - leased }
  }
  test('usable = floor(total × (10 − busy) / 10), as docs/capacity.md says', () => {
    expect(usableUnits(50, 8)).toBe(10)
    expect(usableUnits(100, 0)).toBe(100)
    expect(usableUnits(7, 5)).toBe(3)
  })
  test('in use, available and reserved add up to the total', () => {
    const bar = capacityBar(capacity(100, 2, 30))
    expect(bar).toMatchObject({ inUse: 0.3, free: 0.5, over: 0, reserved: 0.2, usableAt: 0.8, reservedUnits: 20 })
    expect(bar.inUse + bar.free + bar.over + bar.reserved).toBeCloseTo(1)
  })
  test('leases beyond usable (the rating was raised) show as over, available negative', () => {
    const c = capacity(50, 8, 30)
    expect(c.available).toBe(-20)
    const bar = capacityBar(c)
    expect(bar).toMatchObject({ inUse: 0.2, free: 0, over: 0.4, reserved: 0.4, reservedUnits: 40 })
    expect(bar.inUse + bar.free + bar.over + bar.reserved).toBeCloseTo(1)
  })
  test('zero total units draws an empty bar', () => {
    expect(capacityBar(capacity(0, 0, 0))).toMatchObject({ inUse: 0, free: 0, reserved: 0, over: 0 })
  })
  test('the busy-rating slider moved from a rating with decimals stands for the whole point on the side it moved to, and steps by points from one', () => {
    expect(sliderPoint(9.95, 9.85)).toBe(9)
    expect(sliderPoint(9.95, 10)).toBe(10)
    expect(sliderPoint(3.4, 7.62)).toBe(8) // dragged up: the point reached
    expect(sliderPoint(3.4, 1.2)).toBe(1) // dragged down
    expect(sliderPoint(8, 7)).toBe(7)
    expect(sliderPoint(8, 9)).toBe(9)
    expect(sliderPoint(0, 8)).toBe(8)
  })
  test('the busy label shows the rating as stored: a measured one has one decimal, a manual one the decimals it was set with', () => {
    expect(busyLabel({ ...capacity(100, 8, 0), busy_mode: 'manual' })).toBe('8 (manual)')
    expect(busyLabel({ ...capacity(100, 0, 0), busy_rating: 3.4, busy_mode: 'auto' })).toBe('3.4 (auto)')
    expect(busyLabel({ ...capacity(100, 9.95, 0), busy_mode: 'manual' })).toBe('9.95 (manual)') // as stored, not 9.9 or 10
  })
})

test('points per chart: range ÷ bucket', () => {
  expect(pointCount('1h', '1m')).toBe(60)
  expect(pointCount('24h', '5m')).toBe(288)
  expect(pointCount('7d', '1h')).toBe(168)
  expect(pointCount('1h', '1h')).toBe(1)
})

test('routes in the fragment', () => {
  expect(parseRoute('')).toEqual({ view: 'overview', jobId: null })
  expect(parseRoute('#/blockers')).toEqual({ view: 'blockers', jobId: null })
  expect(parseRoute('#/jobs/abc-1')).toEqual({ view: 'job', jobId: 'abc-1' })
  expect(parseRoute('#/nonsense')).toEqual({ view: 'overview', jobId: null })
  expect(hrefOf({ view: 'job', jobId: 'a b' })).toBe('#/jobs/a%20b')
})

test('a job address that is not a well-formed escape is read as it stands, marked as naming no job, never thrown on', () => {
  expect(parseRoute('#/jobs/%FF')).toEqual({ view: 'job', jobId: '%FF', malformed: true })
  expect(parseRoute('#/jobs/%E2%9C%93')).toEqual({ view: 'job', jobId: '\u2713' })
})

test("a view's settings follow a ? in the fragment: the Jobs view's filter, only the fields it sets, and back", () => {
  const place = parseRoute('#/jobs?state=FAILED&type=sleep&dead_letter=1')
  expect(place).toMatchObject({ view: 'jobs', jobId: null })
  expect(filterOfQuery(place.query!)).toEqual({ state: 'FAILED', job_type: 'sleep', addon_id: '', search: '', dead_letter: true })
  const filter = { ...NO_FILTER, state: 'QUEUED' as const, search: ' a b ' }
  // Spaces and all: the host matches what it is sent.
  expect(hrefOf({ view: 'jobs', jobId: null, query: filterQuery(filter) })).toBe('#/jobs?state=QUEUED&search=+a+b+')
  expect(filterOfQuery(parseRoute(hrefOf({ view: 'jobs', jobId: null, query: filterQuery(filter) })).query!)).toEqual(filter)
  expect(hrefOf({ view: 'jobs', jobId: null, query: filterQuery(NO_FILTER) })).toBe('#/jobs')
  expect(filterOfQuery(new URLSearchParams('state=NOPE'))).toEqual(NO_FILTER) // a state the API does not know is left out
})

test("a hand-made link's filter is taken in the API's spellings too, and what no filter takes is named, never dropped silently", () => {
  const read = (query: string) => ({ filter: filterOfQuery(new URLSearchParams(query)), unread: unreadQuery(new URLSearchParams(query)) })
  expect(read('state=failed')).toEqual({ filter: { ...NO_FILTER, state: 'FAILED' }, unread: [] })
  // The engine's LEASED is what the queue API shows as RUNNING.
  expect(read('state=LEASED')).toEqual({ filter: { ...NO_FILTER, state: 'RUNNING' }, unread: [] })
  expect(read('dead_letter=true')).toEqual({ filter: { ...NO_FILTER, dead_letter: true }, unread: [] })
  expect(read('dead_letter=1&type=sleep')).toEqual({ filter: { ...NO_FILTER, dead_letter: true, job_type: 'sleep' }, unread: [] })
  expect(read('state=NOPE&dead_letter=maybe&colour=red')).toEqual({ filter: NO_FILTER, unread: ['state=NOPE', 'dead_letter=maybe', 'colour=red'] })
})

describe('short job ids', () => {
  test('the last 8 characters, so ids made in the same millisecond still read apart', () => {
    const ids = Array.from({ length: 50 }, () => newId())
    expect(new Set(ids.map((id) => id.slice(0, 8))).size).toBeLessThanOrEqual(2) // the time part: all alike
    const shown = ids.map(shortId)
    expect(new Set(shown).size).toBe(50)
    expect(shortId('0190f3a2-7c1e-7b3d-9a4f-2e6d81c03f9a')).toBe('…81c03f9a')
  })

  test('an id too short to shorten shows whole', () => {
    expect(shortId('job-1')).toBe('job-1')
    expect(shortId('123456789')).toBe('123456789')
    expect(shortId('1234567890')).toBe('…34567890')
  })
})

describe('times, written one way in the whole window', () => {
  const AT = new Date(2026, 10, 28, 21, 47, 10).getTime() // 21:47:10 in this machine's time zone
  const DAY = 24 * 3600 * SECOND

  test("follow the locale's hour cycle: 24-hour in en-GB and de-DE, AM/PM in en-US", () => {
    expect(formatClock(AT, AT, 'en-GB')).toBe('21:47:10')
    expect(formatClock(AT, AT, 'de-DE')).toBe('21:47:10')
    expect(formatClock(AT, AT, 'en-US')).toMatch(/^9:47:10\sPM$/)
    // ISO on the wire or epoch ms (older stored events): the same time.
    expect(formatClock(new Date(AT).toISOString(), AT, 'en-US')).toBe(formatClock(AT, AT, 'en-US'))
  })

  test('a time on another day carries its date; none is a dash', () => {
    expect(formatClock(AT, AT + DAY, 'en-GB')).toBe('28 Nov 21:47:10')
    expect(formatClock(AT, AT + DAY, 'en-US')).toMatch(/^Nov 28 9:47:10\sPM$/)
    expect(formatClock(null, AT)).toBe('—')
    // Another year than this: its year too (a yearly schedule's next runs are otherwise the same three times).
    const years = [1, 2, 3].map((n) => formatClock(Date.UTC(2026 + n, 0, 1, 12), AT, 'en-GB').replace(/ \d+:.*/, ''))
    expect(years).toEqual(['1 Jan 2027', '1 Jan 2028', '1 Jan 2029'])
    expect(formatClock('soon', AT)).toBe('—')
  })

  test("a chart's time axis: minutes in the locale's hour cycle, the date on a line of its own under each day's first tick, dates alone for ticks a day apart", () => {
    const ticks = [AT - 10 * 60 * SECOND, AT + 50 * 60 * SECOND, AT + 110 * 60 * SECOND, AT + 170 * 60 * SECOND].map((t) => t / SECOND)
    expect(axisLabels(ticks, 'en-GB')).toEqual(['21:37\n28 Nov', '22:37', '23:37', '00:37\n29 Nov'])
    expect(axisLabels(ticks, 'en-US').map((l) => l.replace(/[^\S\n]/g, ' '))).toEqual(['9:37 PM\nNov 28', '10:37 PM', '11:37 PM', '12:37 AM\nNov 29'])
    expect(axisLabels([AT / SECOND, (AT + DAY) / SECOND], 'en-GB')).toEqual(['28 Nov', '29 Nov'])
  })

  test("a chart's time axis labels never overlap: ticks are at least as far apart as the widest line a label can have, and a gap", () => {
    // Each character 7 px, as in the axis's 12 px font, give or take.
    const width = (line: string) => line.length * 7
    for (const locale of ['en-GB', 'en-US', 'de-DE']) {
      const space = axisTickSpace(width, locale)
      // Ten-minute ticks across two midnights, and ticks a day apart: neighbours, each centred on its tick, keep the gap.
      const minutes = Array.from({ length: 24 * 6 * 2 }, (_, i) => (AT + i * 10 * 60 * SECOND) / SECOND)
      const days = Array.from({ length: 40 }, (_, i) => (AT + i * DAY) / SECOND)
      for (const labels of [axisLabels(minutes, locale), axisLabels(days, locale)]) {
        const widest = labels.map((label) => Math.max(...label.split('\n').map(width)))
        const touching = widest.slice(1).filter((w, i) => widest[i]! / 2 + w / 2 + AXIS_LABEL_GAP_PX > space)
        expect(touching, locale).toEqual([])
      }
    }
  })

  test('no part of the window writes a time but through that formatter', () => {
    const root = join(import.meta.dirname, '../../src-renderer')
    const files = readdirSync(root, { recursive: true, encoding: 'utf8' }).filter((f) => /\.(ts|svelte)$/.test(f) && !f.endsWith('time-format.ts'))
    const offenders = files.filter((f) => /toLocale(Date|Time)String|new Intl\.DateTimeFormat|toISOString\(\)/.test(readFileSync(join(root, f), 'utf8')))
    expect(offenders).toEqual([])
  })
})

describe("an event's data on the timeline", () => {
  const line = (data: Record<string, unknown> | null, now: number) => eventPairs(data, now).map((p) => `${p.key}=${p.value}`)

  test('every ISO time, and a number in a field named …_at (older stored events), is written by the one formatter; other numbers stay numbers', () => {
    const data = { expires_at: T0 + 35 * SECOND, retry: new Date(T0 + 180 * SECOND).toISOString(), fence: 1795668613865, ttl_s: 30 }
    expect(line(data, T0)).toEqual([`expires_at=${formatClock(T0 + 35 * SECOND, T0)}`, `retry=${formatClock(T0 + 180 * SECOND, T0)}`, 'fence=1795668613865', 'ttl_s=30'])
  })

  test('times inside objects too; a missing or unreadable time is shown as it is', () => {
    expect(line({ owner_lease: { lease_id: 'l', expires_at: T0 } }, T0)).toEqual([`owner_lease={lease_id=l, expires_at=${formatClock(T0, T0)}}`])
    expect(line({ released_at: null, acquired_at: 'soon', year: '2026' }, T0)).toEqual(['released_at=null', 'acquired_at=soon', 'year=2026'])
    expect(line(null, T0)).toEqual([])
  })

  test("a job run now shows the time it had been scheduled for as that, not as when it runs (its data's run_at)", () => {
    const data = { state: 'QUEUED', run_at: new Date(T0 + 600 * SECOND).toISOString(), requested_by: 'dashboard' }
    const keys = (type?: string) => eventPairs(data, T0, type).map((p) => p.key)
    expect(keys('JOB_RUN_NOW')).toEqual(['state', 'was_scheduled_for', 'requested_by'])
    expect(keys('JOB_SUBMITTED')).toEqual(['state', 'run_at', 'requested_by'])
  })
})

describe("a job's error", () => {
  test('its fields as JSON, then its stack as the lines it is', () => {
    expect(errorText({ code: 'E', message: 'boom', stack: 'Error: boom\n    at f (a.mjs:1:1)' })).toBe('{\n  "code": "E",\n  "message": "boom"\n}\n\nError: boom\n    at f (a.mjs:1:1)')
    expect(errorText({ code: 'E', message: 'boom' })).toBe('{\n  "code": "E",\n  "message": "boom"\n}')
    expect(errorText('plain words')).toBe('plain words')
    expect(errorText(['a'])).toBe('[\n  "a"\n]')
  })
})

describe('what a chart draws', () => {
  const series = (since: number | null) => ({
    metric: 'jobs_queued' as const,
    bucket: '1m' as const,
    range: '1h' as const,
    since: since === null ? null : new Date(since).toISOString(),
    points: Array.from({ length: 5 }, (_, i) => ({ ts: new Date(T0 + i * MINUTE).toISOString(), value: i === 4 ? 3 : 0 })),
  })

  test('no value for the buckets that ended before the history began: a gap, not zeros; the axis keeps the whole range', () => {
    const drawn = chartSeries(series(T0 + 2 * MINUTE + 10 * SECOND))
    expect(drawn.xs).toEqual([0, 1, 2, 3, 4].map((i) => (T0 + i * MINUTE) / 1000))
    expect(drawn.ys).toEqual([null, null, 0, 0, 3]) // the bucket that holds the start is drawn, its zeros real
  })

  test('a history older than the range draws every bucket; no history yet draws none', () => {
    expect(chartSeries(series(T0 - 7 * 24 * 60 * MINUTE)).ys).toEqual([0, 0, 0, 0, 3])
    expect(chartSeries(series(T0 + 4 * MINUTE)).ys).toEqual([null, null, null, null, 3])
    expect(chartSeries(series(null)).ys).toEqual([null, null, null, null, null])
    expect(chartSeries(undefined)).toEqual({ xs: [], ys: [] })
  })
})

describe('storage figures', () => {
  test('sizes in KB below a megabyte, MB with one decimal, GB with two', () => {
    expect(formatBytes(0)).toBe('0 KB')
    expect(formatBytes(812 * 1024)).toBe('812 KB')
    expect(formatBytes(12.34 * 1024 * 1024)).toBe('12.3 MB')
    expect(formatBytes(1.236 * 1024 * 1024 * 1024)).toBe('1.24 GB')
  })
  test('retention in days, and 0 as forever', () => {
    expect(retentionText(7)).toBe('7 days')
    expect(retentionText(1)).toBe('1 day')
    expect(retentionText(0)).toBe('forever')
  })
})

test('a chart’s value axis is as wide as its widest label and its ticks, never narrower than its minimum: five digits are not cut', () => {
  const sevenPx = (line: string) => 7 * line.length
  expect(valueAxisWidth(['0', '10,000', '20,000'], sevenPx)).toBe(42 + VALUE_AXIS_PAD_PX)
  expect(valueAxisWidth(['0', '5'], sevenPx)).toBe(VALUE_AXIS_MIN_PX)
  expect(valueAxisWidth([], sevenPx)).toBe(VALUE_AXIS_MIN_PX)
})
