import { describe, expect, it } from 'vitest'
import { join } from 'node:path'
import { HOUR, ManualClock, MINUTE, SECOND } from '../../src-main/engine/clock'
import { T0 } from '../helpers/engine'
import { openFileEngine, tempDir } from './support'
import { engineContext } from '../../src-main/engine/internals'

const COUNTED = ['JOB_DONE', 'JOB_FAILED', 'JOB_CANCELED', 'JOB_TIMEOUT', 'LEASE_EXPIRED'] as const

/** The snapshot's day counts, by event type. */
function snapshotCounts(engine: ReturnType<typeof openFileEngine>['engine']): Record<(typeof COUNTED)[number], number> {
  const { jobs, leases } = engine.snapshot()
  return {
    JOB_DONE: jobs.done_last_24h,
    JOB_FAILED: jobs.failed_last_24h,
    JOB_CANCELED: jobs.canceled_last_24h,
    JOB_TIMEOUT: jobs.timeout_last_24h,
    LEASE_EXPIRED: leases.expired_last_24h,
  }
}

/** The same counts, counted in the event log itself. */
function logCounts(engine: ReturnType<typeof openFileEngine>['engine'], now: number): Record<string, number> {
  return Object.fromEntries(
    COUNTED.map((type) => [type, engineContext(engine).one<{ n: number }>('SELECT COUNT(*) AS n FROM events WHERE event_type = ? AND ts >= ?', type, now - 24 * HOUR)!.n]),
  )
}

describe('the day counts read back at start', () => {
  it('equal a count of the event log, with events many to a minute, on minute edges, hours apart and in the future, and as the window walks on', () => {
    const dir = tempDir()
    try {
      const path = join(dir.dir, 'leasehold.db')
      const first = openFileEngine(path)
      const insert = first.sqlite.prepare("INSERT INTO events (ts, entity_type, entity_id, job_id, event_type, data) VALUES (?, 'JOB', 'j', NULL, ?, '{}')")
      const times: number[] = []
      for (let i = 0; i < 40; i++) times.push(T0 + 3 * HOUR + i * 1_500) // 40 in one minute and the next
      for (let m = 0; m < 30; m++) times.push(T0 + 5 * HOUR + m * MINUTE, T0 + 5 * HOUR + m * MINUTE - 1) // on and just before minute edges
      for (let h = 6; h < 30; h += 7) times.push(T0 + h * HOUR + 17 * SECOND) // hours apart
      times.push(T0 + 40 * HOUR) // later than the clock at the restart
      times.forEach((ts, i) => insert.run(ts, COUNTED[i % COUNTED.length]))
      insert.run(T0 + 3 * HOUR, 'JOB_SUBMITTED') // not a counted type
      first.sqlite.close()

      // Restarts at moments whose window cuts through those events, each followed as it walks on.
      for (const restartAt of [T0 + 20 * HOUR, T0 + 27 * HOUR + 30 * SECOND + 7, T0 + 29 * HOUR + 12 * MINUTE]) {
        const clock = new ManualClock(restartAt)
        const { engine, sqlite } = openFileEngine(path, { clock })
        for (let step = 0; step < 50; step++) {
          expect(snapshotCounts(engine)).toEqual(logCounts(engine, clock.now()))
          clock.advance(37 * SECOND + 11)
        }
        sqlite.close()
      }
    } finally {
      dir.cleanup()
    }
  })
})
