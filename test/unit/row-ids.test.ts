/**
 * A job's or lease's id names its row's key (engine/store/ids.ts `keyedId`), so no index on ids is
 * written with each job and lease; the rows from before that (random UUIDs version 7) keep a
 * partial index that no new row enters (db/schema.ts UNKEYED_ID_CLAUSE). Either way a row is
 * found by exactly its own id, and nothing else finds it.
 *
 * White-box: one case empties the engine's kept rows (through engineContext) to read a row as a start would.
 */
import { describe, expect, it } from 'vitest'
import { UNKEYED_ID_CLAUSE } from '../../src-main/db/schema'
import { idKey, keyedId, newId } from '../../src-main/engine/store/ids'
import { engineContext } from '../../src-main/engine/internals'
import { aJob, setup } from '../helpers/engine'
import { expectEngineError, leaseOrFail } from './support'
import { database } from '../helpers/database'

describe('finding jobs and leases by their id', () => {
  it('a new job and lease have ids that name their keys, and no index on ids gets an entry for them', () => {
    const { engine } = setup()
    const job = engine.submit(aJob()).job
    const { lease } = leaseOrFail(engine, 'w')
    const db = database(engine)
    expect(idKey(job.id)).toBe(db.prepare('SELECT seq FROM jobs WHERE id = ?').pluck().get(job.id))
    expect(idKey(lease.id)).toBe(lease.fence)
    expect(db.prepare(`SELECT COUNT(*) FROM jobs WHERE ${UNKEYED_ID_CLAUSE}`).pluck().get()).toBe(0)
    expect(db.prepare(`SELECT COUNT(*) FROM leases WHERE ${UNKEYED_ID_CLAUSE}`).pluck().get()).toBe(0)
    expect(engine.getJob(job.id).id).toBe(job.id)
    expect(engine.getLease(lease.id).id).toBe(lease.id)
  })

  it("an id that names an existing row's key but is not its id finds nothing (404), nor does an unknown id", () => {
    const { engine } = setup()
    const job = engine.submit(aJob()).job
    const { lease } = leaseOrFail(engine, 'w')
    engine.release({ lease_id: lease.id, status: 'SUCCEEDED' }) // an ended lease is read from the table, not memory
    for (const id of [keyedId(idKey(job.id)!), keyedId(idKey(job.id)! + 1), newId(), 'not-an-id']) {
      expectEngineError(() => engine.getJob(id), 404, 'job_not_found')
    }
    for (const id of [keyedId(lease.fence), keyedId(lease.fence + 1), newId(), job.id]) {
      expectEngineError(() => engine.getLease(id), 404, 'lease_not_found')
    }
  })

  it('a job and a lease made before ids named their key are found by their id, and run on', () => {
    const { engine } = setup()
    const db = database(engine)
    const job = engine.submit(aJob()).job
    const older = newId()
    db.prepare('UPDATE jobs SET id = ? WHERE id = ?').run(older, job.id) // as migration 0013 found it
    db.prepare('UPDATE events SET job_id = ?, entity_id = ? WHERE job_id = ?').run(older, older, job.id)
    engineContext(engine).queuedRows.clear() // written behind the engine's back: as after a start, no row in memory
    expect(engine.getJob(older).id).toBe(older)
    const { lease } = leaseOrFail(engine, 'w')
    expect(lease.job_id).toBe(older)
    const olderLease = newId()
    engine.release({ lease_id: lease.id, status: 'FAILED' })
    db.prepare('UPDATE leases SET id = ? WHERE id = ?').run(olderLease, lease.id)
    db.prepare('UPDATE jobs SET lease_id = ? WHERE id = ?').run(olderLease, older)
    expect(engine.getLease(olderLease)).toMatchObject({ job_id: older, state: 'RELEASED' })
    expect(engine.attempts(older).map((attempt) => attempt.lease_id)).toEqual([olderLease])
    engine.retry(older)
    const again = leaseOrFail(engine, 'w').lease
    expect(engine.attempts(older).map((attempt) => attempt.lease_id)).toEqual([olderLease, again.id])
    expect(engine.listJobs({ state: 'LEASED' }).jobs.map((j) => j.id)).toEqual([older])
  })
})
