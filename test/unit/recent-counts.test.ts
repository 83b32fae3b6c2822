import { describe, expect, it } from 'vitest'
import { join } from 'node:path'
import { HOUR, ManualClock, MINUTE, SECOND } from '../../src-main/engine/rules/clock'
import { aJob, T0 } from '../helpers/engine'
import { leaseOrFail, openFileEngine, tempDir } from './support'
import { sql } from '../helpers/database'

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

/** The same counts, counted in the event log itself: from the start of the minute that holds now − 24 h (the window is whole minutes). */
function logCounts(engine: ReturnType<typeof openFileEngine>['engine'], now: number): Record<string, number> {
  const since = Math.floor((now - 24 * HOUR) / MINUTE) * MINUTE
  return Object.fromEntries(
    COUNTED.map((type) => [type, sql(engine).one<{ n: number }>('SELECT COUNT(*) AS n FROM events WHERE event_type = ? AND ts >= ?', type, since)!.n]),
  )
}

describe('the day counts read back at start', () => {
  it('equal a count of the event log in whole minutes, with events many to a minute, on minute edges, hours apart and in the future, and as the window walks on', () => {
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

describe('the counts the time series read', () => {
  it('equal a count of the event log, per bucket, whether stats_counts holds them or the log after its mark, across stores, a crash and a purge', () => {
    const dir = tempDir()
    try {
      const path = join(dir.dir, 'leasehold.db')
      let { engine, sqlite, clock } = openFileEngine(path, { config: { countsStoreAfterEvents: 25 } })
      const finished: string[] = []
      const run = (jobs: number) => {
        for (let i = 0; i < jobs; i++) {
          engine.submit(aJob({ max_attempts: 1 }))
          const { lease, job } = leaseOrFail(engine, 'w')
          if (i % 4 === 3) {
            clock.advance(40 * SECOND)
            engine.reap() // expired: LEASE_EXPIRED and JOB_TIMEOUT
          } else {
            engine.release({ lease_id: lease.id, status: i % 4 === 2 ? 'FAILED' : 'SUCCEEDED' })
          }
          finished.push(job.id)
          clock.advance(7 * SECOND + 13)
        }
      }
      const logged = (types: string[]) => {
        const rows = sql(engine).all<{ b: number; n: number }>(
          `SELECT ts - ts % ${MINUTE} AS b, COUNT(*) AS n FROM events WHERE event_type IN (${types.map((t) => `'${t}'`).join(', ')}) GROUP BY b`,
        )
        return new Map(rows.map((row) => [row.b, row.n]))
      }
      const expectSeriesAreTheLog = (counted: Record<string, Map<number, number>>) => {
        for (const [metric, byMinute] of Object.entries(counted)) {
          const series = engine.timeseries(metric as 'jobs_completed', '1m', '1h').filter((point) => point.value > 0)
          expect(series, metric).toEqual([...byMinute].sort((a, b) => a[0] - b[0]).map(([ts, value]) => ({ ts, value })))
        }
      }
      const fromLog = () => ({ jobs_completed: logged(['JOB_DONE']), jobs_failed: logged(['JOB_FAILED', 'JOB_TIMEOUT']), leases_expired: logged(['LEASE_EXPIRED']) })
      const mark = () => Number(sqlite.prepare("SELECT value FROM settings WHERE key = 'events_counted_through'").pluck().get())
      run(8)
      expectSeriesAreTheLog(fromLog())
      const before = mark()
      run(8) // past 25 events after the mark: a commit stores them
      expect(mark()).toBeGreaterThan(before)
      expectSeriesAreTheLog(fromLog())
      engine.sampleStats() // the stats timer stores them too
      expect(mark()).toBe(sqlite.prepare('SELECT MAX(id) FROM events').pluck().get())
      run(3)
      const counted = fromLog()
      expectSeriesAreTheLog(counted)
      // A crash before the next store: the start counts the events after the mark from the log.
      sqlite.close()
      ;({ engine, sqlite } = openFileEngine(path, { clock, config: { countsStoreAfterEvents: 25 } }))
      expectSeriesAreTheLog(counted)
      // Deleting the jobs (and their events) keeps what they counted.
      engine.submit(aJob()) // the newest event is another job's
      expect(engine.deleteFinishedJobs(finished)).toHaveLength(finished.length)
      expect(fromLog().jobs_completed.size).toBe(0)
      expectSeriesAreTheLog(counted)
      sqlite.close()
    } finally {
      dir.cleanup()
    }
  })
})
