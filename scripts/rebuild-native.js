// Builds better-sqlite3's native addon for Electron's ABI into out/native/better_sqlite3.node,
// leaving node_modules alone: there the addon stays built for Node, which `leasehold serve`, the
// CLI and the tests load. The desktop app passes this file to better-sqlite3 as its
// `nativeBinding` (src-main/electron.ts). `npm start` runs it before it launches Electron (and
// falls back to the headless host when it fails); `npm run dist` runs it before packaging.
//
// First a prebuilt addon for this Electron is downloaded (prebuild-install, from better-sqlite3's
// releases); where there is none it is compiled with node-gyp against Electron's headers, which
// needs Python 3 and a C++ toolchain (README, "Desktop app"). Their output goes to
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

  const run = (command, args) => {
    const result = spawnSync(command, args, { cwd: work, encoding: 'utf8', shell: process.platform === 'win32' })
    appendFileSync(logFile, `\n$ ${command} ${args.join(' ')}\n${result.stdout ?? ''}${result.stderr ?? ''}${result.error ? `${result.error.message}\n` : ''}`)
    return result.status === 0
  }
  // prebuild-install comes with better-sqlite3: resolve it from there.
  const prebuildInstall = createRequire(join(sqliteDir, 'package.json')).resolve('prebuild-install/bin.js')
  const prebuilt = run(process.execPath, [prebuildInstall, '--runtime', 'electron', '--target', electronVersion, '--arch', process.arch])
  if (!prebuilt) {
    const [command, ...gyp] = nodeGypCommand()
    const compiled = run(command, [...gyp, 'rebuild', '--release', `--target=${electronVersion}`, '--dist-url=https://electronjs.org/headers', `--arch=${process.arch}`])
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
