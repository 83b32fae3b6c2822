// `npm start`: the desktop app when this machine has Electron's binary, else the headless
// host. Electron is a dev dependency whose binary may be missing (no download on this
// machine, or --omit=dev; see postinstall.js), and everything but the window runs in Node.
import { spawn, spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const require = createRequire(import.meta.url)
const projectRoot = join(dirname(fileURLToPath(import.meta.url)), '..')
const args = process.argv.slice(2)

/** The Electron executable, or null when the package or its binary is not installed. */
function electronBinary() {
  try {
    const path = require('electron') // the package exports the binary's path, and throws without one
    return typeof path === 'string' && existsSync(path) ? path : null
  } catch {
    return null
  }
}

/** Builds main, preload and renderer into out/ (package.json "main" is out/main/electron.js); quiet unless it fails. */
function build() {
  const cli = join(dirname(require.resolve('electron-vite/package.json')), 'bin', 'electron-vite.js')
  const result = spawnSync(process.execPath, [cli, 'build'], { cwd: projectRoot, stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' })
  if (result.error) throw result.error
  if (result.status !== 0) process.stderr.write(result.stdout + result.stderr)
  return result.status ?? 1
}

/**
 * Runs `command` until it exits and ends this process the same way. On POSIX the child gets
 * its own process group, so a Ctrl-C reaches it once (forwarded from here) rather than twice
 * (once from the terminal, once forwarded): a second interrupt may mean "stop now".
 */
function runForwardingSignals(command, commandArgs) {
  const detached = process.platform !== 'win32'
  const child = spawn(command, commandArgs, { cwd: projectRoot, stdio: 'inherit', detached })
  const signals = process.platform === 'win32' ? ['SIGINT', 'SIGTERM'] : ['SIGINT', 'SIGTERM', 'SIGHUP']
  const forward = (signal) => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal)
  }
  for (const signal of signals) process.on(signal, forward)
  // This process never outlives its child; if it is ended some other way, take the child along.
  process.on('exit', () => forward('SIGTERM'))
  child.on('error', (error) => {
    console.error(`leasehold: cannot start ${command}: ${error.message}`)
    process.exit(1)
  })
  child.on('exit', (code, signal) => {
    for (const s of signals) process.off(s, forward)
    if (signal) {
      // Die of the same signal, so whoever started us sees how the child ended.
      process.kill(process.pid, signal)
      return
    }
    process.exit(code ?? 1)
  })
}

const electron = electronBinary()
if (!electron) {
  console.error('leasehold: Electron is not installed on this machine; starting the headless host (leasehold serve).')
}
// Both ways need the build: the window shows out/renderer, and so does the host at `/`.
const status = build()
if (status !== 0) process.exit(status)
if (electron) {
  // better-sqlite3 for Electron's ABI, beside node_modules' Node build (scripts/rebuild-native.js).
  const native = spawnSync(process.execPath, [join(projectRoot, 'scripts', 'rebuild-native.js')], { cwd: projectRoot, stdio: 'inherit' })
  if (native.status !== 0) process.exit(native.status ?? 1)
  runForwardingSignals(electron, ['.', ...args])
} else {
  runForwardingSignals(process.execPath, [join(projectRoot, 'bin', 'leasehold.js'), 'serve', ...args])
}
