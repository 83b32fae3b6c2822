/**
 * Dispatch (src-main/dispatch/dispatch.ts): each rule it names at its top has a test here of the
 * same name; the last, lease-on-submit's, is in lease-on-submit.test.ts. Time is the engine's
 * ManualClock, moved; the waits are for conditions.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, test, vi } from 'vitest'
import { type Deliver, Dispatch, type ServedExchange } from '../../src-main/dispatch/dispatch'
import type { Assignment, Denial, Engine, ExchangeAnswer } from '../../src-main/engine'
import { engineContext } from '../../src-main/engine/internals'
import { SECOND } from '../../src-main/engine/rules/clock'
import { aJob, setup, T0 } from '../helpers/engine'
import { until } from '../helpers/until'

let dispatch: Dispatch | undefined
afterEach(() => dispatch?.close())

/** A transport's deliver that records what it was handed, and when. */
/** Records what a waiting worker is delivered; each delivery also logs `name` into `log`. */
function recorder<A = Assignment | Denial>(engine: Engine, log: string[] = [], name = 'worker'): { deliver: Deliver<A>; delivered: A[]; inTransaction: boolean[] } {
  const delivered: A[] = []
  const inTransaction: boolean[] = []
  return {
    delivered,
    inTransaction,
    deliver: (answer) => {
      delivered.push(answer)
      inTransaction.push(engineContext(engine).db.inTransaction)
      log.push(name)
    },
  }
}

/** Lets the group of this turn commit. */
const aTurn = () => new Promise((resolve) => setImmediate(resolve))

describe('the rules dispatch keeps', () => {
  test('a waiting claim never misses work committed in the same group', async () => {
    // One group however slow the machine: it commits at the end of the turn, not after 2 ms.
    const { engine } = setup({ config: { groupMaxMs: 60_000 } })
    dispatch = new Dispatch(engine)
    const commitsBefore = engine.commits
    const one = recorder(engine)
    const batch = recorder<ExchangeAnswer>(engine)
    // Each claim finds nothing and begins to wait inside its operation; the submits that follow
    // in the same group (one job: leased at its submit; a batch: offered at the commit) reach them.
    void dispatch.claim({ worker_id: 'w1', streams: ['one'], max_wait_ms: 5_000 }, one.deliver)
    void dispatch.exchange({ worker_id: 'w2', claim: { streams: ['batch'], max_jobs: 2, max_wait_ms: 5_000 } }, batch.deliver)
    // (The one-job submit comes last: the group commits as a submit leased at once ends.)
    const submits = [engine.run(() => engine.submitMany([aJob({ queue: 'batch' }), aJob({ queue: 'batch' })])), engine.run(() => engine.submit(aJob({ queue: 'one' })))]
    await Promise.all(submits)
    expect(engine.commits).toBe(commitsBefore + 1)
    // Granted in that group's commit: no timer had to find the jobs later.
    expect(one.delivered).toEqual([expect.objectContaining({ granted: true })])
    expect(batch.delivered.map((answer) => answer.claimed.granted.length)).toEqual([2])
    expect(dispatch.size).toBe(0)
  })

  test('no answer is delivered before its COMMIT', async () => {
    const { engine } = setup()
    dispatch = new Dispatch(engine)
    // Granted at once: delivered once its group has committed.
    engine.submit(aJob())
    const first = recorder(engine)
    void dispatch.claim({ worker_id: 'w1', max_wait_ms: 5_000 }, first.deliver)
    expect(first.delivered).toEqual([])
    await until(() => first.delivered.length)
    // Granted while waiting, by a submit's commit and by a batch's: delivered from the commit's listener.
    const waited = recorder(engine)
    void dispatch.claim({ worker_id: 'w2', max_wait_ms: 5_000 }, waited.deliver)
    void dispatch.claim({ worker_id: 'w3', max_wait_ms: 5_000 }, waited.deliver)
    await aTurn()
    await engine.run(() => engine.submit(aJob()))
    await engine.run(() => engine.submitMany([aJob()]))
    expect([...first.inTransaction, ...waited.inTransaction]).toEqual([false, false, false])
    expect(waited.delivered).toEqual([expect.objectContaining({ granted: true }), expect.objectContaining({ granted: true })])
    for (const answer of [...first.delivered, ...waited.delivered]) if (answer.granted) expect(engine.getJob(answer.job_id).state).toBe('RUNNING')
  })

  test('the answer that grants a waiting claim is delivered from its commit, before the request that woke it is answered', async () => {
    const { engine } = setup()
    dispatch = new Dispatch(engine)
    const order: string[] = []
    const single = recorder(engine, order, 'worker a')
    const several = recorder<ExchangeAnswer>(engine, order, 'worker b')
    void dispatch.claim({ worker_id: 'w1', streams: ['a'], max_wait_ms: 5_000 }, single.deliver)
    void dispatch.exchange({ worker_id: 'w2', claim: { streams: ['b'], max_jobs: 2, max_wait_ms: 5_000 } }, several.deliver)
    await aTurn()
    await Promise.all([
      engine.run(() => engine.submit(aJob({ queue: 'a' }))).then(() => order.push('submitter a')),
      engine.run(() => engine.submitMany([aJob({ queue: 'b' })])).then(() => order.push('submitter b')),
    ])
    // Whether the two submits share a commit depends on how long they take (groupMaxMs); each
    // worker hears of its job before the submit that woke it is answered either way.
    expect([...order].sort()).toEqual(['submitter a', 'submitter b', 'worker a', 'worker b'])
    for (const queue of ['a', 'b']) expect(order.indexOf(`worker ${queue}`)).toBeLessThan(order.indexOf(`submitter ${queue}`))
  })

  describe('a claim whose worker is gone is never granted, or its grant is handed back', () => {
    test('a waiting claim whose client goes stops waiting, and a later job is not leased to it', async () => {
      const { engine } = setup()
      dispatch = new Dispatch(engine)
      const gone = new AbortController()
      const { deliver, delivered } = recorder(engine)
      const claim = dispatch.claim({ worker_id: 'w', max_wait_ms: 5_000 }, deliver, () => gone.signal)
      await aTurn()
      expect(dispatch.size).toBe(1)
      gone.abort()
      expect(dispatch.size).toBe(0)
      const { job } = await engine.run(() => engine.submit(aJob()))
      expect((await claim).granted).toBe(false)
      expect(delivered).toEqual([expect.objectContaining({ granted: false })])
      expect(engine.getJob(job.id).state).toBe('QUEUED')
    })

    test('a claim whose client is already gone claims nothing, though work is queued; its reports still count', async () => {
      const { engine } = setup()
      dispatch = new Dispatch(engine)
      const { job: running } = engine.submit(aJob())
      const lease = engine.claimAndLease({ worker_id: 'w' })
      if (!lease.granted) throw new Error('no lease')
      const { job: queued } = engine.submit(aJob())
      const gone = new AbortController()
      gone.abort()
      const report = { job_id: running.id, attempt_id: lease.lease.attempt_id, lease_token: lease.lease.token }
      const answer = await dispatch.exchange({ worker_id: 'w', complete: [report], claim: { streams: ['default'], max_jobs: 1, max_wait_ms: 1_000 } }, () => {}, () => gone.signal)
      expect(answer.completed).toEqual([expect.objectContaining({ ok: true })])
      expect(answer.claimed.granted).toEqual([])
      // Never leased (a lease handed back would have shown as an attempt, though not one that counts).
      expect(engine.getJob(queued.id)).toMatchObject({ state: 'QUEUED', attempts: 0 })
      expect(engine.getJob(running.id).state).toBe('DONE')
    })

    test('a claim granted at once whose client goes before the grant commits is answered without it, and the lease expires now', async () => {
      const { engine } = setup()
      dispatch = new Dispatch(engine)
      const { job } = engine.submit(aJob())
      const gone = new AbortController()
      const { deliver, delivered } = recorder(engine)
      const claim = dispatch.claim({ worker_id: 'w', max_wait_ms: 1_000 }, deliver, () => gone.signal)
      gone.abort() // the group holding the grant has not committed yet
      expect((await claim).granted).toBe(false)
      expect(delivered).toEqual([expect.objectContaining({ granted: false })])
      expect(engine.activeLeasesByWorker().size).toBe(0)
      expect(engine.getJob(job.id).state).toBe('QUEUED')
    })
  })

  describe('each answer is delivered exactly once', () => {
    test('whichever of the grant, the wait’s end, the host’s stop or the client’s going ends it', async () => {
      const { engine } = setup()
      dispatch = new Dispatch(engine)
      const calls = new Map<string, number>()
      const count = (name: string) => () => calls.set(name, (calls.get(name) ?? 0) + 1)
      const gone = new AbortController()
      const pending = [
        dispatch.claim({ worker_id: 'granted', streams: ['a'], max_wait_ms: 5_000 }, count('granted')),
        dispatch.exchange({ worker_id: 'granted-batch', claim: { streams: ['b'], max_jobs: 2, max_wait_ms: 5_000 } }, count('granted-batch')),
        dispatch.claim({ worker_id: 'timed-out', streams: ['c'], max_wait_ms: 1 }, count('timed-out')),
        dispatch.claim({ worker_id: 'gone', streams: ['c'], max_wait_ms: 5_000 }, count('gone'), () => gone.signal),
        dispatch.claim({ worker_id: 'stopped', streams: ['c'], max_wait_ms: 5_000 }, count('stopped')),
        dispatch.exchange({ worker_id: 'no-claim' }, count('no-claim')),
      ]
      await aTurn()
      await engine.run(() => engine.submit(aJob({ queue: 'a' })))
      await engine.run(() => engine.submitMany([aJob({ queue: 'b' })]))
      await until(() => calls.get('timed-out'))
      gone.abort()
      dispatch.close()
      await Promise.all(pending)
      await aTurn()
      expect(Object.fromEntries(calls)).toEqual({ granted: 1, 'granted-batch': 1, 'timed-out': 1, gone: 1, stopped: 1, 'no-claim': 1 })
    })

    test('a deliver that throws is logged and not called again, and the other waiters are delivered', async () => {
      const { engine } = setup()
      dispatch = new Dispatch(engine)
      const errors = vi.spyOn(console, 'error').mockImplementation(() => {})
      let failures = 0
      const failing = dispatch.claim({ worker_id: 'a', max_wait_ms: 5_000 }, () => {
        failures += 1
        throw new Error('the socket went away')
      })
      const other = recorder(engine)
      const answered = dispatch.claim({ worker_id: 'b', max_wait_ms: 5_000 }, other.deliver)
      await aTurn()
      await engine.run(() => engine.submitMany([aJob(), aJob()]))
      expect(errors).toHaveBeenCalledOnce()
      errors.mockRestore()
      const [a, b] = await Promise.all([failing, answered])
      expect(a.granted && b.granted).toBe(true)
      expect(failures).toBe(1)
      expect(other.delivered).toEqual([b])
    })
  })

  test('waiting claims are served oldest first', async () => {
    const { engine } = setup()
    dispatch = new Dispatch(engine)
    const served: string[] = []
    const claims = ['w1', 'w2', 'w3'].map((workerId) => dispatch!.claim({ worker_id: workerId, max_wait_ms: 5_000 }, (decision) => decision.granted && served.push(workerId)))
    await aTurn()
    // One at a time, each leased at its submit; then two at once, offered at the batch's commit.
    await engine.run(() => engine.submit(aJob()))
    expect(served).toEqual(['w1'])
    await engine.run(() => engine.submitMany([aJob(), aJob()]))
    expect(served).toEqual(['w1', 'w2', 'w3'])
    await Promise.all(claims)
  })
})

describe('a worker whose lease expired for its silence is handed no job by a claim it left waiting', () => {
  test('its job goes back to the queue and to a claim that is heard from, not to the silent worker’s older claim; the silent claim ends with nothing', async () => {
    const { engine, clock } = setup({ config: { leaseTtlS: 10, heartbeatGraceS: 2, backoff: { baseMs: 0, maxMs: 0 } } })
    dispatch = new Dispatch(engine)
    const { job } = engine.submit(aJob({ max_attempts: 3 }))
    const held = await dispatch.claim({ worker_id: 'silent', max_wait_ms: 0 }, () => {})
    expect(held).toMatchObject({ granted: true, job_id: job.id })
    // The silent worker's claim for its idle slots waits first; a worker that is heard from waits after it.
    const silent = recorder(engine)
    const heard = recorder(engine)
    const silentClaim = dispatch.claim({ worker_id: 'silent', max_wait_ms: 30_000 }, silent.deliver)
    await aTurn()
    void dispatch.claim({ worker_id: 'heard', max_wait_ms: 30_000 }, heard.deliver)
    await aTurn()
    clock.advance(12 * SECOND + 1)
    expect(engine.reap().leases).toBe(1)
    dispatch.wakeIfDue()
    await until(() => heard.delivered.length)
    expect(heard.delivered).toEqual([expect.objectContaining({ granted: true, job_id: job.id })])
    expect(await silentClaim).toMatchObject({ granted: false, reason: expect.stringContaining('A lease of worker silent expired') })
    expect(silent.delivered).toEqual([expect.objectContaining({ granted: false })])
    expect(dispatch.size).toBe(0)
  })

  test('it is served again once it asks again', async () => {
    const { engine, clock } = setup({ config: { leaseTtlS: 10, heartbeatGraceS: 2 } })
    dispatch = new Dispatch(engine)
    engine.submit(aJob({ max_attempts: 1 }))
    expect(await dispatch.claim({ worker_id: 'w', max_wait_ms: 0 }, () => {})).toMatchObject({ granted: true })
    clock.advance(12 * SECOND + 1)
    expect(engine.reap().leases).toBe(1)
    const again = dispatch.claim({ worker_id: 'w', max_wait_ms: 30_000 }, () => {})
    await aTurn()
    const { job: next } = engine.submit(aJob())
    expect(await again).toMatchObject({ granted: true, job_id: next.id })
  })
})

test('a waiting claim is granted when the busy rating falls enough for its job, though by less than the point that logs an event', async () => {
  const { engine } = setup({ total_units: 100, busy_rating: null })
  dispatch = new Dispatch(engine)
  engine.reportMeasuredBusy(9.5) // 5 units usable
  await engine.run(() => engine.submit(aJob({ cost_units: 8 })))
  const waiting = recorder(engine)
  void dispatch.claim({ worker_id: 'w1', max_wait_ms: 30_000 }, waiting.deliver)
  await aTurn()
  expect(waiting.delivered).toEqual([])
  if (engine.reportMeasuredBusy(9)) dispatch.capacityGrew() // 10 units usable, as the host's sampler does
  await until(() => waiting.delivered.length === 1)
  expect(waiting.delivered[0]).toMatchObject({ granted: true })
})

test('a waiting claim is granted in the commit that woke it: one commit holds the submit and the lease', async () => {
  const { engine } = setup()
  dispatch = new Dispatch(engine)
  const commits: string[][] = []
  engine.onCommit((events) => commits.push(events.map((e) => e.event_type)))
  const claim = dispatch.claim({ worker_id: 'w', max_wait_ms: 5_000 }, () => {})
  await aTurn()
  commits.length = 0
  const { job } = engine.submit(aJob())
  expect(commits).toEqual([['JOB_SUBMITTED', 'LEASE_GRANTED']])
  // Already leased when submit returns.
  expect(dispatch.size).toBe(0)
  expect(engine.getJob(job.id).state).toBe('RUNNING')
  const decision = await claim
  expect(decision.granted && decision.job_id).toBe(job.id)
})

test('a waiting exchange is delivered the answer its promise settles with: its own reports’ answers and the grants', async () => {
  const { engine } = setup()
  dispatch = new Dispatch(engine)
  const { job: first } = engine.submit(aJob())
  const lease = engine.claimAndLease({ worker_id: 'w' })
  if (!lease.granted) throw new Error('no lease')
  const { deliver, delivered } = recorder<ExchangeAnswer>(engine)
  const exchange = dispatch.exchange(
    { worker_id: 'w', complete: [{ job_id: first.id, attempt_id: lease.lease.attempt_id, lease_token: lease.lease.token }], claim: { streams: ['default'], max_jobs: 2, max_wait_ms: 5_000 } },
    deliver,
  )
  await until(() => dispatch?.size === 1)
  expect(delivered).toEqual([])
  const { job: next } = await engine.run(() => engine.submit(aJob()))
  expect(delivered).toHaveLength(1)
  const answer = await exchange
  expect(delivered[0]).toEqual(answer)
  expect(answer.completed).toEqual([expect.objectContaining({ ok: true })])
  expect(answer.claimed.granted.map((g) => g.job_id)).toEqual([next.id])
})

test('an exchange’s answer says how long its claim waited for its jobs: 0 when they were queued, the wait when a later submit brought one', async () => {
  const { engine } = setup()
  dispatch = new Dispatch(engine)
  engine.submit(aJob())
  const atOnce = await dispatch.exchange({ worker_id: 'w1', claim: { streams: ['default'], max_jobs: 4, max_wait_ms: 5_000 } }, () => {})
  expect(atOnce.claimed.granted).toHaveLength(1)
  expect(atOnce.claimWaitedMs).toBe(0)
  const { deliver, delivered } = recorder<ServedExchange>(engine)
  const waiting = dispatch.exchange({ worker_id: 'w2', claim: { streams: ['default'], max_jobs: 4, max_wait_ms: 5_000 } }, deliver)
  await until(() => dispatch?.size === 1)
  await new Promise((resolve) => setTimeout(resolve, 30))
  await engine.run(() => engine.submit(aJob()))
  const answer = await waiting
  expect(delivered).toEqual([answer])
  expect(answer.claimed.granted).toHaveLength(1)
  expect(answer.claimWaitedMs).toBeGreaterThanOrEqual(25)
})

test('an exchange’s claim that got nothing says it waited 0 ms, though it waited out max_wait_ms or its worker went', async () => {
  const { engine } = setup()
  dispatch = new Dispatch(engine)
  const empty = await dispatch.exchange({ worker_id: 'w', claim: { streams: ['empty'], max_jobs: 2, max_wait_ms: 30 } }, () => {})
  expect(empty.claimed.granted).toEqual([])
  expect(empty.claimWaitedMs).toBe(0)
  const gone = new AbortController()
  const left = dispatch.exchange({ worker_id: 'w', claim: { streams: ['empty'], max_jobs: 2, max_wait_ms: 5_000 } }, () => {}, () => gone.signal)
  await until(() => dispatch?.size === 1)
  await new Promise((resolve) => setTimeout(resolve, 30))
  gone.abort()
  expect((await left).claimWaitedMs).toBe(0)
})

test('an exchange that carries heartbeats is answered at once, though its claim would wait: the leases it extends go on; one with only completions waits', async () => {
  const { engine, clock } = setup({ config: { leaseTtlS: 10, heartbeatGraceS: 5 } })
  dispatch = new Dispatch(engine)
  engine.submit(aJob())
  engine.submit(aJob())
  const [beaten, finished] = (await dispatch.exchange({ worker_id: 'w', claim: { streams: ['default'], max_jobs: 2 } }, () => {})).claimed.granted
  clock.advance(4 * SECOND)

  // Nothing queued, and a claim that asks to wait 20 s, longer than the lease's TTL and grace.
  const { deliver, delivered } = recorder<ServedExchange>(engine)
  const claim = { streams: ['default'], max_jobs: 7, max_wait_ms: 20_000 }
  void dispatch.exchange({ worker_id: 'w', heartbeat: [{ job_id: beaten!.job_id, lease_token: beaten!.lease_token, progress: 0.5 }], claim }, deliver)
  await until(() => delivered.length === 1, 3000, 'the heartbeat answered')
  expect(dispatch.size).toBe(0)
  const [answer] = delivered
  expect(answer!.claimed.granted).toEqual([])
  expect(answer!.claimWaitedMs).toBe(0)
  const [beat] = answer!.heartbeats
  expect(beat).toEqual({ ok: true, value: expect.objectContaining({ expires_at: T0 + 4 * SECOND + 15 * SECOND, cancel_requested: false }) })

  // Completions alone: the claim waits for work, as a long-poll does.
  const complete = [{ job_id: finished!.job_id, attempt_id: finished!.attempt_id, lease_token: finished!.lease_token }]
  const waiting = dispatch.exchange({ worker_id: 'w', complete, claim }, () => {})
  await until(() => dispatch?.size === 1)
  dispatch.close()
  expect((await waiting).completed[0]!.ok).toBe(true)
})

describe('a worker’s reports sent with a claim that waits commit with the work that answers it', () => {
  /** A job leased to `w`, and its completion sent with a claim for the next one. */
  function completeAndWait(engine: Engine, deliver: Deliver<ExchangeAnswer>) {
    const { job } = engine.submit(aJob())
    const lease = engine.claimAndLease({ worker_id: 'w' })
    if (!lease.granted) throw new Error('no lease')
    const complete = [{ job_id: job.id, attempt_id: lease.lease.attempt_id, lease_token: lease.lease.token }]
    return { job, commitsBefore: engine.commits, exchange: dispatch!.exchange({ worker_id: 'w', complete, claim: { streams: ['default'], max_jobs: 1, max_wait_ms: 60_000 } }, deliver) }
  }

  test('the submit that brings the next job commits the completion too: one commit for both', async () => {
    // groupMaxMs too: a group open past it commits when its next operation ends, and on a busy
    // machine the exchange alone may take that long.
    const { engine } = setup({ config: { groupWaitMs: 60_000, groupMaxMs: 60_000 } })
    dispatch = new Dispatch(engine)
    const { deliver, delivered } = recorder<ExchangeAnswer>(engine)
    const { job, commitsBefore, exchange } = completeAndWait(engine, deliver)
    await until(() => dispatch?.size === 1)
    await aTurn()
    expect(engine.commits).toBe(commitsBefore) // its turn is over, and its group still open
    const { job: next } = await engine.run(() => engine.submit(aJob()))
    expect(engine.commits).toBe(commitsBefore + 1)
    const answer = await exchange
    expect(delivered).toEqual([answer])
    expect(answer.completed).toEqual([expect.objectContaining({ ok: true })])
    expect(answer.claimed.granted.map((g) => g.job_id)).toEqual([next.id])
    expect(engine.getJob(job.id).state).toBe('DONE')
  })

  test('with no work coming, the completion commits alone once groupWaitMs has passed, and the claim waits on', async () => {
    const { engine } = setup({ config: { groupWaitMs: 5 } })
    dispatch = new Dispatch(engine)
    const { deliver, delivered } = recorder<ExchangeAnswer>(engine)
    const { job, commitsBefore } = completeAndWait(engine, deliver)
    await until(() => engine.commits === commitsBefore + 1)
    expect(engine.getJob(job.id).state).toBe('DONE')
    expect(dispatch.size).toBe(1)
    expect(delivered).toEqual([])
  })
})

/** A job leased to worker `a` and failed retryable: QUEUED again, backing off. */
function requeued(engine: Engine) {
  const { job } = engine.submit(aJob())
  const lease = engine.claimAndLease({ worker_id: 'a' })
  if (!lease.granted) throw new Error('no lease')
  engine.fail({ job_id: job.id, attempt_id: lease.lease.attempt_id, worker_id: 'a', lease_token: lease.lease.token, error: { retryable: true } })
  return job
}

test('a waiting claim is woken when a requeued job’s backoff ends, though no event marks that moment', async () => {
  const { engine, clock } = setup({ config: { backoff: { baseMs: 300, maxMs: 300 } } })
  dispatch = new Dispatch(engine)
  const job = requeued(engine)
  const { deliver, delivered } = recorder(engine)
  const claim = dispatch.claim({ worker_id: 'b', max_wait_ms: 5_000 }, deliver)
  await aTurn()
  clock.advance(299)
  dispatch.wakeIfDue() // the host's reaper tick: not due yet
  expect(delivered).toEqual([])
  clock.advance(1)
  dispatch.wakeIfDue()
  expect(delivered).toEqual([expect.objectContaining({ granted: true, job_id: job.id })])
  expect((await claim).granted).toBe(true)
})

test('a backoff that ends between a commit’s offer to the waiting claims and its listeners still wakes them', async () => {
  // The race a busy host runs: a commit (here a submit to a queue the claim does not take)
  // offers the queue while the requeued job still backs off; by the time its listeners set the
  // next wake-up the backoff has ended. The job is no later than now, and must not be lost from
  // sight because it is no longer in the future.
  const { engine, clock } = setup({ config: { backoff: { baseMs: 300, maxMs: 300 } } })
  dispatch = new Dispatch(engine)
  const job = requeued(engine)
  const { deliver, delivered } = recorder(engine)
  const claim = dispatch.claim({ worker_id: 'b', streams: ['default'], max_wait_ms: 5_000 }, deliver)
  await aTurn()
  let moveClock = true
  engine.beforeCommit(() => {
    if (moveClock) clock.advance(2) // after dispatch's offer, before the commit
    moveClock = false
  })
  clock.advance(299)
  await engine.run(() => engine.submit(aJob({ queue: 'other' })))
  expect(delivered).toEqual([])
  dispatch.wakeIfDue() // the host's reaper tick (or the timer)
  expect(delivered).toEqual([expect.objectContaining({ granted: true, job_id: job.id })])
  expect((await claim).granted).toBe(true)
})

test('a claim woken as a backoff ends while a group waits open is answered once, and leased no job it is not told of', async () => {
  // The group of a worker's completion sent with a claim that waits stays open (groupWaitMs);
  // the timer of the backoff's end commits it first, and that commit's own turn answers the claims.
  const { engine, clock } = setup({ config: { backoff: { baseMs: 300, maxMs: 300 }, groupWaitMs: 60_000, groupMaxMs: 60_000 } })
  dispatch = new Dispatch(engine)
  const backingOff = [1, 2, 3].map(() => requeued(engine).id)
  const { job: done } = engine.submit(aJob())
  const lease = engine.claimAndLease({ worker_id: 'w' })
  if (!lease.granted) throw new Error('no lease')
  const older = recorder(engine)
  void dispatch.claim({ worker_id: 'b', max_wait_ms: 60_000 }, older.deliver)
  await aTurn()
  const exchanged = recorder<ExchangeAnswer>(engine)
  const complete = [{ job_id: done.id, attempt_id: lease.lease.attempt_id, lease_token: lease.lease.token }]
  void dispatch.exchange({ worker_id: 'w', complete, claim: { streams: ['default'], max_jobs: 1, max_wait_ms: 60_000 } }, exchanged.deliver)
  await until(() => dispatch?.size === 2)
  await aTurn()
  const commitsBefore = engine.commits
  clock.advance(300)
  dispatch.wakeIfDue()
  expect(engine.commits).toBeGreaterThan(commitsBefore)
  await until(() => older.delivered.length + exchanged.delivered.length === 2)
  const told = [...older.delivered.map((a) => (a.granted ? [a.job_id] : [])).flat(), ...exchanged.delivered.flatMap((a) => a.claimed.granted.map((g) => g.job_id))]
  expect(told).toHaveLength(2)
  // Every job leased is one a worker was told of; the third waits for the next claim.
  const running = backingOff.filter((id) => engine.getJob(id).state === 'RUNNING')
  expect(running.sort()).toEqual([...told].sort())
  expect(backingOff.filter((id) => engine.getJob(id).state === 'QUEUED')).toHaveLength(1)
})

test('a wait ends with nothing claimed after max_wait_ms, or when the host closes', async () => {
  const { engine } = setup()
  dispatch = new Dispatch(engine)
  expect((await dispatch.claim({ worker_id: 'w', max_wait_ms: 1 }, () => {})).granted).toBe(false)
  const pending = dispatch.claim({ worker_id: 'w', max_wait_ms: 10_000 }, () => {})
  await aTurn()
  dispatch.close()
  expect((await pending).granted).toBe(false)
})

test('an exchange whose report the host refuses is answered at once, though its claim would wait; one whose reports are accepted waits', async () => {
  const { engine } = setup()
  dispatch = new Dispatch(engine)
  const { job } = engine.submit(aJob())
  const first = await dispatch.exchange({ worker_id: 'w', claim: { streams: ['default'], max_jobs: 1 } }, () => {})
  const lease = first.claimed.granted[0]!
  const report = { job_id: job.id, attempt_id: lease.attempt_id, lease_token: lease.lease_token }

  // A completion under a token that names no lease: refused, and the worker hears it now, not
  // when work next comes (the claim would otherwise wait).
  const refused = await dispatch.exchange({ worker_id: 'w', complete: [{ ...report, lease_token: 'not-the-token' }], claim: { streams: ['default'], max_jobs: 1, max_wait_ms: 60_000 } }, () => {})
  expect(refused.completed[0]!.ok).toBe(false)
  expect(dispatch.size).toBe(0)

  // The accepted completion: its claim waits for work, as a long-poll does.
  const accepted = dispatch.exchange({ worker_id: 'w', complete: [report], claim: { streams: ['default'], max_jobs: 1, max_wait_ms: 60_000 } }, () => {})
  await until(() => dispatch?.size === 1)
  dispatch.close()
  expect((await accepted).completed[0]!.ok).toBe(true)
})

/** The rules in bold in dispatch.ts's header, each as a test's name spells it. */
export function headerRules(source: string): string[] {
  const header = source.slice(source.indexOf('The rules it keeps'), source.indexOf('*/', source.indexOf('The rules it keeps')))
  const bold = [...header.replace(/\n \*\s+/g, ' ').matchAll(/\*\*([^*]+)\*\*/g)].map((m) => m[1]!.replace(/\.$/, ''))
  return bold.map((rule) => rule[0]!.toLowerCase() + rule.slice(1))
}

/** The names of the tests and groups of a test file. */
const testNames = (source: string): string[] => [...source.matchAll(/^\s*(?:test|describe)\('([^']+)'/gm)].map((m) => m[1]!.replaceAll('’', "'"))

test('each rule in dispatch.ts’s header is the name of a test (here, or lease-on-submit’s)', () => {
  const read = (path: string) => readFileSync(join(import.meta.dirname, '../..', path), 'utf8')
  const rules = headerRules(read('src-main/dispatch/dispatch.ts'))
  expect(rules.length).toBeGreaterThan(8)
  const names = [...testNames(read('test/unit/dispatch.test.ts')), ...testNames(read('test/unit/lease-on-submit.test.ts'))]
  expect(rules.filter((rule) => !names.some((name) => name.startsWith(rule)))).toEqual([])
  expect(headerRules(' * The rules it keeps:\n *\n * - **A rule that runs\n *   on.** More.\n */')).toEqual(['a rule that runs on'])
})
