// `npm start`: the desktop app when this machine can run it, else the headless host
// (`leasehold serve`) with a line that says why. Electron is a dev dependency whose binary may be
// missing (no download on this machine, or --omit=dev; see postinstall.js), its sandbox may be
// blocked (Ubuntu 23.10+), or better-sqlite3 may not build for it; everything but the window
// runs in Node. The decisions are pure functions in src-main/desktop/ (unit-tested in
// test/unit/desktop-*.test.ts); this file gathers the facts and acts on the answers.
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { register } from 'tsx/esm/api'
import { buildCliBundle } from './cli-bundle.js'

register()
const { splitArgs } = await import('../src-main/desktop/app-args.ts')
const { chooseLaunch, childEnvironment, QUIT_MESSAGE, stopStep, whenAlreadyRunning } = await import('../src-main/desktop/launch.ts')
const { runningHost } = await import('../src-main/desktop/running-host.ts')
const { APPARMOR_PROFILE, diagnoseSandbox } = await import('../src-main/desktop/sandbox.ts')
const { defaultDataDir, parseServeArgs } = await import('../src-main/config.ts')

const require = createRequire(import.meta.url)
const projectRoot = join(dirname(fileURLToPath(import.meta.url)), '..')
const args = process.argv.slice(2)
const { leasehold, others } = splitArgs(args)

/** The Electron executable, or why there is none. */
function electronState() {
  let path
  try {
    path = require('electron') // the package exports the binary's path, and throws without one
  } catch {
    return { missing: existsSync(join(projectRoot, 'node_modules', 'electron', 'package.json')) ? 'binary' : 'package' }
  }
  return typeof path === 'string' && existsSync(path) ? { path } : { missing: 'binary' }
}

/** Reads a small system file, or null where it does not exist. */
function readSystemFile(path) {
  try {
    return readFileSync(path, 'utf8').trim()
  } catch {
    return null
  }
}

/** Whether a file in /etc/apparmor.d names the Electron executable (the remedy's profile, or the user's own). */
function apparmorProfileFor(electronPath) {
  try {
    return readdirSync('/etc/apparmor.d', { withFileTypes: true }).some(
      (entry) => entry.isFile() && (entry.name === APPARMOR_PROFILE || readSystemFile(join('/etc/apparmor.d', entry.name))?.includes(electronPath)),
    )
  } catch {
    return false
  }
}

/** What decides whether Chromium's sandbox can start (src-main/desktop/sandbox.ts). */
function sandboxFacts(electronPath) {
  const helperPath = join(dirname(electronPath), 'chrome-sandbox')
  let helper = null
  try {
    const stat = statSync(helperPath)
    helper = { path: helperPath, uid: stat.uid, mode: stat.mode }
  } catch {
    helper = null
  }
  const linux = process.platform === 'linux'
  return {
    platform: process.platform,
    electronPath,
    helper,
    apparmorRestrictsUserns: linux && readSystemFile('/proc/sys/kernel/apparmor_restrict_unprivileged_userns') === '1',
    apparmorProfileForElectron: linux && apparmorProfileFor(electronPath),
    usernsDisabled: linux && (readSystemFile('/proc/sys/kernel/unprivileged_userns_clone') === '0' || readSystemFile('/proc/sys/user/max_user_namespaces') === '0'),
    noSandboxRequested: others.includes('--no-sandbox'),
  }
}

/** The data dir the app or host would use; a bad flag is left for the child to report. */
function dataDir() {
  try {
    return parseServeArgs(leasehold, process.env).dataDir
  } catch {
    return defaultDataDir(process.env)
  }
}

/**
 * Builds main, preload and renderer into out/ (package.json "main" is out/main/electron.js), and
 * the command's bundle, out/cli/, that the headless host runs (scripts/cli-bundle.js); quiet
 * unless it fails. Without the bundle the host still runs, from its sources through tsx.
 */
async function build() {
  const cli = join(dirname(require.resolve('electron-vite/package.json')), 'bin', 'electron-vite.js')
  const result = spawnSync(process.execPath, [cli, 'build'], { cwd: projectRoot, stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' })
  if (result.error) throw result.error
  if (result.status !== 0) {
    process.stderr.write(result.stdout + result.stderr)
    return result.status ?? 1
  }
  try {
    await buildCliBundle()
  } catch (error) {
    console.error(`leasehold: the command's bundle (out/cli/) could not be built (${error.message}); the host runs from its sources`)
  }
  return 0
}

/**
 * Runs the child until it exits and ends this process the same way. On POSIX the child gets its
 * own process group, so a Ctrl-C reaches it once (forwarded from here) rather than twice. What
 * each interrupt does is stopStep's answer: a clean quit first (for Electron a message over the
 * IPC channel opened here), a kill on the second.
 */
function runForwardingSignals(kind, command, commandArgs) {
  const detached = process.platform !== 'win32'
  const stdio = kind === 'electron' ? ['inherit', 'inherit', 'inherit', 'ipc'] : 'inherit'
  const child = spawn(command, commandArgs, { cwd: projectRoot, stdio, detached, env: childEnvironment(process.env) })
  const signals = process.platform === 'win32' ? ['SIGINT', 'SIGTERM', 'SIGBREAK'] : ['SIGINT', 'SIGTERM', 'SIGHUP']
  const running = () => child.exitCode === null && child.signalCode === null
  let interrupts = 0
  const interrupt = (signal) => {
    interrupts += 1
    if (!running()) return
    const step = stopStep(interrupts, { platform: process.platform, child: kind, channel: child.connected, signal })
    if (step.kind === 'message') child.send(QUIT_MESSAGE)
    else if (step.kind === 'signal') child.kill(step.signal)
    else if (step.kind === 'kill') child.kill('SIGKILL')
    if (interrupts === 1) console.error('leasehold: stopping (workers drain first); press Ctrl-C again to stop at once')
  }
  for (const signal of signals) process.on(signal, interrupt)
  // This process never outlives its child; if it is ended some other way, take the child along.
  process.on('exit', () => {
    if (running()) child.kill('SIGTERM')
  })
  child.on('error', (error) => {
    console.error(`leasehold: cannot start ${command}: ${error.message}`)
    process.exit(1)
  })
  child.on('exit', (code, signal) => {
    for (const s of signals) process.off(s, interrupt)
    if (signal) {
      // Die of the same signal, so whoever started us sees how the child ended.
      process.kill(process.pid, signal)
      return
    }
    process.exit(code ?? 1)
  })
}

function runElectron(electronPath) {
  runForwardingSignals('electron', electronPath, ['.', ...args])
}

function runHeadless() {
  if (others.length > 0) console.error(`leasehold: not flags of leasehold serve, ignored: ${others.join(' ')}`)
  runForwardingSignals('headless', process.execPath, [join(projectRoot, 'bin', 'leasehold.js'), 'serve', ...leasehold])
}

const electron = electronState()
const sandbox = 'path' in electron ? diagnoseSandbox(sandboxFacts(electron.path)) : null

// A second `npm start` must not rebuild out/ under a running app or host (host.json names it).
const running = await runningHost(dataDir())
if (running !== null) {
  const electronReady = 'path' in electron && sandbox === null && existsSync(join(projectRoot, 'out', 'main', 'electron.js'))
  const launch = whenAlreadyRunning(running, electronReady)
  for (const line of launch.notice) console.error(line)
  if (launch.run === 'electron') runElectron(electron.path)
  else process.exit(0)
} else {
  // Every way needs the build: the window shows out/renderer, and so does the host at `/`.
  const status = await build()
  if (status !== 0) process.exit(status)
  let native = null
  if ('path' in electron && sandbox === null) {
    const { rebuildNative } = await import('./rebuild-native.js')
    native = rebuildNative({ root: projectRoot })
  }
  const launch = chooseLaunch({ electron, sandbox, native })
  for (const line of launch.notice) console.error(line)
  if (launch.run === 'electron') runElectron(electron.path)
  else runHeadless()
}
