/**
 * A wall clock set back (NTP correcting a clock that ran fast, a user setting it; while the host
 * runs or while it is down) stretches no wait the host set as "now + a duration", and no limit
 * counts from a moment in the future (reaper.ts `reaimAfterSetBack`). The leases' own expiry:
 * expiry.test.ts.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { join } from 'node:path'
import { aJob, setup, T0 } from '../helpers/engine'
import { HOUR, ManualClock, SECOND } from '../../src-main/engine/rules/clock'
import { backoffDelay } from '../../src-main/engine/rules/backoff'
import { DEFAULT_ENGINE_CONFIG } from '../../src-main/engine/rules/engine-config'
import type { Engine, Job, Lease, SubmitJob } from '../../src-main/engine'
import { FILE_IDLE_MS, FILE_RETRY_MS } from '../../src-main/engine/verbs/files'
import { claimOrFail, leaseOrFail, openFileEngine, tempDir } from './support'

/** The default lease's TTL and grace: 30 s and 5 s. */
const LASTS = 35 * SECOND
const BACK = 3 * HOUR

const cleanups: (() => void)[] = []
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup()
})

/** An engine on a database file, and a way to stop it and start another on the same file with `clock`. */
function restartable(): { engine: Engine; clock: ManualClock; restart: (clock: ManualClock) => Engine } {
  const { dir, cleanup } = tempDir()
  cleanups.push(cleanup)
  const path = join(dir, 'leasehold.db')
  let opened = openFileEngine(path)
  cleanups.unshift(() => opened.sqlite.close())
  return {
    engine: opened.engine,
    clock: opened.clock,
    restart: (clock) => {
      opened.sqlite.close()
      opened = openFileEngine(path, { clock })
      return opened.engine
    },
  }
}

/** Submits a job, leases it to worker `w` and has it heartbeated `ran` ms later. */
function runFor(engine: Engine, clock: ManualClock, ran: number, job: Partial<SubmitJob> = {}): { job: Job; lease: Lease } {
  const { job: submitted } = engine.submit(aJob(job))
  const { lease } = leaseOrFail(engine, 'w')
  clock.advance(ran)
  engine.heartbeat({ lease_id: lease.id, worker_id: 'w' })
  return { job: submitted, lease }
}

/** Heartbeats the lease every 10 s until the reaper ends it; the time it ended at. */
function heartbeatUntilEnded(engine: Engine, clock: ManualClock, leaseId: string, giveUpAfter: number): number {
  const until = clock.now() + giveUpAfter
  while (clock.now() < until) {
    clock.advance(10 * SECOND)
    engine.reap()
    if (engine.getLease(leaseId).state !== 'ACTIVE') return clock.now()
    engine.heartbeat({ lease_id: leaseId, worker_id: 'w' })
  }
  return Infinity
}

/** Takes the next job and fails its attempt, retryably. */
function failRetryably(engine: Engine): void {
  const { lease } = claimOrFail(engine, 'w')
  engine.fail({ job_id: lease.job_id, attempt_id: lease.attempt_id!, worker_id: 'w', lease_token: lease.token!, error: { message: 'no', retryable: true } })
}

describe('a clock set back', () => {
  it("does not stretch a lease's max_runtime_s: heartbeats carry it no further than the runtime counted from the pass that sees the set-back", () => {
    const { engine, clock } = setup()
    const { job, lease } = runFor(engine, clock, 20 * SECOND, { max_runtime_s: 60 })
    clock.set(T0 - BACK)
    const seen = clock.now()
    engine.reap()
    // It had run 20 s: 40 s of its runtime are left, then the TTL and grace.
    const ended = heartbeatUntilEnded(engine, clock, lease.id, HOUR)
    expect(ended).toBeLessThanOrEqual(seen + 40 * SECOND + LASTS + 10 * SECOND)
    expect(engine.getJob(job.id).error).toMatchObject({ code: 'max_runtime_exceeded' })
  })

  it('does not stretch the TTL and grace a cancel leaves a worker that keeps heartbeating: they count from the pass that sees the set-back at the latest', () => {
    const { engine, clock } = setup()
    const { job, lease } = runFor(engine, clock, 10 * SECOND)
    engine.cancel(job.id)
    clock.set(T0 - BACK)
    const seen = clock.now()
    engine.reap()
    const ended = heartbeatUntilEnded(engine, clock, lease.id, HOUR)
    expect(ended).toBeLessThanOrEqual(seen + LASTS + 10 * SECOND)
    expect(engine.getJob(job.id).state).toBe('CANCELED')
    const expired = engine.jobEvents(job.id).find((event) => event.event_type === 'LEASE_EXPIRED')!
    expect(expired.data).toMatchObject({ reason: 'cancel_not_stopped' })
  })

  it("does not stretch a retry's backoff: a job waits no longer than its own backoff from the pass that sees the set-back", () => {
    const { engine, clock } = setup()
    const { job } = engine.submit(aJob({ max_attempts: 5 }))
    for (let attempt = 1; attempt <= 3; attempt++) {
      failRetryably(engine)
      clock.set(engine.getJob(job.id).eligible_at)
    }
    failRetryably(engine)
    const backoff = backoffDelay(4, DEFAULT_ENGINE_CONFIG.backoff)
    expect(engine.getJob(job.id)).toMatchObject({ state: 'QUEUED', next_retry_at: clock.now() + backoff })
    clock.set(clock.now() - BACK)
    engine.reap()
    expect(engine.getJob(job.id)).toMatchObject({ next_retry_at: clock.now() + backoff, eligible_at: clock.now() + backoff })
    clock.advance(backoff)
    expect(claimOrFail(engine, 'w').lease.job_id).toBe(job.id)
  })

  it("does not stretch a retry's backoff across a restart either: the host started on a clock behind the stored times re-aims it", () => {
    const { engine, clock, restart } = restartable()
    const { job } = engine.submit(aJob({ max_attempts: 3 }))
    failRetryably(engine)
    const backoff = backoffDelay(1, DEFAULT_ENGINE_CONFIG.backoff)
    const behind = new ManualClock(clock.now() - BACK)
    const again = restart(behind)
    again.reap()
    expect(again.getJob(job.id)).toMatchObject({ next_retry_at: behind.now() + backoff, eligible_at: behind.now() + backoff })
  })

  it('leaves a delayed job at the time it was given: a run_at is the submitter\'s own wall-clock time', () => {
    const { engine, clock } = setup()
    const { job } = engine.submit(aJob({ run_at: T0 + HOUR }))
    clock.set(T0 - BACK)
    engine.reap()
    expect(engine.getJob(job.id)).toMatchObject({ run_at: T0 + HOUR, eligible_at: T0 + HOUR })
  })

  it('does not stretch a queue API claim: it runs out its claim TTL from the pass that sees the set-back', () => {
    const { engine, clock } = setup()
    engine.submit(aJob())
    const [claimed] = engine.claim({ worker_id: 'c' }) as [Job]
    clock.set(T0 - BACK)
    engine.reap()
    expect(engine.getJob(claimed.id).claim_expires_at).toBe(clock.now() + DEFAULT_ENGINE_CONFIG.claimTtlS * SECOND)
    clock.advance(DEFAULT_ENGINE_CONFIG.claimTtlS * SECOND)
    expect(engine.reap()).toMatchObject({ claims: 1 })
    expect(engine.getJob(claimed.id).state).toBe('QUEUED')
  })

  it('does not stretch a queue API claim across a restart either', () => {
    const { engine, clock, restart } = restartable()
    engine.submit(aJob())
    const [claimed] = engine.claim({ worker_id: 'c' }) as [Job]
    const behind = new ManualClock(clock.now() - BACK)
    const again = restart(behind)
    again.reap()
    expect(again.getJob(claimed.id).claim_expires_at).toBe(behind.now() + DEFAULT_ENGINE_CONFIG.claimTtlS * SECOND)
  })

  it("does not keep a silent file lease: it goes idle 30 s after the pass that sees the set-back, and the denied requester's one retry is no further than 180 s off", () => {
    const { engine, clock } = setup()
    expect(engine.acquireFile({ file: '/f/a', owner_id: 'editor' })).toMatchObject({ granted: true })
    expect(engine.acquireFile({ file: '/f/a', owner_id: 'other' })).toMatchObject({ granted: false })
    clock.set(T0 - BACK)
    engine.reap()
    expect(engine.fileRetryAt('/f/a', 'other')).toBe(clock.now() + FILE_RETRY_MS)
    clock.advance(FILE_IDLE_MS)
    expect(engine.reap()).toMatchObject({ idleFiles: 1 })
  })

  it('does not keep a silent file lease across a restart either', () => {
    const { engine, clock, restart } = restartable()
    expect(engine.acquireFile({ file: '/f/a', owner_id: 'editor' })).toMatchObject({ granted: true })
    const behind = new ManualClock(clock.now() - BACK)
    const again = restart(behind)
    again.reap()
    behind.advance(FILE_IDLE_MS)
    expect(again.reap()).toMatchObject({ idleFiles: 1 })
  })

  it('that nothing stored lies ahead of moves nothing, and an idle pass still commits nothing', () => {
    const { engine, clock } = setup()
    engine.submit(aJob())
    const [claimed] = engine.claim({ worker_id: 'c' }) as [Job]
    const expiresAt = engine.getJob(claimed.id).claim_expires_at
    clock.advance(SECOND)
    engine.reap()
    const commits = engine.commits
    clock.advance(SECOND)
    engine.reap()
    expect(engine.commits).toBe(commits)
    expect(engine.getJob(claimed.id).claim_expires_at).toBe(expiresAt)
  })
})
