/**
 * A job submitted on its own while a claim waits for work is leased to it in its own submit
 * (grants.ts `grantOnSubmit`): the job's row is written once, already RUNNING, beside its lease,
 * and the group commits as that submit ends. It decides what the claims' turn at the commit would
 * have decided, or leaves the job to that turn: these tests hold the two to the same outcome. A
 * batch's jobs are left to the commit.
 */
import type { Statement } from 'better-sqlite3'
import { afterEach, expect, test } from 'vitest'
import { MINUTE } from '../../src-main/engine/rules/clock'
import { engineContext } from '../../src-main/engine/internals'
import { Dispatch } from '../../src-main/dispatch/dispatch'
import { aJob, seededRandom, setup } from '../helpers/engine'

let dispatch: Dispatch | undefined
afterEach(() => dispatch?.close())

/** The SQL of every statement run while `fn` runs. */
function statementsOf<T>(engine: Parameters<typeof engineContext>[0], fn: () => T): { sql: string[]; value: T } {
  const statement = engineContext(engine).db.prepare('SELECT 1')
  const proto = Object.getPrototypeOf(statement) as { run: (...params: unknown[]) => unknown }
  const original = proto.run
  const sql: string[] = []
  proto.run = function (this: Statement, ...params: unknown[]) {
    sql.push(this.source)
    return original.apply(this, params)
  }
  try {
    return { sql, value: fn() }
  } finally {
    proto.run = original
  }
}

/**
 * Lets the claims' own groups commit: they are waiting after this. (A group of claims that wait
 * would stay open ~2 ms for the next operation, nobody waiting for its commit; it is committed
 * here as a read from outside would, so that each test's submit starts a group of its own.)
 */
const aTurn = async (engine: ReturnType<typeof setup>['engine']) => {
  await new Promise((resolve) => setImmediate(resolve))
  engine.flush()
}

/**
 * A job left to the commit that no claim could take: written QUEUED, and the one claim still
 * waiting, answered "not granted" when the dispatch close.
 */
async function expectLeftQueued(engine: ReturnType<typeof setup>['engine'], jobId: string, claim: Promise<{ granted: boolean }>): Promise<void> {
  expect(engine.getJob(jobId).state).toBe('QUEUED')
  expect(dispatch!.size).toBe(1)
  dispatch!.close()
  expect((await claim).granted).toBe(false)
}

test('a job submitted while a claim waits is leased in its submit: its row written once, already RUNNING, and the group commits as the submit ends', async () => {
  // A group that would stay open to the end of the turn however slow the machine: the submit commits it.
  const { engine } = setup({ config: { groupMaxMs: 60_000 } })
  dispatch = new Dispatch(engine)
  const claim = dispatch.claim({ worker_id: 'w', streams: ['default'], max_wait_ms: 60_000 }, () => {})
  await aTurn(engine)
  const commitsBefore = engine.commits
  const { sql, value: submitted } = statementsOf(engine, () => engine.run(() => engine.submit(aJob())))
  // Committed before run() returned: the worker does not wait for the rest of the turn.
  expect(engine.commits).toBe(commitsBefore + 1)
  expect(sql.filter((s) => s.startsWith('INSERT INTO jobs'))).toHaveLength(1)
  expect(sql.filter((s) => s.startsWith('UPDATE jobs'))).toEqual([])
  expect(sql.filter((s) => s.startsWith('SAVEPOINT'))).toEqual([])
  const { job } = await submitted
  // The submit's answer is the job as submitted, as when the claim takes it at the commit.
  expect(job.state).toBe('QUEUED')
  const decision = await claim
  expect(decision.granted && decision.job_id).toBe(job.id)
  expect(engine.getJob(job.id)).toMatchObject({ state: 'RUNNING', attempts: 1, claimed_by: 'w' })
  expect(engine.jobEvents(job.id).map((event) => event.event_type)).toEqual(['JOB_SUBMITTED', 'LEASE_GRANTED'])
  expect(engine.getCapacity().leased).toBe(1)
  expect(dispatch.size).toBe(0)
})

test('a claim that asked for several jobs is answered as its turn at the commit would answer it: this job, then no more queued', async () => {
  const { engine } = setup()
  dispatch = new Dispatch(engine)
  const exchange = dispatch.exchange({ worker_id: 'local-1', claim: { streams: ['default'], max_jobs: 4, max_wait_ms: 60_000 } }, () => {})
  await aTurn(engine)
  const { job } = await engine.run(() => engine.submit(aJob()))
  const { claimed } = await exchange
  expect(claimed.granted.map((granted) => granted.job_id)).toEqual([job.id])
  expect(claimed.denial).toMatchObject({ granted: false, reason: 'No jobs queued' })
})

test('the oldest claim that can take the job gets it; an older one of other streams waits on', async () => {
  const { engine } = setup()
  dispatch = new Dispatch(engine)
  const other = dispatch.claim({ worker_id: 'w-other', streams: ['other'], max_wait_ms: 60_000 }, () => {})
  const first = dispatch.claim({ worker_id: 'w-1', streams: ['default'], max_wait_ms: 60_000 }, () => {})
  const second = dispatch.claim({ worker_id: 'w-2', streams: ['default'], max_wait_ms: 60_000 }, () => {})
  await aTurn(engine)
  const { job } = await engine.run(() => engine.submit(aJob()))
  const decision = await first
  expect(decision.granted && decision.job_id).toBe(job.id)
  expect(dispatch.size).toBe(2)
  dispatch.close()
  expect((await other).granted).toBe(false)
  expect((await second).granted).toBe(false)
})

test('an older job a claim would take first is taken first: a delayed job come due is not passed by a new one', async () => {
  const { engine, clock } = setup()
  dispatch = new Dispatch(engine)
  const delayed = engine.submit(aJob({ delay_ms: MINUTE })).job
  const claim = dispatch.claim({ worker_id: 'w', streams: ['default'], max_wait_ms: 60 * MINUTE }, () => {})
  await aTurn(engine)
  // Due now, though the claims' timer has not fired yet: the queue is not known empty.
  clock.advance(MINUTE)
  const fresh = (await engine.run(() => engine.submit(aJob()))).job
  const decision = await claim
  expect(decision.granted && decision.job_id).toBe(delayed.id)
  expect(engine.getJob(fresh.id).state).toBe('QUEUED')
})

test('a job that does not fit the capacity is written QUEUED, and no claim is answered', async () => {
  const { engine } = setup({ total_units: 2 })
  dispatch = new Dispatch(engine)
  const first = dispatch.claim({ worker_id: 'w', max_wait_ms: 60_000 }, () => {})
  await aTurn(engine)
  const fits = (await engine.run(() => engine.submit(aJob({ cost_units: 2 })))).job
  expect((await first).granted).toBe(true)
  const second = dispatch.claim({ worker_id: 'w2', max_wait_ms: 60_000 }, () => {})
  await aTurn(engine)
  const waiting = (await engine.run(() => engine.submit(aJob()))).job
  expect(engine.getJob(fits.id).state).toBe('RUNNING')
  await expectLeftQueued(engine, waiting.id, second)
})

test('a job of a paused queue is written QUEUED, and no claim is answered', async () => {
  const { engine } = setup()
  dispatch = new Dispatch(engine)
  engine.pauseQueue('paused')
  const claim = dispatch.claim({ worker_id: 'w', max_wait_ms: 60_000 }, () => {})
  await aTurn(engine)
  const paused = (await engine.run(() => engine.submit(aJob({ queue: 'paused' })))).job
  await expectLeftQueued(engine, paused.id, claim)
})

test('a unique job is not leased at its submit to a claim whose worker holds a lease', async () => {
  const { engine } = setup()
  dispatch = new Dispatch(engine)
  const first = dispatch.claim({ worker_id: 'w', max_wait_ms: 60_000 }, () => {})
  await aTurn(engine)
  await engine.run(() => engine.submit(aJob()))
  expect((await first).granted).toBe(true)
  const again = dispatch.claim({ worker_id: 'w', max_wait_ms: 60_000 }, () => {})
  await aTurn(engine)
  const unique = (await engine.run(() => engine.submit(aJob({ unique: true })))).job
  await expectLeftQueued(engine, unique.id, again)
})

test('a unique job is not leased at its submit to a claim whose worker holds queue API claims not yet leased', async () => {
  const { engine } = setup()
  dispatch = new Dispatch(engine)
  engine.submit(aJob())
  expect(engine.claim({ worker_id: 'w' })).toHaveLength(1)
  const claim = dispatch.claim({ worker_id: 'w', max_wait_ms: 60_000 }, () => {})
  await aTurn(engine)
  const unique = (await engine.run(() => engine.submit(aJob({ unique: true })))).job
  await expectLeftQueued(engine, unique.id, claim)
})

test('a batch submit is offered at the commit, where a claim of several jobs takes as many as it asked for', async () => {
  const { engine } = setup()
  dispatch = new Dispatch(engine)
  const exchange = dispatch.exchange({ worker_id: 'local-1', claim: { streams: ['default'], max_jobs: 3, max_wait_ms: 60_000 } }, () => {})
  await aTurn(engine)
  const answers = await engine.run(() => engine.submitMany([aJob(), aJob()]))
  const { claimed } = await exchange
  expect(claimed.granted.map((granted) => granted.job_id)).toEqual(answers.map((answer) => (answer.ok ? answer.value.job.id : null)))
})

test('a submit whose commit fails leaves its claim waiting in its place, and the next job goes to it', async () => {
  const { engine } = setup()
  dispatch = new Dispatch(engine)
  let failCommit = false
  engine.beforeCommit(() => {
    if (failCommit) throw new Error('disk I/O error')
  })
  const claim = dispatch.claim({ worker_id: 'w', max_wait_ms: 60_000 }, () => {})
  const later = dispatch.claim({ worker_id: 'w-later', max_wait_ms: 60_000 }, () => {})
  await aTurn(engine)
  failCommit = true
  await expect(engine.run(() => engine.submit(aJob()))).rejects.toThrow('disk I/O error')
  failCommit = false
  expect(dispatch.size).toBe(2)
  expect(engine.getCapacity().leased).toBe(0)
  const { job } = await engine.run(() => engine.submit(aJob()))
  const decision = await claim
  expect(decision.granted && decision.job_id).toBe(job.id)
  dispatch.close()
  expect((await later).granted).toBe(false)
})

/**
 * One random run of submits, waiting claims (several streams, several jobs), completions, pauses
 * and the clock, each step its own commit; returns what each claim was answered and what became
 * of each job, by the order of their submits (ids differ from run to run).
 */
async function randomRun(seed: number, leaseOnSubmit: boolean): Promise<{ trace: string[]; leasedAtSubmit: number }> {
  const random = seededRandom(seed)
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!
  const { engine, clock } = setup({ total_units: 4 })
  const run = new Dispatch(engine)
  const ctx = engineContext(engine)
  const inner = ctx.waitingClaims!
  let leasedAtSubmit = 0
  ctx.waitingClaims = leaseOnSubmit
    ? (job) => {
        const leased = inner(job)
        if (leased) leasedAtSubmit += 1
        return leased
      }
    : null
  const trace: string[] = []
  const submitted: string[] = []
  const running: { worker_id: string; job_id: string; lease_token: string; attempt_id: string }[] = []
  const named = (jobId: string) => `job${submitted.indexOf(jobId)}`
  for (let step = 0; step < 150; step++) {
    const roll = random()
    if (roll < 0.3) {
      const claimNo = step
      const streams = pick([['a'], ['b'], ['a', 'b'], ['b', 'a']])
      const maxJobs = pick([1, 1, 2, 3])
      void run
        .exchange({ worker_id: `w${claimNo}`, claim: { streams, max_jobs: maxJobs, max_wait_ms: 3_600_000 } }, () => {})
        .then(({ claimed }) => {
          for (const granted of claimed.granted) running.push({ worker_id: `w${claimNo}`, ...granted })
          trace.push(`claim ${claimNo}: ${claimed.granted.map((granted) => named(granted.job_id)).join(',')} ${claimed.denial?.reason ?? ''}`)
        })
    } else if (roll < 0.65) {
      const job = aJob({ queue: pick(['a', 'b']), priority: pick(['LOW', 'NORMAL', 'HIGH']), cost_units: pick([1, 1, 2, 3]), delay_ms: pick([0, 0, 0, MINUTE]), unique: random() < 0.1 })
      const { job: written } = await engine.run(() => engine.submit(job))
      submitted.push(written.id)
    } else if (roll < 0.8 && running.length > 0) {
      const done = running.splice(Math.floor(random() * running.length), 1)[0]!
      await engine.run(() => engine.complete({ ...done, result: {} })).catch((error: Error) => trace.push(`complete refused: ${error.message.replace(/[0-9a-f-]{36}/, 'lease')}`))
    } else if (roll < 0.85) {
      const queue = pick(['a', 'b'])
      if (random() < 0.5) engine.pauseQueue(queue)
      else engine.resumeQueue(queue)
    } else {
      clock.advance(pick([1_000, 30_000, MINUTE]))
      run.wakeIfDue()
    }
    await aTurn(engine)
  }
  run.close()
  await aTurn(engine)
  for (const id of submitted) trace.push(`${named(id)} ${engine.getJob(id).state} ${engine.jobEvents(id).map((event) => event.event_type).join('>')}`)
  return { trace, leasedAtSubmit }
}

test('lease-on-submit obeys the same capacity, priority and head-of-line rules as a claim: leased at its submit or at the commit, every claim is answered the same jobs and every job ends the same (random runs)', async () => {
  let leasedAtSubmit = 0
  for (let seed = 1; seed <= 16; seed++) {
    const atSubmit = await randomRun(seed, true)
    const atCommit = await randomRun(seed, false)
    expect(atSubmit.trace, `seed ${seed}`).toEqual(atCommit.trace)
    expect(atCommit.leasedAtSubmit).toBe(0)
    leasedAtSubmit += atSubmit.leasedAtSubmit
  }
  // The runs did lease at the submit (and at the commit: the traces name both).
  expect(leasedAtSubmit).toBeGreaterThan(20)
})
