/**
 * Retention in the engine (docs/retention.md): a finished job is deleted with everything that is
 * its own once it finished longer ago than the period, in bounded steps, and nothing a live job
 * needs goes with it. Time is moved on a ManualClock.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { DAY, HOUR, MINUTE, SECOND } from '../../src-main/engine/rules/clock'
import { Engine } from '../../src-main/engine'
import {
  DELETABLE_JOBS_SQL,
  DELETE_STATEMENTS,
  JOBLESS_EVENTS_SQL,
  JOBLESS_FILE_LEASES_SQL,
  JOBLESS_HANDOVERS_SQL,
  LEASE_CHAINS_SQL,
  pruneCutoff,
  SWEEP_READS_PER_DELETE,
  SWEEP_SQL,
} from '../../src-main/engine/verbs/prune'
import { FILE_RETRY_MS } from '../../src-main/engine/verbs/files'
import { aJob, setup, T0 } from '../helpers/engine'
import { claimOrFail, leaseOrFail, openFileEngine, tempDir } from './support'
import { StorageFaultInjector } from '../helpers/storage-faults'
import { database } from '../helpers/database'

const RETAIN_DAYS = 7

/** Every row of every table that names the job, keyed by table: what "the job and all that is its own" means. */
function rowsOf(engine: Engine, jobId: string): Record<string, unknown[]> {
  const all = (sql: string) => database(engine).prepare(sql).all(jobId)
  return {
    jobs: all('SELECT * FROM jobs WHERE id = ?'),
    leases: all('SELECT * FROM leases WHERE job_id = ? ORDER BY fence'),
    events: all('SELECT * FROM events WHERE job_id = ? ORDER BY id'),
    file_leases: all('SELECT * FROM file_leases WHERE job_id = ? ORDER BY rowid'),
    blockers: all('SELECT * FROM blockers WHERE requester_job_id = ? ORDER BY seq'),
  }
}

const rowCount = (rows: Record<string, unknown[]>) => Object.values(rows).reduce((n, r) => n + r.length, 0)

/** The ids events may name a job's things by: the job, its leases and its file leases. */
function entityIds(engine: Engine, jobId: string): string[] {
  return [
    jobId,
    ...(database(engine).prepare('SELECT id FROM leases WHERE job_id = ?').pluck().all(jobId) as string[]),
    ...(database(engine).prepare('SELECT id FROM file_leases WHERE job_id = ?').pluck().all(jobId) as string[]),
  ]
}

/** Runs retention steps at the clock's now until the sweep's pass is over; returns each step's count. */
function pruneAll(engine: Engine, retainDays = RETAIN_DAYS, limit = 250): number[] {
  const cutoff = pruneCutoff(engine.now(), retainDays)
  if (cutoff === null) return []
  const steps: number[] = []
  for (;;) {
    const step = engine.pruneFinishedJobs(cutoff, limit)
    steps.push(step.deleted)
    if (step.done) return steps
  }
}

function integrity(engine: Engine): { integrity: unknown; foreignKeys: unknown[]; foreignKeysOn: unknown } {
  return {
    integrity: database(engine).pragma('integrity_check', { simple: true }),
    foreignKeys: database(engine).pragma('foreign_key_check') as unknown[],
    foreignKeysOn: database(engine).pragma('foreign_keys', { simple: true }),
  }
}

const healthy = { integrity: 'ok', foreignKeys: [], foreignKeysOn: 1 }

/**
 * Jobs that finished every way a job can — DONE, FAILED after a requeue (two attempts, two leases,
 * two stream messages, a LEASE_EXPIRED event), CANCELED while queued, TIMEOUT dead-lettered —
 * around T0, and beside them two that are still needed: one QUEUED since T0 and one RUNNING
 * since T0 under a lease (1 h TTL) that `passTime` keeps alive.
 */
function mixedHistory() {
  const s = setup({ config: { backoff: { baseMs: SECOND, maxMs: SECOND } } })
  const { engine, clock } = s
  engine.submit(aJob({ job_type: 'done' }))
  const done = leaseOrFail(engine, 'w1')
  engine.release({ lease_id: done.lease.id, worker_id: 'w1', status: 'SUCCEEDED' })

  engine.submit(aJob({ job_type: 'failed' }))
  const first = leaseOrFail(engine, 'w1')
  clock.advance(HOUR) // the lease expires: requeued with a backoff of a second
  engine.reap()
  clock.advance(2 * SECOND)
  const second = leaseOrFail(engine, 'w1')
  expect(second.job.id).toBe(first.job.id)
  engine.release({ lease_id: second.lease.id, worker_id: 'w1', status: 'FAILED', error: { message: 'no' } })

  const canceled = engine.submit(aJob({ job_type: 'canceled' })).job
  engine.cancel(canceled.id)

  engine.submit(aJob({ job_type: 'timeout', max_attempts: 1 }))
  const timeout = claimOrFail(engine, 'w1')
  clock.advance(HOUR)
  engine.reap()

  const queued = engine.submit(aJob({ job_type: 'queued', priority: 'LOW' })).job
  engine.submit(aJob({ job_type: 'running' }))
  const running = claimOrFail(engine, 'w2', 3600)
  const expired = [done.job.id, first.job.id, canceled.id, timeout.job.id]
  expect(expired.map((id) => engine.getJob(id).state)).toEqual(['DONE', 'FAILED', 'CANCELED', 'TIMEOUT'])
  /** Moves the clock, heartbeating the running job's lease on the way. */
  const passTime = (ms: number) => {
    for (let left = ms; left > 0; left -= Math.min(left, 30 * MINUTE)) {
      clock.advance(Math.min(left, 30 * MINUTE))
      engine.heartbeatByToken({ job_id: running.job.id, worker_id: 'w2', lease_token: running.lease.token })
    }
  }
  return { ...s, expired, queued, running, passTime }
}

describe('pruneCutoff: the decision is a function of the clock and the setting', () => {
  it('is the moment retain_days before now', () => {
    expect(pruneCutoff(T0 + 10 * DAY, 7)).toBe(T0 + 3 * DAY)
    expect(pruneCutoff(T0, 1)).toBe(T0 - DAY)
  })

  it('is null for 0: every job is kept forever', () => {
    expect(pruneCutoff(T0 + 1000 * DAY, 0)).toBeNull()
  })
})

describe('pruning finished jobs', () => {
  it('removes exactly the expired finished jobs with their leases (each with its attempt) and events', () => {
    const { engine, expired, queued, running, passTime } = mixedHistory()
    const failed = rowsOf(engine, expired[1]!)
    expect(engine.attempts(expired[1]!)).toHaveLength(2)
    expect(failed.leases).toHaveLength(2)
    expect(failed.events!.map((e) => (e as { event_type: string }).event_type)).toContain('LEASE_EXPIRED')
    const named = expired.flatMap((id) => entityIds(engine, id))

    // A job that finishes six days later: younger than the period when the test looks.
    passTime(6 * DAY)
    const young = engine.submit(aJob({ job_type: 'young' })).job
    const youngLease = claimOrFail(engine, 'w3')
    engine.complete({ job_id: young.id, worker_id: 'w3', lease_token: youngLease.lease.token, attempt_id: youngLease.lease.attempt_id })
    passTime(DAY + 3 * HOUR)

    const live = [queued.id, running.job.id, young.id]
    const before = Object.fromEntries(live.map((id) => [id, rowsOf(engine, id)]))
    expect(rowCount(before[queued.id]!)).toBeGreaterThan(0)
    expect(pruneAll(engine)).toEqual([4])

    for (const id of expired) expect(rowCount(rowsOf(engine, id)), `rows of ${id}`).toBe(0)
    // No event names a deleted job, lease or file lease, whether by job_id or as its entity.
    const mentions = database(engine)
      .prepare('SELECT COUNT(*) FROM events WHERE job_id IN (SELECT value FROM json_each(?)) OR entity_id IN (SELECT value FROM json_each(?))')
      .pluck()
      .get(JSON.stringify(named), JSON.stringify(named))
    expect(mentions).toBe(0)
    for (const id of live) expect(rowsOf(engine, id)).toEqual(before[id])
    expect(engine.getJob(running.job.id).state).toBe('RUNNING')
    expect(integrity(engine)).toEqual(healthy)
  })

  it('keeps a job until it finished longer ago than the period, to the millisecond', () => {
    const { engine, clock } = setup()
    const job = engine.submit(aJob()).job
    const finishedAt = clock.now()
    engine.cancel(job.id)
    engine.submit(aJob()) // the newest job, kept whatever its age (see the rowid test below)
    clock.set(finishedAt + RETAIN_DAYS * DAY)
    expect(pruneAll(engine)).toEqual([0])
    expect(engine.getJob(job.id).state).toBe('CANCELED')
    clock.advance(1)
    expect(pruneAll(engine)).toEqual([1])
    expect(() => engine.getJob(job.id)).toThrow(/job/i)
  })

  it('never deletes a job that is not finished, however old', () => {
    const { engine, clock } = setup()
    engine.submit(aJob())
    const running = claimOrFail(engine, 'w', 3600)
    engine.submit(aJob())
    const [claimed] = engine.claim({ worker_id: 'w2' }) // the queue API: CLAIMED
    const queued = engine.submit(aJob({ priority: 'LOW' })).job
    clock.advance(30 * DAY)
    expect(pruneAll(engine)).toEqual([0])
    expect(engine.deleteFinishedJobs([queued.id, running.job.id, claimed!.id])).toEqual([])
    expect(engine.getJob(claimed!.id).state).toBe('CLAIMED')
    expect(engine.getJob(queued.id).state).toBe('QUEUED')
    expect(engine.getJob(running.job.id).state).toBe('RUNNING')
  })

  it('with retention 0 keeps every job', () => {
    const { engine, clock } = setup()
    for (let i = 0; i < 3; i++) engine.cancel(engine.submit(aJob()).job.id)
    clock.advance(10_000 * DAY)
    expect(pruneAll(engine, 0)).toEqual([])
    expect(engine.listJobs({ limit: 10 }).jobs).toHaveLength(3)
  })

  it('works in bounded steps: no step deletes more than its limit', () => {
    const { engine, clock } = setup()
    for (let i = 0; i < 25; i++) engine.submitMany(Array.from({ length: 40 }, () => aJob()))
    const ids = database(engine).prepare('SELECT id FROM jobs ORDER BY seq').pluck().all() as string[]
    for (const id of ids) {
      clock.advance(1)
      engine.cancel(id)
    }
    clock.advance(RETAIN_DAYS * DAY + 1)
    // 1,000 expired, the newest event's job too: in steps of at most 100.
    const steps = pruneAll(engine, RETAIN_DAYS, 100)
    expect(steps).toEqual([100, 100, 100, 100, 100, 100, 100, 100, 100, 100])
    expect(database(engine).prepare('SELECT id FROM jobs').pluck().all()).toEqual([])
    expect(integrity(engine)).toEqual(healthy)
  })

  it('reads the jobs in the order of their keys, each step going on where the one before stopped', () => {
    const { engine, clock } = setup()
    const a = engine.submit(aJob()).job
    const b = engine.submit(aJob()).job
    engine.submit(aJob({ priority: 'LOW' })) // never finished
    engine.cancel(b.id)
    clock.advance(MINUTE)
    engine.cancel(a.id)
    engine.submit(aJob({ priority: 'LOW' })) // a job that never finishes
    clock.advance(RETAIN_DAYS * DAY + MINUTE)
    const cutoff = clock.now() - RETAIN_DAYS * DAY
    // a first, though it finished last: no index orders the finishes (a finish writes none).
    expect(engine.pruneFinishedJobs(cutoff, 1)).toEqual({ deleted: 1, done: false })
    expect(() => engine.getJob(a.id)).toThrow()
    expect(engine.getJob(b.id).state).toBe('CANCELED')
    expect(engine.pruneFinishedJobs(cutoff, 1)).toEqual({ deleted: 1, done: false })
    expect(() => engine.getJob(b.id)).toThrow()
    expect(engine.pruneFinishedJobs(cutoff, 1)).toEqual({ deleted: 0, done: true }) // the two unfinished jobs, then the end
  })

  it('one pass deletes every expired job, however many unfinished old jobs lie between them and more than a step reads', () => {
    const { engine, clock } = setup()
    const limit = 5 // a step reads at most 5 × SWEEP_READS_PER_DELETE jobs
    const expired: string[] = []
    const waiting: string[] = []
    for (let i = 0; i < 12; i++) {
      // Runs of unfinished jobs longer than a step reads, between the finished ones.
      for (let k = 0; k < limit * SWEEP_READS_PER_DELETE + 3; k++) waiting.push(engine.submit(aJob({ priority: 'LOW' })).job.id)
      const { job } = engine.submit(aJob())
      engine.cancel(job.id)
      expired.push(job.id)
    }
    engine.submit(aJob({ priority: 'LOW' })) // a job that never finishes
    clock.advance(RETAIN_DAYS * DAY + 1)
    const steps = pruneAll(engine, RETAIN_DAYS, limit)
    expect(steps.reduce((a, b) => a + b, 0)).toBe(expired.length)
    expect(steps.length).toBeGreaterThan(expired.length) // steps that read only unfinished jobs went on, not stopped
    for (const id of expired) expect(() => engine.getJob(id)).toThrow()
    for (const id of waiting) expect(engine.getJob(id).state).toBe('QUEUED')
  })

  it('a pass ends at the first job made since the cutoff, and keeps a job made before it that finished after it', () => {
    const { engine, clock } = setup()
    const old = engine.submit(aJob()).job
    engine.cancel(old.id)
    const late = engine.submit(aJob()).job // made now, finished after the cutoff below
    clock.advance(4 * DAY)
    engine.cancel(late.id)
    for (let i = 0; i < 300; i++) engine.submit(aJob({ priority: 'LOW' })) // made after the cutoff below
    clock.advance(RETAIN_DAYS * DAY - 4 * DAY + 1) // `old` finished just over RETAIN_DAYS ago, `late` 3 days later
    const cutoff = clock.now() - RETAIN_DAYS * DAY
    // One step reads `old`, `late` and the first job made since the cutoff, and the pass is over:
    // the 299 jobs after it are not read.
    expect(engine.pruneFinishedJobs(cutoff, 2)).toEqual({ deleted: 1, done: true })
    expect(() => engine.getJob(old.id)).toThrow()
    expect(engine.getJob(late.id).state).toBe('CANCELED')
  })

  it('a step that fails (a full disk) moves the sweep on by nothing: the next step reads its jobs again', () => {
    const { engine, clock } = setup()
    // One step's worth of unfinished jobs (limit 1: SWEEP_READS_PER_DELETE rows), then an expired one.
    for (let i = 0; i < SWEEP_READS_PER_DELETE; i++) engine.submit(aJob({ priority: 'LOW' }))
    const expired = engine.submit(aJob()).job
    engine.cancel(expired.id)
    engine.submit(aJob({ priority: 'LOW' })) // a job that never finishes
    clock.advance(RETAIN_DAYS * DAY + 1)
    const cutoff = clock.now() - RETAIN_DAYS * DAY
    const faults = new StorageFaultInjector(database(engine))
    try {
      faults.code = 'SQLITE_FULL'
      expect(() => engine.pruneFinishedJobs(cutoff, 1)).toThrow(/full/) // it read the unfinished jobs; its commit failed
    } finally {
      faults.dispose()
    }
    expect(engine.pruneFinishedJobs(cutoff, 1)).toEqual({ deleted: 0, done: false }) // the same jobs again
    expect(engine.pruneFinishedJobs(cutoff, 1)).toEqual({ deleted: 1, done: false })
    expect(() => engine.getJob(expired.id)).toThrow()
  })

  it('after a restart the sweep starts again at the lowest key, and finds what a pass left behind', () => {
    const dir = tempDir()
    try {
      const path = `${dir.dir}/leasehold.db`
      const first = openFileEngine(path)
      const ids = Array.from({ length: 6 }, () => first.engine.submit(aJob()).job.id)
      for (const id of ids) first.engine.cancel(id)
      first.engine.submit(aJob({ priority: 'LOW' })) // a job that never finishes
      first.clock.advance(RETAIN_DAYS * DAY + 1)
      const cutoff = first.clock.now() - RETAIN_DAYS * DAY
      expect(first.engine.pruneFinishedJobs(cutoff, 2)).toEqual({ deleted: 2, done: false })
      first.sqlite.close()
      const second = openFileEngine(path, { clock: first.clock })
      expect(pruneAll(second.engine, RETAIN_DAYS, 2)).toEqual([2, 2, 0])
      expect(second.sqlite.prepare("SELECT COUNT(*) FROM jobs WHERE state = 'CANCELED'").pluck().get()).toBe(0)
      second.sqlite.close()
    } finally {
      dir.cleanup()
    }
  })
})

describe('what a live job needs stays', () => {
  it('a job an open blocker names, as the halted job or as its file\'s holder, is kept until the blocker is answered', () => {
    const { engine, clock } = setup()
    const FILE = '/repo/shared.ts'
    engine.submit(aJob({ cost_units: 3 }))
    const holder = claimOrFail(engine, 'w1', 3600)
    engine.submit(aJob({ cost_units: 3 }))
    const requester = claimOrFail(engine, 'w2', 3600)
    expect(engine.acquireFile({ file: FILE, owner_id: 'w1', lease_id: holder.lease.id }).granted).toBe(true)
    expect(engine.acquireFile({ file: FILE, owner_id: 'w2', lease_id: requester.lease.id })).toMatchObject({ code: 'file_lease_held' })
    for (let waited = 0; waited < FILE_RETRY_MS; waited += 10 * SECOND) {
      clock.advance(10 * SECOND)
      engine.heartbeatFile({ file: FILE, owner_id: 'w1' }) // the holder stays alive: the retry finds the file held
    }
    const halt = engine.acquireFile({ file: FILE, owner_id: 'w2', lease_id: requester.lease.id })
    if (halt.granted || halt.code !== 'blocked') throw new Error(`expected a halt, got ${JSON.stringify(halt)}`)
    // The holder finishes; its file lease ends with it. The requester waits, BLOCKED.
    engine.complete({ job_id: holder.job.id, worker_id: 'w1', lease_token: holder.lease.token, attempt_id: holder.lease.attempt_id })
    clock.advance(30 * DAY)
    expect(pruneAll(engine)).toEqual([0])
    expect(engine.getJob(holder.job.id).state).toBe('DONE')

    engine.resolveBlocker(halt.blocker.id, { action: 'cancel', note: 'not needed' })
    // A later job takes over the newest job row, lease and event (see the rowid test below).
    engine.submit(aJob({ priority: 'LOW' }))
    claimOrFail(engine, 'w3', 3600)
    clock.advance(RETAIN_DAYS * DAY + 1)
    expect(pruneAll(engine)).toEqual([2])
    // The blocker report went with the job it halted; the holder's rows with the holder.
    expect(rowCount(rowsOf(engine, requester.job.id))).toBe(0)
    expect(rowCount(rowsOf(engine, holder.job.id))).toBe(0)
    expect(engine.listBlockers().blockers).toEqual([])
    expect(integrity(engine)).toEqual(healthy)
  })

  it('a finished job that still holds an ACTIVE file lease is kept', () => {
    const { engine, clock } = setup()
    const job = engine.submit(aJob()).job
    engine.cancel(job.id)
    engine.submit(aJob({ priority: 'LOW' }))
    // Not a state the engine makes (a job's file leases end with its lease): the rule holds anyway.
    database(engine)
      .prepare("INSERT INTO file_leases (id, file, owner_id, lease_id, job_id, state, acquired_at, last_heartbeat_at) VALUES ('f', '/x', 'o', NULL, ?, 'ACTIVE', 0, 0)")
      .run(job.id)
    clock.advance(30 * DAY)
    expect(pruneAll(engine)).toEqual([0])
    database(engine).prepare("UPDATE file_leases SET state = 'RELEASED' WHERE id = 'f'").run()
    expect(pruneAll(engine)).toEqual([1])
  })

  describe('no fence, message id or event id is given twice: each is reserved apart from its rows, so any finished job may go', () => {
    let dir: string
    let cleanup: () => void
    beforeEach(() => ({ dir, cleanup } = tempDir()))
    afterEach(() => cleanup())

    /** Prunes 30 days on, restarts on the same file (counters are read from the tables), and returns the new engine. */
    function pruneAndRestart(first: ReturnType<typeof openFileEngine>, expected: number[]) {
      first.clock.advance(30 * DAY)
      expect(pruneAll(first.engine)).toEqual(expected)
      first.sqlite.close()
      return openFileEngine(`${dir}/leasehold.db`, { clock: first.clock })
    }

    it('the newest lease may go: the next fence is larger than any granted', () => {
      const first = openFileEngine(`${dir}/leasehold.db`)
      const { engine } = first
      engine.submit(aJob({ priority: 'LOW' }))
      engine.submit(aJob({ priority: 'LOW' }))
      const a = leaseOrFail(engine, 'w')
      engine.release({ lease_id: a.lease.id, worker_id: 'w', status: 'SUCCEEDED' })
      const b = leaseOrFail(engine, 'w') // the newest lease, on the older of the two jobs' rows
      engine.release({ lease_id: b.lease.id, worker_id: 'w', status: 'SUCCEEDED' })
      engine.submit(aJob()) // the newest job, message and event
      const second = pruneAndRestart(first, [2])
      expect(second.sqlite.prepare('SELECT COUNT(*) FROM leases').pluck().get()).toBe(0)
      expect(leaseOrFail(second.engine, 'w').lease.fence).toBeGreaterThan(b.lease.fence)
      second.sqlite.close()
    })

    it('the job with the newest stream message may go: the next message id is larger than any written', () => {
      const first = openFileEngine(`${dir}/leasehold.db`)
      const { engine, clock } = first
      const x = engine.submit(aJob()).job
      engine.submit(aJob({ priority: 'LOW' })) // the newest job
      leaseOrFail(engine, 'w')
      clock.advance(HOUR)
      engine.reap() // x is requeued: a new message, the newest
      const newestMessage = engine.getJob(x.id).stream_message_id!
      engine.cancel(x.id)
      leaseOrFail(engine, 'w2') // the LOW job: the newest lease and event
      const second = pruneAndRestart(first, [1])
      expect(second.sqlite.prepare('SELECT COUNT(*) FROM jobs WHERE id = ?').pluck().get(x.id)).toBe(0)
      expect(second.engine.submit(aJob()).job.stream_message_id).toBeGreaterThan(newestMessage)
      second.sqlite.close()
    })

    it('the job with the newest event may go: the next event id is larger than any appended (an event stream resumes by it)', () => {
      const first = openFileEngine(`${dir}/leasehold.db`)
      const { engine } = first
      const a = engine.submit(aJob({ priority: 'LOW' })).job
      engine.submit(aJob({ priority: 'HIGH' }))
      leaseOrFail(engine, 'w') // the HIGH job: the newest job, message and lease
      engine.cancel(a.id) // the newest event
      const newestEvent = database(engine).prepare('SELECT MAX(id) FROM events').pluck().get() as number
      const second = pruneAndRestart(first, [1])
      expect(() => second.engine.getJob(a.id)).toThrow()
      expect(second.sqlite.prepare('SELECT MAX(id) FROM events').pluck().get()).toBeLessThan(newestEvent)
      const next = second.engine.submit(aJob()).job
      expect(second.sqlite.prepare('SELECT MIN(id) FROM events WHERE job_id = ?').pluck().get(next.id)).toBeGreaterThan(newestEvent)
      second.sqlite.close()
    })

    it('without a restart too: the id of a deleted newest event is not given again', () => {
      const { engine, clock } = openFileEngine(`${dir}/leasehold.db`)
      const only = engine.submit(aJob()).job
      engine.cancel(only.id)
      const newestEvent = database(engine).prepare('SELECT MAX(id) FROM events').pluck().get() as number
      clock.advance(30 * DAY)
      expect(pruneAll(engine)).toEqual([1])
      expect(database(engine).prepare('SELECT COUNT(*) FROM events').pluck().get()).toBe(0)
      const next = engine.submit(aJob()).job
      expect(engine.jobEvents(next.id)[0]!.id).toBeGreaterThan(newestEvent)
      database(engine).close()
    })

    it('a finished job that holds every newest row — job, message, lease and event — is deleted at once', () => {
      const first = openFileEngine(`${dir}/leasehold.db`)
      const { engine } = first
      engine.submit(aJob())
      const only = leaseOrFail(engine, 'w')
      engine.release({ lease_id: only.lease.id, worker_id: 'w', status: 'SUCCEEDED' })
      first.clock.advance(30 * DAY)
      expect(pruneAll(engine)).toEqual([1])
      first.sqlite.close()
    })
  })
})

describe('events that name no job', () => {
  it('go after the same period, the oldest first, in bounded steps; the newest event of all too', () => {
    const { engine, clock } = setup({ busy_rating: null })
    engine.setCapacity({ total_units: 50 }) // CAPACITY_CHANGED
    engine.reportMeasuredBusy(4) // BUSY_MEASURED
    engine.recordWorkerProblem('w1', { kind: 'handler', detail: 'x' })
    clock.advance(DAY)
    engine.recordWorkerProblem('w1', { kind: 'handler', detail: 'y' }) // a day younger
    const jobless = () => database(engine).prepare('SELECT event_type FROM events WHERE job_id IS NULL ORDER BY id').pluck().all()
    expect(jobless()).toEqual(['CAPACITY_CHANGED', 'BUSY_MEASURED', 'WORKER_PROBLEM', 'WORKER_PROBLEM'])
    engine.submit(aJob()) // a newer event that names a job

    clock.advance(RETAIN_DAYS * DAY - 1)
    const cutoff = () => pruneCutoff(clock.now(), RETAIN_DAYS)!
    expect(engine.pruneJoblessEvents(cutoff(), 2)).toBe(2)
    expect(engine.pruneJoblessEvents(cutoff(), 2)).toBe(1)
    expect(engine.pruneJoblessEvents(cutoff(), 2)).toBe(0)
    expect(jobless()).toEqual(['WORKER_PROBLEM'])
    clock.advance(DAY)
    database(engine).prepare('DELETE FROM events WHERE job_id IS NOT NULL').run() // (as if its job had gone)
    expect(engine.pruneJoblessEvents(cutoff(), 2)).toBe(1) // the newest event of all
    expect(jobless()).toEqual([])
  })
})

describe('a resuming reader is told of the events deleted after its Last-Event-ID', () => {
  it('the largest id retention deleted, of a job or of events that name no job, is where a replay of the events after an older id starts', () => {
    const { engine, clock } = setup({ busy_rating: null })
    const seen = engine.newestEventId()
    engine.setCapacity({ total_units: 50 }) // CAPACITY_CHANGED: names no job
    const capacityChanged = engine.newestEventId()
    const gapAfter = (after: number, limit = 100) => engine.replayAfter(after, limit).gap
    expect(gapAfter(seen)).toBeNull()
    clock.advance(RETAIN_DAYS * DAY + 1)
    expect(engine.pruneJoblessEvents(pruneCutoff(clock.now(), RETAIN_DAYS)!, 10)).toBe(1)
    expect(gapAfter(seen)).toEqual({ missed_from: seen + 1, missed_to: capacityChanged })

    const { job } = engine.submit(aJob())
    engine.cancel(job.id)
    const canceled = engine.newestEventId()
    engine.submit(aJob()) // left after it
    expect(engine.deleteFinishedJobs([job.id])).toEqual([job.id])
    expect(gapAfter(seen)).toEqual({ missed_from: seen + 1, missed_to: canceled })
    expect(gapAfter(canceled)).toBeNull() // a reader that saw it misses nothing
    // Of what follows the largest deleted id, the newest `limit` are sent.
    engine.submit(aJob())
    expect(gapAfter(seen, 1)).toEqual({ missed_from: seen + 1, missed_to: engine.replayAfter(canceled, 10).events.at(-2)!.id })
  })
})

describe('file leases of owners without a job lease', () => {
  const fileRows = (engine: Engine) => database(engine).prepare('SELECT owner_id, state FROM file_leases ORDER BY owner_id').all()
  const handovers = (engine: Engine) => database(engine).prepare('SELECT file, owner_id, job_id FROM file_handovers').all()

  it('an ended one goes once it ended longer ago than the period, in bounded steps; one still held never goes, however old', () => {
    const { engine, clock } = setup()
    engine.acquireFile({ file: '/tools/held', owner_id: 'keeper' }) // held, and never heartbeated
    for (let n = 0; n < 30; n++) {
      engine.acquireFile({ file: `/tools/f${n}`, owner_id: `tool${n}` })
      engine.releaseFile({ file: `/tools/f${n}`, owner_id: `tool${n}` })
    }
    clock.advance(RETAIN_DAYS * DAY)
    const cutoff = () => pruneCutoff(clock.now(), RETAIN_DAYS)!
    expect(engine.pruneJoblessFiles(cutoff(), 20)).toBe(0) // ended exactly the period ago: kept
    clock.advance(1)
    expect(engine.pruneJoblessFiles(cutoff(), 20)).toBe(20)
    expect(engine.pruneJoblessFiles(cutoff(), 20)).toBe(10)
    expect(engine.pruneJoblessFiles(cutoff(), 20)).toBe(0)
    expect(fileRows(engine)).toEqual([{ owner_id: 'keeper', state: 'ACTIVE' }])
  })

  it('a file handed over to an owner without a job goes once the handover lapsed longer ago than the period, as do the lease it was taken from, the refused acquire and the answered blocker report', () => {
    const { engine, clock } = setup()
    engine.acquireFile({ file: '/tools/shared', owner_id: 'holder' })
    expect(engine.acquireFile({ file: '/tools/shared', owner_id: 'waiter' })).toMatchObject({ granted: false })
    for (let waited = 0; waited < FILE_RETRY_MS; waited += 20 * SECOND) {
      clock.advance(20 * SECOND)
      engine.heartbeatFile({ file: '/tools/shared', owner_id: 'holder' })
    }
    expect(engine.acquireFile({ file: '/tools/shared', owner_id: 'waiter' })).toMatchObject({ code: 'blocked' })
    const blocker = engine.listBlockers('OPEN').blockers[0]!
    expect(engine.resolveBlocker(blocker.id, { action: 'force_release' }).taken_from_holder).toBe(true)
    const handedAt = clock.now()
    expect(handovers(engine)).toEqual([{ file: '/tools/shared', owner_id: 'waiter', job_id: null }])
    const count = (table: string) => database(engine).prepare(`SELECT COUNT(*) FROM ${table}`).pluck().get()
    // The waiter never comes back for it: the lease taken and the report go a period after they
    // ended, the handover a period after it lapsed, the refused acquire a period after its retry was due.
    expect(engine.pruneJoblessFiles(handedAt + 1, 10)).toBe(2 + (count('file_contentions') as number))
    expect(fileRows(engine)).toEqual([])
    expect([count('blockers'), count('file_contentions')]).toEqual([0, 0])
    expect(handovers(engine)).toHaveLength(1)
    expect(engine.pruneJoblessFiles(handedAt + FILE_RETRY_MS + 1, 10)).toBe(1)
    expect(handovers(engine)).toEqual([])
  })

  it('a refused acquire of an owner without a job goes a period after its retry was due; an open blocker report never goes', () => {
    const { engine, clock } = setup()
    const contentions = () => database(engine).prepare('SELECT owner_id FROM file_contentions ORDER BY owner_id').pluck().all()
    engine.acquireFile({ file: '/tools/shared', owner_id: 'holder' })
    for (const owner of ['gave-up', 'halted']) expect(engine.acquireFile({ file: '/tools/shared', owner_id: owner })).toMatchObject({ granted: false })
    for (let waited = 0; waited < FILE_RETRY_MS; waited += 20 * SECOND) {
      clock.advance(20 * SECOND)
      engine.heartbeatFile({ file: '/tools/shared', owner_id: 'holder' })
    }
    expect(engine.acquireFile({ file: '/tools/shared', owner_id: 'halted' })).toMatchObject({ code: 'blocked' })
    expect(contentions()).toEqual(['gave-up'])
    expect(engine.pruneJoblessFiles(clock.now(), 10)).toBe(0) // its retry was due a moment ago
    expect(engine.pruneJoblessFiles(clock.now() + DAY, 10)).toBe(1)
    expect(contentions()).toEqual([])
    expect(engine.listBlockers('OPEN').blockers).toHaveLength(1)
  })
})

describe('deleteFinishedJobs: the one deletion, shared by retention and purges', () => {
  it('deletes the finished jobs it is given, whatever their age, and leaves the others and unknown ids', () => {
    const { engine } = setup()
    const a = engine.submit(aJob()).job
    const b = engine.submit(aJob()).job
    const queued = engine.submit(aJob({ priority: 'LOW' })).job
    engine.cancel(a.id)
    engine.cancel(b.id)
    expect(engine.deleteFinishedJobs([a.id, queued.id, 'no-such-job'])).toEqual([a.id])
    expect(engine.getJob(b.id).state).toBe('CANCELED')
    expect(engine.getJob(queued.id).state).toBe('QUEUED')
    expect(integrity(engine)).toEqual(healthy)
  })

  it('runs in a transaction of its own: inside an operation it throws and changes nothing', async () => {
    const { engine } = setup()
    const a = engine.submit(aJob()).job
    engine.submit(aJob())
    engine.cancel(a.id)
    await expect(engine.run(() => engine.deleteFinishedJobs([a.id]))).rejects.toThrow(/transaction of its own/)
    expect(engine.getJob(a.id).state).toBe('CANCELED')
    expect(database(engine).pragma('foreign_keys', { simple: true })).toBe(1)
  })

  it('commits an open group first, and the group\'s writes stay', async () => {
    const { engine } = setup()
    const a = engine.submit(aJob()).job
    engine.cancel(a.id)
    const pending = engine.run(() => engine.submit(aJob()))
    expect(engine.deleteFinishedJobs([a.id])).toEqual([a.id])
    const { job } = await pending
    expect(engine.getJob(job.id).state).toBe('QUEUED')
  })

  it('the time series count what the deleted jobs\' events counted', () => {
    const { engine, clock } = setup()
    const ids: string[] = []
    for (let i = 0; i < 5; i++) {
      clock.advance(10 * MINUTE)
      engine.submit(aJob())
      const { lease, job } = claimOrFail(engine, 'w')
      if (i % 2 === 0) engine.complete({ job_id: job.id, worker_id: 'w', lease_token: lease.token, attempt_id: lease.attempt_id })
      else engine.fail({ job_id: job.id, worker_id: 'w', lease_token: lease.token, attempt_id: lease.attempt_id, error: { message: 'x' } })
      ids.push(job.id)
    }
    engine.submit(aJob({ priority: 'LOW' }))
    claimOrFail(engine, 'w2') // the newest job, lease and event are another job's
    clock.advance(2 * DAY)
    const series = () => ({
      completed: engine.timeseries('jobs_completed', '1h', '7d'),
      failed: engine.timeseries('jobs_failed', '5m', '7d'),
      start: engine.seriesStart(),
    })
    const before = series()
    expect(before.completed.reduce((n, p) => n + p.value, 0)).toBe(3)
    expect(pruneAll(engine, 1)).toEqual([5])
    expect(database(engine).prepare('SELECT COUNT(*) FROM events WHERE event_type IN (?, ?)').pluck().get('JOB_DONE', 'JOB_FAILED')).toBe(0)
    expect(series()).toEqual(before)
  })
})

describe('the snapshot\'s counts of the last day', () => {
  it('still count jobs deleted within the day (a purge), after a restart reads them from the database', () => {
    const { engine, clock } = setup()
    const ids: string[] = []
    for (let i = 0; i < 3; i++) {
      engine.submit(aJob())
      const { lease, job } = claimOrFail(engine, 'w')
      engine.complete({ job_id: job.id, worker_id: 'w', lease_token: lease.token, attempt_id: lease.attempt_id })
      ids.push(job.id)
    }
    engine.submit(aJob({ priority: 'LOW' }))
    claimOrFail(engine, 'w2') // the newest job, lease and event are another job's
    clock.advance(HOUR)
    expect(engine.deleteFinishedJobs(ids).sort()).toEqual([...ids].sort())
    const restarted = new Engine({ db: database(engine), clock })
    expect(restarted.snapshot().jobs.done_last_24h).toBe(3)
  })
})

describe('query plans: retention reads by index, never a whole table', () => {
  it('the sweep reads a range of the jobs\' keys, and every deletion looks its rows up', () => {
    const { engine } = setup()
    const plan = (sql: string, ...params: unknown[]) =>
      (database(engine).prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as { detail: string }[]).map((r) => r.detail)
    expect(plan(SWEEP_SQL, 0, 10)).toEqual(['SEARCH jobs USING INTEGER PRIMARY KEY (rowid>?)'])
    expect(plan(JOBLESS_EVENTS_SQL, T0, 10)).toEqual([expect.stringMatching(/^SEARCH events USING (COVERING )?INDEX events_jobless_ts \(ts<\?\)$/)])
    expect(plan(JOBLESS_FILE_LEASES_SQL, T0, 10)).toEqual(['SEARCH file_leases USING INDEX file_leases_jobless_ended (released_at<?)'])
    expect(plan(JOBLESS_HANDOVERS_SQL, T0, 10)).toEqual(['SEARCH file_handovers USING INDEX file_handovers_job (job_id=?)'])
    for (const sql of [DELETABLE_JOBS_SQL, LEASE_CHAINS_SQL, ...DELETE_STATEMENTS.map((statement) => statement.sql)]) {
      // file_contentions holds a row per pending file retry (it is emptied as leases end): a scan of it is nothing;
      // `chain` is the recursive walk's own queue of a job's events or leases.
      const scans = plan(sql, '[]').filter((d) => /^SCAN (?!json_each|chain$|file_contentions|file_leases USING INDEX file_leases_active)/.test(d))
      expect(scans, sql).toEqual([])
    }
  })
})
