/**
 * Reads that may walk the whole jobs table (a search) run on a thread of their own, so that the
 * host's main thread goes on serving while one runs; whatever the thread cannot read is read on
 * the main connection, and the thread never keeps the file open past its idle time or the host.
 */
import BetterSqlite3 from 'better-sqlite3'
import { existsSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, expect, it } from 'vitest'
import { connectionName } from '../../src-main/db/connection'
import { ReadThread, readThreadRetryMs, type ThreadRead } from '../../src-main/db/read-thread'
import { SECOND } from '../../src-main/engine/rules/clock'
import { mayWalkTheTable } from '../../src-main/engine/reads/list'
import { startTestHost } from '../helpers/host'
import { until } from '../worker/support'
import { scratchDatabase, tempDir } from './support'

/** A reference instant for the thread's clock. */
const T0 = Date.UTC(2026, 0, 1)

let dir: string
let cleanup: () => void
beforeEach(() => ({ dir, cleanup } = tempDir()))
afterEach(() => cleanup())

/** A database in the test's folder, in WAL mode as the host's, with rows to read, and the reads made on its main connection. */
function rowsToRead() {
  const { path, sqlite, insert } = scratchDatabase(dir)
  sqlite.transaction(() => ['a', 'b', 'c'].forEach((text) => insert.run(text)))()
  const onMain: ThreadRead[] = []
  const fallback = (read: ThreadRead) => {
    onMain.push(read)
    return sqlite.prepare(read.sql).all(...read.params)
  }
  return { path, sqlite, onMain, fallback }
}

/** A read that takes the thread a while: it counts through a few million numbers. */
const SLOW: ThreadRead = { sql: 'WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) SELECT COUNT(*) AS n FROM n', params: [3_000_000] }

it('a read runs on the thread: the main thread turns while it reads, and its rows come back as the main connection would give them', async () => {
  const { path, sqlite, onMain, fallback } = rowsToRead()
  const downs: Error[] = []
  const thread = new ReadThread({ path, fallback, onDown: (error) => downs.push(error) })
  try {
    let turned = false
    const slow = thread.all<{ n: number }>(SLOW).then((rows) => ({ rows, turnedBefore: turned }))
    setImmediate(() => (turned = true))
    expect(await slow).toEqual({ rows: [{ n: 3_000_000 }], turnedBefore: true })
    expect(await thread.all({ sql: 'SELECT text FROM scratch WHERE id > ? ORDER BY id', params: [1] })).toEqual([{ text: 'b' }, { text: 'c' }])
    expect(onMain).toEqual([])
  } finally {
    await thread.stop()
    sqlite.close()
  }
  expect(downs).toEqual([])
})

it('a read the thread cannot make (the file held alone by the main connection, as on a full disk) is made on the main connection', async () => {
  const { path, sqlite: writer } = rowsToRead()
  writer.close()
  // Opened as db/open.ts openOnFullDisk opens it: exclusive before the first read.
  const sqlite = new BetterSqlite3(connectionName(path))
  sqlite.pragma('locking_mode = EXCLUSIVE')
  expect(sqlite.prepare('SELECT COUNT(*) AS n FROM scratch').get()).toEqual({ n: 3 })
  const onMain: ThreadRead[] = []
  const fallback = (read: ThreadRead) => {
    onMain.push(read)
    return sqlite.prepare(read.sql).all(...read.params)
  }
  const thread = new ReadThread({ path, fallback, onDown: () => {} })
  try {
    const read = { sql: 'SELECT COUNT(*) AS n FROM scratch', params: [] }
    expect(await thread.all(read)).toEqual([{ n: 3 }])
    expect(onMain).toEqual([read])
  } finally {
    await thread.stop()
    sqlite.close()
  }
})

it('a thread that cannot open the database leaves the reads to the main connection, says so once, and is tried again after its backoff', async () => {
  const { sqlite, onMain, fallback } = rowsToRead()
  const downs: [Error, number][] = []
  let ups = 0
  let now = T0
  const later = join(dir, 'later')
  const thread = new ReadThread({ path: join(later, 'leasehold.db'), fallback, onDown: (error, retryMs) => downs.push([error, retryMs]), onUp: () => ups++, now: () => now })
  try {
    const read = { sql: 'SELECT COUNT(*) AS n FROM scratch', params: [] }
    expect(await thread.all(read)).toEqual([{ n: 3 }])
    expect(await thread.all(read)).toEqual([{ n: 3 }]) // before its backoff: not tried
    expect(onMain).toEqual([read, read])
    expect(downs.map(([, retryMs]) => retryMs)).toEqual([SECOND])

    now += SECOND
    expect(await thread.all(read)).toEqual([{ n: 3 }]) // tried again, and failed again: not said again
    expect(onMain).toHaveLength(3)
    expect(downs).toHaveLength(1)

    // The cause passes (descriptors freed, say): after the next backoff, the read is the thread's.
    mkdirSync(later)
    scratchDatabase(later).sqlite.close()
    now += 2 * SECOND
    expect(await thread.all(read)).toEqual([{ n: 0 }])
    expect(onMain).toHaveLength(3)
    expect(ups).toBe(1)
  } finally {
    await thread.stop()
    sqlite.close()
  }
})

it('the read thread is tried again after 1 s, 2 s, 4 s … up to a minute for failures in a row', () => {
  expect([1, 2, 3, 4, 5, 6, 7, 8].map(readThreadRetryMs)).toEqual([1, 2, 4, 8, 16, 32, 60, 60].map((s) => s * SECOND))
})

it('an idle thread ends and closes its connection, and the next read starts another; once stopped, the main connection is the last and removes the log', async () => {
  const { path, sqlite, onMain, fallback } = rowsToRead()
  const thread = new ReadThread({ path, fallback, onDown: () => {}, idleMs: 50 })
  const threads = () => (thread as unknown as { worker: unknown }).worker
  const read = { sql: 'SELECT COUNT(*) AS n FROM scratch', params: [] }
  expect(await thread.all(read)).toEqual([{ n: 3 }])
  await until(() => threads() === null, 5_000, 'the idle thread to end')
  expect(await thread.all(read)).toEqual([{ n: 3 }])
  expect(threads()).not.toBeNull()
  await thread.stop()
  expect(onMain).toEqual([])
  sqlite.close()
  expect(existsSync(`${path}-wal`)).toBe(false)
})

it('the host searches its jobs on the read thread, and stops it before it closes the database', async () => {
  const host = await startTestHost({ workers: 0 })
  const ids = [host.engine.submit({ job_type: 'needle', cost_units: 1 }), host.engine.submit({ job_type: 'hay', cost_units: 1 })].map((r) => r.job.id)
  host.engine.flush()
  const answer = await host.call('/api/scheduler/jobs?search=NEEDLE')
  expect(((await answer.json()) as { jobs: { job_id: string }[] }).jobs.map((job) => job.job_id)).toEqual([ids[0]])
  const file = host.engine.databaseFile
  await host.dispose()
  expect(existsSync(`${file}-wal`)).toBe(false)
})

it('only the pages that may walk the table go to the thread: a search, a type, a time range; a state, an add-on or no filter is read by an index', () => {
  for (const query of [{ search: 'ab' }, { job_type: 'x' }, { created_after: 1 }, { created_before: 1 }, { state: 'DONE' as const, search: 'ab' }]) expect(mayWalkTheTable(query)).toBe(true)
  for (const query of [{}, { state: 'FAILED' as const }, { addon_id: 'a' }, { dead_letter: true }, { cursor: 'x' }]) expect(mayWalkTheTable(query)).toBe(false)
})
