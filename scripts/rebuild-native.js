// Builds better-sqlite3's native addon for Electron's ABI into out/native/better_sqlite3.node,
// leaving node_modules alone: there the addon stays built for Node, which `leasehold serve`, the
// CLI and the tests load. The desktop app passes this file to better-sqlite3 as its
// `nativeBinding` (src-main/electron.ts). `npm start` runs it before it launches Electron (and
// falls back to the headless host when it fails); `npm run dist` runs it before packaging.
//
// First a prebuilt addon for this Electron is downloaded (prebuild-install, from better-sqlite3's
// releases); where there is none it is compiled with node-gyp against Electron's headers, which
// needs Python 3 and a C++ toolchain (README, "Desktop app"), with SQLite compiled as at
// `npm install` (sqliteCompileEnv, shared with postinstall.js). Their output goes to
// out/native/build.log; this prints one line of progress. Nothing is done when the addon for
// this Electron version is already there.
import { spawnSync } from 'node:child_process'
import { appendFileSync, copyFileSync, cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { APP_FILES } from './app-files.js'

const require = createRequire(import.meta.url)
const projectRoot = join(dirname(fileURLToPath(import.meta.url)), '..')

/**
 * The command that runs node-gyp: under npm (`npm install`, `npm start`) npm's own, which npm
 * names in `npm_config_node_gyp`; run by hand, the one npx fetches.
 * @param {string} [node]
 * @returns {string[]}
 */
export function nodeGypCommand(node = process.execPath) {
  const npmGyp = process.env.npm_config_node_gyp
  return npmGyp && existsSync(npmGyp) ? [node, npmGyp] : ['npx', '--yes', 'node-gyp']
}

/**
 * The optimisation level SQLite's amalgamation is compiled at. better-sqlite3's gyp files ask for
 * -O3, at which sqlite3.c, a single 9 MB translation unit that no job count can split, takes
 * about two minutes of one core, most of `npm install` where no prebuilt addon can be
 * downloaded; at -O2 it takes about one, and the engine runs as fast (-O1 would save more, but
 * costs the engine's SQLite work about an eighth; docs/install.md gives the measurements).
 */
export const SQLITE_OPTIMIZATION = '-O2'

/**
 * SQLite modules better-sqlite3's gyp files compile in and Leasehold never uses: full-text search
 * (FTS3, FTS4, FTS5), R-trees and geopoly, a fifth of the time sqlite3.c takes to compile. Each
 * is left out with `-U`, which the C compiler applies after the gyp files' `-D`s.
 */
export const SQLITE_LEFT_OUT = ['SQLITE_ENABLE_FTS3', 'SQLITE_ENABLE_FTS3_PARENTHESIS', 'SQLITE_ENABLE_FTS4', 'SQLITE_ENABLE_FTS5', 'SQLITE_ENABLE_GEOPOLY', 'SQLITE_ENABLE_RTREE']

/**
 * The environment node-gyp compiles better-sqlite3 in (for Node by postinstall.js, and for Electron
 * here): the given one, with {@link SQLITE_OPTIMIZATION} and {@link SQLITE_LEFT_OUT}
 * put first in CFLAGS. gyp's Makefiles pass CFLAGS to the C compiler after the gyp files' own
 * flags, and of several -O flags the last one counts: so it overrides their -O3 for the C sources
 * (SQLite), while better-sqlite3's C++ (CXXFLAGS) keeps its -O3; and what the user sets in CFLAGS
 * (a level, a module defined again) comes after ours and still decides.
 *
 * With `ltoJobs`, SQLite is also compiled for link-time optimisation (`-flto`, GCC's form), and
 * the link (LDFLAGS, which gyp's Makefiles also put after their own) generates its code in that
 * many jobs: compiling sqlite3.c then only parses and analyses it, and the link splits the code
 * generation, most of the work, across the cores — half the wall time on two. The code is the
 * same -O2 code. A toolchain without GCC's LTO fails that build, and the caller compiles again
 * without it ({@link ltoJobsFor} says where to try).
 * @param {NodeJS.ProcessEnv} [env]
 * @param {{ ltoJobs?: number }} [options]
 * @returns {NodeJS.ProcessEnv}
 */
export function sqliteCompileEnv(env = process.env, { ltoJobs } = {}) {
  const first = (ours, theirs) => (theirs ? `${ours} ${theirs}` : ours)
  const cflags = [SQLITE_OPTIMIZATION, ...SQLITE_LEFT_OUT.map((name) => `-U${name}`), ...(ltoJobs ? ['-flto'] : [])].join(' ')
  const compiled = { ...env, CFLAGS: first(cflags, env.CFLAGS) }
  return ltoJobs ? { ...compiled, LDFLAGS: first(`-flto=${ltoJobs}`, env.LDFLAGS) } : compiled
}

/**
 * How many jobs a link-time-optimised build of SQLite would generate its code in, or 0 where it
 * is not worth trying: on Linux, whose C compiler is GCC unless CC names another, with two jobs
 * or more (one gains nothing).
 * @param {number} jobs
 * @param {NodeJS.ProcessEnv} [env]
 * @param {NodeJS.Platform} [platform]
 * @returns {number}
 */
export function ltoJobsFor(jobs, env = process.env, platform = process.platform) {
  return platform === 'linux' && jobs > 1 && !/clang/.test(env.CC ?? '') ? jobs : 0
}

/**
 * Builds the addon if it is missing or was built for another Electron, better-sqlite3 or
 * platform. Returns `{ok: true}`, or `{ok: false, reason}` with a reason that fits in one line.
 * @param {{ root?: string, log?: (line: string) => void }} [options]
 * @returns {{ ok: true } | { ok: false, reason: string }}
 */
export function rebuildNative({ root = projectRoot, log = (line) => console.error(line) } = {}) {
  const outDir = join(root, 'out', 'native')
  const target = join(root, APP_FILES.nativeAddon)
  const marker = join(outDir, 'built-for.txt')
  const logFile = join(outDir, 'build.log')

  const electronVersion = require('electron/package.json').version
  const sqliteDir = dirname(require.resolve('better-sqlite3/package.json'))
  const sqliteVersion = require('better-sqlite3/package.json').version
  const wanted = `electron ${electronVersion} better-sqlite3 ${sqliteVersion} ${process.platform}-${process.arch}\n`
  if (existsSync(target) && existsSync(marker) && readFileSync(marker, 'utf8') === wanted) return { ok: true }

  const work = join(outDir, 'better-sqlite3')
  rmSync(work, { recursive: true, force: true })
  mkdirSync(outDir, { recursive: true })
  writeFileSync(logFile, `building ${wanted}`)
  cpSync(sqliteDir, work, { recursive: true, filter: (source) => !source.startsWith(join(sqliteDir, 'build')) })
  log(`leasehold: building better-sqlite3 for Electron ${electronVersion} (once per version; details in ${relative(root, logFile)})…`)

  const run = (command, args, env = process.env) => {
    const result = spawnSync(command, args, { cwd: work, env, encoding: 'utf8', shell: process.platform === 'win32' })
    appendFileSync(logFile, `\n$ ${command} ${args.join(' ')}\n${result.stdout ?? ''}${result.stderr ?? ''}${result.error ? `${result.error.message}\n` : ''}`)
    return result.status === 0
  }
  // prebuild-install comes with better-sqlite3: resolve it from there.
  const prebuildInstall = createRequire(join(sqliteDir, 'package.json')).resolve('prebuild-install/bin.js')
  const prebuilt = run(process.execPath, [prebuildInstall, '--runtime', 'electron', '--target', electronVersion, '--arch', process.arch])
  if (!prebuilt) {
    const [command, ...gyp] = nodeGypCommand()
    const compiled = run(command, [...gyp, 'rebuild', '--release', `--target=${electronVersion}`, '--dist-url=https://electronjs.org/headers', `--arch=${process.arch}`], sqliteCompileEnv())
    if (!compiled) {
      return {
        ok: false,
        reason: `no prebuilt better-sqlite3 for Electron ${electronVersion} on ${process.platform}-${process.arch} could be downloaded, and compiling it failed (it needs Python 3 and a C++ toolchain; see ${relative(root, logFile)})`,
      }
    }
  }
  copyFileSync(join(work, 'build', 'Release', 'better_sqlite3.node'), target)
  writeFileSync(marker, wanted)
  rmSync(work, { recursive: true, force: true })
  return { ok: true }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const result = rebuildNative()
  if (!result.ok) {
    console.error(`leasehold: ${result.reason}`)
    process.exit(1)
  }
}
