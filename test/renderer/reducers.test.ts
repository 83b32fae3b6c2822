import { describe, expect, test } from 'vitest'
import { attemptError, dispositionLabel } from '../../src-renderer/lib/attempts'
import { reduceJobs } from '../../src-renderer/lib/job-events'
import { FLASH_MS, FLASHING_AT_MOST, leaseRow, mergeLeases, movesLeases, reduceLeases, sweepLeases, type LeaseRow } from '../../src-renderer/lib/lease-events'
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
  test('a job that moves on no longer shows why it waited (until the next read says why it waits now)', () => {
    const waiting = job({ waiting_reason: 'first in line; waiting for a worker', waiting_until: null })
    const [granted] = reduceJobs([waiting], event('LEASE_GRANTED', { entity_type: 'LEASE', entity_id: 'l1', data: { state: 'RUNNING', attempt: 1 } }))
    expect(granted).toMatchObject({ state: 'RUNNING', waiting_reason: null, waiting_until: null })
    const [noted] = reduceJobs([waiting], event('JOB_STATUS', { data: { state: 'QUEUED', note: 'hi' } }))
    expect(noted!.waiting_reason).toBe('first in line; waiting for a worker')
  })

  test("a requeue or halt drops the lease, and the ended attempt's progress and note (a halted job is no longer 'acquiring' its file)", () => {
    const running = job({ state: 'RUNNING', lease_id: 'l1', progress: 0.5, note: 'acquiring /repo/a.ts' })
    const rows = reduceJobs([running], event('JOB_BLOCKED', { data: { state: 'BLOCKED', blocker_id: 'b1' } }))
    expect(rows[0]).toMatchObject({ state: 'BLOCKED', lease_id: null, progress: null, note: null })
    expect(reduceJobs([running], event('JOB_REQUEUED', { data: { state: 'QUEUED' } }))[0]).toMatchObject({ state: 'QUEUED', progress: null, note: null })
  })
  test('a failure or timeout that ran out of attempts marks the row a dead letter, as a read of the job would', () => {
    const running = job({ job_id: 'a', state: 'RUNNING', lease_id: 'l1', attempts: 1 })
    const failed = reduceJobs([running], event('JOB_FAILED', { job_id: 'a', data: { state: 'FAILED', attempt: 1, dead_letter: true } }))
    expect(failed[0]).toMatchObject({ state: 'FAILED', dead_letter: true })
    const timedOut = reduceJobs([running], event('JOB_TIMEOUT', { job_id: 'a', data: { state: 'TIMEOUT', attempt: 1, dead_letter: true } }))
    expect(timedOut[0]).toMatchObject({ state: 'TIMEOUT', dead_letter: true })
    const final = reduceJobs([running], event('JOB_FAILED', { job_id: 'a', data: { state: 'FAILED', attempt: 1, dead_letter: false } }))
    expect(final[0]).toMatchObject({ state: 'FAILED', dead_letter: false })
  })
  test('an event of a job not on the page leaves the same array', () => {
    const rows = [job({ job_id: 'a' })]
    expect(reduceJobs(rows, event('JOB_DONE', { job_id: 'zzz', data: { state: 'DONE' } }))).toBe(rows)
    expect(reduceJobs(rows, event('CAPACITY_CHANGED', { job_id: null, entity_type: 'CAPACITY', entity_id: 'capacity' }))).toBe(rows)
  })
})

describe("an attempt's ending as the job page writes it", () => {
  test('a code and a message from the host and from workers; a bare string is a message; other JSON is shown as it is', () => {
    expect(attemptError({ code: 'lease_expired', message: 'The lease expired without a heartbeat' })).toEqual({
      code: 'lease_expired',
      message: 'The lease expired without a heartbeat',
    })
    expect(attemptError({ code: 'blocked', message: 'Halted by a file-lease blocker', blocker_id: 'b1' })).toEqual({ code: 'blocked', message: 'Halted by a file-lease blocker' })
    expect(attemptError({ message: 'boom', retryable: true })).toEqual({ code: null, message: 'boom' })
    expect(attemptError('disk full')).toEqual({ code: null, message: 'disk full' })
    expect(attemptError([1, 2])).toEqual({ code: null, message: '[1,2]' })
    expect(attemptError({ exit: 3 })).toEqual({ code: null, message: '{"exit":3}' })
  })
  test('no error, nothing to show', () => {
    expect(attemptError(null)).toBeNull()
    expect(attemptError(undefined)).toBeNull()
    expect(attemptError('')).toBeNull()
  })
  test('what became of the job, in words', () => {
    expect(['REQUEUED', 'DEAD_LETTERED', 'FINAL', 'BLOCKED', null].map(dispositionLabel)).toEqual(['requeued', 'dead-lettered', 'final', 'halted on a blocker', '—'])
  })
})

describe('the leases table reduces lease events', () => {
  const granted = (lease: string, jobId: string, at = T0) =>
    event('LEASE_GRANTED', { entity_type: 'LEASE', entity_id: lease, job_id: jobId, ts: iso(at), data: { worker_id: 'w1', cost_units: 5, expires_at: at + 35 * SECOND } })

  test('a grant adds a lease, counting down to its expiry (epoch ms in the event data)', () => {
    const rows = reduceLeases([], [granted('l1', 'j1')], T0)
    expect(rows).toEqual([
      {
        lease_id: 'l1',
        job_id: 'j1',
        job_type: null,
        addon_id: null,
        worker_id: 'w1',
        cost_units: 5,
        granted_at: T0,
        expires_at: T0 + 35 * SECOND,
        last_heartbeat_at: T0,
        ended: null,
      },
    ])
    expect(reduceLeases(rows, [granted('l1', 'j1')], T0)).toBe(rows) // replayed after a reconnect
  })
  test('an expiry flashes the lease out, then the sweep removes it', () => {
    let rows = reduceLeases([], [granted('l1', 'j1')], T0)
    rows = reduceLeases(rows, [event('LEASE_EXPIRED', { entity_type: 'LEASE', entity_id: 'l1', job_id: 'j1' })], T0 + 40 * SECOND)
    expect(rows[0]!.ended).toEqual({ how: 'expired', at: T0 + 40 * SECOND })
    expect(sweepLeases(rows, T0 + 40 * SECOND + FLASH_MS - 1)).toBe(rows)
    expect(sweepLeases(rows, T0 + 40 * SECOND + FLASH_MS)).toEqual([])
  })
  test('the end of its job releases a lease; a later requeue does not mark it twice', () => {
    let rows = reduceLeases([], [granted('l1', 'j1')], T0)
    rows = reduceLeases(rows, [event('JOB_DONE', { job_id: 'j1', data: { state: 'DONE' } })], T0 + SECOND)
    expect(rows[0]!.ended).toEqual({ how: 'released', at: T0 + SECOND })
    rows = reduceLeases(rows, [event('JOB_REQUEUED', { job_id: 'j1', data: { state: 'QUEUED' } })], T0 + 2 * SECOND)
    expect(rows[0]!.ended!.at).toBe(T0 + SECOND)
  })
  test(`a burst is applied in one pass (the rows are read once, not once per event), and of the leases it ends only the last ${FLASHING_AT_MOST} to end flash`, () => {
    const rows = reduceLeases([], Array.from({ length: 300 }, (_, i) => granted(`old-${i}`, `old-job-${i}`)), T0)
    // Each read of a row of the input is counted: a copy of the rows per event would read them 4,150 times over.
    let reads = 0
    const counted = new Proxy(rows, {
      get(target, key, receiver) {
        if (typeof key === 'string' && /^\d+$/.test(key)) reads++
        return Reflect.get(target, key, receiver)
      },
    })
    const burst = []
    for (let i = 0; i < 2000; i++) burst.push(granted(`l${i}`, `j${i}`, T0 + SECOND), event('JOB_DONE', { job_id: `j${i}`, data: { state: 'DONE' } }))
    for (let i = 0; i < 300; i += 2) burst.push(event('LEASE_EXPIRED', { entity_type: 'LEASE', entity_id: `old-${i}`, job_id: `old-job-${i}` }))
    const after = reduceLeases(counted, burst, T0 + 2 * SECOND)
    expect(reads).toBeLessThanOrEqual(2 * rows.length)
    expect(after.filter((r) => r.ended === null).map((r) => r.lease_id)).toEqual(Array.from({ length: 150 }, (_, i) => `old-${2 * i + 1}`))
    const flashing = after.filter((r) => r.ended !== null)
    expect(flashing.map((r) => r.lease_id)).toEqual(Array.from({ length: FLASHING_AT_MOST }, (_, i) => `old-${300 - 2 * FLASHING_AT_MOST + 2 * i}`))
    expect(flashing.every((r) => r.ended!.how === 'expired' && r.ended!.at === T0 + 2 * SECOND)).toBe(true)
    expect(sweepLeases(after, T0 + 2 * SECOND + FLASH_MS)).toHaveLength(150)
  })
  test(`leases that ended before a burst go first: only the last ${FLASHING_AT_MOST} to end flash, whenever they ended`, () => {
    let rows = reduceLeases([], Array.from({ length: 12 }, (_, i) => granted(`l${i}`, `j${i}`)), T0)
    rows = reduceLeases(rows, [0, 1, 2, 3, 4].map((i) => event('JOB_DONE', { job_id: `j${i}`, data: { state: 'DONE' } })), T0 + SECOND)
    expect(rows.filter((r) => r.ended !== null)).toHaveLength(5)
    rows = reduceLeases(rows, [5, 6, 7, 8, 9, 10, 11].map((i) => event('JOB_FAILED', { job_id: `j${i}`, data: { state: 'FAILED' } })), T0 + 2 * SECOND)
    expect(rows.map((r) => r.lease_id)).toEqual(['l2', 'l3', 'l4', 'l5', 'l6', 'l7', 'l8', 'l9', 'l10', 'l11'])
  })
  test('grants and lease ends call for a fresh read; other events do not', () => {
    expect(movesLeases(granted('l1', 'j1'))).toBe(true)
    expect(movesLeases(event('LEASE_EXPIRED', { entity_type: 'LEASE', entity_id: 'l1' }))).toBe(true)
    expect(movesLeases(event('JOB_DONE', { data: { state: 'DONE' } }))).toBe(true)
    expect(movesLeases(event('JOB_BLOCKED', { data: { state: 'BLOCKED' } }))).toBe(true)
    expect(movesLeases(event('JOB_SUBMITTED'))).toBe(false)
    expect(movesLeases(event('CAPACITY_CHANGED', { job_id: null }))).toBe(false)
  })
  test('a lease of GET /api/leases as a row: ISO times as epoch ms, with its job type and add-on', () => {
    expect(
      leaseRow({
        lease_id: 'l1',
        job_id: 'j1',
        job_type: 'render',
        addon_id: 'visuals',
        worker_id: 'w1',
        cost_units: 30,
        granted_at: iso(T0),
        last_heartbeat_at: iso(T0 + 2 * SECOND),
        expires_at: iso(T0 + 12 * SECOND),
      }),
    ).toEqual({
      lease_id: 'l1',
      job_id: 'j1',
      job_type: 'render',
      addon_id: 'visuals',
      worker_id: 'w1',
      cost_units: 30,
      granted_at: T0,
      expires_at: T0 + 12 * SECOND,
      last_heartbeat_at: T0 + 2 * SECOND,
      ended: null,
    })
  })
  test('a fresh read replaces the leases but keeps those flashing out and those granted after the host read them', () => {
    const row = (lease_id: string, granted_at: number, ended: LeaseRow['ended'] = null): LeaseRow => ({
      lease_id,
      job_id: `job-${lease_id}`,
      job_type: null,
      addon_id: null,
      worker_id: 'w',
      cost_units: 1,
      granted_at,
      expires_at: granted_at + 30 * SECOND,
      last_heartbeat_at: granted_at,
      ended,
    })
    // 'gone' and 'missed' were granted before the host read its leases and it no longer lists them.
    const known = [row('gone', T0), row('missed', T0 + 3 * SECOND - 1), row('flashing', T0, { how: 'expired', at: T0 + SECOND }), row('new', T0 + 3 * SECOND)]
    const fetched = [{ ...row('still', T0), job_type: 'render', last_heartbeat_at: T0 + 4 * SECOND }, row('flashing', T0)]
    const merged = mergeLeases(known, fetched, T0 + 3 * SECOND)
    expect(merged.map((r) => r.lease_id).sort()).toEqual(['flashing', 'new', 'still'])
    expect(merged.find((r) => r.lease_id === 'still')!.job_type).toBe('render')
    expect(merged.find((r) => r.lease_id === 'flashing')!.ended).not.toBeNull()
    expect(merged.find((r) => r.lease_id === 'still')!.last_heartbeat_at).toBe(T0 + 4 * SECOND)
  })
})
