/**
 * Model-based property test of the engine: fast-check drives random sequences of the verbs every
 * API uses (submit, claim, the three ways to get a lease, heartbeat, clock moves, reaping,
 * completion, failure, cancel, pausing the queue, and reopening the database file), while a small model records
 * the leases the test holds and predicts how the engine must answer calls made under them. After
 * every command the scheduling invariants (docs/architecture.md) are checked directly in SQLite,
 * and so is every cache of hot state the engine keeps in memory: the ACTIVE leases and their
 * jobs, the job tally, the rows of QUEUED jobs, the paused queues, the Redis outbox's counts per queue, the day's
 * event counts and the counters (the capacity figures through getCapacity). A cache that misses one write fails its invariant.
 *
 * Half the runs drive the engine as the batching transports do: every verb in the open commit
 * group (a read, or a Flush command, ends the group: random group boundaries), and the worker
 * API's verbs through the batch verbs (claimBatch, exchange), whose items must answer exactly as
 * the one-job verbs the model predicts.
 *
 * The caches are read through engineContext: that the engine's memory agrees with SQLite is the point.
 */
import type { Database } from 'better-sqlite3'
import fc from 'fast-check'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { openDatabase } from '../../src-main/db/open'
import type { JobRow, LeaseRow } from '../../src-main/db/schema'
import { ManualClock, SECOND } from '../../src-main/engine/rules/clock'
import { PRIORITIES, type JobState } from '../../src-main/engine/rules/states'
import { Engine, EngineError, type EngineConfig, type ItemResult, type Lease } from '../../src-main/engine'
import { statusOf } from '../../src-shared/error-codes'
import type { AttemptError, AttemptReport } from '../../src-main/engine/verbs/attempt-reports'
import type { WorkerFilter } from '../../src-main/engine/reads/pick'
import { engineContext } from '../../src-main/engine/internals'
import { QUEUED_FROM_KEY } from '../../src-main/engine/memory/job-tally'
import { T0 } from '../helpers/engine'
import { onDatabase } from '../helpers/database'

const CONFIG: Partial<EngineConfig> = {
  leaseTtlS: 10,
  heartbeatGraceS: 2,
  claimTtlS: 30,
  maxAttempts: 3,
  backoff: { baseMs: 1_000, maxMs: 8_000 },
}
const TOTAL_UNITS = 10
const WORKERS = ['w1', 'w2', 'w3'] as const

const RUNS = 50
const MAX_COMMANDS = 60

// ---------------------------------------------------------------------------------------------
// The system under test: an engine over a database file that a command may close and reopen.

interface Real {
  path: string
  clock: ManualClock
  busy: number
  /** Through commit groups and the batch verbs (see viaBatches). */
  batched: boolean
  db: Database
  engine: Engine
}

function openEngine(path: string, clock: ManualClock, busy: number, batched: boolean): { db: Database; engine: Engine } {
  const { sqlite } = openDatabase({ path })
  const engine = onDatabase(new Engine({ db: sqlite, clock, config: CONFIG, capacity: { total_units: TOTAL_UNITS, busy_rating: busy } }), sqlite)
  engine.outbox() // kept as a host with --redis keeps it, its rows counted per queue in memory
  return { db: sqlite, engine: batched ? viaBatches(engine) : engine }
}

/** An item of a batch, as its one-job verb would answer: the value, or the refusal thrown. */
function itemValue<T>(result: ItemResult<T> | undefined): T {
  if (!result) throw new Error('a batch answered no item')
  if (!result.ok) throw result.error
  return result.value
}

/**
 * The engine as the batching transports use it. Each verb runs in the open commit group (the
 * group commits later, when something outside it reads); the worker API verbs go through
 * claimBatch and exchange. The op runs at once inside the group, so its answer is known now.
 */
function viaBatches(engine: Engine): Engine {
  const grouped = <T>(op: () => T): T => {
    let outcome: { ok: true; value: T } | { ok: false; error: unknown } | undefined
    engine
      .run(() => {
        try {
          outcome = { ok: true, value: op() }
        } catch (error) {
          outcome = { ok: false, error }
          throw error
        }
      })
      .catch(() => {}) // the outcome is read below; a failed commit would fail a later read
    if (!outcome!.ok) throw outcome!.error
    return outcome!.value
  }
  const batchVerbs: Partial<Record<keyof Engine, (...args: never[]) => unknown>> = {
    // A batch claim answers an Assignment: checked against the lease and job it names, then
    // answered as claimAndLease answers, so the command checks the same facts either way.
    claimAndLease: (filter: WorkerFilter, ttl?: number) => {
      const { granted, denial } = engine.claimBatch(filter, 1, ttl)
      const assigned = granted[0]
      if (!assigned) return denial
      const lease = engine.getLease(assigned.lease_id)
      const job = engine.getJob(assigned.job_id)
      expect(assigned).toEqual({
        granted: true,
        job_id: job.id,
        job_type: job.job_type,
        queue: job.queue,
        payload: job.payload,
        max_runtime_s: job.max_runtime_s,
        lease_id: lease.id,
        attempt_id: lease.attempt_id,
        lease_token: lease.token,
        ttl_s: lease.ttl_s,
        message_id: job.stream_message_id,
      })
      return { granted: true, message_id: assigned.message_id, lease, job }
    },
    heartbeatByToken: (request: { job_id: string; worker_id: string; lease_token: string }) =>
      itemValue(engine.exchange({ worker_id: request.worker_id, heartbeat: [request] }).heartbeats[0]),
    complete: (report: AttemptReport) => itemValue(engine.exchange({ worker_id: report.worker_id, complete: [report] }).completed[0]),
    fail: (report: AttemptReport & { error: AttemptError }) => itemValue(engine.exchange({ worker_id: report.worker_id, fail: [report] }).failed[0]),
  }
  const verbs = new Set<string | symbol>(['submit', 'claim', 'requestLease', 'claimAndLease', 'requestLeaseForJob', 'heartbeat', 'heartbeatByToken', 'release', 'complete', 'fail', 'cancel', 'reap'])
  return new Proxy(engine, {
    get(target, key, receiver) {
      const value = Reflect.get(target, key, receiver) as unknown
      if (!verbs.has(key) || typeof value !== 'function') return value
      const verb = (batchVerbs[key as keyof Engine] ?? value) as (...args: unknown[]) => unknown
      return (...args: unknown[]) => grouped(() => verb(...args))
    },
  })
}

// ---------------------------------------------------------------------------------------------
// The model: the leases the test holds, what it expects of each, and the jobs it knows.

type ModelLeaseState = 'ACTIVE' | 'EXPIRED' | 'RELEASED'

interface HeldLease {
  lease_id: string
  job_id: string
  worker_id: string
  token: string
  attempt_id: string
  ttl_s: number
  grace_s: number
  expires_at: number
  /** The latest a heartbeat may carry it to: the TTL and grace after its job's cancel was asked (the jobs here have no max_runtime_s). */
  heartbeat_limit: number
  state: ModelLeaseState
  release_status: string | null
  /** What the report that released it said (its status, and its error for a failure): a report of the same status repeats it only if it says the same. */
  released_with: string | null
}

interface Model {
  jobs: string[]
  /** Jobs a queue API claim handed to the test (they may have moved on since). */
  claimed: string[]
  leases: HeldLease[]
}

const pick = <T>(items: T[], index: number): T | undefined => (items.length === 0 ? undefined : items[index % items.length])

/** Runs `fn` and returns the EngineError it throws, or undefined; any other error fails the test. */
function attempt<T>(fn: () => T): { value: T; error?: undefined } | { value?: undefined; error: EngineError } {
  try {
    return { value: fn() }
  } catch (error) {
    if (error instanceof EngineError) return { error }
    throw error
  }
}

function expectRefusal(result: { error?: EngineError }, status: number, code: string): void {
  expect(result.error, `expected ${status} ${code}`).toBeInstanceOf(EngineError)
  expect({ status: statusOf(result.error!.code), code: result.error!.code }).toEqual({ status, code })
}

/**
 * A call naming a lease first expires it on the spot if it is due (the engine never answers for a
 * lease past its `expires_at` as if it were alive); the model follows.
 */
function expireIfDue(held: HeldLease, now: number): void {
  if (held.state === 'ACTIVE' && held.expires_at <= now) {
    held.state = 'EXPIRED'
    held.release_status = 'TIMEOUT'
  }
}

/** The 409 a call under a lease that is no longer ACTIVE gets. */
function notActiveCode(held: HeldLease): string {
  return held.state === 'EXPIRED' ? 'lease_expired' : 'lease_not_active'
}

function dbJob(real: Real, jobId: string): JobRow {
  return real.db.prepare('SELECT * FROM jobs WHERE id = ?').get(jobId) as JobRow
}

function dbLease(real: Real, leaseId: string): LeaseRow {
  return real.db.prepare('SELECT * FROM leases WHERE id = ?').get(leaseId) as LeaseRow
}

/**
 * A reference picker: the QUEUED jobs this worker may take, in scheduling order (priority, then
 * the time the job became eligible, then submit order), skipping what the worker cannot take: a
 * unique job while it holds a lease or is about to (its queue API claims not yet leased).
 */
function takeable(real: Real, workerId: string, maxUnits: number | null): JobRow[] {
  const now = real.clock.now()
  const holdsLease = holdsActiveLease(real, workerId) || holdsUnleasedClaims(real, workerId)
  const queued = real.db
    .prepare("SELECT * FROM jobs WHERE state = 'QUEUED' AND eligible_at <= ? AND queue NOT IN (SELECT queue FROM paused_queues) ORDER BY priority DESC, eligible_at, seq")
    .all(now) as JobRow[]
  return queued.filter((job) => (maxUnits === null || job.cost_units <= maxUnits) && !(job.is_unique && holdsLease))
}

function holdsActiveLease(real: Real, workerId: string): boolean {
  return real.db.prepare("SELECT 1 FROM leases WHERE worker_id = ? AND state = 'ACTIVE'").get(workerId) !== undefined
}

function holdsUnleasedClaims(real: Real, workerId: string): boolean {
  return (
    real.db
      .prepare("SELECT 1 FROM jobs WHERE claimed_by = ? AND state IN ('CLAIMED', 'PREPARING', 'LEASE_PENDING') AND claim_expires_at > ?")
      .get(workerId, real.clock.now()) !== undefined
  )
}

/**
 * A reference queue API claim: the first `limit` jobs the worker may take, where the jobs it
 * claims, and its earlier claims not yet leased, are leases it is about to hold: a unique job is
 * skipped then, and one taken ends the claim.
 */
function claimable(real: Real, workerId: string, limit: number): JobRow[] {
  const taken: JobRow[] = []
  for (const job of takeable(real, workerId, null)) {
    if (job.is_unique && taken.length > 0) continue
    taken.push(job)
    if (taken.length === limit || job.is_unique) break
  }
  return taken
}

// ---------------------------------------------------------------------------------------------
// Invariants, read straight from the database.

type Invariant = (real: Real, model: Model) => void

const INVARIANTS = {
  'capacity is never exceeded: leased units of ACTIVE leases never pass usable': (real) => {
    const { leased } = real.db.prepare("SELECT COALESCE(SUM(cost_units), 0) AS leased FROM leases WHERE state = 'ACTIVE'").get() as {
      leased: number
    }
    const usable = Math.floor((TOTAL_UNITS * (10 - real.busy)) / 10)
    expect(leased).toBeLessThanOrEqual(usable)
    expect(real.engine.getCapacity()).toMatchObject({ leased, usable, available: usable - leased })
  },
  'a job has at most one ACTIVE lease': (real) => {
    const doubled = real.db
      .prepare("SELECT job_id, COUNT(*) AS n FROM leases WHERE state = 'ACTIVE' GROUP BY job_id HAVING n > 1")
      .all()
    expect(doubled).toEqual([])
  },
  'a job is completed at most once: one JOB_DONE event and one SUCCEEDED attempt at most': (real) => {
    const done = real.db
      .prepare("SELECT job_id, COUNT(*) AS n FROM events WHERE event_type = 'JOB_DONE' GROUP BY job_id HAVING n > 1")
      .all()
    expect(done).toEqual([])
    const succeeded = real.db
      .prepare("SELECT job_id, COUNT(*) AS n FROM leases WHERE release_status = 'SUCCEEDED' GROUP BY job_id HAVING n > 1")
      .all()
    expect(succeeded).toEqual([])
    // A DONE job has exactly its one JOB_DONE event; no other job has one.
    const mismatched = real.db
      .prepare(
        `SELECT j.id, j.state, (SELECT COUNT(*) FROM events e WHERE e.job_id = j.id AND e.event_type = 'JOB_DONE') AS n
         FROM jobs j WHERE (j.state = 'DONE') <> (n = 1)`,
      )
      .all()
    expect(mismatched).toEqual([])
  },
  'attempts never exceed max_attempts, and each attempt counted is one lease granted': (real) => {
    const over = real.db.prepare('SELECT id, attempts, max_attempts FROM jobs WHERE attempts > max_attempts').all()
    expect(over).toEqual([])
    const miscounted = real.db
      .prepare(
        `SELECT j.id, j.attempts, (SELECT COALESCE(MAX(l.attempt), 0) FROM leases l WHERE l.job_id = j.id) AS last_,
           (SELECT COUNT(*) FROM leases l WHERE l.job_id = j.id) AS leases_
         FROM jobs j WHERE j.attempts <> last_ OR j.attempts <> leases_`,
      )
      .all()
    expect(miscounted).toEqual([])
  },
  'a LEASED or RUNNING job holds exactly one ACTIVE lease (its lease_id) and no other job holds any': (real) => {
    const wrong = real.db
      .prepare(
        `SELECT j.id, j.state, j.lease_id,
           (SELECT COUNT(*) FROM leases l WHERE l.job_id = j.id AND l.state = 'ACTIVE') AS active,
           (SELECT COUNT(*) FROM leases l WHERE l.id = j.lease_id AND l.state = 'ACTIVE') AS own
         FROM jobs j
         WHERE (j.state IN ('LEASED', 'RUNNING') AND (active <> 1 OR own <> 1))
            OR (j.state NOT IN ('LEASED', 'RUNNING') AND active <> 0)`,
      )
      .all()
    expect(wrong).toEqual([])
    // An attempt is open (no outcome, no disposition) exactly while its lease is ACTIVE.
    const open = real.db
      .prepare(
        `SELECT id FROM leases
         WHERE (release_status IS NULL) <> (state = 'ACTIVE') OR (disposition IS NULL) <> (state = 'ACTIVE')`,
      )
      .all()
    expect(open).toEqual([])
  },
  'the ACTIVE leases are exactly the ones the model holds as ACTIVE, with the same expiry': (real, model) => {
    const active = real.db.prepare("SELECT id, expires_at FROM leases WHERE state = 'ACTIVE' ORDER BY id").all()
    const expected = model.leases
      .filter((l) => l.state === 'ACTIVE')
      .map((l) => ({ id: l.lease_id, expires_at: l.expires_at }))
      .sort((a, b) => (a.id < b.id ? -1 : 1))
    expect(active).toEqual(expected)
    const ended = model.leases.filter((l) => l.state !== 'ACTIVE')
    for (const held of ended) {
      expect(dbLease(real, held.lease_id)).toMatchObject({ state: held.state, release_status: held.release_status })
    }
  },
  "the jobs counted in memory are the table's: QUEUED per queue and priority (a pick skips what the count holds empty), waiting per cost": (real) => {
    const rows = real.db
      .prepare("SELECT queue, priority, COUNT(*) AS n FROM jobs WHERE state = 'QUEUED' GROUP BY queue, priority")
      .all() as { queue: string; priority: number; n: number }[]
    const tally = engineContext(real.engine).jobTally
    expect(tally.queues()).toEqual([...new Set(rows.map((row) => row.queue))].sort())
    for (const row of rows) expect(tally.count(row.queue, row.priority), `${row.queue} ${row.priority}`).toBe(row.n)
    const waiting = "state IN ('QUEUED', 'CLAIMED', 'PREPARING', 'LEASE_PENDING', 'BLOCKED')"
    for (const units of [0, 1, TOTAL_UNITS]) {
      expect(tally.waitingCosting(units), `waiting jobs costing more than ${units}`).toBe(
        real.db.prepare(`SELECT COUNT(*) FROM jobs WHERE ${waiting} AND cost_units > ?`).pluck().get(units),
      )
    }
  },
  'the ACTIVE leases kept in memory are the table\'s, each with its lease row and its job row as SQLite holds them': (real) => {
    const kept = [...engineContext(real.engine).activeLeases.all()].sort((a, b) => a.lease.fence - b.lease.fence)
    const leases = real.db.prepare("SELECT * FROM leases WHERE state = 'ACTIVE' ORDER BY fence").all() as LeaseRow[]
    expect(kept.map(({ lease }) => lease)).toEqual(leases)
    expect(kept.map(({ job }) => job)).toEqual(leases.map((lease) => dbJob(real, lease.job_id)))
  },
  "the rows of QUEUED jobs kept in memory are the table's as they now are, and no other job's": (real) => {
    const rows = engineContext(real.engine).queuedRows
    const queued = real.db.prepare("SELECT * FROM jobs WHERE state = 'QUEUED'").all() as JobRow[]
    const kept = queued.filter((row) => rows.get(row.seq) !== undefined)
    for (const row of kept) expect(rows.get(row.seq), row.id).toEqual(row)
    expect(rows.size).toBe(kept.length)
  },
  "the Redis outbox's messages counted per queue in memory are the table's": (real) => {
    const rows = real.db.prepare('SELECT queue, COUNT(*) AS n FROM redis_outbox GROUP BY queue').all() as { queue: string; n: number }[]
    // Read as they stand, an open group's writes included (countsByQueue would commit the group first).
    const kept = (real.engine.outbox() as unknown as { rowsPerQueue: Map<string, number> }).rowsPerQueue
    expect(Object.fromEntries(kept)).toEqual(Object.fromEntries(rows.map((row) => [row.queue, row.n])))
  },
  "the paused queues in memory are the table's": (real) => {
    const table = (real.db.prepare('SELECT queue FROM paused_queues ORDER BY queue').all() as { queue: string }[]).map((row) => row.queue)
    expect([...engineContext(real.engine).pausedQueues.all()].sort()).toEqual(table)
  },
  "the day's event counts in memory are the committed log's": (real) => {
    if (real.db.inTransaction) return // they count events as they commit; an open group's are not counted yet
    const byMinute = (engineContext(real.engine).counts as unknown as { byMinute: Map<string, Map<number, number>> }).byMinute
    for (const [type, minutes] of byMinute) {
      const counted = [...minutes.values()].reduce((sum, n) => sum + n, 0)
      expect(counted, type).toBe(real.db.prepare('SELECT COUNT(*) FROM events WHERE event_type = ?').pluck().get(type))
    }
  },
  'no number the counters hand out is in the table already, and each is covered by a stored reservation': (real) => {
    type Sequence = { last: number | null; reserved: number; key: string }
    const counters = engineContext(real.engine).counters as unknown as Record<'jobSeqs' | 'fences' | 'eventIds', Sequence>
    const stored = (key: string) => Number(real.db.prepare('SELECT value FROM settings WHERE key = ?').pluck().get(key) ?? 0)
    for (const [name, maxSql] of [
      ['jobSeqs', 'SELECT COALESCE(MAX(seq), 0) FROM jobs'],
      ['fences', 'SELECT COALESCE(MAX(fence), 0) FROM leases'],
      ['eventIds', 'SELECT COALESCE(MAX(id), 0) FROM events'],
    ] as const) {
      const sequence = counters[name]
      if (sequence.last === null) continue // nothing handed out yet: it starts past the stored reservation
      expect(sequence.last, name).toBeGreaterThanOrEqual(real.db.prepare(maxSql).pluck().get() as number)
      expect(stored(sequence.key), name).toBe(sequence.reserved)
      expect(sequence.reserved, name).toBeGreaterThanOrEqual(sequence.last)
    }
  },
  "the stored floor of the QUEUED jobs (where a start reads them from) is at or below every QUEUED job's seq": (real) => {
    if (real.db.inTransaction) return // an open group's writes, the floor's included, are not committed yet
    const stored = Number(real.db.prepare('SELECT value FROM settings WHERE key = ?').pluck().get(QUEUED_FROM_KEY) ?? 0)
    expect(engineContext(real.engine).jobTally.storedFloor).toBe(stored)
    const lowest = real.db.prepare("SELECT MIN(seq) FROM jobs WHERE state = 'QUEUED'").pluck().get() as number | null
    if (lowest !== null) expect(stored).toBeLessThanOrEqual(lowest)
  },
} satisfies Record<string, Invariant>

type InvariantName = keyof typeof INVARIANTS

// ---------------------------------------------------------------------------------------------
// Commands. Each runs one engine verb, checks the engine's answer against the model, then the
// invariant under test.

type Cmd = fc.Command<Model, Real>

let checkAfterEach: Invariant = () => {}

abstract class Base implements Cmd {
  check(): boolean {
    return true
  }
  run(model: Model, real: Real): void {
    this.apply(model, real)
    checkAfterEach(real, model)
  }
  abstract apply(model: Model, real: Real): void
  abstract toString(): string
}

class Submit extends Base {
  constructor(
    readonly cost: number,
    readonly priority: (typeof PRIORITIES)[number],
    readonly maxAttempts: number,
    readonly unique: boolean,
  ) {
    super()
  }
  apply(model: Model, real: Real): void {
    const { job, duplicate } = real.engine.submit({
      job_type: 'test',
      cost_units: this.cost,
      priority: this.priority,
      max_attempts: this.maxAttempts,
      unique: this.unique,
    })
    expect(duplicate).toBe(false)
    expect(dbJob(real, job.id)).toMatchObject({ state: 'QUEUED', attempts: 0 })
    model.jobs.push(job.id)
  }
  toString(): string {
    return `submit(cost=${this.cost}, ${this.priority}, max_attempts=${this.maxAttempts}${this.unique ? ', unique' : ''})`
  }
}

/** the queue API claim: the first `limit` jobs the worker may take, in scheduling order, a unique job alone. */
class Claim extends Base {
  constructor(
    readonly worker: string,
    readonly limit: number,
  ) {
    super()
  }
  apply(model: Model, real: Real): void {
    const expected = claimable(real, this.worker, this.limit).map((j) => j.id)
    const claimed = real.engine.claim({ worker_id: this.worker }, this.limit)
    expect(claimed.map((j) => j.id)).toEqual(expected)
    for (const job of claimed) {
      expect(job).toMatchObject({ state: 'CLAIMED', claimed_by: this.worker })
      model.claimed.push(job.id)
    }
  }
  toString(): string {
    return `claim(${this.worker}, limit=${this.limit})`
  }
}

function holdNewLease(model: Model, real: Real, lease: Lease): void {
  expect(lease.expires_at).toBe(real.clock.now() + (lease.ttl_s + lease.grace_s) * SECOND)
  model.leases.push({
    lease_id: lease.id,
    job_id: lease.job_id,
    worker_id: lease.worker_id,
    token: lease.token,
    attempt_id: lease.attempt_id,
    ttl_s: lease.ttl_s,
    grace_s: lease.grace_s,
    expires_at: lease.expires_at,
    heartbeat_limit: Infinity,
    state: 'ACTIVE',
    release_status: null,
    released_with: null,
  })
}

/**
 * the pull API `requestLease` (job becomes LEASED) or the worker API `claimAndLease` (RUNNING): the
 * head job the worker may take is leased if it fits, else the request is denied and nothing
 * behind the head is leased instead.
 */
class Grant extends Base {
  constructor(
    /** Which API grants: the pull API's request (LEASED) or the worker API's claim (RUNNING). */
    readonly api: 'pull' | 'worker',
    readonly worker: string,
    readonly ttl: number,
    readonly maxUnits: number | null,
  ) {
    super()
  }
  apply(model: Model, real: Real): void {
    const before = real.engine.getCapacity()
    const head = takeable(real, this.worker, this.maxUnits)[0]
    const filter = { worker_id: this.worker, max_units: this.maxUnits }
    const decision =
      this.api === 'pull' ? real.engine.requestLease(filter, this.ttl) : real.engine.claimAndLease(filter, this.ttl)
    const fits = head !== undefined && before.available > 0 && head.cost_units <= before.available
    expect(decision.granted, `head ${head?.id} cost ${head?.cost_units}, available ${before.available}`).toBe(fits)
    if (!decision.granted) return
    expect(decision.job.id).toBe(head!.id)
    expect(decision.lease).toMatchObject({ state: 'ACTIVE', worker_id: this.worker, cost_units: head!.cost_units, ttl_s: this.ttl })
    expect(decision.job).toMatchObject({
      state: this.api === 'pull' ? 'LEASED' : 'RUNNING',
      lease_id: decision.lease.id,
      attempts: head!.attempts + 1,
    })
    holdNewLease(model, real, decision.lease)
  }
  toString(): string {
    return `grant-${this.api}(${this.worker}, ttl=${this.ttl}${this.maxUnits === null ? '' : `, max_units=${this.maxUnits}`})`
  }
}

/**
 * the queue API lease request for a job the test claimed: approved exactly when the job fits, its
 * queue is not paused, and it is not a unique job whose worker holds another lease.
 */
class GrantClaimed extends Base {
  constructor(
    readonly index: number,
    readonly ttl: number,
  ) {
    super()
  }
  apply(model: Model, real: Real): void {
    const jobId = pick(model.claimed, this.index)
    if (jobId === undefined) return
    const job = dbJob(real, jobId)
    const before = real.engine.getCapacity()
    const uniqueBarred = job.is_unique === 1 && job.claimed_by !== null && holdsActiveLease(real, job.claimed_by)
    const result = attempt(() => real.engine.requestLeaseForJob({ job_id: jobId, ttl_s: this.ttl }))
    // A claim past its expiry is expired on the spot (as the reaper would), so it is refused too.
    const claimExpired = job.claim_expires_at !== null && job.claim_expires_at <= real.clock.now()
    if (!['CLAIMED', 'PREPARING', 'LEASE_PENDING'].includes(job.state) || claimExpired) {
      expectRefusal(result, 409, 'illegal_transition')
      if (claimExpired) expect(dbJob(real, jobId).state).toBe('QUEUED')
      return
    }
    const decision = result.value!
    const paused = real.db.prepare('SELECT 1 FROM paused_queues WHERE queue = ?').get(job.queue) !== undefined
    expect(decision.approved).toBe(job.cost_units <= before.available && !paused && !uniqueBarred)
    if (!decision.approved) {
      expect(decision.job.state).toBe('LEASE_PENDING')
      return
    }
    expect(decision.job).toMatchObject({ state: 'RUNNING', attempts: job.attempts + 1, lease_id: decision.lease.id })
    expect(decision.lease.worker_id).toBe(job.claimed_by)
    holdNewLease(model, real, decision.lease)
  }
  toString(): string {
    return `grant002(claimed #${this.index}, ttl=${this.ttl})`
  }
}

/** Heartbeat by lease id (001/002) or by token (003), as the holder or as another worker. */
class Heartbeat extends Base {
  constructor(
    readonly index: number,
    readonly byToken: boolean,
    readonly wrongWorker: boolean,
  ) {
    super()
  }
  apply(model: Model, real: Real): void {
    const held = pick(model.leases, this.index)
    if (!held) return
    const now = real.clock.now()
    const worker = this.wrongWorker ? `not-${held.worker_id}` : held.worker_id
    const before = dbJob(real, held.job_id)
    const result = attempt(() =>
      this.byToken
        ? real.engine.heartbeatByToken({ job_id: held.job_id, worker_id: worker, lease_token: held.token })
        : real.engine.heartbeat({ lease_id: held.lease_id, worker_id: worker }),
    )
    expireIfDue(held, now)
    if (this.wrongWorker) {
      expectRefusal(result, 403, 'worker_mismatch')
      return
    }
    if (held.state !== 'ACTIVE') {
      expectRefusal(result, 409, notActiveCode(held))
      return
    }
    expect(result.error).toBeUndefined()
    held.expires_at = Math.min(now + (held.ttl_s + held.grace_s) * SECOND, Math.max(held.heartbeat_limit, now))
    const answer = result.value!
    expect('lease' in answer ? answer.lease.expires_at : answer.expires_at).toBe(held.expires_at)
    expect('lease' in answer ? answer.job.cancel_requested : answer.cancel_requested).toBe(before.cancel_requested === 1)
    const after = dbJob(real, held.job_id)
    expect(dbLease(real, held.lease_id).expires_at).toBe(held.expires_at)
    expect(after.state).toBe('RUNNING') // the first heartbeat moves LEASED → RUNNING
    expect(after.cancel_requested).toBe(before.cancel_requested)
  }
  toString(): string {
    return `heartbeat(lease #${this.index}${this.byToken ? ', by token' : ''}${this.wrongWorker ? ', wrong worker' : ''})`
  }
}

class Advance extends Base {
  constructor(readonly ms: number) {
    super()
  }
  apply(_model: Model, real: Real): void {
    real.clock.advance(this.ms)
  }
  toString(): string {
    return `advance(${this.ms} ms)`
  }
}

/** The reaper expires exactly the ACTIVE leases and the queue API claims whose time has come. */
class Reap extends Base {
  apply(model: Model, real: Real): void {
    const now = real.clock.now()
    const due = model.leases.filter((l) => l.state === 'ACTIVE' && l.expires_at <= now)
    const claimsDue = real.db
      .prepare("SELECT COUNT(*) AS n FROM jobs WHERE state IN ('CLAIMED', 'PREPARING', 'LEASE_PENDING') AND claim_expires_at <= ?")
      .get(now) as { n: number }
    const reaped = real.engine.reap()
    expect(reaped).toMatchObject({ leases: due.length, claims: claimsDue.n })
    for (const held of due) expireIfDue(held, now)
    expect(real.engine.reap()).toMatchObject({ leases: 0, claims: 0 })
  }
  toString(): string {
    return 'reap()'
  }
}

type FinishVia = 'release' | 'attempt'

/**
 * Ends the attempt under a held lease: SUCCEEDED (the pull API/002 release, or the worker API
 * complete) or FAILED (release with FAILED is final; the worker API fail may be retryable). A repeat
 * of a finish that took effect, saying the same, answers as the first did and changes nothing; a
 * failure with another error (none through release, another retryability) is 409 lease_not_active.
 */
class Finish extends Base {
  constructor(
    readonly index: number,
    readonly status: 'SUCCEEDED' | 'FAILED',
    readonly via: FinishVia,
    readonly retryable: boolean,
  ) {
    super()
  }
  apply(model: Model, real: Real): void {
    const held = pick(model.leases, this.index)
    if (!held) return
    const now = real.clock.now()
    const before = dbJob(real, held.job_id)
    const eventsBefore = real.db.prepare('SELECT COUNT(*) AS n FROM events').get() as { n: number }
    const report = { job_id: held.job_id, attempt_id: held.attempt_id, worker_id: held.worker_id, lease_token: held.token }
    const result = attempt<unknown>(() => {
      if (this.via === 'release') return real.engine.release({ lease_id: held.lease_id, worker_id: held.worker_id, status: this.status })
      return this.status === 'SUCCEEDED'
        ? real.engine.complete(report)
        : real.engine.fail({ ...report, error: { message: 'boom', retryable: this.retryable } })
    })
    expireIfDue(held, now)
    // A cancel ends its attempt CANCELED whatever failure was reported; any failure repeats it.
    const repeat = held.released_with === this.says() || (held.release_status === 'CANCELED' && this.status !== 'SUCCEEDED')
    if (held.state === 'RELEASED' && repeat) {
      // A repeat: same answer, nothing written.
      expect(result.error).toBeUndefined()
      expect(dbJob(real, held.job_id).state).toBe(before.state)
      expect(real.db.prepare('SELECT COUNT(*) AS n FROM events').get()).toEqual(eventsBefore)
      return
    }
    if (held.state !== 'ACTIVE') {
      expectRefusal(result, 409, notActiveCode(held))
      return
    }
    expect(result.error).toBeUndefined()
    held.state = 'RELEASED'
    held.release_status = this.status !== 'SUCCEEDED' && before.cancel_requested ? 'CANCELED' : this.status
    held.released_with = this.says()
    let expected: JobState
    if (this.status === 'SUCCEEDED') expected = 'DONE'
    else if (before.cancel_requested) expected = 'CANCELED'
    else if (this.via === 'attempt' && this.retryable && before.attempts < before.max_attempts) expected = 'QUEUED'
    else expected = 'FAILED'
    expect(dbJob(real, held.job_id).state).toBe(expected)
  }
  /** What this finish reports: a completion no result either way; a failure its error, none through release. */
  says(): string {
    if (this.status === 'SUCCEEDED') return 'SUCCEEDED'
    return this.via === 'release' ? 'FAILED without an error' : `FAILED boom${this.retryable ? ', retryable' : ''}`
  }
  toString(): string {
    const kind = this.status === 'SUCCEEDED' ? 'complete' : `fail${this.retryable ? '(retryable)' : ''}`
    return `${kind}(lease #${this.index}, via ${this.via})`
  }
}

/** Cancel: at once before a lease, a request while leased, 409 once terminal. */
class Cancel extends Base {
  constructor(readonly index: number) {
    super()
  }
  apply(model: Model, real: Real): void {
    const jobId = pick(model.jobs, this.index)
    if (!jobId) return
    const before = dbJob(real, jobId)
    const result = attempt(() => real.engine.cancel(jobId))
    if (['DONE', 'FAILED', 'CANCELED', 'TIMEOUT'].includes(before.state)) {
      expectRefusal(result, 409, 'illegal_transition')
    } else if (before.state === 'LEASED' || before.state === 'RUNNING') {
      expect(result.value).toMatchObject({ state: before.state, cancel_requested: true })
      // The first cancel of a running attempt bounds how far heartbeats carry its lease.
      const held = model.leases.find((lease) => lease.job_id === jobId && lease.state === 'ACTIVE')
      if (held && !before.cancel_requested) held.heartbeat_limit = real.clock.now() + (held.ttl_s + held.grace_s) * SECOND
    } else {
      expect(result.value).toMatchObject({ state: 'CANCELED' })
    }
  }
  toString(): string {
    return `cancel(job #${this.index})`
  }
}

/** The queue every job of the model is submitted to (a submit's default). */
const QUEUE = 'default'

/** An operator pauses or resumes the jobs' queue: while it is paused, no claim or grant takes its jobs (takeable reads the table). */
class Pause extends Base {
  constructor(readonly paused: boolean) {
    super()
  }
  apply(_model: Model, real: Real): void {
    const answer = this.paused ? real.engine.pauseQueue(QUEUE) : real.engine.resumeQueue(QUEUE)
    expect(answer.paused).toBe(this.paused)
  }
  toString(): string {
    return this.paused ? `pause(${QUEUE})` : `resume(${QUEUE})`
  }
}

/** Closes the better-sqlite3 handle and opens a new engine on the same file and clock. */
/** A group boundary: the open commit group commits now (in the runs that group). */
class Flush extends Base {
  apply(_model: Model, real: Real): void {
    real.engine.flush()
  }
  override toString(): string {
    return 'flush'
  }
}

class Reopen extends Base {
  apply(_model: Model, real: Real): void {
    real.engine.flush()
    real.db.close()
    Object.assign(real, openEngine(real.path, real.clock, real.busy, real.batched))
  }
  toString(): string {
    return 'reopen()'
  }
}

/**
 * A block of job seqs reserved, as every 4,096th submit does: the floor the start reads the
 * QUEUED jobs from rises to the oldest of them. A run has too few submits to reserve a second
 * block, so without this the floor would never rise above the first job, and a requeue below it
 * would never be tried.
 */
class ReserveJobSeqs extends Base {
  apply(_model: Model, real: Real): void {
    real.engine.flush()
    const ctx = engineContext(real.engine)
    const next = (real.db.prepare('SELECT COALESCE(MAX(seq), 0) FROM jobs').pluck().get() as number) + 1
    ctx.transact(() => ctx.jobTally.storeFloor(next))
  }
  toString(): string {
    return 'reserveJobSeqs()'
  }
}

const worker = fc.constantFrom(...WORKERS)
const index = fc.nat({ max: 50 })
const ttl = fc.integer({ min: 1, max: 20 })

const submit = fc
  .tuple(fc.integer({ min: 1, max: 6 }), fc.constantFrom(...PRIORITIES), fc.integer({ min: 1, max: 3 }), fc.boolean())
  .map(([cost, priority, max, unique]) => new Submit(cost, priority, max, unique))
const grant = fc
  .tuple(fc.constantFrom('pull' as const, 'worker' as const), worker, ttl, fc.option(fc.integer({ min: 1, max: 6 }), { freq: 3 }))
  .map(([api, w, t, max]) => new Grant(api, w, t, max))
const heartbeat = fc.tuple(index, fc.boolean()).map(([i, byToken]) => new Heartbeat(i, byToken, false))
const finishVia = fc.constantFrom<FinishVia>('release', 'attempt')

// fc.commands picks each arbitrary equally often: the common verbs are listed more than once.
const commands = fc.commands(
  [
    submit,
    submit,
    submit,
    fc.tuple(worker, fc.integer({ min: 1, max: 2 })).map(([w, limit]) => new Claim(w, limit)),
    grant,
    grant,
    grant,
    fc.tuple(index, ttl).map(([i, t]) => new GrantClaimed(i, t)),
    heartbeat,
    heartbeat,
    fc.tuple(index, fc.boolean()).map(([i, byToken]) => new Heartbeat(i, byToken, true)),
    fc.oneof(fc.integer({ min: 0, max: 5 * SECOND }), fc.integer({ min: 5 * SECOND, max: 40 * SECOND })).map((ms) => new Advance(ms)),
    fc.constant(new Reap()),
    fc.tuple(index, finishVia).map(([i, via]) => new Finish(i, 'SUCCEEDED', via, false)),
    fc.tuple(index, finishVia, fc.boolean()).map(([i, via, retryable]) => new Finish(i, 'FAILED', via, retryable)),
    index.map((i) => new Cancel(i)),
    fc.constant(new Flush()),
    fc.constant(new Reopen()),
    fc.constant(new ReserveJobSeqs()),
    fc.boolean().map((paused) => new Pause(paused)),
  ],
  { maxCommands: MAX_COMMANDS, size: 'max' },
)

// ---------------------------------------------------------------------------------------------

const dir = mkdtempSync(join(tmpdir(), 'leasehold-model-'))
let runs = 0

afterAll(() => rmSync(dir, { recursive: true, force: true }))

function runScenario(cmds: Iterable<Cmd>, busy: number, batched: boolean): void {
  const path = join(dir, `run-${++runs}.db`)
  const clock = new ManualClock(T0)
  const real: Real = { path, clock, busy, batched, ...openEngine(path, clock, busy, batched) }
  try {
    fc.modelRun(() => ({ model: { jobs: [], claimed: [], leases: [] }, real }), cmds)
  } finally {
    real.engine.flush()
    real.db.close()
    for (const suffix of ['', '-wal', '-shm']) rmSync(path + suffix, { force: true })
  }
}

describe('engine against a model, with invariants checked after every command', () => {
  it.each(Object.keys(INVARIANTS) as InvariantName[])('%s', (name) => {
    checkAfterEach = INVARIANTS[name]
    try {
      fc.assert(
        fc.property(commands, fc.constantFrom(0, 0, 3, 5), fc.boolean(), (cmds, busy, batched) => runScenario(cmds, busy, batched)),
        { numRuns: RUNS },
      )
    } finally {
      checkAfterEach = () => {}
    }
  })
})
