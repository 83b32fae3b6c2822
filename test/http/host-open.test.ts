/**
 * How a host opens its database: it reads no more of the file than the open needs (a check of
 * every page waits for an unclean shutdown, and runs in the background, or for `leasehold
 * check`); a start that fails on the disk says so in one line naming the file and the cause; a
 * first start that failed half-way is finished by the next.
 */
import BetterSqlite3 from 'better-sqlite3'
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync, writeSync } from 'node:fs'
import { spawn } from 'node:child_process'
import { join } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { checkIntegrityInBackground } from '../../src-main/db/integrity'
import { openDatabase } from '../../src-main/db/open'
import { startTestHost, tempDir, type TestHost } from '../helpers/host'
import { runCli, runCliAsync, startServe } from '../helpers/process'
import { failWritesToFile } from '../helpers/storage-faults'
import { submit } from './support'

let host: TestHost | undefined
const dirs: string[] = []
let held: BetterSqlite3.Database | undefined
afterEach(async () => {
  await host?.stop()
  host = undefined
  held?.close()
  held = undefined
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

function dataDir(): string {
  const dir = tempDir()
  dirs.push(dir)
  return dir
}

/** A data dir whose database holds `jobs` jobs, closed cleanly. */
async function filledDataDir(jobs: number): Promise<string> {
  const dir = dataDir()
  host = await startTestHost({ dataDir: dir })
  for (let i = 0; i < jobs; i++) await submit(host, { payload: { pad: `${i}`.repeat(200) } })
  await host.stop()
  host = undefined
  return dir
}

/**
 * Damages a page that no start reads, as a failing disk might: a table of its own is added,
 * holding one large row, and a page in the middle of that row is overwritten with garbage.
 */
function damageAPage(path: string): void {
  const marker = 'damage-here;'
  const raw = new BetterSqlite3(path)
  raw.exec('CREATE TABLE scratch (b TEXT)')
  raw.prepare('INSERT INTO scratch (b) VALUES (?)').run(marker.repeat(20_000))
  raw.close() // the last connection: the file holds everything
  const bytes = readFileSync(path)
  const first = bytes.indexOf(marker)
  const page = Math.floor((first + 120_000) / PAGE_SIZE)
  const fd = openSync(path, 'r+')
  writeSync(fd, Buffer.alloc(PAGE_SIZE, 0x5a), 0, PAGE_SIZE, page * PAGE_SIZE)
  closeSync(fd)
}

const PAGE_SIZE = 4096

/**
 * Damages a page of a table's b-tree, as a failing disk might: a table of its own is added, with
 * an index, and a page in the middle of the pages it took is overwritten with garbage. SQLite's
 * check answers rows naming that page, then fails the statement (SQLITE_CORRUPT) as it counts the
 * index's entries against the damaged table.
 */
function damageATreePage(path: string): void {
  const raw = new BetterSqlite3(path)
  const pagesBefore = raw.pragma('page_count', { simple: true }) as number
  raw.exec('CREATE TABLE scratch (id INTEGER PRIMARY KEY, b TEXT); CREATE INDEX scratch_b ON scratch (b)')
  const insert = raw.prepare('INSERT INTO scratch (b) VALUES (?)')
  raw.transaction(() => {
    for (let i = 0; i < 20_000; i++) insert.run(`row ${i} `.padEnd(100, 'x'))
  })()
  const pagesAfter = raw.pragma('page_count', { simple: true }) as number
  raw.close() // the last connection: the file holds everything
  const page = Math.floor((pagesBefore + pagesAfter) / 2) // 1-based, as SQLite numbers them
  const fd = openSync(path, 'r+')
  writeSync(fd, Buffer.alloc(PAGE_SIZE, 0x5a), 0, PAGE_SIZE, (page - 1) * PAGE_SIZE)
  closeSync(fd)
}

/** Leaves the file as a killed host leaves it: a write-ahead log with frames in it, never checkpointed. */
function leaveUnclean(path: string): void {
  held = new BetterSqlite3(path)
  held.prepare("INSERT INTO settings (key, value) VALUES ('left-unclean', '1')").run()
}

const quickCheck = (path: string) => {
  const db = new BetterSqlite3(path, { readonly: true })
  try {
    return db.pragma('quick_check', { simple: true })
  } finally {
    db.close()
  }
}

describe('opening the database at start', () => {
  test('reads the header and the schema, not every page: a file damaged past them opens, and no check runs after a clean shutdown', async () => {
    const dir = await filledDataDir(5)
    const path = join(dir, 'leasehold.db')
    damageAPage(path)
    expect(quickCheck(path)).not.toBe('ok')
    host = await startTestHost({ dataDir: dir })
    expect(host.integrityCheck).toBeNull()
  })

  test('after an unclean shutdown the file is checked in the background, and damage is logged with what to do', async () => {
    const dir = await filledDataDir(5)
    const path = join(dir, 'leasehold.db')
    damageAPage(path)
    leaveUnclean(path)
    const lines: string[] = []
    host = await startTestHost({ dataDir: dir }, { log: (line) => lines.push(line) })
    const report = await host.integrityCheck
    expect(report).toMatchObject({ path, ok: false })
    const line = lines.find((l) => /after an unclean shutdown/.test(l))!
    expect(line).toMatch(/is damaged \(integrity check: .+\): stop the host, .*restore a backup/)
    expect(line.split('\n')).toHaveLength(1)
  })

  test('after an unclean shutdown, a damaged page whose check fails after naming it is logged as damage, with what to do, not as a check that could not run', async () => {
    const dir = await filledDataDir(5)
    const path = join(dir, 'leasehold.db')
    damageATreePage(path)
    leaveUnclean(path)
    const lines: string[] = []
    host = await startTestHost({ dataDir: dir }, { log: (line) => lines.push(line) })
    const report = await host.integrityCheck
    expect(report).toMatchObject({ path, ok: false, problems: expect.arrayContaining([expect.stringMatching(/page \d+: btreeInitPage\(\) returns error code 11/)]) })
    const line = lines.find((l) => /after an unclean shutdown/.test(l))!
    expect(line).toMatch(/is damaged \(integrity check: .*btreeInitPage.*\): stop the host, .*restore a backup/)
    expect(line).not.toMatch(/could not run/)
  })

  test('after an unclean shutdown a sound file is checked and says so', async () => {
    const dir = await filledDataDir(3)
    leaveUnclean(join(dir, 'leasehold.db'))
    const lines: string[] = []
    host = await startTestHost({ dataDir: dir }, { log: (line) => lines.push(line) })
    expect(await host.integrityCheck).toMatchObject({ ok: true, problems: [] })
    expect(lines).toContainEqual(expect.stringMatching(/after an unclean shutdown, .*leasehold\.db passed the integrity check/))
  })
})

describe('leasehold check', () => {
  test('a sound file: one line saying so, exit 0; a damaged one: what is wrong and what to do, exit 1', async () => {
    const dir = await filledDataDir(5)
    const sound = runCli(['check', '--data-dir', dir])
    expect(sound.status, sound.stderr).toBe(0)
    expect(sound.stdout).toMatch(/leasehold\.db passed the integrity check/)

    damageAPage(join(dir, 'leasehold.db'))
    const damaged = runCli(['check', '--data-dir', dir])
    expect(damaged.status).toBe(1)
    expect(damaged.stdout).toMatch(/leasehold\.db is damaged \(integrity check: .+\): stop the host/)
    expect(runCli(['check', '--data-dir', dir, '--quick']).status).toBe(1)
  })

  test('a damaged page whose check fails after naming it is damage: its problems listed and what to do, exit 1, not a file that cannot be read; so too through the host that holds it', async () => {
    const dir = await filledDataDir(5)
    const path = join(dir, 'leasehold.db')
    damageATreePage(path)
    const damaged = expect.stringMatching(/page \d+: btreeInitPage\(\) returns error code 11/)
    const printed = runCli(['check', '--data-dir', dir])
    expect(printed.status, printed.stderr).toBe(1)
    expect(printed.stdout).toMatch(/leasehold\.db is damaged \(integrity check: .*btreeInitPage.*\): stop the host, .*restore a backup/)
    expect(`${printed.stdout}${printed.stderr}`).not.toMatch(/cannot be read/)
    for (const depth of [[], ['--quick']]) {
      const json = runCli(['check', '--data-dir', dir, '--json', ...depth])
      expect(json.status).toBe(1)
      expect(JSON.parse(json.stdout)).toEqual({ path, ok: false, problems: expect.arrayContaining([damaged]), ms: expect.any(Number) })
    }
    host = await startTestHost({ dataDir: dir })
    const asked = await runCliAsync(['check', '--data-dir', dir, '--json'])
    expect(asked.status).toBe(1)
    expect(JSON.parse(asked.stdout)).toEqual({ path, ok: false, problems: expect.arrayContaining([damaged]), ms: expect.any(Number) })
  })

  test('a file SQLite finds malformed before its check names anything (cut to half its length) is damaged: said so with what to do, listed as a problem in --json, exit 1; so too on the host\'s check thread', async () => {
    const dir = await filledDataDir(200)
    const path = join(dir, 'leasehold.db')
    truncateSync(path, Math.floor(statSync(path).size / 2))
    const printed = runCli(['check', '--data-dir', dir])
    expect(printed.status, printed.stderr).toBe(1)
    expect(printed.stdout).toMatch(/leasehold\.db is damaged \(integrity check: database disk image is malformed \(SQLITE_CORRUPT\)\): stop the host, keep a copy of the file with its -wal, and restore a backup/)
    expect(`${printed.stdout}${printed.stderr}`).not.toMatch(/cannot be read/)
    const malformed = [expect.stringMatching(/^database disk image is malformed \(SQLITE_CORRUPT/)]
    const json = runCli(['check', '--data-dir', dir, '--json', '--quick'])
    expect(json.status).toBe(1)
    expect(JSON.parse(json.stdout)).toEqual({ path, ok: false, problems: malformed, ms: expect.any(Number) })
    await expect(checkIntegrityInBackground(path, { depth: 'full' })).resolves.toEqual({ path, ok: false, problems: malformed, ms: expect.any(Number) })
  })

  test('runs while the host serves: the host that holds the file checks it on a thread of its own', async () => {
    const dir = dataDir()
    host = await startTestHost({ dataDir: dir })
    await submit(host)
    const result = await runCliAsync(['check', '--data-dir', dir, '--json', '--quick'])
    expect(result.status, result.stderr).toBe(0)
    expect(JSON.parse(result.stdout)).toMatchObject({ path: join(dir, 'leasehold.db'), ok: true, problems: [] })
    const asked = await host.call('/api/storage/integrity?depth=quick')
    expect(asked.status).toBe(200)
  })

  test('a host that holds the file and says where it listens a moment after the check starts (a host starting) is waited for, as every client command waits', async () => {
    const dir = dataDir()
    host = await startTestHost({ dataDir: dir })
    const hostFile = join(dir, 'host.json')
    const kept = readFileSync(hostFile)
    rmSync(hostFile)
    try {
      const running = runCliAsync(['check', '--data-dir', dir, '--json', '--quick'])
      await new Promise((resolve) => setTimeout(resolve, 1000))
      writeFileSync(hostFile, kept)
      const result = await running
      expect(result.status, result.stderr).toBe(0)
      expect(JSON.parse(result.stdout)).toMatchObject({ path: join(dir, 'leasehold.db'), ok: true })
    } finally {
      writeFileSync(hostFile, kept)
    }
  })

  test("a held file whose data dir's host.json names a live process other than the lock's holder is said so after 5 s, not to have its host.json missing", async () => {
    const dir = dataDir()
    host = await startTestHost({ dataDir: dir })
    const hostFile = join(dir, 'host.json')
    const other = spawn(process.execPath, ['-e', 'setInterval(() => {}, 60_000)'], { stdio: 'ignore' })
    try {
      writeFileSync(hostFile, JSON.stringify({ ...JSON.parse(readFileSync(hostFile, 'utf8')), pid: other.pid }))
      const result = await runCliAsync(['check', '--data-dir', dir, '--quick'])
      expect(result.status).toBe(1)
      expect(result.stderr.trim().split('\n')).toEqual([
        `leasehold: ${join(dir, 'leasehold.db')} is held by a running host that has not said where it listens in 5 s (the data dir's host.json names pid ${other.pid}, which no longer holds it: ` +
          'the holder could not write its own, or it is not a Leasehold host): give its --url and --token to check through it',
      ])
    } finally {
      other.kill()
    }
  })

  test("a held file whose data dir's host.json stays empty (a host that could not write it on a full disk) is said to have it empty after 5 s, not missing", async () => {
    const dir = dataDir()
    host = await startTestHost({ dataDir: dir })
    const hostFile = join(dir, 'host.json')
    const kept = readFileSync(hostFile)
    writeFileSync(hostFile, '')
    try {
      const result = await runCliAsync(['check', '--data-dir', dir, '--quick'])
      expect(result.status).toBe(1)
      expect(result.stderr.trim().split('\n')).toEqual([
        `leasehold: ${join(dir, 'leasehold.db')} is held by a running host, whose host.json is empty after 5 s (it could not write it, or it is not a Leasehold host): give its --url and --token to check through it`,
      ])
    } finally {
      writeFileSync(hostFile, kept)
    }
  })

  test('a held file is checked only by the host that serves it: LEASEHOLD_URL naming another host is one line saying so, exit 1', async () => {
    const dir = dataDir()
    host = await startTestHost({ dataDir: dir })
    const other = await startTestHost({ dataDir: dataDir() })
    try {
      const result = await runCliAsync(['check', '--data-dir', dir, '--quick'], { LEASEHOLD_URL: other.url, LEASEHOLD_TOKEN: other.token })
      expect(result.status).toBe(1)
      expect(result.stderr.trim().split('\n')).toEqual([
        `leasehold: ${join(dir, 'leasehold.db')} is held by a running host, but the host at ${other.url} serves ${join(other.dataDir, 'leasehold.db')}: give the --url and --token of the host that serves ${join(dir, 'leasehold.db')}`,
      ])
    } finally {
      await other.dispose()
    }
  })

  test('a data dir with no database is one line, exit 1', () => {
    const result = runCli(['check', '--data-dir', dataDir()])
    expect(result.status).toBe(1)
    expect(result.stderr.trim().split('\n')).toHaveLength(1)
    expect(result.stderr).toMatch(/there is no database at/)
  })
})

describe('the database file is the running host’s own', () => {
  test('another process cannot read it while a host serves (SQLITE_BUSY at once), and can once the host stops; the log’s index is in the host’s memory, no -shm file', async (context) => {
    if (process.platform === 'win32') return context.skip('Windows names the file by its path, with SQLite’s default VFS')
    const dir = dataDir()
    const path = join(dir, 'leasehold.db')
    const served = await startServe(['--data-dir', dir, '--port', '0'])
    try {
      expect(existsSync(`${path}-wal`)).toBe(true)
      expect(existsSync(`${path}-shm`)).toBe(false)
      const other = new BetterSqlite3(path, { readonly: true, timeout: 0 })
      try {
        expect(() => other.prepare('SELECT COUNT(*) FROM jobs').get()).toThrow(expect.objectContaining({ code: 'SQLITE_BUSY' }))
      } finally {
        other.close()
      }
    } finally {
      served.child.kill('SIGTERM')
      await served.exited
    }
    const after = new BetterSqlite3(path, { readonly: true, timeout: 0 })
    expect(after.prepare('SELECT COUNT(*) FROM jobs').pluck().get()).toBe(0)
    after.close()
  })

  test('`leasehold serve` writes through the leasehold-wal VFS where its extension is built, and through unix-excl alone with LEASEHOLD_WAL_VFS=off', async (context) => {
    if (process.platform !== 'linux') return context.skip('read from /proc/<pid>/maps, which Linux has')
    const mapsExtension = async (env: Record<string, string>) => {
      const served = await startServe(['--data-dir', dataDir(), '--port', '0', '--workers', '0'], env)
      try {
        return readFileSync(`/proc/${served.child.pid}/maps`, 'utf8').includes('wal-vfs.so')
      } finally {
        served.child.kill('SIGTERM')
        await served.exited
      }
    }
    expect(await mapsExtension({})).toBe(true)
    expect(await mapsExtension({ LEASEHOLD_WAL_VFS: 'off' })).toBe(false)
  })

  test('a start while another process reads the file waits for it a while, then says which file is held, in one line', async (context) => {
    if (process.platform === 'win32') return context.skip('Windows names the file by its path, with SQLite’s default VFS: readers beside the host')
    const dir = await filledDataDir(1)
    const path = join(dir, 'leasehold.db')
    const reader = new BetterSqlite3(path, { readonly: true })
    reader.exec('BEGIN')
    reader.prepare('SELECT COUNT(*) FROM jobs').get() // a read lock held, as a check in progress holds it
    try {
      const result = await runCliAsync(['serve', '--data-dir', dir, '--port', '0', '--workers', '0'])
      expect(result.status, result.stderr).toBe(1)
      expect(result.stderr.trim().split('\n')).toHaveLength(1)
      expect(result.stderr).toContain(`another process has ${path} open`)
    } finally {
      reader.exec('COMMIT')
      reader.close()
    }
  })

  test('a process whose SQLite takes no URIs (SQLITE_USE_URI=0) names the file by its path: the default VFS, its -shm file, readers beside it', async () => {
    const dir = dataDir()
    const path = join(dir, 'leasehold.db')
    const served = await startServe(['--data-dir', dir, '--port', '0'], { SQLITE_USE_URI: '0' })
    try {
      expect(existsSync(`${path}-shm`)).toBe(true)
      const other = new BetterSqlite3(path, { readonly: true, timeout: 0 })
      expect(other.prepare('SELECT COUNT(*) FROM jobs').pluck().get()).toBe(0)
      other.close()
      expect(readdirSync(process.cwd()).filter((name) => name.startsWith('file:'))).toEqual([]) // no file named after the URI
    } finally {
      served.child.kill('SIGTERM')
      await served.exited
    }
  })
})

describe('a start that fails on the disk', () => {
  test.each(['-wal', '-shm'])('when only the %s file cannot be opened, the one line names that file and why; the database is untouched', async (suffix) => {
    const dir = await filledDataDir(1)
    const path = join(dir, 'leasehold.db')
    mkdirSync(`${path}${suffix}`) // a directory where SQLite opens a file: EISDIR, whoever runs the test
    const result = runCli(['serve', '--data-dir', dir, '--port', '0', '--workers', '0'])
    expect(result.status, result.stderr).toBe(1)
    expect(result.stderr.trim().split('\n'), result.stderr).toHaveLength(1)
    expect(result.stderr).toContain(`cannot open ${path}${suffix} (it is a directory, not a regular file)`)
    expect(result.stderr).not.toMatch(/not a readable SQLite database/)
  })

  test("a Leasehold database cut short is named as damaged, with how to tell that from a failing disk and what to keep first; another file that is no database is still named so", async () => {
    const dir = await filledDataDir(200)
    const path = join(dir, 'leasehold.db')
    truncateSync(path, 4096) // its first page kept: SQLite's header, Leasehold's mark; the schema's other pages gone
    const result = runCli(['serve', '--data-dir', dir, '--port', '0', '--workers', '0'])
    expect(result.status, result.stderr).toBe(1)
    expect(result.stderr.trim().split('\n'), result.stderr).toHaveLength(1)
    expect(result.stderr).toContain(`a read of the database in the data dir ${dir} failed (database disk image is malformed): the file is damaged or its disk is failing`)
    expect(result.stderr).toContain(`leasehold check --data-dir ${dir}`)
    expect(result.stderr).toContain('keep a copy of the file with its -wal before anything else')
    expect(result.stderr).not.toMatch(/not a readable SQLite database/)
    writeFileSync(path, Buffer.alloc(8192, 7)) // not SQLite at all
    expect(runCli(['serve', '--data-dir', dir, '--port', '0', '--workers', '0']).stderr).toMatch(/leasehold\.db is not a readable SQLite database/)
  })

  test('with writes failing at the first start, the message is one line naming the cause, not a statement', () => {
    const path = join(dataDir(), 'leasehold.db')
    const undo = failWritesToFile(path, 'SQLITE_IOERR_WRITE', /CREATE TABLE `jobs`/)
    let message = ''
    try {
      openDatabase({ path })
    } catch (error) {
      message = (error as Error).message
    } finally {
      undo()
    }
    expect(message).toMatch(/^cannot open .*leasehold\.db: the disk failed a write \(SQLITE_IOERR_WRITE: disk I\/O error\); the next start finishes setting the file up$/)
  })

  test('a first start that failed half-way (only the table of migrations made) is finished by the next start', async () => {
    const dir = dataDir()
    const path = join(dir, 'leasehold.db')
    const undo = failWritesToFile(path, 'SQLITE_IOERR_WRITE', /CREATE TABLE `jobs`/)
    expect(() => openDatabase({ path })).toThrow(/the disk failed a write/)
    undo()
    const raw = new BetterSqlite3(path, { readonly: true })
    expect(raw.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck().all()).toEqual(['__drizzle_migrations'])
    raw.close()

    host = await startTestHost({ dataDir: dir })
    expect((await submit(host)).state).toBe('QUEUED')
  })

  test('so is a file a failed first start left unmarked, holding only an empty table of migrations', async () => {
    const dir = dataDir()
    const raw = new BetterSqlite3(join(dir, 'leasehold.db'))
    raw.exec('CREATE TABLE "__drizzle_migrations" (id INTEGER PRIMARY KEY, hash text NOT NULL, created_at numeric)')
    raw.close()
    host = await startTestHost({ dataDir: dir })
    expect((await submit(host)).state).toBe('QUEUED')
  })
})
