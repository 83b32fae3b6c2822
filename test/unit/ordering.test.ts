import { describe, expect, it } from 'vitest'
import { aJob, setup } from '../helpers/engine'
import { SECOND } from '../../src-main/engine/rules/clock'
import { claimOrFail, leaseOrFail } from './support'

describe('order of picking', () => {
  it('priority order URGENT>HIGH>NORMAL>LOW then FIFO by eligible time', () => {
    const { engine, clock } = setup()
    const ids: Record<string, string> = {}
    for (const [name, priority] of [
      ['low1', 'LOW'],
      ['normal1', 'NORMAL'],
      ['high1', 'HIGH'],
      ['urgent1', 'URGENT'],
      ['normal2', 'NORMAL'],
      ['low2', 'LOW'],
      ['urgent2', 'URGENT'],
      ['high2', 'HIGH'],
    ] as const) {
      ids[name] = engine.submit(aJob({ priority })).job.id
      clock.advance(SECOND)
    }
    const order = [] as string[]
    for (let i = 0; i < 8; i++) order.push(leaseOrFail(engine, `w${i}`).job.id)
    const byId = Object.fromEntries(Object.entries(ids).map(([k, v]) => [v, k]))
    expect(order.map((id) => byId[id])).toEqual(['urgent1', 'urgent2', 'high1', 'high2', 'normal1', 'normal2', 'low1', 'low2'])
  })

  it('jobs submitted in the same millisecond are taken in submit order', () => {
    const { engine } = setup()
    const ids = Array.from({ length: 5 }, () => engine.submit(aJob()).job.id)
    expect(engine.claim({ worker_id: 'w' }, 5).map((j) => j.id)).toEqual(ids)
  })

  it('the queue API claim follows the same order as a lease request', () => {
    const { engine, clock } = setup()
    const low = engine.submit(aJob({ priority: 'LOW' })).job.id
    clock.advance(1)
    const high = engine.submit(aJob({ priority: 'HIGH' })).job.id
    expect(engine.claim({ worker_id: 'w' }, 2).map((j) => j.id)).toEqual([high, low])
  })

  it('next_retry_at holds a requeued job back from every claim until it passes', () => {
    const { engine, clock } = setup()
    const { job } = engine.submit(aJob())
    leaseOrFail(engine, 'w1')
    clock.advance(35 * SECOND)
    engine.reap()
    const requeued = engine.getJob(job.id)
    expect(requeued.state).toBe('QUEUED')
    expect(requeued.next_retry_at).toBe(clock.now() + 2 * SECOND)

    expect(engine.requestLease({ worker_id: 'w2' })).toMatchObject({ granted: false, reason: 'No queued job this worker can take now' })
    expect(engine.claimAndLease({ worker_id: 'w2' })).toMatchObject({ granted: false })
    expect(engine.claim({ worker_id: 'w2' })).toEqual([])

    clock.advance(2 * SECOND - 1)
    expect(engine.claim({ worker_id: 'w2' })).toEqual([])
    clock.advance(1)
    expect(engine.claim({ worker_id: 'w2' }).map((j) => j.id)).toEqual([job.id])
  })

  it('a requeued job queues behind jobs that became eligible before its retry time (FIFO by eligible time)', () => {
    const { engine, clock } = setup()
    const first = engine.submit(aJob()).job.id
    leaseOrFail(engine, 'w1')
    clock.advance(35 * SECOND)
    engine.reap() // `first` is eligible again at now + 2 s
    const second = engine.submit(aJob()).job.id // eligible now
    clock.advance(10 * SECOND)
    const third = engine.submit(aJob()).job.id // eligible after first's retry time
    expect(engine.claim({ worker_id: 'w' }, 3).map((j) => j.id)).toEqual([second, first, third])
  })

  it('a requeued higher-priority job still goes before lower-priority jobs once eligible', () => {
    const { engine, clock } = setup()
    const urgent = engine.submit(aJob({ priority: 'URGENT' })).job.id
    leaseOrFail(engine, 'w1')
    clock.advance(35 * SECOND)
    engine.reap()
    engine.submit(aJob({ priority: 'LOW' }))
    clock.advance(2 * SECOND)
    expect(leaseOrFail(engine, 'w2').job.id).toBe(urgent)
  })
})

describe('no backfilling past the head', () => {
  it('a head job that does not fit denies the request and keeps its place (no backfilling)', () => {
    const { engine, clock } = setup({ total_units: 10 })
    const blocker = engine.submit(aJob({ cost_units: 6 })).job
    leaseOrFail(engine, 'w0') // 6 of 10 leased
    const big = engine.submit(aJob({ cost_units: 5 })).job
    clock.advance(1)
    const small = engine.submit(aJob({ cost_units: 1 })).job

    for (const ask of [() => engine.requestLease({ worker_id: 'w1' }), () => engine.claimAndLease({ worker_id: 'w1' })]) {
      const decision = ask()
      expect(decision).toMatchObject({ granted: false, reason: 'Capacity exceeded: used=6, requested=5, capacity=10' })
    }
    expect(engine.getJob(small.id).state).toBe('QUEUED')
    expect(engine.getJob(big.id).state).toBe('QUEUED')
    expect(engine.getCapacity().leased).toBe(6)

    // Once capacity frees, the big job goes first.
    engine.release({ lease_id: engine.getJob(blocker.id).lease_id!, status: 'SUCCEEDED' })
    expect(leaseOrFail(engine, 'w1').job.id).toBe(big.id)
    expect(leaseOrFail(engine, 'w2').job.id).toBe(small.id)
  })

  it('a big URGENT head is not starved by a stream of small NORMAL jobs', () => {
    const { engine, clock } = setup({ total_units: 10 })
    engine.submit(aJob({ cost_units: 4 }))
    const held = leaseOrFail(engine, 'w0')
    const big = engine.submit(aJob({ cost_units: 10, priority: 'URGENT' })).job
    for (let i = 0; i < 5; i++) {
      engine.submit(aJob({ cost_units: 1 }))
      clock.advance(SECOND)
      expect(engine.requestLease({ worker_id: `w${i + 1}` }).granted).toBe(false)
    }
    engine.release({ lease_id: held.lease.id, status: 'SUCCEEDED' })
    expect(leaseOrFail(engine, 'w9').job.id).toBe(big.id)
  })

  it('with nothing queued the request is denied with "No jobs queued" and retry advice', () => {
    const { engine } = setup()
    expect(engine.requestLease({ worker_id: 'w' })).toEqual({ granted: false, reason: 'No jobs queued', retry_after_ms: 1500 })
  })

  it('with jobs queued that none may go to the worker (too large for its max_units), the denial says so, not that nothing is queued', () => {
    const { engine } = setup()
    engine.submit(aJob({ cost_units: 4 }))
    expect(engine.requestLease({ worker_id: 'w', max_units: 2 })).toEqual({ granted: false, reason: 'No queued job this worker can take now', retry_after_ms: 1500 })
    expect(engine.requestLease({ worker_id: 'w', max_units: 8 })).toMatchObject({ granted: true })
  })
})

describe('jobs a worker cannot take are skipped for it, not denied', () => {
  it('a job costing more than max_units is skipped and the next job is leased', () => {
    const { engine } = setup()
    const big = engine.submit(aJob({ cost_units: 8 })).job
    const small = engine.submit(aJob({ cost_units: 2 })).job
    expect(leaseOrFail(engine, { worker_id: 'w', max_units: 4 }).job.id).toBe(small.id)
    expect(engine.getJob(big.id).state).toBe('QUEUED')
    expect(engine.claim({ worker_id: 'w2', max_units: 7 })).toEqual([])
    expect(engine.claim({ worker_id: 'w2', max_units: 8 }).map((j) => j.id)).toEqual([big.id])
  })

  it('a job type the worker does not accept is skipped', () => {
    const { engine } = setup()
    engine.submit(aJob({ job_type: 'video' }))
    const audio = engine.submit(aJob({ job_type: 'audio' })).job
    expect(leaseOrFail(engine, { worker_id: 'w', accept_job_types: ['audio'] }).job.id).toBe(audio.id)
    expect(engine.requestLease({ worker_id: 'w2', accept_job_types: ['text'] })).toMatchObject({ granted: false, reason: 'No queued job this worker can take now' })
  })

  it('constraints.gpu_required is claimable only by a worker with gpu_available', () => {
    const { engine } = setup()
    const gpu = engine.submit(aJob({ constraints: { gpu_required: true } })).job
    const cpu = engine.submit(aJob({ constraints: { gpu_required: false } })).job
    expect(engine.claim({ worker_id: 'cpu-only' }).map((j) => j.id)).toEqual([cpu.id])
    expect(engine.claim({ worker_id: 'cpu-only', gpu_available: false })).toEqual([])
    expect(engine.claim({ worker_id: 'gpu', gpu_available: true }).map((j) => j.id)).toEqual([gpu.id])
  })

  it('constraint flags other than gpu_required are hints and restrict nobody', () => {
    const { engine } = setup()
    const job = engine.submit(aJob({ constraints: { ssd_required: true, network: true } })).job
    expect(leaseOrFail(engine, 'plain-worker').job.id).toBe(job.id)
  })

  it('addon_id in a claim restricts it to that add-on\'s jobs', () => {
    const { engine } = setup()
    engine.submit(aJob({ addon_id: 'a' }))
    const b = engine.submit(aJob({ addon_id: 'b' })).job
    engine.submit(aJob())
    expect(engine.claim({ worker_id: 'w', addon_id: 'b' }, 10).map((j) => j.id)).toEqual([b.id])
    expect(leaseOrFail(engine, { worker_id: 'w2', addon_id: 'a' }).job.addon_id).toBe('a')
  })

  it('unique job is skipped for a worker that already holds a lease', () => {
    const { engine } = setup()
    engine.submit(aJob())
    leaseOrFail(engine, 'w1') // w1 now holds a lease
    const unique = engine.submit(aJob({ unique: true })).job
    const plain = engine.submit(aJob()).job
    expect(leaseOrFail(engine, 'w1').job.id).toBe(plain.id)
    expect(engine.getJob(unique.id).state).toBe('QUEUED')
    expect(engine.requestLease({ worker_id: 'w1' })).toMatchObject({ granted: false, reason: 'No queued job this worker can take now' })
    expect(leaseOrFail(engine, 'w2').job.id).toBe(unique.id)
  })

  it('a worker whose leases have all ended may take a unique job again', () => {
    const { engine } = setup()
    engine.submit(aJob())
    const held = leaseOrFail(engine, 'w1')
    const unique = engine.submit(aJob({ unique: true })).job
    expect(engine.requestLease({ worker_id: 'w1' }).granted).toBe(false)
    engine.release({ lease_id: held.lease.id, status: 'SUCCEEDED' })
    expect(leaseOrFail(engine, 'w1').job.id).toBe(unique.id)
  })

  it('a skipped head does not block the worker: the job behind it fits and is leased', () => {
    const { engine } = setup({ total_units: 10 })
    engine.submit(aJob({ cost_units: 9, priority: 'URGENT' }))
    const next = engine.submit(aJob({ cost_units: 3 })).job
    expect(leaseOrFail(engine, { worker_id: 'small', max_units: 5 }).job.id).toBe(next.id)
  })

  it('a worker that names no queue takes every queue\'s jobs in one order: priority, then eligible time, then submit order', () => {
    const { engine, clock } = setup()
    const submitted: Record<string, string> = {}
    for (const [name, queue, priority] of [
      ['b-normal', 'b', 'NORMAL'],
      ['a-normal', 'a', 'NORMAL'],
      ['c-low', 'c', 'LOW'],
      ['c-high', 'c', 'HIGH'],
      ['a-high', 'a', 'HIGH'],
    ] as const) {
      submitted[name] = engine.submit(aJob({ queue, priority })).job.id
      if (name !== 'b-normal') clock.advance(SECOND) // b-normal and a-normal share a millisecond
    }
    const byId = Object.fromEntries(Object.entries(submitted).map(([name, id]) => [id, name]))
    const order = engine.claim({ worker_id: 'w' }, 5).map((job) => byId[job.id])
    expect(order).toEqual(['c-high', 'a-high', 'b-normal', 'a-normal', 'c-low'])
  })

  it('worker API streams are tried in the order given and only those streams', () => {
    const { engine, clock } = setup()
    const a = engine.submit(aJob({ queue: 'a', priority: 'URGENT' })).job
    clock.advance(1)
    const b = engine.submit(aJob({ queue: 'b', priority: 'LOW' })).job
    engine.submit(aJob({ queue: 'c', priority: 'URGENT' }))
    expect(claimOrFail(engine, { worker_id: 'w1', queues: ['b', 'a'] }).job.id).toBe(b.id)
    expect(claimOrFail(engine, { worker_id: 'w2', queues: ['b', 'a'] }).job.id).toBe(a.id)
    expect(engine.claimAndLease({ worker_id: 'w3', queues: ['b', 'a'] })).toMatchObject({ granted: false, reason: 'No jobs queued' })
  })
})
