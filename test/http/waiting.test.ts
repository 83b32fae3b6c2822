/**
 * A queue never stalls silently, over HTTP: a job larger than the capacity is refused at
 * submit, a lowered total reports the jobs it strands, and the reads say why each job waits.
 */
import { describe, expect, test } from 'vitest'
import type { TestHost } from '../helpers/host'
import { body, clockedHost, dbDigest, expectError, post, PULL, QUEUE, submit, until } from './support'

let host: TestHost
const startHost = clockedHost({ totalUnits: 100 })
async function start(overrides: Parameters<typeof startHost>[0] = {}) {
  ;({ host } = await startHost(overrides))
}
const put = (path: string, json: unknown) => host.call(path, { method: 'PUT', json })
const jobView = async (id: string) => (await body(await host.call(`${QUEUE}/jobs/${id}`))).job

describe('a job costing more than total_units', () => {
  test('POST /jobs/submit is 400 cost_exceeds_capacity naming both numbers, and writes nothing', async () => {
    await start()
    const before = dbDigest(host)
    const error = await expectError(await post(host, `${QUEUE}/jobs/submit`, { job_type: 'big', cost_units: 500 }), 400, 'cost_exceeds_capacity')
    expect(error.detail).toMatch(/500 exceeds the total capacity of 100 units/)
    expect(dbDigest(host)).toBe(before)
    await submit(host, { cost_units: 100 }) // the whole capacity is fine
  })

  test('a cost above any capacity there can be (over 1,000,000 units) is cost_exceeds_capacity too, and in a batch the item\'s own refusal', async () => {
    await start()
    const error = await expectError(await post(host, `${QUEUE}/jobs/submit`, { job_type: 'big', cost_units: 1_000_001 }), 400, 'cost_exceeds_capacity')
    expect(error.detail).toMatch(/1000001 exceeds the total capacity of 100 units/)
    const batch = await post(host, `${QUEUE}/jobs/submit-batch`, { jobs: [{ job_type: 'small', cost_units: 1 }, { job_type: 'big', cost_units: 2 ** 53 - 1 }] })
    expect(batch.status).toBe(200)
    const { results } = await body(batch)
    expect(results[0]).toMatchObject({ ok: true, job: { job_type: 'small', state: 'QUEUED' } })
    expect(results[1]).toMatchObject({ ok: false, code: 'cost_exceeds_capacity' })
  })

  test('a total lowered below a queued job\'s cost: JOB_EXCEEDS_CAPACITY in its timeline, its waiting_reason, the snapshot count', async () => {
    await start()
    const big = await submit(host, { cost_units: 80 })
    const small = await submit(host, { cost_units: 5 })
    expect((await put('/api/capacity', { total_units: 50 })).status).toBe(200)
    const events = (await body(await host.call(`${QUEUE}/jobs/${big.job_id}/events`))).events
    expect(events.at(-1)).toMatchObject({ type: 'JOB_EXCEEDS_CAPACITY', data: { state: 'QUEUED', cost_units: 80, total_units: 50 } })
    expect((await jobView(big.job_id)).waiting_reason).toBe('cost 80 exceeds total capacity 50; raise total_units or cancel the job')
    expect((await jobView(small.job_id)).waiting_reason).toBe(`behind job …${big.job_id.slice(-8)}, whose cost 80 exceeds total capacity 50`)
    const snapshot = await body(await host.call(`${QUEUE}/stats/snapshot`))
    expect(snapshot.jobs.over_capacity).toBe(1)
  })
})

describe('a running job requeued after the total dropped below its cost', () => {
  test('its lease expires: JOB_EXCEEDS_CAPACITY follows its JOB_REQUEUED in its timeline, and its waiting_reason says so', async () => {
    const started = await startHost({ totalUnits: 20, leaseTtlS: 1, heartbeatGraceS: 0 })
    host = started.host
    const job = await submit(host, { cost_units: 15, max_attempts: 5 })
    expect((await body(await post(host, `${PULL}/request`, { worker_id: 'p1' }))).lease.job_id).toBe(job.job_id)
    expect((await put('/api/capacity', { total_units: 10 })).status).toBe(200)
    started.clock.advance(1001) // the worker stays silent; the host's reaper expires its lease
    await until(() => host.engine.getJob(job.job_id).state === 'QUEUED', 1500)
    const events = (await body(await host.call(`${QUEUE}/jobs/${job.job_id}/events`))).events
    expect(events.map((e: { type: string }) => e.type).slice(-3)).toEqual(['LEASE_EXPIRED', 'JOB_REQUEUED', 'JOB_EXCEEDS_CAPACITY'])
    expect(events.at(-1)).toMatchObject({ data: { state: 'QUEUED', cost_units: 15, total_units: 10 } })
    expect((await jobView(job.job_id)).waiting_reason).toMatch(/^cost 15 exceeds total capacity 10; /)
  })
})

describe('waiting_reason on the reads', () => {
  test('GET /jobs/{id} and GET /jobs say why each waiting job waits; a running job says null; other answers do not carry it', async () => {
    await start({ busy: 8 }) // 20 of 100 units usable
    const head = await submit(host, { cost_units: 40 })
    expect(head).not.toHaveProperty('waiting_reason')
    const behind = await submit(host, { cost_units: 1 })
    const shortfall = 'needs 40 units; 20 available (busy rating 8 leaves 20 of 100 units, 0 leased)'
    expect((await jobView(head.job_id)).waiting_reason).toBe(`first in line; ${shortfall}`)
    const list = await body(await host.call(`${QUEUE}/jobs`))
    const reasons = Object.fromEntries(list.jobs.map((j: any) => [j.job_id, j.waiting_reason]))
    expect(reasons).toEqual({ [head.job_id]: `first in line; ${shortfall}`, [behind.job_id]: `behind job …${head.job_id.slice(-8)}, which ${shortfall}` })

    expect((await put('/api/capacity', { busy_rating: 0 })).status).toBe(200)
    const claimed = await body(await post(host, `${QUEUE}/jobs/claim`, { worker_id: 'w1' }))
    expect(claimed.job).not.toHaveProperty('waiting_reason')
    expect((await jobView(head.job_id)).waiting_reason).toBe('claimed by w1; waiting for its lease request')
    expect((await body(await post(host, `${QUEUE}/lease/request`, { job_id: head.job_id, worker_id: 'w1' }))).approved).toBe(true)
    expect((await jobView(head.job_id)).waiting_reason).toBeNull()
    expect((await jobView(behind.job_id)).waiting_reason).toBe('first in line; waiting for a worker to take it')
  })
})

describe('a busy rating is shown as stored', () => {
  test('a rating set to 9.95 reads 9.95 in the capacity, in a denial and in a waiting reason, not 10', async () => {
    await start()
    expect((await put('/api/capacity', { busy_rating: 9.95 })).status).toBe(200)
    expect(await body(await host.call('/api/capacity'))).toMatchObject({ busy_rating: 9.95, usable: 0 })
    const job = await submit(host, { cost_units: 1 })
    expect((await body(await post(host, `${PULL}/request`, { worker_id: 'p1' }))).reason).toBe('No capacity (busy=9.95, usable=0, leased=0)')
    expect((await jobView(job.job_id)).waiting_reason).toBe('first in line; needs 1 unit; none available (busy rating 9.95 leaves 0 of 100 units, 0 leased)')
  })
})

describe('the workers of the pull and queue APIs, as their requests filter', () => {
  test('a job of an add-on or a size that every worker asking rules out says so; the line is walked as their filters walk it, and the job said first is the one they take next', async () => {
    await start()
    const reason = async (id: string) => (await jobView(id)).waiting_reason
    const big = await submit(host, { priority: 'URGENT', addon_id: 'photos', cost_units: 8 })
    const music = await submit(host, { priority: 'URGENT', addon_id: 'music' })
    const none = await submit(host, { priority: 'HIGH' })
    const small = await submit(host, { addon_id: 'photos', cost_units: 2 })
    expect(await reason(small.job_id)).toBe(`waiting its turn behind job …${big.job_id.slice(-8)}`) // no worker known: the whole line
    // A queue API worker asks for one add-on's jobs of at most 5 units, and takes one of them.
    const ask = { worker_id: 'photos-worker', addon_id: 'photos', max_cost_units: 5, limit: 1 }
    const first = await submit(host, { priority: 'URGENT', addon_id: 'photos', cost_units: 1 })
    expect((await body(await post(host, `${QUEUE}/jobs/claim`, ask))).job.job_id).toBe(first.job_id)
    expect(await reason(big.job_id)).toBe('no worker connected takes a job of 8 units; it waits for one that does')
    expect(await reason(music.job_id)).toBe("no worker connected that runs job type generic takes add-on music's jobs; it waits for one that does")
    expect(await reason(none.job_id)).toBe("no worker connected that runs job type generic takes jobs without an add-on (each asks for one add-on's); it waits for one that does")
    expect(await reason(small.job_id)).toBe('first in line; waiting for a worker to take it')
    expect((await body(await post(host, `${QUEUE}/jobs/claim`, ask))).job.job_id).toBe(small.job_id)
    // A pull worker that takes any add-on's jobs, up to 8 units, asks: the other jobs are in its line.
    expect(await body(await post(host, `${PULL}/request`, { worker_id: 'pull-1', max_units: 8, ttl_sec: 30 }))).toMatchObject({ lease: { job_id: big.job_id } })
    expect(await reason(none.job_id)).toBe(`waiting its turn behind job …${music.job_id.slice(-8)}`)
  })
})
