/**
 * A host whose disk was full at start serves reads only (db/storage-mode.ts, db/open.ts
 * `openOnFullDisk`): the requests it refuses are exactly those that may write, and it opens only
 * a database whose schema is this version's (a migration writes; an older schema is not read).
 */
import BetterSqlite3 from 'better-sqlite3'
import { existsSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { DatabaseOpenError, openDatabase, openOnFullDisk, shareDatabase } from '../../src-main/db/open'
import { mayWrite, probeDelays } from '../../src-main/db/storage-mode'
import { tempDir } from '../helpers/host'

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

describe('the requests a read-only host refuses', () => {
  test('are every API request of a writing method, and none that only reads or changes memory', () => {
    expect(mayWrite('POST', '/api/scheduler/jobs/submit')).toBe(true)
    expect(mayWrite('post', '/internal/worker/claim?x=1')).toBe(true)
    expect(mayWrite('PUT', '/api/capacity')).toBe(true)
    expect(mayWrite('DELETE', '//api/schedules/nightly')).toBe(true)
    expect(mayWrite('PATCH', '/API/schedules/nightly')).toBe(true)
    expect(mayWrite('GET', '/api/scheduler/jobs')).toBe(false)
    expect(mayWrite('HEAD', '/api/health')).toBe(false)
    expect(mayWrite('POST', '/api/events/ticket')).toBe(false) // the dashboard's event stream opens with it
    expect(mayWrite('POST', '/api/events/ticket/')).toBe(false)
    expect(mayWrite('POST', '/assets/index.js')).toBe(false) // not the API: nothing there writes
  })

  test('the probe for space comes every 2 s at first, then every 5 s', () => {
    const next = probeDelays()
    expect(Array.from({ length: 5 }, next)).toEqual([2000, 3000, 4500, 5000, 5000])
  })
})

describe('a database opened on a full disk', () => {
  function database(): string {
    const dir = tempDir('leasehold-read-only-')
    dirs.push(dir)
    const path = join(dir, 'leasehold.db')
    openDatabase({ path }).sqlite.close()
    return path
  }

  test('reads without making a -shm file, and shares the file again (WAL, normal locking) when asked', () => {
    const path = database()
    const { sqlite } = openOnFullDisk({ path })
    expect(sqlite.prepare('SELECT COUNT(*) FROM jobs').pluck().get()).toBe(0)
    expect(sqlite.pragma('locking_mode', { simple: true })).toBe('exclusive')
    expect(existsSync(`${path}-shm`)).toBe(false)
    shareDatabase(sqlite)
    expect(sqlite.pragma('locking_mode', { simple: true })).toBe('normal')
    expect(sqlite.pragma('journal_mode', { simple: true })).toBe('wal')
    const other = new BetterSqlite3(path, { readonly: true }) // another connection reads it again
    expect(other.prepare('SELECT COUNT(*) FROM jobs').pluck().get()).toBe(0)
    other.close()
    sqlite.close()
  })

  test('is refused when it needs a migration, which would write', () => {
    const path = database()
    const db = new BetterSqlite3(path)
    db.exec('DELETE FROM __drizzle_migrations WHERE created_at = (SELECT MAX(created_at) FROM __drizzle_migrations)')
    db.close()
    expect(() => openOnFullDisk({ path })).toThrow(DatabaseOpenError)
    expect(() => openOnFullDisk({ path })).toThrow(/is full, and the database must be set up or migrated to this version first/)
  })
})
