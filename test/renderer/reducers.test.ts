import { describe, expect, test } from 'vitest'
import { attemptsFromEvents, reduceJobs } from '../../src-renderer/lib/job-events'
import { FLASH_MS, mergeLeases, reduceLeases, sweepLeases, type LeaseRow } from '../../src-renderer/lib/lease-events'
import { event, iso, job, SECOND, T0 } from './support'

describe('the jobs table reduces job events', () => {
  test('each job event moves the row to the state it names; LEASED shows as RUNNING', () => {
    let rows = [job({ job_id: 'a' }), job({ job_id: 'b' })]
    rows = reduceJobs(rows, event('LEASE_GRANTED', { job_id: 'a', entity_type: 'LEASE', entity_id: 'lease-a', data: { state: 'LEASED', attempt: 1, worker_id: 'w1' } }))
    expect(rows[0]).toMatchObject({ state: 'RUNNING', attempts: 1, lease_id: 'lease-a', claimed_by: 'w1' })
    rows = reduceJobs(rows, event('JOB_CANCEL_REQUESTED', { job_id: 'a', data: { state: 'RUNNING' } }))
    expect(rows[0]).toMatchObject({ state: 'RUNNING', cancel_requested: true })
    rows = reduceJobs(rows, event('JOB_CANCELED', { job_id: 'a', data: { state: 'CANCELED' } }))
    expect(rows.map((r) => r.state)).toEqual(['CANCELED', 'QUEUED'])
  })
  test('a requeue or halt drops the lease', () => {
    const rows = reduceJobs([job({ state: 'RUNNING', lease_id: 'l1', progress: 0.5 })], event('JOB_BLOCKED', { data: { state: 'BLOCKED', blocker_id: 'b1' } }))
    expect(rows[0]).toMatchObject({ state: 'BLOCKED', lease_id: null, progress: null })
  })
  test('an event of a job not on the page leaves the same array', () => {
    const rows = [job({ job_id: 'a' })]
    expect(reduceJobs(rows, event('JOB_DONE', { job_id: 'zzz', data: { state: 'DONE' } }))).toBe(rows)
    expect(reduceJobs(rows, event('CAPACITY_CHANGED', { job_id: null, entity_type: 'CAPACITY', entity_id: 'capacity' }))).toBe(rows)
  })
})

describe('attempts read from the event timeline', () => {
  test('a grant starts an attempt; the end of its lease ends it with the outcome', () => {
    const attempts = attemptsFromEvents([
      event('JOB_SUBMITTED', { data: { state: 'QUEUED' } }),
      event('LEASE_GRANTED', { entity_id: 'l1', ts: iso(T0 + SECOND), data: { attempt: 1, worker_id: 'w1' } }),
      event('LEASE_EXPIRED', { entity_id: 'l1', ts: iso(T0 + 40 * SECOND), data: { reason: 'no_heartbeat' } }),
      event('JOB_REQUEUED', { data: { state: 'QUEUED', reason: 'lease expired' } }),
      event('LEASE_GRANTED', { entity_id: 'l2', ts: iso(T0 + 50 * SECOND), data: { attempt: 2, worker_id: 'w2' } }),
      event('JOB_BLOCKED', { data: { state: 'BLOCKED' } }),
      event('BLOCKER_RESOLVED', { data: { action: 'retry' } }),
      event('JOB_REQUEUED', { data: { state: 'QUEUED', reason: 'blocker retry' } }),
      event('LEASE_GRANTED', { entity_id: 'l3', data: { attempt: 3, worker_id: 'w1' } }),
    ])
    expect(attempts.map((a) => [a.attempt, a.worker_id, a.outcome])).toEqual([
      [1, 'w1', 'EXPIRED'],
      [2, 'w2', 'BLOCKED'],
      [3, 'w1', null],
    ])
    expect(attempts[0]).toMatchObject({ started_at: iso(T0 + SECOND), ended_at: iso(T0 + 40 * SECOND), reason: 'no_heartbeat' })
  })
  test('no grant, no attempt', () => {
    expect(attemptsFromEvents([event('JOB_SUBMITTED'), event('JOB_CANCELED', { data: { state: 'CANCELED' } })])).toEqual([])
  })
})

describe('the leases table reduces lease events', () => {
  const granted = (lease: string, jobId: string, at = T0) =>
    event('LEASE_GRANTED', { entity_type: 'LEASE', entity_id: lease, job_id: jobId, ts: iso(at), data: { worker_id: 'w1', cost_units: 5, expires_at: at + 35 * SECOND } })

  test('a grant adds a lease, counting down to its expiry (epoch ms in the event data)', () => {
    const rows = reduceLeases([], granted('l1', 'j1'), T0)
    expect(rows).toEqual([
      { lease_id: 'l1', job_id: 'j1', worker_id: 'w1', cost_units: 5, granted_at: T0, expires_at: T0 + 35 * SECOND, last_heartbeat_at: T0, ended: null },
    ])
    expect(reduceLeases(rows, granted('l1', 'j1'), T0)).toBe(rows) // replayed after a reconnect
  })
  test('an expiry flashes the lease out, then the sweep removes it', () => {
    let rows = reduceLeases([], granted('l1', 'j1'), T0)
    rows = reduceLeases(rows, event('LEASE_EXPIRED', { entity_type: 'LEASE', entity_id: 'l1', job_id: 'j1' }), T0 + 40 * SECOND)
    expect(rows[0]!.ended).toEqual({ how: 'expired', at: T0 + 40 * SECOND })
    expect(sweepLeases(rows, T0 + 40 * SECOND + FLASH_MS - 1)).toBe(rows)
    expect(sweepLeases(rows, T0 + 40 * SECOND + FLASH_MS)).toEqual([])
  })
  test('the end of its job releases a lease; a later requeue does not mark it twice', () => {
    let rows = reduceLeases([], granted('l1', 'j1'), T0)
    rows = reduceLeases(rows, event('JOB_DONE', { job_id: 'j1', data: { state: 'DONE' } }), T0 + SECOND)
    expect(rows[0]!.ended).toEqual({ how: 'released', at: T0 + SECOND })
    rows = reduceLeases(rows, event('JOB_REQUEUED', { job_id: 'j1', data: { state: 'QUEUED' } }), T0 + 2 * SECOND)
    expect(rows[0]!.ended!.at).toBe(T0 + SECOND)
  })
  test('a fresh read replaces the leases but keeps those flashing out and those granted meanwhile', () => {
    const row = (lease_id: string, granted_at: number, ended: LeaseRow['ended'] = null): LeaseRow => ({
      lease_id,
      job_id: `job-${lease_id}`,
      worker_id: 'w',
      cost_units: 1,
      granted_at,
      expires_at: granted_at + 30 * SECOND,
      last_heartbeat_at: granted_at,
      ended,
    })
    const known = [row('gone', T0), row('flashing', T0, { how: 'expired', at: T0 + SECOND }), row('new', T0 + 5 * SECOND)]
    const fetched = [{ ...row('still', T0), last_heartbeat_at: T0 + 4 * SECOND }, row('flashing', T0)]
    const merged = mergeLeases(known, fetched, T0 + 3 * SECOND)
    expect(merged.map((r) => r.lease_id).sort()).toEqual(['flashing', 'new', 'still'])
    expect(merged.find((r) => r.lease_id === 'flashing')!.ended).not.toBeNull()
    expect(merged.find((r) => r.lease_id === 'still')!.last_heartbeat_at).toBe(T0 + 4 * SECOND)
  })
})
