// Installs Electron's binary when this machine can download it, and never fails the install
// when it cannot. npm's `allowScripts` keeps electron's own install script from running (on a
// machine without internet it would fail `npm install` as a whole); this script runs it in a
// child process instead, in the foreground: its output is shown (npm shows the root package's
// own scripts), including the progress bar @electron/get draws once a download takes more than
// 30 s. There is no time limit — ~100 MB takes minutes on a slow line; Ctrl-C stops the download
// and with it `npm install`, and `ELECTRON_SKIP_BINARY_DOWNLOAD=1 npm install` skips it. A failure
// is one warning with the command that retries it; everything except the desktop shell runs
// under plain Node, so until then `npm start` runs the headless host.
//
// Then it builds the `leasehold` command's bundle, out/cli/ (scripts/cli-bundle.js; about half a
// second), which `leasehold serve` runs instead of compiling its TypeScript at every start. A
// failure is one warning: the command runs its sources through tsx instead, as it would anyway
// once a source file changes.
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { buildCliBundle } from './cli-bundle.js'

const require = createRequire(import.meta.url)

/** Electron's installer (node_modules/electron/install.js, the command that retries, too). */
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
  const { version } = require('electron/package.json')
  console.error(`leasehold: checking Electron ${version}'s binary for the desktop app (a download of about 100 MB the first time; ELECTRON_SKIP_BINARY_DOWNLOAD=1 skips it)…`)
  const result = spawnSync(process.execPath, [script], { stdio: 'inherit' })
  if (result.status !== 0) {
    console.warn(
      'leasehold: the Electron binary could not be installed; `npm start` will run the headless host (leasehold serve). Retry with: node node_modules/electron/install.js',
    )
  }
}

try {
  await buildCliBundle()
} catch (error) {
  console.warn(`leasehold: the command's bundle (out/cli/) could not be built (${error.message}); leasehold runs from its TypeScript sources instead`)
}
