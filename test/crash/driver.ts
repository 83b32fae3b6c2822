/**
 * The crash test's child process: drives an engine on a database file as fast as it can (submits,
 * leases through the pull and worker APIs, heartbeats, completions, failures, reaping) on the real
 * clock, until the parent kills it with SIGKILL.
 *
 * Every operation is acknowledged on stdout as one JSON line, written only after the operation's
 * transaction has committed: whatever the parent reads is a promise the database must keep after
 * the crash.
 *
 *   node --import tsx test/crash/driver.ts <dbpath> <seed>
 */
import { openDatabase } from '../../src-main/db/open'
import { systemClock } from '../../src-main/engine/rules/clock'
import { Engine, EngineError, type Lease } from '../../src-main/engine'
import { statusOf } from '../../src-shared/error-codes'
import { DRIVER_CONFIG, DRIVER_CAPACITY, type Ack } from './protocol'

const [path, seedArg] = process.argv.slice(2)
if (!path || !seedArg) {
  process.stderr.write('usage: driver.ts <dbpath> <seed>\n')
  process.exit(2)
}

/** mulberry32: a small seeded PRNG, so a failing round can be replayed from its seed. */
function prng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const seed = Number(seedArg)
const random = prng(seed)
const int = (min: number, max: number) => min + Math.floor(random() * (max - min + 1))

function ack(message: Ack): void {
  process.stdout.write(`${JSON.stringify(message)}\n`)
}

const { sqlite } = openDatabase({ path })
const engine = new Engine({ db: sqlite, clock: systemClock, config: DRIVER_CONFIG, capacity: DRIVER_CAPACITY })
// As the host does right after opening: leases left by the previous process expire on time.
engine.reap()
ack({ op: 'ready', pid: process.pid })

/** The leases this process holds. */
const held: Lease[] = []
let submitted = 0

function takeHeld(): Lease | undefined {
  if (held.length === 0) return undefined
  return held.splice(int(0, held.length - 1), 1)[0]
}

/** Runs a call under a lease; a lease that expired meanwhile is simply dropped. */
function underLease<T>(fn: () => T): T | undefined {
  try {
    return fn()
  } catch (error) {
    if (error instanceof EngineError && statusOf(error.code) === 409) return undefined
    throw error
  }
}

function step(): void {
  const roll = random()
  if (roll < 0.3) {
    const { job } = engine.submit({
      job_type: 'crash',
      cost_units: int(1, 4),
      priority: (['LOW', 'NORMAL', 'HIGH', 'URGENT'] as const)[int(0, 3)],
      idempotency_key: `${seed}-${submitted++}`,
      payload: { seed },
    })
    ack({ op: 'submit', job_id: job.id })
  } else if (roll < 0.55) {
    const filter = { worker_id: `w-${seed}-${int(1, 3)}` }
    const decision = random() < 0.5 ? engine.requestLease(filter) : engine.claimAndLease(filter)
    if (decision.granted) {
      held.push(decision.lease)
      ack({ op: 'grant', lease_id: decision.lease.id, job_id: decision.job.id, expires_at: decision.lease.expires_at })
    }
  } else if (roll < 0.7) {
    const lease = held[int(0, Math.max(0, held.length - 1))]
    if (!lease) return
    const answer = underLease(() => engine.heartbeat({ lease_id: lease.id, worker_id: lease.worker_id }))
    if (answer) ack({ op: 'heartbeat', lease_id: lease.id, expires_at: answer.lease.expires_at })
    else held.splice(held.indexOf(lease), 1)
  } else if (roll < 0.9) {
    const lease = takeHeld()
    if (!lease) return
    const report = { job_id: lease.job_id, attempt_id: lease.attempt_id, worker_id: lease.worker_id, lease_token: lease.token }
    const complete = () =>
      random() < 0.5 ? engine.release({ lease_id: lease.id, worker_id: lease.worker_id, status: 'SUCCEEDED' }) : engine.complete(report)
    if (underLease(complete) === undefined) return
    ack({ op: 'complete', job_id: lease.job_id, lease_id: lease.id })
    // A worker that did not hear the answer repeats the call: it must answer as before.
    if (random() < 0.3) complete()
  } else if (roll < 0.97) {
    const lease = takeHeld()
    if (!lease) return
    const report = { job_id: lease.job_id, attempt_id: lease.attempt_id, worker_id: lease.worker_id, lease_token: lease.token }
    if (underLease(() => engine.fail({ ...report, error: { message: 'crash test', retryable: random() < 0.7 } }))) {
      ack({ op: 'fail', job_id: lease.job_id, lease_id: lease.id })
    }
  } else {
    engine.reap()
  }
}

// One operation per turn of the event loop, so acknowledgements reach the pipe as they happen.
for (;;) {
  step()
  await new Promise((resolve) => setImmediate(resolve))
}
