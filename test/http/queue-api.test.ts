/**
 * the queue API (queue) over real HTTP: submit, claim, status, cancel, list, events, the lease
 * request/heartbeat/release/get, and the stats routes. Every documented status and code, and
 * the exact views (the queue contract + the extras views/queue.ts documents).
 */
import { describe, expect, test } from 'vitest'
import type { ManualClock } from '../../src-main/engine/rules/clock'
import type { TestHost } from '../helpers/host'
import {
  body,
  expectError,
  expectInvalid,
  ISO_MS,
  keys,
  post,
  PULL,
  QUEUE,
  QUEUE_JOB_KEYS,
  QUEUE_JOB_READ_KEYS,
  QUEUE_LEASE_KEYS,
  QUEUE_RESULT_KEYS,
  submit,
  UNKNOWN_ID,
  clockedHost,
  API_T0,
  until,
} from './support'

const T0 = API_T0
let host: TestHost
let clock: ManualClock
const startHost = clockedHost({ totalUnits: 70, leaseTtlS: 30, heartbeatGraceS: 5, claimTtlS: 60 })

async function start(overrides: Parameters<typeof startHost>[0] = {}) {
  ;({ host, clock } = await startHost(overrides))
  return host
}

const get = (path: string) => host.call(path)

async function claim(workerId = 'w1', extra: Record<string, unknown> = {}) {
  const res = await post(host, `${QUEUE}/jobs/claim`, { worker_id: workerId, ...extra })
  expect(res.status).toBe(200)
  return (await body(res)).job
}

async function lease(jobId: string, extra: Record<string, unknown> = {}) {
  const res = await post(host, `${QUEUE}/lease/request`, { job_id: jobId, ...extra })
  expect(res.status).toBe(200)
  const answer = await body(res)
  expect(answer.approved).toBe(true)
  return answer.lease
}

/** submit → claim → lease request: a RUNNING job with its lease. */
async function running(workerId = 'w1', submitExtra: Record<string, unknown> = {}) {
  const job = await submit(host, submitExtra)
  const claimed = await claim(workerId)
  expect(claimed.job_id).toBe(job.job_id)
  return { job, lease: await lease(job.job_id) }
}

describe('POST /jobs/submit', () => {
  test('201 {job} with every seed field and the documented extras, defaults filled in', async () => {
    await start()
    const res = await post(host, `${QUEUE}/jobs/submit`, {
      addon_id: 'visuals',
      job_type: 'load30',
      priority: 'NORMAL',
      cost_units: 30,
      constraints: { cpu_heavy: true },
      payload: { model: 'sdxl' },
      client_request_id: 'req-1',
    })
    expect(res.status).toBe(201)
    const answer = await body(res)
    expect(keys(answer)).toEqual(['job'])
    expect(keys(answer.job)).toEqual(QUEUE_JOB_KEYS)
    expect(answer.job).toEqual({
      job_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      addon_id: 'visuals',
      job_type: 'load30',
      priority: 'NORMAL',
      cost_units: 30,
      constraints: { cpu_heavy: true },
      payload: { model: 'sdxl' },
      state: 'QUEUED',
      created_at: new Date(T0).toISOString(),
      updated_at: new Date(T0).toISOString(),
      claimed_by: null,
      claim_expires_at: null,
      lease_id: null,
      attempts: 0,
      next_retry_at: null,
      run_at: null,
      unique: false,
      tags: [],
      max_runtime_s: null,
      queue: 'default',
      max_attempts: 3,
      client_request_id: 'req-1',
      cancel_requested: false,
      progress: null,
      note: null,
      dead_letter: false,
    })
  })

  test('only job_type and cost_units are needed; the model extras are accepted', async () => {
    await start()
    const job = await submit(host, { job_type: 'x', cost_units: 2, unique: true, tags: ['a'], max_runtime_s: 10, queue: 'q', max_attempts: 7 })
    expect(job).toMatchObject({ priority: 'NORMAL', constraints: {}, payload: {}, addon_id: null, unique: true, tags: ['a'], max_runtime_s: 10, queue: 'q', max_attempts: 7 })
  })

  test('a repeated client_request_id is 409 duplicate_request with the existing job in the body, and adds no job', async () => {
    await start()
    const first = await submit(host, { client_request_id: 'same' })
    const res = await post(host, `${QUEUE}/jobs/submit`, { job_type: 'other', cost_units: 9, client_request_id: 'same' })
    const error = await expectError(res, 409, 'duplicate_request', ['job'])
    expect(error.job).toEqual(first)
    expect(host.engine.listJobs({}).jobs).toHaveLength(1)
  })

  test('a duplicate_request detail says whether the request matches the job the key names, and which of type, payload, queue, priority and cost differ', async () => {
    await start()
    const sent = { job_type: 'render', cost_units: 2, payload: { frame: 1 }, queue: 'q', priority: 'HIGH', client_request_id: 'k' }
    await submit(host, sent)
    const same = await expectError(await post(host, `${QUEUE}/jobs/submit`, sent), 409, 'duplicate_request', ['job'])
    expect(same.detail).toContain('with the same job_type, payload, queue, priority and cost_units as this request')
    const other = await expectError(await post(host, `${QUEUE}/jobs/submit`, { ...sent, payload: { frame: 2 }, priority: 'LOW' }), 409, 'duplicate_request', ['job'])
    expect(other.detail).toContain('differing from this request in its payload, priority')
    expect(other.detail).toContain('was not submitted')
    const defaults = { job_type: 'x', cost_units: 1, client_request_id: 'd' }
    await submit(host, defaults)
    const stated = { ...defaults, payload: {}, queue: 'default', priority: 'NORMAL' } // the defaults said out loud are the same job
    const { results } = await body(await post(host, `${QUEUE}/jobs/submit-batch`, { jobs: [stated, { ...defaults, cost_units: 3 }] }))
    expect(results[0].detail).toContain('with the same job_type')
    expect(results[1].detail).toContain('differing from this request in its cost_units')
  })

  test('a repeated submit whose payload has the same members in another order (another JSON library) is the same job: its submit repeated, not a differing request', async () => {
    await start()
    const sent = { job_type: 'render', cost_units: 1, client_request_id: 'ordered', payload: { a: 1, b: { c: 2, d: [3, 4] } } }
    await submit(host, sent)
    const reordered = await expectError(await post(host, `${QUEUE}/jobs/submit`, { ...sent, payload: { b: { d: [3, 4], c: 2 }, a: 1 } }), 409, 'duplicate_request', ['job'])
    expect(reordered.detail).toContain('with the same job_type, payload, queue, priority and cost_units as this request')
    // An array's order is its content.
    const swapped = await expectError(await post(host, `${QUEUE}/jobs/submit`, { ...sent, payload: { a: 1, b: { c: 2, d: [4, 3] } } }), 409, 'duplicate_request', ['job'])
    expect(swapped.detail).toContain('differing from this request in its payload')
  })

  test('an invalid body is 400 invalid_request naming the fields (cost_units <= 0, missing job_type, wrong types, unknown keys)', async () => {
    await start()
    const url = `${QUEUE}/jobs/submit`
    await expectInvalid(await post(host, url, { job_type: 'x', cost_units: 0 }), 'cost_units')
    await expectInvalid(await post(host, url, { job_type: 'x', cost_units: -3 }), 'cost_units')
    await expectInvalid(await post(host, url, { job_type: 'x', cost_units: 1.5 }), 'cost_units')
    await expectInvalid(await post(host, url, { cost_units: 1 }), 'job_type')
    await expectInvalid(await post(host, url, {}), 'job_type', 'cost_units')
    await expectInvalid(await post(host, url, { job_type: 'x', cost_units: 1, priority: 'normal' }), 'priority')
    await expectInvalid(await post(host, url, { job_type: 'x', cost_units: 1, constraints: { gpu_required: 'yes' } }), 'constraints')
    await expectInvalid(await post(host, url, { job_type: 'x', cost_units: 1, tags: 'a' }), 'tags')
    await expectInvalid(await post(host, url, { job_type: 'x', cost_units: 1, bogus: 1 }), 'bogus')
    expect(host.engine.listJobs({}).jobs).toHaveLength(0)
  })

  test('no token is 401', async () => {
    await start()
    await expectError(await post(host, `${QUEUE}/jobs/submit`, { job_type: 'x', cost_units: 1 }, null), 401, 'unauthorized')
  })
})

describe('POST /jobs/claim', () => {
  test('200 {job} CLAIMED with claimed_by and claim_expires_at = now + claim ttl', async () => {
    await start()
    const job = await submit(host)
    const res = await post(host, `${QUEUE}/jobs/claim`, { addon_id: null, worker_id: 'visuals-worker-01', limit: 1 })
    expect(res.status).toBe(200)
    const answer = await body(res)
    expect(keys(answer)).toEqual(['job'])
    expect(keys(answer.job)).toEqual(QUEUE_JOB_KEYS)
    expect(answer.job).toMatchObject({
      job_id: job.job_id,
      state: 'CLAIMED',
      claimed_by: 'visuals-worker-01',
      claim_expires_at: new Date(T0 + 60_000).toISOString(),
      attempts: 0,
    })
  })

  test('nothing claimable is 204 with an empty body', async () => {
    await start()
    const res = await post(host, `${QUEUE}/jobs/claim`, { worker_id: 'w' })
    expect(res.status).toBe(204)
    expect(await res.text()).toBe('')
  })

  test('limit > 1 adds jobs:[…] in scheduling order (priority, then first in first out)', async () => {
    await start()
    const low = await submit(host, { priority: 'LOW' })
    const n1 = await submit(host)
    clock.advance(1)
    const n2 = await submit(host)
    const urgent = await submit(host, { priority: 'URGENT' })
    const res = await post(host, `${QUEUE}/jobs/claim`, { worker_id: 'w', limit: 3 })
    const answer = await body(res)
    expect(keys(answer)).toEqual(['job', 'jobs'])
    expect(answer.jobs.map((j: any) => j.job_id)).toEqual([urgent.job_id, n1.job_id, n2.job_id])
    expect(answer.job.job_id).toBe(urgent.job_id)
    expect(host.engine.getJob(low.job_id).state).toBe('QUEUED')
  })

  test('accept_job_types, max_cost_units, addon_id and gpu capability filter what a worker can take', async () => {
    await start()
    const gpu = await submit(host, { constraints: { gpu_required: true } })
    const big = await submit(host, { cost_units: 50 })
    const other = await submit(host, { job_type: 'render' })
    const addon = await submit(host, { addon_id: 'visuals' })
    expect((await claim('w', { accept_job_types: ['render'] })).job_id).toBe(other.job_id)
    expect((await claim('w', { addon_id: 'visuals' })).job_id).toBe(addon.job_id)
    expect((await post(host, `${QUEUE}/jobs/claim`, { worker_id: 'w', max_cost_units: 40 })).status).toBe(204)
    expect((await claim('w', { constraints_capabilities: { gpu_available: true }, max_cost_units: 40 })).job_id).toBe(gpu.job_id)
    expect((await claim('w')).job_id).toBe(big.job_id)
  })

  test('accept_job_types is a list of job types as a submit takes them: an empty list, an empty name or one with U+0000 is 400, not a claim that can never take a job', async () => {
    await start()
    for (const types of [[], [''], ['a\u0000b']]) await expectInvalid(await post(host, `${QUEUE}/jobs/claim`, { worker_id: 'w', accept_job_types: types }), 'accept_job_types')
  })

  test('a claim of several jobs skips a unique job once it took another, and hands a unique job alone', async () => {
    await start()
    const x = await submit(host, { tags: ['X'] })
    const unique = await submit(host, { tags: ['U'], unique: true })
    const y = await submit(host, { tags: ['Y'] })
    const first = await body(await post(host, `${QUEUE}/jobs/claim`, { worker_id: 'qu', limit: 5 }))
    expect(first.jobs.map((j: any) => j.job_id)).toEqual([x.job_id, y.job_id])
    const alone = await body(await post(host, `${QUEUE}/jobs/claim`, { worker_id: 'other', limit: 5 }))
    expect(keys(alone)).toEqual(['job', 'jobs'])
    expect(alone.jobs.map((j: any) => j.job_id)).toEqual([unique.job_id])
  })

  test('an invalid claim is 400 naming the fields', async () => {
    await start()
    const url = `${QUEUE}/jobs/claim`
    await expectInvalid(await post(host, url, {}), 'worker_id')
    await expectInvalid(await post(host, url, { worker_id: 'w', limit: 0 }), 'limit')
    await expectInvalid(await post(host, url, { worker_id: 'w', limit: 101 }), 'limit')
    await expectInvalid(await post(host, url, { worker_id: 'w', max_cost_units: 'big' }), 'max_cost_units')
    await expectInvalid(await post(host, url, { worker_id: 'w', accept_job_types: 'x' }), 'accept_job_types')
    await expectInvalid(await post(host, url, { worker_id: 'w', constraints_capabilities: { gpu_available: 1 } }), 'constraints_capabilities')
  })

  test('an unknown key in constraints_capabilities is 400 naming it, as everywhere in a body: a misspelt capability is not a worker without it', async () => {
    await start()
    const gpu = await submit(host, { constraints: { gpu_required: true } })
    await expectInvalid(await post(host, `${QUEUE}/jobs/claim`, { worker_id: 'w', constraints_capabilities: { gpu: true } }), 'constraints_capabilities', '"gpu"')
    expect(host.engine.getJob(gpu.job_id).state).toBe('QUEUED')
  })

  test('an expired claim returns the job to QUEUED without counting an attempt', async () => {
    await start()
    const job = await submit(host)
    await claim('w')
    clock.advance(60_001)
    host.engine.reap()
    const view = (await body(await get(`${QUEUE}/jobs/${job.job_id}`))).job
    expect(view).toMatchObject({ state: 'QUEUED', attempts: 0, claimed_by: null })
  })
})

describe('GET /jobs/{id}, status, cancel, events', () => {
  test('GET /jobs/{id} is {job, result}: result null until the job ends, then the seed JobResult', async () => {
    await start()
    const { job, lease: l } = await running()
    let answer = await body(await get(`${QUEUE}/jobs/${job.job_id}`))
    expect(keys(answer)).toEqual(['job', 'result'])
    expect(keys(answer.job)).toEqual(QUEUE_JOB_READ_KEYS)
    expect(answer.job.waiting_reason).toBeNull() // it runs
    expect(answer.result).toBeNull()
    clock.advance(2000)
    await post(host, `${QUEUE}/lease/${l.lease_id}/release`, { job_id: job.job_id, worker_id: 'w1', status: 'SUCCEEDED', result_data: { path: '/x' } })
    answer = await body(await get(`${QUEUE}/jobs/${job.job_id}`))
    expect(keys(answer.result)).toEqual(QUEUE_RESULT_KEYS)
    expect(answer.result).toEqual({
      job_id: job.job_id,
      status: 'SUCCEEDED',
      result_data: { path: '/x' },
      error: null,
      started_at: new Date(T0).toISOString(),
      finished_at: new Date(T0 + 2000).toISOString(),
      attempts: 1,
    })
  })

  test('an unknown job is 404 job_not_found on get, status, cancel and events', async () => {
    await start()
    await expectError(await get(`${QUEUE}/jobs/${UNKNOWN_ID}`), 404, 'job_not_found')
    await expectError(await post(host, `${QUEUE}/jobs/${UNKNOWN_ID}/status`, { state: 'PREPARING' }), 404, 'job_not_found')
    await expectError(await post(host, `${QUEUE}/jobs/${UNKNOWN_ID}/cancel`, {}), 404, 'job_not_found')
    await expectError(await get(`${QUEUE}/jobs/${UNKNOWN_ID}/events`), 404, 'job_not_found')
  })

  test('status: CLAIMED → PREPARING with note and progress is 200 {job}; illegal moves are 409 illegal_transition', async () => {
    await start()
    const job = await submit(host)
    await expectError(await post(host, `${QUEUE}/jobs/${job.job_id}/status`, { state: 'RUNNING' }), 409, 'illegal_transition')
    await claim('w')
    const res = await post(host, `${QUEUE}/jobs/${job.job_id}/status`, { state: 'PREPARING', note: 'warming model cache', progress: 0.15 })
    expect(res.status).toBe(200)
    const answer = await body(res)
    expect(keys(answer)).toEqual(['job'])
    expect(answer.job).toMatchObject({ state: 'PREPARING', note: 'warming model cache', progress: 0.15 })
    await expectError(await post(host, `${QUEUE}/jobs/${job.job_id}/status`, { state: 'DONE' }), 409, 'illegal_transition')
    const l = await lease(job.job_id)
    await post(host, `${QUEUE}/lease/${l.lease_id}/release`, { job_id: job.job_id, worker_id: 'w', status: 'SUCCEEDED' })
    await expectError(await post(host, `${QUEUE}/jobs/${job.job_id}/status`, { state: 'PREPARING' }), 409, 'illegal_transition')
  })

  test('status: the claiming worker may set PREPARING and LEASE_PENDING from any claim state, and repeat the state with a note', async () => {
    await start()
    const job = await submit(host)
    await claim('w')
    const status = (json: Record<string, unknown>) => post(host, `${QUEUE}/jobs/${job.job_id}/status`, json)
    for (const state of ['LEASE_PENDING', 'PREPARING', 'PREPARING', 'LEASE_PENDING', 'LEASE_PENDING'] as const) {
      const res = await status({ state, note: `now ${state}`, worker_id: 'w' })
      expect(res.status).toBe(200)
      expect((await body(res)).job).toMatchObject({ state, note: `now ${state}`, claimed_by: 'w' })
    }
    const res = await status({ note: 'still asking', progress: 0.5 })
    expect((await body(res)).job).toMatchObject({ state: 'LEASE_PENDING', note: 'still asking', progress: 0.5 })
    await expectError(await status({ state: 'RUNNING', worker_id: 'w' }), 409, 'illegal_transition')
    await expectError(await status({ state: 'QUEUED', worker_id: 'w' }), 409, 'illegal_transition')
  })

  test('status: a job leased through the pull API (LEASED, shown RUNNING) takes RUNNING with a note as a repeat of its state; a refusal names the state as shown', async () => {
    await start()
    const job = await submit(host)
    await post(host, '/api/system/scheduler/leases/request', { worker_id: 'puller' })
    const status = (json: Record<string, unknown>) => post(host, `${QUEUE}/jobs/${job.job_id}/status`, json)
    const res = await status({ state: 'RUNNING', note: 'halfway', progress: 0.5, worker_id: 'puller' })
    expect(res.status).toBe(200)
    expect((await body(res)).job).toMatchObject({ state: 'RUNNING', note: 'halfway', progress: 0.5 })
    const refused = await status({ state: 'PREPARING', worker_id: 'puller' })
    expect(refused.status).toBe(409)
    expect((await body(refused)).detail).toContain('cannot move from RUNNING to PREPARING')
    await expectInvalid(await status({ state: 'LEASED', worker_id: 'puller' }), 'state')
  })

  test("a refusal's detail names a leased job's state as the queue API shows it: RUNNING, never LEASED (a lease request, a status update)", async () => {
    await start()
    const job = await submit(host)
    await post(host, `${PULL}/request`, { worker_id: 'puller' })
    expect((await body(await get(`${QUEUE}/jobs/${job.job_id}`))).job.state).toBe('RUNNING')
    const lease = await expectError(await post(host, `${QUEUE}/lease/request`, { job_id: job.job_id }), 409, 'illegal_transition')
    expect(lease.detail).toBe(`Job ${job.job_id} is RUNNING; a lease is requested from CLAIMED, PREPARING or LEASE_PENDING`)
    const status = await expectError(await post(host, `${QUEUE}/jobs/${job.job_id}/status`, { state: 'LEASE_PENDING' }), 409, 'illegal_transition')
    expect(status.detail).toBe(`Job ${job.job_id} cannot move from RUNNING to LEASE_PENDING by a status update`)
  })

  test('status: QUEUED → PREPARING, and any status after a terminal state, are 409 illegal_transition', async () => {
    await start()
    const job = await submit(host)
    await expectError(await post(host, `${QUEUE}/jobs/${job.job_id}/status`, { state: 'PREPARING' }), 409, 'illegal_transition')
    await expectError(await post(host, `${QUEUE}/jobs/${job.job_id}/status`, { state: 'LEASE_PENDING' }), 409, 'illegal_transition')
    await expectError(await post(host, `${QUEUE}/jobs/${job.job_id}/status`, { note: 'nobody holds it' }), 409, 'illegal_transition')
    await post(host, `${QUEUE}/jobs/${job.job_id}/cancel`, {})
    for (const state of ['PREPARING', 'LEASE_PENDING', 'CANCELED'] as const) {
      await expectError(await post(host, `${QUEUE}/jobs/${job.job_id}/status`, { state }), 409, 'illegal_transition')
    }
  })

  test('status: a bad body is 400 naming the field', async () => {
    await start()
    const job = await submit(host)
    await expectInvalid(await post(host, `${QUEUE}/jobs/${job.job_id}/status`, { state: 'SLEEPING' }), 'state')
    await expectInvalid(await post(host, `${QUEUE}/jobs/${job.job_id}/status`, { progress: 1.5 }), 'progress')
    await expectInvalid(await post(host, `${QUEUE}/jobs/${job.job_id}/status`, { note: 5 }), 'note')
  })

  test('cancel: a queued job is CANCELED at once; a running one gets cancel_requested; a terminal one is 409 illegal_transition', async () => {
    await start()
    const queued = await submit(host)
    const res = await post(host, `${QUEUE}/jobs/${queued.job_id}/cancel`, { reason: 'user aborted' })
    expect(res.status).toBe(200)
    const answer = await body(res)
    expect(keys(answer)).toEqual(['job'])
    expect(answer.job.state).toBe('CANCELED')
    await expectError(await post(host, `${QUEUE}/jobs/${queued.job_id}/cancel`, {}), 409, 'illegal_transition')

    const { job, lease: l } = await running('w2')
    const requested = await body(await post(host, `${QUEUE}/jobs/${job.job_id}/cancel`, {}))
    expect(requested.job).toMatchObject({ state: 'RUNNING', cancel_requested: true })
    const hb = await body(await post(host, `${QUEUE}/lease/${l.lease_id}/heartbeat`, { job_id: job.job_id, worker_id: 'w2' }))
    expect(hb.job.cancel_requested).toBe(true)
    const released = await body(await post(host, `${QUEUE}/lease/${l.lease_id}/release`, { job_id: job.job_id, worker_id: 'w2', status: 'CANCELED' }))
    expect(released.job.state).toBe('CANCELED')
    await expectInvalid(await post(host, `${QUEUE}/jobs/${job.job_id}/cancel`, { reason: 3 }), 'reason')
  })

  test('a cancel outlives the lease: a cancel-requested job whose lease expires ends CANCELED, not retried; its attempt ends TIMEOUT and says a cancel was pending', async () => {
    await start()
    const { job, lease: l } = await running('w1', { max_attempts: 3 })
    expect((await body(await post(host, `${QUEUE}/jobs/${job.job_id}/cancel`, { reason: 'not needed' }))).job.cancel_requested).toBe(true)
    // The worker goes silent before it stops: the host's reaper (not a test call) expires the lease.
    clock.advance(35_001)
    await until(() => host.engine.getLease(l.lease_id).state === 'EXPIRED', 1500)

    const { job: ended } = await body(await get(`${QUEUE}/jobs/${job.job_id}`))
    expect(ended).toMatchObject({ state: 'CANCELED', dead_letter: false, attempts: 1, next_retry_at: null, waiting_reason: null })
    const { attempts } = await body(await get(`${QUEUE}/jobs/${job.job_id}/attempts`))
    expect(attempts).toEqual([
      expect.objectContaining({
        outcome: 'TIMEOUT',
        disposition: 'FINAL',
        error: {
          code: 'lease_expired',
          reason: 'no_heartbeat',
          cancel_requested: true,
          message: 'The lease expired without a heartbeat; a cancel was pending',
        },
      }),
    ])
    const { events } = await body(await get(`${QUEUE}/jobs/${job.job_id}/events`))
    expect(events.map((e: { type: string }) => e.type).slice(-2)).toEqual(['LEASE_EXPIRED', 'JOB_CANCELED'])
    clock.advance(60_000) // long past any backoff: nothing brings it back
    expect(await body(await post(host, `${PULL}/request`, { worker_id: 'w2' }))).toMatchObject({ denied: true })
  })

  test('GET /jobs/{id}/events lists the timeline {ts, type, data} oldest first', async () => {
    await start()
    const { job } = await running()
    const answer = await body(await get(`${QUEUE}/jobs/${job.job_id}/events`))
    expect(keys(answer)).toEqual(['events', 'next_cursor'])
    expect(answer.next_cursor).toBeNull()
    expect(answer.events.map((e: any) => e.type)).toEqual(['JOB_SUBMITTED', 'JOB_CLAIMED', 'LEASE_GRANTED'])
    for (const e of answer.events) {
      expect(keys(e)).toEqual(['data', 'entity_id', 'entity_type', 'id', 'ts', 'type'])
      expect(e.ts).toMatch(ISO_MS)
    }
    expect(answer.events[1].data).toMatchObject({ worker_id: 'w1' })
  })

  test('GET /jobs/{id}/events pages a long timeline: the newest `limit` events oldest first, `next_cursor` for those before; a cursor of another job is 400', async () => {
    await start()
    const { job } = await running()
    const other = await submit(host)
    const whole = (await body(await get(`${QUEUE}/jobs/${job.job_id}/events`))).events.map((e: any) => e.id)
    const first = await body(await get(`${QUEUE}/jobs/${job.job_id}/events?limit=2`))
    expect(first.events.map((e: any) => e.id)).toEqual(whole.slice(-2))
    const second = await body(await get(`${QUEUE}/jobs/${job.job_id}/events?limit=2&cursor=${first.next_cursor}`))
    expect(second).toEqual({ events: [expect.objectContaining({ id: whole[0], type: 'JOB_SUBMITTED' })], next_cursor: null })
    await expectError(await get(`${QUEUE}/jobs/${other.job_id}/events?cursor=${first.next_cursor}`), 400, 'invalid_request')
    await expectError(await get(`${QUEUE}/jobs/${job.job_id}/events?limit=501`), 400, 'invalid_request')
  })
})

describe('GET /jobs (list)', () => {
  test('filters by state and addon_id, pages with limit and an opaque next_cursor', async () => {
    await start()
    const ids: string[] = []
    for (let i = 0; i < 5; i++) ids.push((await submit(host, { addon_id: i % 2 === 0 ? 'a' : 'b' })).job_id)
    await claim('w', { addon_id: 'b' })
    const page1 = await body(await get(`${QUEUE}/jobs?limit=2`))
    expect(keys(page1)).toEqual(['jobs', 'next_cursor'])
    expect(page1.jobs).toHaveLength(2)
    expect(typeof page1.next_cursor).toBe('string')
    for (const j of page1.jobs) expect(keys(j)).toEqual(QUEUE_JOB_READ_KEYS)
    const seen = [...page1.jobs]
    let cursor = page1.next_cursor
    while (cursor) {
      const page = await body(await get(`${QUEUE}/jobs?limit=2&cursor=${encodeURIComponent(cursor)}`))
      seen.push(...page.jobs)
      cursor = page.next_cursor
    }
    expect(seen.map((j) => j.job_id).sort()).toEqual([...ids].sort())
    const a = await body(await get(`${QUEUE}/jobs?addon_id=a`))
    expect(a.jobs).toHaveLength(3)
    const claimed = await body(await get(`${QUEUE}/jobs?state=CLAIMED`))
    expect(claimed.jobs.map((j: any) => j.addon_id)).toEqual(['b'])
    const after = await body(await get(`${QUEUE}/jobs?created_after=${encodeURIComponent(new Date(T0 + 1).toISOString())}`))
    expect(after.jobs).toHaveLength(0)
  })

  test('state=RUNNING finds every job the queue API shows as RUNNING, those leased through the pull API (LEASED) too; LEASED is not a state of this API', async () => {
    await start()
    const pulled = await submit(host, { priority: 'URGENT' })
    const granted = await body(await post(host, '/api/system/scheduler/leases/request', { worker_id: 'puller' }))
    expect(granted.job.job_id).toBe(pulled.job_id)
    const { job: started } = await running('w2')
    await submit(host)
    expect((await body(await get(`${QUEUE}/jobs/${pulled.job_id}`))).job.state).toBe('RUNNING')
    const listed = await body(await get(`${QUEUE}/jobs?state=RUNNING`))
    expect(listed.jobs.map((j: any) => [j.job_id, j.state])).toEqual([
      [started.job_id, 'RUNNING'],
      [pulled.job_id, 'RUNNING'],
    ])
    expect((await get(`${QUEUE}/jobs?state=LEASED`)).status).toBe(400)
    expect((await body(await get(`${QUEUE}/stats/snapshot`))).jobs).toMatchObject({ queued: 1, running: 2, leased: 1 })
  })

  test('search finds jobs by any part of their id, type or add-on, in any case, with the other filters', async () => {
    await start()
    const render = await submit(host, { job_type: 'Render.Frame', addon_id: 'visuals' })
    const audio = await submit(host, { job_type: 'mix', addon_id: 'Audio-Tools' })
    const found = async (query: string) => (await body(await get(`${QUEUE}/jobs?${query}`))).jobs.map((j: any) => j.job_id)
    expect(await found(`search=${render.job_id.slice(-6, -1)}`)).toEqual([render.job_id])
    expect(await found('search=FRAME')).toEqual([render.job_id])
    expect(await found('search=tools')).toEqual([audio.job_id])
    expect(await found('search=i&state=QUEUED')).toEqual([audio.job_id, render.job_id])
    expect(await found('search=i&job_type=mix')).toEqual([audio.job_id])
    expect(await found('search=nothing-like-it')).toEqual([])
    await expectInvalid(await get(`${QUEUE}/jobs?search=`), 'search')
  })

  test('dead_letter=true lists only the jobs that ran out of attempts, false the others; any other value is 400 naming it', async () => {
    await start()
    const { job: dead } = await running('w1', { max_attempts: 1 })
    clock.advance(36_000) // past the lease's ttl and grace: its one attempt is used up
    host.engine.reap()
    const queued = await submit(host)
    const found = async (query: string) => (await body(await get(`${QUEUE}/jobs?${query}`))).jobs.map((j: any) => [j.job_id, j.state, j.dead_letter])
    expect(await found('dead_letter=true')).toEqual([[dead.job_id, 'TIMEOUT', true]])
    expect(await found('dead_letter=false')).toEqual([[queued.job_id, 'QUEUED', false]])
    expect(await found('dead_letter=true&state=TIMEOUT')).toEqual([[dead.job_id, 'TIMEOUT', true]])
    expect(await found('dead_letter=true&state=QUEUED')).toEqual([])
    await expectInvalid(await get(`${QUEUE}/jobs?dead_letter=yes`), 'dead_letter')
  })

  test('payload=false lists each job without its payload; by default and with payload=true each has it; any other value is 400 naming it', async () => {
    await start()
    const job = await submit(host, { job_type: 'big', payload: { blob: 'x'.repeat(10_000) } })
    const listed = async (query: string) => (await body(await get(`${QUEUE}/jobs?${query}`))).jobs
    for (const filter of ['limit=5', 'job_type=big', 'state=QUEUED', 'search=bi']) {
      const [without] = await listed(`${filter}&payload=false`)
      expect(keys(without), filter).toEqual(QUEUE_JOB_READ_KEYS.filter((key) => key !== 'payload'))
      expect(without.job_id, filter).toBe(job.job_id)
      for (const query of [filter, `${filter}&payload=true`]) {
        const [withIt] = await listed(query)
        expect(keys(withIt), query).toEqual(QUEUE_JOB_READ_KEYS)
        expect(withIt.payload, query).toEqual({ blob: 'x'.repeat(10_000) })
      }
    }
    await expectInvalid(await get(`${QUEUE}/jobs?payload=no`), 'payload')
    await expectInvalid(await get(`${QUEUE}/jobs?payload=`), 'payload')
    await expectInvalid(await get(`${QUEUE}/jobs?payload=FALSE`), 'payload')
  })

  test('limit above 500, a bad state, a bad time, a foreign cursor or a repeated parameter are 400 naming them', async () => {
    await start()
    await expectInvalid(await get(`${QUEUE}/jobs?limit=501`), 'limit')
    await expectInvalid(await get(`${QUEUE}/jobs?limit=0`), 'limit')
    await expectInvalid(await get(`${QUEUE}/jobs?state=NOPE`), 'state')
    await expectInvalid(await get(`${QUEUE}/jobs?created_after=yesterday`), 'created_after')
    await expectInvalid(await get(`${QUEUE}/jobs?cursor=garbage`), 'cursor')
    await expectInvalid(await get(`${QUEUE}/jobs?state=QUEUED&state=DONE`), 'state')
    await expectInvalid(await get(`${QUEUE}/jobs?colour=red`), 'colour')
    expect((await get(`${QUEUE}/jobs?limit=500`)).status).toBe(200)
  })
})

describe('POST /lease/request', () => {
  test('approved is 200 {approved, lease} with the seed Lease fields; the job is RUNNING under the claiming worker', async () => {
    await start()
    const job = await submit(host, { cost_units: 30, addon_id: 'visuals' })
    await claim('visuals-worker-01')
    const res = await post(host, `${QUEUE}/lease/request`, { job_id: job.job_id, addon_id: 'visuals', job_type: 'generic', cost_units: 30, priority: 'NORMAL', constraints: {}, ttl_sec: 20 })
    expect(res.status).toBe(200)
    const answer = await body(res)
    expect(keys(answer)).toEqual(['approved', 'lease'])
    expect(keys(answer.lease)).toEqual(QUEUE_LEASE_KEYS)
    expect(answer.lease).toMatchObject({
      job_id: job.job_id,
      addon_id: 'visuals',
      worker_id: 'visuals-worker-01',
      cost_units: 30,
      ttl_sec: 20,
      state: 'ACTIVE',
      granted_at: new Date(T0).toISOString(),
      last_heartbeat_at: new Date(T0).toISOString(),
      expires_at: new Date(T0 + 25_000).toISOString(),
      released_at: null,
      release_status: null,
      fence: expect.any(Number),
    })
    expect(JSON.stringify(answer)).not.toContain(host.engine.getLease(answer.lease.lease_id).token)
    const view = (await body(await get(`${QUEUE}/jobs/${job.job_id}`))).job
    expect(view).toMatchObject({ state: 'RUNNING', lease_id: answer.lease.lease_id, attempts: 1 })
  })

  test('denied is 200 {approved:false, retry_after_sec, reason} naming the numbers; the job is LEASE_PENDING with next_retry_at', async () => {
    await start() // 70 units
    await running('w1', { cost_units: 60 })
    const job = await submit(host, { cost_units: 30 })
    await claim('w2')
    const res = await post(host, `${QUEUE}/lease/request`, { job_id: job.job_id, cost_units: 30 })
    expect(res.status).toBe(200)
    const answer = await body(res)
    expect(keys(answer)).toEqual(['approved', 'reason', 'retry_after_sec'])
    expect(answer).toEqual({ approved: false, retry_after_sec: expect.any(Number), reason: 'Capacity exceeded: used=60, requested=30, capacity=70' })
    const view = (await body(await get(`${QUEUE}/jobs/${job.job_id}`))).job
    expect(view.state).toBe('LEASE_PENDING')
    expect(Date.parse(view.next_retry_at)).toBe(T0 + answer.retry_after_sec * 1000)
  })

  test('a lease for a unique job while its worker holds another lease is denied like any denial, with a reason that says why', async () => {
    await start()
    const unique = await submit(host, { unique: true })
    await claim('qu')
    const other = await submit(host)
    await claim('qu')
    await lease(other.job_id, { worker_id: 'qu' })
    const res = await post(host, `${QUEUE}/lease/request`, { job_id: unique.job_id, worker_id: 'qu' })
    expect(res.status).toBe(200)
    const answer = await body(res)
    expect(answer).toEqual({ approved: false, retry_after_sec: expect.any(Number), reason: 'Job is unique and worker qu already holds a lease' })
    expect((await body(await get(`${QUEUE}/jobs/${unique.job_id}`))).job.state).toBe('LEASE_PENDING')
  })

  test('a cost_units differing from the job is 409 cost_mismatch', async () => {
    await start()
    const job = await submit(host, { cost_units: 5 })
    await claim('w')
    await expectError(await post(host, `${QUEUE}/lease/request`, { job_id: job.job_id, cost_units: 4 }), 409, 'cost_mismatch')
    expect(host.engine.getJob(job.job_id).state).toBe('CLAIMED')
  })

  test('a lease for a job not claimed (QUEUED) or already running is 409 illegal_transition; an unknown job 404', async () => {
    await start()
    const job = await submit(host)
    await expectError(await post(host, `${QUEUE}/lease/request`, { job_id: job.job_id }), 409, 'illegal_transition')
    await claim('w')
    await lease(job.job_id)
    await expectError(await post(host, `${QUEUE}/lease/request`, { job_id: job.job_id }), 409, 'illegal_transition')
    await expectError(await post(host, `${QUEUE}/lease/request`, { job_id: UNKNOWN_ID }), 404, 'job_not_found')
  })

  test('a bad lease request is 400 naming the field', async () => {
    await start()
    await expectInvalid(await post(host, `${QUEUE}/lease/request`, {}), 'job_id')
    await expectInvalid(await post(host, `${QUEUE}/lease/request`, { job_id: UNKNOWN_ID, ttl_sec: 0 }), 'ttl_sec')
    await expectInvalid(await post(host, `${QUEUE}/lease/request`, { job_id: UNKNOWN_ID, cost_units: '3' }), 'cost_units')
  })
})

describe('POST /lease/{id}/heartbeat', () => {
  test('200 {lease, job}: extends the lease, records progress and message', async () => {
    await start()
    const { job, lease: l } = await running()
    clock.advance(10_000)
    const res = await post(host, `${QUEUE}/lease/${l.lease_id}/heartbeat`, { job_id: job.job_id, worker_id: 'w1', progress: 0.65, message: 'rendering step 23/35' })
    expect(res.status).toBe(200)
    const answer = await body(res)
    expect(keys(answer)).toEqual(['job', 'lease'])
    expect(keys(answer.lease)).toEqual(QUEUE_LEASE_KEYS)
    expect(keys(answer.job)).toEqual(QUEUE_JOB_KEYS)
    expect(answer.lease).toMatchObject({ last_heartbeat_at: new Date(T0 + 10_000).toISOString(), expires_at: new Date(T0 + 45_000).toISOString() })
    expect(answer.job).toMatchObject({ progress: 0.65, note: 'rendering step 23/35', state: 'RUNNING' })
  })

  test('404 for an unknown lease, 403 for another worker, 409 lease_expired, 409 lease_not_active after release', async () => {
    await start()
    const { job, lease: l } = await running()
    await expectError(await post(host, `${QUEUE}/lease/${UNKNOWN_ID}/heartbeat`, { job_id: job.job_id, worker_id: 'w1' }), 404, 'lease_not_found')
    await expectError(await post(host, `${QUEUE}/lease/${l.lease_id}/heartbeat`, { job_id: job.job_id, worker_id: 'w9' }), 403, 'worker_mismatch')
    await expectInvalid(await post(host, `${QUEUE}/lease/${l.lease_id}/heartbeat`, { worker_id: 'w1' }), 'job_id')
    await expectInvalid(await post(host, `${QUEUE}/lease/${l.lease_id}/heartbeat`, { job_id: job.job_id, worker_id: 'w1', progress: -1 }), 'progress')
    await post(host, `${QUEUE}/lease/${l.lease_id}/release`, { job_id: job.job_id, worker_id: 'w1', status: 'SUCCEEDED' })
    await expectError(await post(host, `${QUEUE}/lease/${l.lease_id}/heartbeat`, { job_id: job.job_id, worker_id: 'w1' }), 409, 'lease_not_active')

    const second = await running('w2')
    clock.advance(35_001)
    await expectError(await post(host, `${QUEUE}/lease/${second.lease.lease_id}/heartbeat`, { job_id: second.job.job_id, worker_id: 'w2' }), 409, 'lease_expired')
  })
})

describe('POST /lease/{id}/release and GET /lease/{id}', () => {
  test('release is 200 {lease RELEASED, job DONE, result}; capacity is freed; a repeat answers the same, one with another result is 409', async () => {
    await start()
    const { job, lease: l } = await running('w1', { cost_units: 30 })
    expect(host.engine.getCapacity().leased).toBe(30)
    const req = { job_id: job.job_id, worker_id: 'w1', status: 'SUCCEEDED', result_data: { path: '/runtime/x.jpg' }, error: null, metrics: { runtime_ms: 5 } }
    const res = await post(host, `${QUEUE}/lease/${l.lease_id}/release`, req)
    expect(res.status).toBe(200)
    const answer = await body(res)
    expect(keys(answer)).toEqual(['job', 'lease', 'result'])
    expect(keys(answer.lease)).toEqual(QUEUE_LEASE_KEYS)
    expect(keys(answer.result)).toEqual(QUEUE_RESULT_KEYS)
    expect(answer.lease).toMatchObject({ state: 'RELEASED', release_status: 'SUCCEEDED', released_at: new Date(T0).toISOString() })
    expect(answer.job.state).toBe('DONE')
    expect(answer.result).toMatchObject({ status: 'SUCCEEDED', result_data: { path: '/runtime/x.jpg' } })
    expect(host.engine.getCapacity().leased).toBe(0)
    const repeat = await post(host, `${QUEUE}/lease/${l.lease_id}/release`, req)
    expect(repeat.status).toBe(200)
    expect(await body(repeat)).toEqual(answer)
    await expectError(
      await post(host, `${QUEUE}/lease/${l.lease_id}/release`, { ...req, status: 'FAILED' }),
      409,
      'lease_not_active',
    )
    const other = await expectError(await post(host, `${QUEUE}/lease/${l.lease_id}/release`, { ...req, result_data: { path: '/other' } }), 409, 'lease_not_active')
    expect(other.detail).toContain('already reported SUCCEEDED with a different result')
  })

  test('FAILED, CANCELED and TIMEOUT releases finalize the job in that state', async () => {
    await start()
    for (const [status, state] of [['FAILED', 'FAILED'], ['CANCELED', 'CANCELED'], ['TIMEOUT', 'TIMEOUT']] as const) {
      const { job, lease: l } = await running('w', { max_attempts: 5 })
      const answer = await body(await post(host, `${QUEUE}/lease/${l.lease_id}/release`, { job_id: job.job_id, worker_id: 'w', status }))
      expect(answer.job.state).toBe(state)
      expect(answer.result.status).toBe(status)
    }
  })

  test('release of an expired lease is 409 lease_expired and the attempt ends TIMEOUT', async () => {
    await start()
    const { job, lease: l } = await running()
    clock.advance(36_000)
    await expectError(await post(host, `${QUEUE}/lease/${l.lease_id}/release`, { job_id: job.job_id, worker_id: 'w1', status: 'SUCCEEDED' }), 409, 'lease_expired')
    expect(host.engine.attempts(job.job_id).map((a) => a.outcome)).toEqual(['TIMEOUT'])
    expect(host.engine.getJob(job.job_id).state).not.toBe('DONE')
  })

  test('a job whose last attempt\'s lease expired ends TIMEOUT with that attempt\'s error in its result', async () => {
    await start()
    const { job, lease: l } = await running('w1', { max_attempts: 1 })
    clock.advance(35_001)
    await until(() => host.engine.getLease(l.lease_id).state === 'EXPIRED', 1500)
    const { result } = await body(await get(`${QUEUE}/jobs/${job.job_id}`))
    const { attempts } = await body(await get(`${QUEUE}/jobs/${job.job_id}/attempts`))
    expect(result).toMatchObject({ status: 'TIMEOUT', error: { code: 'lease_expired', reason: 'no_heartbeat', message: 'The lease expired without a heartbeat' } })
    expect(result.error).toEqual(attempts[0].error)
  })

  test('release: 404 unknown lease, 403 other worker, 400 naming a bad status', async () => {
    await start()
    const { job, lease: l } = await running()
    await expectError(await post(host, `${QUEUE}/lease/${UNKNOWN_ID}/release`, { job_id: job.job_id, worker_id: 'w1', status: 'SUCCEEDED' }), 404, 'lease_not_found')
    await expectError(await post(host, `${QUEUE}/lease/${l.lease_id}/release`, { job_id: job.job_id, worker_id: 'w2', status: 'SUCCEEDED' }), 403, 'worker_mismatch')
    await expectInvalid(await post(host, `${QUEUE}/lease/${l.lease_id}/release`, { job_id: job.job_id, worker_id: 'w1', status: 'DONE' }), 'status')
    expect(host.engine.getLease(l.lease_id).state).toBe('ACTIVE')
  })

  test('GET /lease/{id} is {lease} without the token; 404 lease_not_found', async () => {
    await start()
    const { lease: l } = await running()
    const answer = await body(await get(`${QUEUE}/lease/${l.lease_id}`))
    expect(keys(answer)).toEqual(['lease'])
    expect(answer.lease).toEqual(l)
    await expectError(await get(`${QUEUE}/lease/${UNKNOWN_ID}`), 404, 'lease_not_found')
  })

  test('a job leased through the pull API shows as RUNNING in the queue API', async () => {
    await start()
    const job = await submit(host)
    await post(host, `${PULL}/request`, { worker_id: 'p' })
    expect((await body(await get(`${QUEUE}/jobs/${job.job_id}`))).job.state).toBe('RUNNING')
  })
})

describe('stats', () => {
  test('GET /stats/snapshot has capacity {total, used, reserved, usable, available, busy_rating}, jobs and leases', async () => {
    await start({ totalUnits: 70, busy: 2 }) // usable 56, reserved 14
    await running('w', { cost_units: 6 })
    await submit(host)
    const res = await get(`${QUEUE}/stats/snapshot`)
    expect(res.status).toBe(200)
    const snap = await body(res)
    expect(keys(snap)).toEqual(['capacity', 'jobs', 'leases'])
    expect(snap.capacity).toMatchObject({ total: 70, used: 6, reserved: 14, usable: 56, available: 50, busy_rating: 2 })
    // the queue contract's fields plus the documented extras (busy_mode; per-state and per-outcome job counts).
    expect(keys(snap.capacity)).toEqual(['available', 'busy_mode', 'busy_rating', 'reserved', 'total', 'usable', 'used'])
    expect(keys(snap.jobs)).toEqual(
      ['blocked', 'canceled_last_24h', 'claimed', 'done_last_24h', 'failed_last_24h', 'leased', 'over_capacity', 'queued', 'running', 'timeout_last_24h'],
    )
    expect(snap.jobs).toMatchObject({ queued: 1, running: 1, blocked: 0, failed_last_24h: 0, over_capacity: 0 })
    expect(keys(snap.leases)).toEqual(['active', 'expired_last_24h'])
    expect(snap.leases).toEqual({ active: 1, expired_last_24h: 0 })
  })

  test('GET /stats/timeseries answers {metric, bucket, range, points} with every bucket present', async () => {
    await start()
    for (const [bucket, range, count] of [['5m', '1h', 12], ['1m', '1h', 60], ['1h', '24h', 24], ['15m', '6h', 24], ['1h', '7d', 168]] as const) {
      for (const metric of ['leases_active', 'jobs_queued', 'jobs_running', 'capacity_used', 'busy_rating', 'jobs_completed', 'jobs_failed', 'leases_expired']) {
        const res = await get(`${QUEUE}/stats/timeseries?metric=${metric}&bucket=${bucket}&range=${range}`)
        expect(res.status).toBe(200)
        const answer = await body(res)
        expect(answer).toMatchObject({ metric, bucket, range })
        expect(answer.since === null || ISO_MS.test(answer.since)).toBe(true)
        expect(answer.points).toHaveLength(count)
        for (const p of answer.points) {
          expect(keys(p)).toEqual(['ts', 'value'])
          expect(p.ts).toMatch(ISO_MS)
          expect(typeof p.value).toBe('number')
        }
      }
    }
  })

  test('timeseries counts completions in their bucket', async () => {
    await start()
    const { job, lease: l } = await running()
    await post(host, `${QUEUE}/lease/${l.lease_id}/release`, { job_id: job.job_id, worker_id: 'w1', status: 'SUCCEEDED' })
    const answer = await body(await get(`${QUEUE}/stats/timeseries?metric=jobs_completed&bucket=1m&range=1h`))
    expect(answer.points.at(-1).value).toBe(1)
    expect(answer.points.reduce((s: number, p: any) => s + p.value, 0)).toBe(1)
  })

  test('a bad metric, bucket or range is 400 naming it', async () => {
    await start()
    await expectInvalid(await get(`${QUEUE}/stats/timeseries`), 'metric')
    await expectInvalid(await get(`${QUEUE}/stats/timeseries?metric=nope`), 'metric')
    await expectInvalid(await get(`${QUEUE}/stats/timeseries?metric=leases_active&bucket=2m`), 'bucket')
    await expectInvalid(await get(`${QUEUE}/stats/timeseries?metric=leases_active&range=30d`), 'range')
  })
})

describe('POST /api/scheduler/jobs/submit-batch (not in the seed)', () => {
  test('each job is answered as /jobs/submit would answer it: created, a known client_request_id with its job, an oversized job refused', async () => {
    await start()
    const known = await submit(host, { client_request_id: 'known' })
    const res = await post(host, `${QUEUE}/jobs/submit-batch`, {
      jobs: [{ job_type: 'a', cost_units: 1 }, { job_type: 'b', cost_units: 1, client_request_id: 'known' }, { job_type: 'c', cost_units: 1_000_000 }],
    })
    expect(res.status).toBe(200)
    const { results } = await body(res)
    expect(results[0]).toMatchObject({ ok: true, job: { job_type: 'a', state: 'QUEUED' } })
    expect(results[1]).toMatchObject({ ok: false, code: 'duplicate_request', job: { job_id: known.job_id } })
    expect(results[2]).toMatchObject({ ok: false, code: 'cost_exceeds_capacity', detail: expect.any(String) })
    expect(keys(results[0].job)).toEqual(QUEUE_JOB_KEYS)
  })

  test('with Prefer: return=minimal a job created is answered by its id and state only, a refusal in full, and Preference-Applied says so', async () => {
    await start()
    const known = await submit(host, { client_request_id: 'known' })
    const res = await host.call(`${QUEUE}/jobs/submit-batch`, {
      method: 'POST',
      headers: { Prefer: 'handling=lenient, return=minimal' },
      json: { jobs: [{ job_type: 'a', cost_units: 1 }, { job_type: 'b', cost_units: 1, client_request_id: 'known' }, { job_type: 'c', cost_units: 1_000_000 }] },
    })
    expect(res.status).toBe(200)
    expect(res.headers.get('preference-applied')).toBe('return=minimal')
    const { results } = await body(res)
    expect(keys(results[0])).toEqual(['job_id', 'ok', 'state'])
    expect(results[0]).toEqual({ ok: true, job_id: expect.any(String), state: 'QUEUED' })
    expect(host.engine.getJob(results[0].job_id)).toMatchObject({ job_type: 'a', state: 'QUEUED' })
    expect(results[1]).toMatchObject({ ok: false, code: 'duplicate_request', job: { job_id: known.job_id } })
    expect(keys(results[1].job)).toEqual(QUEUE_JOB_KEYS)
    expect(results[2]).toMatchObject({ ok: false, code: 'cost_exceeds_capacity', detail: expect.any(String) })

    const full = await post(host, `${QUEUE}/jobs/submit-batch`, { jobs: [{ job_type: 'd', cost_units: 1 }] })
    expect(full.headers.get('preference-applied')).toBeNull()
    expect(keys((await body(full)).results[0].job)).toEqual(QUEUE_JOB_KEYS)
  })

  test('an item that does not validate makes the whole batch 400 naming the item, and nothing is submitted: run_at with delay_ms, run_at before 1970, a field zod refuses', async () => {
    await start()
    const ok = { job_type: 'mix', cost_units: 1 }
    const both = await expectInvalid(
      await post(host, `${QUEUE}/jobs/submit-batch`, { jobs: [ok, { ...ok, run_at: '2030-01-01T00:00:00Z', delay_ms: 3 }] }),
      'jobs.1',
      'run_at, delay_ms',
    )
    expect(both.detail).not.toContain('jobs.0')
    await expectInvalid(await post(host, `${QUEUE}/jobs/submit-batch`, { jobs: [{ ...ok, run_at: '1969-12-31T23:59:59Z' }, ok] }), 'jobs.0', 'run_at')
    await expectInvalid(await post(host, `${QUEUE}/jobs/submit-batch`, { jobs: [ok, ok, { ...ok, cost_units: 0 }] }), 'jobs.2.cost_units')
    expect(host.engine.listJobs({ limit: 1 }).jobs).toHaveLength(0)
  })

  test('an empty batch or one over 1,000 jobs is 400 naming jobs, and nothing is submitted', async () => {
    await start()
    await expectInvalid(await post(host, `${QUEUE}/jobs/submit-batch`, { jobs: [] }), 'jobs')
    await expectInvalid(await post(host, `${QUEUE}/jobs/submit-batch`, { jobs: Array.from({ length: 1001 }, () => ({ job_type: 'x', cost_units: 1 })) }), 'jobs')
    expect(host.engine.listJobs({ limit: 1 }).jobs).toHaveLength(0)
  })
})
