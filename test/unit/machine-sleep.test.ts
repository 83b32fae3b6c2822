import { describe, expect, it } from 'vitest'
import { aJob, setup, T0 } from '../helpers/engine'
import { HOUR, ManualClock, MINUTE, SECOND, SleepWatch, SLEEP_AT_LEAST_MS } from '../../src-main/engine/rules/clock'
import { FILE_IDLE_MS } from '../../src-main/engine/verbs/files'
import { expectEngineError, leaseOrFail } from './support'

describe('a sleep of the machine', () => {
  it('is seen when the wall clock runs ahead of the awake clock by a second or more, and counted until made good', () => {
    const clock = new ManualClock(T0)
    const watch = new SleepWatch(clock)
    clock.advance(10 * MINUTE)
    expect(watch.look()).toBe(0)
    clock.sleep(SLEEP_AT_LEAST_MS - 1)
    expect(watch.look()).toBe(0)
    clock.sleep(HOUR)
    expect(watch.look()).toBe(HOUR)
    clock.advance(SECOND)
    expect(watch.look()).toBe(HOUR) // not made good yet: still owed
    watch.madeGood()
    expect(watch.look()).toBe(0)
  })

  it('is not read from a clock set back, from time set ahead as it passes, or from a clock with no awake clock', () => {
    const clock = new ManualClock(T0)
    const watch = new SleepWatch(clock)
    clock.set(T0 - 2 * HOUR)
    expect(watch.look()).toBe(0)
    clock.set(T0 + HOUR)
    expect(watch.look()).toBe(0)
    let wall = T0
    const noAwake = new SleepWatch({ now: () => wall })
    wall += HOUR
    expect(noAwake.look()).toBe(0)
  })

  it("takes no running job from its worker: a heartbeat after the wake keeps the lease, which lasts its TTL and grace from the wake", () => {
    const { engine, clock } = setup()
    const { job } = engine.submit(aJob())
    const { lease } = leaseOrFail(engine, 'w', 10) // due at T0 + 15 s
    clock.advance(5 * SECOND)
    clock.sleep(HOUR)
    const woke = clock.now()
    expect(engine.reap()).toMatchObject({ leases: 0 })
    expect(engine.getLease(lease.id)).toMatchObject({ state: 'ACTIVE', expires_at: woke + 15 * SECOND, last_heartbeat_at: T0 })
    expect(engine.heartbeat({ lease_id: lease.id, worker_id: 'w' }).job.state).toBe('RUNNING')
    expect(engine.attempts(job.id)).toHaveLength(1)
  })

  it('makes good the sleep before any call judges a lease: the first heartbeat after the wake, ahead of the reaper, finds its lease ACTIVE', async () => {
    const { engine, clock } = setup()
    const { lease } = (engine.submit(aJob()), leaseOrFail(engine, 'w', 10))
    clock.sleep(HOUR)
    const beat = await engine.run(() => engine.heartbeat({ lease_id: lease.id, worker_id: 'w' }))
    expect(beat.lease).toMatchObject({ state: 'ACTIVE', expires_at: clock.now() + 15 * SECOND })
  })

  it('without the sleep, the same hour passed awake expires the lease: silence while awake still counts', async () => {
    const { engine, clock } = setup()
    const { lease } = (engine.submit(aJob()), leaseOrFail(engine, 'w', 10))
    clock.advance(HOUR)
    await expect(engine.run(() => engine.heartbeat({ lease_id: lease.id, worker_id: 'w' }))).rejects.toMatchObject({ code: 'lease_expired' })
  })

  it('lets a worker that stays silent after the wake lose its lease one TTL and grace after the wake', () => {
    const { engine, clock } = setup()
    const { lease } = (engine.submit(aJob()), leaseOrFail(engine, 'w', 10))
    clock.sleep(HOUR)
    engine.reap()
    clock.advance(15 * SECOND - 1)
    expect(engine.reap()).toMatchObject({ leases: 0 })
    clock.advance(1)
    expect(engine.reap()).toMatchObject({ leases: 1 })
    expect(engine.getLease(lease.id)).toMatchObject({ state: 'EXPIRED', release_status: 'TIMEOUT' })
  })

  it('keeps a queue API claim for its claim TTL from the wake, and a held file lease from going idle for 30 s from the wake', () => {
    const { engine, clock } = setup()
    engine.submit(aJob())
    const [claimed] = engine.claim({ worker_id: 'c' })
    expect(engine.acquireFile({ file: '/f/a', owner_id: 'editor' })).toMatchObject({ granted: true })
    clock.sleep(HOUR)
    const woke = clock.now()
    expect(engine.reap()).toEqual({ leases: 0, claims: 0, idleFiles: 0 })
    expect(engine.getJob(claimed!.id)).toMatchObject({ state: 'CLAIMED', claim_expires_at: woke + engine.config.claimTtlS * SECOND })
    expect(engine.acquireFile({ file: '/f/a', owner_id: 'other' })).toMatchObject({ granted: false, code: 'file_lease_held' })
    clock.advance(FILE_IDLE_MS)
    expect(engine.reap()).toMatchObject({ idleFiles: 1 })
  })

  it('tells its listeners how long the machine slept and what it renewed; a wall clock ahead by less than a second renews nothing', () => {
    const { engine, clock } = setup()
    engine.submit(aJob())
    engine.submit(aJob())
    engine.submit(aJob())
    leaseOrFail(engine, 'a', 600)
    const { lease } = leaseOrFail(engine, 'b', 10)
    engine.claim({ worker_id: 'c' })
    engine.acquireFile({ file: '/f/a', owner_id: 'editor' })
    const heard: unknown[] = []
    engine.onSleep((sleptMs, renewed) => heard.push({ sleptMs, renewed }))
    clock.sleep(SLEEP_AT_LEAST_MS - 1)
    engine.reap()
    expect(engine.getLease(lease.id).expires_at).toBe(T0 + 15 * SECOND)
    clock.sleep(2 * MINUTE)
    engine.reap()
    expect(heard).toEqual([{ sleptMs: 2 * MINUTE, renewed: { leases: 2, claims: 1, files: 1 } }])
    expectEngineError(() => engine.heartbeat({ lease_id: lease.id, worker_id: 'other' }), 403, 'worker_mismatch')
  })
})
