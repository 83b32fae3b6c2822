import { expect } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Database } from 'better-sqlite3'
import { openDatabase } from '../../src-main/db/open'
import { ManualClock } from '../../src-main/engine/rules/clock'
import type { Timers } from '../../src-main/schedules/timer'
// White-box in forceState only: it writes a state through the row layer, as no verb would.
import { engineContext } from '../../src-main/engine/internals'
import { getJob, updateJob } from '../../src-main/engine/store/rows'
import type { JobState } from '../../src-main/engine/rules/states'
import { type BulkAction, Engine, EngineError, type EngineConfig, type Event, type LeaseDecision, type WorkerFilter } from '../../src-main/engine'
import { statusOf } from '../../src-shared/error-codes'
import { T0 } from '../helpers/engine'
import { onDatabase } from '../helpers/database'

/** Runs `fn` and returns the EngineError it throws; fails the test if it throws nothing or something else. */
export function engineError(fn: () => unknown): EngineError {
  try {
    fn()
  } catch (error) {
    expect(error).toBeInstanceOf(EngineError)
    return error as EngineError
  }
  throw new Error('expected an EngineError, but the call succeeded')
}

/**
 * Asserts `fn` throws an EngineError with this code, and returns it. The engine knows no status:
 * `status` is checked against the HTTP layer's one table for the code, so each test also says
 * what its refusal answers over the wire.
 */
export function expectEngineError(fn: () => unknown, status: number, code: string): EngineError {
  const error = engineError(fn)
  expect({ status: statusOf(error.code), code: error.code }).toEqual({ status, code })
  return error
}

/** Leases the head job through the pull API and fails the test on a denial. */
export function leaseOrFail(engine: Engine, filter: WorkerFilter | string, ttl_s?: number): LeaseDecision & { granted: true } {
  const decision = engine.requestLease(typeof filter === 'string' ? { worker_id: filter } : filter, ttl_s)
  if (!decision.granted) throw new Error(`expected a grant, got a denial: ${decision.reason}`)
  return decision
}

/** Claims and leases the head job through the worker API and fails the test on a denial. */
export function claimOrFail(engine: Engine, filter: WorkerFilter | string, ttl_s?: number) {
  const decision = engine.claimAndLease(typeof filter === 'string' ? { worker_id: filter } : filter, ttl_s)
  if (!decision.granted) throw new Error(`expected a grant, got a denial: ${decision.reason}`)
  return decision
}

export const eventTypes = (events: Event[]): string[] => events.map((e) => e.event_type)

/** A temporary directory removed by the returned cleanup. */
export function tempDir(): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-unit-'))
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) }
}

/** A database file in `dir`, in WAL mode as the host's, with one table to write to and read from. */
export function scratchDatabase(dir: string) {
  const path = join(dir, 'leasehold.db')
  const { sqlite } = openDatabase({ path })
  sqlite.exec('CREATE TABLE scratch (id INTEGER PRIMARY KEY, text TEXT)')
  return { path, sqlite, insert: sqlite.prepare('INSERT INTO scratch (text) VALUES (?)') }
}

export interface FileEngine {
  engine: Engine
  sqlite: Database
  clock: ManualClock
}

/** An engine on a database file, as the host opens it; close `sqlite` to "stop the process". */
export function openFileEngine(
  path: string,
  options: { clock?: ManualClock; config?: Partial<EngineConfig>; total_units?: number; busy_rating?: number | null } = {},
): FileEngine {
  const { sqlite } = openDatabase({ path })
  const clock = options.clock ?? new ManualClock(T0)
  const engine = new Engine({
    db: sqlite,
    clock,
    config: options.config,
    capacity: { total_units: options.total_units ?? 100, busy_rating: options.busy_rating === undefined ? 0 : options.busy_rating },
  })
  onDatabase(engine, sqlite)
  return { engine, sqlite, clock }
}

/** The job's stream messages, oldest first, as its JOB_SUBMITTED, JOB_REQUEUED and JOB_RETRIED events record them. */
export const messageIds = (engine: Engine, jobId: string): number[] =>
  engine
    .jobEvents(jobId)
    .flatMap((e) => (e.event_type === 'JOB_SUBMITTED' || e.event_type === 'JOB_REQUEUED' || e.event_type === 'JOB_RETRIED' ? [e.data.message_id] : []))

/** Runs a bulk call step by step, as the HTTP route does; returns the totals and each step's count. */
export function runBulk(engine: Engine, action: BulkAction, request: Parameters<Engine['planBulk']>[1]) {
  const plan = engine.planBulk(action, request)
  const steps: number[] = []
  let matched = 0
  let changed = 0
  for (let cursor = plan.first; cursor; ) {
    const step = engine.bulkStep(plan, cursor)
    steps.push(step.matched)
    matched += step.matched
    changed += step.changed
    cursor = step.next
  }
  return { matched, changed, steps }
}

/**
 * Puts a job in `state` through the row layer, as no verb would (a BLOCKED job without its file
 * contention): the engine's memory of QUEUED and waiting jobs follows the row, as it follows
 * every write of a verb.
 */
export function forceState(engine: Engine, jobId: string, state: JobState): void {
  const ctx = engineContext(engine)
  ctx.transact(() => updateJob(ctx, getJob(ctx, jobId), { state }))
}

/** Timers the test runs out by hand: what is armed, and for how long. */
export class FakeTimers implements Timers {
  armed: { run: () => void; ms: number }[] = []
  setTimeout(run: () => void, ms: number) {
    const timer = { run, ms }
    this.armed.push(timer)
    return timer
  }
  clearTimeout(handle: unknown) {
    this.armed = this.armed.filter((t) => t !== handle)
  }
  /** The first armed timer runs out (once, as a real one does). */
  runOut() {
    const timer = this.armed.shift()
    if (!timer) throw new Error('no timer is armed')
    timer.run()
  }
}
