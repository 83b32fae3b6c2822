/**
 * the files contract, phase 5, in the engine: still blocked after the one retry → a hard stop with a full
 * blocker report (never a silent skip), the job BLOCKED with its capacity given back, and the
 * operator's three answers (retry, force_release, cancel), each an event with its note.
 */
import { describe, expect, test } from 'vitest'
import type { EventRow, FileLeaseRow } from '../../src-main/db/schema'
import { SECOND } from '../../src-main/engine/rules/clock'
import { FILE_HANDOVER_MS, FILE_RETRY_MS } from '../../src-main/engine/verbs/files'
import type { Blocker, Engine } from '../../src-main/engine'
import { aJob, setup, T0 } from '../helpers/engine'
import { claimOrFail, expectEngineError, messageIds } from './support'
import { sql } from '../helpers/database'

const FILE = '/repo/src/shared.ts'

function events(engine: Engine, type: string): (Omit<EventRow, 'data'> & { data: any })[] {
  return sql(engine)
    .all<EventRow>('SELECT * FROM events WHERE event_type = ? ORDER BY id', type)
    .map((e) => ({ ...e, data: JSON.parse(e.data) }))
}

function fileRows(engine: Engine, file: string): FileLeaseRow[] {
  return sql(engine).all<FileLeaseRow>('SELECT * FROM file_leases WHERE file = ? ORDER BY rowid', file)
}

function runningJob(engine: Engine, workerId: string, cost = 3, extra: Parameters<typeof aJob>[0] = {}) {
  engine.submit(aJob({ cost_units: cost, ...extra }))
  return claimOrFail(engine, workerId)
}

/**
 * w1 holds FILE (since T0), w2 is denied at T0 + 5 s, both stay alive, and w2's one retry at
 * denied_at + 180 s finds FILE still held: w2 is halted.
 */
function halted(options: { file?: string; requesterExtra?: Parameters<typeof aJob>[0]; beforeRetry?: (engine: Engine, requesterJobId: string) => void } = {}) {
  const file = options.file ?? FILE
  const s = setup()
  const { engine, clock } = s
  const holder = runningJob(engine, 'w1', 3)
  const requester = runningJob(engine, 'w2', 4, options.requesterExtra)
  const holderFile = engine.acquireFile({ file, owner_id: 'w1', lease_id: holder.lease.id })
  if (!holderFile.granted) throw new Error('holder not granted')
  // The requester also holds another file: the halt must give it back.
  engine.acquireFile({ file: '/repo/requester-own.ts', owner_id: 'w2', lease_id: requester.lease.id })
  clock.advance(5 * SECOND)
  const deniedAt = clock.now()
  expect(engine.acquireFile({ file, owner_id: 'w2', lease_id: requester.lease.id })).toMatchObject({ code: 'file_lease_held' })
  const retryAt = deniedAt + FILE_RETRY_MS
  while (clock.now() < retryAt) {
    clock.advance(Math.min(10 * SECOND, retryAt - clock.now()))
    engine.heartbeat({ lease_id: holder.lease.id })
    engine.heartbeat({ lease_id: requester.lease.id })
    engine.heartbeatFile({ file, owner_id: 'w1' })
    engine.heartbeatFile({ file: '/repo/requester-own.ts', owner_id: 'w2' })
    engine.reap()
  }
  options.beforeRetry?.(engine, requester.job.id)
  const leasedBefore = engine.getCapacity().leased
  const result = engine.acquireFile({ file, owner_id: 'w2', lease_id: requester.lease.id })
  if (result.granted || result.code !== 'blocked') throw new Error(`expected a halt, got ${JSON.stringify(result)}`)
  return { ...s, file, holder, requester, holderFile: holderFile.file_lease, deniedAt, retryAt, blocker: result.blocker, leasedBefore }
}

/** Owners that name no job lease: `holder` holds FILE and keeps it alive with `keep`, `requester` is denied and halted at its retry. */
function haltedWithoutJobs(holder: string, requester: string, keep: (engine: Engine) => unknown) {
  const s = setup()
  s.engine.acquireFile({ file: FILE, owner_id: holder })
  s.engine.acquireFile({ file: FILE, owner_id: requester })
  for (let t = 0; t < 18; t++) {
    s.clock.advance(10 * SECOND)
    keep(s.engine)
  }
  const result = s.engine.acquireFile({ file: FILE, owner_id: requester })
  if (result.granted || result.code !== 'blocked') throw new Error('expected a halt')
  return { ...s, blocker: result.blocker }
}

describe('halt: still blocked after the retry', () => {
  test("the halted job's progress and note go with the attempt that ended: a BLOCKED job does not say it is still 'acquiring' the file", () => {
    const { engine, requester } = halted({
      beforeRetry: (engine, jobId) => void engine.heartbeat({ lease_id: engine.getJob(jobId).lease_id!, worker_id: 'w2', progress: 0.4, note: `acquiring ${FILE}` }),
    })
    expect(engine.getJob(requester.job.id)).toMatchObject({ state: 'BLOCKED', progress: null, note: null })
  })

  test('the blocker report has every field: file, holder owner/job/acquired_at, age, retry_s 180, denied_at, retried_at, requester', () => {
    const { blocker, holder, requester, deniedAt, retryAt, holderFile } = halted()
    expect(blocker).toMatchObject({
      id: expect.any(String),
      file: FILE,
      holder_owner_id: 'w1',
      holder_job_id: holder.job.id,
      holder_acquired_at: T0,
      holder_last_heartbeat_at: retryAt,
      retry_s: 180,
      denied_at: deniedAt,
      retried_at: retryAt,
      requester_owner_id: 'w2',
      requester_job_id: requester.job.id,
      requester_lease_id: requester.lease.id,
      state: 'OPEN',
      resolution: null,
      note: null,
      resolved_at: null,
      created_at: retryAt,
    })
    expect(holderFile.acquired_at).toBe(T0)
  })

  test('the halt is explicit: BLOCKER_OPENED and JOB_BLOCKED events, the report stored and listed', () => {
    const { engine, blocker, requester, retryAt, deniedAt } = halted()
    const [opened] = events(engine, 'BLOCKER_OPENED')
    expect(opened).toMatchObject({ entity_type: 'BLOCKER', entity_id: blocker.id, job_id: requester.job.id, ts: retryAt })
    expect(opened!.data).toMatchObject({
      file: FILE,
      holder_owner_id: 'w1',
      age_s: (retryAt - T0) / 1000,
      retry_s: 180,
      denied_at: deniedAt,
      retried_at: retryAt,
      requester_owner_id: 'w2',
    })
    const [blocked] = events(engine, 'JOB_BLOCKED')
    expect(blocked).toMatchObject({ job_id: requester.job.id })
    expect(blocked!.data).toMatchObject({ state: 'BLOCKED', blocker_id: blocker.id, lease_id: requester.lease.id })
    expect(engine.getBlocker(blocker.id)).toEqual(blocker)
    expect(engine.listBlockers('OPEN').blockers.map((b) => b.id)).toEqual([blocker.id])
  })

  test('the halted job is BLOCKED and holds no capacity: its lease released BLOCKED, its attempt BLOCKED, its files released', () => {
    const { engine, requester, leasedBefore, retryAt } = halted()
    expect(engine.getJob(requester.job.id).state).toBe('BLOCKED')
    expect(engine.getLease(requester.lease.id)).toMatchObject({ state: 'RELEASED', release_status: 'BLOCKED', released_at: retryAt })
    expect(engine.getCapacity().leased).toBe(leasedBefore - 4)
    const [attempt] = engine.attempts(requester.job.id)
    expect(attempt).toMatchObject({ outcome: 'BLOCKED', disposition: 'BLOCKED', finished_at: retryAt })
    expect(fileRows(engine, '/repo/requester-own.ts')[0]).toMatchObject({ state: 'RELEASED', release_reason: 'job_blocked' })
    // A BLOCKED job is not picked by anyone until an operator answers.
    expect(engine.claimAndLease({ worker_id: 'w9' })).toMatchObject({ granted: false })
  })

  test('the holder keeps the file and its job through the halt', () => {
    const { engine, holder, holderFile } = halted()
    expect(fileRows(engine, FILE).filter((r) => r.state === 'ACTIVE').map((r) => r.id)).toEqual([holderFile.id])
    expect(engine.getJob(holder.job.id).state).toBe('RUNNING')
  })

  test('a halted job heartbeating its released lease is told it is no longer active', () => {
    const { engine, requester } = halted()
    expectEngineError(() => engine.heartbeat({ lease_id: requester.lease.id }), 409, 'lease_not_active')
  })
})

describe("the operator's answers", () => {
  test('retry: the blocked job is QUEUED and eligible at once; a BLOCKER_RESOLVED event carries the note', () => {
    const { engine, clock, blocker, requester } = halted()
    clock.advance(7 * SECOND)
    const { blocker: resolved } = engine.resolveBlocker(blocker.id, { action: 'retry', note: 'try again, w1 is nearly done', by: 'alice' })
    expect(resolved).toMatchObject({ state: 'RESOLVED', resolution: 'retry', note: 'try again, w1 is nearly done', resolved_by: 'alice', resolved_at: clock.now() })
    const job = engine.getJob(requester.job.id)
    expect(job).toMatchObject({ state: 'QUEUED', next_retry_at: null, eligible_at: clock.now() })
    const [event] = events(engine, 'BLOCKER_RESOLVED')
    expect(event).toMatchObject({ entity_id: blocker.id, job_id: requester.job.id, ts: clock.now() })
    expect(event!.data).toEqual({ action: 'retry', note: 'try again, w1 is nearly done', by: 'alice', file: FILE })
    // Eligible at once: the next claim takes it.
    expect(claimOrFail(engine, 'w3').job.id).toBe(requester.job.id)
  })

  test("an operator's retry of the halted job itself is refused, naming the blocker to answer instead", () => {
    const { engine, blocker, requester } = halted()
    expect(() => engine.retry(requester.job.id)).toThrow(`is BLOCKED; it is halted on ${FILE}: answer its blocker ${blocker.id} to run it again`)
    expect(engine.getJob(requester.job.id).state).toBe('BLOCKED')
  })

  test('retry of a job that costs more than the total now: requeued and reported (JOB_EXCEEDS_CAPACITY), as any job returning to the line', () => {
    // The total drops below the requester's cost (4) while it runs; its halt is not a return to the line.
    const { engine, blocker, requester } = halted({ beforeRetry: (engine) => engine.setCapacity({ total_units: 3 }) })
    expect(engine.jobEvents(requester.job.id).map((e) => e.event_type)).not.toContain('JOB_EXCEEDS_CAPACITY')
    engine.resolveBlocker(blocker.id, { action: 'retry' })
    const timeline = engine.jobEvents(requester.job.id)
    expect(timeline.map((e) => e.event_type).slice(-3)).toEqual(['JOB_REQUEUED', 'JOB_EXCEEDS_CAPACITY', 'BLOCKER_RESOLVED'])
    expect(timeline.at(-2)!.data).toEqual({ state: 'QUEUED', cost_units: 4, total_units: 3 })
  })

  test('a halt delivers no new stream message; a retry gives the job the next one', () => {
    const { engine, blocker, requester } = halted()
    expect(messageIds(engine, requester.job.id)).toEqual([requester.job.stream_message_id])
    engine.resolveBlocker(blocker.id, { action: 'retry' })
    const retried = engine.getJob(requester.job.id).stream_message_id!
    expect(messageIds(engine, requester.job.id)).toEqual([requester.job.stream_message_id, retried])
    expect(retried).toBeGreaterThan(requester.job.stream_message_id!)
  })

  test('retry gives a job that had used its last attempt one more', () => {
    const { engine, blocker, requester } = halted({ requesterExtra: { max_attempts: 1 } })
    engine.resolveBlocker(blocker.id, { action: 'retry' })
    expect(engine.getJob(requester.job.id)).toMatchObject({ state: 'QUEUED', attempts: 1, max_attempts: 2 })
    expect(claimOrFail(engine, 'w3').job.id).toBe(requester.job.id)
  })

  test('force_release: the holder loses the file (REVOKED), its heartbeat and release answer 409 file_lease_lost, and the blocked job is requeued', () => {
    const { engine, clock, blocker, requester, holderFile } = halted()
    clock.advance(SECOND)
    expect(engine.resolveBlocker(blocker.id, { action: 'force_release', note: 'w1 is stuck' })).toMatchObject({ taken_from_holder: true })
    expect(fileRows(engine, FILE).find((r) => r.id === holderFile.id)).toMatchObject({
      state: 'REVOKED',
      release_reason: 'force_released',
      released_at: clock.now(),
    })
    const [revoked] = events(engine, 'FILE_LEASE_REVOKED')
    expect(revoked).toMatchObject({ entity_id: holderFile.id })
    expect(revoked!.data).toMatchObject({ file: FILE, owner_id: 'w1', reason: 'force_released', by: 'operator' })
    expectEngineError(() => engine.heartbeatFile({ file: FILE, owner_id: 'w1' }), 409, 'file_lease_lost')
    expectEngineError(() => engine.releaseFile({ file: FILE, owner_id: 'w1' }), 409, 'file_lease_lost')
    expect(engine.getJob(requester.job.id).state).toBe('QUEUED')
    expect(events(engine, 'BLOCKER_RESOLVED')[0]!.data).toMatchObject({ action: 'force_release', note: 'w1 is stuck', taken_from_holder: true })
  })

  test('force_release hands the file to the halted requester: every other owner is refused it, the contention saying so, until the requester acquires it', () => {
    const { engine, clock, blocker, requester } = halted()
    engine.resolveBlocker(blocker.id, { action: 'force_release' })
    const handedAt = clock.now()
    clock.advance(SECOND)
    for (const owner_id of ['w3', 'w6']) {
      expect(engine.acquireFile({ file: FILE, owner_id })).toMatchObject({
        granted: false,
        code: 'file_lease_held',
        contention: { holder: { file: FILE, owner_id: 'w2', job_id: requester.job.id, acquired_at: handedAt, age_s: 1 }, handed_over: { blocker_id: blocker.id, expires_at: handedAt + FILE_HANDOVER_MS } },
      })
    }
    // A folder above it is refused too.
    expect(engine.acquireFile({ file: '/repo', owner_id: 'w4' })).toMatchObject({ code: 'file_lease_held', contention: { holder: { file: FILE }, handed_over: { blocker_id: blocker.id } } })
    // The requeued job takes it under its next job lease, and the handover is done.
    const again = claimOrFail(engine, 'w2')
    expect(again.job.id).toBe(requester.job.id)
    expect(engine.acquireFile({ file: FILE, owner_id: 'w2', lease_id: again.lease.id })).toMatchObject({ granted: true })
    expect(sql(engine).all('SELECT * FROM file_handovers')).toEqual([])
    engine.releaseFile({ file: FILE, owner_id: 'w2', lease_id: again.lease.id })
    expect(engine.acquireFile({ file: FILE, owner_id: 'w5' })).toMatchObject({ granted: true })
  })

  test("a job refused a folder above a file handed over waits naming the file kept for the requester, which holds nothing yet", () => {
    const { engine, blocker } = halted()
    engine.resolveBlocker(blocker.id, { action: 'force_release' })
    const third = runningJob(engine, 'w3', 1)
    expect(engine.acquireFile({ file: '/repo', owner_id: 'w3', lease_id: third.lease.id })).toMatchObject({ code: 'file_lease_held', contention: { holder: { file: FILE } } })
    expect(engine.waiting([engine.getJob(third.job.id)])[0]?.reason).toBe(`refused file /repo while ${FILE} is kept for w2 after a force release; waits to try it again`)
    // The file itself: kept for it, as before.
    const fourth = runningJob(engine, 'w4', 1)
    engine.acquireFile({ file: FILE, owner_id: 'w4', lease_id: fourth.lease.id })
    expect(engine.waiting([engine.getJob(fourth.job.id)])[0]?.reason).toBe(`refused file ${FILE}, kept for w2 after a force release; waits to try it again`)
  })

  test("a handover lapses FILE_HANDOVER_MS after the force release if the requester has not taken the file: it is anyone's again", () => {
    const { engine, clock, blocker } = halted()
    engine.resolveBlocker(blocker.id, { action: 'force_release' })
    clock.advance(FILE_HANDOVER_MS - 1)
    expect(engine.acquireFile({ file: FILE, owner_id: 'w3' })).toMatchObject({ code: 'file_lease_held', contention: { handed_over: { blocker_id: blocker.id } } })
    clock.advance(1)
    expect(engine.acquireFile({ file: FILE, owner_id: 'w4' })).toMatchObject({ granted: true })
  })

  test('a handover ends when its job ends: the requester canceled, another owner takes the file at once', () => {
    const { engine, clock, blocker, requester } = halted()
    engine.resolveBlocker(blocker.id, { action: 'force_release' })
    clock.advance(SECOND)
    expect(engine.cancel(requester.job.id)).toMatchObject({ state: 'CANCELED' })
    expect(engine.acquireFile({ file: FILE, owner_id: 'w3' })).toMatchObject({ granted: true, file_lease: { owner_id: 'w3' } })
    expect(sql(engine).all('SELECT * FROM file_handovers')).toEqual([])
  })

  /** The requester a force release handed FILE to fails its next attempt without taking the file. */
  function handedOverThenFailed(retryable: boolean) {
    const s = halted()
    s.engine.resolveBlocker(s.blocker.id, { action: 'force_release' })
    const again = claimOrFail(s.engine, 'w2')
    const report = { job_id: s.requester.job.id, attempt_id: again.lease.attempt_id, worker_id: 'w2', lease_token: again.lease.token }
    return { ...s, failed: s.engine.fail({ ...report, error: { code: 'failing', retryable } }) }
  }

  test('a handover ends when its job ends: the requester failed for good on its next attempt, another owner takes the file at once', () => {
    const { engine, requester, failed } = handedOverThenFailed(false)
    expect(failed).toMatchObject({ requeued: false })
    expect(engine.getJob(requester.job.id).state).toBe('FAILED')
    expect(engine.acquireFile({ file: FILE, owner_id: 'w3' })).toMatchObject({ granted: true })
  })

  test('a handover outlives a requeue of its job: the requester failed with attempts left is still handed the file', () => {
    const { engine, blocker, requester, failed } = handedOverThenFailed(true)
    expect(failed).toMatchObject({ requeued: true })
    expect(engine.acquireFile({ file: FILE, owner_id: 'w3' })).toMatchObject({ code: 'file_lease_held', contention: { holder: { job_id: requester.job.id }, handed_over: { blocker_id: blocker.id } } })
  })

  test('an owner refused while the file was handed over is refused afresh at its retry, never halted on a file nobody holds', () => {
    const { engine, clock, blocker } = halted()
    engine.acquireFile({ file: '/repo/x.ts', owner_id: 'w3' })
    engine.resolveBlocker(blocker.id, { action: 'force_release' })
    expect(engine.acquireFile({ file: FILE, owner_id: 'w3' })).toMatchObject({ code: 'file_lease_held' })
    clock.advance(FILE_RETRY_MS)
    expect(engine.acquireFile({ file: FILE, owner_id: 'w3' })).toMatchObject({ granted: true })
  })

  test('force_release for an owner that names no job lease: the holder re-acquiring at once is refused, and the requester is granted the file', () => {
    const { engine, clock, blocker } = haltedWithoutJobs('qholder', 'qreq', (engine) => engine.acquireFile({ file: FILE, owner_id: 'qholder' }))
    expect(engine.resolveBlocker(blocker.id, { action: 'force_release' })).toMatchObject({ taken_from_holder: true })
    clock.advance(SECOND)
    expect(engine.acquireFile({ file: FILE, owner_id: 'qholder' })).toMatchObject({ code: 'file_lease_held', contention: { holder: { owner_id: 'qreq' }, handed_over: { blocker_id: blocker.id } } })
    expect(engine.acquireFile({ file: FILE, owner_id: 'qreq' })).toMatchObject({ granted: true, file_lease: { owner_id: 'qreq' } })
  })

  test('the requester a force release handed the file to takes it at once, even while it waits for a retry it asked for again after its halt', () => {
    const { engine, clock, blocker } = haltedWithoutJobs('qholder', 'qreq', (engine) => engine.acquireFile({ file: FILE, owner_id: 'qholder' }))
    // The owner's next acquire starts a new denial and retry.
    expect(engine.acquireFile({ file: FILE, owner_id: 'qreq' })).toMatchObject({ code: 'file_lease_held' })
    expect(engine.resolveBlocker(blocker.id, { action: 'force_release' })).toMatchObject({ taken_from_holder: true })
    clock.advance(SECOND)
    expect(engine.acquireFile({ file: FILE, owner_id: 'qreq' })).toMatchObject({ granted: true, file_lease: { owner_id: 'qreq' } })
    expect(sql(engine).all('SELECT * FROM file_contentions')).toEqual([])
    expect(sql(engine).all('SELECT * FROM file_handovers')).toEqual([])
    // Another owner's pending retry is no handover of its own: still too early.
    engine.releaseFile({ file: FILE, owner_id: 'qreq' })
    engine.acquireFile({ file: '/repo/other.ts', owner_id: 'qholder' })
    engine.acquireFile({ file: '/repo/other.ts', owner_id: 'q3' })
    expectEngineError(() => engine.acquireFile({ file: '/repo/other.ts', owner_id: 'q3' }), 429, 'retry_too_early')
  })

  test('a handover ends when its requester takes a folder above the file: a lease on the folder covers the file', () => {
    const { engine, clock, blocker } = haltedWithoutJobs('qholder', 'qreq', (engine) => engine.acquireFile({ file: FILE, owner_id: 'qholder' }))
    engine.resolveBlocker(blocker.id, { action: 'force_release' })
    clock.advance(SECOND)
    expect(engine.acquireFile({ file: '/repo/src', owner_id: 'qreq' })).toMatchObject({ granted: true })
    engine.releaseFile({ file: '/repo/src', owner_id: 'qreq' })
    expect(engine.acquireFile({ file: FILE, owner_id: 'q3' })).toMatchObject({ granted: true, file_lease: { owner_id: 'q3' } })
  })

  test('force_release takes the file only from the holder the report named: one that let go meanwhile loses nothing, whoever holds the file now keeps it, and the answer says nothing was taken', () => {
    const { engine, clock, blocker, requester } = halted()
    engine.releaseFile({ file: FILE, owner_id: 'w1' })
    const third = runningJob(engine, 'w3', 1)
    expect(engine.acquireFile({ file: FILE, owner_id: 'w3', lease_id: third.lease.id })).toMatchObject({ granted: true })
    clock.advance(SECOND)
    // The answer says so: nothing was taken.
    expect(engine.resolveBlocker(blocker.id, { action: 'force_release', note: 'take it from w1' })).toMatchObject({ taken_from_holder: false })
    expect(engine.listFileLeases('ACTIVE').file_leases).toEqual([expect.objectContaining({ file: FILE, owner_id: 'w3' })])
    expect(events(engine, 'FILE_LEASE_REVOKED')).toEqual([])
    expect(events(engine, 'BLOCKER_RESOLVED')[0]!.data).toMatchObject({ action: 'force_release', taken_from_holder: false })
    expect(engine.getJob(requester.job.id).state).toBe('QUEUED')
    const report = { job_id: third.job.id, attempt_id: third.lease.attempt_id, worker_id: 'w3', lease_token: third.lease.token }
    expect(engine.complete(report)).toMatchObject({ ack: true })
  })

  test("a report speaks of the holder's job: when that job holds the file again under a new attempt, it holds it still, and force_release takes it from that attempt's lease", () => {
    const { engine, clock, blocker, holder, requester } = halted()
    // The holder's worker dies: its job lease expires, the job is requeued and its next attempt takes the file again.
    clock.advance(40 * SECOND)
    engine.reap()
    expect(engine.getBlocker(blocker.id)).toMatchObject({ holder_holds_now: false, holder_holds_since: null })
    clock.set(engine.getJob(holder.job.id).next_retry_at ?? clock.now())
    const again = claimOrFail(engine, 'w1')
    expect(again.job.id).toBe(holder.job.id)
    const retaken = engine.acquireFile({ file: FILE, owner_id: 'w1', lease_id: again.lease.id })
    if (!retaken.granted) throw new Error('expected the job to take its file again')
    expect(engine.getBlocker(blocker.id)).toMatchObject({ holder_holds_now: true, holder_holds_since: clock.now(), holder_acquired_at: T0 })
    expect(engine.resolveBlocker(blocker.id, { action: 'force_release' })).toMatchObject({ taken_from_holder: true })
    expect(fileRows(engine, FILE).find((r) => r.id === retaken.file_lease.id)).toMatchObject({ state: 'REVOKED', lease_id: again.lease.id })
    expect(engine.getJob(requester.job.id).state).toBe('QUEUED')
  })

  test('an owner that names no job and took the file again after letting go is not the holder the report named: force_release takes nothing from it', () => {
    const { engine, clock, blocker } = haltedWithoutJobs('holder', 'me', (engine) => engine.heartbeatFile({ file: FILE, owner_id: 'holder' }))
    engine.releaseFile({ file: FILE, owner_id: 'holder' })
    clock.advance(SECOND)
    engine.acquireFile({ file: FILE, owner_id: 'holder' })
    expect(engine.getBlocker(blocker.id)).toMatchObject({ holder_holds_now: false })
    expect(engine.resolveBlocker(blocker.id, { action: 'force_release' })).toMatchObject({ taken_from_holder: false })
  })

  test('force_release: the holder cannot take the file back, nor any other, under the job lease it lost it under (409 file_lease_lost)', () => {
    const { engine, blocker, holder } = halted()
    engine.resolveBlocker(blocker.id, { action: 'force_release' })
    expectEngineError(() => engine.acquireFile({ file: FILE, owner_id: 'w1', lease_id: holder.lease.id }), 409, 'file_lease_lost')
    expectEngineError(() => engine.acquireFile({ file: '/repo/other.ts', owner_id: 'w1', lease_id: holder.lease.id }), 409, 'file_lease_lost')
    expect(engine.listFileLeases('ACTIVE').file_leases.filter((l) => l.file === FILE)).toEqual([])
  })

  test('force_release: the holder cannot take the file back by leaving its job lease out either, while that job lease runs; once it ends, the owner is free to', () => {
    const { engine, blocker, holder } = halted()
    engine.resolveBlocker(blocker.id, { action: 'force_release' })
    expectEngineError(() => engine.acquireFile({ file: FILE, owner_id: 'w1' }), 409, 'file_lease_lost')
    // The requester it was handed to takes it, and lets it go.
    const again = claimOrFail(engine, 'w2')
    expect(engine.acquireFile({ file: FILE, owner_id: 'w2', lease_id: again.lease.id })).toMatchObject({ granted: true })
    engine.releaseFile({ file: FILE, owner_id: 'w2', lease_id: again.lease.id })
    const report = { job_id: holder.job.id, attempt_id: holder.lease.attempt_id, worker_id: 'w1', lease_token: holder.lease.token }
    engine.fail({ ...report, error: { code: 'file_lost', message: 'an operator took the file' } })
    expect(engine.acquireFile({ file: FILE, owner_id: 'w1' })).toMatchObject({ granted: true })
  })

  test("force_release: the holder's job cannot finish SUCCEEDED (409 file_lease_lost, nothing changes) but can fail", () => {
    const { engine, blocker, holder } = halted()
    engine.resolveBlocker(blocker.id, { action: 'force_release' })
    const before = engine.getJob(holder.job.id)
    expectEngineError(() => engine.release({ lease_id: holder.lease.id, status: 'SUCCEEDED' }), 409, 'file_lease_lost')
    const report = { job_id: holder.job.id, attempt_id: holder.lease.attempt_id, worker_id: 'w1', lease_token: holder.lease.token }
    expectEngineError(() => engine.complete(report), 409, 'file_lease_lost')
    expect(engine.getJob(holder.job.id)).toEqual(before)
    expect(engine.getLease(holder.lease.id).state).toBe('ACTIVE')
    const failed = engine.fail({ ...report, error: { code: 'file_lost', message: 'an operator took the file' } })
    expect(failed).toMatchObject({ ack: true, requeued: false })
    expect(engine.getJob(holder.job.id).state).toBe('FAILED')
  })

  test('a job whose cancel was asked for while it waited for its retry ends CANCELED at the halt, not BLOCKED: its report is resolved as a cancel', () => {
    const { engine, blocker, requester, leasedBefore } = halted({ beforeRetry: (engine, jobId) => engine.cancel(jobId, 'not needed', 'qa') })
    expect(engine.getJob(requester.job.id)).toMatchObject({ state: 'CANCELED' })
    expect(blocker).toMatchObject({ state: 'RESOLVED', resolution: 'cancel' })
    expect(engine.listBlockers('OPEN').blockers).toEqual([])
    expect(engine.getCapacity().leased).toBe(leasedBefore - 4)
  })

  test('a cancel asked for before the halt ends the job in the name of whoever asked, and its attempt is final', () => {
    const { engine, blocker, requester } = halted({ beforeRetry: (engine, jobId) => engine.cancel(jobId, 'not needed', 'qa') })
    expect(blocker).toMatchObject({ resolution: 'cancel', resolved_by: 'qa' })
    expect(events(engine, 'JOB_CANCELED')[0]!.data).toMatchObject({ from: 'BLOCKED', requested_by: 'qa' })
    expect(events(engine, 'BLOCKER_RESOLVED')[0]!.data).toMatchObject({ action: 'cancel', by: 'qa' })
    expect(engine.attempts(requester.job.id).at(-1)).toMatchObject({ outcome: 'BLOCKED', disposition: 'FINAL' })
  })

  test('retry clears a cancel asked for before the halt: the requeued job runs, not told to stop at its first heartbeat', () => {
    const { engine, blocker, requester } = halted()
    sql(engine).run('UPDATE jobs SET cancel_requested = 1 WHERE id = ?', requester.job.id) // as a store written before cancels ended at the halt
    engine.resolveBlocker(blocker.id, { action: 'retry' })
    expect(engine.getJob(requester.job.id)).toMatchObject({ state: 'QUEUED', cancel_requested: false })
  })

  test('cancel: the blocked job is CANCELED, with a BLOCKER_RESOLVED event carrying the note', () => {
    const { engine, blocker, requester, holderFile } = halted()
    engine.resolveBlocker(blocker.id, { action: 'cancel', note: 'not needed any more' })
    expect(engine.getJob(requester.job.id)).toMatchObject({ state: 'CANCELED', final_status: 'CANCELED' })
    expect(events(engine, 'JOB_CANCELED').map((e) => e.job_id)).toEqual([requester.job.id])
    expect(events(engine, 'BLOCKER_RESOLVED')[0]!.data).toMatchObject({ action: 'cancel', note: 'not needed any more', by: 'operator' })
    // The holder is untouched.
    expect(fileRows(engine, FILE).find((r) => r.id === holderFile.id)!.state).toBe('ACTIVE')
  })

  test.each(['retry', 'force_release', 'cancel'] as const)('resolving twice (%s first) is 409 blocker_resolved and changes nothing', (action) => {
    const { engine, blocker, requester } = halted()
    engine.resolveBlocker(blocker.id, { action, note: 'first' })
    const state = engine.getJob(requester.job.id).state
    for (const again of ['retry', 'force_release', 'cancel'] as const) {
      expectEngineError(() => engine.resolveBlocker(blocker.id, { action: again, note: 'second' }), 409, 'blocker_resolved')
    }
    expect(engine.getBlocker(blocker.id)).toMatchObject({ resolution: action, note: 'first' })
    expect(engine.getJob(requester.job.id).state).toBe(state)
    expect(events(engine, 'BLOCKER_RESOLVED')).toHaveLength(1)
  })

  test('an unknown blocker is 404 blocker_not_found', () => {
    const { engine } = setup()
    expectEngineError(() => engine.resolveBlocker('00000000-0000-4000-8000-000000000000', { action: 'retry' }), 404, 'blocker_not_found')
    expectEngineError(() => engine.getBlocker('nope'), 404, 'blocker_not_found')
  })

  test('canceling the BLOCKED job directly closes its blocker with a BLOCKER_RESOLVED event', () => {
    const { engine, blocker, requester } = halted()
    engine.cancel(requester.job.id, 'operator gave up')
    expect(engine.getJob(requester.job.id).state).toBe('CANCELED')
    expect(engine.getBlocker(blocker.id)).toMatchObject({ state: 'RESOLVED', resolution: 'cancel', note: 'operator gave up' })
    expect(events(engine, 'BLOCKER_RESOLVED')[0]!.data).toMatchObject({ action: 'cancel', note: 'operator gave up' })
    expectEngineError(() => engine.resolveBlocker(blocker.id, { action: 'retry' }), 409, 'blocker_resolved')
  })

  test('the blocker of a BLOCKED job canceled directly is resolved by whoever asked for the cancel, else by "operator" as an answer to it would be', () => {
    const asked = halted()
    asked.engine.cancel(asked.requester.job.id, null, 'dashboard')
    expect(asked.engine.getBlocker(asked.blocker.id)).toMatchObject({ resolution: 'cancel', resolved_by: 'dashboard' })
    expect(events(asked.engine, 'BLOCKER_RESOLVED')[0]!.data).toMatchObject({ action: 'cancel', by: 'dashboard' })
    const unnamed = halted()
    unnamed.engine.cancel(unnamed.requester.job.id)
    expect(unnamed.engine.getBlocker(unnamed.blocker.id)).toMatchObject({ resolution: 'cancel', resolved_by: 'operator' })
  })

  test('a blocker whose requester had no job lease resolves without touching any job', () => {
    const { engine, blocker } = haltedWithoutJobs('holder', 'me', (engine) => engine.heartbeatFile({ file: FILE, owner_id: 'holder' }))
    expect(blocker).toMatchObject({ requester_job_id: null, requester_lease_id: null })
    expect(engine.resolveBlocker(blocker.id, { action: 'retry' })).toMatchObject({ blocker: { state: 'RESOLVED' } })
  })
})

describe('listing blockers', () => {
  test('open blockers first (oldest first), then resolved ones, the most recently answered first; the state filter applies', () => {
    const { engine, clock } = setup()
    const ids: string[] = []
    // Four halts on four files, one after another.
    for (let i = 0; i < 4; i++) {
      const file = `/repo/f${i}.ts`
      engine.acquireFile({ file, owner_id: `holder${i}` })
      engine.acquireFile({ file, owner_id: `req${i}` })
      for (let t = 0; t < 18; t++) {
        clock.advance(10 * SECOND)
        for (let j = 0; j <= i; j++) engine.heartbeatFile({ file: `/repo/f${j}.ts`, owner_id: `holder${j}` })
      }
      const r = engine.acquireFile({ file, owner_id: `req${i}` })
      if (r.granted || r.code !== 'blocked') throw new Error('expected a halt')
      ids.push(r.blocker.id)
    }
    // The third answered first; the oldest and the newest later, in the same millisecond.
    engine.resolveBlocker(ids[2]!, { action: 'cancel' })
    clock.advance(SECOND)
    engine.resolveBlocker(ids[0]!, { action: 'retry' })
    engine.resolveBlocker(ids[3]!, { action: 'retry' })
    const list = (page: { blockers: Blocker[] }) => page.blockers.map((b) => b.id)
    const resolved = [ids[3], ids[0], ids[2]]
    expect(list(engine.listBlockers())).toEqual([ids[1], ...resolved])
    expect(list(engine.listBlockers('OPEN'))).toEqual([ids[1]])
    expect(list(engine.listBlockers('RESOLVED'))).toEqual(resolved)
    // Read a page at a time, the same order, each report once, across the open and the resolved.
    for (const [state, whole] of [[null, [ids[1], ...resolved]], ['OPEN', [ids[1]]], ['RESOLVED', resolved]] as const) {
      for (const limit of [1, 2, 3]) {
        const paged: string[] = []
        let cursor: string | undefined
        do {
          const page = engine.listBlockers(state, { limit, ...(cursor ? { cursor } : {}) })
          expect(page.blockers.length).toBeLessThanOrEqual(limit)
          paged.push(...list(page))
          cursor = page.next_cursor ?? undefined
        } while (cursor)
        expect(paged, `${state} by ${limit}`).toEqual(whole)
      }
    }
    expect(() => engine.listBlockers(null, { cursor: 'not-one' })).toThrow(/cursor: not a cursor this server gave out/)
    expect(engine.openBlockerCount()).toBe(1)
  })
})
