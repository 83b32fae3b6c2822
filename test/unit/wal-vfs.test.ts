/**
 * The `leasehold-wal` VFS (native/wal-vfs.c) writes each commit's frames to the write-ahead log
 * in one call where SQLite makes two a frame. It may change the number of calls and nothing
 * else: what another connection reads after a commit, what the file holds after it is closed,
 * what survives a process killed while it commits, and what a disk that fails its writes does to
 * a commit are as without it.
 */
import BetterSqlite3 from 'better-sqlite3'
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { connectionName, loadWalVfs, WAL_VFS_FILE, walVfsLoadFailure } from '../../src-main/db/connection'
import { fiuControl, fiuMissing } from '../helpers/storage-faults'
import { tempDir } from './support'

const onUnix = process.platform !== 'win32'

let dir: string
let cleanup: () => void
/** The children a test started: killed after it, also when it failed or timed out (a committer left running fills the disk). */
const children = new Set<ChildProcess>()
beforeEach(() => ({ dir, cleanup } = tempDir()))
afterEach(() => {
  for (const child of children) child.kill('SIGKILL')
  children.clear()
  cleanup()
})

/** A connection as the host opens one: through leasehold-wal, the log, NORMAL durability unless FULL is asked. */
function open(path: string, cachePages = 2000, synchronous: 'NORMAL' | 'FULL' = 'NORMAL'): BetterSqlite3.Database {
  const db = new BetterSqlite3(connectionName(path))
  db.pragma('journal_mode = WAL')
  db.pragma(`synchronous = ${synchronous}`)
  db.pragma(`cache_size = ${cachePages}`)
  db.pragma('busy_timeout = 5000')
  return db
}

/**
 * The start of a child script that commits as the host does: better-sqlite3 with the extension
 * loaded, and `db` open through leasehold-wal (its name, `connectionName`, is the script's argument).
 */
const childOpens = (synchronous: 'NORMAL' | 'FULL') => `const Database = require(${JSON.stringify(createRequire(import.meta.url).resolve('better-sqlite3'))})
const probe = new Database(':memory:'); probe.loadExtension(${JSON.stringify(WAL_VFS_FILE)}); probe.close()
const db = new Database(process.argv[2])
db.pragma('journal_mode = WAL'); db.pragma('synchronous = ${synchronous}')`

describe.runIf(onUnix)('leasehold-wal', () => {
  it('is the VFS the host opens its database through where its extension is built', () => {
    expect(connectionName(join(dir, 'leasehold.db'))).toMatch(/\?vfs=leasehold-wal$/)
  })

  it.each(['NORMAL', 'FULL'] as const)('every commit, of one frame or of more than its buffer holds, is read at once by another connection of the process (synchronous=%s)', (synchronous) => {
    const path = join(dir, 'leasehold.db')
    const writer = open(path, 2000, synchronous)
    const reader = open(path)
    writer.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB); CREATE INDEX t_body ON t (body)')
    const insert = writer.prepare('INSERT INTO t (body) VALUES (?)')
    const count = reader.prepare('SELECT COUNT(*) AS n, SUM(LENGTH(body)) AS bytes FROM t')
    let rows = 0
    let bytes = 0
    // One small row (a frame or two), then ever larger commits, up to ~300 pages (past the
    // 120 KiB the VFS gathers before it writes).
    for (const [n, size] of [[1, 10], [1, 3000], [5, 3000], [40, 3000], [300, 4000], [1, 10]] as const) {
      writer.transaction(() => {
        for (let i = 0; i < n; i++) insert.run(Buffer.alloc(size, rows + i))
      })()
      rows += n
      bytes += n * size
      expect(count.get()).toEqual({ n: rows, bytes })
    }
    reader.close()
    writer.close()
    const plain = new BetterSqlite3(path, { readonly: true })
    expect(plain.pragma('integrity_check', { simple: true })).toBe('ok')
    expect(plain.prepare('SELECT COUNT(*) FROM t').pluck().get()).toBe(rows)
    plain.close()
  })

  it('a transaction larger than the page cache, which writes its own pages again, commits whole; one rolled back leaves nothing', () => {
    const path = join(dir, 'leasehold.db')
    const writer = open(path, 8) // eight pages: the transaction spills to the log, then writes the same pages again
    const reader = open(path)
    writer.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT, v INTEGER); CREATE INDEX t_k ON t (k)')
    const insert = writer.prepare('INSERT INTO t (k, v) VALUES (?, ?)')
    const bump = writer.prepare('UPDATE t SET v = v + 1 WHERE id = ?')
    writer.transaction(() => {
      for (let i = 1; i <= 3000; i++) {
        insert.run(`key-${(i * 7919) % 3001}-${'x'.repeat(60)}`, i)
        if (i % 3 === 0) bump.run(1 + ((i * 31) % i))
      }
    })()
    const sum = (db: BetterSqlite3.Database) => db.prepare<[], { n: number; total: number }>('SELECT COUNT(*) AS n, SUM(v) AS total FROM t').get()!
    const committed = sum(writer)
    expect(sum(reader)).toEqual(committed)

    writer.exec('BEGIN')
    for (let i = 0; i < 2000; i++) insert.run(`rolled-back-${i}-${'y'.repeat(60)}`, -1)
    writer.exec('ROLLBACK')
    insert.run('after', 0)
    expect(sum(reader)).toEqual({ n: committed.n + 1, total: committed.total })
    reader.close()
    writer.close()

    const plain = new BetterSqlite3(path, { readonly: true })
    expect(plain.pragma('integrity_check', { simple: true })).toBe('ok')
    expect(plain.prepare("SELECT COUNT(*) FROM t WHERE k LIKE 'rolled-back-%'").pluck().get()).toBe(0)
    plain.close()
  })

  it('a process killed while it commits keeps every commit it acknowledged', async () => {
    const path = join(dir, 'leasehold.db')
    const setup = open(path)
    setup.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT); CREATE INDEX t_body ON t (body)')
    setup.close()
    // A child that commits one to three rows a transaction and says each commit's last id once
    // SQLite has returned from it; it is killed without warning part-way.
    const child = join(dir, 'committer.cjs')
    writeFileSync(
      child,
      `${childOpens('NORMAL')}
const insert = db.prepare('INSERT INTO t (body) VALUES (?)')
for (let i = 0; ; i++) {
  let id
  db.transaction(() => { for (let r = 0; r <= i % 3; r++) id = insert.run('z'.repeat(200 + (i % 900))).lastInsertRowid })()
  process.stdout.write(id + '\\n')
}
`,
    )
    for (let cycle = 0; cycle < 3; cycle++) {
      const acknowledged = await new Promise<number>((resolve, reject) => {
        const proc = spawn(process.execPath, [child, connectionName(path)], { env: { ...process.env, SQLITE_USE_URI: '1' }, stdio: ['ignore', 'pipe', 'pipe'] })
        children.add(proc)
        let text = ''
        let stderr = ''
        const lines = 300 + cycle * 700
        proc.stdout.on('data', (chunk) => {
          text += chunk
          if (text.split('\n').length > lines) proc.kill('SIGKILL')
        })
        proc.stderr.on('data', (chunk) => (stderr += chunk))
        proc.on('exit', (_code, signal) => {
          if (signal !== 'SIGKILL') return reject(new Error(`the committer stopped on its own: ${stderr}`))
          resolve(Math.max(...text.split('\n').filter(Boolean).map(Number)))
        })
      })
      const after = open(path)
      expect(after.pragma('integrity_check', { simple: true })).toBe('ok')
      expect(Number(after.prepare('SELECT MAX(id) FROM t').pluck().get())).toBeGreaterThanOrEqual(acknowledged)
      after.close()
    }
  })

  it('a file that is not the extension (a build for another platform, a damaged copy) does not load, and the reason says so (not SQLite’s last try, which names the file with .so appended); the built one loads', () => {
    const damaged = join(dir, 'wal-vfs.so')
    writeFileSync(damaged, 'not a shared library')
    expect(loadWalVfs(damaged)).toBe('not a library this process can load')
    expect(loadWalVfs(WAL_VFS_FILE)).toBeNull()
    expect(walVfsLoadFailure()).toBeNull() // nothing for the host to log
  })

  it('with LEASEHOLD_WAL_VFS=off, the database is opened through unix-excl alone', () => {
    const script = join(dir, 'name.mts')
    writeFileSync(script, `import { connectionName } from ${JSON.stringify(join(import.meta.dirname, '../../src-main/db/connection.ts'))}\nconsole.log(connectionName('/data/leasehold.db'))\n`)
    const run = (env: Record<string, string>) => spawnSync(process.execPath, ['--import', 'tsx', script], { env: { ...process.env, ...env }, encoding: 'utf8' }).stdout.trim()
    expect(run({ LEASEHOLD_WAL_VFS: 'off' })).toBe('file:/data/leasehold.db?vfs=unix-excl')
    expect(run({})).toBe('file:/data/leasehold.db?vfs=leasehold-wal')
  })
})

/**
 * The file calls fail as a disk fails them (libfiu's POSIX wrappers, preloaded by `fiu-run -x` into
 * a child that commits; `fiu-ctrl` turns the faults on and off in it). The VFS writes a commit's
 * frames later than SQLite asked, in fewer calls: a write that fails must still fail that
 * commit, with the disk's error, and leave nothing of it for anyone to read.
 */
describe.runIf(onUnix && fiuMissing() === null)('leasehold-wal when the disk fails its writes (libfiu)', () => {
  /** Transaction `tx` writes this many rows of this many bytes: every fourth more than the VFS's buffer holds. */
  const rowsOf = (tx: number) => (tx % 4 === 3 ? 60 : 1 + (tx % 3))
  const sizeOf = (tx: number) => (tx % 4 === 3 ? 3000 : 200)

  /**
   * A child under fiu-run that opens the database through leasehold-wal and, at `run FROM TO`,
   * commits transactions FROM..TO-1, printing `ok TX` or `fail TX CODE` for each and `mismatch`
   * whenever another connection of the process does not read exactly the rows acknowledged.
   */
  function startCommitter(path: string, synchronous: 'NORMAL' | 'FULL') {
    const script = join(dir, 'committer.cjs')
    writeFileSync(
      script,
      `${childOpens(synchronous)}
db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, tx INTEGER, body BLOB); CREATE INDEX t_tx ON t (tx)')
const reader = new Database(process.argv[2])
const insert = db.prepare('INSERT INTO t (tx, body) VALUES (?, ?)')
const count = reader.prepare('SELECT COUNT(*) FROM t').pluck()
const rowsOf = ${rowsOf.toString()}, sizeOf = ${sizeOf.toString()}
let acknowledged = 0
require('node:readline').createInterface({ input: process.stdin }).on('line', (line) => {
  const [verb, from, to] = line.split(' ')
  if (verb === 'close') { reader.close(); db.close(); process.exit(0) }
  const out = []
  for (let tx = Number(from); tx < Number(to); tx++) {
    try {
      db.transaction(() => { for (let r = 0; r < rowsOf(tx); r++) insert.run(tx, Buffer.alloc(sizeOf(tx), tx)) })()
      acknowledged += rowsOf(tx)
      out.push('ok ' + tx)
    } catch (error) { out.push('fail ' + tx + ' ' + error.code) }
    let seen
    try { seen = count.get() } catch (error) { seen = error.code }
    if (seen !== acknowledged) out.push('mismatch ' + tx + ' read ' + seen + ' of ' + acknowledged)
  }
  process.stdout.write(out.join('\\n') + '\\nend\\n')
})
process.stdout.write('ready\\n')
`,
    )
    const child = spawn('fiu-run', ['-x', process.execPath, script, connectionName(path)], { env: { ...process.env, SQLITE_USE_URI: '1' }, stdio: ['pipe', 'pipe', 'inherit'] })
    children.add(child)
    const lines: string[] = []
    let heard = () => {}
    let exitCode: number | null | undefined
    createInterface({ input: child.stdout }).on('line', (line) => {
      lines.push(line)
      heard()
    })
    const exited = new Promise<number | null>((resolve) =>
      child.on('exit', (code) => {
        exitCode = code
        heard()
        resolve(code)
      }),
    )
    /** The lines up to the next `marker`; fails if the child ends first. */
    const until = async (marker: string): Promise<string[]> => {
      for (;;) {
        const at = lines.indexOf(marker)
        if (at >= 0) return lines.splice(0, at + 1).slice(0, -1)
        if (exitCode !== undefined) throw new Error(`the committer exited (${exitCode}) before '${marker}': ${lines.join(' | ')}`)
        await new Promise<void>((resolve) => (heard = resolve))
      }
    }
    return {
      run: async (from: number, to: number) => {
        child.stdin.write(`run ${from} ${to}\n`)
        return until('end')
      },
      fiu: (command: string) => fiuControl(child.pid!, command),
      ready: () => until('ready'),
      close: async () => {
        child.stdin.write('close\n')
        return exited
      },
    }
  }

  /**
   * Twenty commits, sixty more with the libfiu `point` failing at random (`odds`), ten after it
   * is off; then the file as a fresh connection reads it: sound, and holding every commit
   * acknowledged, whole, and nothing else. Returns the commits that failed (`fail TX CODE`).
   */
  async function commitThrough(point: string, odds: string, synchronous: 'NORMAL' | 'FULL'): Promise<string[]> {
    const path = join(dir, 'leasehold.db')
    const committer = startCommitter(path, synchronous)
    await committer.ready()
    const before = await committer.run(0, 20)
    committer.fiu(`enable_random name=${point},${odds}`)
    const during = await committer.run(20, 80)
    committer.fiu(`disable name=${point}`)
    const after = await committer.run(80, 90)
    expect(await committer.close()).toBe(0)

    expect([...before, ...after].every((line) => line.startsWith('ok '))).toBe(true)
    expect(during.filter((line) => line.startsWith('mismatch'))).toEqual([])
    const acknowledged = [...before, ...during, ...after].filter((line) => line.startsWith('ok ')).map((line) => Number(line.split(' ')[1]))
    const failed = during.filter((line) => line.startsWith('fail '))
    expect(acknowledged.length + failed.length).toBe(90)

    const plain = new BetterSqlite3(path, { readonly: true })
    expect(plain.pragma('integrity_check', { simple: true })).toBe('ok')
    const rows = plain.prepare<[], { tx: number; n: number; bytes: number }>('SELECT tx, COUNT(*) AS n, SUM(LENGTH(body)) AS bytes FROM t GROUP BY tx ORDER BY tx').all()
    expect(rows).toEqual(acknowledged.map((tx) => ({ tx, n: rowsOf(tx), bytes: rowsOf(tx) * sizeOf(tx) })))
    plain.close()
    return failed
  }

  it.each([
    ['an I/O error', 'failinfo=5', 'SQLITE_IOERR_WRITE', 'NORMAL'],
    ['a full disk', 'failinfo=28', 'SQLITE_FULL', 'FULL'],
  ] as const)('a commit whose write to the log meets %s fails with that error and leaves nothing; every commit acknowledged is read whole, and the file is sound', async (_fault, errno, code, synchronous) => {
    const failed = await commitThrough('posix/io/rw/pwrite', `probability=0.15,${errno}`, synchronous)
    expect(failed.length).toBeGreaterThan(0)
    expect(failed.filter((line) => !line.endsWith(` ${code}`))).toEqual([])
  })

  it('writes the disk takes only part of are finished by SQLite: every commit succeeds and is read whole', async () => {
    expect(await commitThrough('posix/io/rw/pwrite/reduce', 'probability=0.5', 'NORMAL')).toEqual([])
  })
})
