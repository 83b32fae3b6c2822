/**
 * Real I/O errors, injected into a running `leasehold serve` with libfiu (`fiu-run -x` preloads
 * its POSIX wrappers, `fiu-ctrl` turns faults on in the process): the answers tell the truth.
 * A commit whose fsync failed is answered only once its outcome is certain, and that outcome is
 * the one a restart finds, killed or not; a read the disk failed is 503 `storage_error`, logged
 * once. Where fiu-utils is not installed, each test says why it skipped.
 */
import BetterSqlite3 from 'better-sqlite3'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { startTestHost, tempDir, type TestHost } from '../helpers/host'
import { fiuMissing, fiuServe, type FiuHost } from '../helpers/storage-faults'
import { body, PULL, QUEUE, until } from './support'

const missing = fiuMissing()

let served: FiuHost | undefined
let host: TestHost | undefined
let dataDir: string | undefined
let reader: BetterSqlite3.Database | undefined
afterEach(async () => {
  reader?.close()
  reader = undefined
  served?.child.kill('SIGKILL')
  await served?.exited
  served = undefined
  await host?.stop()
  host = undefined
  if (dataDir) rmSync(dataDir, { recursive: true, force: true })
  dataDir = undefined
})

/**
 * Another connection holds a read snapshot that ends in the write-ahead log (it writes first, so
 * that the log holds a frame the file lacks), then the log is checkpointed up to it: no
 * checkpoint has work left, and the held snapshot keeps the writer from starting the log over,
 * so the next fsync the host makes is its commit's own.
 */
function holdSnapshot(dir: string): void {
  reader = new BetterSqlite3(join(dir, 'leasehold.db'))
  reader.prepare("INSERT OR REPLACE INTO settings (key, value) VALUES ('snapshot-held', '1')").run()
  reader.exec('BEGIN')
  reader.prepare('SELECT COUNT(*) FROM jobs').get()
  const checkpointer = new BetterSqlite3(join(dir, 'leasehold.db'))
  checkpointer.pragma('wal_checkpoint(PASSIVE)')
  checkpointer.close()
}

/**
 * Ends the host, killed or stopped. The snapshot is let go first, while the host still has the
 * database open: the last connection to close checkpoints the log and removes it, which would
 * drop the failed commit's frames by itself and hide what a restart after a kill finds.
 */
async function stopServed(killed: boolean): Promise<void> {
  reader?.close()
  reader = undefined
  served!.child.kill(killed ? 'SIGKILL' : 'SIGTERM')
  await served!.exited
  served = undefined
}

const KILLED_OR_NOT = [
  ['killed right after the answer', true],
  ['living on', false],
] as const

const FSYNC_FAILS_ONCE = 'enable name=posix/io/sync/fsync,failinfo=5,onetime'

describe('a commit whose fsync failed (libfiu)', () => {
  for (const [name, killed] of KILLED_OR_NOT) test(`a submit answered 503 "not made" is not there after a restart, ${name}; its retry makes one job`, async (context) => {
    if (missing) return context.skip(missing)
    dataDir = tempDir()
    served = await fiuServe(dataDir, ['--durability', 'full'])
    holdSnapshot(dataDir)
    served.fiu(FSYNC_FAILS_ONCE)
    const res = await served.call(`${QUEUE}/jobs/submit`, { job_type: 'generic', cost_units: 1, client_request_id: 'synced-or-not' })
    const answer = await body(res)
    expect([res.status, answer.code]).toEqual([503, 'storage_error'])
    expect(answer.detail).toMatch(/not made \(SQLITE_IOERR_FSYNC\)/)

    await stopServed(killed)

    host = await startTestHost({ dataDir })
    const retried = await host.call(`${QUEUE}/jobs/submit`, { method: 'POST', json: { job_type: 'generic', cost_units: 1, client_request_id: 'synced-or-not' } })
    expect(retried.status, 'a 409 duplicate_request here means the job "not made" was made').toBe(201)
    expect((await body(await host.call(`${QUEUE}/jobs`))).jobs).toHaveLength(1)
  })

  for (const [name, killed] of KILLED_OR_NOT) test(`a completion answered 503 "not made" is not recorded after a restart, ${name}; the job is still leased`, async (context) => {
    if (missing) return context.skip(missing)
    dataDir = tempDir()
    served = await fiuServe(dataDir, ['--durability', 'full'])
    const submitted = await body(await served.call(`${QUEUE}/jobs/submit`, { job_type: 'generic', cost_units: 1 }))
    const leased = await body(await served.call(`${PULL}/request`, { worker_id: 'w', ttl_sec: 3600 }))
    expect(leased.job.job_id).toBe(submitted.job.job_id)
    holdSnapshot(dataDir)
    served.fiu(FSYNC_FAILS_ONCE)
    const res = await served.call(`${PULL}/${leased.lease.lease_id}/complete`, { worker_id: 'w', status: 'completed' })
    const answer = await body(res)
    expect([res.status, answer.code]).toEqual([503, 'storage_error'])

    await stopServed(killed)

    const db = new BetterSqlite3(join(dataDir, 'leasehold.db'), { readonly: true })
    const state = db.prepare('SELECT state FROM jobs WHERE id = ?').pluck().get(submitted.job.job_id)
    db.close()
    expect(state, 'DONE here means the completion "not recorded" was recorded').toBe('LEASED')
  })
})

describe('a sync the checkpointer failed (libfiu)', () => {
  test('stops every write until a restart, though later syncs work: health, the storage report and the log say why and what to do', async (context) => {
    if (missing) return context.skip(missing)
    dataDir = tempDir()
    served = await fiuServe(dataDir) // --durability normal: a commit syncs nothing, the checkpointer's pass is the first sync
    served.fiu(FSYNC_FAILS_ONCE)
    // Commits enough to wake the checkpointer at once (db/checkpointer.ts WAKE_AFTER_COMMITS), until its pass fails.
    await until(async () => {
      for (let i = 0; i < 40; i++) await served!.call(`${QUEUE}/jobs/submit`, { job_type: 'generic', cost_units: 1 })
      return (await body(await served!.call('/api/health'))).reason === 'disk sync failed'
    }, 10_000, 'the checkpointer\'s failed sync')

    // The next syncs would work ("onetime"): no write is acknowledged all the same.
    for (let i = 0; i < 5; i++) {
      const res = await served.call(`${QUEUE}/jobs/submit`, { job_type: 'generic', cost_units: 1 })
      expect(res.status).toBe(503)
      expect((await body(res)).detail).toMatch(/failed to sync the checkpointer's writes/)
    }
    const { read_only } = await body(await served.call('/api/storage'))
    expect(read_only.reason).toBe('disk sync failed')
    expect(read_only.detail).toMatch(/until it is restarted/)
    expect(served.stderr()).toMatch(/leasehold: The disk failed to sync the checkpointer's writes \(SQLITE_IOERR_FSYNC\)/)
    expect(served.stderr()).not.toMatch(/the checkpointer works again/)

    await stopServed(false)
    host = await startTestHost({ dataDir })
    expect((await host.call(`${QUEUE}/jobs/submit`, { method: 'POST', json: { job_type: 'generic', cost_units: 1 } })).status).toBe(201)
  })
})

describe('a read the disk failed (libfiu)', () => {
  test('is 503 storage_error saying the disk failed a read, never a 500, and is logged once a minute, not once per request', async (context) => {
    if (missing) return context.skip(missing)
    dataDir = tempDir()
    served = await fiuServe(dataDir)
    for (let i = 0; i < 20; i++) await served.call(`${QUEUE}/jobs/submit`, { job_type: 'generic', cost_units: 1, payload: { pad: 'x'.repeat(4000) } })
    // Reads miss SQLite's page cache once another connection wrote: each request here writes, then reads.
    const statuses: string[] = []
    const details: string[] = []
    served.fiu('enable_random name=posix/io/rw/pread,probability=0.02,failinfo=5')
    const until = Date.now() + 30_000
    // Until three reads have failed and one was served: each read fails or not at random, as its pages do.
    while (Date.now() < until && (details.length < 3 || !statuses.includes('200'))) {
      const writer = new BetterSqlite3(join(dataDir, 'leasehold.db'))
      writer.prepare("INSERT OR REPLACE INTO settings (key, value) VALUES ('test-bump', ?)").run(String(statuses.length))
      writer.close()
      const res = await served.call(`${QUEUE}/jobs?limit=50`)
      const answer = await body(res)
      statuses.push(res.status === 200 ? '200' : `${res.status} ${answer.code}`)
      if (res.status !== 200) details.push(answer.detail)
    }
    served.fiu('disable name=posix/io/rw/pread')
    expect(new Set(statuses), `${statuses.length} reads with the fault on`).toEqual(new Set(['200', '503 storage_error']))
    expect(details[0]).toMatch(/The disk failed a read \(SQLITE_CORRUPT\)/)
    expect(details[0]).toContain('leasehold check')
    expect(served.stderr()).not.toMatch(/internal error|SqliteError|\n\s+at /)
    expect(served.stderr().match(/storage_error on GET/g)).toHaveLength(1)
    // The disk works again: so do reads.
    expect((await served.call(`${QUEUE}/jobs`)).status).toBe(200)
  })
})
