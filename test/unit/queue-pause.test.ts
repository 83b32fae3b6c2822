import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { Dispatch } from '../../src-main/dispatch/dispatch'
import { SECOND } from '../../src-main/engine/rules/clock'
import { aJob, setup } from '../helpers/engine'
import { claimOrFail, eventTypes, leaseOrFail, openFileEngine, tempDir } from './support'
// White-box in one case: a rolled-back pause must leave the engine's memory of paused queues as it was.
import { engineContext } from '../../src-main/engine/internals'
import { sql } from '../helpers/database'

let dispatch: Dispatch | undefined
afterEach(() => dispatch?.close())

const queueEvents = (engine: ReturnType<typeof setup>['engine']) =>
  sql(engine).all<{ event_type: string; entity_type: string; entity_id: string; data: string }>("SELECT * FROM events WHERE entity_type = 'QUEUE' ORDER BY id")

describe('pausing queues', () => {
  it('a paused queue hands out nothing through any API, while the other queues go on', () => {
    const { engine } = setup()
    const held = engine.submit(aJob({ queue: 'reports' })).job.id
    engine.pauseQueue('reports')
    // the pull API (request), 002 (claim), 003 (claim by stream, and batch), over every queue or naming it.
    expect(engine.requestLease({ worker_id: 'w' })).toMatchObject({ granted: false, reason: 'No queued job this worker can take now' })
    expect(engine.claim({ worker_id: 'w' })).toEqual([])
    expect(engine.claimAndLease({ worker_id: 'w', queues: ['reports'] })).toMatchObject({ granted: false })
    expect(engine.claimAndLease({ worker_id: 'w' })).toMatchObject({ granted: false })
    expect(engine.claimBatch({ worker_id: 'w', queues: ['reports', 'default'] }, 10).granted).toEqual([])
    const other = engine.submit(aJob({ queue: 'default' })).job.id
    expect(claimOrFail(engine, { worker_id: 'w' }).job.id).toBe(other)
    expect(engine.getJob(held).state).toBe('QUEUED')
    expect(engine.nextEligibleAt()).toBeNull()
  })

  it('submits to a paused queue are accepted and wait; resume releases them in their order', () => {
    const { engine, clock } = setup()
    engine.pauseQueue('reports')
    const ids = [1, 2, 3].map(() => {
      clock.advance(SECOND)
      return engine.submit(aJob({ queue: 'reports' })).job.id
    })
    expect(engine.claim({ worker_id: 'w' }, 5)).toEqual([])
    const [waiting] = engine.waiting([engine.getJob(ids[0]!)])
    expect(waiting?.until).toBeNull() // only a resume ends it
    expect(waiting?.reason).toBe('queue reports is paused; nothing is taken from it until it is resumed')
    engine.resumeQueue('reports')
    expect(engine.claim({ worker_id: 'w' }, 5).map((j) => j.id)).toEqual(ids)
  })

  it('running jobs of a paused queue finish; a queue API job claimed before the pause is denied its lease', () => {
    const { engine } = setup()
    const running = engine.submit(aJob({ queue: 'q' })).job.id
    const claimed = engine.submit(aJob({ queue: 'q' })).job.id
    const lease = leaseOrFail(engine, 'a')
    expect(lease.job.id).toBe(running)
    expect(engine.claim({ worker_id: 'b' }).map((j) => j.id)).toEqual([claimed])
    engine.pauseQueue('q')
    const denied = engine.requestLeaseForJob({ job_id: claimed, worker_id: 'b' })
    expect(denied).toMatchObject({ approved: false, reason: 'Queue q is paused' })
    expect(engine.getJob(claimed).state).toBe('LEASE_PENDING')
    engine.heartbeat({ lease_id: lease.lease.id, worker_id: 'a' })
    expect(engine.release({ lease_id: lease.lease.id, worker_id: 'a', status: 'SUCCEEDED' }).job.state).toBe('DONE')
    engine.resumeQueue('q')
    expect(engine.requestLeaseForJob({ job_id: claimed, worker_id: 'b' })).toMatchObject({ approved: true })
  })

  it('pause and resume are events naming the queue and who asked; repeating either changes nothing', () => {
    const { engine } = setup()
    expect(engine.pauseQueue('q', 'ops')).toMatchObject({ queue: 'q', paused: true, paused_by: 'ops' })
    engine.pauseQueue('q', 'someone else')
    expect(engine.listQueues()).toEqual([expect.objectContaining({ queue: 'q', paused: true, paused_by: 'ops' })])
    engine.resumeQueue('q', 'ops')
    engine.resumeQueue('q', 'ops')
    expect(queueEvents(engine).map((e) => [e.event_type, e.entity_id, JSON.parse(e.data)])).toEqual([
      ['QUEUE_PAUSED', 'q', { queue: 'q', requested_by: 'ops' }],
      ['QUEUE_RESUMED', 'q', { queue: 'q', requested_by: 'ops' }],
    ])
  })

  it('a pause that rolls back leaves the queue running, in memory as in the database', () => {
    const { engine } = setup()
    const id = engine.submit(aJob({ queue: 'q' })).job.id
    expect(() =>
      engineContext(engine).transact(() => {
        engine.pauseQueue('q')
        throw new Error('the transaction fails after the pause')
      }),
    ).toThrow('the transaction fails')
    expect(engineContext(engine).pausedQueues.has('q')).toBe(false)
    expect(engine.listQueues()[0]).toMatchObject({ queue: 'q', paused: false })
    expect(engine.claim({ worker_id: 'w' }).map((j) => j.id)).toEqual([id])
  })

  it('a pause survives a restart', () => {
    const { dir, cleanup } = tempDir()
    try {
      const path = join(dir, 'leasehold.db')
      const first = openFileEngine(path)
      first.engine.submit(aJob({ queue: 'q' }))
      first.engine.pauseQueue('q')
      first.sqlite.close()
      const second = openFileEngine(path)
      expect(second.engine.claimAndLease({ worker_id: 'w' })).toMatchObject({ granted: false })
      expect(second.engine.listQueues()).toEqual([expect.objectContaining({ queue: 'q', paused: true, counts: { QUEUED: 1 } })])
      second.engine.resumeQueue('q')
      expect(second.engine.claimAndLease({ worker_id: 'w' })).toMatchObject({ granted: true })
      second.sqlite.close()
    } finally {
      cleanup()
    }
  })

  it('the queue list counts each queue\'s jobs by state (DONE left out) and includes paused queues without jobs', () => {
    const { engine } = setup()
    engine.submit(aJob({ queue: 'a' }))
    engine.submit(aJob({ queue: 'a' }))
    engine.submit(aJob({ queue: 'b' }))
    const running = leaseOrFail(engine, 'w') // the first job of a
    engine.heartbeat({ lease_id: running.lease.id, worker_id: 'w' })
    engine.cancel(engine.submit(aJob({ queue: 'b' })).job.id)
    const done = engine.submit(aJob({ queue: 'c', priority: 'URGENT' })).job.id
    const lease = leaseOrFail(engine, 'w2')
    expect(lease.job.id).toBe(done)
    engine.release({ lease_id: lease.lease.id, status: 'SUCCEEDED' })
    engine.pauseQueue('empty')
    expect(engine.listQueues()).toEqual([
      { queue: 'a', paused: false, paused_at: null, paused_by: null, counts: { QUEUED: 1, RUNNING: 1 } },
      { queue: 'b', paused: false, paused_at: null, paused_by: null, counts: { QUEUED: 1, CANCELED: 1 } },
      expect.objectContaining({ queue: 'empty', paused: true, counts: {} }),
    ])
  })
})

describe('pausing queues and waiting claims', () => {
  it('pause holds waiting claims of the worker API and the local workers\' exchange; resume wakes them at once', async () => {
    const { engine } = setup()
    dispatch = new Dispatch(engine)
    engine.pauseQueue('q')
    const ids = [engine.submit(aJob({ queue: 'q' })).job.id, engine.submit(aJob({ queue: 'q' })).job.id]
    const claim = dispatch.claim({ worker_id: 'remote', streams: ['q'], max_wait_ms: 60_000 }, () => {})
    const exchange = dispatch.exchange({ worker_id: 'local', claim: { streams: ['q'], max_jobs: 1, max_wait_ms: 60_000 } }, () => {})
    await new Promise((resolve) => setImmediate(resolve)) // both waits have started (their first try committed)
    expect(dispatch.size).toBe(2)
    engine.submit(aJob({ queue: 'q' })) // work arrives, the queue is still paused: nothing is handed out
    expect(dispatch.size).toBe(2)
    engine.resumeQueue('q')
    const granted = [await claim, (await exchange).claimed.granted[0]!]
    expect(granted.map((g) => g.granted && g.job_id).sort()).toEqual([...ids].sort())
    expect(eventTypes(engine.jobEvents(ids[0]!))).toContain('LEASE_GRANTED')
  })
})
