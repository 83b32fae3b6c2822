/**
 * Crash test over HTTP: the real `leasehold serve` process under load from several clients
 * (submits through the queue API, one by one and 200 to a request; claim/complete through the
 * worker API, one by one and in batches; and a worker that claims and then goes silent), killed with
 * SIGKILL at random moments — so often in the middle of large commit groups — and restarted on
 * the same data dir. Afterwards: every submit that got its 201 exists, every acknowledged completion is DONE,
 * no job is completed twice, and leases granted before a crash expire on time after it.
 */
import Database from 'better-sqlite3'
import { readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, describe, expect, test } from 'vitest'
import { tempDir } from '../helpers/host'
import { until } from '../helpers/until'
import { type ServeProcess, startServe } from '../helpers/process'

const KILLS = 4
const LEASE_TTL_S = 2
/** The reaper promises "within about one second"; 1.5 s leaves room for a loaded machine. */
const EXPIRY_SLACK_MS = 1_500
const SEED = Number(process.env.CRASH_SEED ?? Math.floor(Math.random() * 2 ** 31))

/** A small seeded PRNG, so a failing run can be replayed with CRASH_SEED. */
function random(seed: number): () => number {
  let s = seed >>> 0
  return () => {
    s = (s + 0x6d2b79f5) >>> 0
    let t = s
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const dataDir = tempDir('leasehold-crash-')
let current: ServeProcess | undefined

afterAll(async () => {
  if (current && current.child.exitCode === null && current.child.signalCode === null) {
    current.child.kill('SIGKILL')
    await current.exited
  }
  rmSync(dataDir, { recursive: true, force: true })
})

const ARGS = [
  '--data-dir',
  dataDir,
  '--port',
  '0',
  '--busy',
  '0',
  '--total-units',
  '6',
  '--lease-ttl-s',
  String(LEASE_TTL_S),
  '--heartbeat-grace-s',
  '0',
  '--max-attempts',
  '1000',
  '--stats-interval-s',
  '1',
]

interface Ledger {
  /** job ids whose submit answered 201 */
  submitted: Set<string>
  /** job ids whose the worker API completion answered {ok:true} */
  completed: Set<string>
  claims: number
}

function openReadOnly() {
  return new Database(join(dataDir, 'leasehold.db'), { readonly: true, fileMustExist: true })
}

/** Leases the dead process left ACTIVE, read from its database file. */
function activeLeases(): { id: string; expires_at: number }[] {
  const db = openReadOnly()
  try {
    return db.prepare("SELECT id, expires_at FROM leases WHERE state = 'ACTIVE'").all() as { id: string; expires_at: number }[]
  } finally {
    db.close()
  }
}

async function start(): Promise<{ proc: ServeProcess; call: (path: string, json?: unknown) => Promise<Response>; readyAt: number }> {
  const proc = await startServe(ARGS)
  current = proc
  const readyAt = Date.now()
  const token = readFileSync(join(dataDir, 'token'), 'utf8').trim()
  const call = (path: string, json?: unknown) =>
    fetch(`${proc.url}${path}`, {
      method: json === undefined ? 'GET' : 'POST',
      headers: { authorization: `Bearer ${token}`, ...(json === undefined ? {} : { 'content-type': 'application/json' }) },
      body: json === undefined ? undefined : JSON.stringify(json),
    })
  return { proc, call, readyAt }
}

/**
 * Each lease left ACTIVE by the crash becomes EXPIRED no later than EXPIRY_SLACK_MS after its
 * expires_at (or after the restart, if it ran out while the host was down).
 */
async function checkExpiries(call: (path: string) => Promise<Response>, leases: { id: string; expires_at: number }[], readyAt: number) {
  const late: string[] = []
  await Promise.all(
    leases.map(async (lease) => {
      const deadline = Math.max(lease.expires_at, readyAt) + EXPIRY_SLACK_MS
      for (;;) {
        const view = (await (await call(`/api/scheduler/lease/${lease.id}`)).json()) as { lease: { state: string } }
        if (view.lease.state === 'EXPIRED') return
        expect(view.lease.state).toBe('ACTIVE') // nobody can have released it: its holder is gone
        if (Date.now() > deadline) {
          late.push(`${lease.id}: still ACTIVE ${Date.now() - lease.expires_at} ms after expires_at`)
          return
        }
        await new Promise((r) => setTimeout(r, 50))
      }
    }),
  )
  expect(late).toEqual([])
}

/** Runs clients against the host until `stop()`; errors from the kill are expected and ignored. */
function load(call: (path: string, json?: unknown) => Promise<Response>, ledger: Ledger, round: number, rand: () => number) {
  let stopped = false
  let n = 0
  const submitter = async (name: string) => {
    while (!stopped) {
      const key = `r${round}-${name}-${n++}`
      try {
        const res = await call('/api/scheduler/jobs/submit', { job_type: 'crash', cost_units: 1 + Math.floor(rand() * 2), client_request_id: key, payload: { key } })
        if (res.status === 201) ledger.submitted.add(((await res.json()) as { job: { job_id: string } }).job.job_id)
        else await res.arrayBuffer()
      } catch {
        /* killed mid-request: outcome unknown */
      }
    }
  }
  const worker = async (name: string, silent: boolean) => {
    while (!stopped) {
      try {
        const res = await call('/internal/worker/claim', { worker_id: name, streams: ['default'], max_wait_ms: 200 })
        const c = (await res.json()) as { claimed: boolean; job_id: string; attempt_id: string; lease_token: string }
        if (!c.claimed) continue
        ledger.claims++
        if (silent) {
          // Goes quiet holding the lease: the lease must expire on time, even across a crash.
          await new Promise((r) => setTimeout(r, 300))
          continue
        }
        const done = await call('/internal/worker/complete', { worker_id: name, job_id: c.job_id, attempt_id: c.attempt_id, lease_token: c.lease_token, result: { by: name } })
        const answer = (await done.json()) as { ok: boolean }
        if (done.status === 200 && answer.ok) ledger.completed.add(c.job_id)
      } catch {
        /* killed mid-request */
      }
    }
  }
  // Large groups: 200 submits in one request, and a worker that finishes and claims 8 at a time.
  const batchSubmitter = async (name: string) => {
    while (!stopped) {
      const keys = Array.from({ length: 200 }, () => `r${round}-${name}-${n++}`)
      try {
        const res = await call('/api/scheduler/jobs/submit-batch', { jobs: keys.map((key) => ({ job_type: 'crash', cost_units: 1, client_request_id: key })) })
        const answer = (await res.json()) as { results?: { ok: boolean; job?: { job_id: string } }[] }
        if (res.status === 200) for (const r of answer.results ?? []) if (r.ok) ledger.submitted.add(r.job!.job_id)
      } catch {
        /* killed mid-request: outcome unknown */
      }
    }
  }
  const batchWorker = async (name: string) => {
    let running: { job_id: string; attempt_id: string; lease_token: string }[] = []
    while (!stopped) {
      try {
        const res = await call('/internal/worker/batch', {
          worker_id: name,
          complete: running.map((c) => ({ job_id: c.job_id, attempt_id: c.attempt_id, lease_token: c.lease_token, result: { by: name } })),
          claim: { streams: ['default'], max_jobs: 8, max_wait_ms: 200 },
        })
        const answer = (await res.json()) as { completed: { job_id: string; ok: boolean }[]; jobs: { job_id: string; attempt_id: string; lease_token: string }[] }
        running = []
        if (res.status !== 200) continue
        for (const c of answer.completed) if (c.ok) ledger.completed.add(c.job_id)
        ledger.claims += answer.jobs.length
        running = answer.jobs
      } catch {
        /* killed mid-request: these leases expire, and their jobs are requeued */
        running = []
      }
    }
  }
  const clients = [
    batchSubmitter('b1'),
    batchWorker('bw1'),
    submitter('s1'),
    submitter('s2'),
    submitter('s3'),
    worker('w1', false),
    worker('w2', false),
    worker('w3', false),
    worker('silent', true),
  ]
  return {
    stop: async () => {
      stopped = true
      await Promise.all(clients)
    },
  }
}

describe('leasehold serve killed with SIGKILL under load', () => {
  test(
    `keeps every acknowledged submit and completion, completes no job twice, and expires old leases on time (seed ${SEED})`,
    async () => {
      const rand = random(SEED)
      const ledger: Ledger = { submitted: new Set(), completed: new Set(), claims: 0 }
      let expiredChecked = 0

      for (let round = 0; round <= KILLS; round++) {
        const leftActive = round === 0 ? [] : activeLeases()
        const { proc, call, readyAt } = await start()
        await checkExpiries(call, leftActive, readyAt)
        expiredChecked += leftActive.length

        if (round === KILLS) {
          // The last start: let the host stop cleanly, then read the file.
          proc.child.kill('SIGTERM')
          expect(await proc.exited).toBe(0)
          break
        }
        const clients = load(call, ledger, round, rand)
        // The kill lands after a random amount of acknowledged work, not after a wall-clock time:
        // a loaded machine crashes the host as far into its work as a quiet one.
        const killAfter = ledger.completed.size + 100 + Math.floor(rand() * 400)
        await until(() => ledger.completed.size >= killAfter, 60_000, 'the completions before the kill')
        proc.child.kill('SIGKILL')
        await proc.exited
        await clients.stop()
      }

      console.log(`crash seed ${SEED}: ${ledger.submitted.size} submits acknowledged, ${ledger.claims} claims, ${ledger.completed.size} completions acknowledged, ${expiredChecked} leases crossed a crash`)
      expect(ledger.submitted.size).toBeGreaterThan(20)
      expect(ledger.completed.size).toBeGreaterThan(5)
      expect(expiredChecked).toBeGreaterThan(0) // some lease did cross a crash

      const db = openReadOnly()
      try {
        const jobs = new Map((db.prepare('SELECT id, state FROM jobs').all() as { id: string; state: string }[]).map((j) => [j.id, j.state]))
        const missing = [...ledger.submitted].filter((id) => !jobs.has(id))
        expect(missing, 'submits answered 201 but lost').toEqual([])

        const done = db.prepare("SELECT job_id, COUNT(*) AS n FROM events WHERE event_type = 'JOB_DONE' GROUP BY job_id").all() as { job_id: string; n: number }[]
        expect(done.filter((d) => d.n > 1), 'jobs completed twice').toEqual([])
        const doneIds = new Set(done.map((d) => d.job_id))
        const lostCompletions = [...ledger.completed].filter((id) => !doneIds.has(id) || jobs.get(id) !== 'DONE')
        expect(lostCompletions, 'completions acknowledged but lost').toEqual([])
        for (const id of doneIds) expect(jobs.get(id)).toBe('DONE')

        const attemptsDone = db.prepare("SELECT job_id, COUNT(*) AS n FROM leases WHERE release_status = 'SUCCEEDED' GROUP BY job_id HAVING n > 1").all()
        expect(attemptsDone, 'jobs with two successful attempts').toEqual([])
        const active = db.prepare("SELECT COUNT(*) AS n FROM leases WHERE state = 'ACTIVE' AND expires_at < ?").get(Date.now() - EXPIRY_SLACK_MS) as { n: number }
        expect(active.n, 'leases left ACTIVE past their expiry').toBe(0)
        expect(db.pragma('integrity_check', { simple: true })).toBe('ok')
      } finally {
        db.close()
      }
    },
    90_000,
  )
})
