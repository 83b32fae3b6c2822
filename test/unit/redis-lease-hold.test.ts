import { describe, expect, it } from 'vitest'
import { aJob, setup, T0 } from '../helpers/engine'
import { SECOND } from '../../src-main/engine/rules/clock'
import { RedisLeaseHold } from '../../src-main/redis/lease-hold'
import { leaseOrFail } from './support'
import { sql } from '../helpers/database'

/** A relay as the lease hold reads it: whether Redis answers, set by the test. */
const fakeRedis = (connected: boolean) => ({ connected })

describe('leases of remote workers over Redis while Redis is away', () => {
  it('the leases of spared workers do not expire, whatever their expires_at: neither by the reaper nor on the spot when a report names one; the others expire as ever', () => {
    const { engine, clock } = setup()
    engine.submit(aJob())
    engine.submit(aJob())
    const remote = leaseOrFail(engine, 'remote', 10) // due at T0 + 15 s
    const local = leaseOrFail(engine, 'local', 10).lease
    engine.spareLeases(() => new Set(['remote']))
    clock.advance(60 * SECOND)
    expect(engine.nextDueAt()).toBe(local.expires_at)
    expect(engine.reap()).toMatchObject({ leases: 1 })
    expect(engine.getLease(remote.lease.id).state).toBe('ACTIVE')
    expect(engine.getLease(local.id)).toMatchObject({ state: 'EXPIRED', release_status: 'TIMEOUT' })
    expect(engine.nextDueAt()).toBeNull()
    const report = { job_id: remote.job.id, attempt_id: remote.lease.attempt_id, worker_id: 'remote', lease_token: remote.lease.token }
    engine.complete({ ...report, result: { late: true } })
    expect(engine.getJob(remote.job.id)).toMatchObject({ state: 'DONE', attempts: 1 })
  })

  it('while Redis does not answer a remote worker keeps its lease; once it answers again the lease lasts its TTL and grace from then, and a worker that died meanwhile loses it after that', () => {
    const { engine, clock } = setup()
    const redis = fakeRedis(true)
    const hold = new RedisLeaseHold(engine, redis, () => {})
    const pass = () => {
      hold.check()
      return engine.reap()
    }
    hold.heard('remote')
    engine.submit(aJob())
    const { lease } = leaseOrFail(engine, 'remote', 10)
    redis.connected = false
    clock.advance(60 * SECOND)
    expect(pass()).toMatchObject({ leases: 0 })
    redis.connected = true
    // Before the reaper's next pass renews it, the lease is still spared: a report read as Redis comes back counts.
    expect(engine.reap()).toMatchObject({ leases: 0 })
    const back = clock.now()
    expect(pass()).toMatchObject({ leases: 0 })
    expect(engine.getLease(lease.id)).toMatchObject({ state: 'ACTIVE', expires_at: back + 15 * SECOND, last_heartbeat_at: T0 })
    clock.advance(15 * SECOND + 1)
    expect(pass()).toMatchObject({ leases: 1 })
    expect(engine.getLease(lease.id)).toMatchObject({ state: 'EXPIRED', release_status: 'TIMEOUT' })
  })

  it('a host that starts while Redis does not answer spares the leases of the remote workers the host before it heard from', () => {
    const { engine, clock } = setup()
    const before = new RedisLeaseHold(engine, fakeRedis(true), () => {})
    before.heard('remote')
    before.stop()
    engine.submit(aJob())
    const { lease } = leaseOrFail(engine, 'remote', 10)
    clock.advance(60 * SECOND)
    // The next host, on the same database, before Redis answers it once.
    const hold = new RedisLeaseHold(engine, fakeRedis(false), () => {})
    hold.check()
    expect(engine.reap()).toMatchObject({ leases: 0 })
    expect(engine.getLease(lease.id).state).toBe('ACTIVE')
  })

  it('a remote worker that holds no lease is forgotten when Redis comes back, and recorded again when heard from', () => {
    const { engine } = setup()
    new RedisLeaseHold(engine, fakeRedis(true), () => {}).heard('idle')
    expect(engine.redisWorkersHoldingLeases()).toEqual([])
    engine.recordRedisWorker('busy')
    engine.submit(aJob())
    leaseOrFail(engine, 'busy', 10)
    expect(engine.redisWorkersHoldingLeases()).toEqual(['busy'])
  })

  it('workers heard under ever new ids, with no outage between, do not grow the record for ever: those that hold no lease are forgotten as it doubles', () => {
    const { engine } = setup()
    const hold = new RedisLeaseHold(engine, fakeRedis(true), () => {})
    engine.submit(aJob())
    hold.heard('busy')
    leaseOrFail(engine, 'busy', 10)
    for (let i = 0; i < 1000; i++) hold.heard(`passing-${i}`)
    const recorded = sql(engine).one<{ value: string }>("SELECT value FROM settings WHERE key = 'redis_worker_ids'")
    expect(JSON.parse(recorded!.value).length).toBeLessThanOrEqual(128)
    expect(engine.redisWorkersHoldingLeases()).toEqual(['busy'])
  })
})
