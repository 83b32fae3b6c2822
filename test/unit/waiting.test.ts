import { describe, expect, it } from 'vitest'
import { aJob, setup, T0 } from '../helpers/engine'
import { MINUTE, SECOND } from '../../src-main/engine/rules/clock'
import { FILE_RETRY_MS } from '../../src-main/engine/verbs/files'
import type { Engine, WorkersAtHand } from '../../src-main/engine'
import { WHOLE_LINE } from '../../src-main/engine/reads/waiting'
import { claimOrFail, eventTypes, expectEngineError, forceState, leaseOrFail } from './support'

/** The walk of a worker without a GPU that runs every type. */
const WITHOUT_GPU = { ...WHOLE_LINE, gpu: false }

const waitingOf = (engine: Engine, jobId: string) => engine.waiting([engine.getJob(jobId)])[0]
const reasonOf = (engine: Engine, jobId: string) => waitingOf(engine, jobId)?.reason ?? null
const short = (id: string) => `…${id.slice(-8)}`

describe('a queue never stalls silently: a job larger than the capacity', () => {
  it('a submit whose cost_units exceeds total_units is 400 cost_exceeds_capacity, and nothing is written', () => {
    const { engine } = setup({ total_units: 100 })
    const error = expectEngineError(() => engine.submit(aJob({ cost_units: 101 })), 400, 'cost_exceeds_capacity')
    expect(error.detail).toContain('101')
    expect(error.detail).toContain('100')
    expect(engine.listJobs({}).jobs).toEqual([])
    expect(engine.submit(aJob({ cost_units: 100 })).job.state).toBe('QUEUED') // exactly the total fits
  })

  it('the check reads the total now: after the total is raised the same submit is accepted', () => {
    const { engine } = setup({ total_units: 10 })
    expectEngineError(() => engine.submit(aJob({ cost_units: 50 })), 400, 'cost_exceeds_capacity')
    engine.setCapacity({ total_units: 50 })
    expect(engine.submit(aJob({ cost_units: 50 })).duplicate).toBe(false)
  })

  it('a busy rating does not refuse a submit: it passes, the total does not', () => {
    const { engine } = setup({ total_units: 100, busy_rating: 9 })
    expect(engine.submit(aJob({ cost_units: 80 })).job.state).toBe('QUEUED')
  })

  it('a repeated idempotency key answers the existing job even if the total has since dropped below its cost', () => {
    const { engine } = setup({ total_units: 100 })
    const first = engine.submit(aJob({ cost_units: 80, idempotency_key: 'k' })).job
    engine.setCapacity({ total_units: 50 })
    expect(engine.submit(aJob({ cost_units: 80, idempotency_key: 'k' }))).toMatchObject({ duplicate: true, job: { id: first.id } })
  })

  it('lowering total_units below a waiting job\'s cost reports it: one JOB_EXCEEDS_CAPACITY event, its reason, the snapshot count', () => {
    const { engine } = setup({ total_units: 100 })
    const big = engine.submit(aJob({ cost_units: 80 })).job
    const claimed = engine.submit(aJob({ cost_units: 70 })).job
    const small = engine.submit(aJob({ cost_units: 10 })).job
    expect(engine.claim({ worker_id: 'w', max_units: 70 }).map((j) => j.id)).toEqual([claimed.id])
    engine.setCapacity({ total_units: 50 })
    expect(eventTypes(engine.jobEvents(big.id)).at(-1)).toBe('JOB_EXCEEDS_CAPACITY')
    expect(engine.jobEvents(big.id).at(-1)!.data).toEqual({ state: 'QUEUED', cost_units: 80, total_units: 50 })
    expect(eventTypes(engine.jobEvents(claimed.id)).at(-1)).toBe('JOB_EXCEEDS_CAPACITY')
    expect(eventTypes(engine.jobEvents(small.id))).toEqual(['JOB_SUBMITTED'])
    expect(engine.snapshot().jobs.over_capacity).toBe(2)
    expect(reasonOf(engine, big.id)).toBe('cost 80 exceeds total capacity 50; raise total_units or cancel the job')
    expect(reasonOf(engine, small.id)).toBe(`behind job ${short(big.id)}, whose cost 80 exceeds total capacity 50`)

    // Lowering it again reports only the jobs the new drop strands; raising it ends the report.
    engine.setCapacity({ total_units: 40 })
    expect(eventTypes(engine.jobEvents(big.id)).filter((t) => t === 'JOB_EXCEEDS_CAPACITY')).toHaveLength(1)
    engine.setCapacity({ total_units: 100 })
    expect(engine.snapshot().jobs.over_capacity).toBe(0)
    expect(reasonOf(engine, big.id)).toBe('first in line; waiting for a worker to take it')
  })

  it('a job that returns to the line costing more than the total is reported each time it returns: its lease expired, its retryable failure', () => {
    const { engine, clock } = setup({ total_units: 100, config: { leaseTtlS: 5, heartbeatGraceS: 0 } })
    const job = engine.submit(aJob({ cost_units: 80, max_attempts: 5 })).job
    const exceeds = () => engine.jobEvents(job.id).filter((e) => e.event_type === 'JOB_EXCEEDS_CAPACITY')
    leaseOrFail(engine, 'w')
    engine.setCapacity({ total_units: 50 }) // it runs: not reported yet
    clock.advance(5 * SECOND)
    engine.reap()
    expect(eventTypes(engine.jobEvents(job.id)).slice(-3)).toEqual(['LEASE_EXPIRED', 'JOB_REQUEUED', 'JOB_EXCEEDS_CAPACITY'])
    expect(exceeds().map((e) => e.data)).toEqual([{ state: 'QUEUED', cost_units: 80, total_units: 50 }])
    expect(reasonOf(engine, job.id)).toBe('cost 80 exceeds total capacity 50; raise total_units or cancel the job')
    expect(engine.snapshot().jobs.over_capacity).toBe(1)

    // A later drop does not report it again for the drop it returned under.
    engine.setCapacity({ total_units: 40 })
    expect(exceeds()).toHaveLength(1)

    // Run it again, then lower the total while it runs: its retryable failure returns it to the line, reported again.
    engine.setCapacity({ total_units: 100 })
    clock.advance(engine.getJob(job.id).next_retry_at! - clock.now())
    const { lease } = claimOrFail(engine, 'w')
    engine.setCapacity({ total_units: 60 })
    engine.fail({ job_id: job.id, worker_id: 'w', lease_token: lease.token, attempt_id: lease.attempt_id, error: { message: 'x', retryable: true } })
    expect(eventTypes(engine.jobEvents(job.id)).slice(-2)).toEqual(['JOB_REQUEUED', 'JOB_EXCEEDS_CAPACITY'])
    expect(exceeds().map((e) => e.data.total_units)).toEqual([50, 60])
  })

  it('a job that returns to the line within the total is not reported', () => {
    const { engine, clock } = setup({ total_units: 100, config: { leaseTtlS: 5, heartbeatGraceS: 0 } })
    const job = engine.submit(aJob({ cost_units: 50 })).job
    leaseOrFail(engine, 'w')
    engine.setCapacity({ total_units: 50 }) // exactly its cost still fits
    clock.advance(5 * SECOND)
    engine.reap()
    expect(eventTypes(engine.jobEvents(job.id)).at(-1)).toBe('JOB_REQUEUED')
    expect(eventTypes(engine.jobEvents(job.id))).not.toContain('JOB_EXCEEDS_CAPACITY')
  })

  it('running and finished jobs are not reported when the total drops below their cost', () => {
    const { engine } = setup({ total_units: 100 })
    const running = engine.submit(aJob({ cost_units: 80 })).job
    leaseOrFail(engine, 'w')
    engine.setCapacity({ total_units: 50 })
    expect(eventTypes(engine.jobEvents(running.id))).not.toContain('JOB_EXCEEDS_CAPACITY')
    expect(reasonOf(engine, running.id)).toBeNull()
  })
})

describe('every waiting job can say why it waits', () => {
  it('the head of the line that does not fit names the numbers, with what the busy rating holds back', () => {
    const { engine } = setup({ total_units: 100, busy_rating: 8 })
    engine.submit(aJob({ cost_units: 10 }))
    leaseOrFail(engine, 'w') // 10 of the 20 usable units leased
    const head = engine.submit(aJob({ cost_units: 40 })).job
    expect(reasonOf(engine, head.id)).toBe('first in line; needs 40 units; 10 available (busy rating 8 leaves 20 of 100 units, 10 leased)')
  })

  it('with the leases over the usable units (the rating rose under running work) the reason says none available, not a number the capacity reads contradict', () => {
    const { engine } = setup({ total_units: 60, busy_rating: 0 })
    engine.submit(aJob({ cost_units: 12 }))
    leaseOrFail(engine, 'w')
    engine.setCapacity({ busy_rating: 9 }) // 6 usable, 12 leased
    const head = engine.submit(aJob({ cost_units: 50 })).job
    expect(reasonOf(engine, head.id)).toBe('first in line; needs 50 units; none available (busy rating 9 leaves 6 of 60 units, 12 leased)')
  })

  it('a job of one unit is said to need 1 unit, not 1 units', () => {
    const { engine } = setup({ total_units: 2 })
    engine.submit(aJob({ cost_units: 2 }))
    leaseOrFail(engine, 'w')
    const head = engine.submit(aJob({ cost_units: 1 })).job
    expect(reasonOf(engine, head.id)).toBe('first in line; needs 1 unit; none available (2 of 2 units leased)')
  })

  it('a job behind a head that does not fit says which job it waits behind and why', () => {
    const { engine } = setup({ total_units: 70 })
    engine.submit(aJob({ cost_units: 60 }))
    leaseOrFail(engine, 'w')
    const head = engine.submit(aJob({ cost_units: 40 })).job
    const small = engine.submit(aJob({ cost_units: 5 })).job
    expect(reasonOf(engine, small.id)).toBe(`behind job ${short(head.id)}, which needs 40 units; 10 available (60 of 70 units leased)`)
  })

  it('a job behind a head that fits waits its turn; the head waits for a worker', () => {
    const { engine } = setup()
    const head = engine.submit(aJob()).job
    const next = engine.submit(aJob()).job
    expect(reasonOf(engine, head.id)).toBe('first in line; waiting for a worker to take it')
    expect(reasonOf(engine, next.id)).toBe(`waiting its turn behind job ${short(head.id)}`)
  })

  it('the line is by priority: an URGENT job submitted later is the head', () => {
    const { engine } = setup()
    const normal = engine.submit(aJob()).job
    const urgent = engine.submit(aJob({ priority: 'URGENT' })).job
    expect(reasonOf(engine, urgent.id)).toMatch(/^first in line/)
    expect(reasonOf(engine, normal.id)).toBe(`waiting its turn behind job ${short(urgent.id)}`)
  })

  it('the line is the job\'s own queue: a job of another queue, however urgent or big, is not named as the one it waits behind', () => {
    const { engine } = setup({ total_units: 100 })
    const urgentElsewhere = engine.submit(aJob({ priority: 'URGENT', queue: 'gpu', cost_units: 100 })).job
    engine.setCapacity({ total_units: 50 }) // gpu's head no longer fits anything
    const first = engine.submit(aJob({ queue: 'reports' })).job
    const second = engine.submit(aJob({ queue: 'reports' })).job
    expect(reasonOf(engine, urgentElsewhere.id)).toBe('cost 100 exceeds total capacity 50; raise total_units or cancel the job')
    expect(reasonOf(engine, first.id)).toBe('first in line; waiting for a worker to take it')
    expect(reasonOf(engine, second.id)).toBe(`waiting its turn behind job ${short(first.id)}`)
  })

  it('the line is walked as the workers that take the job walk it: a job needing a GPU stands before another only while no worker without a GPU takes that one', () => {
    const { engine } = setup({ total_units: 10 })
    engine.submit(aJob({ cost_units: 5 }))
    leaseOrFail(engine, 'w')
    const gpu = engine.submit(aJob({ priority: 'URGENT', cost_units: 8, constraints: { gpu_required: true } })).job
    const plain = engine.submit(aJob({ cost_units: 2 })).job
    const reasonsWith = (workers: WorkersAtHand) => engine.waiting([engine.getJob(gpu.id), engine.getJob(plain.id)], workers).map((w) => w?.reason)
    const gpuShortfall = 'needs 8 units; 5 available (5 of 10 units leased)'
    // Only workers without a GPU ask: they skip the GPU job, and take the other first.
    expect(reasonsWith({ nobodyTakes: (job) => (job.gpu_required ? 'gpu' : null), walks: (job) => (job.gpu_required ? [] : [WITHOUT_GPU]) })).toEqual([
      'first in line; needs a worker with a GPU, and none asking has one',
      'first in line; waiting for a worker to take it',
    ])
    // Workers with and without one: the GPU job is the head for the ones with, not for the others.
    expect(reasonsWith({ nobodyTakes: () => null, walks: (job) => (job.gpu_required ? [WHOLE_LINE] : [WITHOUT_GPU, WHOLE_LINE]) })).toEqual([
      `first in line; ${gpuShortfall}`,
      'first in line; waiting for a worker to take it',
    ])
    // Only workers with a GPU: the GPU job stands before the other, and its shortfall holds the line.
    expect(reasonsWith({ nobodyTakes: () => null, walks: () => [WHOLE_LINE] })).toEqual([`first in line; ${gpuShortfall}`, `behind job ${short(gpu.id)}, which ${gpuShortfall}`])
    // No worker known: the job keeps its place among all the jobs of its queue.
    expect(engine.waiting([engine.getJob(plain.id)])[0]?.reason).toBe(`behind job ${short(gpu.id)}, which ${gpuShortfall}`)
  })

  it('the line is walked as the workers that run the job\'s type walk it: jobs of types they do not run stand before it for no one', () => {
    const { engine } = setup({ total_units: 10 })
    const encode = engine.submit(aJob({ priority: 'URGENT', job_type: 'encode' })).job
    const render = engine.submit(aJob({ job_type: 'render' })).job
    const reasonsWith = (workers: WorkersAtHand) => engine.waiting([engine.getJob(encode.id), engine.getJob(render.id)], workers).map((w) => w?.reason)
    const runs = (...jobTypes: string[]) => ({ ...WHOLE_LINE, jobTypes })
    // A worker that runs only render skips the encode job: the render job is the first of its line.
    expect(reasonsWith({ nobodyTakes: () => null, walks: (job) => (job.job_type === 'render' ? [runs('render')] : [WHOLE_LINE]) })).toEqual([
      'first in line; waiting for a worker to take it',
      'first in line; waiting for a worker to take it',
    ])
    // Beside one that runs every type, it is still the first for the render worker, which takes it next.
    expect(reasonsWith({ nobodyTakes: () => null, walks: (job) => (job.job_type === 'render' ? [runs('render'), WHOLE_LINE] : [WHOLE_LINE]) })[1]).toBe(
      'first in line; waiting for a worker to take it',
    )
    // Every worker that runs render runs encode too: the encode job stands before it.
    expect(reasonsWith({ nobodyTakes: () => null, walks: () => [runs('encode', 'render')] })[1]).toBe(`waiting its turn behind job ${short(encode.id)}`)
  })

  it('a requeued job in its backoff says so, and its waiting_until is the retry\'s not-before time', () => {
    const { engine, clock } = setup({ config: { leaseTtlS: 5, heartbeatGraceS: 0 } })
    const job = engine.submit(aJob()).job
    leaseOrFail(engine, 'w')
    clock.advance(5 * SECOND)
    engine.reap()
    const requeued = engine.getJob(job.id)
    expect(requeued.state).toBe('QUEUED')
    expect(waitingOf(engine, job.id)).toEqual({ reason: 'backing off before its retry', until: requeued.next_retry_at })
  })

  it('a claimed job waits for its worker\'s lease request; a LEASE_PENDING one names the shortfall and the next ask', () => {
    const { engine, clock } = setup({ total_units: 10 })
    const job = engine.submit(aJob({ cost_units: 8 })).job
    engine.claim({ worker_id: 'w' })
    expect(reasonOf(engine, job.id)).toBe('claimed by w; waiting for its lease request')
    engine.setCapacity({ busy_rating: 5 })
    const denied = engine.requestLeaseForJob({ job_id: job.id })
    expect(denied.approved).toBe(false)
    expect(waitingOf(engine, job.id)).toEqual({
      reason: 'lease denied: needs 8 units; 5 available (busy rating 5 leaves 5 of 10 units, 0 leased); w waits to ask again',
      until: T0 + 10 * SECOND,
    })
    engine.setCapacity({ busy_rating: 0 })
    clock.advance(SECOND)
    expect(waitingOf(engine, job.id)).toEqual({ reason: 'capacity is free now; w waits to ask again for its lease', until: T0 + 10 * SECOND })
  })

  it('a unique job whose lease was denied while its worker held another lease says so, until that lease ends', () => {
    const { engine } = setup()
    const unique = engine.submit(aJob({ unique: true })).job
    engine.claim({ worker_id: 'w' })
    engine.submit(aJob())
    const held = leaseOrFail(engine, 'w')
    expect(engine.requestLeaseForJob({ job_id: unique.id }).approved).toBe(false)
    expect(waitingOf(engine, unique.id)).toEqual({
      reason: 'lease denied: the job is unique and w holds another lease; w waits to ask again',
      until: T0 + 10 * SECOND,
    })
    engine.release({ lease_id: held.lease.id, status: 'SUCCEEDED' })
    expect(reasonOf(engine, unique.id)).toBe('capacity is free now; w waits to ask again for its lease')
  })

  it('a BLOCKED job waits for an operator', () => {
    const { engine } = setup()
    const job = engine.submit(aJob()).job
    forceState(engine, job.id, 'BLOCKED')
    expect(reasonOf(engine, job.id)).toBe('halted; waits for an operator to retry, force release or cancel')
  })

  it('running and finished jobs have no reason, and a page of them reads nothing', () => {
    const { engine } = setup()
    const job = engine.submit(aJob()).job
    leaseOrFail(engine, 'w')
    expect(reasonOf(engine, job.id)).toBeNull()
    engine.cancel(job.id)
    expect(engine.waiting([engine.getJob(job.id)])).toEqual([null])
  })

  it('a list gets one reason per job, in order, read against one situation', () => {
    const { engine } = setup()
    const ids = [engine.submit(aJob()).job.id, engine.submit(aJob()).job.id]
    leaseOrFail(engine, 'w')
    const rows = ids.map((id) => engine.getJob(id))
    expect(engine.waiting(rows)).toEqual([null, { reason: 'first in line; waiting for a worker to take it', until: null }])
  })
})

describe('the file gate\'s wait is a waiting reason like the others', () => {
  /** Two running jobs: the holder's (w1) and the requester's (w2), both leased for 600 s. */
  function twoRunning() {
    const { engine, clock } = setup()
    engine.submit(aJob())
    const requester = engine.submit(aJob()).job
    const holder = leaseOrFail(engine, 'w1', 600)
    const running = leaseOrFail(engine, 'w2', 600)
    return { engine, clock, requester, holder, running }
  }

  it("a holder that took the file under its job's own name (as a worker's gate does) is named as that job, by its id's end", () => {
    const { engine, clock, requester, holder, running } = twoRunning()
    engine.acquireFile({ file: '/repo/b.ts', owner_id: `job:${holder.job.id}`, lease_id: holder.lease.id })
    clock.advance(5 * SECOND)
    expect(engine.acquireFile({ file: '/repo/b.ts', owner_id: `job:${running.job.id}`, lease_id: running.lease.id })).toMatchObject({ code: 'file_lease_held' })
    expect(reasonOf(engine, requester.id)).toBe(`refused file /repo/b.ts, held by job …${holder.job.id.slice(-8)}; waits to try it again`)
  })

  it('a running job refused a held file waits for its one retry: the reason names the file and its holder, waiting_until the retry', () => {
    const { engine, clock, requester, holder, running } = twoRunning()
    expect(running.job.id).toBe(requester.id)
    engine.acquireFile({ file: '/repo/a.ts', owner_id: 'w1', lease_id: holder.lease.id })
    expect(reasonOf(engine, requester.id)).toBeNull()
    clock.advance(5 * SECOND)
    expect(engine.acquireFile({ file: '/repo/a.ts', owner_id: 'w2', lease_id: running.lease.id })).toMatchObject({ code: 'file_lease_held' })
    expect(waitingOf(engine, requester.id)).toEqual({ reason: 'refused file /repo/a.ts, held by w1; waits to try it again', until: T0 + 5 * SECOND + FILE_RETRY_MS })
    expect(reasonOf(engine, holder.job.id)).toBeNull()

    // Let go: the job still waits for its one retry, and says the file is free now.
    engine.releaseFile({ file: '/repo/a.ts', owner_id: 'w1' })
    expect(waitingOf(engine, requester.id)).toEqual({ reason: 'refused file /repo/a.ts, since let go; waits to try it again', until: T0 + 5 * SECOND + FILE_RETRY_MS })

    // Taken at the retry: the wait is over.
    clock.advance(FILE_RETRY_MS)
    engine.heartbeat({ lease_id: running.lease.id })
    expect(engine.acquireFile({ file: '/repo/a.ts', owner_id: 'w2', lease_id: running.lease.id })).toMatchObject({ granted: true })
    expect(waitingOf(engine, requester.id)).toBeNull()
  })
})

describe('a waiting reason names no time: the time is waiting_until, for each reader to format', () => {
  it('none of the reasons with a time in them carries one in the words', () => {
    const { engine, clock } = setup({ total_units: 10, config: { leaseTtlS: 5, heartbeatGraceS: 0 } })
    const backoff = engine.submit(aJob()).job
    leaseOrFail(engine, 'w')
    clock.advance(5 * SECOND)
    engine.reap()
    const scheduled = engine.submit(aJob({ delay_ms: 10 * MINUTE })).job
    const pending = engine.submit(aJob({ cost_units: 8, queue: 'other' })).job
    engine.claim({ worker_id: 'w2', queues: ['other'] })
    engine.setCapacity({ busy_rating: 5 })
    expect(engine.requestLeaseForJob({ job_id: pending.id }).approved).toBe(false)
    const waits = engine.waiting([backoff, scheduled, pending].map((job) => engine.getJob(job.id)))
    for (const wait of waits) {
      expect(wait?.until).toBeGreaterThan(clock.now())
      expect(wait?.reason).not.toMatch(/\d{4}-\d\d-\d\d|\d\d:\d\d/)
    }
  })
})

describe('why a job waits, read while the engine works', () => {
  it('a view read from outside every operation, whose read of the line commits an open group, takes the line again after the grants that commit set off', async () => {
    // The group must stay open until the read: one whose submit outlasts groupMaxMs on a loaded
    // machine commits as that submit ends, and there is then nothing for the read to commit.
    const { engine } = setup({ total_units: 100, config: { groupMaxMs: 60_000 } })
    // Rows of 2 MB each: the engine keeps the first few QUEUED rows in memory and reads the
    // others from SQLite, and a read from outside every operation commits the open group first.
    const big = 'x'.repeat(1_000_000)
    const ids = Array.from({ length: 10 }, () => engine.submit(aJob({ cost_units: 1, payload: big })).job.id)
    for (let i = 0; i < 8; i++) expect(leaseOrFail(engine, { worker_id: `w${i}` }).job.id).toBe(ids[i])
    // A group left open (committed at the turn's end), and a commit listener that leases a job,
    // as dispatch grants a waiting claim the jobs a commit brings.
    // Job 9 as a page of the jobs list read it: QUEUED, behind job 8.
    const stale = engine.getJob(ids[9]!)
    let granted: string | null = null
    let asked = false
    const stop = engine.onCommit(() => {
      if (asked) return
      asked = true
      granted = leaseOrFail(engine, { worker_id: 'waiting-claim' }).job.id
    })
    const open = engine.run(() => engine.submit(aJob({ cost_units: 1 })))
    expect(asked).toBe(false)
    // The head was job 8 when the read began; the commit the read caused leased job 8 away.
    expect(engine.waiting([stale])[0]?.reason).toBe('first in line; waiting for a worker to take it')
    expect(granted).toBe(ids[8])
    stop()
    await open
  })
})
