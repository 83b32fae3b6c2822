/**
 * SQLite evaluates a partial index's clause on every insert into its table and on every update
 * that writes a column the clause names; an `IN (…)` list of more than two values in such a
 * clause makes it build, fill and drop a temporary B-tree each time (the `OpenEphemeral`
 * opcode). A job's insert and each move of its `state` once did so through jobs_state_seq, at
 * about a fifth of the engine's CPU in a drain (schema.ts STATE_SEQ_CLAUSE). Read from the
 * programs of the statements a job's life prepares, as `EXPLAIN` lists them.
 */
import { describe, expect, it } from 'vitest'
import type { Database } from 'better-sqlite3'
import { openDatabase } from '../../src-main/db/open'
import { Engine } from '../../src-main/engine'
import { ManualClock } from '../../src-main/engine/rules/clock'
import { aJob, T0 } from '../helpers/engine'

/** An engine whose database remembers the SQL of every statement prepared on it. */
function recordingEngine(): { engine: Engine; sqlite: Database; prepared: Set<string> } {
  const { sqlite } = openDatabase({ path: ':memory:' })
  const prepared = new Set<string>()
  const prepare = sqlite.prepare.bind(sqlite)
  sqlite.prepare = ((sql: string) => {
    prepared.add(sql)
    return prepare(sql)
  }) as typeof sqlite.prepare
  const engine = new Engine({ db: sqlite, clock: new ManualClock(T0), capacity: { total_units: 100, busy_rating: 0 } })
  return { engine, sqlite, prepared }
}

/** Whether a statement's program builds a temporary B-tree (it is explained, not run). */
function buildsTemporaryBtree(sqlite: Database, sql: string): boolean {
  const params = Array.from({ length: (sql.match(/\?/g) ?? []).length }, () => null)
  return (sqlite.prepare(`EXPLAIN ${sql}`).all(...params) as { opcode: string }[]).some((row) => row.opcode === 'OpenEphemeral')
}

describe('the writes of a job’s life', () => {
  it('insert a job and move it from state to state without building a temporary B-tree', async () => {
    const { engine, sqlite, prepared } = recordingEngine()
    // Every move: submit, grant, heartbeat (RUNNING), release; a failure and its retry; a batch claim and completion.
    engine.submit(aJob({ max_attempts: 2 }))
    const first = engine.requestLease({ worker_id: 'w' })
    if (!first.granted) throw new Error(first.reason)
    engine.heartbeat({ lease_id: first.lease.id, worker_id: 'w', progress: 0.5 })
    engine.release({ lease_id: first.lease.id, worker_id: 'w', status: 'FAILED', error: 'boom' })
    await engine.run(() => engine.submitMany([aJob(), aJob()]))
    const exchanged = await engine.run(() => engine.exchange({ worker_id: 'x', claim: { filter: {}, max_jobs: 4 } }))
    const complete = exchanged.claimed.granted.map((g) => ({ job_id: g.job_id, attempt_id: g.attempt_id, lease_token: g.lease_token }))
    await engine.run(() => engine.exchange({ worker_id: 'x', complete }))

    const writes = [...prepared].filter((sql) => /^\s*(INSERT INTO|UPDATE) jobs\b/.test(sql))
    expect(writes.some((sql) => sql.includes('state ='))).toBe(true)
    expect(writes.filter((sql) => buildsTemporaryBtree(sqlite, sql))).toEqual([])
    sqlite.close()
  })
})
