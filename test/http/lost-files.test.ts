/**
 * A host whose database file or log is deleted or replaced while it runs (a cleaner of /tmp, an
 * `rm -rf` of the data dir, a sync tool) takes no more writes within a second, and keeps every
 * commit where a start finds it: the host's file stays open, so without this the commits it went
 * on acknowledging were lost at the next start, with no word said.
 */
import BetterSqlite3 from 'better-sqlite3'
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, truncateSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { createScopedToken } from '../../src-main/data-dir/worker-tokens'
import { startTestHost, type TestHost } from '../helpers/host'
import { until } from '../helpers/until'
import { readEvents } from '../helpers/sse'
import { body, expectError, QUEUE, submit } from './support'

const hosts: TestHost[] = []
afterEach(async () => {
  for (const host of hosts.splice(0)) await host.dispose()
})

async function aHost(dataDir?: string, log?: (line: string) => void): Promise<TestHost> {
  const host = await startTestHost(dataDir ? { dataDir } : {}, log ? { log } : {})
  hosts.push(host)
  return host
}

/** The host's storage answer once it is read-only and `says` so. */
async function readOnlyStorage(host: TestHost, says: (readOnly: { reason: string; detail: string }) => boolean, what: string, ms: number): Promise<{ read_only: { reason: string; detail: string } }> {
  return until(
    async () => {
      const storage = await body(await host.call('/api/storage'))
      return storage.read_only && says(storage.read_only) ? storage : null
    },
    ms,
    what,
  )
}

/** The host's storage answer once it is read-only and says where it kept what it held. */
const keptStorage = (host: TestHost) => readOnlyStorage(host, ({ detail }) => detail.includes('Everything it had committed is in'), 'the host read-only, saying where it kept its commits', 5000)

/** The jobs a host started anew on `dataDir` has, by id (the host before it stopped first); it finds a file closed cleanly. */
async function jobsAfterRestart(before: TestHost, dataDir: string): Promise<string[]> {
  await before.stop()
  const lines: string[] = []
  const after = await aHost(dataDir, (line) => lines.push(line))
  expect(lines.filter((line) => /carries the mark of a host|unclean/.test(line))).toEqual([])
  const { jobs } = await body(await after.call(`${QUEUE}/jobs?limit=100`))
  return jobs.map((job: { job_id: string }) => job.job_id).sort()
}

describe('a database file deleted while the host runs', () => {
  test('the host refuses writes within a second, and writes every job it acknowledged back to the data dir, where a restart finds them', async () => {
    const lines: string[] = []
    const host = await aHost(undefined, (line) => lines.push(line))
    const path = join(host.dataDir, 'leasehold.db')
    const acknowledged = [await submit(host), await submit(host)]
    rmSync(path)
    // Acknowledged after the file went, before the host can have looked: kept all the same.
    acknowledged.push(await submit(host))
    const storage = await keptStorage(host)
    expect(storage.read_only.reason).toBe('database file deleted')
    expect(storage.read_only.detail).toContain(`The database file ${path} was deleted while the host ran`)
    expect(storage.read_only.detail).toContain('restart the host')
    const refused = await expectError(await host.call(`${QUEUE}/jobs/submit`, { method: 'POST', json: { job_type: 'late', cost_units: 1 } }), 503, 'storage_error')
    expect(refused.detail).toContain(path)
    expect(await body(await host.call('/api/health'))).toMatchObject({ storage: 'read_only', reason: 'database file deleted' })
    // The copy went to the database's own path, and the line that retires the old log says so.
    expect(lines.filter((line) => line.includes('log-of-lost') && line.startsWith('leasehold: removed'))).toEqual([
      expect.stringMatching(new RegExp(`: its commits are in the copy written to ${path}$`)),
    ])
    expect(await jobsAfterRestart(host, host.dataDir)).toEqual(acknowledged.map((job) => job.job_id).sort())
  })

  test("an open event stream is told by a storage frame as the host goes read-only (no event can say it), and a stream opened then is told first", async () => {
    const host = await aHost()
    const open = await host.call('/api/events/stream')
    const before = readEvents(open, (frames) => frames.some((frame) => frame.event === 'storage' && JSON.parse(frame.data!).detail !== null))
    rmSync(join(host.dataDir, 'leasehold.db'))
    const told = (await before).filter((frame) => frame.event === 'storage').map((frame) => JSON.parse(frame.data!))
    expect(told[0]).toMatchObject({ storage: 'read_only', reason: 'database file deleted' })
    expect(told.at(-1)!.detail).toContain('was deleted while the host ran')
    const later = await readEvents(await host.call('/api/events/stream'), (frames) => frames.some((frame) => frame.event === 'storage'))
    expect(later.find((frame) => frame.event === 'storage')!.id).toBeUndefined()
    expect(JSON.parse(later.find((frame) => frame.event === 'storage')!.data!)).toMatchObject({ storage: 'read_only', reason: 'database file deleted' })
  })

  test('with the whole data dir gone, the folder is made again for the copy, with the token, worker tokens, host.json and lock the host holds', async () => {
    const host = await aHost()
    const worker = createScopedToken(host.dataDir, 'worker')
    const claim = (at: TestHost) => at.call('/internal/worker/claim', { method: 'POST', token: worker.token, json: { worker_id: 'w', streams: ['default'], max_wait_ms: 0 } })
    expect((await claim(host)).status).toBe(200) // the host has read the worker token
    const acknowledged = [await submit(host), await submit(host)]
    rmSync(host.dataDir, { recursive: true })
    await keptStorage(host)
    expect(readdirSync(host.dataDir).sort()).toEqual(['host.json', 'host.lock', 'leasehold.db', 'token', 'worker-tokens.json'])
    expect(readFileSync(join(host.dataDir, 'token'), 'utf8').trim()).toBe(host.token)
    expect(JSON.parse(readFileSync(join(host.dataDir, 'host.json'), 'utf8'))).toMatchObject({ pid: process.pid })
    // The data dir is held again: no second host starts on it while this one runs.
    await expect(aHost(host.dataDir)).rejects.toThrow(/another Leasehold host .* runs on the data dir/)
    expect(await jobsAfterRestart(host, host.dataDir)).toEqual(acknowledged.map((job) => job.job_id).sort())
    // The restarted host takes the same token and worker token as before.
    const after = hosts[hosts.length - 1]!
    expect(after.token).toBe(host.token)
    expect((await claim(after)).status).toBe(200)
  })

  test('a file put in its place is left as it is: the copy goes beside it, and the host says how to put it back', async () => {
    const host = await aHost()
    const path = join(host.dataDir, 'leasehold.db')
    const acknowledged = await submit(host)
    rmSync(path)
    writeFileSync(path, 'not mine')
    const storage = await keptStorage(host)
    expect(storage.read_only.reason).toBe('database file replaced')
    const rescued = readdirSync(host.dataDir).find((name) => name.startsWith('leasehold.db.rescued-'))!
    expect(storage.read_only.detail).toContain(`rename ${join(host.dataDir, rescued)} to ${path}`)
    expect(readFileSync(path, 'utf8')).toBe('not mine')
    await host.stop()
    rmSync(path)
    renameSync(join(host.dataDir, rescued), path)
    const after = await aHost(host.dataDir)
    expect((await body(await after.call(`${QUEUE}/jobs/${acknowledged.job_id}`))).job.job_id).toBe(acknowledged.job_id)
  })
})

describe('a backup restored in place while the host runs', () => {
  test('the next start opens the restored file as it was: the log of the database that went leaves its path as the loss is seen (a host killed before its stop leaves none), and is removed once the rescue holds its commits', async () => {
    const first = await aHost()
    const dataDir = first.dataDir
    const path = join(dataDir, 'leasehold.db')
    const before = await submit(first)
    await first.stop()
    const backup = `${dataDir}.backup.db`
    writeFileSync(backup, readFileSync(path))
    const lines: string[] = []
    const host = await aHost(dataDir, (line) => lines.push(line))
    const after: string[] = []
    for (let i = 0; i < 50; i++) after.push((await submit(host)).job_id)
    expect(existsSync(`${path}-wal`)).toBe(true)
    // The restore, as an operator puts one in place: a copy renamed over the file.
    writeFileSync(`${path}.tmp`, readFileSync(backup))
    renameSync(`${path}.tmp`, path)
    const kept = await keptStorage(host)
    expect(kept.read_only.reason).toBe('database file replaced')
    // The host's words do not undo the restore: a restart is all it needs.
    const rescuedPath = join(dataDir, readdirSync(dataDir).find((name) => name.startsWith('leasehold.db.rescued-'))!)
    expect(kept.read_only.detail).toContain(
      `If the file now at ${path} was put there on purpose (a backup restored), restarting the host is all it needs: ` +
        `${rescuedPath} keeps everything the host had committed, the commits made since that backup included`,
    )
    // Before any stop: a kill or a power loss now would leave the restored file alone.
    expect(existsSync(`${path}-wal`)).toBe(false)
    expect(readdirSync(dataDir).filter((name) => name.includes('log-of-lost'))).toEqual([])
    expect(lines).toContainEqual(expect.stringMatching(new RegExp(`moved ${path}-wal, the log of the database file that went, to ${path}\\.log-of-lost-`)))
    expect(lines).toContainEqual(expect.stringMatching(new RegExp(`removed .*leasehold\\.db\\.log-of-lost-.*, the log of the database file that went: its commits are in the copy written to ${path}\\.rescued-`)))
    await host.stop()
    expect(existsSync(`${path}-wal`)).toBe(false)
    expect(readFileSync(path)).toEqual(readFileSync(backup))
    // The restored file is what the start finds; the rescued copy holds the rest.
    const reopened = await aHost(dataDir)
    expect((await body(await reopened.call(`${QUEUE}/jobs?limit=100`))).jobs.map((job: { job_id: string }) => job.job_id)).toEqual([before.job_id])
    const rescued = new BetterSqlite3(join(dataDir, readdirSync(dataDir).find((name) => name.startsWith('leasehold.db.rescued-'))!), { readonly: true })
    expect(rescued.prepare('SELECT COUNT(*) FROM jobs').pluck().get()).toBe(51)
    rescued.close()
    rmSync(backup)
  })
})

describe("a database's log deleted while the host runs", () => {
  test('the host refuses writes, copies the whole log into the database file, and a restart finds every job it acknowledged', async () => {
    const host = await aHost()
    const acknowledged = [await submit(host), await submit(host)]
    rmSync(join(host.dataDir, 'leasehold.db-wal'))
    acknowledged.push(await submit(host))
    const storage = await keptStorage(host)
    expect(storage.read_only.reason).toBe('database log deleted')
    expect(storage.read_only.detail).toContain(`Everything it had committed is in ${join(host.dataDir, 'leasehold.db')}: restart the host`)
    expect(await jobsAfterRestart(host, host.dataDir)).toEqual(acknowledged.map((job) => job.job_id).sort())
  })
})

describe('a database file or its log cut short in place while the host runs', () => {
  /** The host's storage answer once it is read-only for a file cut short: within about a second of the cut. */
  const cutShortStorage = (host: TestHost) => readOnlyStorage(host, ({ reason }) => reason.endsWith('cut short'), 'the host read-only for a file cut short', 3000)

  test('a database file emptied in place (`: > leasehold.db`): the host refuses writes within a second, and says why and what to do', async () => {
    const lines: string[] = []
    const host = await aHost(undefined, (line) => lines.push(line))
    const path = join(host.dataDir, 'leasehold.db')
    await submit(host)
    truncateSync(path, 0)
    await submit(host) // acknowledged before the host can have looked
    const storage = await cutShortStorage(host)
    expect(storage.read_only.reason).toBe('database file cut short')
    expect(storage.read_only.detail).toContain(`The database file ${path} was cut short in place while the host ran: it takes no more writes`)
    expect(storage.read_only.detail).toContain(`leasehold check --data-dir ${host.dataDir}`)
    const refused = await expectError(await host.call(`${QUEUE}/jobs/submit`, { method: 'POST', json: { job_type: 'late', cost_units: 1 } }), 503, 'storage_error')
    expect(refused.detail).toContain(path)
    expect(await body(await host.call('/api/health'))).toMatchObject({ storage: 'read_only', reason: 'database file cut short' })
    expect(lines.filter((line) => line.includes('was cut short in place'))).toHaveLength(1)
  })

  test('a log emptied in place (`truncate -s 0 leasehold.db-wal`) and written past by the next commits: the host refuses writes within a second, and says why', async () => {
    const host = await aHost()
    await submit(host)
    truncateSync(join(host.dataDir, 'leasehold.db-wal'), 0)
    await submit(host)
    await submit(host)
    const storage = await cutShortStorage(host)
    expect(storage.read_only.reason).toBe('database log cut short')
    expect(storage.read_only.detail).toContain('-wal was cut short in place while the host ran: it takes no more writes')
    await expectError(await host.call(`${QUEUE}/jobs/submit`, { method: 'POST', json: { job_type: 'late', cost_units: 1 } }), 503, 'storage_error')
  })
})

describe('a host killed, and its log gone before the next start', () => {
  /** A data dir as a killed host leaves it once its log is deleted: the host's mark in the database, and no log. */
  async function killedHostsDataDir(): Promise<string> {
    const host = await aHost()
    await submit(host)
    await host.stop() // a clean stop, then the mark a killed host would not have taken away
    const db = new BetterSqlite3(join(host.dataDir, 'leasehold.db'))
    db.pragma('journal_mode = WAL')
    db.prepare("INSERT INTO settings (key, value) VALUES ('host_open', 'pid 4242 since 2026-12-01T10:00:00.000Z')").run()
    db.close() // the log goes with the close
    return host.dataDir
  }

  /** What a start logs on a file that carries a host's mark and has no log beside it. */
  const markedWithoutLogLine = (dataDir: string, mark: string) => {
    const path = join(dataDir, 'leasehold.db')
    return (
      `leasehold: ${path} carries the mark of a host that had it open (${mark}), and its log ${path}-wal is not there. ` +
      "A file restored from a backup (an older Leasehold's backups keep the mark) or copied without its log reads so, and has lost nothing. " +
      'Only a file whose host was killed and whose -wal was then deleted or moved away has lost what that host committed after its last checkpoint, if anything; ' +
      'this host has written to the file since, so that -wal cannot go back beside it (it would copy older pages over newer ones): never put a log beside this file'
    )
  }

  test('the next start says the file carries a killed host\'s mark and no log, and that only a killed host\'s -wal moved away goes back', async () => {
    const dataDir = await killedHostsDataDir()
    expect(existsSync(join(dataDir, 'leasehold.db-wal'))).toBe(false)
    const lines: string[] = []
    await aHost(dataDir, (line) => lines.push(line))
    expect(lines.filter((line) => line.includes('carries the mark of a host'))).toEqual([markedWithoutLogLine(dataDir, 'pid 4242 since 2026-12-01T10:00:00.000Z')])
  })

  test('a backup an older release made (it kept the host\'s mark), restored as operations.md says, is said to have lost nothing, and no log is sent beside it', async () => {
    const host = await aHost()
    const job = await submit(host)
    const { path: backup } = await body(await host.call('/api/storage/backup', { method: 'POST' }))
    // An older release's backup kept the mark of the host it was copied from (current ones clear it).
    const mark = `pid ${process.pid} since 2026-12-01T10:00:00.000Z`
    const old = new BetterSqlite3(backup)
    old.prepare("INSERT INTO settings (key, value) VALUES ('host_open', ?)").run(mark)
    old.close()
    await host.stop()
    // The restore: the database and any log moved away, the backup copied in its place.
    const path = join(host.dataDir, 'leasehold.db')
    for (const name of [path, `${path}-wal`, `${path}-shm`]) if (existsSync(name)) renameSync(name, `${name}.before-restore`)
    writeFileSync(path, readFileSync(backup))

    const lines: string[] = []
    const restored = await aHost(host.dataDir, (line) => lines.push(line))
    expect(lines.filter((line) => line.includes('carries the mark of a host'))).toEqual([markedWithoutLogLine(host.dataDir, mark)])
    expect((await body(await restored.call(`${QUEUE}/jobs`))).jobs.map((j: { job_id: string }) => j.job_id)).toEqual([job.job_id])
  })

  test('a host stopped cleanly leaves no mark: the next start says nothing of the kind', async () => {
    const first = await aHost()
    await submit(first)
    await first.stop()
    const lines: string[] = []
    await aHost(first.dataDir, (line) => lines.push(line))
    expect(lines.filter((line) => line.includes('carries the mark of a host'))).toEqual([])
  })
})
