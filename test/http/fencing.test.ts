/**
 * Fencing over HTTP: worker A holds a lease and "pauses" past it (the ManualClock passes its
 * expires_at), the reaper expires it, worker B takes the job. Every late write from A is 409 and
 * changes nothing; the job finishes exactly once, under B's lease.
 */
import { afterEach, describe, expect, test } from 'vitest'
import { ManualClock } from '../../src-main/engine/rules/clock'
import { startTestHost, type TestHost } from '../helpers/host'
import { body, expectError, post, PULL, QUEUE, submit, until, WORKER } from './support'

const T0 = Date.parse('2026-02-06T20:10:00.000Z')
let host: TestHost
let clock: ManualClock

afterEach(async () => {
  await host?.dispose()
})

async function start() {
  clock = new ManualClock(T0)
  host = await startTestHost({ totalUnits: 10, busy: 0, leaseTtlS: 30, heartbeatGraceS: 5, maxAttempts: 3 }, { clock })
}

/** A pauses: time passes its lease's expires_at, and the host's reaper (not a test call) expires it. */
async function pausePast(leaseId: string) {
  clock.advance(35_001)
  await until(() => host.engine.getLease(leaseId).state === 'EXPIRED', 1500)
  const job = host.engine.getJob(host.engine.getLease(leaseId).job_id)
  expect(job.state).toBe('QUEUED')
  clock.advance(job.next_retry_at! - clock.now()) // its backoff passes; B may take it
}

function jobDoneCount(jobId: string): number {
  return host.engine.jobEvents(jobId).filter((e) => e.event_type === 'JOB_DONE').length
}

function snapshotOf(jobId: string) {
  const job = host.engine.getJob(jobId)
  return JSON.stringify({ job, events: host.engine.jobEvents(jobId).length })
}

describe('fencing: a worker paused past its lease never changes the job again', () => {
  test('pull API: A’s heartbeat and complete are 409 lease_expired; B completes; the job is done once', async () => {
    await start()
    const job = await submit(host)
    const a = await body(await post(host, `${PULL}/request`, { worker_id: 'A' }))
    expect(a.lease.job_id).toBe(job.job_id)
    await pausePast(a.lease.lease_id)
    const b = await body(await post(host, `${PULL}/request`, { worker_id: 'B' }))
    expect(b).toMatchObject({ denied: false, lease: { job_id: job.job_id, worker_id: 'B' } })
    expect(host.engine.getLease(b.lease.lease_id).fence).toBeGreaterThan(host.engine.getLease(a.lease.lease_id).fence)

    const before = snapshotOf(job.job_id)
    await expectError(await post(host, `${PULL}/${a.lease.lease_id}/heartbeat`, { worker_id: 'A' }), 409, 'lease_expired')
    await expectError(await post(host, `${PULL}/${a.lease.lease_id}/complete`, { worker_id: 'A', status: 'completed' }), 409, 'lease_expired')
    await expectError(await post(host, `${PULL}/${a.lease.lease_id}/complete`, { worker_id: 'A', status: 'failed' }), 409, 'lease_expired')
    expect(snapshotOf(job.job_id)).toBe(before)

    expect((await post(host, `${PULL}/${b.lease.lease_id}/heartbeat`, { worker_id: 'B' })).status).toBe(200)
    expect((await post(host, `${PULL}/${b.lease.lease_id}/complete`, { worker_id: 'B', status: 'completed' })).status).toBe(200)
    await expectError(await post(host, `${PULL}/${a.lease.lease_id}/complete`, { worker_id: 'A', status: 'completed' }), 409, 'lease_expired')
    expect(host.engine.getJob(job.job_id)).toMatchObject({ state: 'DONE', lease_id: b.lease.lease_id, attempts: 2 })
    expect(jobDoneCount(job.job_id)).toBe(1)
    expect(host.engine.attempts(job.job_id).map((x) => x.outcome)).toEqual(['TIMEOUT', 'SUCCEEDED'])
  })

  test('queue API: A’s heartbeat and release (every status) are 409 lease_expired; B releases; the job is done once', async () => {
    await start()
    const job = await submit(host)
    await post(host, `${QUEUE}/jobs/claim`, { worker_id: 'A' })
    const a = (await body(await post(host, `${QUEUE}/lease/request`, { job_id: job.job_id }))).lease
    await pausePast(a.lease_id)
    const claimedByB = await body(await post(host, `${QUEUE}/jobs/claim`, { worker_id: 'B' }))
    expect(claimedByB.job.job_id).toBe(job.job_id)
    const b = (await body(await post(host, `${QUEUE}/lease/request`, { job_id: job.job_id }))).lease
    expect(b).toMatchObject({ worker_id: 'B', state: 'ACTIVE' })
    expect(b.fence).toBeGreaterThan(a.fence)

    const before = snapshotOf(job.job_id)
    await expectError(await post(host, `${QUEUE}/lease/${a.lease_id}/heartbeat`, { job_id: job.job_id, worker_id: 'A', progress: 0.9 }), 409, 'lease_expired')
    for (const status of ['SUCCEEDED', 'FAILED', 'CANCELED']) {
      await expectError(await post(host, `${QUEUE}/lease/${a.lease_id}/release`, { job_id: job.job_id, worker_id: 'A', status }), 409, 'lease_expired')
    }
    expect(snapshotOf(job.job_id)).toBe(before)

    const done = await body(await post(host, `${QUEUE}/lease/${b.lease_id}/release`, { job_id: job.job_id, worker_id: 'B', status: 'SUCCEEDED' }))
    expect(done.job.state).toBe('DONE')
    await expectError(await post(host, `${QUEUE}/lease/${a.lease_id}/release`, { job_id: job.job_id, worker_id: 'A', status: 'SUCCEEDED' }), 409, 'lease_expired')
    expect(host.engine.getJob(job.job_id)).toMatchObject({ state: 'DONE', lease_id: b.lease_id })
    expect(jobDoneCount(job.job_id)).toBe(1)
  })

  test('worker API: A’s heartbeat, complete and fail are 409 lease_expired (ok:false, ack:true); B completes; the job is done once', async () => {
    await start()
    const job = await submit(host)
    const a = await body(await post(host, `${WORKER}/claim`, { worker_id: 'A', streams: ['default'], max_wait_ms: 0 }))
    expect(a.job_id).toBe(job.job_id)
    const leaseA = host.engine.getJob(job.job_id).lease_id!
    await pausePast(leaseA)
    const b = await body(await post(host, `${WORKER}/claim`, { worker_id: 'B', streams: ['default'], max_wait_ms: 0 }))
    expect(b).toMatchObject({ claimed: true, job_id: job.job_id })
    expect(b.attempt_id).not.toBe(a.attempt_id)
    expect(b.lease_token).not.toBe(a.lease_token)

    const asA = { worker_id: 'A', job_id: a.job_id, attempt_id: a.attempt_id, lease_token: a.lease_token, stream: a.stream, message_id: a.message_id }
    const before = snapshotOf(job.job_id)
    const hb = await expectError(await post(host, `${WORKER}/heartbeat`, { worker_id: 'A', job_id: a.job_id, lease_token: a.lease_token }), 409, 'lease_expired', ['ok'])
    expect(hb.ok).toBe(false)
    const complete = await expectError(await post(host, `${WORKER}/complete`, { ...asA, result: { late: true } }), 409, 'lease_expired', ['ok', 'ack'])
    expect(complete).toMatchObject({ ok: false, ack: true })
    const fail = await expectError(await post(host, `${WORKER}/fail`, { ...asA, error: { retryable: true } }), 409, 'lease_expired', ['ok', 'ack'])
    expect(fail).toMatchObject({ ok: false, ack: true })
    // A cannot use B's token either: it is B's lease.
    await expectError(await post(host, `${WORKER}/heartbeat`, { worker_id: 'A', job_id: a.job_id, lease_token: b.lease_token }), 403, 'worker_mismatch', ['ok'])
    expect(snapshotOf(job.job_id)).toBe(before)

    const asB = { worker_id: 'B', job_id: b.job_id, attempt_id: b.attempt_id, lease_token: b.lease_token }
    expect(await body(await post(host, `${WORKER}/complete`, { ...asB, result: { by: 'B' } }))).toEqual({ ok: true, ack: true })
    await expectError(await post(host, `${WORKER}/complete`, asA), 409, 'lease_expired', ['ok', 'ack'])
    const final = host.engine.getJob(job.job_id)
    expect(final.state).toBe('DONE')
    expect(final.result).toEqual({ by: 'B' })
    expect(jobDoneCount(job.job_id)).toBe(1)
  })

  test('across APIs: A leased through the worker API, B takes the job through the pull API; A’s late worker-API complete changes nothing', async () => {
    await start()
    const job = await submit(host)
    const a = await body(await post(host, `${WORKER}/claim`, { worker_id: 'A', streams: ['default'], max_wait_ms: 0 }))
    await pausePast(host.engine.getJob(job.job_id).lease_id!)
    const b = await body(await post(host, `${PULL}/request`, { worker_id: 'B' }))
    expect(b.lease.job_id).toBe(job.job_id)
    await expectError(
      await post(host, `${WORKER}/complete`, { worker_id: 'A', job_id: a.job_id, attempt_id: a.attempt_id, lease_token: a.lease_token }),
      409,
      'lease_expired',
      ['ok', 'ack'],
    )
    expect(host.engine.getJob(job.job_id).state).toBe('LEASED')
    await post(host, `${PULL}/${b.lease.lease_id}/complete`, { worker_id: 'B', status: 'completed' })
    expect(jobDoneCount(job.job_id)).toBe(1)
  })

  test('a late call before the reaper ran still finds the lease expired (expired on the spot, never revived)', async () => {
    await start()
    await submit(host)
    const a = await body(await post(host, `${WORKER}/claim`, { worker_id: 'A', streams: ['default'], max_wait_ms: 0 }))
    clock.advance(35_001)
    // Racing the 250 ms reaper: whichever runs first, the answer is lease_expired and the lease stays expired.
    await expectError(await post(host, `${WORKER}/heartbeat`, { worker_id: 'A', job_id: a.job_id, lease_token: a.lease_token }), 409, 'lease_expired', ['ok'])
    const leaseId = host.engine.getJob(a.job_id).lease_id!
    expect(host.engine.getLease(leaseId).state).toBe('EXPIRED')
    expect(host.engine.getCapacity().leased).toBe(0)
  })
})

describe('fencing: queue API writes before a lease are fenced by the claim', () => {
  /** A claims, and its claim lapses: the reaper requeues the job. */
  async function claimLapsed() {
    await start()
    const job = await submit(host)
    const a = await body(await post(host, `${QUEUE}/jobs/claim`, { worker_id: 'A' }))
    expect(a.job.job_id).toBe(job.job_id)
    clock.advance(60_001)
    await until(() => host.engine.getJob(job.job_id).state === 'QUEUED', 1500)
    return job
  }

  test('a status update for a job whose claim lapsed (requeued) is 409 and changes nothing', async () => {
    const job = await claimLapsed()
    const before = snapshotOf(job.job_id)
    await expectError(await post(host, `${QUEUE}/jobs/${job.job_id}/status`, { note: 'late', worker_id: 'A' }), 409, 'illegal_transition')
    await expectError(await post(host, `${QUEUE}/jobs/${job.job_id}/status`, { state: 'LEASE_PENDING' }), 409, 'illegal_transition')
    expect(snapshotOf(job.job_id)).toBe(before)
  })

  test('a status update or lease request naming a worker that is not the claimer is 403 worker_mismatch; nothing changes', async () => {
    const job = await claimLapsed()
    const b = await body(await post(host, `${QUEUE}/jobs/claim`, { worker_id: 'B' }))
    expect(b.job).toMatchObject({ job_id: job.job_id, claimed_by: 'B' })
    const before = snapshotOf(job.job_id)
    for (let i = 0; i < 20; i++) {
      await expectError(await post(host, `${QUEUE}/jobs/${job.job_id}/status`, { state: 'PREPARING', note: 'stale', worker_id: 'A' }), 403, 'worker_mismatch')
    }
    for (let i = 0; i < 3; i++) {
      await expectError(await post(host, `${QUEUE}/lease/request`, { job_id: job.job_id, worker_id: 'A' }), 403, 'worker_mismatch')
    }
    expect(snapshotOf(job.job_id)).toBe(before)
    expect(host.engine.getCapacity().leased).toBe(0)
    // B, the claimer, goes on.
    const granted = await body(await post(host, `${QUEUE}/lease/request`, { job_id: job.job_id, worker_id: 'B' }))
    expect(granted).toMatchObject({ approved: true, lease: { worker_id: 'B', job_id: job.job_id } })
  })
})
