import { describe, expect, it } from 'vitest'
import { aJob, setup, T0 } from '../helpers/engine'
import { SECOND } from '../../src-main/engine/rules/clock'
import { jobListQuery, QUEUED_WINDOW } from '../../src-main/engine/reads/list'
import { JOB_STATES, type JobState } from '../../src-main/engine/rules/states'
import { claimOrFail, expectEngineError, leaseOrFail } from './support'
// White-box in one case: the list's SQL is explained, so the query builder is called directly.
import { engineContext } from '../../src-main/engine/internals'
import { database } from '../helpers/database'

describe('listing jobs', () => {
  it('lists newest first with a default limit of 50', () => {
    const { engine } = setup()
    const ids = Array.from({ length: 60 }, () => engine.submit(aJob()).job.id)
    const page = engine.listJobs({})
    expect(page.jobs).toHaveLength(50)
    expect(page.jobs.map((j) => j.id)).toEqual(ids.slice(10).reverse())
    expect(page.next_cursor).not.toBeNull()
  })

  it('pages with an opaque cursor until next_cursor is null, every job exactly once', () => {
    const { engine } = setup()
    const ids = Array.from({ length: 7 }, () => engine.submit(aJob()).job.id)
    const seen: string[] = []
    let cursor: string | undefined
    for (;;) {
      const page = engine.listJobs({ limit: 3, cursor })
      seen.push(...page.jobs.map((j) => j.id))
      if (page.next_cursor === null) break
      cursor = page.next_cursor
    }
    expect(seen).toEqual([...ids].reverse())
  })

  it('pages stay stable while jobs are submitted', () => {
    const { engine } = setup()
    const ids = Array.from({ length: 4 }, () => engine.submit(aJob()).job.id)
    const first = engine.listJobs({ limit: 2 })
    engine.submit(aJob())
    engine.submit(aJob())
    const second = engine.listJobs({ limit: 2, cursor: first.next_cursor! })
    expect(second.jobs.map((j) => j.id)).toEqual([ids[1], ids[0]])
    expect(second.next_cursor).toBeNull()
  })

  it('exactly `limit` jobs left gives no next cursor', () => {
    const { engine } = setup()
    for (let i = 0; i < 3; i++) engine.submit(aJob())
    expect(engine.listJobs({ limit: 3 }).next_cursor).toBeNull()
  })

  it('filters by state, addon_id, job_type and creation time', () => {
    const { engine, clock } = setup()
    const a = engine.submit(aJob({ addon_id: 'a', job_type: 'x' })).job
    clock.advance(10 * SECOND)
    const b = engine.submit(aJob({ addon_id: 'b', job_type: 'y' })).job
    clock.advance(10 * SECOND)
    const c = engine.submit(aJob({ addon_id: 'a', job_type: 'y' })).job
    engine.cancel(c.id)
    const ids = (q: Parameters<typeof engine.listJobs>[0]) => engine.listJobs(q).jobs.map((j) => j.id)
    expect(ids({ state: 'QUEUED' })).toEqual([b.id, a.id])
    expect(ids({ state: 'CANCELED' })).toEqual([c.id])
    expect(ids({ addon_id: 'a' })).toEqual([c.id, a.id])
    expect(ids({ job_type: 'y' })).toEqual([c.id, b.id])
    expect(ids({ addon_id: 'a', job_type: 'y', state: 'CANCELED' })).toEqual([c.id])
    expect(ids({ created_after: T0 + 10 * SECOND })).toEqual([c.id, b.id])
    expect(ids({ created_before: T0 + 10 * SECOND })).toEqual([b.id, a.id])
  })

  it('filters by every state, whichever index serves it (LEASED and RUNNING through their leases)', () => {
    const { engine } = setup()
    const submitted = () => engine.submit(aJob()).job.id
    const byState: Partial<Record<JobState, string>> = {
      DONE: submitted(),
      FAILED: submitted(),
      LEASED: submitted(),
      RUNNING: submitted(),
      CLAIMED: submitted(),
      CANCELED: submitted(),
      QUEUED: submitted(),
    }
    engine.release({ lease_id: leaseOrFail(engine, 'w').lease.id, status: 'SUCCEEDED' })
    engine.release({ lease_id: leaseOrFail(engine, 'w').lease.id, status: 'FAILED' })
    leaseOrFail(engine, 'w')
    engine.heartbeat({ lease_id: leaseOrFail(engine, 'w').lease.id })
    engine.claim({ worker_id: 'w' })
    engine.cancel(byState.CANCELED!)
    for (const [state, id] of Object.entries(byState)) {
      expect(engine.listJobs({ state: state as JobState }).jobs.map((j) => j.id)).toEqual([id])
    }
  })

  it('dead_letter: true lists the jobs that ran out of attempts (FAILED and TIMEOUT alike), false the others; on an index', () => {
    const { engine, clock } = setup()
    const fail = (retryable: boolean) => {
      const { job, lease } = claimOrFail(engine, 'w')
      engine.fail({ job_id: job.id, attempt_id: lease.attempt_id, worker_id: 'w', lease_token: lease.token, error: { message: 'boom', retryable } })
      return job.id
    }
    engine.submit(aJob({ max_attempts: 1 }))
    const deadFailed = fail(true)
    engine.submit(aJob({ max_attempts: 3 }))
    const finalFailed = fail(false)
    const timedOut = engine.submit(aJob({ max_attempts: 1 })).job.id
    claimOrFail(engine, 'w')
    clock.advance(60 * SECOND)
    engine.reap()
    const queued = engine.submit(aJob()).job.id
    const ids = (q: Parameters<typeof engine.listJobs>[0]) => engine.listJobs(q).jobs.map((j) => j.id)
    expect(engine.getJob(timedOut)).toMatchObject({ state: 'TIMEOUT', dead_letter: true })
    expect(ids({ dead_letter: true })).toEqual([timedOut, deadFailed])
    expect(ids({ dead_letter: true, state: 'FAILED' })).toEqual([deadFailed])
    expect(ids({ dead_letter: false, state: 'FAILED' })).toEqual([finalFailed])
    expect(ids({ dead_letter: false })).toEqual([queued, finalFailed])
    expect(ids({ dead_letter: true, state: 'QUEUED' })).toEqual([])
    // Retried, a job is no longer dead-lettered.
    engine.retry(deadFailed)
    expect(ids({ dead_letter: true })).toEqual([timedOut])
    const { sql, params } = jobListQuery(engineContext(engine), { dead_letter: true }, 51)
    const plan = database(engine).prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params).map((row) => (row as { detail: string }).detail).join(' | ')
    expect(plan).toMatch(/jobs_state_seq/)
    expect(plan).not.toMatch(/^SCAN jobs$|SCAN jobs \|/)
  })

  it('a list asked without payloads (payload: false) reads no payload, on every path: a state, a walk, QUEUED jobs by their keys', () => {
    const { engine } = setup()
    const id = engine.submit(aJob({ payload: { big: 'x'.repeat(1000) } })).job.id
    const ctx = engineContext(engine)
    for (const query of [{}, { state: 'FAILED' as const }, { job_type: 'test' }, { search: 'tes' }]) {
      expect(jobListQuery(ctx, { ...query, payload: false }, 51).sql, JSON.stringify(query)).not.toMatch(/"payload"/)
      expect(jobListQuery(ctx, query, 51).sql, JSON.stringify(query)).toMatch(/"payload"/)
    }
    expect(jobListQuery(ctx, { state: 'QUEUED', payload: false }, 51, { from: 1 }).sql).not.toMatch(/"payload"/)
    for (const query of [{}, { state: 'QUEUED' as const }, { job_type: 'test' }]) {
      expect(engine.listJobs({ ...query, payload: false }).jobs.map((job) => [job.id, job.payload]), JSON.stringify(query)).toEqual([[id, undefined]])
      expect(engine.listJobs(query).jobs.map((job) => [job.id, job.payload]), JSON.stringify(query)).toEqual([[id, { big: 'x'.repeat(1000) }]])
    }
  })

  it('a filter by any state but DONE reads an index or jobs by their keys from memory, never the whole jobs table', () => {
    const { engine } = setup()
    const plan = (state: JobState, window?: { from: number } | { seqs: number[] }) => {
      const { sql, params } = jobListQuery(engineContext(engine), { state }, 51, window ?? (state === 'QUEUED' ? { seqs: [1, 2] } : undefined))
      return database(engine)
        .prepare(`EXPLAIN QUERY PLAN ${sql}`)
        .all(...params)
        .map((row) => (row as { detail: string }).detail)
        .join(' | ')
    }
    for (const state of JOB_STATES.filter((s) => s !== 'DONE')) {
      const expected =
        state === 'LEASED' || state === 'RUNNING' || state === 'QUEUED' ? /SEARCH jobs USING INTEGER PRIMARY KEY \(rowid=\?\)/ : /jobs_state_seq/
      expect(plan(state), state).toMatch(expected)
      expect(plan(state), state).not.toMatch(/^SCAN jobs$|SCAN jobs \|/)
    }
    // QUEUED looks among the newest jobs first, by the table's key.
    expect(plan('QUEUED', { from: 1 })).toBe('SEARCH jobs USING INTEGER PRIMARY KEY (rowid>?)')
  })

  it('QUEUED jobs are listed newest first, among the newest jobs and behind many finished ones alike', () => {
    const { engine } = setup()
    const early = Array.from({ length: 5 }, () => engine.submit(aJob({ queue: 'slow', priority: 'LOW' })).job.id)
    // More finished jobs than the first look covers, between the early queued jobs and the late ones.
    const finished: string[] = []
    while (finished.length < QUEUED_WINDOW + 10) finished.push(...engine.submitMany(Array.from({ length: 1000 }, () => aJob())).map((item) => (item.ok ? item.value.job.id : '')))
    for (const id of finished) engine.cancel(id)
    const late = Array.from({ length: 4 }, () => engine.submit(aJob({ queue: 'fast' })).job.id)
    const expected = [...early, ...late].reverse()
    for (const limit of [2, 3, 9, 50]) {
      const seen: string[] = []
      let cursor: string | undefined
      for (;;) {
        const page = engine.listJobs({ state: 'QUEUED', limit, cursor })
        seen.push(...page.jobs.map((j) => j.id))
        if (page.next_cursor === null) break
        cursor = page.next_cursor
      }
      expect(seen, `limit ${limit}`).toEqual(expected)
    }
    expect(engine.listJobs({ state: 'QUEUED', job_type: 'nothing' }).jobs).toEqual([])
    expect(engine.listJobs({ state: 'CANCELED', limit: 1 }).jobs.map((j) => j.id)).toEqual([finished.at(-1)])
  })

  it('limit must be 1 to 500', () => {
    const { engine } = setup()
    engine.submit(aJob())
    expect(engine.listJobs({ limit: 500 }).jobs).toHaveLength(1)
    for (const limit of [0, 501, 2.5]) {
      const error = expectEngineError(() => engine.listJobs({ limit }), 400, 'invalid_request')
      expect(error.detail).toContain('limit')
    }
  })

  it('an unknown state or a cursor the server never gave out is 400 invalid_request', () => {
    const { engine } = setup()
    expectEngineError(() => engine.listJobs({ state: 'SLEEPING' as never }), 400, 'invalid_request')
    expectEngineError(() => engine.listJobs({ cursor: 'garbage' }), 400, 'invalid_request')
    expectEngineError(() => engine.listJobs({ cursor: Buffer.from('seq:abc').toString('base64url') }), 400, 'invalid_request')
  })
})
