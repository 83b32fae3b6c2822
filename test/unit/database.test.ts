import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import BetterSqlite3 from 'better-sqlite3'
import { execFileSync } from 'node:child_process'
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { DatabaseOpenError, DEFAULT_MIGRATIONS_FOLDER, openDatabase } from '../../src-main/db/open'
import { aJob, setup, T0 } from '../helpers/engine'
import { HOUR, MINUTE } from '../../src-main/engine/rules/clock'
import { newId } from '../../src-main/engine/store/ids'
import { leaseOrFail, openFileEngine, tempDir } from './support'
import { refuseWrites } from '../helpers/storage-faults'

let dir: string
let cleanup: () => void
beforeEach(() => ({ dir, cleanup } = tempDir()))
afterEach(() => cleanup())

function openError(path: string): DatabaseOpenError {
  try {
    const { sqlite } = openDatabase({ path })
    sqlite.close()
  } catch (error) {
    expect(error).toBeInstanceOf(DatabaseOpenError)
    return error as DatabaseOpenError
  }
  throw new Error(`expected ${path} to be refused`)
}

function newestJournalEntry(): number {
  const journal = JSON.parse(readFileSync(join(DEFAULT_MIGRATIONS_FOLDER, 'meta', '_journal.json'), 'utf8')) as { entries: { when: number }[] }
  return Math.max(...journal.entries.map((e) => e.when))
}

describe('opening the database file', () => {
  it('a new file is created, migrated and marked as Leasehold\'s', () => {
    const path = join(dir, 'new.db')
    const { sqlite } = openDatabase({ path })
    const tables = sqlite.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck().all()
    expect(tables).toEqual(expect.arrayContaining(['jobs', 'leases', 'events', 'stats_samples', 'settings']))
    expect(sqlite.pragma('application_id', { simple: true })).toBe(0x4c534844)
    expect(sqlite.pragma('journal_mode', { simple: true })).toBe('wal')
    expect(sqlite.pragma('foreign_keys', { simple: true })).toBe(1)
    sqlite.close()
    expect(existsSync(path)).toBe(true)
  })

  it('reopening an existing Leasehold file keeps its data', () => {
    const path = join(dir, 'leasehold.db')
    const first = openFileEngine(path)
    const { job } = first.engine.submit(aJob({ payload: { keep: true }, idempotency_key: 'k' }))
    const { lease } = leaseOrFail(first.engine, 'w')
    first.sqlite.close()

    const second = openFileEngine(path, { clock: first.clock })
    expect(second.engine.getJob(job.id)).toMatchObject({ state: 'LEASED', attempts: 1, lease_id: lease.id })
    expect(second.engine.getJob(job.id).payload).toEqual({ keep: true })
    expect(second.engine.getLease(lease.id)).toMatchObject({ state: 'ACTIVE', fence: lease.fence, token: lease.token })
    expect(second.engine.submit(aJob({ idempotency_key: 'k' })).duplicate).toBe(true)
    // Fences keep increasing across restarts.
    second.engine.submit(aJob())
    expect(leaseOrFail(second.engine, 'w2').lease.fence).toBeGreaterThan(lease.fence)
    second.sqlite.close()
  })

  it('a file that lacks a table its recorded migrations made (dropped by hand) is refused at the start, naming the table, rather than served until a request needs it', () => {
    const path = join(dir, 'leasehold.db')
    openDatabase({ path }).sqlite.close()
    const other = new BetterSqlite3(path)
    other.exec('DROP TABLE file_handovers')
    other.close()
    expect(() => openDatabase({ path })).toThrow(new DatabaseOpenError(`${path} lacks the table file_handovers that its migrations made: the file was changed outside Leasehold; restore a backup`))
  })

  it('a file written by a newer version refuses to open with a clear message and is left untouched', () => {
    const path = join(dir, 'newer.db')
    const { sqlite } = openDatabase({ path })
    sqlite.prepare('INSERT INTO __drizzle_migrations (hash, created_at) VALUES (?, ?)').run('from-the-future', newestJournalEntry() + 1000)
    sqlite.close()
    const bytes = readFileSync(path)

    const error = openError(path)
    expect(error.message).toContain(path)
    expect(error.message).toMatch(/newer version of Leasehold/)
    expect(error.message).toMatch(/upgrade/i)
    expect(readFileSync(path).equals(bytes)).toBe(true)

    // Nothing was migrated or dropped: the future migration's row is still there.
    const raw = new BetterSqlite3(path, { readonly: true })
    expect(raw.prepare('SELECT COUNT(*) FROM __drizzle_migrations WHERE hash = ?').pluck().get('from-the-future')).toBe(1)
    raw.close()
  })

  it('a refused start leaves the file and its write-ahead log byte for byte: the log is not checkpointed into the file, nor deleted', () => {
    // A crash image: the file and its -wal copied while a connection still has them open, the
    // log not yet checkpointed. Then marked as written by a newer version, so the start refuses.
    const live = join(dir, 'live.db')
    const writer = openDatabase({ path: live }).sqlite
    writer.pragma('wal_autocheckpoint = 0')
    writer.prepare('INSERT INTO __drizzle_migrations (hash, created_at) VALUES (?, ?)').run('from-the-future', newestJournalEntry() + 1000)
    const path = join(dir, 'crashed.db')
    copyFileSync(live, path)
    copyFileSync(`${live}-wal`, `${path}-wal`)
    writer.close()
    const file = readFileSync(path)
    const log = readFileSync(`${path}-wal`)
    expect(log.length).toBeGreaterThan(0)

    expect(openError(path).message).toMatch(/newer version of Leasehold/)
    expect(readFileSync(path).equals(file)).toBe(true)
    expect(readFileSync(`${path}-wal`).equals(log)).toBe(true)
    expect(existsSync(`${path}-shm`)).toBe(false)
  })

  it.each([
    [
      'written by a newer version',
      (path: string) => {
        const { sqlite } = openDatabase({ path })
        sqlite.prepare('INSERT INTO __drizzle_migrations (hash, created_at) VALUES (?, ?)').run('from-the-future', newestJournalEntry() + 1000)
        sqlite.close()
      },
      /newer version of Leasehold/,
    ],
    [
      'of another program, in WAL mode',
      (path: string) => {
        const other = new BetterSqlite3(path)
        other.pragma('journal_mode = WAL')
        other.exec('CREATE TABLE notes (body TEXT)')
        other.close()
      },
      /not a Leasehold database/,
    ],
  ])('a refused start leaves the folder as it found it: no -wal or -shm of its making beside a file %s', (_, make, refusal) => {
    const path = join(dir, 'leasehold.db')
    make(path)
    expect(readdirSync(dir)).toEqual(['leasehold.db'])
    const bytes = readFileSync(path)

    expect(openError(path).message).toMatch(refusal)
    expect(readdirSync(dir)).toEqual(['leasehold.db'])
    expect(readFileSync(path).equals(bytes)).toBe(true)
  })

  it('a file that cannot be opened for writing is refused at the start, naming why, and left untouched', (context) => {
    const path = join(dir, 'leasehold.db')
    openDatabase({ path }).sqlite.close()
    const bytes = readFileSync(path)
    const refused = refuseWrites(path)
    if ('cannot' in refused) return context.skip(refused.cannot)
    try {
      const error = openError(path)
      expect(error.message).toMatch(/cannot open .*leasehold\.db for writing \((EROFS|EACCES)/)
      expect(error.message).toMatch(/untouched/)
    } finally {
      refused.undo()
    }
    expect(readFileSync(path).equals(bytes)).toBe(true)
  })

  it('a first start on a disk too full for the tables says the disk is full, not the rollback SQLite had already made', (context) => {
    if (process.platform !== 'linux' || process.getuid?.() !== 0) return context.skip('it needs root on Linux to mount a small tmpfs')
    const small = join(dir, 'small')
    mkdirSync(small)
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=60k', 'tmpfs', small], { stdio: 'pipe' })
    } catch (error) {
      return context.skip(`mount -t tmpfs is not permitted here (${(error as Error).message.split('\n')[0]})`)
    }
    try {
      const error = openError(join(small, 'leasehold.db'))
      expect(error.message).toMatch(/the disk is full \(\d+ KiB free\): a write failed while the tables were being made/)
      expect(error.message).not.toMatch(/cannot rollback/)
    } finally {
      execFileSync('umount', [small], { stdio: 'ignore' })
    }
  })

  it('a -wal that is a symbolic link to nothing is named as such', () => {
    const path = join(dir, 'leasehold.db')
    openDatabase({ path }).sqlite.close()
    symlinkSync(join(dir, 'gone', 'wal'), `${path}-wal`)
    expect(openError(path).message).toMatch(/cannot open .*leasehold\.db-wal \(a symbolic link to .*gone\/wal, which does not exist\)/)
  })

  it('a -wal in the way of a new database is named as such at the first start, and the database file made is private', () => {
    const path = join(dir, 'leasehold.db')
    symlinkSync(join(dir, 'gone', 'wal'), `${path}-wal`)
    expect(openError(path).message).toMatch(/cannot open .*leasehold\.db-wal \(a symbolic link to .*gone\/wal, which does not exist\)/)
    rmSync(`${path}-wal`)
    openDatabase({ path }).sqlite.close()
    expect(statSync(path).mode & 0o777).toBe(0o600)
  })

  it('a database path that is a symbolic link to nothing is named as such', () => {
    const path = join(dir, 'leasehold.db')
    symlinkSync(join(dir, 'gone', 'db'), path)
    expect(openError(path).message).toMatch(/cannot create .*leasehold\.db: it is a symbolic link to .*gone\/db, which does not exist/)
  })

  it('a folder where the file should be is refused, naming the OS reason', () => {
    const path = join(dir, 'leasehold.db')
    mkdirSync(path)
    expect(openError(path).message).toMatch(/cannot open .*leasehold\.db for writing \(it is a directory, not a regular file\)/)
  })

  it('a non-SQLite (garbage) file refuses and is left byte-for-byte untouched', () => {
    const path = join(dir, 'garbage.db')
    const garbage = Buffer.alloc(8192)
    for (let i = 0; i < garbage.length; i++) garbage[i] = (i * 7919 + 13) % 256
    writeFileSync(path, garbage)

    const error = openError(path)
    expect(error.message).toContain(path)
    expect(error.message).toMatch(/not a readable SQLite database|damaged/)
    expect(error.message).toMatch(/untouched/)
    expect(readFileSync(path).equals(garbage)).toBe(true)
  })

  it('a text file refuses and is left byte-for-byte untouched', () => {
    const path = join(dir, 'notes.db')
    const text = 'these are my notes, not a database\n'.repeat(200)
    writeFileSync(path, text)
    openError(path)
    expect(readFileSync(path, 'utf8')).toBe(text)
  })

  it('another program\'s SQLite file refuses and is left untouched', () => {
    const path = join(dir, 'other.db')
    const other = new BetterSqlite3(path)
    other.exec("CREATE TABLE contacts (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO contacts (name) VALUES ('Ada')")
    other.close()
    const bytes = readFileSync(path)

    const error = openError(path)
    expect(error.message).toContain(path)
    expect(error.message).toMatch(/not a Leasehold database/)
    expect(readFileSync(path).equals(bytes)).toBe(true)
    const raw = new BetterSqlite3(path, { readonly: true })
    const tables = raw.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck().all()
    expect(tables).toEqual(['contacts'])
    raw.close()
  })

  it('a file marked with another program\'s application_id is refused even with no tables, and left untouched', () => {
    const path = join(dir, 'other-empty.db')
    const other = new BetterSqlite3(path)
    other.pragma('application_id = 0x12345678')
    other.close()
    const bytes = readFileSync(path)

    const error = openError(path)
    expect(error.message).toMatch(/not a Leasehold database/)
    expect(readFileSync(path).equals(bytes)).toBe(true)
    const raw = new BetterSqlite3(path, { readonly: true })
    expect(raw.pragma('application_id', { simple: true })).toBe(0x12345678)
    expect(raw.prepare("SELECT COUNT(*) FROM sqlite_master").pluck().get()).toBe(0)
    raw.close()
  })

  it('an unmarked SQLite file with no tables is adopted as a new database', () => {
    const path = join(dir, 'unmarked.db')
    const fresh = new BetterSqlite3(path)
    fresh.pragma('user_version = 0') // a valid, empty SQLite file with application_id 0
    fresh.exec('CREATE TABLE t (x); DROP TABLE t')
    fresh.close()
    const { sqlite } = openDatabase({ path })
    expect(sqlite.pragma('application_id', { simple: true })).toBe(0x4c534844)
    sqlite.close()
  })

  it('an empty file is adopted as a new database', () => {
    const path = join(dir, 'empty.db')
    writeFileSync(path, '')
    const { sqlite } = openDatabase({ path })
    expect(sqlite.prepare("SELECT 1 FROM sqlite_master WHERE name = 'jobs'").get()).toBeDefined()
    sqlite.close()
  })
})

describe('migrations', () => {
  /** A migrations folder holding only the first `count` migrations, as an older release shipped them. */
  function olderMigrations(count: number): string {
    const folder = join(dir, `migrations-${count}`)
    mkdirSync(join(folder, 'meta'), { recursive: true })
    const journal = JSON.parse(readFileSync(join(DEFAULT_MIGRATIONS_FOLDER, 'meta', '_journal.json'), 'utf8')) as { entries: { tag: string }[] }
    const entries = journal.entries.slice(0, count)
    writeFileSync(join(folder, 'meta', '_journal.json'), JSON.stringify({ ...journal, entries }))
    for (const entry of entries) copyFileSync(join(DEFAULT_MIGRATIONS_FOLDER, `${entry.tag}.sql`), join(folder, `${entry.tag}.sql`))
    return folder
  }

  /** Every migration's statements, in the order a start applies them. */
  /** The tags of this version's migrations, oldest first: the schemas the log names. */
  function journalTags(): string[] {
    const journal = JSON.parse(readFileSync(join(DEFAULT_MIGRATIONS_FOLDER, 'meta', '_journal.json'), 'utf8')) as { entries: { tag: string }[] }
    return journal.entries.map(({ tag }) => tag)
  }

  function migrationStatements(): { tag: string; statement: string }[] {
    const journal = JSON.parse(readFileSync(join(DEFAULT_MIGRATIONS_FOLDER, 'meta', '_journal.json'), 'utf8')) as { entries: { tag: string }[] }
    return journal.entries.flatMap(({ tag }) =>
      readFileSync(join(DEFAULT_MIGRATIONS_FOLDER, `${tag}.sql`), 'utf8')
        .split('--> statement-breakpoint')
        .map((statement) => ({ tag, statement: statement.trim() }))
        .filter(({ statement }) => statement !== ''),
    )
  }

  it('no migration reads a table once for each row of another: each subquery and join finds its rows by an index, as the schema stands at that migration', () => {
    const sqlite = new BetterSqlite3(':memory:')
    const slow: string[] = []
    for (const { tag, statement } of migrationStatements()) {
      if (/^(?:--[^\n]*\n\s*)*(?:INSERT|UPDATE|DELETE)\b/i.test(statement)) {
        const plan = sqlite.prepare(`EXPLAIN QUERY PLAN ${statement}`).all() as { id: number; parent: number; detail: string }[]
        const byId = new Map(plan.map((row) => [row.id, row]))
        const correlated = (row: { parent: number }): boolean => {
          const parent = byId.get(row.parent)
          return parent !== undefined && (parent.detail.startsWith('CORRELATED') || correlated(parent))
        }
        for (const row of plan) {
          // A correlated subquery runs once per row of its statement; a second table scanned at one level of a join, once per row of the first.
          const scans = plan.filter((other) => other.parent === row.parent && other.detail.startsWith('SCAN'))
          const unindexed = row.detail.startsWith('SCAN') || (row.detail.startsWith('SEARCH') && !row.detail.includes(' USING '))
          if ((correlated(row) && unindexed) || (row.detail.startsWith('SCAN') && scans.indexOf(row) > 0)) slow.push(`${tag}: ${row.detail}`)
        }
      }
      sqlite.exec(statement)
    }
    sqlite.close()
    expect(slow).toEqual([])
  })

  it('an upgrade says in the log, before it starts, how many migrations it applies and that a large file takes a while, and when it is done how long it took; a new file says nothing', () => {
    const path = join(dir, 'old.db')
    const lines: string[] = []
    openDatabase({ path, migrationsFolder: olderMigrations(5), log: (line) => lines.push(line) }).sqlite.close()
    expect(lines).toEqual([])
    const count = migrationStatements().filter(({ tag }, i, all) => all.findIndex((other) => other.tag === tag) === i).length
    openDatabase({ path, log: (line) => lines.push(line) }).sqlite.close()
    expect(lines).toEqual([
      expect.stringMatching(new RegExp(`^leasehold: migrating ${path} \\(\\d+\\.\\d MB\\) to this version: ${count - 5} migrations to apply, which may take a while on a large file…$`)),
      expect.stringMatching(new RegExp(`^leasehold: ${path} migrated from schema ${journalTags()[4]} to ${journalTags().at(-1)} in \\d+\\.\\d s; `)),
    ])
    openDatabase({ path, log: (line) => lines.push(line) }).sqlite.close()
    expect(lines).toHaveLength(2)
  })

  it('a start that migrates the file logs one line naming the schema it went from and to, and that an older version cannot open it after', () => {
    const path = join(dir, 'old.db')
    openDatabase({ path, migrationsFolder: olderMigrations(5), log: () => {} }).sqlite.close()
    const lines: string[] = []
    openDatabase({ path, log: (line) => lines.push(line) }).sqlite.close()
    expect(lines.filter((line) => line.includes(`from schema ${journalTags()[4]} to ${journalTags().at(-1)}`))).toEqual([
      expect.stringMatching(
        new RegExp(`^leasehold: ${path} migrated from schema ${journalTags()[4]} to ${journalTags().at(-1)} in \\d+\\.\\d s; an older version of Leasehold cannot open it any more \\(a backup taken before the upgrade can\\)$`),
      ),
    ])
    // What it says is so: the older version refuses the file.
    expect(() => openDatabase({ path, migrationsFolder: olderMigrations(5), log: () => {} })).toThrow(/written by a newer version of Leasehold/)
  })

  it('an upgrade that fails on a disk without the room for it says so in one line: the file was left as it was, and how much to free; with that much free it goes through', (context) => {
    if (process.platform !== 'linux' || process.getuid?.() !== 0) return context.skip('it needs root on Linux to mount a small tmpfs')
    const made = join(dir, 'made.db')
    const old = openDatabase({ path: made, migrationsFolder: olderMigrations(4) })
    const insertJob = old.sqlite.prepare(
      `INSERT INTO jobs (id, job_type, priority, cost_units, constraints, payload, is_unique, tags, queue, max_attempts, state,
         attempts, eligible_at, cancel_requested, dead_letter, created_at, updated_at)
       VALUES (?, 'test', 1, 1, '{}', ?, 0, '[]', 'default', 3, 'DONE', 1, 0, 0, 0, 0, 0)`,
    )
    old.sqlite.transaction(() => {
      for (let i = 0; i < 4000; i += 1) insertJob.run(`job-${i}`, JSON.stringify({ padding: 'x'.repeat(500) }))
    })()
    old.sqlite.pragma('wal_checkpoint(TRUNCATE)')
    old.sqlite.close()
    const size = statSync(made).size
    const small = join(dir, 'small')
    mkdirSync(small)
    try {
      // Room to open the file (1 MB and more), not to rewrite its tables through the log.
      execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size + 1536 * 1024}`, 'tmpfs', small], { stdio: 'pipe' })
    } catch (error) {
      return context.skip(`mount -t tmpfs is not permitted here (${(error as Error).message.split('\n')[0]})`)
    }
    try {
      const path = join(small, 'leasehold.db')
      copyFileSync(made, path)
      const bytes = readFileSync(path)
      const error = openError(path)
      expect(error.message).toMatch(
        new RegExp(`^upgrading ${path} \\(\\d+\\.\\d MB\\) to this version failed: a write failed for want of space on its disk \\(\\d+\\.\\d MB free\\), or the disk is failing.*; the file was left as it was\\. An upgrade needs up to twice the file's size free \\(\\d+\\.\\d MB\\): free space on its disk and start again$`),
      )
      expect(error.message).not.toMatch(/next start|cannot rollback|tables were being made/)
      expect(error.message).not.toContain('\n')
      expect(readFileSync(path).equals(bytes)).toBe(true)
      expect(openError(path).message).toBe(error.message) // the same at the next start, and no promise broken
    } finally {
      execFileSync('umount', [small], { stdio: 'ignore' })
    }
    // With twice the file's size free, as the line asks, the upgrade goes through.
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${3 * size}`, 'tmpfs', small], { stdio: 'pipe' })
    try {
      const path = join(small, 'leasehold.db')
      copyFileSync(made, path)
      const { sqlite } = openDatabase({ path })
      expect(sqlite.prepare('SELECT COUNT(*) FROM jobs').pluck().get()).toBe(4000)
      sqlite.close()
    } finally {
      execFileSync('umount', [small], { stdio: 'ignore' })
    }
  })

  it('0005 names each job\'s newest stream message and acknowledges the ones it superseded', () => {
    const path = join(dir, 'old.db')
    const old = openDatabase({ path, migrationsFolder: olderMigrations(5) })
    const insertJob = old.sqlite.prepare(
      `INSERT INTO jobs (id, job_type, priority, cost_units, constraints, payload, is_unique, tags, queue, max_attempts, state,
         attempts, eligible_at, cancel_requested, dead_letter, created_at, updated_at)
       VALUES (?, 'test', 1, 1, '{}', '{}', 0, '[]', 'default', 3, 'QUEUED', 0, 0, 0, 0, 0, 0)`,
    )
    const insertMessage = old.sqlite.prepare("INSERT INTO stream_messages (id, enqueue_id, stream, job_id, created_at) VALUES (?, ?, 'default', ?, 7)")
    insertJob.run('job-a')
    insertJob.run('job-b')
    insertMessage.run(1, 'e1', 'job-a')
    insertMessage.run(2, 'e2', 'job-b')
    insertMessage.run(3, 'e3', 'job-a') // job-a was requeued without its first message being acknowledged
    old.sqlite.close()

    const { sqlite } = openDatabase({ path, migrationsFolder: olderMigrations(7) })
    expect(sqlite.prepare('SELECT id, stream_message_id FROM jobs ORDER BY id').all()).toEqual([
      { id: 'job-a', stream_message_id: 3 },
      { id: 'job-b', stream_message_id: 2 },
    ])
    expect(sqlite.prepare('SELECT id, acked_at FROM stream_messages ORDER BY id').all()).toEqual([
      { id: 1, acked_at: 7 },
      { id: 2, acked_at: null },
      { id: 3, acked_at: null },
    ])
    sqlite.close()
  })

  it('0007 folds each attempt into its lease row and keeps message ids increasing past the old table\'s', () => {
    const path = join(dir, 'before-0007.db')
    const old = openDatabase({ path, migrationsFolder: olderMigrations(7) })
    old.sqlite
      .prepare(
        `INSERT INTO jobs (id, job_type, priority, cost_units, constraints, payload, is_unique, tags, queue, max_attempts, state,
           attempts, eligible_at, cancel_requested, dead_letter, created_at, updated_at, stream_message_id)
         VALUES ('job-a', 'test', 1, 1, '{}', '{}', 0, '[]', 'default', 3, 'QUEUED', 2, 0, 0, 0, 0, 0, 41)`,
      )
      .run()
    // As a grant leaves it: the job names its last lease (a job's leases are found from there).
    old.sqlite.prepare("UPDATE jobs SET lease_id = 'lease-2' WHERE id = 'job-a'").run()
    const insertLease = old.sqlite.prepare(
      `INSERT INTO leases (fence, id, job_id, attempt_id, worker_id, cost_units, ttl_s, grace_s, state, token, granted_at,
         last_heartbeat_at, expires_at, released_at, release_status)
       VALUES (?, ?, 'job-a', ?, 'w', 1, 30, 5, 'EXPIRED', 't', 10, 10, 45, 50, 'TIMEOUT')`,
    )
    const insertAttempt = old.sqlite.prepare(
      `INSERT INTO attempts (id, job_id, lease_id, worker_id, number, started_at, finished_at, outcome, disposition, error)
       VALUES (?, 'job-a', ?, 'w', ?, 10, 50, 'TIMEOUT', 'REQUEUED', ?)`,
    )
    for (const n of [1, 2]) {
      insertLease.run(n, `lease-${n}`, `attempt-${n}`)
      insertAttempt.run(`attempt-${n}`, `lease-${n}`, n, `{"n":${n}}`)
    }
    old.sqlite.prepare("INSERT INTO stream_messages (id, enqueue_id, stream, job_id, created_at) VALUES (41, 'e', 'default', 'job-a', 7)").run()
    old.sqlite.close()

    const reopened = openFileEngine(path)
    expect(reopened.engine.attempts('job-a')).toEqual([1, 2].map((n) => expect.objectContaining({
      id: `attempt-${n}`, lease_id: `lease-${n}`, number: n, started_at: 10, finished_at: 50, outcome: 'TIMEOUT', disposition: 'REQUEUED', error: { n },
    })))
    expect(reopened.engine.submit(aJob()).job.stream_message_id).toBeGreaterThan(41)
    reopened.sqlite.close()
  })

  it('0013 keeps every job, lease and event findable and every count, though it drops their indexes', () => {
    const path = join(dir, 'before-0013.db')
    const old = openDatabase({ path, migrationsFolder: olderMigrations(13) })
    const at = T0 - HOUR
    const insertJob = old.sqlite.prepare(
      `INSERT INTO jobs (id, job_type, priority, cost_units, constraints, payload, is_unique, tags, queue, max_attempts, attempt_budget, state,
         attempts, lease_id, eligible_at, cancel_requested, dead_letter, created_at, updated_at, finished_at, stream_message_id)
       VALUES (?, 'test', 1, 1, '{}', '{}', 0, '[]', 'default', 3, 3, ?, ?, ?, ?, 0, 0, ?, ?, ?, ?)`,
    )
    const done = newId()
    const queued = newId()
    const [first, second] = [newId(), newId()]
    insertJob.run(done, 'DONE', 2, second, at, at, at, at + 2 * MINUTE, 1)
    insertJob.run(queued, 'QUEUED', 0, null, at, at, at, null, 2)
    const insertLease = old.sqlite.prepare(
      `INSERT INTO leases (fence, id, job_id, attempt_id, worker_id, cost_units, ttl_s, grace_s, state, token, granted_at,
         last_heartbeat_at, expires_at, released_at, release_status, attempt, disposition)
       VALUES (?, ?, ?, ?, 'w', 1, 30, 5, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    )
    insertLease.run(1, first, done, newId(), 'EXPIRED', 'token-1', at, at, at + MINUTE, at + MINUTE, 'TIMEOUT', 1, 'REQUEUED')
    insertLease.run(2, second, done, newId(), 'RELEASED', 'token-2', at + MINUTE, at + MINUTE, at + 2 * MINUTE, at + 2 * MINUTE, 'SUCCEEDED', 2, 'FINAL')
    const insertEvent = old.sqlite.prepare("INSERT INTO events (ts, entity_type, entity_id, job_id, event_type, data) VALUES (?, ?, ?, ?, ?, '{}')")
    insertEvent.run(at, 'JOB', done, done, 'JOB_SUBMITTED')
    insertEvent.run(at, 'JOB', queued, queued, 'JOB_SUBMITTED')
    insertEvent.run(at, 'LEASE', first, done, 'LEASE_GRANTED')
    insertEvent.run(at + MINUTE, 'LEASE', first, done, 'LEASE_EXPIRED')
    insertEvent.run(at + MINUTE, 'CAPACITY', 'capacity', null, 'CAPACITY_CHANGED')
    insertEvent.run(at + MINUTE, 'LEASE', second, done, 'LEASE_GRANTED')
    insertEvent.run(at + 2 * MINUTE, 'JOB', done, done, 'JOB_DONE')
    // A job deleted before 0013 counted one more JOB_DONE in the same minute.
    old.sqlite.prepare("INSERT INTO stats_counts (event_type, ts, n) VALUES ('JOB_DONE', ?, 1)").run(at + 2 * MINUTE)
    const logged = (id: string) => old.sqlite.prepare('SELECT id FROM events WHERE job_id = ? ORDER BY id').pluck().all(id)
    const [doneEvents, queuedEvents] = [logged(done), logged(queued)]
    old.sqlite.close()

    const { engine, sqlite } = openFileEngine(path)
    expect(engine.jobEvents(done).map((event) => event.id)).toEqual(doneEvents)
    expect(engine.attempts(done).map((attempt) => [attempt.lease_id, attempt.number])).toEqual([[first, 1], [second, 2]])
    expect(engine.getLease(first)).toMatchObject({ job_id: done, state: 'EXPIRED' })
    expect(engine.snapshot().jobs.done_last_24h).toBe(2)
    expect(engine.snapshot().leases.expired_last_24h).toBe(1)
    const completed = engine.timeseries('jobs_completed', '1m', '1h').filter((point) => point.value > 0)
    expect(completed).toEqual([{ ts: at + 2 * MINUTE, value: 2 }])
    // The job queued before the upgrade runs after it: its timeline goes on from its old events.
    const { lease } = leaseOrFail(engine, 'w')
    expect(lease.job_id).toBe(queued)
    engine.release({ lease_id: lease.id, status: 'SUCCEEDED' })
    expect(engine.jobEvents(queued).map((event) => event.event_type)).toEqual(['JOB_SUBMITTED', 'LEASE_GRANTED', 'JOB_DONE'])
    expect(engine.jobEvents(queued)[0]!.id).toBe(queuedEvents[0])
    // And both go whole when deleted.
    engine.submit(aJob()) // the newest event is another job's
    expect(engine.deleteFinishedJobs([done, queued]).sort()).toEqual([done, queued].sort())
    for (const id of [done, queued]) {
      expect(sqlite.prepare('SELECT COUNT(*) FROM events WHERE job_id = ?').pluck().get(id)).toBe(0)
      expect(sqlite.prepare('SELECT COUNT(*) FROM leases WHERE job_id = ?').pluck().get(id)).toBe(0)
    }
    expect(engine.timeseries('jobs_completed', '1m', '1h').filter((point) => point.value > 0)).toEqual([
      { ts: at + 2 * MINUTE, value: 2 },
      { ts: T0 - (T0 % MINUTE), value: 1 },
    ])
    sqlite.close()
  })

  it('0014 and 0015 keep the listings by state and retention of a database made before them', () => {
    const path = join(dir, 'before-0014.db')
    const old = openDatabase({ path, migrationsFolder: olderMigrations(14) })
    const insertJob = old.sqlite.prepare(
      `INSERT INTO jobs (id, job_type, priority, cost_units, constraints, payload, is_unique, tags, queue, max_attempts, attempt_budget, state,
         attempts, eligible_at, cancel_requested, dead_letter, created_at, updated_at, finished_at)
       VALUES (?, 'test', 1, 1, '{}', '{}', 0, '[]', 'default', 3, 3, ?, 0, ?, 0, 0, ?, ?, ?)`,
    )
    const at = T0 - 10 * 24 * HOUR
    const [failed, canceled, queued] = [newId(), newId(), newId()]
    insertJob.run(failed, 'FAILED', at, at, at, at)
    insertJob.run(canceled, 'CANCELED', at, at, at, at)
    insertJob.run(queued, 'QUEUED', at, at, at, null)
    old.sqlite.close()

    const { engine, sqlite } = openFileEngine(path)
    const indexes = sqlite.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'jobs'").all() as { name: string; sql: string }[]
    expect(indexes.map((index) => index.name)).not.toContain('jobs_finished')
    expect(indexes.find((index) => index.name === 'jobs_state_seq')?.sql).toContain("WHERE state <> 'QUEUED' AND state <> 'LEASED'")
    expect(engine.listJobs({ state: 'FAILED' }).jobs.map((job) => job.id)).toEqual([failed])
    engine.submit(aJob()) // the newest event is another job's
    expect(engine.pruneFinishedJobs(T0 - 7 * 24 * HOUR)).toEqual({ deleted: 2, done: true })
    expect(sqlite.prepare('SELECT id FROM jobs WHERE id IN (?, ?, ?)').pluck().all(failed, canceled, queued)).toEqual([queued])
    sqlite.close()
  })

  it('0019 keeps on each force-released blocker what its release took, from its BLOCKER_RESOLVED event where one is left', () => {
    const path = join(dir, 'before-0019.db')
    const old = openDatabase({ path, migrationsFolder: olderMigrations(19) })
    const insertBlocker = old.sqlite.prepare(
      `INSERT INTO blockers (id, seq, file, holder_owner_id, holder_acquired_at, holder_last_heartbeat_at, retry_s, denied_at, retried_at,
         requester_owner_id, state, resolution, resolved_by, resolved_at, created_at)
       VALUES (?, ?, '/f', 'job:h', 0, 0, 180, 0, 0, 'job:w', ?, ?, ?, ?, 0)`,
    )
    const insertEvent = old.sqlite.prepare("INSERT INTO events (ts, entity_type, entity_id, job_id, event_type, data) VALUES (1, 'BLOCKER', ?, NULL, 'BLOCKER_RESOLVED', ?)")
    insertBlocker.run('taken', 1, 'RESOLVED', 'force_release', 'ops', 1)
    insertEvent.run('taken', JSON.stringify({ action: 'force_release', taken_from_holder: true }))
    insertBlocker.run('let-go', 2, 'RESOLVED', 'force_release', 'ops', 1)
    insertEvent.run('let-go', JSON.stringify({ action: 'force_release', taken_from_holder: false }))
    insertBlocker.run('pruned', 3, 'RESOLVED', 'force_release', 'ops', 1) // its event is gone
    insertBlocker.run('retried', 4, 'RESOLVED', 'retry', 'ops', 1)
    insertEvent.run('retried', JSON.stringify({ action: 'retry' }))
    insertBlocker.run('open', 5, 'OPEN', null, null, null)
    old.sqlite.close()

    const { engine, sqlite } = openFileEngine(path)
    expect(['taken', 'let-go', 'pruned', 'retried', 'open'].map((id) => engine.getBlocker(id).taken_from_holder)).toEqual([true, false, null, null, null])
    sqlite.close()
  })

  it.each([19, 26])(
    'a force release answered before its answer said what it took (file made before 00%i) is taken from the holder where the FILE_LEASE_REVOKED event of its lease is left, not left null as a retry',
    (before) => {
      const path = join(dir, `before-00${before}.db`)
      const old = openDatabase({ path, migrationsFolder: olderMigrations(before) })
      const insertBlocker = old.sqlite.prepare(
        `INSERT INTO blockers (id, seq, file, holder_owner_id, holder_acquired_at, holder_last_heartbeat_at, retry_s, denied_at, retried_at,
           requester_owner_id, state, resolution, resolved_by, resolved_at, created_at)
         VALUES (?, ?, ?, 'job:h', ?, 0, 180, 0, 0, 'job:w', 'RESOLVED', 'force_release', 'ops', 5, 0)`,
      )
      const resolvedEvent = old.sqlite.prepare(
        "INSERT INTO events (ts, entity_type, entity_id, job_id, event_type, data) VALUES (5, 'BLOCKER', ?, NULL, 'BLOCKER_RESOLVED', ?)",
      )
      const revokedEvent = old.sqlite.prepare(
        "INSERT INTO events (ts, entity_type, entity_id, job_id, event_type, data) VALUES (5, 'FILE_LEASE', ?, NULL, 'FILE_LEASE_REVOKED', ?)",
      )
      const revoked = (file: string, owner_id: string, acquired_at: number) =>
        JSON.stringify({ file, owner_id, reason: 'force_released', acquired_at, last_heartbeat_at: acquired_at, by: 'ops' })
      const resolved = (file: string) => JSON.stringify({ action: 'force_release', note: null, by: 'ops', file }) // no taken_from_holder
      insertBlocker.run('taken', 1, '/a', 1)
      resolvedEvent.run('taken', resolved('/a'))
      revokedEvent.run('lease-a', revoked('/a', 'job:h', 1))
      insertBlocker.run('let-go', 2, '/b', 2) // its holder had let go: the release took another owner's lease (as releases before the named holder did)
      resolvedEvent.run('let-go', resolved('/b'))
      revokedEvent.run('lease-b', revoked('/b', 'job:other', 3))
      insertBlocker.run('taken-later', 3, '/c', 4) // the revocation's event is left, the blocker's was deleted
      revokedEvent.run('lease-c', revoked('/c', 'job:h', 4))
      insertBlocker.run('recorded', 4, '/d', 5) // answered by a release that recorded it
      resolvedEvent.run('recorded', JSON.stringify({ action: 'force_release', note: null, by: 'ops', file: '/d', taken_from_holder: false }))
      if (before === 26) {
        // 0019 ran on a file that said nothing; a holder of a folder is named with the folder its lease holds.
        old.sqlite.prepare("UPDATE blockers SET holder_file = '/e' WHERE id = 'taken'").run()
        old.sqlite.prepare("UPDATE events SET data = ? WHERE entity_id = 'lease-a'").run(revoked('/e', 'job:h', 1))
        old.sqlite.prepare("UPDATE blockers SET taken_from_holder = 0 WHERE id = 'recorded'").run()
      }
      old.sqlite.close()

      const { engine, sqlite } = openFileEngine(path)
      expect(['taken', 'let-go', 'taken-later', 'recorded'].map((id) => engine.getBlocker(id).taken_from_holder)).toEqual([true, null, true, false])
      sqlite.close()
    },
  )

  it("0023 keeps each schedule's runs in the order they were made, whatever their fire times", () => {
    const path = join(dir, 'before-0023.db')
    const old = openDatabase({ path, migrationsFolder: olderMigrations(23) })
    old.sqlite
      .prepare(
        `INSERT INTO schedules (id, name, cron, timezone, job, overlap, enabled, next_fire_at, created_at, updated_at)
         VALUES ('s', 'ovx', '* * * * *', 'UTC', '{"job_type":"t","cost_units":1}', 'skip', 1, NULL, 0, 0)`,
      )
      .run()
    const insertRun = old.sqlite.prepare(
      "INSERT INTO schedule_runs (schedule_id, fire_at, schedule_name, outcome, job_id, reason, created_at) VALUES ('s', ?, 'ovx', 'SKIPPED', NULL, ?, ?)",
    )
    // Made in this order: an hour ahead, then after the clock was set back.
    insertRun.run(3_600_000, 'ahead', 3_600_000)
    insertRun.run(60_000, 'set back', 60_000)
    old.sqlite.close()

    const { engine, sqlite } = openFileEngine(path)
    expect(engine.getSchedule('ovx').last_run).toMatchObject({ fire_at: 60_000, reason: 'set back' })
    sqlite.close()
  })

  it('0025 takes the newest event of an older database as deleted through, so a reader behind it is told of a gap; a new database has deleted none', () => {
    const path = join(dir, 'before-0025.db')
    const old = openDatabase({ path, migrationsFolder: olderMigrations(25) })
    const insertEvent = old.sqlite.prepare("INSERT INTO events (id, ts, entity_type, entity_id, job_id, event_type, data) VALUES (?, 1, 'CAPACITY', 'c', NULL, 'CAPACITY_CHANGED', '{}')")
    insertEvent.run(40)
    insertEvent.run(41)
    old.sqlite.close()

    const { engine, sqlite } = openFileEngine(path)
    expect(engine.replayAfter(40, 100).gap).toEqual({ missed_from: 41, missed_to: 41 })
    expect(engine.replayAfter(41, 100).gap).toBeNull()
    sqlite.close()
    expect(setup().engine.replayAfter(0, 100).gap).toBeNull()
  })

  it("0027 stores a schedule's template payload null as {}, the payload its jobs get, and leaves other payloads as they were", () => {
    const path = join(dir, 'before-0027.db')
    const old = openDatabase({ path, migrationsFolder: olderMigrations(27) })
    const insertSchedule = old.sqlite.prepare(
      "INSERT INTO schedules (id, name, cron, timezone, job, overlap, enabled, next_fire_at, created_at, updated_at) VALUES (?, ?, '* * * * *', 'UTC', ?, 'skip', 1, NULL, 0, 0)",
    )
    insertSchedule.run('n', 'was-null', '{"job_type":"t","cost_units":1,"payload":null}')
    insertSchedule.run('o', 'has-one', '{"job_type":"t","cost_units":1,"payload":{"a":null}}')
    insertSchedule.run('x', 'has-none', '{"job_type":"t","cost_units":1}')
    old.sqlite.close()

    const { engine, sqlite } = openFileEngine(path)
    expect(['was-null', 'has-one', 'has-none'].map((name) => engine.getSchedule(name).job.payload)).toEqual([{}, { a: null }, undefined])
    sqlite.close()
  })

  it('fences keep increasing across a restart even when the leases that held the largest were deleted', () => {
    const path = join(dir, 'fences.db')
    const first = openFileEngine(path)
    first.engine.submit(aJob())
    const { lease } = leaseOrFail(first.engine, 'w')
    first.sqlite.prepare('DELETE FROM leases').run() // as retention deletes old leases with their jobs
    first.sqlite.close()
    const second = openFileEngine(path, { clock: first.clock })
    second.engine.submit(aJob())
    expect(leaseOrFail(second.engine, 'w2').lease.fence).toBeGreaterThan(lease.fence)
    second.sqlite.close()
  })

  it('stream message ids keep increasing across restarts, however many a host handed out', () => {
    const path = join(dir, 'messages.db')
    const first = openFileEngine(path)
    const before = [1, 2, 3].map(() => first.engine.submit(aJob()).job.stream_message_id!)
    first.sqlite.close()
    const second = openFileEngine(path, { clock: first.clock })
    const after = second.engine.submit(aJob()).job.stream_message_id!
    expect(after).toBeGreaterThan(Math.max(...before))
    second.sqlite.close()
  })
})
