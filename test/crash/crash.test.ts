/**
 * Crash test: a child process (driver.ts) drives the engine on a database file and acknowledges
 * each committed operation on stdout; the test kills it with SIGKILL at a random moment, several
 * rounds on the same file, and after every kill checks that the file kept every promise made.
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import { openDatabase } from '../../src-main/db/open'
import type { JobRow, LeaseRow } from '../../src-main/db/schema'
import { ManualClock } from '../../src-main/engine/rules/clock'
import { Engine } from '../../src-main/engine'
import { DRIVER_CAPACITY, DRIVER_CONFIG, type Ack } from './protocol'

const DRIVER = fileURLToPath(new URL('./driver.ts', import.meta.url))
const ROUNDS = 5
const KILL_AFTER_MS = { min: 100, max: 600 }
/** Starting the driver (tsx compiles it) may take a while on a cold cache. */
const READY_TIMEOUT_MS = 20_000

const BASE_SEED = Number(process.env.CRASH_SEED ?? Math.floor(Math.random() * 1e9))

interface Round {
  acks: Ack[]
  signal: NodeJS.Signals | null
  code: number | null
  stderr: string
}

/**
 * Runs the driver on `path` and SIGKILLs it `killAfterMs` after it reports ready. Only complete
 * lines count as acknowledgements: a line cut by the kill was never fully promised.
 */
function runDriverUntilKilled(path: string, seed: number, killAfterMs: number): Promise<Round> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', DRIVER, path, String(seed)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    let killTimer: NodeJS.Timeout | undefined
    const readyTimer = setTimeout(() => child.kill('SIGKILL'), READY_TIMEOUT_MS)
    child.stdout.setEncoding('utf8')
    child.stderr.setEncoding('utf8')
    child.stdout.on('data', (chunk: string) => {
      stdout += chunk
      if (killTimer === undefined && stdout.includes('"op":"ready"')) {
        clearTimeout(readyTimer)
        killTimer = setTimeout(() => child.kill('SIGKILL'), killAfterMs)
      }
    })
    child.stderr.on('data', (chunk: string) => (stderr += chunk))
    child.on('error', reject)
    child.on('close', (code, signal) => {
      clearTimeout(readyTimer)
      clearTimeout(killTimer)
      const lines = stdout.split('\n')
      lines.pop() // the unterminated tail (empty if the last line was complete)
      resolve({ acks: lines.map((line) => JSON.parse(line) as Ack), signal, code, stderr })
    })
  })
}

/** Everything acknowledged so far, over all rounds. */
interface Promised {
  submitted: Set<string>
  completed: Set<string>
  /** The latest expiry acknowledged for each lease (grant or heartbeat). */
  expiresAt: Map<string, number>
}

const dir = mkdtempSync(join(tmpdir(), 'leasehold-crash-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe('crash: SIGKILL at random moments never loses or doubles a committed operation', () => {
  it(`keeps every acknowledged operation over ${ROUNDS} kills (CRASH_SEED=${BASE_SEED})`, async () => {
    const path = join(dir, 'crash.db')
    const promised: Promised = { submitted: new Set(), completed: new Set(), expiresAt: new Map() }
    const seen = { expiredAfterCrash: 0, stillActiveAfterCrash: 0, operations: 0 }

    for (let round = 1; round <= ROUNDS; round++) {
      const seed = BASE_SEED + round
      const killAfterMs = KILL_AFTER_MS.min + (seed % (KILL_AFTER_MS.max - KILL_AFTER_MS.min + 1))
      const context = `round ${round}, seed ${seed}, killed after ${killAfterMs} ms`
      const result = await runDriverUntilKilled(path, seed, killAfterMs)
      expect(result.signal, `${context}: the driver died on its own:\n${result.stderr}`).toBe('SIGKILL')
      expect(result.acks[0]?.op, `${context}: the driver never got ready:\n${result.stderr}`).toBe('ready')
      seen.operations += result.acks.length - 1

      for (const ack of result.acks) {
        if (ack.op === 'submit') promised.submitted.add(ack.job_id)
        if (ack.op === 'complete') promised.completed.add(ack.job_id)
        if (ack.op === 'grant' || ack.op === 'heartbeat') {
          promised.expiresAt.set(ack.lease_id, Math.max(ack.expires_at, promised.expiresAt.get(ack.lease_id) ?? 0))
        }
      }

      const counts = checkAfterCrash(path, promised, context)
      seen.expiredAfterCrash += counts.expired
      seen.stillActiveAfterCrash += counts.stillActive
    }

    // The rounds did real work, and both sides of the expiry rule were exercised.
    expect(seen.operations).toBeGreaterThan(ROUNDS * 10)
    expect(promised.completed.size).toBeGreaterThan(0)
    expect(seen.expiredAfterCrash).toBeGreaterThan(0)
    expect(seen.stillActiveAfterCrash).toBeGreaterThan(0)
  }, 60_000)
})

/**
 * Opens the file as a restarted host would and checks it; returns how many pre-crash leases were
 * seen expire once due and stay ACTIVE while not yet due.
 */
function checkAfterCrash(path: string, promised: Promised, context: string): { expired: number; stillActive: number } {
  const { sqlite: db } = openDatabase({ path })
  try {
    expect(db.pragma('integrity_check', { simple: true }), context).toBe('ok')

    const jobIds = new Set((db.prepare('SELECT id FROM jobs').all() as { id: string }[]).map((r) => r.id))
    const lost = [...promised.submitted].filter((id) => !jobIds.has(id))
    expect(lost, `${context}: acknowledged submits missing`).toEqual([])

    const notDone = [...promised.completed].filter(
      (id) => (db.prepare('SELECT state FROM jobs WHERE id = ?').get(id) as Pick<JobRow, 'state'> | undefined)?.state !== 'DONE',
    )
    expect(notDone, `${context}: acknowledged completions not DONE`).toEqual([])

    const doneTwice = db
      .prepare("SELECT job_id, COUNT(*) AS n FROM events WHERE event_type = 'JOB_DONE' GROUP BY job_id HAVING n > 1")
      .all()
    expect(doneTwice, `${context}: jobs with more than one JOB_DONE event`).toEqual([])
    const succeededTwice = db
      .prepare("SELECT job_id, COUNT(*) AS n FROM leases WHERE release_status = 'SUCCEEDED' GROUP BY job_id HAVING n > 1")
      .all()
    expect(succeededTwice, `${context}: jobs with more than one SUCCEEDED attempt`).toEqual([])

    for (const [leaseId, expiresAt] of promised.expiresAt) {
      const lease = db.prepare('SELECT expires_at FROM leases WHERE id = ?').get(leaseId) as Pick<LeaseRow, 'expires_at'> | undefined
      expect(lease, `${context}: acknowledged lease ${leaseId} missing`).toBeDefined()
      // A heartbeat may have committed unacknowledged, never an earlier expiry than acknowledged.
      expect(lease!.expires_at, `${context}: lease ${leaseId} expires earlier than acknowledged`).toBeGreaterThanOrEqual(expiresAt)
    }

    return checkLeasesExpireOnTime(db, context)
  } finally {
    db.close()
  }
}

/**
 * Leases granted before the crash expire on time after it: at each instant checked (the real now,
 * a moment between the pre-crash expiries, then past all of them) the reaper expires exactly the
 * ACTIVE leases whose `expires_at` has come, and leaves the others ACTIVE.
 */
function checkLeasesExpireOnTime(db: import('better-sqlite3').Database, context: string): { expired: number; stillActive: number } {
  const before = db.prepare("SELECT * FROM leases WHERE state = 'ACTIVE' ORDER BY expires_at").all() as LeaseRow[]
  const clock = new ManualClock(Date.now())
  const engine = new Engine({ db, clock, config: DRIVER_CONFIG, capacity: DRIVER_CAPACITY })
  let expired = 0
  let stillActive = 0
  const middle = before[Math.floor(before.length / 2)]?.expires_at
  const last = before[before.length - 1]?.expires_at
  const instants = [clock.now(), ...(middle === undefined ? [] : [middle - 1, middle]), ...(last === undefined ? [] : [last + 1])]

  for (const instant of instants.filter((t) => t >= clock.now())) {
    clock.set(instant)
    engine.reap()
    for (const lease of before) {
      const row = db.prepare('SELECT * FROM leases WHERE id = ?').get(lease.id) as LeaseRow
      const due = lease.expires_at <= instant
      expect(row.state, `${context}: lease expiring at ${lease.expires_at}, checked at ${instant}`).toBe(due ? 'EXPIRED' : 'ACTIVE')
      if (!due) {
        stillActive++
        continue
      }
      expired++
      expect(row.release_status, `${context}: the outcome of the expired lease's attempt`).toBe('TIMEOUT')
      const job = db.prepare('SELECT state FROM jobs WHERE id = ?').get(lease.job_id) as Pick<JobRow, 'state'>
      expect(['QUEUED', 'TIMEOUT', 'CANCELED'], `${context}: job of an expired lease`).toContain(job.state)
    }
  }
  const active = db.prepare("SELECT COUNT(*) AS n FROM leases WHERE state = 'ACTIVE'").get() as { n: number }
  expect(active.n, `${context}: ACTIVE leases left past every expiry`).toBe(0)
  return { expired, stillActive }
}
