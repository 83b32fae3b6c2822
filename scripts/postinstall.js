// Installs Electron's binary when this machine can download it, and never fails the install
// when it cannot. npm's `allowScripts` keeps electron's own install script from running (on a
// machine without internet it would fail `npm install` as a whole); this script runs it in a
// child process instead and turns a failure into one warning line. Everything except the
// desktop shell runs under plain Node, so a missing binary only means `npm start` runs the
// headless host.
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'

const require = createRequire(import.meta.url)

function electronInstallScript() {
  try {
    return join(dirname(require.resolve('electron/package.json')), 'install.js')
  } catch {
    return null // electron is a dev dependency: absent with --omit=dev
  }
}

const script = electronInstallScript()
if (process.env.ELECTRON_SKIP_BINARY_DOWNLOAD) {
  // asked not to download: nothing to do
} else if (script && existsSync(script)) {
  const result = spawnSync(process.execPath, [script], { stdio: 'ignore', timeout: 120_000 })
  if (result.status !== 0) {
    console.warn('leasehold: the Electron binary could not be installed; `npm start` will run the headless host (leasehold serve).')
  }
}
