// Installs the native addon of better-sqlite3 for this Node, then Electron's binary when this
// machine can download it, then the command's bundle.
//
// better-sqlite3: npm's `allowScripts` keeps its own install script (`prebuild-install ||
// node-gyp rebuild --release`) from running, and this runs the same two steps itself, with three
// differences. node-gyp compiles with a job per core, so better-sqlite3's own C++ (seconds)
// compiles beside SQLite's amalgamation instead of after it. SQLite is compiled at -O2 instead
// of the -O3 better-sqlite3's gyp files ask for, and without the modules Leasehold never uses
// (see sqliteCompileEnv): sqlite3.c is one 9 MB translation unit, most of `npm install`'s time
// where no prebuilt addon can be downloaded, and no job count splits its compile; on Linux,
// link-time optimisation splits its code generation across the cores instead. And what it prints is
// one line of ours, the output of both steps going to out/better-sqlite3-install.log. Where
// GitHub can be reached prebuild-install downloads the prebuilt addon (better-sqlite3's, with
// every module) and nothing is compiled; an addon that already loads is kept. A failure fails
// `npm install`: nothing runs without SQLite.
//
// Then it compiles the SQLite extension that writes each commit to the write-ahead log in one
// call (scripts/wal-vfs.js, under a second). A failure is one warning: the host opens its
// database through SQLite's own `unix-excl` VFS instead, with the same behaviour.
//
// Electron: runs Electron's own install script in a child process, in the foreground, with its
// output in out/electron-install.log: what `npm install` shows of it is one line of ours, which
// says what is being fetched, then how it went (on a terminal the same line is rewritten;
// elsewhere the outcome is a second line). A failure names its reason (`getaddrinfo ENOTFOUND
// github.com`), the log with the whole error, and the command that retries, and never fails the
// install (on a machine without internet Electron's own script would fail it as a whole);
// everything except the desktop shell runs under plain Node, so until then `npm start` runs the
// headless host. There is no time limit — ~100 MB takes minutes on a slow line; Ctrl-C stops the
// download and with it `npm install`, and `ELECTRON_SKIP_BINARY_DOWNLOAD=1 npm install` skips it.
//
// Then it builds the `leasehold` command's bundle, out/cli/ (scripts/cli-bundle.js; about half a
// second), which `leasehold serve` runs instead of compiling its TypeScript at every start. A
// failure is one warning: the command runs its sources through tsx instead, as it would anyway
// once a source file changes.
import { spawnSync } from 'node:child_process'
import { appendFileSync, closeSync, existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { availableParallelism } from 'node:os'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { buildCliBundle } from './cli-bundle.js'
import { ltoJobsFor, nodeGypCommand, sqliteCompileEnv } from './rebuild-native.js'
import { buildWalVfs } from './wal-vfs.js'

const require = createRequire(import.meta.url)
const projectRoot = join(dirname(fileURLToPath(import.meta.url)), '..')

/** Where Electron's installer writes its output, relative to the project. */
export const ELECTRON_LOG = join('out', 'electron-install.log')

/** Electron's installer (node_modules/electron/install.js, the command that retries, too). */
function electronInstallScript() {
  try {
    return join(dirname(require.resolve('electron/package.json')), 'install.js')
  } catch {
    return null // electron is a dev dependency: absent with --omit=dev
  }
}

/**
 * Why an install failed, in a few words, from its output: the first line that names an error
 * (`RequestError: getaddrinfo ENOTFOUND github.com` gives `getaddrinfo ENOTFOUND github.com`),
 * else its last line.
 * @param {string} output
 * @returns {string}
 */
export function failureReason(output) {
  const lines = output.split('\n').map((line) => line.trim()).filter(Boolean)
  const error = lines.find((line) => /^[A-Za-z]*Error\b:?/.test(line))
  const reason = error ? error.replace(/^[A-Za-z]*Error:\s*/, '') : lines.at(-1)
  return (reason ?? 'no output').slice(0, 200)
}

/**
 * Runs Electron's installer with its output in the log, and returns the one line that says how
 * it went, or null when it went well.
 * @param {{ script: string, root?: string, node?: string }} options
 * @returns {string | null}
 */
export function installElectron({ script, root = projectRoot, node = process.execPath }) {
  const log = join(root, ELECTRON_LOG)
  mkdirSync(dirname(log), { recursive: true })
  const fd = openSync(log, 'w')
  let result
  try {
    result = spawnSync(node, [script], { stdio: ['inherit', fd, fd] })
  } finally {
    closeSync(fd)
  }
  if (result.status === 0) return null
  const why = result.error?.message ?? failureReason(readFileSync(log, 'utf8'))
  return (
    `leasehold: Electron's binary could not be installed (${why}; the whole error is in ${relative(process.cwd(), log) || log}); ` +
    '`npm start` will run the headless host (leasehold serve). Retry with: node node_modules/electron/install.js'
  )
}

/**
 * Why prebuild-install found no addon, from its output: its last warning (`prebuild-install warn
 * install getaddrinfo ENOTFOUND github.com` gives `getaddrinfo ENOTFOUND github.com`), else as
 * {@link failureReason} reads any output.
 * @param {string} output
 * @returns {string}
 */
export function prebuildFailure(output) {
  const warnings = [...output.matchAll(/^prebuild-install warn (?:install )?(.+)$/gm)]
  return warnings.length > 0 ? warnings.at(-1)[1].trim().slice(0, 200) : failureReason(output)
}

/** Where better-sqlite3's download and build write their output, relative to the project. */
export const SQLITE_LOG = join('out', 'better-sqlite3-install.log')

/**
 * Whether better-sqlite3's addon loads in a fresh Node of this build (run in a child, so that a
 * half-written addon cannot take this process down and a later build is not shadowed by one
 * already loaded).
 * @param {string} dir better-sqlite3's directory
 * @param {string} node
 */
function sqliteLoads(dir, node) {
  const probe = `new (require(${JSON.stringify(dir)}))(':memory:').close()`
  return spawnSync(node, ['-e', probe], { stdio: 'ignore' }).status === 0
}

/**
 * Installs better-sqlite3's addon for this Node as its own install script would — the prebuilt
 * one when it can be downloaded, else compiled — unless one that loads is there already.
 * Returns what it did; throws an Error whose message is one line when the addon cannot be had.
 * `ltoJobs`: the link-time-optimised build's jobs, 0 for none (by default, where ltoJobsFor says).
 * @param {{ dir: string, root?: string, node?: string, jobs?: number, ltoJobs?: number, say?: (line: string) => void }} options
 * @returns {'kept' | 'downloaded' | 'compiled'}
 */
export function installSqlite({ dir, root = projectRoot, node = process.execPath, jobs = availableParallelism(), ltoJobs = ltoJobsFor(jobs), say = (line) => process.stderr.write(`${line}\n`) }) {
  if (existsSync(join(dir, 'build', 'Release', 'better_sqlite3.node')) && sqliteLoads(dir, node)) return 'kept'
  const log = join(root, SQLITE_LOG)
  mkdirSync(dirname(log), { recursive: true })
  writeFileSync(log, '')
  const shownLog = relative(process.cwd(), log) || log
  const run = (command, args, env = process.env) => {
    appendFileSync(log, `$ ${[command, ...args].join(' ')}\n`)
    const fd = openSync(log, 'a')
    try {
      return spawnSync(command, args, { cwd: dir, env, stdio: ['ignore', fd, fd], shell: process.platform === 'win32' && command !== node })
    } finally {
      closeSync(fd)
    }
  }
  const prebuildInstall = createRequire(join(dir, 'package.json')).resolve('prebuild-install/bin.js')
  const downloaded = run(node, [prebuildInstall])
  if (downloaded.status === 0 && sqliteLoads(dir, node)) return 'downloaded'

  const { version } = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'))
  const why = downloaded.error?.message ?? prebuildFailure(readFileSync(log, 'utf8'))
  say(
    `leasehold: no prebuilt better-sqlite3 ${version} for Node ${process.versions.node} could be downloaded (${why}); ` +
      `compiling it with ${jobs} job${jobs === 1 ? '' : 's'} (about a minute; the output goes to ${shownLog})…`,
  )
  const [command, ...gypArgs] = nodeGypCommand(node)
  const compiles = (env) => {
    appendFileSync(log, `CFLAGS=${env.CFLAGS}${env.LDFLAGS ? ` LDFLAGS=${env.LDFLAGS}` : ''}\n`)
    return run(command, [...gypArgs, 'rebuild', '--release', `--jobs=${jobs}`], env).status === 0 && sqliteLoads(dir, node)
  }
  // Link-time optimisation where it may work (sqliteCompileEnv); the plain compile where it does not.
  if (ltoJobs > 0 && compiles(sqliteCompileEnv(process.env, { ltoJobs }))) return 'compiled'
  if (ltoJobs > 0) appendFileSync(log, 'The build with link-time optimisation failed: compiling again without it.\n')
  if (!compiles(sqliteCompileEnv())) {
    throw new Error(
      `better-sqlite3 ${version} could not be compiled (it needs Python 3, make and a C++ toolchain: on Debian/Ubuntu ` +
        `sudo apt install build-essential python3); the whole output is in ${shownLog}; retry with: node scripts/postinstall.js`,
    )
  }
  return 'compiled'
}

const runAsScript = process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]

if (runAsScript) {
  try {
    installSqlite({ dir: dirname(require.resolve('better-sqlite3/package.json')) })
  } catch (error) {
    console.error(`leasehold: ${error.message}`)
    process.exit(1)
  }

  if (process.platform !== 'win32') {
    try {
      buildWalVfs()
    } catch (error) {
      console.warn(`leasehold: ${error.message}; the database is written through SQLite's unix-excl VFS instead (two write calls a page where one would do)`)
    }
  }

  const script = electronInstallScript()
  if (process.env.ELECTRON_SKIP_BINARY_DOWNLOAD) {
    // asked not to download: nothing to do
  } else if (script && existsSync(script)) {
    const { version } = require('electron/package.json')
    const tty = process.stderr.isTTY === true
    const checking = `leasehold: checking Electron ${version}'s binary for the desktop app (a download of about 100 MB the first time; ELECTRON_SKIP_BINARY_DOWNLOAD=1 skips it)…`
    process.stderr.write(tty ? checking : `${checking}\n`)
    const failure = installElectron({ script })
    // On a terminal the outcome takes the place of the line that said what was being fetched.
    if (tty) process.stderr.write('\r\x1b[2K')
    if (failure) process.stderr.write(`${failure}\n`)
    else if (tty) process.stderr.write(`leasehold: Electron ${version}'s binary is installed\n`)
  }

  try {
    await buildCliBundle()
  } catch (error) {
    console.warn(`leasehold: the command's bundle (out/cli/) could not be built (${error.message}); leasehold runs from its TypeScript sources instead`)
  }
}
