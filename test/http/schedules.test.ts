/**
 * Recurring schedules over HTTP (docs/schedules.md): the routes, their errors, and firings made
 * by a real host's schedule timer on an injected clock, across a restart and after downtime.
 */
import { afterEach, describe, expect, test } from 'vitest'
import { HOUR, MINUTE, ManualClock, SECOND } from '../../src-main/engine/rules/clock'
import { startTestHost, type TestHost } from '../helpers/host'
import { body, clockedHost, API_T0, expectError, expectInvalid, ISO_MS, keys, post, QUEUE, QUEUE_JOB_READ_KEYS, until } from './support'

const S = '/api/schedules'
const start = clockedHost({ totalUnits: 20 })

const SCHEDULE_KEYS = ['created_at', 'cron', 'enabled', 'id', 'job', 'last_run', 'name', 'next_fire_at', 'next_fire_times', 'overlap', 'revision', 'state', 'timezone', 'updated_at']

const nightly = (overrides: Record<string, unknown> = {}) => ({
  name: 'nightly',
  cron: '0 2 * * *',
  timezone: 'UTC',
  job: { job_type: 'backup', cost_units: 2, payload: { to: '/mnt/b' } },
  ...overrides,
})

const iso = (ms: number) => new Date(ms).toISOString()
/** API_T0 is 2026-02-06T20:10Z: the next 02:00 UTC is the 7th. */
const NEXT_2AM = Date.parse('2026-02-07T02:00:00.000Z')

const patch = (host: TestHost, name: string, json: unknown) => host.call(`${S}/${name}`, { method: 'PATCH', json })

describe('the schedule routes', () => {
  test('POST creates a schedule (201) with its next three firings; GET lists it and reads it by name', async () => {
    const { host } = await start()
    const res = await post(host, S, nightly({ overlap: 'skip' }))
    expect(res.status).toBe(201)
    const { schedule } = await body(res)
    expect(keys(schedule)).toEqual(SCHEDULE_KEYS)
    expect(schedule).toMatchObject({
      name: 'nightly',
      cron: '0 2 * * *',
      timezone: 'UTC',
      job: { job_type: 'backup', cost_units: 2, payload: { to: '/mnt/b' } },
      overlap: 'skip',
      enabled: true,
      state: 'enabled',
      next_fire_at: iso(NEXT_2AM),
      next_fire_times: [iso(NEXT_2AM), iso(NEXT_2AM + 24 * HOUR), iso(NEXT_2AM + 48 * HOUR)],
      last_run: null,
      created_at: iso(API_T0),
    })
    expect(schedule.updated_at).toMatch(ISO_MS)
    expect(await body(await host.call(S))).toEqual({ schedules: [schedule] })
    expect(await body(await host.call(`${S}/nightly`))).toEqual({ schedule })
  })

  test('a duplicate name is 409 duplicate_schedule; an unknown name is 404 schedule_not_found', async () => {
    const { host } = await start()
    expect((await post(host, S, nightly())).status).toBe(201)
    await expectError(await post(host, S, nightly({ cron: '* * * * *' })), 409, 'duplicate_schedule')
    await expectError(await host.call(`${S}/nope`), 404, 'schedule_not_found')
    await expectError(await patch(host, 'nope', { enabled: false }), 404, 'schedule_not_found')
    await expectError(await host.call(`${S}/nope`, { method: 'DELETE' }), 404, 'schedule_not_found')
  })

  test('a bad cron expression or time zone is 400 with the reason', async () => {
    const { host } = await start()
    const cron = await expectError(await post(host, S, nightly({ cron: '0 2 * * 9' })), 400, 'invalid_cron')
    expect(cron.detail).toBe('cron: day of week 9 is out of range (0–7, 0 and 7 Sunday)')
    expect((await expectError(await post(host, S, nightly({ cron: '0 0 0 30 2 *' })), 400, 'invalid_cron')).detail).toMatch(/never fires/)
    const zone = await expectError(await post(host, S, nightly({ timezone: 'Europe/Atlantis' })), 400, 'invalid_timezone')
    expect(zone.detail).toMatch(/^timezone: "Europe\/Atlantis" is not a time zone/)
    await expectError(await patch(host, 'nightly', { cron: '* * *' }), 404, 'schedule_not_found')
    expect((await post(host, S, nightly())).status).toBe(201)
    await expectError(await patch(host, 'nightly', { cron: '* * *' }), 400, 'invalid_cron')
    await expectError(await patch(host, 'nightly', { timezone: 'Nowhere' }), 400, 'invalid_timezone')
  })

  test('missing and unknown fields are 400 naming them; the job template is checked as a submit is', async () => {
    const { host } = await start()
    await expectInvalid(await post(host, S, { cron: '* * * * *', job: { job_type: 'x' } }), 'name', 'job.cost_units')
    await expectInvalid(await post(host, S, nightly({ name: 'has space' })), 'name')
    // Only ASCII letters: the refusal says so, as a non-ASCII letter would otherwise seem to be one.
    const accented = await expectError(await post(host, S, nightly({ name: 'café' })), 400, 'invalid_request')
    expect(accented.detail).toContain('name: ASCII letters, digits')
    await expectInvalid(await post(host, S, nightly({ overlap: 'sometimes' })), 'overlap')
    await expectInvalid(await post(host, S, nightly({ job: { job_type: 'x', cost_units: 1, client_request_id: 'k' } })), 'job')
    await expectInvalid(await post(host, S, nightly({ every: 'day' })), 'every')
    await expectInvalid(await patch(host, 'nightly', { name: 'other' }), 'name')
    const cost = await expectError(await post(host, S, nightly({ job: { job_type: 'x', cost_units: 21 } })), 400, 'cost_exceeds_capacity')
    expect(cost.detail).toMatch(/^job\.cost_units: 21 exceeds the total capacity of 20/)
    expect(await body(await host.call(S))).toEqual({ schedules: [] })
  })

  test('PATCH changes the next fire time; enabled false pauses it (no next firing), true resumes it', async () => {
    const { host } = await start()
    await post(host, S, nightly())
    const moved = await body(await patch(host, 'nightly', { cron: '30 21 * * *' }))
    expect(moved.schedule).toMatchObject({ cron: '30 21 * * *', next_fire_at: '2026-02-06T21:30:00.000Z' })
    const zoned = await body(await patch(host, 'nightly', { timezone: 'Asia/Tokyo' }))
    expect(zoned.schedule).toMatchObject({ timezone: 'Asia/Tokyo', next_fire_at: '2026-02-07T12:30:00.000Z' }) // 21:30 JST
    expect((await body(await patch(host, 'nightly', { enabled: false }))).schedule).toMatchObject({ enabled: false, state: 'paused', next_fire_at: null, next_fire_times: [] })
    expect((await body(await patch(host, 'nightly', { enabled: true }))).schedule).toMatchObject({ enabled: true, next_fire_at: '2026-02-07T12:30:00.000Z' })
    await expectInvalid(await patch(host, 'nightly', {}), '(body)')
  })

  test('DELETE answers the schedule as it was; it is gone', async () => {
    const { host } = await start()
    await post(host, S, nightly())
    const deleted = await body(await host.call(`${S}/nightly`, { method: 'DELETE' }))
    expect(deleted.schedule.name).toBe('nightly')
    await expectError(await host.call(`${S}/nightly`), 404, 'schedule_not_found')
  })

  test('GET, POST and PATCH answer the revision as ETag; a PATCH or DELETE whose If-Match names an old one is 412 precondition_failed, and changes nothing', async () => {
    const { host } = await start()
    const created = await post(host, S, nightly())
    expect([created.headers.get('etag'), (await body(created)).schedule.revision]).toEqual(['"1"', 1])
    expect((await host.call(`${S}/nightly`)).headers.get('etag')).toBe('"1"')
    const edited = await host.call(`${S}/nightly`, { method: 'PATCH', json: { cron: '0 3 * * *' }, headers: { 'if-match': '"1"' } })
    expect([edited.status, edited.headers.get('etag'), (await body(edited)).schedule.revision]).toEqual([200, '"2"', 2])
    // Made from the first read: refused, whatever it would change.
    const stale = await host.call(`${S}/nightly`, { method: 'PATCH', json: { job: { job_type: 'restore', cost_units: 1 } }, headers: { 'if-match': '"1"' } })
    const refused = await expectError(stale, 412, 'precondition_failed')
    expect(refused.detail).toMatch(/^Schedule nightly changed since it was read .*: read it again/)
    await expectError(await host.call(`${S}/nightly`, { method: 'DELETE', headers: { 'if-match': '"1"' } }), 412, 'precondition_failed')
    // A weak tag never matches under If-Match; * matches the schedule there is.
    await expectError(await host.call(`${S}/nightly`, { method: 'PATCH', json: { overlap: 'skip' }, headers: { 'if-match': 'W/"2"' } }), 412, 'precondition_failed')
    expect(await body(await host.call(`${S}/nightly`))).toMatchObject({ schedule: { cron: '0 3 * * *', overlap: 'allow', job: { job_type: 'backup' }, revision: 2 } })
    expect((await host.call(`${S}/nightly`, { method: 'PATCH', json: { overlap: 'skip' }, headers: { 'if-match': '"7", "2"' } })).status).toBe(200)
    expect((await host.call(`${S}/nightly`, { method: 'PATCH', json: { overlap: 'allow' }, headers: { 'if-match': '*' } })).status).toBe(200)
    // Without If-Match, as ever: the change is made.
    expect((await body(await patch(host, 'nightly', { job: { job_type: 'restore', cost_units: 1 } }))).schedule).toMatchObject({ job: { job_type: 'restore' }, revision: 5 })
    const deleted = await host.call(`${S}/nightly`, { method: 'DELETE', headers: { 'if-match': '"5"' } })
    expect(deleted.status).toBe(200)
    await expectError(await host.call(`${S}/nightly`), 404, 'schedule_not_found')
  })

  test('the OpenAPI document has the routes with request and response schemas', async () => {
    const { host } = await start()
    const doc = await body(await host.call('/api/openapi.json'))
    expect(Object.keys(doc.paths[S])).toEqual(['get', 'post'])
    expect(Object.keys(doc.paths[`${S}/{name}`])).toEqual(['get', 'patch', 'delete'])
    const created = doc.paths[S].post.responses['201'].content['application/json'].schema
    expect(created.properties.schedule.$ref).toBe('#/components/schemas/Schedule')
    const schedule = doc.components.schemas.Schedule
    expect(Object.keys(schedule.properties).sort()).toEqual(SCHEDULE_KEYS)
    const request = doc.paths[S].post.requestBody.content['application/json'].schema
    const createBody = request.$ref ? doc.components.schemas[request.$ref.split('/').pop()] : request
    expect(createBody.required).toEqual(expect.arrayContaining(['name', 'cron', 'job']))
    for (const [method, status] of [['get', '200'], ['patch', '200']] as const) expect(Object.keys(doc.paths[`${S}/{name}`][method].responses[status].headers)).toEqual(['ETag'])
    expect(Object.keys(doc.paths[S].post.responses['201'].headers)).toEqual(['ETag'])
    for (const method of ['patch', 'delete']) {
      const operation = doc.paths[`${S}/{name}`][method]
      expect(operation.parameters.filter((p: { in: string }) => p.in === 'header').map((p: { name: string }) => p.name)).toEqual(['If-Match'])
      expect(operation.responses['412'].description).toMatch(/^precondition_failed/)
    }
  })
})

describe('firings made by the host', () => {
  /** The jobs a schedule made, as the queue API lists them. */
  const scheduledJobs = async (host: TestHost) =>
    ((await body(await host.call(`${QUEUE}/jobs?limit=500`))).jobs as any[]).filter((job) => job.schedule !== null)

  test('at its time the host fires a schedule once; the job shows its schedule and fire time; the list shows the last run', async () => {
    const { host, clock } = await start()
    await post(host, S, nightly({ cron: '*/5 * * * *' })) // next: 20:15
    clock.set(Date.parse('2026-02-06T20:15:00.000Z'))
    await until(async () => (await scheduledJobs(host)).length === 1)
    const [job] = await scheduledJobs(host)
    expect(keys(job)).toEqual(QUEUE_JOB_READ_KEYS)
    expect(job).toMatchObject({ job_type: 'backup', cost_units: 2, payload: { to: '/mnt/b' }, schedule: { name: 'nightly', fire_at: '2026-02-06T20:15:00.000Z' } })
    expect((await body(await host.call(`${QUEUE}/jobs/${job.job_id}`))).job.schedule).toEqual({ name: 'nightly', fire_at: '2026-02-06T20:15:00.000Z' })
    const events = (await body(await host.call(`${QUEUE}/jobs/${job.job_id}/events`))).events.map((e: any) => e.type)
    expect(events).toEqual(['JOB_SUBMITTED', 'SCHEDULE_FIRED'])
    const { schedule } = await body(await host.call(`${S}/nightly`))
    expect(schedule).toMatchObject({
      next_fire_at: '2026-02-06T20:20:00.000Z',
      last_run: { fire_at: '2026-02-06T20:15:00.000Z', outcome: 'FIRED', reason: null, job_id: job.job_id, job_state: 'QUEUED' },
    })
    // A job submitted by hand has no schedule.
    const byHand = await body(await post(host, `${QUEUE}/jobs/submit`, { job_type: 'x', cost_units: 1 }))
    expect((await body(await host.call(`${QUEUE}/jobs/${byHand.job.job_id}`))).job.schedule).toBeNull()
  })

  test('a firing is made once across a restart; after downtime one catch-up run, the latest missed firing', async () => {
    const clock = new ManualClock(API_T0)
    let host = await startTestHost({ totalUnits: 20, busy: 0 }, { clock })
    try {
      await post(host, S, nightly({ cron: '*/5 * * * *' }))
      clock.set(Date.parse('2026-02-06T20:15:00.000Z'))
      await until(async () => (await scheduledJobs(host)).length === 1)

      const restart = async () => {
        await host.stop()
        host = await startTestHost({ dataDir: host.dataDir, totalUnits: null, busy: null }, { clock })
      }
      await restart() // at the same moment: nothing more
      expect((await scheduledJobs(host)).length).toBe(1)

      // Stopped from 20:15 to 21:02: the ten firings 20:20 … 21:00 were missed; one run at start, 21:00's.
      await host.stop()
      clock.set(Date.parse('2026-02-06T21:02:00.000Z'))
      host = await startTestHost({ dataDir: host.dataDir, totalUnits: null, busy: null }, { clock })
      const jobs = await scheduledJobs(host) // fired before the host answered anything
      expect(jobs.map((j) => j.schedule.fire_at)).toEqual(['2026-02-06T21:00:00.000Z', '2026-02-06T20:15:00.000Z'])
      expect((await body(await host.call(`${S}/nightly`))).schedule.next_fire_at).toBe('2026-02-06T21:05:00.000Z')
    } finally {
      await host.dispose()
    }
  })

  test('a clock set back re-aims a schedule at its first firing after the new time, while the host runs and across a restart; a firing made is not made again', async () => {
    const clock = new ManualClock(API_T0)
    let host = await startTestHost({ totalUnits: 20, busy: 0 }, { clock })
    try {
      await post(host, S, nightly({ name: 'minutely', cron: '* * * * *' }))
      const set = Date.parse('2026-02-06T20:10:00.000Z')
      clock.set(set + 3 * HOUR) // a clock that ran fast: the schedule fires, and aims at the minute after
      await until(async () => (await scheduledJobs(host)).length === 1)
      clock.set(set + 30 * SECOND) // set right
      await until(async () => (await body(await host.call(`${S}/minutely`))).schedule.next_fire_at === '2026-02-06T20:11:00.000Z', 5000, 're-aimed')
      clock.set(set + MINUTE)
      await until(async () => (await scheduledJobs(host)).length === 2)
      clock.set(set + 30 * SECOND) // set back past the firing of 20:11, which is not made again
      await until(async () => (await body(await host.call(`${S}/minutely`))).schedule.next_fire_at === '2026-02-06T20:11:00.000Z', 5000, 're-aimed')
      clock.set(set + MINUTE + SECOND)
      await until(async () => (await body(await host.call(`${S}/minutely`))).schedule.next_fire_at === '2026-02-06T20:12:00.000Z', 5000, 'moved on')
      expect((await scheduledJobs(host)).length).toBe(2)

      // Set back while the host was down: re-aimed as it starts.
      await host.stop()
      clock.set(set + 3 * HOUR + 2 * MINUTE)
      host = await startTestHost({ dataDir: host.dataDir, totalUnits: null, busy: null }, { clock })
      expect((await scheduledJobs(host)).length).toBe(3) // the catch-up run, the latest missed firing
      await host.stop()
      clock.set(set + 2 * MINUTE + 30 * SECOND)
      host = await startTestHost({ dataDir: host.dataDir, totalUnits: null, busy: null }, { clock })
      expect((await body(await host.call(`${S}/minutely`))).schedule.next_fire_at).toBe('2026-02-06T20:13:00.000Z')
      expect((await scheduledJobs(host)).length).toBe(3)
    } finally {
      await host.dispose()
    }
  })

  test('a disabled schedule never fires', async () => {
    const { host, clock } = await start()
    await post(host, S, nightly({ name: 'off', cron: '* * * * *', enabled: false }))
    await post(host, S, nightly({ name: 'on', cron: '* * * * *' }))
    clock.advance(MINUTE)
    await until(async () => (await scheduledJobs(host)).length === 1)
    // The host fired 'on' at this moment; it had the same chance to fire 'off'.
    expect((await scheduledJobs(host)).map((j) => j.schedule.name)).toEqual(['on'])
    expect((await body(await host.call(`${S}/off`))).schedule).toMatchObject({ enabled: false, next_fire_at: null, last_run: null })
  })
})
