/**
 * What keeps `npm install` (and CI's `npm ci`) short on a machine that has to compile SQLite.
 *
 * The lockfile names every package's tarball (`resolved`) and its hash (`integrity`): without the
 * URLs npm first fetches a packument per package, some 780 requests before any tarball comes. A
 * lockfile regenerated where a user's npm config sets `omit-lockfile-registry-resolved` drops
 * them; the project's .npmrc overrides that setting, and these tests catch a lockfile that lost
 * them all the same.
 *
 * SQLite's amalgamation is compiled at -O2, not better-sqlite3's -O3, without the modules
 * Leasehold never uses (full-text search, R-trees, geopoly), and on Linux with its code generated
 * on every core (link-time optimisation): the compile that is most of the install takes under
 * half as long, for an engine as fast (docs/install.md).
 */
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { describe, expect, test } from 'vitest'
import { ltoJobsFor, SQLITE_LEFT_OUT, sqliteCompileEnv } from '../../scripts/rebuild-native.js'

const root = join(import.meta.dirname, '..', '..')

/** One entry of package-lock.json's `packages` (lockfile version 3), as far as these tests read it. */
interface LockEntry {
  name?: string
  version?: string
  resolved?: string
  integrity?: string
  link?: boolean
}

const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as { lockfileVersion: number; packages: Record<string, LockEntry> }
/** Every installed package: all entries but the project's own (key ""). */
const installed = Object.entries(lock.packages).filter(([path]) => path !== '')

/**
 * The registry's tarball URL for an entry: its package name is the last `node_modules/` part of
 * its path, or its `name` where it is installed under an alias (`string-width-cjs`).
 */
function registryTarball(path: string, entry: LockEntry): string {
  const name = entry.name ?? path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length)
  return `https://registry.npmjs.org/${name}/-/${name.split('/').at(-1)}-${entry.version}.tgz`
}

describe('the lockfile names every tarball, so an install fetches no packuments', () => {
  test('every registry package has the registry URL of its own version and its integrity hash', () => {
    expect(lock.lockfileVersion).toBe(3)
    expect(installed.length).toBeGreaterThan(100)
    const wrong = installed
      .filter(([, entry]) => !entry.link)
      .filter(([path, entry]) => entry.resolved !== registryTarball(path, entry) || !entry.integrity?.startsWith('sha512-'))
      .map(([path, entry]) => `${path}: resolved ${entry.resolved ?? '(none)'}, integrity ${entry.integrity ?? '(none)'}`)
    expect(wrong).toEqual([])
  })

  test("the project's .npmrc keeps the URLs in a lockfile npm writes, whatever the user's config says", () => {
    const npmrc = readFileSync(join(root, '.npmrc'), 'utf8')
    expect(npmrc).toMatch(/^omit-lockfile-registry-resolved\s*=\s*false\s*$/m)
  })
})

describe('how SQLite is compiled when no prebuilt better-sqlite3 can be downloaded', () => {
  const ours = ['-O2', ...SQLITE_LEFT_OUT.map((name) => `-U${name}`)].join(' ')

  test("the compile gets -O2 and a -U for each module left out in CFLAGS, which gyp's Makefiles put after the gyp files' -O3 and -Ds, so they decide", () => {
    expect(SQLITE_LEFT_OUT).toEqual(['SQLITE_ENABLE_FTS3', 'SQLITE_ENABLE_FTS3_PARENTHESIS', 'SQLITE_ENABLE_FTS4', 'SQLITE_ENABLE_FTS5', 'SQLITE_ENABLE_GEOPOLY', 'SQLITE_ENABLE_RTREE'])
    const env = sqliteCompileEnv({ PATH: '/usr/bin', CXXFLAGS: '-g' })
    expect(env).toEqual({ PATH: '/usr/bin', CXXFLAGS: '-g', CFLAGS: ours })
  })

  test('what the user sets in CFLAGS comes after ours, so it still decides', () => {
    expect(sqliteCompileEnv({ CFLAGS: '-O3 -DSQLITE_ENABLE_FTS5' }).CFLAGS).toBe(`${ours} -O3 -DSQLITE_ENABLE_FTS5`)
  })

  test("with link-time optimisation, -flto joins our CFLAGS and the link's jobs lead LDFLAGS, the user's after both", () => {
    const env = sqliteCompileEnv({ CFLAGS: '-g', LDFLAGS: '-Wl,-z,now' }, { ltoJobs: 2 })
    expect(env.CFLAGS).toBe(`${ours} -flto -g`)
    expect(env.LDFLAGS).toBe('-flto=2 -Wl,-z,now')
    expect(sqliteCompileEnv({}, { ltoJobs: 4 }).LDFLAGS).toBe('-flto=4')
  })

  test('link-time optimisation is tried on Linux with GCC and two jobs or more, and nowhere else', () => {
    expect(ltoJobsFor(2, {}, 'linux')).toBe(2)
    expect(ltoJobsFor(1, {}, 'linux')).toBe(0)
    expect(ltoJobsFor(2, { CC: 'clang' }, 'linux')).toBe(0)
    expect(ltoJobsFor(2, {}, 'darwin')).toBe(0)
    expect(ltoJobsFor(2, {}, 'win32')).toBe(0)
  })

  // Where the install compiled SQLite (its log names the CFLAGS it compiled with: CI, any machine
  // that cannot reach GitHub), the addon in node_modules is that build.
  const log = join(root, 'out', 'better-sqlite3-install.log')
  const compiledHere = existsSync(log) && readFileSync(log, 'utf8').includes(`CFLAGS=${ours}`)
  test.runIf(compiledHere)('the SQLite the install compiled leaves the unused modules out, and keeps the JSON functions and STAT4 the engine and its planner use', () => {
    const db = new Database(':memory:')
    try {
      const used = (option: string) => db.prepare('SELECT sqlite_compileoption_used(?) AS used').get(option) as { used: number }
      for (const name of SQLITE_LEFT_OUT) expect(used(name.replace(/^SQLITE_/, '')).used, name).toBe(0)
      expect(used('ENABLE_STAT4').used).toBe(1)
      expect(() => db.exec('CREATE VIRTUAL TABLE t USING fts5(x)')).toThrow(/no such module: fts5/)
      expect(db.prepare(`SELECT json_extract('{"a":[1,2]}', '$.a[1]') AS v`).get()).toEqual({ v: 2 })
    } finally {
      db.close()
    }
  })
})
