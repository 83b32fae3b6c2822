/**
 * Restart: a host stopped and started again on the same data dir answers the same jobs,
 * leases and time-series points over HTTP; leases still running keep their capacity, leases
 * that ran out while it was down are expired before the first request is served.
 */
import { afterEach, describe, expect, test } from 'vitest'
import { MINUTE, ManualClock } from '../../src-main/engine/rules/clock'
import { startTestHost, type TestHost } from '../helpers/host'
import { body, expectError, post, PULL, QUEUE, submit, WORKER } from './support'

const T0 = Date.parse('2026-02-06T20:10:00.000Z')
let host: TestHost | undefined
afterEach(async () => {
  await host?.dispose()
  host = undefined
})

async function restart(clock: ManualClock): Promise<TestHost> {
  const dataDir = host!.dataDir
  await host!.stop()
  host = await startTestHost({ dataDir, totalUnits: null, busy: null, claimTtlS: 86_400 }, { clock })
  return host
}

describe('restart on the same data dir', () => {
  test('jobs, leases, events and time-series points survive a stop and start', async () => {
    const clock = new ManualClock(T0 - 30 * MINUTE)
    host = await startTestHost({ totalUnits: 20, busy: 0, leaseTtlS: 30, heartbeatGraceS: 5, claimTtlS: 86_400 }, { clock })
    const token = host.token

    // A finished job (the worker API), a running one (the pull API, long lease), a claimed one (002), a queued one.
    const done = await submit(host, { queue: 'w', client_request_id: 'keep-me', payload: { n: 1 } })
    const c = await body(await post(host, `${WORKER}/claim`, { worker_id: 'w3', streams: ['w'], max_wait_ms: 0 }))
    await post(host, `${WORKER}/complete`, { worker_id: 'w3', job_id: c.job_id, attempt_id: c.attempt_id, lease_token: c.lease_token, result: { ok: 1 } })
    host.engine.sampleStats()
    clock.advance(7 * MINUTE)

    const leasedJob = await submit(host, { cost_units: 4 })
    const granted = await body(await post(host, `${PULL}/request`, { worker_id: 'w1', ttl_sec: 3600 }))
    expect(granted.job.job_id).toBe(leasedJob.job_id)
    const claimedJob = await submit(host, { cost_units: 2 })
    await post(host, `${QUEUE}/jobs/claim`, { worker_id: 'w2' })
    const queuedJob = await submit(host, { priority: 'HIGH' })
    host.engine.sampleStats()
    clock.advance(7 * MINUTE)
    host.engine.sampleStats()
    clock.set(T0)

    const ids = [done.job_id, leasedJob.job_id, claimedJob.job_id, queuedJob.job_id]
    const getAll = async (h: TestHost) =>
      Promise.all(ids.map(async (id) => ({ job: await body(await h.call(`${QUEUE}/jobs/${id}`)), events: await body(await h.call(`${QUEUE}/jobs/${id}/events`)) })))
    const series = async (h: TestHost) => {
      const out: Record<string, any[]> = {}
      for (const metric of ['jobs_queued', 'leases_active', 'capacity_used', 'jobs_running', 'jobs_completed']) {
        out[metric] = (await body(await h.call(`${QUEUE}/stats/timeseries?metric=${metric}&bucket=1m&range=1h`))).points
      }
      return out
    }
    const jobsBefore = await getAll(host)
    const leaseBefore = await body(await host.call(`${QUEUE}/lease/${granted.lease.lease_id}`))
    const seriesBefore = await series(host)
    const capacityBefore = await body(await host.call('/api/capacity'))
    expect(seriesBefore.jobs_queued!.some((p) => p.value > 0)).toBe(true)
    expect(seriesBefore.jobs_completed!.reduce((s, p) => s + p.value, 0)).toBe(1)

    await restart(clock)
    expect(host.token).toBe(token) // the token file is reused

    expect(await getAll(host)).toEqual(jobsBefore)
    expect(await body(await host.call(`${QUEUE}/lease/${granted.lease.lease_id}`))).toEqual(leaseBefore)
    expect(await body(await host.call('/api/capacity'))).toEqual(capacityBefore)
    const seriesAfter = await series(host)
    for (const metric of Object.keys(seriesBefore)) {
      // The current bucket may gain the sample written at stop; every earlier point is unchanged.
      expect(seriesAfter[metric]!.slice(0, -1), metric).toEqual(seriesBefore[metric]!.slice(0, -1))
    }

    // The lease still works for its holder, and the stored idempotency key still answers.
    const hb = await post(host, `${PULL}/${granted.lease.lease_id}/heartbeat`, { worker_id: 'w1' })
    expect(hb.status).toBe(200)
    expect(host.engine.getJob(leasedJob.job_id).state).toBe('RUNNING')
    expect(host.engine.getJob(claimedJob.job_id)).toMatchObject({ state: 'CLAIMED', claimed_by: 'w2' })
    const dup = await expectError(await post(host, `${QUEUE}/jobs/submit`, { job_type: 'x', cost_units: 1, client_request_id: 'keep-me' }), 409, 'duplicate_request', ['job'])
    expect(dup.job.job_id).toBe(done.job_id)
    // The queue order survives: the HIGH job is next for a new worker.
    const next = await body(await post(host, `${PULL}/request`, { worker_id: 'w4' }))
    expect(next.job.job_id).toBe(queuedJob.job_id)
  })

  test('a lease that ran out while the host was down is expired before the first request is answered', async () => {
    const clock = new ManualClock(T0)
    host = await startTestHost({ totalUnits: 10, busy: 0, leaseTtlS: 30, heartbeatGraceS: 5 }, { clock })
    const job = await submit(host, { cost_units: 3 })
    const c = await body(await post(host, `${WORKER}/claim`, { worker_id: 'w', streams: ['default'], max_wait_ms: 0 }))
    const lasting = await submit(host, { cost_units: 2 })
    const l = await body(await post(host, `${PULL}/request`, { worker_id: 'w2', ttl_sec: 600 }))
    expect(l.job.job_id).toBe(lasting.job_id)
    expect(host.engine.getCapacity().leased).toBe(5)
    const dataDir = host.dataDir
    await host.stop()
    clock.advance(60_000) // down for a minute: the 35 s lease ran out, the 605 s one did not
    host = await startTestHost({ dataDir, totalUnits: null, busy: null }, { clock })
    expect(await body(await host.call('/api/capacity'))).toMatchObject({ leased: 2, available: 8 })
    const leaseId = host.engine.getJob(job.job_id).lease_id!
    expect(host.engine.getLease(leaseId).state).toBe('EXPIRED')
    expect(host.engine.getJob(job.job_id).state).toBe('QUEUED')
    await expectError(await post(host, `${WORKER}/heartbeat`, { worker_id: 'w', job_id: c.job_id, lease_token: c.lease_token }), 409, 'lease_expired', ['ok'])
    expect(host.engine.getLease(l.lease.lease_id).state).toBe('ACTIVE')
  })
})
