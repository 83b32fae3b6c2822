import { describe, expect, it } from 'vitest'
import { aJob, setup, T0 } from '../helpers/engine'
import { SECOND } from '../../src-main/engine/rules/clock'
import { FILE_IDLE_MS } from '../../src-main/engine/verbs/files'
import { join } from 'node:path'
import { claimOrFail, eventTypes, leaseOrFail, messageIds, openFileEngine, tempDir } from './support'

describe('lease expiry', () => {
  it('the reaper expires a lease once expires_at has passed, not before', () => {
    const { engine, clock } = setup()
    engine.submit(aJob())
    const { lease } = leaseOrFail(engine, 'w')
    clock.advance(35 * SECOND - 1)
    expect(engine.reap()).toMatchObject({ leases: 0, claims: 0 })
    expect(engine.getLease(lease.id).state).toBe('ACTIVE')
    clock.advance(2)
    expect(engine.reap()).toMatchObject({ leases: 1, claims: 0 })
    expect(engine.getLease(lease.id)).toMatchObject({ state: 'EXPIRED', release_status: 'TIMEOUT' })
  })

  it('a clock set back does not hold a silent lease for as long as it went back: the lease lasts its TTL and grace from the pass that sees it', () => {
    const { engine, clock } = setup()
    engine.submit(aJob())
    const { lease } = leaseOrFail(engine, 'w', 10) // 10 s and the 5 s grace: due at T0 + 15 s
    clock.set(T0 - 2 * 3600 * SECOND) // NTP takes two hours back
    expect(engine.reap()).toMatchObject({ leases: 0 })
    expect(engine.getLease(lease.id)).toMatchObject({ state: 'ACTIVE', expires_at: T0 - 2 * 3600 * SECOND + 15 * SECOND })
    clock.advance(15 * SECOND + 1)
    expect(engine.reap()).toMatchObject({ leases: 1 })
    expect(engine.getLease(lease.id)).toMatchObject({ state: 'EXPIRED', release_status: 'TIMEOUT' })
  })

  it('a reaper pass with nothing due commits nothing: an idle host\'s timer takes no write lock', () => {
    const { engine, clock } = setup()
    engine.submit(aJob())
    engine.submit(aJob())
    leaseOrFail(engine, 'w')
    engine.claim({ worker_id: 'c' })
    const commits = engine.commits
    clock.advance(SECOND)
    expect(engine.reap()).toEqual({ leases: 0, claims: 0, idleFiles: 0 })
    expect(engine.commits).toBe(commits)
    clock.advance(60 * SECOND)
    expect(engine.reap()).toMatchObject({ leases: 1, claims: 1 })
    expect(engine.commits).toBeGreaterThan(commits)
  })

  it('nextDueAt names the earliest lease or claim expiry, for a host that sleeps until then', () => {
    const { engine, clock } = setup()
    expect(engine.nextDueAt()).toBeNull()
    engine.submit(aJob())
    engine.submit(aJob())
    leaseOrFail(engine, 'w', 100)
    clock.advance(SECOND)
    engine.claim({ worker_id: 'c' })
    expect(engine.nextDueAt()).toBe(T0 + SECOND + 60 * SECOND)
  })

  it('nextDueAt also names the moment a held file lease goes idle, 30 s after its last acquire or heartbeat', () => {
    const { engine, clock } = setup()
    expect(engine.acquireFile({ file: '/f/a', owner_id: 'editor' })).toMatchObject({ granted: true })
    expect(engine.nextDueAt()).toBe(T0 + FILE_IDLE_MS)
    clock.advance(FILE_IDLE_MS)
    expect(engine.reap()).toMatchObject({ idleFiles: 1 })
    expect(engine.nextDueAt()).toBeNull()
  })

  it('an expired lease frees its capacity at once and records the attempt as TIMEOUT', () => {
    const { engine, clock } = setup({ total_units: 10 })
    const { job } = engine.submit(aJob({ cost_units: 10 }))
    leaseOrFail(engine, 'w')
    expect(engine.getCapacity().available).toBe(0)
    clock.advance(36 * SECOND)
    engine.reap()
    expect(engine.getCapacity()).toMatchObject({ leased: 0, available: 10 })
    expect(engine.attempts(job.id)[0]).toMatchObject({ outcome: 'TIMEOUT', disposition: 'REQUEUED', finished_at: clock.now() })
  })

  it('expired lease requeues with exponential backoff, then dead-letters after max_attempts', () => {
    const { engine, clock } = setup()
    const { job } = engine.submit(aJob({ max_attempts: 3 }))
    const delays: number[] = []
    for (let attempt = 1; attempt <= 2; attempt++) {
      leaseOrFail(engine, 'w')
      clock.advance(36 * SECOND)
      engine.reap()
      const requeued = engine.getJob(job.id)
      expect(requeued).toMatchObject({ state: 'QUEUED', attempts: attempt, dead_letter: false, claimed_by: null })
      delays.push(requeued.next_retry_at! - clock.now())
      clock.set(requeued.next_retry_at!)
    }
    expect(delays).toEqual([2 * SECOND, 4 * SECOND])
    leaseOrFail(engine, 'w')
    clock.advance(36 * SECOND)
    engine.reap()
    expect(engine.getJob(job.id)).toMatchObject({ state: 'TIMEOUT', final_status: 'TIMEOUT', dead_letter: true, attempts: 3 })
    expect(engine.attempts(job.id).map((a) => [a.outcome, a.disposition])).toEqual([
      ['TIMEOUT', 'REQUEUED'],
      ['TIMEOUT', 'REQUEUED'],
      ['TIMEOUT', 'DEAD_LETTERED'],
    ])
    expect(engine.requestLease({ worker_id: 'w' })).toMatchObject({ granted: false, reason: 'No jobs queued' })
    const events = engine.jobEvents(job.id)
    expect(eventTypes(events).filter((t) => t === 'LEASE_EXPIRED')).toHaveLength(3)
    const last = events[events.length - 1]!
    expect(last.event_type).toBe('JOB_TIMEOUT')
    expect(last.data).toMatchObject({ dead_letter: true })
  })

  it('an expired attempt\'s error names why its lease ended: missed heartbeats, or its worker exiting', () => {
    const { engine, clock } = setup()
    const missed = engine.submit(aJob()).job
    leaseOrFail(engine, 'w1')
    clock.advance(36 * SECOND)
    engine.reap()
    const exited = engine.submit(aJob()).job
    const { lease } = leaseOrFail(engine, 'w2')
    engine.expireLeasesOfWorker(lease.worker_id)
    expect(engine.attempts(missed.id)[0]!.error).toEqual({ code: 'lease_expired', reason: 'no_heartbeat', message: 'The lease expired without a heartbeat' })
    expect(engine.attempts(exited.id)[0]!.error).toEqual({ code: 'lease_expired', reason: 'worker_exited', message: 'The worker exited while holding the lease' })
    expect(engine.attempts(exited.id)[0]).toMatchObject({ outcome: 'TIMEOUT', disposition: 'REQUEUED' })
  })

  it('a grant handed back unheard (not_delivered) costs no attempt: the job is requeued at once with one more, never dead-lettered', () => {
    const { engine } = setup()
    const { job } = engine.submit(aJob({ max_attempts: 1 }))
    const { lease } = claimOrFail(engine, 'w')
    expect(engine.handBackLeases('w', [lease.id])).toBe(1)
    expect(engine.getJob(job.id)).toMatchObject({ state: 'QUEUED', attempts: 1, max_attempts: 2, next_retry_at: null, dead_letter: false })
    expect(engine.getJob(job.id).max_attempts - engine.getJob(job.id).attempts).toBe(1) // as many left as before the grant
    expect(engine.attempts(job.id)[0]).toMatchObject({
      outcome: 'TIMEOUT',
      disposition: 'REQUEUED',
      error: { code: 'lease_expired', reason: 'not_delivered', message: 'The grant never reached its worker, which gave it back' },
    })
    expect(claimOrFail(engine, 'w').job.id).toBe(job.id) // at once: no backoff
  })

  it('a lease heartbeated since its grant reached its worker: handing it back leaves it held', () => {
    const { engine, clock } = setup()
    engine.submit(aJob())
    const { lease } = claimOrFail(engine, 'w')
    clock.advance(SECOND)
    engine.heartbeat({ lease_id: lease.id })
    expect(engine.handBackLeases('w', [lease.id])).toBe(0)
    expect(engine.activeLeasesByWorker().get('w')).toHaveLength(1)
  })

  it('a job with max_attempts 1 is dead-lettered on its first expiry', () => {
    const { engine, clock } = setup()
    const { job } = engine.submit(aJob({ max_attempts: 1 }))
    claimOrFail(engine, 'w')
    clock.advance(36 * SECOND)
    engine.reap()
    expect(engine.getJob(job.id)).toMatchObject({ state: 'TIMEOUT', dead_letter: true })
  })

  it('a job an expired lease ends carries the error its attempt records, as a failed job carries its failure', () => {
    const { engine, clock } = setup()
    const timedOut = engine.submit(aJob({ max_attempts: 1 })).job
    claimOrFail(engine, 'w')
    clock.advance(36 * SECOND)
    engine.reap()
    const error = { code: 'lease_expired', reason: 'no_heartbeat', message: 'The lease expired without a heartbeat' }
    expect(engine.attempts(timedOut.id)[0]!.error).toEqual(error)
    expect(engine.getJob(timedOut.id)).toMatchObject({ state: 'TIMEOUT', final_status: 'TIMEOUT', error })
    const canceled = engine.submit(aJob()).job
    const { lease } = claimOrFail(engine, 'w2')
    engine.cancel(canceled.id)
    engine.expireLeasesOfWorker(lease.worker_id)
    expect(engine.getJob(canceled.id)).toMatchObject({ state: 'CANCELED', error: engine.attempts(canceled.id)[0]!.error })
    expect(engine.getJob(canceled.id).error).toMatchObject({ code: 'lease_expired', reason: 'worker_exited', cancel_requested: true })
  })

  it('the backoff policy comes from config and is capped', () => {
    const { engine, clock } = setup({ config: { backoff: { baseMs: 10 * SECOND, maxMs: 15 * SECOND }, maxAttempts: 10 } })
    const { job } = engine.submit(aJob())
    const delays: number[] = []
    for (let i = 0; i < 3; i++) {
      leaseOrFail(engine, 'w')
      clock.advance(36 * SECOND)
      engine.reap()
      const j = engine.getJob(job.id)
      delays.push(j.next_retry_at! - clock.now())
      clock.set(j.next_retry_at!)
    }
    expect(delays).toEqual([10 * SECOND, 15 * SECOND, 15 * SECOND])
  })

  it('a requeue after expiry gives the job a new stream message', () => {
    const { engine, clock } = setup()
    const { job } = engine.submit(aJob({ queue: 'q' }))
    claimOrFail(engine, 'w')
    clock.advance(36 * SECOND)
    engine.reap()
    expect(messageIds(engine, job.id)).toEqual([job.stream_message_id, engine.getJob(job.id).stream_message_id])
    expect(engine.getJob(job.id).stream_message_id).toBeGreaterThan(job.stream_message_id!)
  })

  it('a cancel-requested job whose lease expires ends CANCELED, not requeued', () => {
    const { engine, clock } = setup()
    const { job } = engine.submit(aJob())
    leaseOrFail(engine, 'w')
    engine.cancel(job.id)
    clock.advance(36 * SECOND)
    engine.reap()
    expect(engine.getJob(job.id).state).toBe('CANCELED')
  })

  it.each([1, 3])('a cancel outlives the lease: with max_attempts %i, a cancel-requested job whose worker exits ends CANCELED, neither retried nor dead-lettered, its attempt TIMEOUT saying a cancel was pending', (maxAttempts) => {
    const { engine } = setup()
    const { job } = engine.submit(aJob({ max_attempts: maxAttempts }))
    const { lease } = leaseOrFail(engine, 'w')
    engine.cancel(job.id)
    engine.expireLeasesOfWorker(lease.worker_id)
    expect(engine.getJob(job.id)).toMatchObject({ state: 'CANCELED', final_status: 'CANCELED', dead_letter: false, next_retry_at: null })
    expect(engine.attempts(job.id)).toMatchObject([
      {
        outcome: 'TIMEOUT',
        disposition: 'FINAL',
        error: { code: 'lease_expired', reason: 'worker_exited', cancel_requested: true, message: 'The worker exited while holding the lease; a cancel was pending' },
      },
    ])
    expect(eventTypes(engine.jobEvents(job.id))).not.toContain('JOB_REQUEUED')
  })

  it('the reaper expires many due leases in one pass and leaves live ones', () => {
    const { engine, clock } = setup({ total_units: 10_000 })
    for (let i = 0; i < 30; i++) engine.submit(aJob())
    for (let i = 0; i < 20; i++) leaseOrFail(engine, `w${i}`, 10)
    for (let i = 0; i < 10; i++) leaseOrFail(engine, `v${i}`, 100)
    clock.advance(20 * SECOND)
    expect(engine.reap().leases).toBe(20)
    expect(engine.snapshot().leases.active).toBe(10)
  })

  it('the reaper expires leases right after a reopen', () => {
    const { dir, cleanup } = tempDir()
    try {
      const path = join(dir, 'leasehold.db')
      const before = openFileEngine(path)
      const { job } = before.engine.submit(aJob())
      const { lease } = leaseOrFail(before.engine, 'w')
      before.sqlite.close()

      // The process was down past the lease's expiry; the host reaps once right after opening.
      const clock = before.clock
      clock.advance(5 * 60 * SECOND)
      const after = openFileEngine(path, { clock })
      expect(after.engine.getLease(lease.id).state).toBe('ACTIVE')
      expect(after.engine.nextDueAt()).toBe(lease.expires_at)
      expect(after.engine.reap().leases).toBe(1)
      expect(after.engine.getLease(lease.id).state).toBe('EXPIRED')
      expect(after.engine.getJob(job.id)).toMatchObject({ state: 'QUEUED', attempts: 1 })
      expect(after.engine.getCapacity().leased).toBe(0)
      after.sqlite.close()
    } finally {
      cleanup()
    }
  })
})
