// Installs Electron's binary when this machine can download it, and never fails the install
// when it cannot. npm's `allowScripts` keeps electron's own install script from running (on a
// machine without internet it would fail `npm install` as a whole); this script runs it in a
// child process instead, in the foreground, with its output in out/electron-install.log: what
// `npm install` shows of it is one line of ours, which says what is being fetched, then how it
// went (on a terminal the same line is rewritten; elsewhere the outcome is a second line). A
// failure names its reason (`getaddrinfo ENOTFOUND github.com`), the log with the whole error,
// and the command that retries; everything except the desktop shell runs under plain Node, so
// until then `npm start` runs the headless host. There is no time limit — ~100 MB takes minutes
// on a slow line; Ctrl-C stops the download and with it `npm install`, and
// `ELECTRON_SKIP_BINARY_DOWNLOAD=1 npm install` skips it.
//
// Then it builds the `leasehold` command's bundle, out/cli/ (scripts/cli-bundle.js; about half a
// second), which `leasehold serve` runs instead of compiling its TypeScript at every start. A
// failure is one warning: the command runs its sources through tsx instead, as it would anyway
// once a source file changes.
import { spawnSync } from 'node:child_process'
import { closeSync, existsSync, mkdirSync, openSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { buildCliBundle } from './cli-bundle.js'

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

const runAsScript = process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]

if (runAsScript) {
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
