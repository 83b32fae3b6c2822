/**
 * Incremental auto-vacuum (docs/retention.md): a new database file gets it before its first
 * table, and a file made before Leasehold had retention is converted once when it is opened, by
 * a VACUUM. A conversion the disk has no room for, or one that fails part way, leaves the file as
 * it was, and the database still opens.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import BetterSqlite3 from 'better-sqlite3'
import { execFileSync, spawn } from 'node:child_process'
import { copyFileSync, mkdirSync, readFileSync, rmSync, statfsSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { openDatabase } from '../../src-main/db/open'
import { aJob } from '../helpers/engine'
import { BIN } from '../helpers/process'
import { openFileEngine, tempDir } from './support'

let dir: string
let cleanup: () => void
beforeEach(() => ({ dir, cleanup } = tempDir()))
afterEach(() => cleanup())

const AUTO_VACUUM = { none: 0, incremental: 2 }

/**
 * A Leasehold database as a release without retention left it: migrated, `count` jobs of about
 * 1 KB, and auto_vacuum NONE (the default of every file made before). Returns the job ids.
 */
function oldStyleFile(path: string, count: number): string[] {
  const { engine, sqlite } = openFileEngine(path)
  const ids: string[] = []
  for (let i = 0; i < count; i += 500) {
    for (const result of engine.submitMany(Array.from({ length: Math.min(500, count - i) }, (_, k) => aJob({ payload: { n: i + k, pad: 'x'.repeat(1000) } })))) {
      if (result.ok) ids.push(result.value.job.id)
    }
  }
  sqlite.pragma('auto_vacuum = NONE')
  sqlite.exec('VACUUM')
  sqlite.pragma('wal_checkpoint(TRUNCATE)')
  expect(sqlite.pragma('auto_vacuum', { simple: true })).toBe(AUTO_VACUUM.none)
  sqlite.close()
  return ids
}

/** What a test checks survived: the settings and every job, read with plain SQLite. */
function inspect(path: string) {
  const raw = new BetterSqlite3(path, { readonly: true })
  try {
    return {
      autoVacuum: raw.pragma('auto_vacuum', { simple: true }),
      integrity: raw.pragma('integrity_check', { simple: true }),
      applicationId: raw.pragma('application_id', { simple: true }),
      journalMode: raw.pragma('journal_mode', { simple: true }),
      jobs: raw.prepare('SELECT id, payload FROM jobs ORDER BY seq').all() as { id: string; payload: string }[],
    }
  } finally {
    raw.close()
  }
}

describe('a new database file', () => {
  it('is in incremental auto-vacuum from its first table', () => {
    const path = join(dir, 'new.db')
    const { sqlite } = openDatabase({ path })
    expect(sqlite.pragma('auto_vacuum', { simple: true })).toBe(AUTO_VACUUM.incremental)
    expect(sqlite.pragma('journal_mode', { simple: true })).toBe('wal')
    sqlite.close()
  })

  it('an empty file found in its place gets it too', () => {
    const path = join(dir, 'empty.db')
    writeFileSync(path, '')
    const lines: string[] = []
    const { sqlite } = openDatabase({ path, log: (line) => lines.push(line) })
    expect(sqlite.pragma('auto_vacuum', { simple: true })).toBe(AUTO_VACUUM.incremental)
    sqlite.close()
    expect(lines).toEqual([]) // nothing to convert: nothing to say
  })
})

describe('a file made before retention', () => {
  it('is converted once when opened, with a line in the log; its data, marks and WAL mode are kept', () => {
    const path = join(dir, 'leasehold.db')
    const ids = oldStyleFile(path, 1200)
    const before = inspect(path)
    const lines: string[] = []
    const { sqlite } = openDatabase({ path, log: (line) => lines.push(line) })
    expect(sqlite.pragma('auto_vacuum', { simple: true })).toBe(AUTO_VACUUM.incremental)
    sqlite.close()
    expect(lines).toHaveLength(2)
    expect(lines[0]).toMatch(/^leasehold: converting .*leasehold\.db \(\d+\.\d MB\) to incremental vacuum, once/)
    expect(lines[1]).toMatch(/converted in \d+\.\d s/)
    const after = inspect(path)
    expect(after).toEqual({ ...before, autoVacuum: AUTO_VACUUM.incremental })
    expect(after.jobs.map((j) => j.id)).toEqual(ids)
    expect(after.integrity).toBe('ok')
    expect(after.journalMode).toBe('wal')

    // Once: the next open says nothing and changes nothing.
    const again: string[] = []
    openDatabase({ path, log: (line) => again.push(line) }).sqlite.close()
    expect(again).toEqual([])
  })

  it('a conversion that fails part way (a write the file system refuses) leaves the file as it was, and the host starts', async () => {
    const dataDir = join(dir, 'data')
    mkdirSync(dataDir)
    const path = join(dataDir, 'leasehold.db')
    oldStyleFile(path, 3000)
    const before = inspect(path)
    const bytes = readFileSync(path)
    // No file may grow past half the database's size: the VACUUM's copy cannot be written, the
    // disk itself has room (so the free-space check lets it try).
    const limitKb = Math.floor(statSync(path).size / 1024 / 2)
    const child = spawn('bash', ['-c', `ulimit -f ${limitKb} && exec "$0" "$@"`, process.execPath, BIN, 'serve', '--data-dir', dataDir, '--port', '0', '--workers', '0'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve))
    const started = await Promise.race([
      new Promise<boolean>((resolve) => {
        const check = setInterval(() => {
          if (/leasehold listening on/.test(stdout)) {
            clearInterval(check)
            resolve(true)
          }
        }, 20)
        void exited.then(() => clearInterval(check))
      }),
      exited.then(() => false),
    ])
    expect(started, stderr).toBe(true)
    expect(stderr).toMatch(/converting .* to incremental vacuum failed \(.+\); the file is as it was/)
    // It serves (and, once it has answered, its SIGTERM handler is surely in place).
    const url = /leasehold listening on (\S+)/.exec(stdout)![1]!
    expect((await fetch(`${url}/api/health`)).status).toBe(200)
    child.kill('SIGTERM')
    expect(await exited).toBe(0)
    expect(inspect(path)).toEqual(before)
    expect(readFileSync(path).subarray(0, 100)).toEqual(bytes.subarray(0, 100)) // the header: still auto_vacuum NONE
  }, 60_000)
})

/**
 * A real disk without room for the conversion: the data dir on a small tmpfs. Needs root and a
 * kernel that lets this process mount; elsewhere the test says why it skipped.
 */
describe('a disk without room for the conversion (tmpfs)', () => {
  let mountPoint: string | undefined
  afterEach(() => {
    if (!mountPoint) return
    try {
      execFileSync('umount', [mountPoint], { stdio: 'ignore' })
    } catch {
      // already gone
    }
    rmSync(mountPoint, { recursive: true, force: true })
    mountPoint = undefined
  })

  it('the file is left as it was, the reason is logged, and it opens', (context) => {
    if (process.platform !== 'linux' || process.getuid?.() !== 0) return context.skip('it needs root on Linux to mount a tmpfs')
    mountPoint = join(dir, 'mnt')
    mkdirSync(mountPoint)
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=8m', 'tmpfs', mountPoint], { stdio: 'pipe' })
    } catch (error) {
      rmSync(mountPoint, { recursive: true, force: true })
      mountPoint = undefined
      return context.skip(`mount -t tmpfs is not permitted here (${(error as Error).message.split('\n')[0]})`)
    }
    const made = join(dir, 'made.db')
    const ids = oldStyleFile(made, 1000)
    const path = join(mountPoint, 'leasehold.db')
    copyFileSync(made, path)
    const size = statSync(path).size
    // Fill the disk until one and a half times the file's size is free: room to open and write, not to convert.
    const free = () => statfsSync(mountPoint!).bavail * statfsSync(mountPoint!).bsize
    writeFileSync(join(mountPoint, 'filler'), Buffer.alloc(free() - Math.floor(1.5 * size), 1))
    expect(free()).toBeLessThan(2 * size)
    const before = inspect(path)
    const bytes = readFileSync(path)
    const lines: string[] = []
    const { sqlite } = openDatabase({ path, log: (line) => lines.push(line) })
    expect(sqlite.prepare('SELECT COUNT(*) FROM jobs').pluck().get()).toBe(ids.length)
    sqlite.close()
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/was not converted to incremental vacuum: that needs \d+\.\d MB free on its disk and \d+\.\d MB are/)
    expect(inspect(path)).toEqual(before)
    expect(readFileSync(path).equals(bytes)).toBe(true)
  })
})
