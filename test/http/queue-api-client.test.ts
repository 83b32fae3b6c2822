/**
 * A client written from the queue contract alone, nothing else: it claims a job, reports PREPARING, sets
 * LEASE_PENDING before it asks for its lease (its contract's "on denial, job *remains*
 * LEASE_PENDING"), asks, is denied while capacity is short, asks again, heartbeats and
 * releases. Every call is its contract's route with its contract's body.
 */
import { expect, test } from 'vitest'
import type { ManualClock } from '../../src-main/engine/rules/clock'
import type { TestHost } from '../helpers/host'
import { body, clockedHost, post, QUEUE } from './support'

let host: TestHost
let clock: ManualClock
const startHost = clockedHost({ totalUnits: 70, leaseTtlS: 30, heartbeatGraceS: 5, claimTtlS: 60 })

async function call(path: string, json: unknown, status = 200) {
  const res = await post(host, `${QUEUE}${path}`, json)
  const answer = await body(res)
  expect(res.status, JSON.stringify(answer)).toBe(status)
  return answer
}

test('a client of the queue contract walks claim → PREPARING → LEASE_PENDING → lease request → heartbeat → release', async () => {
  ;({ host, clock } = await startHost({ busy: 8 })) // 14 of 70 units usable: the first ask is denied
  const { job } = await call(
    '/jobs/submit',
    {
      addon_id: 'visuals',
      job_type: 'load30',
      priority: 'NORMAL',
      cost_units: 30,
      constraints: { cpu_heavy: true },
      payload: { model: 'sdxl', prompt: '...' },
      client_request_id: 'seed-002-walk',
    },
    201,
  )

  const claimed = await call('/jobs/claim', {
    addon_id: 'visuals',
    worker_id: 'visuals-worker-01',
    limit: 1,
    accept_job_types: ['load30', 'render_image'],
    max_cost_units: 40,
    constraints_capabilities: { gpu_available: false },
  })
  expect(claimed.job).toMatchObject({ job_id: job.job_id, state: 'CLAIMED', claimed_by: 'visuals-worker-01' })

  const preparing = await call(`/jobs/${job.job_id}/status`, { state: 'PREPARING', note: 'warming model cache', progress: 0.15 })
  expect(preparing.job).toMatchObject({ state: 'PREPARING', note: 'warming model cache', progress: 0.15 })

  const pending = await call(`/jobs/${job.job_id}/status`, { state: 'LEASE_PENDING', note: 'asking for a lease' })
  expect(pending.job).toMatchObject({ state: 'LEASE_PENDING' })

  const leaseRequest = {
    job_id: job.job_id,
    addon_id: 'visuals',
    job_type: 'load30',
    cost_units: 30,
    priority: 'NORMAL',
    constraints: { cpu_heavy: true },
    ttl_sec: 30,
  }
  const denied = await call('/lease/request', leaseRequest)
  expect(denied).toEqual({ approved: false, retry_after_sec: 10, reason: 'Capacity exceeded: used=0, requested=30, capacity=14' })
  expect((await body(await host.call(`${QUEUE}/jobs/${job.job_id}`))).job.state).toBe('LEASE_PENDING') // it remains

  await host.call('/api/capacity', { method: 'PUT', json: { busy_rating: 0 } })
  clock.advance(denied.retry_after_sec * 1000)
  const approved = await call('/lease/request', leaseRequest)
  expect(approved).toMatchObject({ approved: true, lease: { job_id: job.job_id, cost_units: 30, ttl_sec: 30, state: 'ACTIVE' } })
  const leaseId = approved.lease.lease_id

  clock.advance(20_000)
  const beat = await call(`/lease/${leaseId}/heartbeat`, {
    job_id: job.job_id,
    worker_id: 'visuals-worker-01',
    progress: 0.65,
    message: 'rendering step 23/35',
  })
  expect(beat.job).toMatchObject({ state: 'RUNNING', progress: 0.65 })
  expect(beat.lease.expires_at).toBe(new Date(clock.now() + 35_000).toISOString())

  const released = await call(`/lease/${leaseId}/release`, {
    job_id: job.job_id,
    worker_id: 'visuals-worker-01',
    status: 'SUCCEEDED',
    result_data: { path: '/runtime/published/current.jpg' },
    error: null,
    metrics: { runtime_ms: 41234, peak_mem_mb: 2870 },
  })
  expect(released.lease).toMatchObject({ state: 'RELEASED' })
  expect(released.job).toMatchObject({ state: 'DONE' })
  expect(released.result).toMatchObject({ status: 'SUCCEEDED', result_data: { path: '/runtime/published/current.jpg' }, attempts: 1 })
})
