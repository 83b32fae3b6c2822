/** The benchmark's measurements, one function each. Every one works on its own temp-file database. */
import { statSync } from 'node:fs'
import { performance } from 'node:perf_hooks'
import BetterSqlite3, { type Database } from 'better-sqlite3'
import { applyConnectionSettings, openDatabase, type Durability } from '../../src-main/db/open'
import { keyedId, newId, newToken } from '../../src-main/engine/store/ids'
import { priorityRank } from '../../src-main/engine/rules/states'
import { openEngine, percentile, T0, timeMs, type BenchEngine, type TempDir } from './lib'
import { engineContext } from '../../src-main/engine/internals'

const WORKER = { worker_id: 'bench-worker' }
/** The measured jobs: default priority, so they are picked ahead of the LOW backlog. */
const NOOP = { job_type: 'noop', cost_units: 1 } as const
/** The backlog: plain no-op jobs one priority below the measured ones. */
const BACKLOG = { job_type: 'noop', cost_units: 1, priority: 'LOW' } as const

// ---------------------------------------------------------------------------------------------
// The engine lifecycle: submit → requestLease (grant) → heartbeat → release SUCCEEDED

export interface LifecycleResult {
  /** Jobs actually run: fewer than asked when the time cap was reached first. */
  jobs: number
  jobsPerS: number
  /** Mean microseconds per call of each verb. */
  verbUs: { submit: number; lease: number; heartbeat: number; release: number }
}

/** One job through its whole life; adds each verb's time (ms) to `acc`. */
function oneLifecycle(b: BenchEngine, acc: number[]): void {
  const { engine, clock } = b
  clock.advance(1)
  let t = performance.now()
  engine.submit(NOOP)
  let u = performance.now()
  acc[0]! += u - t
  const decision = engine.requestLease(WORKER)
  t = performance.now()
  acc[1]! += t - u
  if (!decision.granted) throw new Error(`bench: lease denied: ${decision.reason}`)
  const lease_id = decision.lease.id
  // A second later, as a real heartbeat comes: at the grant's own millisecond the new expiry
  // would equal the granted one, and SQLite leaves a row it would rewrite unchanged unwritten.
  clock.advance(1000)
  t = performance.now()
  engine.heartbeat({ lease_id, worker_id: WORKER.worker_id })
  u = performance.now()
  acc[2]! += u - t
  engine.release({ lease_id, worker_id: WORKER.worker_id, status: 'SUCCEEDED' })
  acc[3]! += performance.now() - u
}

/**
 * Runs `jobs` lifecycles (after a short untimed warm-up) on an open engine, stopping early once
 * `capMs` have passed so a slow or busy machine still finishes the bench in bounded time.
 */
export function runLifecycle(b: BenchEngine, jobs: number, capMs = Infinity, warmup = Math.min(1000, jobs)): LifecycleResult {
  const scratch = [0, 0, 0, 0]
  for (let i = 0; i < warmup; i++) oneLifecycle(b, scratch)
  const acc = [0, 0, 0, 0]
  let done = 0
  const deadline = performance.now() + capMs
  const ms = timeMs(() => {
    for (; done < jobs; done++) {
      if (done % 100 === 0 && performance.now() > deadline) break
      oneLifecycle(b, acc)
    }
  })
  const us = (i: number) => (acc[i]! * 1000) / done
  return { jobs: done, jobsPerS: (done * 1000) / ms, verbUs: { submit: us(0), lease: us(1), heartbeat: us(2), release: us(3) } }
}

/** Lifecycle jobs/s on a fresh database with nothing else queued. */
export function lifecycleEmpty(dir: TempDir, durability: Durability, jobs: number, capMs = Infinity): LifecycleResult {
  const b = openEngine(dir, durability)
  try {
    return runLifecycle(b, jobs, capMs)
  } finally {
    b.db.close()
  }
}

// ---------------------------------------------------------------------------------------------
// The backlog

const JOB_COLUMNS = [
  'id', 'addon_id', 'job_type', 'priority', 'cost_units', 'constraints', 'payload', 'is_unique',
  'idempotency_key', 'tags', 'max_runtime_s', 'queue', 'max_attempts', 'state', 'attempts', 'claimed_by',
  'claim_expires_at', 'lease_id', 'next_retry_at', 'eligible_at', 'cancel_requested', 'progress', 'note',
  'dead_letter', 'final_status', 'error', 'result', 'metrics', 'created_at', 'updated_at', 'started_at', 'finished_at',
] as const

/**
 * The first of `count` numbers of an engine sequence (counters.ts) past every one it reserved or
 * stored, reserved as the engine would. An engine already open hands out numbers from its memory:
 * it must be opened anew after rows are written this way.
 */
function reserveBlock(db: Database, key: string, storedMaxSql: string, count: number): number {
  const stored = Number(db.prepare('SELECT value FROM settings WHERE key = ?').pluck().get(key) ?? 0)
  const first = Math.max(stored, db.prepare(storedMaxSql).pluck().get() as number) + 1
  db.prepare('INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value').run(key, String(first + count - 1))
  return first
}

/**
 * Appends `count` QUEUED LOW no-op jobs, as `engine.submit` would write them (jobs rows only: no
 * stream messages or events), in one transaction with one prepared INSERT. Returns ms taken.
 * Their keys are reserved as the engine's (see reserveBlock).
 */
export function insertBacklog(db: Database, count: number, now: number, maxAttempts: number): number {
  const insert = db.prepare(
    `INSERT INTO jobs (seq, ${JOB_COLUMNS.join(', ')}) VALUES (?, ${JOB_COLUMNS.map(() => '?').join(', ')})`,
  )
  const priority = priorityRank(BACKLOG.priority)
  const fill = db.transaction(() => {
    const seq = reserveBlock(db, 'job_seqs_reserved', 'SELECT COALESCE(MAX(seq), 0) FROM jobs', count)
    for (let i = 0; i < count; i++) {
      insert.run(
        seq + i, newId(), null, BACKLOG.job_type, priority, BACKLOG.cost_units, '{}', '{}', 0,
        null, '[]', null, 'default', maxAttempts, 'QUEUED', 0, null,
        null, null, null, now, 0, null, null,
        0, null, null, null, null, now, now, null, null,
      )
    }
  })
  return timeMs(() => fill())
}

/** How long before `now` the jobs of {@link insertFinished} finished. */
const FINISHED_SPAN_MS = 23 * 3600 * 1000

/**
 * Appends `count` DONE no-op jobs with their JOB_DONE events, finished over the 23 h before `now`
 * (so the snapshot's day counts them all, and for an hour more: the day is counted in whole
 * minutes, and a bench that reads it before and after a drain must see only the drain's jobs
 * change it, not the oldest minute's leave it), as a long-used host's database holds them, in one
 * transaction. By default rows only (no leases or attempts): what a host keeps in memory does
 * not grow with those. With `lifecycle`, every row a real run leaves, as the data-model floor
 * writes them: the job (with its stream message), the lease that ran its attempt, and its four events (submitted,
 * lease granted, running, done). Returns ms.
 */
export function insertFinished(db: Database, count: number, now: number, options: { lifecycle?: boolean } = {}): number {
  const insertJob = db.prepare(
    `INSERT INTO jobs (seq, ${JOB_COLUMNS.join(', ')}, stream_message_id) VALUES (?, ${JOB_COLUMNS.map(() => '?').join(', ')}, ?)`,
  )
  const insertEvent = db.prepare("INSERT INTO events (ts, entity_type, entity_id, job_id, event_type, data) VALUES (?, ?, ?, ?, ?, ?)")
  const insertLease = db.prepare(
    `INSERT INTO leases (fence, id, job_id, attempt_id, worker_id, cost_units, ttl_s, grace_s, state, token, granted_at, last_heartbeat_at, expires_at, released_at, release_status, attempt, disposition)
     VALUES (?, ?, ?, ?, 'bench-worker', 1, 30, 5, 'RELEASED', ?, ?, ?, ?, ?, 'SUCCEEDED', 1, 'FINAL')`,
  )
  const priority = priorityRank('NORMAL')
  const fill = db.transaction(() => {
    const seq = reserveBlock(db, 'job_seqs_reserved', 'SELECT COALESCE(MAX(seq), 0) FROM jobs', count)
    let fence = reserveBlock(db, 'fences_reserved', 'SELECT COALESCE(MAX(fence), 0) FROM leases', count)
    let message = reserveBlock(db, 'stream_message_ids_reserved', 'SELECT COALESCE(MAX(stream_message_id), 0) FROM jobs', count)
    for (let i = 0; i < count; i++) {
      const id = newId()
      const at = now - FINISHED_SPAN_MS + Math.floor(((i + 1) * FINISHED_SPAN_MS) / (count + 1))
      const leaseId = options.lifecycle ? newId() : null
      insertJob.run(
        seq + i, id, null, NOOP.job_type, priority, NOOP.cost_units, '{}', '{}', 0,
        null, '[]', null, 'default', 3, 'DONE', 1, 'bench-worker',
        null, leaseId, null, at, 0, 0.5, null,
        0, 'SUCCEEDED', null, 'null', null, at, at, at, at,
        options.lifecycle ? message++ : null,
      )
      if (options.lifecycle) {
        insertLease.run(fence, leaseId, id, newId(), newToken(), at, at, at + 35_000, at)
        insertEvent.run(at, 'JOB', id, id, 'JOB_SUBMITTED', JSON.stringify({ state: 'QUEUED', job_type: NOOP.job_type, priority: 'NORMAL', cost_units: 1, queue: 'default' }))
        insertEvent.run(at, 'LEASE', leaseId, id, 'LEASE_GRANTED', JSON.stringify({ state: 'RUNNING', worker_id: 'bench-worker', cost_units: 1, attempt: 1, fence: fence++, expires_at: at + 35_000 }))
        insertEvent.run(at, 'JOB', id, id, 'JOB_RUNNING', JSON.stringify({ state: 'RUNNING', lease_id: leaseId }))
      }
      insertEvent.run(at, 'JOB', id, id, 'JOB_DONE', JSON.stringify({ state: 'DONE', attempt: 1, dead_letter: false }))
    }
  })
  return timeMs(() => fill())
}

// ---------------------------------------------------------------------------------------------
// Lease-grant latency

/**
 * Microseconds of each `requestLease` that grants the head of the backlog. Between samples
 * (untimed) the lease is released and a replacement LOW job submitted, so the depth stays put.
 */
export function grantLatencies(b: BenchEngine, samples: number): number[] {
  const { engine, clock } = b
  const out: number[] = []
  for (let i = 0; i < samples; i++) {
    clock.advance(1)
    const start = performance.now()
    const decision = engine.requestLease(WORKER)
    out.push((performance.now() - start) * 1000)
    if (!decision.granted) throw new Error(`bench: lease denied: ${decision.reason}`)
    engine.release({ lease_id: decision.lease.id, worker_id: WORKER.worker_id, status: 'SUCCEEDED' })
    engine.submit(BACKLOG)
  }
  return out
}

export interface Latency {
  p50: number
  p99: number
}

export function latencySummary(samples: number[]): Latency {
  return { p50: percentile(samples, 50), p99: percentile(samples, 99) }
}

// ---------------------------------------------------------------------------------------------
// The reaper

export interface ReaperResult {
  ms: number
  expired: number
  setupMs: number
}

/** Grants `leases` leases, moves the clock past their expiry and times one `engine.reap()`. */
export function reaper(dir: TempDir, leases: number): ReaperResult {
  const b = openEngine(dir, 'normal', leases)
  const { engine, clock } = b
  try {
    const setupMs = timeMs(() => {
      engineContext(engine).transact(() => {
        for (let i = 0; i < leases; i++) engine.submit(NOOP)
      })
      for (let done = 0; done < leases; ) {
        const batch = Math.min(1000, leases - done)
        engineContext(engine).transact(() => {
          for (let i = 0; i < batch; i++) {
            const d = engine.requestLease(WORKER)
            if (!d.granted) throw new Error(`bench: lease denied: ${d.reason}`)
          }
        })
        done += batch
      }
    })
    clock.advance((engine.config.leaseTtlS + engine.config.heartbeatGraceS) * 1000 + 1)
    let expired = 0
    const ms = timeMs(() => {
      expired = engine.reap().leases
    })
    if (expired !== leases) throw new Error(`bench: reaper expired ${expired} of ${leases} leases`)
    return { ms, expired, setupMs }
  } finally {
    b.db.close()
  }
}

// ---------------------------------------------------------------------------------------------
// The raw floor: plain better-sqlite3, same pragmas, five one-row write transactions per job

const FLOOR_TXNS_PER_JOB = 5

function openFloorDb(path: string, durability: Durability): Database {
  const db = new BetterSqlite3(path)
  applyConnectionSettings(db, durability)
  db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, state TEXT NOT NULL, at INTEGER NOT NULL)')
  return db
}

/** Runs `oneJob` `jobs` times after a warm-up, stopping early once `capMs` have passed. */
function timedJobs(oneJob: (i: number) => void, jobs: number, capMs: number): { jobs: number; jobsPerS: number } {
  for (let i = 0; i < Math.min(1000, jobs); i++) oneJob(i) // warm-up
  let done = 0
  const deadline = performance.now() + capMs
  const ms = timeMs(() => {
    for (; done < jobs; done++) {
      if (done % 100 === 0 && performance.now() > deadline) break
      oneJob(done)
    }
  })
  return { jobs: done, jobsPerS: (done * 1000) / ms }
}

/** Runs `write` as one BEGIN IMMEDIATE … COMMIT through prepared statements, as the engine does. */
function transactions(db: Database): (write: () => void) => void {
  const begin = db.prepare('BEGIN IMMEDIATE')
  const commit = db.prepare('COMMIT')
  return (write) => {
    begin.run()
    write()
    commit.run()
  }
}

/**
 * Jobs/s of the machine's floor: per job, one INSERT then four UPDATEs of that row, each its own
 * transaction through prepared statements. Stops early once `capMs` have passed.
 */
export function rawFloor(dir: TempDir, durability: Durability, jobs: number, capMs = Infinity): { jobs: number; jobsPerS: number } {
  const db = openFloorDb(dir.path('floor.sqlite'), durability)
  try {
    const txn = transactions(db)
    const insert = db.prepare('INSERT INTO t (state, at) VALUES (?, ?)')
    const update = db.prepare('UPDATE t SET state = ?, at = ? WHERE id = ?')
    return timedJobs((i) => {
      let id = 0
      txn(() => (id = Number(insert.run('QUEUED', i).lastInsertRowid)))
      for (let k = 1; k < FLOOR_TXNS_PER_JOB; k++) txn(() => update.run(`S${k}`, i, id))
    }, jobs, capMs)
  } finally {
    db.close()
  }
}

/**
 * Jobs/s of the data model's floor: the rows the engine writes for one lifecycle (a job, the
 * lease that runs its attempt, four events, and their updates), written into Leasehold's
 * own schema with plain prepared statements in the engine's four transactions, with none of its
 * reads, checks or bookkeeping. Engine ÷ this floor is what the engine's own logic costs; this
 * floor ÷ the raw floor is what the model's tables and indexes cost.
 */
export function modelFloor(dir: TempDir, jobs: number, capMs = Infinity): { jobs: number; jobsPerS: number } {
  const { sqlite: db } = openDatabase({ path: dir.path('model.sqlite') })
  try {
    const txn = transactions(db)
    // As the engine writes them (migration 0013): ids that name their row's key, rows updated by
    // key, and each job's events chained (events.prev_id, jobs.last_event_id).
    const insertJob = db.prepare(
      `INSERT INTO jobs (seq, id, job_type, priority, cost_units, constraints, payload, is_unique, tags, queue, max_attempts, state,
         attempts, stream_message_id, eligible_at, cancel_requested, dead_letter, created_at, updated_at, last_event_id)
       VALUES (?, ?, 'noop', 1, 1, '{}', '{}', 0, '[]', 'default', 3, 'QUEUED', 0, ?, ?, 0, 0, ?, ?, ?)`,
    )
    const insertEvent = db.prepare("INSERT INTO events (ts, entity_type, entity_id, job_id, event_type, data, prev_id) VALUES (?, 'JOB', ?, ?, ?, '{}', ?)")
    const leaseJob = db.prepare("UPDATE jobs SET state = 'LEASED', attempts = 1, lease_id = ?, claimed_by = 'w', started_at = ?, updated_at = ?, last_event_id = ? WHERE seq = ?")
    const insertLease = db.prepare(
      `INSERT INTO leases (fence, id, job_id, attempt_id, worker_id, cost_units, ttl_s, grace_s, state, token, granted_at, last_heartbeat_at, expires_at, attempt)
       VALUES (?, ?, ?, ?, 'w', 1, 30, 5, 'ACTIVE', ?, ?, ?, ?, 1)`,
    )
    const beat = db.prepare('UPDATE leases SET last_heartbeat_at = ?, expires_at = ? WHERE fence = ?')
    const runJob = db.prepare("UPDATE jobs SET state = 'RUNNING', updated_at = ?, last_event_id = ? WHERE seq = ?")
    const releaseLease = db.prepare("UPDATE leases SET state = 'RELEASED', released_at = ?, release_status = 'SUCCEEDED', disposition = 'FINAL' WHERE fence = ?")
    const finishJob = db.prepare("UPDATE jobs SET state = 'DONE', final_status = 'SUCCEEDED', finished_at = ?, updated_at = ?, last_event_id = ? WHERE seq = ?")
    const event = (now: number, entityId: string, jobId: string, type: string, prev: number) =>
      Number(insertEvent.run(now, entityId, jobId, type, prev).lastInsertRowid)
    let fence = 0 // also the job's key and its message id: one of each per job, warm-up included
    return timedJobs(() => {
      fence += 1
      const now = T0 + fence
      const [jobId, leaseId, attemptId] = [keyedId(fence), keyedId(fence), newId()]
      let last = 0
      txn(() => {
        last = event(now, jobId, jobId, 'JOB_SUBMITTED', 0) // 0: the first of its chain
        insertJob.run(fence, jobId, fence, now, now, now, last)
      })
      txn(() => {
        last = event(now, leaseId, jobId, 'LEASE_GRANTED', last)
        leaseJob.run(leaseId, now, now, last, fence)
        insertLease.run(fence, leaseId, jobId, attemptId, newToken(), now, now, now + 35_000)
      })
      txn(() => {
        beat.run(now, now + 35_000, fence)
        last = event(now, jobId, jobId, 'JOB_RUNNING', last)
        runJob.run(now, last, fence)
      })
      txn(() => {
        releaseLease.run(now, fence)
        last = event(now, jobId, jobId, 'JOB_DONE', last)
        finishJob.run(now, now, last, fence)
      })
    }, jobs, capMs)
  } finally {
    db.close()
  }
}

// ---------------------------------------------------------------------------------------------
// Pages per job, and many workers at once (group commit)

/**
 * WAL frames (pages) one lifecycle writes, one job at a time: each verb its own commit, as a
 * lone worker's calls would be. Checkpoints are held off so that every frame stays countable.
 */
export function pagesPerJob(dir: TempDir, jobs: number): number {
  const b = openEngine(dir, 'normal')
  try {
    const scratch = [0, 0, 0, 0]
    for (let i = 0; i < 200; i++) oneLifecycle(b, scratch) // the tables reach their steady shape
    b.db.pragma('wal_autocheckpoint = 0')
    b.db.pragma('wal_checkpoint(TRUNCATE)')
    for (let i = 0; i < jobs; i++) oneLifecycle(b, scratch)
    const pageSize = b.db.pragma('page_size', { simple: true }) as number
    const walBytes = statSync(dir.path('bench.sqlite') + '-wal').size
    return (walBytes - 32) / (24 + pageSize) / jobs
  } finally {
    b.db.close()
  }
}

export interface ConcurrentResult {
  jobsPerS: number
  /** Operations per commit on average: how much group commit gathered. */
  opsPerCommit: number
}

/**
 * `workers` simulated workers in this process, each running claim → heartbeat → complete one
 * job at a time through `engine.run`, so their verbs interleave and share commits as requests
 * arriving together do in the host. The jobs are submitted first (untimed).
 */
export async function engineConcurrent(dir: TempDir, jobs: number, workers: number): Promise<ConcurrentResult> {
  const b = openEngine(dir, 'normal', 1_000_000)
  const { engine } = b
  try {
    for (let i = 0; i < jobs; i += 1000) engine.submitMany(Array.from({ length: Math.min(1000, jobs - i) }, () => NOOP))
    const commitsBefore = engine.commits
    let ops = 0
    const run = <T>(op: () => T): Promise<T> => {
      ops += 1
      return engine.run(op)
    }
    const started = performance.now()
    await Promise.all(
      Array.from({ length: workers }, async (_, i) => {
        const worker_id = `bench-${i}`
        for (;;) {
          const { granted } = await run(() => engine.claimBatch({ worker_id }, 1))
          const claimed = granted[0]
          if (!claimed) return
          const ref = { worker_id, job_id: claimed.job_id, lease_token: claimed.lease_token }
          await run(() => engine.heartbeatByToken(ref))
          await run(() => engine.complete({ ...ref, attempt_id: claimed.attempt_id }))
        }
      }),
    )
    const ms = performance.now() - started
    return { jobsPerS: (jobs * 1000) / ms, opsPerCommit: ops / Math.max(1, engine.commits - commitsBefore) }
  } finally {
    b.db.close()
  }
}
