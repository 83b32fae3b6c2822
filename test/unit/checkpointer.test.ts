/**
 * The write-ahead log goes back into the database file from a thread of its own, so no commit
 * of the host's main thread waits for a checkpoint.
 */
import { existsSync, statSync } from 'node:fs'
import { join } from 'node:path'
import BetterSqlite3 from 'better-sqlite3'
import { afterEach, beforeEach, expect, it, vi } from 'vitest'
import { connectionPath } from '../../src-main/db/connection'
import { Checkpointer, type CheckpointPass, WAKE_AFTER_COMMITS } from '../../src-main/db/checkpointer'
import { WAL_AUTOCHECKPOINT_PAGES } from '../../src-main/db/open'
import { startTestHost, type TestHost } from '../helpers/host'
import { until } from '../worker/support'
import { scratchDatabase, tempDir } from './support'

let dir: string
let cleanup: () => void
beforeEach(() => ({ dir, cleanup } = tempDir()))
afterEach(() => cleanup())

it('the checkpointer copies what the writer committed into the database file from a connection of its own; the writer goes on, nothing lost', async () => {
  const { path, sqlite, insert } = scratchDatabase(dir)
  for (let i = 0; i < 200; i++) insert.run('x'.repeat(500)) // ~200 commits, far below the writer's own checkpoint
  const before = statSync(path).size
  const passes: CheckpointPass[] = []
  const errors: Error[] = []
  const checkpointer = new Checkpointer({ path, durability: 'normal', intervalMs: 20, onPass: (p) => passes.push(p), onError: (e) => errors.push(e) })
  try {
    await until(() => passes.some((p) => p.checkpointed === p.log), 10_000, 'a pass that copied the whole log')
    expect(passes.every((p) => p.log < WAL_AUTOCHECKPOINT_PAGES)).toBe(true)
    expect(statSync(path).size).toBeGreaterThan(before)
    // The writer goes on committing beside the thread, and every row is there.
    for (let i = 0; i < 50; i++) insert.run('y')
    expect(sqlite.prepare('SELECT COUNT(*) FROM scratch').pluck().get()).toBe(250)
  } finally {
    await checkpointer.stop()
    sqlite.close()
  }
  expect(errors).toEqual([])
})

it('under writes that never pause, the writer’s own checkpoint still bounds the log beside the thread', async () => {
  // The log restarts from its beginning only after a checkpoint that copied all of it, which a
  // passive pass racing the writer rarely is: the main connection's checkpoint is the bound.
  // The log's file then stops growing at that checkpoint's threshold plus what the writer
  // commits while one of the thread's passes holds the checkpoint (1.0–1.7 × the threshold on
  // a 2-core VM); with no checkpoint of the writer's it grows with every commit, to 6 × here.
  const { path, sqlite, insert } = scratchDatabase(dir)
  const checkpointer = new Checkpointer({ path, durability: 'normal', intervalMs: 5, onError: () => {} })
  try {
    for (let i = 0; i < 6 * WAL_AUTOCHECKPOINT_PAGES; i++) {
      insert.run('x') // a frame a commit at least
      checkpointer.committed() // as the host's engine tells it of each commit
      if (i % 2_000 === 0) await new Promise((r) => setImmediate(r)) // the thread's messages get through
    }
    const pageSize = sqlite.pragma('page_size', { simple: true }) as number
    expect(statSync(`${path}-wal`).size).toBeLessThan(3 * WAL_AUTOCHECKPOINT_PAGES * (pageSize + 24))
  } finally {
    await checkpointer.stop()
    sqlite.close()
  }
})

it('a checkpointer that found the whole log copied sleeps until enough commits come to wake it, then passes again', async () => {
  const { path, sqlite, insert } = scratchDatabase(dir)
  insert.run('x')
  const passes: CheckpointPass[] = []
  const checkpointer = new Checkpointer({ path, durability: 'normal', intervalMs: 10, onPass: (p) => passes.push(p), onError: () => {} })
  try {
    await until(() => passes.some((p) => p.checkpointed === p.log), 10_000, 'a pass that copied the whole log')
    await new Promise((r) => setTimeout(r, 50)) // the pass that finds nothing new to copy, and the sleep
    const asleep = checkpointer.passes
    await new Promise((r) => setTimeout(r, 300)) // 30 intervals
    expect(checkpointer.passes).toBe(asleep)
    // A lone job's few commits do not wake it (they wait for its idle bound)…
    for (let i = 0; i < WAKE_AFTER_COMMITS - 1; i++) {
      insert.run('y')
      checkpointer.committed()
    }
    await new Promise((r) => setTimeout(r, 300))
    expect(checkpointer.passes).toBe(asleep)
    // …one more does.
    insert.run('z')
    checkpointer.committed()
    await until(() => checkpointer.passes > asleep, 5_000, 'a pass after the commits')
    const woken = checkpointer.passes
    await new Promise((r) => setTimeout(r, 300))
    expect(checkpointer.passes - woken).toBeLessThanOrEqual(1) // asleep again: at most the pass that found it all copied
  } finally {
    await checkpointer.stop()
    sqlite.close()
  }
})

it('an asleep checkpointer still passes after its idle bound, for a write it was not told of', async () => {
  const { path, sqlite, insert } = scratchDatabase(dir)
  const checkpointer = new Checkpointer({ path, durability: 'normal', intervalMs: 10, idleMs: 200, onError: () => {} })
  try {
    await until(() => checkpointer.passes > 0, 10_000, 'a first pass')
    await new Promise((r) => setTimeout(r, 50))
    const asleep = checkpointer.passes
    insert.run('x') // not told
    await until(() => checkpointer.passes > asleep, 5_000, 'a pass after the idle bound')
  } finally {
    await checkpointer.stop()
    sqlite.close()
  }
})

it('a checkpointer that cannot open the database says why and that it stopped, and stop() still ends its thread', async () => {
  const errors: { message: string; stopped: boolean }[] = []
  const checkpointer = new Checkpointer({ path: join(dir, 'missing', 'leasehold.db'), durability: 'normal', intervalMs: 20, onError: (e, stopped) => errors.push({ message: e.message, stopped }) })
  await until(() => errors.length > 0, 10_000, 'the error')
  expect(errors).toEqual([{ message: expect.stringMatching(/unable to open|directory does not exist|no such file/i), stopped: true }])
  await checkpointer.stop()
})

let host: TestHost | null = null
afterEach(async () => {
  await host?.dispose()
  host = null
})

it('a host copies its log back into the database file as it goes, not only at the writer’s checkpoint', async () => {
  host = await startTestHost()
  const file = join(host.dataDir, 'leasehold.db')
  const before = statSync(file).size
  const res = await host.call('/api/scheduler/jobs/submit-batch', { method: 'POST', json: { jobs: Array.from({ length: 200 }, () => ({ job_type: 'noop', cost_units: 1 })) } })
  expect(res.status).toBe(200)
  // 200 jobs write a few hundred pages, far below WAL_AUTOCHECKPOINT_PAGES: only the thread copies them.
  await until(() => statSync(file).size > before, 10_000, 'the database file to grow')
})

it('a stopped host ends its checkpointer before it closes the database, and leaves no log behind', async () => {
  // The thread's connection must be gone when the host's closes: the last connection checkpoints
  // the rest and removes the log, and no pass may run on a database the host has let go of.
  const order: string[] = []
  const stop = Checkpointer.prototype.stop
  const stopSpy = vi.spyOn(Checkpointer.prototype, 'stop').mockImplementation(async function (this: Checkpointer) {
    await stop.call(this)
    order.push('checkpointer stopped')
  })
  const close = BetterSqlite3.prototype.close
  const closeSpy = vi.spyOn(BetterSqlite3.prototype, 'close').mockImplementation(function (this: BetterSqlite3.Database) {
    if (connectionPath(this.name).endsWith('leasehold.db')) order.push('database closed') // not the data dir's lock
    return close.call(this)
  })
  try {
    host = await startTestHost()
    const file = join(host.dataDir, 'leasehold.db')
    await host.call('/api/scheduler/jobs/submit', { method: 'POST', json: { job_type: 'noop', cost_units: 1 } })
    expect(existsSync(`${file}-wal`)).toBe(true)
    await host.stop()
    expect(order).toEqual(['checkpointer stopped', 'database closed'])
    expect(existsSync(`${file}-wal`)).toBe(false)
  } finally {
    stopSpy.mockRestore()
    closeSpy.mockRestore()
  }
})
