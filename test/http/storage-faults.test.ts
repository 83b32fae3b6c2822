/**
 * Faults of the disk under the data dir never take the host down or lie to a client: a write
 * the disk cannot hold is 507 `storage_full`, another storage fault 503 `storage_error`, reads
 * keep answering, every timer of the host survives and tries again, and once space returns the
 * writes work with nothing acknowledged lost. The fault is injected at the database layer
 * (StorageFaultInjector), and, where this machine lets the test mount one, made real with a
 * small tmpfs filled to the last byte.
 */
import BetterSqlite3 from 'better-sqlite3'
import { execFileSync } from 'node:child_process'
import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { Dispatch } from '../../src-main/dispatch/dispatch'
import { ClockWaiters } from '../../src-main/dispatch/clock-waiters'
import { ManualClock, SECOND } from '../../src-main/engine/rules/clock'
import { answerWorkerRequest } from '../../src-main/pool/ipc-host'
import { startTestHost, tempDir, type TestHost } from '../helpers/host'
import { runCliAsync } from '../helpers/process'
import { StorageFaultInjector } from '../helpers/storage-faults'
import { body, dbDigest, API_T0, expectError, post, PULL, QUEUE, submit, until, WORKER } from './support'
// White-box by purpose: faults are injected into the host's own database handle, reached through engineContext.
import { engineContext } from '../../src-main/engine/internals'

let host: TestHost | undefined
let injector: StorageFaultInjector | undefined
afterEach(async () => {
  injector?.dispose()
  injector = undefined
  await host?.dispose()
  host = undefined
})

/** A host on a ManualClock whose log lines are kept, with a fault injector on its database. */
async function faultyHost(overrides: Parameters<typeof startTestHost>[0] = {}) {
  const clock = new ManualClock(API_T0)
  const lines: string[] = []
  host = await startTestHost({ statsIntervalS: 1, leaseTtlS: 5, heartbeatGraceS: 0, ...overrides }, { clock, log: (line) => lines.push(line) })
  injector = new StorageFaultInjector(engineContext(host.engine).db)
  return { host, clock, lines, injector }
}

const matching = (lines: string[], pattern: RegExp) => lines.filter((line) => pattern.test(line))

function integrityCheck(dataDir: string): string {
  const db = new BetterSqlite3(join(dataDir, 'leasehold.db'), { readonly: true })
  try {
    return db.pragma('integrity_check', { simple: true }) as string
  } finally {
    db.close()
  }
}

describe('a write the disk cannot hold', () => {
  test('is 507 storage_full naming the data dir, in every API; nothing is written and reads keep answering', async () => {
    const { host, injector } = await faultyHost()
    const kept = await submit(host, { job_type: 'kept' })
    const before = dbDigest(host)
    injector.code = 'SQLITE_FULL'

    const refused = [
      await post(host, `${QUEUE}/jobs/submit`, { job_type: 'generic', cost_units: 1 }),
      await post(host, `${QUEUE}/jobs/claim`, { worker_id: 'w' }),
      await post(host, `${PULL}/request`, { worker_id: 'w' }),
      await post(host, `${WORKER}/claim`, { worker_id: 'w', streams: ['default'], max_wait_ms: 0 }),
      await host.call('/api/capacity', { method: 'PUT', json: { total_units: 7 } }),
    ]
    for (const res of refused) {
      const error = await expectError(res, 507, 'storage_full')
      expect(error.detail).toMatch(/disk is full/)
      expect(error.detail).toContain(host.dataDir)
    }
    expect(dbDigest(host)).toBe(before)

    // Reads are not writes: they answer as before.
    expect((await host.call(`${QUEUE}/jobs/${kept.job_id}`)).status).toBe(200)
    expect((await host.call('/api/capacity')).status).toBe(200)
    expect((await host.call(`${QUEUE}/jobs`)).status).toBe(200)
    expect((await host.call('/api/health', { token: null })).status).toBe(200)
  })

  test('a bulk action the disk fills under says how many jobs its steps committed before, and that the rest were not', async () => {
    const { host, injector } = await faultyHost()
    for (let i = 0; i < 2; i++) await host.engine.run(() => host.engine.submitMany(Array.from({ length: 800 }, () => ({ job_type: 'swept', cost_units: 1 }))))
    expect(await body(await post(host, '/api/jobs/bulk/cancel', { job_type: 'swept' }))).toMatchObject({ changed: 1600 })
    // The disk fills once three steps of 500 are committed.
    const step = host.engine.bulkStep
    let purged = 0
    host.engine.bulkStep = (plan, cursor) => {
      if (purged === 1500) injector.code = 'SQLITE_FULL'
      const done = step(plan, cursor)
      purged += done.changed
      return done
    }
    const error = await expectError(await post(host, '/api/jobs/bulk/purge', { job_type: 'swept' }), 507, 'storage_full')
    expect(error.detail).toMatch(/^The bulk purge stopped part way: 1500 job\(s\) were purged by the steps before \(each its own transaction\), and stay so; the rest were not\. The disk is full/)
    injector.code = null
    expect(engineContext(host.engine).db.prepare("SELECT COUNT(*) FROM jobs WHERE job_type = 'swept'").pluck().get()).toBe(100)
    // A bulk action that changed nothing before the disk filled says only that.
    injector.code = 'SQLITE_FULL'
    const none = await expectError(await post(host, '/api/jobs/bulk/purge', { job_type: 'swept' }), 507, 'storage_full')
    expect(none.detail).toMatch(/^The disk is full: the write was not made/)
  })

  test('another storage fault (SQLITE_IOERR_*) is 503 storage_error', async () => {
    const { host, injector } = await faultyHost()
    injector.code = 'SQLITE_IOERR_WRITE'
    const error = await expectError(await post(host, `${QUEUE}/jobs/submit`, { job_type: 'generic', cost_units: 1 }), 503, 'storage_error')
    expect(error.detail).toContain(host.dataDir)
  })

  test('a stored value that does not read as what was written (a damaged page) is a read fault: 503 storage_error naming leasehold check, never a 500; the host logs no stack', async () => {
    const { host, lines } = await faultyHost()
    const job = await submit(host, { job_type: 'kept', payload: { a: 1 } })
    // What a damaged page reads as: bytes that are no JSON, where the engine wrote JSON.
    const db = engineContext(host.engine).db
    db.prepare("UPDATE jobs SET payload = ? WHERE job_type = 'kept'").run('ᛞ\u0000garbage')
    db.prepare("UPDATE events SET data = ? WHERE job_id = (SELECT id FROM jobs WHERE job_type = 'kept')").run('{"cut')
    for (const path of [`${QUEUE}/jobs/${job.job_id}`, `${QUEUE}/jobs/${job.job_id}/events`]) {
      const error = await expectError(await host.call(path), 503, 'storage_error')
      expect(error.detail).toContain('leasehold check')
    }
    expect(matching(lines, /internal error|SyntaxError|\bat /)).toEqual([])
  })

  test('is logged at most once a minute, not once per request', async () => {
    const { host, lines, injector } = await faultyHost()
    injector.code = 'SQLITE_FULL'
    for (let i = 0; i < 5; i++) expect((await post(host, `${QUEUE}/jobs/submit`, { job_type: 'generic', cost_units: 1 })).status).toBe(507)
    expect(matching(lines, /storage_full on POST/)).toHaveLength(1)
  })

  test('a local worker gets the same answer over IPC', async () => {
    const { host, clock, injector } = await faultyHost()
    await submit(host)
    const dispatch = new Dispatch(host.engine)
    const clockWaiters = new ClockWaiters(clock)
    injector.code = 'SQLITE_FULL'
    const answer = await answerWorkerRequest(
      { engine: host.engine, dispatch, clockWaiters },
      { workerId: 'local-1.1', workerToken: false },
      { type: 'request', id: 1, method: 'exchange', params: { worker_id: 'local-1.1', claim: { streams: ['default'], max_jobs: 1, max_wait_ms: 0 } } },
      new AbortController().signal,
    )
    dispatch.close()
    expect(answer.error).toEqual({ status: 507, code: 'storage_full', detail: expect.stringContaining(host.dataDir) })
  })
})

describe('the host on a full disk', () => {
  test('stays up: its timers log once a minute and try again each tick; when space returns, due work is done and no acknowledged job is lost', async () => {
    const { host, clock, lines, injector } = await faultyHost()
    const acknowledged = [(await submit(host, { job_type: 'a' })).job_id, (await submit(host, { job_type: 'b' })).job_id]
    const leased = await body(await post(host, `${PULL}/request`, { worker_id: 'w', ttl_sec: 5 }))
    expect(leased.denied).toBe(false)

    injector.code = 'SQLITE_FULL'
    clock.advance(10 * SECOND) // the lease is due: the reaper must write, and cannot
    await until(() => matching(lines, /the reaper failed/).length > 0 && matching(lines, /the stats sampler failed/).length > 0, 5000)
    expect(matching(lines, /the reaper failed/)[0]).toMatch(/storage_full: .*disk is full.*/)
    expect(matching(lines, /the reaper failed/)[0]).toContain(host.dataDir)
    // Several more reaper ticks (one every 250 ms), each refused, none logged.
    const refusedSoFar = injector.refused
    await until(() => injector.refused >= refusedSoFar + 8, 5000)
    expect(matching(lines, /the reaper failed/)).toHaveLength(1)
    // A minute on, the next failure is logged with how many were held back.
    clock.advance(61 * SECOND)
    await until(() => matching(lines, /the reaper failed/).length === 2, 5000)
    expect(matching(lines, /the reaper failed/)[1]).toMatch(/\((\d+) more like it since/)

    // Still serving, and the lease is still due.
    expect((await host.call('/api/health', { token: null })).status).toBe(200)
    expect(host.engine.getJob(leased.job.job_id).state).toBe('LEASED')

    injector.code = null // space returns
    await until(() => matching(lines, /the reaper works again/).length === 1, 5000)
    const requeued = (await body(await host.call(`${QUEUE}/jobs/${leased.job.job_id}`))).job
    expect(requeued).toMatchObject({ state: 'QUEUED', attempts: 1 })
    acknowledged.push((await submit(host, { job_type: 'after' })).job_id)

    const dataDir = host.dataDir
    await host.stop()
    const db = new BetterSqlite3(join(dataDir, 'leasehold.db'), { readonly: true })
    const ids = db.prepare('SELECT id FROM jobs ORDER BY id').pluck().all()
    db.close()
    expect(ids.sort()).toEqual([...acknowledged].sort())
    expect(integrityCheck(dataDir)).toBe('ok')
    expect(matching(lines, /internal error/)).toEqual([])
  })
})

/**
 * A real full disk: the data dir on a 4 MiB tmpfs, filled to its last byte by another file.
 * Needs root and a kernel that lets this process mount; elsewhere the test says why it skipped.
 */
describe('a real full disk (tmpfs)', () => {
  let mountPoint: string | undefined
  afterEach(async () => {
    if (!mountPoint) return
    await host?.dispose() // its files are open on the mount: close them first
    host = undefined
    try {
      execFileSync('umount', [mountPoint], { stdio: 'ignore' })
    } catch {
      // already gone
    }
    rmSync(mountPoint, { recursive: true, force: true })
    mountPoint = undefined
  })

  function mountTmpfs(options = 'size=4m'): string | null {
    if (process.platform !== 'linux' || process.getuid?.() !== 0) return 'it needs root on Linux to mount a tmpfs'
    mountPoint = tempDir('leasehold-tmpfs-')
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', options, 'tmpfs', mountPoint], { stdio: 'pipe' })
      return null
    } catch (error) {
      rmSync(mountPoint, { recursive: true, force: true })
      mountPoint = undefined
      return `mount -t tmpfs is not permitted here (${(error as Error).message.split('\n')[0]})`
    }
  }

  /** Empty files on the mount until the file system makes no more: bytes are left, files are not. */
  function useUpFiles(): void {
    for (let i = 0; ; i++) {
      try {
        writeFileSync(join(mountPoint!, `empty-${i}`), '')
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error
        return
      }
    }
  }

  /** Writes 64 KiB pieces into one file until the disk refuses the next byte. */
  function fillDisk(path: string): void {
    const chunk = Buffer.alloc(64 * 1024, 1)
    try {
      for (let i = 0; i < 1024; i++) writeFileSync(path, chunk, { flag: 'a' })
      for (let i = 0; i < 64 * 1024; i++) writeFileSync(path, chunk.subarray(0, 1), { flag: 'a' })
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error
      return
    }
    throw new Error('the disk never filled')
  }

  test('a host started on a full disk serves reads and status read-only, refuses writes with 507, and takes writes again once space is freed, without a restart; nothing is lost', async (context) => {
    const skipped = mountTmpfs()
    if (skipped) return context.skip(skipped)
    const dataDir = join(mountPoint!, 'data')
    mkdirSync(dataDir)
    host = await startTestHost({ dataDir })
    const acknowledged = [(await submit(host, { job_type: 'before' })).job_id]
    await host.stop() // a clean stop: the -wal file is gone (and the -shm file, where there is one), and must be made again at the next open
    host = undefined
    const filler = join(mountPoint!, 'filler')
    fillDisk(filler)

    const lines: string[] = []
    host = await startTestHost({ dataDir, statsIntervalS: 1 }, { log: (line) => lines.push(line) })
    expect(matching(lines, /is full: serving reads only/)).toHaveLength(1)
    expect(await body(await host.call('/api/health', { token: null }))).toMatchObject({ ok: true, storage: 'read_only', reason: 'disk full' })
    // Reads answer: the job, the lists, the snapshot, the dashboard's storage figures.
    expect((await body(await host.call(`${QUEUE}/jobs/${acknowledged[0]}`))).job.state).toBe('QUEUED')
    expect((await host.call(`${QUEUE}/jobs`)).status).toBe(200)
    expect((await host.call(`${QUEUE}/stats/snapshot`)).status).toBe(200)
    expect((await host.call('/api/storage')).status).toBe(200)
    // leasehold status says so (host.json may not fit on the disk: the command is given the host).
    const status = await runCliAsync(['status', '--url', host.url, '--token', host.token, '--data-dir', dataDir], { LEASEHOLD_URL: undefined, LEASEHOLD_TOKEN: undefined })
    expect(status.stderr).toBe('')
    expect(status.stdout).toMatch(/storage {3}READ-ONLY \(disk full\): reads work, every write is refused/)
    // Every write is 507 storage_full, naming the data dir; a request without the token is still 401.
    for (const res of [
      await post(host, `${QUEUE}/jobs/submit`, { job_type: 'generic', cost_units: 1 }),
      await post(host, `${WORKER}/claim`, { worker_id: 'w', streams: ['default'], max_wait_ms: 0 }),
      await host.call('/api/capacity', { method: 'PUT', json: { total_units: 7 } }),
    ]) {
      const error = await expectError(res, 507, 'storage_full')
      expect(error.detail).toContain(dataDir)
      expect(error.detail).toMatch(/read-only/)
    }
    await expectError(await host.call(`${QUEUE}/jobs/submit`, { method: 'POST', json: { job_type: 'generic', cost_units: 1 }, token: null }), 401, 'unauthorized')
    // The integrity check waits for writes too: the read-only connection keeps the file to itself.
    expect((await expectError(await host.call('/api/storage/integrity'), 507, 'storage_full')).detail).toMatch(/once writes resume/)
    expect(matching(lines, /failed/)).toEqual([]) // no background writer ran, so none failed

    rmSync(filler) // space returns: within a few seconds the host takes writes, without a restart
    await until(async () => (await body(await host!.call('/api/health', { token: null }))).storage === 'read_write', 15_000)
    expect(matching(lines, /has room again: writes resume/)).toHaveLength(1)
    expect(await body(await host.call('/api/storage/integrity?depth=quick'))).toMatchObject({ ok: true, problems: [] })
    acknowledged.push((await submit(host, { job_type: 'after' })).job_id)
    const leased = await body(await post(host, `${PULL}/request`, { worker_id: 'w' }))
    expect(leased.denied).toBe(false)
    await host.stop()
    host = undefined
    const db = new BetterSqlite3(join(dataDir, 'leasehold.db'), { readonly: true })
    expect(db.prepare('SELECT id FROM jobs').pluck().all().sort()).toEqual([...acknowledged].sort())
    db.close()
    const check = await runCliAsync(['check', '--data-dir', dataDir], { LEASEHOLD_DATA_DIR: undefined })
    expect(check.status, check.stdout + check.stderr).toBe(0)
    expect(matching(lines, /internal error/)).toEqual([])
  })

  test('a new data dir on a full disk still refuses to start, in one line: setting the database up writes', async (context) => {
    const skipped = mountTmpfs()
    if (skipped) return context.skip(skipped)
    const dataDir = join(mountPoint!, 'data')
    mkdirSync(dataDir)
    await (await startTestHost({ dataDir })).stop() // the token and the lock file are there; the database goes
    rmSync(join(dataDir, 'leasehold.db'))
    fillDisk(join(mountPoint!, 'filler'))
    const error = await startTestHost({ dataDir }).then(
      () => null,
      (e: Error) => e,
    )
    expect(error?.message).toMatch(/^the disk that holds .*leasehold\.db is full, and the database must be set up .* free some space and start again/)
    expect(error?.message.split('\n')).toHaveLength(1)
  })

  test('a disk with no free files (inodes) left is named so by serve, check and token create, not as an unreadable database', async (context) => {
    const skipped = mountTmpfs('size=20m,nr_inodes=16')
    if (skipped) return context.skip(skipped)
    const dataDir = join(mountPoint!, 'data')
    mkdirSync(dataDir)
    await (await startTestHost({ dataDir })).stop() // the database, its token and lock file; no -wal or -shm after a clean stop
    useUpFiles()
    const noFiles = /the disk that holds .*leasehold\.db has no free files \(inodes\) left \(all 16 in use\)/
    const error = await startTestHost({ dataDir }).then(
      () => null,
      (e: Error) => e,
    )
    expect(error?.message).toMatch(noFiles)
    expect(error?.message).not.toMatch(/not a readable SQLite database/)
    const check = await runCliAsync(['check', '--data-dir', dataDir])
    expect(check.status).toBe(1)
    expect(check.stderr).toMatch(noFiles)
    const token = await runCliAsync(['token', 'create', '--scope', 'worker', '--data-dir', dataDir])
    expect(token.status).toBe(1)
    expect(token.stderr).toContain(`cannot lock ${join(dataDir, 'worker-tokens.lock')} (the disk has no free files (inodes) left (all 16 in use)); no token was changed`)
  })

  test('a data dir on a read-only file system is named so by token create and revoke, as serve names it, not as a lock SQLite cannot open', async (context) => {
    const skipped = mountTmpfs()
    if (skipped) return context.skip(skipped)
    const dataDir = join(mountPoint!, 'data')
    mkdirSync(dataDir)
    await (await startTestHost({ dataDir })).stop()
    const remount = (mode: 'ro' | 'rw') => execFileSync('mount', ['-o', `remount,${mode}`, mountPoint!], { stdio: 'pipe' })
    const readOnly = `cannot write in the data dir ${dataDir} (EROFS: read-only file system`
    remount('ro')
    const served = await startTestHost({ dataDir }).then(
      () => null,
      (e: Error) => e,
    )
    expect(served?.message).toContain(readOnly)
    const created = await runCliAsync(['token', 'create', '--scope', 'worker', '--data-dir', dataDir])
    expect(created.status).toBe(1)
    expect(created.stderr).toContain(readOnly)
    expect(created.stderr).toMatch(/; no token was changed/)
    expect(created.stderr).not.toMatch(/SQLITE_CANTOPEN/)
    remount('rw')
    const made = await runCliAsync(['token', 'create', '--scope', 'worker', '--json', '--data-dir', dataDir]) // the change's lock file is there from now on
    expect(made.status, made.stderr).toBe(0)
    remount('ro')
    const revoked = await runCliAsync(['token', 'revoke', JSON.parse(made.stdout).id, '--data-dir', dataDir])
    expect(revoked.status).toBe(1)
    expect(revoked.stderr).toContain(readOnly)
    expect(revoked.stderr).not.toMatch(/SQLITE_CANTOPEN/)
  })

  test('a data dir with no host.lock yet, on a disk with no free files (inodes) left, is named so, not as a data dir it cannot write in', async (context) => {
    const skipped = mountTmpfs('size=20m,nr_inodes=16')
    if (skipped) return context.skip(skipped)
    const dataDir = join(mountPoint!, 'data')
    mkdirSync(dataDir)
    useUpFiles()
    const error = await startTestHost({ dataDir }).then(
      () => null,
      (e: Error) => e,
    )
    expect(error?.message).toMatch(/^the disk that holds .*host\.lock has no free files \(inodes\) left \(all 16 in use\): .*; remove files from that disk and start again$/)
  })

  test('answers 507 on a full tmpfs, stays up, and takes writes again once space is freed', async (context) => {
    const skipped = mountTmpfs()
    if (skipped) return context.skip(skipped)
    const dataDir = join(mountPoint!, 'data')
    mkdirSync(dataDir)
    const lines: string[] = []
    host = await startTestHost({ dataDir, statsIntervalS: 1 }, { log: (line) => lines.push(line) })
    const acknowledged = [(await submit(host)).job_id]

    const filler = join(mountPoint!, 'filler')
    fillDisk(filler)
    // The write-ahead log has room left in its file; the writes that need more are refused.
    let refusal: Response | undefined
    for (let i = 0; i < 2000 && !refusal; i++) {
      const res = await post(host, `${QUEUE}/jobs/submit`, { job_type: 'generic', cost_units: 1, payload: { pad: 'x'.repeat(2000) } })
      if (res.status === 201) acknowledged.push((await body(res)).job.job_id)
      else refusal = res
    }
    expect(refusal, 'a submit was refused').toBeDefined()
    const error = await expectError(refusal!, 507, 'storage_full')
    expect(error.detail).toContain(dataDir)
    expect((await host.call(`${QUEUE}/jobs/${acknowledged[0]}`)).status).toBe(200)
    // The stats sampler writes every second; it fails, logs, and the host goes on.
    await until(() => matching(lines, /the stats sampler failed/).length > 0, 5000)
    expect((await host.call('/api/health', { token: null })).status).toBe(200)

    rmSync(filler)
    acknowledged.push((await submit(host)).job_id)
    await host.stop()
    host = undefined
    const db = new BetterSqlite3(join(dataDir, 'leasehold.db'), { readonly: true })
    expect(db.prepare('SELECT id FROM jobs').pluck().all().sort()).toEqual([...acknowledged].sort())
    db.close()
    expect(integrityCheck(dataDir)).toBe('ok')
    expect(matching(lines, /internal error/)).toEqual([])
  })
})

/**
 * A commit whose sync failed may be on disk all the same (its frames are in the log, and a
 * restart's recovery would replay them): the host settles it with a commit of its own before
 * answering, so "not made" is the truth, and answers 503 `storage_uncertain` when it cannot.
 * Memory (active leases, tallies) was put back with the rollback and agrees with the file. After
 * a failed sync the host no longer knows what is on the disk: it takes no write until a restart.
 */
describe('a commit whose sync failed', () => {
  // No timer of the host commits meanwhile (the stats sampler, the measured busy rating): the failed commit is the request's.
  const quietHost = () => faultyHost({ statsIntervalS: 3600, busy: 0 })
  const jobCount = (host: TestHost) => engineContext(host.engine).db.prepare('SELECT COUNT(*) FROM jobs').pluck().get() as number
  /** The host stopped and started again on its data dir (and clock), the disk fine again. */
  const restart = async (clock?: ManualClock): Promise<TestHost> => {
    injector?.dispose()
    injector = undefined
    const { dataDir } = host!
    await host!.stop()
    host = await startTestHost({ dataDir, statsIntervalS: 3600, busy: 0 }, { clock })
    return host
  }

  test('after a failed sync no write is acknowledged until a restart, and health says why and what to do', async () => {
    const { host, injector, lines } = await quietHost()
    const kept = await submit(host)
    injector.failCommits('SQLITE_IOERR_FSYNC', 1)
    await expectError(await post(host, `${QUEUE}/jobs/submit`, { job_type: 'generic', cost_units: 1 }), 503, 'storage_error')
    const before = jobCount(host)

    // Every later write is refused, though the disk works again: the host cannot know what the failed sync lost.
    const refused = [
      await post(host, `${QUEUE}/jobs/submit`, { job_type: 'generic', cost_units: 1 }),
      await post(host, `${PULL}/request`, { worker_id: 'w' }),
      await host.call('/api/capacity', { method: 'PUT', json: { total_units: 7 } }),
    ]
    for (const res of refused) {
      const error = await expectError(res, 503, 'storage_error')
      expect(error.detail).toMatch(/failed to sync a commit's writes \(SQLITE_IOERR_FSYNC\)/)
      expect(error.detail).toMatch(/until it is restarted/)
    }
    expect(jobCount(host)).toBe(before)
    expect(await body(await host.call('/api/health', { token: null }))).toMatchObject({ storage: 'read_only', reason: 'disk sync failed' })
    const { detail } = (await body(await host.call('/api/storage'))).read_only
    expect(detail).toMatch(/Stop the host, check the disk .* and start it again/)
    expect(detail).toMatch(/Commits acknowledged since the last good sync may be lost/)
    expect(detail).toContain(host.dataDir)
    expect(matching(lines, /failed to sync a commit's writes/)).toHaveLength(1)
    // Reads go on.
    expect((await host.call(`${QUEUE}/jobs/${kept.job_id}`)).status).toBe(200)

    const restarted = await restart()
    expect((await body(await restarted.call('/api/health', { token: null }))).storage).toBe('read_write')
    await submit(restarted)
  })

  test('a submit is answered 503 storage_error "not made" only once that is certain, and its retry with its client_request_id after the restart makes the job', async () => {
    const { host, injector } = await quietHost()
    const before = jobCount(host)
    injector.failCommits('SQLITE_IOERR_FSYNC', 1)
    const error = await expectError(await post(host, `${QUEUE}/jobs/submit`, { job_type: 'generic', cost_units: 1, client_request_id: 'once' }), 503, 'storage_error')
    expect(error.detail).toMatch(/not made \(SQLITE_IOERR_FSYNC\)/)
    expect(jobCount(host)).toBe(before)
    // The queued tally in memory agrees with the file: the job is not counted.
    expect((await body(await host.call(`${QUEUE}/stats/snapshot`))).jobs.queued).toBe(before)
    // The retry is a new submit, not a duplicate of one that was made.
    const restarted = await restart()
    const job = await submit(restarted, { client_request_id: 'once' })
    expect(jobCount(restarted)).toBe(before + 1)
    expect((await body(await restarted.call(`${QUEUE}/jobs/${job.job_id}`))).job.state).toBe('QUEUED')
  })

  test('when the outcome cannot be made certain, the answer is 503 storage_uncertain, never "not made"; the retry after the restart answers what was made', async () => {
    const { host, injector } = await quietHost()
    const before = jobCount(host)
    injector.failCommits('SQLITE_IOERR_FSYNC', 2) // the submit's commit, then the settling one
    const error = await expectError(await post(host, `${QUEUE}/jobs/submit`, { job_type: 'generic', cost_units: 1, client_request_id: 'twice' }), 503, 'storage_uncertain')
    expect(error.detail).toMatch(/may or may not have been made/)
    expect(error.detail).toContain('client_request_id')
    expect(error.detail).toContain(host.dataDir)
    expect(jobCount(host)).toBe(before)
    expect((await body(await host.call(`${QUEUE}/stats/snapshot`))).jobs.queued).toBe(before)
    const restarted = await restart()
    await submit(restarted, { client_request_id: 'twice' })
    expect(jobCount(restarted)).toBe(before + 1)
    expect((await body(await restarted.call(`${QUEUE}/stats/snapshot`))).jobs.queued).toBe(before + 1)
  })

  test('a completion whose commit failed is answered as it turned out, and the lease, its job and the tallies in memory agree with the file', async () => {
    const { host, injector, clock } = await quietHost()
    const job = await submit(host)
    const leased = await body(await post(host, `${PULL}/request`, { worker_id: 'w', ttl_sec: 60 }))
    const leaseId = leased.lease.lease_id
    const snapshot = async (on: TestHost) => ({
      job: (await body(await on.call(`${QUEUE}/jobs/${job.job_id}`))).job.state,
      leases: (await body(await on.call('/api/leases'))).leases.map((lease: { lease_id: string }) => lease.lease_id),
      row: engineContext(on.engine).db.prepare('SELECT state FROM jobs WHERE id = ?').pluck().get(job.job_id),
    })
    const leasedState = { job: 'RUNNING', leases: [leaseId], row: 'LEASED' } // the queue API calls LEASED RUNNING
    expect(await snapshot(host)).toEqual(leasedState)

    injector.failCommits('SQLITE_IOERR_FSYNC', 1)
    const notMade = await expectError(await post(host, `${PULL}/${leaseId}/complete`, { worker_id: 'w', status: 'completed' }), 503, 'storage_error')
    expect(notMade.detail).toMatch(/not made/)
    expect(await snapshot(host)).toEqual(leasedState)

    // The worker retries, as the answer tells it to: after the restart the completion is recorded once.
    const restarted = await restart(clock)
    expect(await snapshot(restarted)).toEqual(leasedState)
    expect((await post(restarted, `${PULL}/${leaseId}/complete`, { worker_id: 'w', status: 'completed' })).status).toBe(200)
    expect(await snapshot(restarted)).toEqual({ job: 'DONE', leases: [], row: 'DONE' })
  })

  test('a commit refused before its frames were written (a full disk) is not settled: it was certainly not made', async () => {
    const { host, injector } = await quietHost()
    injector.failCommits('SQLITE_FULL', 1)
    await expectError(await post(host, `${QUEUE}/jobs/submit`, { job_type: 'generic', cost_units: 1 }), 507, 'storage_full')
    const settled = engineContext(host.engine).db.prepare("SELECT COUNT(*) FROM settings WHERE key = 'commit_settled_at'").pluck().get()
    expect(settled).toBe(0)
  })
})
