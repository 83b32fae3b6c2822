/**
 * What keeps `npm install` (and CI's `npm ci`) short on a machine that has to compile SQLite.
 *
 * The lockfile names every package's tarball (`resolved`) and its hash (`integrity`): without the
 * URLs npm first fetches a packument per package, some 780 requests before any tarball comes. A
 * lockfile regenerated where a user's npm config sets `omit-lockfile-registry-resolved` drops
 * them; the project's .npmrc overrides that setting, and these tests catch a lockfile that lost
 * them all the same.
 *
 * SQLite's amalgamation is compiled at -O2, not better-sqlite3's -O3: a quarter less CPU for
 * the compile that is most of the install, for an engine as fast (docs/install.md).
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { sqliteCompileEnv } from '../../scripts/postinstall.js'

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

describe("SQLite's optimisation level when better-sqlite3 is compiled at install", () => {
  test("the compile gets -O2 in CFLAGS, which gyp's Makefiles put after the gyp files' -O3, so it is the level the C compiler uses", () => {
    const env = sqliteCompileEnv({ PATH: '/usr/bin', CXXFLAGS: '-g' })
    expect(env).toEqual({ PATH: '/usr/bin', CXXFLAGS: '-g', CFLAGS: '-O2' })
  })

  test('a level the user sets in CFLAGS comes after ours, so it still decides', () => {
    expect(sqliteCompileEnv({ CFLAGS: '-O3 -march=native' }).CFLAGS).toBe('-O2 -O3 -march=native')
  })
})
