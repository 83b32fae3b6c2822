import { describe, expect, it } from 'vitest'
import { HEARD_AT, MAX_BATCH_ITEMS } from '../../src-main/engine'
import { SECOND } from '../../src-main/engine/rules/clock'
import { aJob, setup } from '../helpers/engine'
import { expectEngineError } from './support'
import { sql } from '../helpers/database'

describe('batch verbs', () => {
  it('submitMany answers each job as a single submit would: a known key is a duplicate, an invalid job is refused alone', () => {
    const { engine } = setup()
    const known = engine.submit(aJob({ idempotency_key: 'known' })).job
    const results = engine.submitMany([aJob({ job_type: 'a' }), aJob({ idempotency_key: 'known' }), aJob({ cost_units: 0 }), aJob({ job_type: 'b' })])
    expect(results.map((r) => r.ok)).toEqual([true, true, false, true])
    expect(results[1]).toMatchObject({ ok: true, value: { duplicate: true, job: { id: known.id } } })
    expect(results[2]).toMatchObject({ ok: false, error: { code: 'invalid_request' } })
    expect(engine.listJobs({ limit: 10 }).jobs.map((job) => job.job_type).sort()).toEqual(['a', 'b', 'test'])
    // Undone and run again one by one (settleEach), the others were written once: one event each.
    const submitted = sql(engine).all<{ n: number }>("SELECT COUNT(*) AS n FROM events WHERE event_type = 'JOB_SUBMITTED'")[0]!.n
    expect(submitted).toBe(3)
  })

  it(`a batch carries at most ${MAX_BATCH_ITEMS} items`, () => {
    const { engine } = setup()
    expectEngineError(() => engine.submitMany(Array.from({ length: MAX_BATCH_ITEMS + 1 }, () => aJob())), 400, 'invalid_request')
    expect(engine.listJobs({ limit: 1 }).jobs).toHaveLength(0)
  })

  it('claimBatch takes the head jobs in scheduling order and stops at the first that does not fit: no backfilling past it', () => {
    const { engine } = setup({ total_units: 10 })
    const first = engine.submit(aJob({ cost_units: 4 })).job
    const second = engine.submit(aJob({ cost_units: 4 })).job
    engine.submit(aJob({ cost_units: 4 })) // does not fit in the 2 units left
    engine.submit(aJob({ cost_units: 1 })) // would fit, but is behind the head
    const { granted, denial } = engine.claimBatch({ worker_id: 'w1' }, 10)
    expect(granted.map((g) => g.job_id)).toEqual([first.id, second.id])
    expect(denial).toMatchObject({ granted: false, reason: expect.stringContaining('apacity') })
    expect(engine.getCapacity()).toMatchObject({ leased: 8, available: 2 })
  })

  it('an exchange reports first and then claims: the capacity a completion frees goes to the next job at once', () => {
    const { engine } = setup({ total_units: 1 })
    const a = engine.submit(aJob()).job
    const b = engine.submit(aJob()).job
    const [held] = engine.claimBatch({ worker_id: 'w1' }, 5).granted
    expect(held!.job_id).toBe(a.id)
    const answer = engine.exchange({
      worker_id: 'w1',
      complete: [{ job_id: a.id, attempt_id: held!.attempt_id, lease_token: held!.lease_token, result: { ok: 1 } }],
      claim: { filter: {}, max_jobs: 5 },
    })
    expect(answer.completed).toMatchObject([{ ok: true, value: { ack: true } }])
    expect(answer.claimed.granted.map((g) => g.job_id)).toEqual([b.id])
    expect(engine.getJob(a.id).state).toBe('DONE')
    expect(engine.getJob(b.id).state).toBe('RUNNING')
  })

  it('one refused report in an exchange (a lost lease) is answered with its code and the others still take effect', () => {
    const { engine, clock } = setup({ config: { leaseTtlS: 10, heartbeatGraceS: 0 } })
    const [x, y] = [engine.submit(aJob()).job, engine.submit(aJob()).job]
    const leases = engine.claimBatch({ worker_id: 'w1' }, 2).granted
    clock.advance(5 * SECOND)
    engine.heartbeatByToken({ job_id: y.id, worker_id: 'w1', lease_token: leases[1]!.lease_token }) // y stays alive
    clock.advance(6 * SECOND) // x's lease is past its expiry
    const answer = engine.exchange({
      worker_id: 'w1',
      complete: [
        { job_id: x.id, attempt_id: leases[0]!.attempt_id, lease_token: leases[0]!.lease_token },
        { job_id: y.id, attempt_id: leases[1]!.attempt_id, lease_token: leases[1]!.lease_token },
      ],
    })
    expect(answer.completed[0]).toMatchObject({ ok: false, error: { code: 'lease_expired', extra: { ack: true } } })
    expect(answer.completed[1]).toMatchObject({ ok: true })
    // The refused item's expiry still happened, as a single call would have made it happen.
    expect(engine.getJob(x.id).state).toBe('QUEUED')
    expect(engine.getJob(y.id).state).toBe('DONE')
  })

  it('heartbeats in an exchange extend each lease and say whether a cancel was requested', () => {
    const { engine, clock } = setup()
    const job = engine.submit(aJob()).job
    const [held] = engine.claimBatch({ worker_id: 'w1' }, 1).granted
    const expiresAt = engine.getLease(held!.lease_id).expires_at
    clock.advance(3 * SECOND)
    engine.cancel(job.id)
    clock.advance(3 * SECOND) // the heartbeat extends the lease, but only to the TTL and grace from the cancel
    const answer = engine.exchange({ worker_id: 'w1', heartbeat: [{ job_id: job.id, lease_token: held!.lease_token, progress: 0.5 }] })
    expect(answer.heartbeats).toMatchObject([{ ok: true, value: { lease_id: held!.lease_id, expires_at: expiresAt + 3 * SECOND, cancel_requested: true } }])
    expect(engine.getJob(job.id)).toMatchObject({ cancel_requested: true, progress: 0.5 })
  })

  it('reports heard before their lease’s expiry and read after it are in time: a heartbeat lasts its TTL and grace from the moment heard (never moving a lease back), a completion ends its attempt; one heard after the expiry does not save its lease', () => {
    const { engine, clock } = setup()
    const [beaten, completed, late] = [0, 1, 2].map(() => engine.submit(aJob()).job)
    const granted = engine.claimBatch({ worker_id: 'w1' }, 3).granted
    const [held, done, lost] = granted as [(typeof granted)[number], (typeof granted)[number], (typeof granted)[number]]
    const grantedAt = clock.now()
    const lastsMs = engine.getLease(held.lease_id).expires_at - grantedAt
    clock.advance(lastsMs + 60 * SECOND) // the reports waited a minute past every lease's expiry
    const beat = (heardAt: number) => engine.exchange({ worker_id: 'w1', heartbeat: [{ job_id: beaten!.id, lease_token: held.lease_token }], [HEARD_AT]: heardAt })
    expect(beat(grantedAt + lastsMs - SECOND).heartbeats).toMatchObject([{ ok: true }])
    expect(engine.getLease(held.lease_id)).toMatchObject({ state: 'ACTIVE', last_heartbeat_at: grantedAt + lastsMs - SECOND, expires_at: grantedAt + 2 * lastsMs - SECOND })
    // An earlier heartbeat read after a later one leaves the lease where the later one put it.
    expect(beat(grantedAt + SECOND).heartbeats).toMatchObject([{ ok: true }])
    expect(engine.getLease(held.lease_id)).toMatchObject({ last_heartbeat_at: grantedAt + lastsMs - SECOND, expires_at: grantedAt + 2 * lastsMs - SECOND })
    const completion = engine.exchange({ worker_id: 'w1', complete: [{ job_id: completed!.id, attempt_id: done.attempt_id, lease_token: done.lease_token }], [HEARD_AT]: grantedAt + SECOND })
    expect(completion.completed).toMatchObject([{ ok: true }])
    expect(engine.getJob(completed!.id)).toMatchObject({ state: 'DONE', attempts: 1 })
    const tooLate = engine.exchange({ worker_id: 'w1', heartbeat: [{ job_id: late!.id, lease_token: lost.lease_token }], [HEARD_AT]: grantedAt + lastsMs })
    expect(tooLate.heartbeats).toMatchObject([{ ok: false, error: { code: 'lease_expired' } }])
    expect(engine.getLease(lost.lease_id).state).toBe('EXPIRED')
  })

  it('a worker cannot report on another worker’s lease through an exchange', () => {
    const { engine } = setup()
    const job = engine.submit(aJob()).job
    const [held] = engine.claimBatch({ worker_id: 'w1' }, 1).granted
    const answer = engine.exchange({ worker_id: 'w2', complete: [{ job_id: job.id, attempt_id: held!.attempt_id, lease_token: held!.lease_token }] })
    expect(answer.completed).toMatchObject([{ ok: false, error: { code: 'worker_mismatch' } }])
    expect(engine.getJob(job.id).state).toBe('RUNNING')
  })

  it('a completion may carry the job’s last progress and note, which the job keeps as a heartbeat would have set them', () => {
    const { engine } = setup()
    const job = engine.submit(aJob()).job
    const [held] = engine.claimBatch({ worker_id: 'w1' }, 1).granted
    const ref = { job_id: job.id, attempt_id: held!.attempt_id, lease_token: held!.lease_token }
    const answer = engine.exchange({ worker_id: 'w1', complete: [{ ...ref, progress: 0.5, note: 'half way, then done' }] })
    expect(answer.completed).toMatchObject([{ ok: true }])
    expect(engine.getJob(job.id)).toMatchObject({ state: 'DONE', progress: 0.5, note: 'half way, then done' })
    const other = engine.submit(aJob()).job
    const [next] = engine.claimBatch({ worker_id: 'w1' }, 1).granted
    const bad = engine.exchange({ worker_id: 'w1', complete: [{ job_id: other.id, attempt_id: next!.attempt_id, lease_token: next!.lease_token, progress: 2 }] })
    expect(bad.completed).toMatchObject([{ ok: false, error: { code: 'invalid_request' } }])
    expect(engine.getJob(other.id).state).toBe('RUNNING')
  })
})
