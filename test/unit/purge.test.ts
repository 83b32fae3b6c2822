import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import type { Engine } from '../../src-main/engine'
import { SECOND } from '../../src-main/engine/rules/clock'
import { FILE_RETRY_MS } from '../../src-main/engine/verbs/files'
import { aJob, setup } from '../helpers/engine'
import { claimOrFail, expectEngineError, leaseOrFail, openFileEngine, runBulk, tempDir } from './support'
import { idKey } from '../../src-main/engine/store/ids'
// White-box in one case: a purge refuses to run inside a transaction the caller opened.
import { engineContext } from '../../src-main/engine/internals'
import { database, sql } from '../helpers/database'

/** Every row a job owns, by table. */
function rowsOf(engine: Engine, jobId: string) {
  const count = (query: string, ...params: unknown[]) => sql(engine).one<{ n: number }>(query, ...params)!.n
  return {
    jobs: count('SELECT COUNT(*) AS n FROM jobs WHERE id = ?', jobId),
    leases: count('SELECT COUNT(*) AS n FROM leases WHERE job_id = ?', jobId),
    events: count('SELECT COUNT(*) AS n FROM events WHERE job_id = ?', jobId),
  }
}

const NONE = { jobs: 0, leases: 0, events: 0 }

const purgeAll = (engine: Engine, request: Parameters<Engine['planBulk']>[1] = { filter: {}, all: true }) => {
  const { matched, changed } = runBulk(engine, 'purge', request)
  return { matched, changed }
}

describe('purging finished jobs', () => {
  it('deletes a finished job with its leases (and their attempts) and events, also after requeues and a retry', () => {
    const { engine, clock } = setup()
    const { job } = engine.submit(aJob({ max_attempts: 2 }))
    const neighbour = engine.submit(aJob({ priority: 'LOW' })).job.id
    for (let attempt = 0; attempt < 2; attempt++) {
      clock.advance(60 * SECOND)
      const { lease } = claimOrFail(engine, 'w')
      engine.fail({ job_id: job.id, attempt_id: lease.attempt_id, worker_id: 'w', lease_token: lease.token, error: { retryable: true } })
    }
    engine.retry(job.id)
    engine.cancel(job.id)
    const before = rowsOf(engine, job.id)
    expect(before).toMatchObject({ jobs: 1, leases: 2 })
    expect(engine.attempts(job.id)).toHaveLength(2)
    const other = rowsOf(engine, neighbour)
    expect(engine.deleteFinishedJobs([job.id])).toHaveLength(1)
    expect(rowsOf(engine, job.id)).toEqual(NONE)
    expect(rowsOf(engine, neighbour)).toEqual(other)
    expect(database(engine).pragma('foreign_key_check')).toEqual([])
    expect(database(engine).pragma('foreign_keys', { simple: true })).toBe(1)
  })

  it('never touches a job that has not finished, whatever it is asked', () => {
    const { engine } = setup()
    // Jobs are taken in submit order: the first is claimed (002), the second leased and released, the third runs.
    const [claimed, finished, running, queued] = [1, 2, 3, 4].map(() => engine.submit(aJob()).job.id)
    engine.claim({ worker_id: 'c' }, 1)
    const lease = leaseOrFail(engine, 'w')
    engine.release({ lease_id: lease.lease.id, status: 'SUCCEEDED' })
    claimOrFail(engine, 'w')
    expect([claimed, finished, running, queued].map((id) => engine.getJob(id!).state)).toEqual(['CLAIMED', 'DONE', 'RUNNING', 'QUEUED'])
    const unfinished = [claimed!, running!, queued!]
    const untouched = unfinished.map((id) => rowsOf(engine, id))
    expect(engine.deleteFinishedJobs([...unfinished, 'no-such-job'])).toHaveLength(0)
    expect(unfinished.map((id) => rowsOf(engine, id))).toEqual(untouched)
    expect(purgeAll(engine)).toEqual({ matched: 1, changed: 1 })
    expect(rowsOf(engine, finished!)).toEqual(NONE)
    expect(unfinished.map((id) => rowsOf(engine, id))).toEqual(untouched)
  })

  it('purges by filter, counting first on a dry run; an empty filter is refused unless all: true', () => {
    const { engine } = setup()
    const canceled = ['a', 'a', 'b'].map((queue) => engine.submit(aJob({ queue })).job.id)
    for (const id of canceled) engine.cancel(id)
    expectEngineError(() => engine.planBulk('purge', { filter: {} }), 400, 'invalid_request')
    expect(purgeAll(engine, { filter: { queue: 'a' }, dry_run: true })).toEqual({ matched: 2, changed: 0 })
    expect(canceled.map((id) => rowsOf(engine, id).jobs)).toEqual([1, 1, 1])
    expect(purgeAll(engine, { filter: { queue: 'a', states: ['CANCELED'] } })).toEqual({ matched: 2, changed: 2 })
    expect(canceled.map((id) => rowsOf(engine, id).jobs)).toEqual([0, 0, 1])
  })

  it('also deletes the released file leases held under the job and its resolved blockers; an active file lease of a live job stays', () => {
    const { engine, clock } = setup()
    const file = '/repo/shared.ts'
    engine.submit(aJob())
    const held = claimOrFail(engine, 'w1')
    engine.submit(aJob())
    const halted = claimOrFail(engine, 'w2')
    expect(engine.acquireFile({ file, owner_id: 'w1', lease_id: held.lease.id })).toMatchObject({ granted: true })
    expect(engine.acquireFile({ file, owner_id: 'w2', lease_id: halted.lease.id })).toMatchObject({ code: 'file_lease_held' })
    for (let waited = 0; waited < FILE_RETRY_MS; waited += 10 * SECOND) {
      clock.advance(10 * SECOND)
      engine.heartbeat({ lease_id: held.lease.id })
      engine.heartbeat({ lease_id: halted.lease.id })
      engine.heartbeatFile({ file, owner_id: 'w1' })
    }
    expect(engine.acquireFile({ file, owner_id: 'w2', lease_id: halted.lease.id })).toMatchObject({ code: 'blocked' })
    engine.cancel(halted.job.id) // its blocker is resolved with it
    const count = (query: string, id: string) => sql(engine).one<{ n: number }>(query, id)!.n
    expect(count('SELECT COUNT(*) AS n FROM blockers WHERE requester_job_id = ?', halted.job.id)).toBe(1)
    expect(engine.deleteFinishedJobs([halted.job.id, held.job.id])).toHaveLength(1) // the holder still runs
    expect(count('SELECT COUNT(*) AS n FROM blockers WHERE requester_job_id = ?', halted.job.id)).toBe(0)
    expect(count("SELECT COUNT(*) AS n FROM file_leases WHERE lease_id = ? AND state = 'ACTIVE'", held.lease.id)).toBe(1)
    engine.release({ lease_id: held.lease.id, status: 'SUCCEEDED' })
    expect(count('SELECT COUNT(*) AS n FROM file_leases WHERE lease_id = ?', held.lease.id)).toBe(1) // released, kept while its job is
    expect(engine.deleteFinishedJobs([held.job.id])).toHaveLength(1)
    expect(count('SELECT COUNT(*) AS n FROM file_leases WHERE lease_id = ?', held.lease.id)).toBe(0)
    expect(database(engine).pragma('foreign_key_check')).toEqual([])
  })

  it('runs as a transaction of its own: refused inside another', () => {
    const { engine } = setup()
    const { job } = engine.submit(aJob())
    engine.cancel(job.id)
    expect(() => engineContext(engine).transact(() => engine.deleteFinishedJobs([job.id]))).toThrow('cannot run inside another transaction')
    expect(rowsOf(engine, job.id).jobs).toBe(1)
  })

  it('no job key, fence, stream message id or event id is handed out twice after a purge and a restart', () => {
    const { dir, cleanup } = tempDir()
    try {
      const path = join(dir, 'leasehold.db')
      const first = openFileEngine(path)
      const other = first.engine.submit(aJob()).job
      const { job } = first.engine.submit(aJob({ priority: 'HIGH' })) // the newest job, leased first
      const { lease } = leaseOrFail(first.engine, 'w')
      expect(lease.job_id).toBe(job.id)
      first.engine.release({ lease_id: lease.id, status: 'SUCCEEDED' })
      // The job holds the newest event (its id is where a client resumes the stream), and goes all the same.
      const newestEvent = sql(first.engine).one<{ id: number }>('SELECT MAX(id) AS id FROM events')!.id
      expect(first.engine.deleteFinishedJobs([job.id])).toHaveLength(1)
      expect(sql(first.engine).one<{ id: number }>('SELECT MAX(id) AS id FROM events')!.id).toBeLessThan(newestEvent)
      first.engine.cancel(other.id, null)
      expect(first.engine.jobEvents(other.id).at(-1)!.id).toBeGreaterThan(newestEvent)
      expect(first.engine.deleteFinishedJobs([other.id])).toHaveLength(1)
      first.sqlite.close()

      const second = openFileEngine(path)
      const next = second.engine.submit(aJob()).job
      expect(idKey(next.id)).toBeGreaterThan(idKey(job.id)!)
      expect(next.stream_message_id).toBeGreaterThan(job.stream_message_id!)
      expect(leaseOrFail(second.engine, 'w').lease.fence).toBeGreaterThan(lease.fence)
      expect(sql(second.engine).one<{ id: number }>('SELECT MIN(id) AS id FROM events WHERE job_id = ?', next.id)!.id).toBeGreaterThan(newestEvent)
      second.sqlite.close()
    } finally {
      cleanup()
    }
  })
})
