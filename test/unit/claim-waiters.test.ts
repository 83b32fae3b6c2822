import { afterEach, expect, test, vi } from 'vitest'
import { ClaimWaiters } from '../../src-main/workers/claim-waiters'
import { openDatabase } from '../../src-main/db/open'
import { Engine } from '../../src-main/engine'
import { systemClock } from '../../src-main/engine/clock'
import { until } from '../helpers/until'

let waiters: ClaimWaiters | undefined
afterEach(() => waiters?.close())

function openEngine(backoffMs = 100): { engine: Engine; sqlite: ReturnType<typeof openDatabase>['sqlite'] } {
  const { sqlite } = openDatabase({ path: ':memory:' })
  const engine = new Engine({ db: sqlite, clock: systemClock, config: { backoff: { baseMs: backoffMs, maxMs: backoffMs } }, capacity: { total_units: 10, busy_rating: 0 } })
  return { engine, sqlite }
}

const realTimeEngine = (backoffMs: number): Engine => openEngine(backoffMs).engine

test('a waiting claim is woken by a submit at once', async () => {
  const engine = realTimeEngine(100)
  waiters = new ClaimWaiters(engine)
  const claim = waiters.claim({ worker_id: 'w' }, { maxWaitMs: 5000 })
  const started = Date.now()
  engine.submit({ job_type: 't', cost_units: 1 })
  expect((await claim).granted).toBe(true)
  expect(Date.now() - started).toBeLessThan(1000)
})

test('a waiting claim is granted in the commit that woke it: one commit holds the submit and the lease', async () => {
  const engine = realTimeEngine(100)
  waiters = new ClaimWaiters(engine)
  const commits: string[][] = []
  engine.onCommit((events) => commits.push(events.map((e) => e.event_type)))
  const claim = waiters.claim({ worker_id: 'w' }, { maxWaitMs: 5000 })
  expect(waiters.size).toBe(1)
  const { job } = engine.submit({ job_type: 't', cost_units: 1 })
  expect(commits).toEqual([['JOB_SUBMITTED', 'LEASE_GRANTED']])
  // Already leased when submit returns: the HTTP server can answer the worker before the submitter.
  expect(waiters.size).toBe(0)
  expect(engine.getJob(job.id).state).toBe('RUNNING')
  expect(waiters.takeWoken()).toBe(true)
  expect(waiters.takeWoken()).toBe(false)
  const decision = await claim
  expect(decision.granted && decision.job_id).toBe(job.id)
})

test('a waiting claim’s onAnswer is called once its grant is committed, before its promise settles, and the waking request need not wait for it', async () => {
  const { engine, sqlite } = openEngine()
  waiters = new ClaimWaiters(engine)
  let settled = false
  const seen: { inTransaction: boolean; state: string; settled: boolean; jobId: string }[] = []
  const claim = waiters.claim({ worker_id: 'w' }, { maxWaitMs: 5000 }, (granted) => {
    seen.push({ inTransaction: sqlite.inTransaction, state: engine.getJob(granted.job_id).state, settled, jobId: granted.job_id })
  })
  void claim.then(() => (settled = true))
  const { job } = await engine.run(() => engine.submit({ job_type: 't', cost_units: 1 }))
  expect(seen).toEqual([{ inTransaction: false, state: 'RUNNING', settled: false, jobId: job.id }])
  expect(waiters.takeWoken()).toBe(false)
  const decision = await claim
  expect(decision.granted && decision.job_id).toBe(job.id)
})

test('a waiting exchange’s onAnswer gets the answer its promise settles with: its own reports’ answers and the grants', async () => {
  const { engine } = openEngine()
  waiters = new ClaimWaiters(engine)
  const { job: first } = engine.submit({ job_type: 't', cost_units: 1 })
  const lease = engine.claimAndLease({ worker_id: 'w' })
  if (!lease.granted) throw new Error('no lease')
  const early: unknown[] = []
  const exchange = waiters.exchange(
    { worker_id: 'w', complete: [{ job_id: first.id, attempt_id: lease.lease.attempt_id, lease_token: lease.lease.token }], claim: { streams: ['default'], max_jobs: 2 } },
    { maxWaitMs: 5000 },
    (answer) => early.push(answer),
  )
  await until(() => waiters?.size === 1)
  expect(early).toEqual([])
  const { job: next } = await engine.run(() => engine.submit({ job_type: 't', cost_units: 1 }))
  expect(early).toHaveLength(1)
  const answer = await exchange
  expect(early[0]).toEqual(answer)
  expect(answer.completed).toEqual([expect.objectContaining({ ok: true })])
  expect(answer.claimed.granted.map((g) => g.job_id)).toEqual([next.id])
})

test('an onAnswer that throws leaves the grant to the claim’s promise, and the other waiters are answered', async () => {
  const { engine } = openEngine()
  waiters = new ClaimWaiters(engine)
  const errors = vi.spyOn(console, 'error').mockImplementation(() => {})
  const failing = waiters.claim({ worker_id: 'a' }, { maxWaitMs: 5000 }, () => {
    throw new Error('the socket went away')
  })
  const answered: string[] = []
  const other = waiters.claim({ worker_id: 'b' }, { maxWaitMs: 5000 }, (granted) => answered.push(granted.job_id))
  await engine.run(() => engine.submitMany([{ job_type: 't', cost_units: 1 }, { job_type: 't', cost_units: 1 }]))
  expect(errors).toHaveBeenCalledOnce()
  errors.mockRestore()
  // The failed answer is the transport's to make from the promise, after the waking request's.
  expect(waiters.takeWoken()).toBe(true)
  const [a, b] = await Promise.all([failing, other])
  expect(a.granted).toBe(true)
  if (!b.granted) throw new Error('b was not granted')
  expect(answered).toEqual([b.job_id])
})

test('a waiting claim is woken when a requeued job’s backoff ends, though no event marks that moment', async () => {
  const engine = realTimeEngine(300)
  waiters = new ClaimWaiters(engine)
  const { job } = engine.submit({ job_type: 't', cost_units: 1 })
  const first = engine.claimAndLease({ worker_id: 'a' })
  if (!first.granted) throw new Error('no lease')
  engine.fail({ job_id: job.id, attempt_id: first.lease.attempt_id, worker_id: 'a', lease_token: first.lease.token, error: { retryable: true } })
  const started = Date.now()
  const decision = await waiters.claim({ worker_id: 'b' }, { maxWaitMs: 5000 })
  expect(decision.granted).toBe(true)
  expect(Date.now() - started).toBeGreaterThanOrEqual(250)
  expect(Date.now() - started).toBeLessThan(2000)
})

test('a wait ends with nothing claimed after maxWaitMs, or when the host closes', async () => {
  const engine = realTimeEngine(100)
  waiters = new ClaimWaiters(engine)
  expect((await waiters.claim({ worker_id: 'w' }, { maxWaitMs: 50 })).granted).toBe(false)
  const pending = waiters.claim({ worker_id: 'w' }, { maxWaitMs: 10_000 })
  waiters.close()
  expect((await pending).granted).toBe(false)
})

test('an exchange whose report the host refuses is answered at once, though its claim would wait; one whose reports are accepted waits', async () => {
  const engine = realTimeEngine(100)
  waiters = new ClaimWaiters(engine)
  const { job } = engine.submit({ job_type: 't', cost_units: 1 })
  const first = await waiters.exchange({ worker_id: 'w', claim: { streams: ['default'], max_jobs: 1 } }, { maxWaitMs: 0 })
  const lease = first.claimed.granted[0]!
  const report = { job_id: job.id, attempt_id: lease.attempt_id, lease_token: lease.lease_token }

  // A completion under a token that names no lease: refused, and the worker hears it now, not
  // when work next comes (the claim would otherwise wait the full minute).
  const refused = waiters.exchange({ worker_id: 'w', complete: [{ ...report, lease_token: 'not-the-token' }], claim: { streams: ['default'], max_jobs: 1 } }, { maxWaitMs: 60_000 })
  const answer = await Promise.race([refused, new Promise<'still waiting'>((r) => setTimeout(() => r('still waiting'), 5_000))])
  expect(answer).not.toBe('still waiting')
  expect(answer !== 'still waiting' && answer.completed[0]!.ok).toBe(false)
  expect(waiters.size).toBe(0)

  // The accepted completion: its claim waits for work, as a long-poll does.
  const accepted = waiters.exchange({ worker_id: 'w', complete: [report], claim: { streams: ['default'], max_jobs: 1 } }, { maxWaitMs: 60_000 })
  await new Promise((r) => setTimeout(r, 50))
  expect(waiters.size).toBe(1)
  waiters.close()
  expect((await accepted).completed[0]!.ok).toBe(true)
})
