/**
 * the pull API (pull-lease) over real HTTP: request = dequeue + lease, heartbeat, and the
 * complete route Leasehold adds. Every documented status and code, and the exact views.
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
  PULL_JOB_KEYS,
  PULL_LEASE_KEYS,
  QUEUE,
  submit,
  UNKNOWN_ID,
  clockedHost,
  API_T0,
} from './support'

const T0 = API_T0
let host: TestHost
let clock: ManualClock
const startHost = clockedHost({ totalUnits: 10, leaseTtlS: 30, heartbeatGraceS: 5 })

async function start(overrides: Parameters<typeof startHost>[0] = {}) {
  ;({ host, clock } = await startHost(overrides))
  return host
}

async function grant(workerId = 'worker-1', extra: Record<string, unknown> = {}) {
  const res = await post(host, `${PULL}/request`, { worker_id: workerId, ...extra })
  expect(res.status).toBe(200)
  const answer = await body(res)
  expect(answer.denied).toBe(false)
  return answer as { denied: false; lease: any; job: any }
}

describe('POST /leases/request', () => {
  test('a grant is 200 {denied:false, lease, job} with exactly the seed fields, state leased, lowercase priority', async () => {
    await start()
    const job = await submit(host, { cost_units: 4, priority: 'HIGH', payload: { a: 1 }, tags: ['x'], client_request_id: 'k1', max_runtime_s: 60 })
    const res = await post(host, `${PULL}/request`, { worker_id: 'worker-123', max_units: 8 })
    expect(res.status).toBe(200)
    const answer = await body(res)
    expect(keys(answer)).toEqual(['denied', 'job', 'lease'])
    expect(answer.denied).toBe(false)
    expect(keys(answer.lease)).toEqual(PULL_LEASE_KEYS)
    expect(keys(answer.job)).toEqual(PULL_JOB_KEYS)
    expect(answer.lease).toMatchObject({ job_id: job.job_id, worker_id: 'worker-123', capacity_units: 4 })
    expect(answer.job).toMatchObject({
      job_id: job.job_id,
      type: 'generic',
      priority: 'high',
      requested_units: 4,
      unique: false,
      state: 'leased',
      payload: { a: 1 },
      idempotency_key: 'k1',
      tags: ['x'],
      max_runtime_s: 60,
      lease_id: answer.lease.lease_id,
    })
    for (const t of [answer.lease.issued_at, answer.lease.expires_at, answer.lease.last_heartbeat, answer.job.created_at, answer.job.updated_at]) {
      expect(t).toMatch(ISO_MS)
    }
    expect(Date.parse(answer.lease.expires_at) - Date.parse(answer.lease.issued_at)).toBe(35_000) // ttl + grace
    expect(host.engine.getJob(job.job_id).state).toBe('LEASED')
  })

  test('nothing queued is 200 {denied:true, reason, retry_after_ms} and nothing else', async () => {
    await start()
    const res = await post(host, `${PULL}/request`, { worker_id: 'w' })
    expect(res.status).toBe(200)
    const answer = await body(res)
    expect(keys(answer)).toEqual(['denied', 'reason', 'retry_after_ms'])
    expect(answer).toMatchObject({ denied: true, reason: expect.any(String), retry_after_ms: expect.any(Number) })
    expect(answer.retry_after_ms).toBeGreaterThan(0)
  })

  test('a head job that does not fit is denied with the numbers, keeps its place, and no smaller job is leased instead', async () => {
    await start({ totalUnits: 10, busy: 8 }) // usable 2
    const big = await submit(host, { cost_units: 3 })
    await submit(host, { cost_units: 1 })
    const res = await post(host, `${PULL}/request`, { worker_id: 'w' })
    expect(res.status).toBe(200)
    expect(await body(res)).toEqual({ denied: true, reason: 'Capacity exceeded: used=0, requested=3, capacity=2', retry_after_ms: expect.any(Number) })
    expect(host.engine.getJob(big.job_id).state).toBe('QUEUED')
    expect(host.engine.snapshot().leases.active).toBe(0)
  })

  test('with no capacity left the denial names busy, usable and leased', async () => {
    await start({ totalUnits: 10, busy: 8 }) // usable 2
    await submit(host, { cost_units: 2 })
    await submit(host, { cost_units: 1 })
    await grant('w1')
    const res = await post(host, `${PULL}/request`, { worker_id: 'w2' })
    expect((await body(res)).reason).toBe('No capacity (busy=8, usable=2, leased=2)')
  })

  test('max_units skips jobs this worker cannot take (not a denial); unique jobs skip a worker that holds a lease', async () => {
    await start()
    const big = await submit(host, { cost_units: 5 })
    const small = await submit(host, { cost_units: 1 })
    const first = await grant('w1', { max_units: 2 })
    expect(first.job.job_id).toBe(small.job_id)
    expect(host.engine.getJob(big.job_id).state).toBe('QUEUED')

    await submit(host, { cost_units: 1, unique: true })
    const skipped = await body(await post(host, `${PULL}/request`, { worker_id: 'w1', max_units: 2 }))
    expect(skipped.denied).toBe(true) // w1 holds a lease: the unique job is skipped, the big one exceeds max_units
  })

  test('a job with constraints.gpu_required is leased only to a request that says gpu_available; one that does not skips it', async () => {
    await start()
    const gpu = await submit(host, { priority: 'URGENT', constraints: { gpu_required: true } })
    const plain = await submit(host, { priority: 'LOW' })
    expect((await grant('w1')).job.job_id).toBe(plain.job_id)
    expect(await body(await post(host, `${PULL}/request`, { worker_id: 'w1', gpu_available: false }))).toMatchObject({ denied: true })
    expect((await grant('w2', { gpu_available: true })).job.job_id).toBe(gpu.job_id)
  })

  test('a bad body is 400 invalid_request naming the failing fields', async () => {
    await start()
    await expectInvalid(await post(host, `${PULL}/request`, { worker_id: 'w', gpu_available: 'yes' }), 'gpu_available')
    await expectInvalid(await post(host, `${PULL}/request`, {}), 'worker_id')
    await expectInvalid(await post(host, `${PULL}/request`, { worker_id: 'w', max_units: '8' }), 'max_units')
    await expectInvalid(await post(host, `${PULL}/request`, { worker_id: 'w', max_units: 0 }), 'max_units')
    await expectInvalid(await post(host, `${PULL}/request`, { worker_id: 7 }), 'worker_id')
    await expectInvalid(await post(host, `${PULL}/request`, { worker_id: 'w', surprise: true }), 'surprise')
    await expectInvalid(await post(host, `${PULL}/request`, { worker_id: 'w', ttl_sec: 0 }), 'ttl_sec')
    await expectInvalid(await post(host, `${PULL}/request`, []), '(body)')
  })

  test('no token or a wrong token is 401 unauthorized and leases nothing', async () => {
    await start()
    await submit(host)
    await expectError(await post(host, `${PULL}/request`, { worker_id: 'w' }, null), 401, 'unauthorized')
    await expectError(await post(host, `${PULL}/request`, { worker_id: 'w' }, 'nope-nope-nope-nope'), 401, 'unauthorized')
    expect(host.engine.snapshot().leases.active).toBe(0)
  })

  test('ttl_sec overrides the lease TTL', async () => {
    await start()
    await submit(host)
    const { lease } = await grant('w', { ttl_sec: 10 })
    expect(Date.parse(lease.expires_at) - Date.parse(lease.issued_at)).toBe(15_000)
  })
})

describe('POST /leases/{id}/heartbeat', () => {
  test('200 {ok, expires_at, cancel_requested} extends to now + ttl + grace; the first heartbeat moves leased → running', async () => {
    await start()
    await submit(host)
    const { lease, job } = await grant('worker-123')
    clock.advance(10_000)
    const res = await post(host, `${PULL}/${lease.lease_id}/heartbeat`, { worker_id: 'worker-123' })
    expect(res.status).toBe(200)
    const answer = await body(res)
    expect(keys(answer)).toEqual(['cancel_requested', 'expires_at', 'ok'])
    expect(answer).toEqual({ ok: true, expires_at: new Date(T0 + 10_000 + 35_000).toISOString(), cancel_requested: false })
    expect(host.engine.getJob(job.job_id).state).toBe('RUNNING')
    // Repeated heartbeats are safe and keep extending.
    clock.advance(5_000)
    const again = await body(await post(host, `${PULL}/${lease.lease_id}/heartbeat`, { worker_id: 'worker-123' }))
    expect(again.expires_at).toBe(new Date(T0 + 15_000 + 35_000).toISOString())
    expect(host.engine.getJob(job.job_id).state).toBe('RUNNING')
  })

  test('a cancel of a leased job shows as cancel_requested on the next heartbeat', async () => {
    await start()
    await submit(host)
    const { lease, job } = await grant('w')
    expect((await post(host, `${QUEUE}/jobs/${job.job_id}/cancel`, { reason: 'stop' })).status).toBe(200)
    const answer = await body(await post(host, `${PULL}/${lease.lease_id}/heartbeat`, { worker_id: 'w' }))
    expect(answer.cancel_requested).toBe(true)
  })

  test('an unknown lease is 404 lease_not_found', async () => {
    await start()
    await expectError(await post(host, `${PULL}/${UNKNOWN_ID}/heartbeat`, { worker_id: 'w' }), 404, 'lease_not_found')
  })

  test("another worker's heartbeat is 403 worker_mismatch and does not extend the lease", async () => {
    await start()
    await submit(host)
    const { lease } = await grant('owner')
    clock.advance(1000)
    await expectError(await post(host, `${PULL}/${lease.lease_id}/heartbeat`, { worker_id: 'intruder' }), 403, 'worker_mismatch')
    expect(host.engine.getLease(lease.lease_id).expires_at).toBe(Date.parse(lease.expires_at))
  })

  test('a heartbeat after expires_at is 409 lease_expired, even before the reaper ran', async () => {
    await start()
    await submit(host)
    const { lease } = await grant('w')
    clock.advance(35_001)
    await expectError(await post(host, `${PULL}/${lease.lease_id}/heartbeat`, { worker_id: 'w' }), 409, 'lease_expired')
    expect(host.engine.getLease(lease.lease_id).state).toBe('EXPIRED')
  })

  test('a heartbeat on a completed lease is 409 lease_not_active', async () => {
    await start()
    await submit(host)
    const { lease } = await grant('w')
    expect((await post(host, `${PULL}/${lease.lease_id}/complete`, { worker_id: 'w', status: 'completed' })).status).toBe(200)
    await expectError(await post(host, `${PULL}/${lease.lease_id}/heartbeat`, { worker_id: 'w' }), 409, 'lease_not_active')
  })

  test('a bad heartbeat body is 400 naming the field', async () => {
    await start()
    await submit(host)
    const { lease } = await grant('w')
    await expectInvalid(await post(host, `${PULL}/${lease.lease_id}/heartbeat`, {}), 'worker_id')
    await expectInvalid(await post(host, `${PULL}/${lease.lease_id}/heartbeat`, { worker_id: 'w', extra: 1 }), 'extra')
  })

  test('no token is 401', async () => {
    await start()
    await expectError(await post(host, `${PULL}/${UNKNOWN_ID}/heartbeat`, { worker_id: 'w' }, null), 401, 'unauthorized')
  })
})

describe('POST /leases/{id}/complete (added so this API can finish a job)', () => {
  test('completed → 200 {ok, job} with the job completed and the lease released', async () => {
    await start()
    await submit(host)
    const { lease, job } = await grant('w')
    await post(host, `${PULL}/${lease.lease_id}/heartbeat`, { worker_id: 'w' })
    const res = await post(host, `${PULL}/${lease.lease_id}/complete`, { worker_id: 'w', status: 'completed', result: { out: 1 } })
    expect(res.status).toBe(200)
    const answer = await body(res)
    expect(keys(answer)).toEqual(['job', 'ok'])
    expect(keys(answer.job)).toEqual(PULL_JOB_KEYS)
    expect(answer.job).toMatchObject({ job_id: job.job_id, state: 'completed' })
    expect(host.engine.getLease(lease.lease_id)).toMatchObject({ state: 'RELEASED', release_status: 'SUCCEEDED' })
    expect(host.engine.getCapacity().leased).toBe(0)
  })

  test('failed is final: the job is failed and not requeued', async () => {
    await start()
    await submit(host, { max_attempts: 5 })
    const { lease, job } = await grant('w')
    const answer = await body(await post(host, `${PULL}/${lease.lease_id}/complete`, { worker_id: 'w', status: 'failed', error: { message: 'x' } }))
    expect(answer.job.state).toBe('failed')
    expect(host.engine.getJob(job.job_id).state).toBe('FAILED')
  })

  test('repeating a completion answers as the first time; a different status or result afterwards is 409 lease_not_active', async () => {
    await start()
    await submit(host)
    const { lease } = await grant('w')
    const first = await body(await post(host, `${PULL}/${lease.lease_id}/complete`, { worker_id: 'w', status: 'completed' }))
    const events = host.engine.jobEvents(lease.job_id).length
    const repeat = await post(host, `${PULL}/${lease.lease_id}/complete`, { worker_id: 'w', status: 'completed' })
    expect(repeat.status).toBe(200)
    expect(await body(repeat)).toEqual(first)
    expect(host.engine.jobEvents(lease.job_id).length).toBe(events)
    await expectError(await post(host, `${PULL}/${lease.lease_id}/complete`, { worker_id: 'w', status: 'failed' }), 409, 'lease_not_active')
    const other = await expectError(await post(host, `${PULL}/${lease.lease_id}/complete`, { worker_id: 'w', status: 'completed', result: { a: 2 } }), 409, 'lease_not_active')
    expect(other.detail).toContain('already reported SUCCEEDED with a different result')
  })

  test('404 lease_not_found, 403 worker_mismatch, 409 lease_expired, 400 naming status', async () => {
    await start()
    await submit(host)
    const { lease, job } = await grant('w')
    await expectError(await post(host, `${PULL}/${UNKNOWN_ID}/complete`, { worker_id: 'w', status: 'completed' }), 404, 'lease_not_found')
    await expectError(await post(host, `${PULL}/${lease.lease_id}/complete`, { worker_id: 'x', status: 'completed' }), 403, 'worker_mismatch')
    await expectInvalid(await post(host, `${PULL}/${lease.lease_id}/complete`, { worker_id: 'w', status: 'done' }), 'status')
    await expectInvalid(await post(host, `${PULL}/${lease.lease_id}/complete`, { status: 'completed' }), 'worker_id')
    clock.advance(36_000)
    await expectError(await post(host, `${PULL}/${lease.lease_id}/complete`, { worker_id: 'w', status: 'completed' }), 409, 'lease_expired')
    expect(host.engine.getJob(job.job_id).state).toBe('QUEUED') // requeued by the expiry, not finished by the late call
  })

  test('no token is 401', async () => {
    await start()
    await expectError(await post(host, `${PULL}/${UNKNOWN_ID}/complete`, { worker_id: 'w', status: 'completed' }, null), 401, 'unauthorized')
  })
})
