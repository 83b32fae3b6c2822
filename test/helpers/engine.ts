import { openDatabase } from '../../src-main/db/open'
import { ManualClock } from '../../src-main/engine/rules/clock'
import type { SubmitJob } from '../../src-main/engine/verbs/jobs'
import { Engine, type EngineConfig } from '../../src-main/engine'
import { onDatabase } from './database'

/** The reference instant every engine test starts from. */
export const T0 = Date.UTC(2026, 0, 1)

export interface Setup {
  engine: Engine
  clock: ManualClock
}

/** A fresh, migrated in-memory database and an engine on a clock stopped at T0. */
export function setup(
  options: { config?: Partial<EngineConfig>; total_units?: number; busy_rating?: number | null; path?: string } = {},
): Setup {
  const { sqlite } = openDatabase({ path: options.path ?? ':memory:' })
  const clock = new ManualClock(T0)
  const engine = new Engine({
    db: sqlite,
    clock,
    config: options.config,
    capacity: { total_units: options.total_units ?? 100, busy_rating: options.busy_rating === undefined ? 0 : options.busy_rating },
  })
  onDatabase(engine, sqlite)
  return { engine, clock }
}

/** A small seeded random generator (0 ≤ n < 1), so that a randomized test replays when it fails. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (state * 1664525 + 1013904223) >>> 0
    return state / 2 ** 32
  }
}

/** A submit with test defaults plus overrides. */
export function aJob(overrides: Partial<SubmitJob> = {}): SubmitJob {
  return { job_type: 'test', cost_units: 1, ...overrides }
}
