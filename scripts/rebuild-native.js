// Builds better-sqlite3's native addon for Electron's ABI into out/native/better_sqlite3.node,
// leaving node_modules alone: there the addon stays built for Node, which `leasehold serve`, the
// CLI and the tests load. The desktop app passes this file to better-sqlite3 as its
// `nativeBinding` (src-main/electron.ts). Run by `npm start` before it launches Electron.
//
// It needs what an Electron install needs: the network (a prebuilt addon, or Electron's headers
// to compile against). It is skipped when the addon for this Electron version is already there.
import { spawnSync } from 'node:child_process'
import { copyFileSync, cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const require = createRequire(import.meta.url)
const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const outDir = join(root, 'out', 'native')
const target = join(outDir, 'better_sqlite3.node')
const marker = join(outDir, 'built-for.txt')

const electronVersion = require('electron/package.json').version
const sqliteDir = dirname(require.resolve('better-sqlite3/package.json'))
const sqliteVersion = require('better-sqlite3/package.json').version
const wanted = `electron ${electronVersion} better-sqlite3 ${sqliteVersion} ${process.platform}-${process.arch}\n`

if (existsSync(target) && existsSync(marker) && readFileSync(marker, 'utf8') === wanted) process.exit(0)

const work = join(outDir, 'better-sqlite3')
rmSync(work, { recursive: true, force: true })
mkdirSync(outDir, { recursive: true })
cpSync(sqliteDir, work, { recursive: true, filter: (source) => !source.startsWith(join(sqliteDir, 'build')) })

const run = (command, args) => spawnSync(command, args, { cwd: work, stdio: 'inherit', shell: process.platform === 'win32' })
// prebuild-install comes with better-sqlite3: resolve it from there.
const prebuildInstall = createRequire(join(sqliteDir, 'package.json')).resolve('prebuild-install/bin.js')
const prebuilt = run(process.execPath, [prebuildInstall, '--runtime', 'electron', '--target', electronVersion, '--arch', process.arch])
if (prebuilt.status !== 0) {
  const compiled = run('npx', ['--yes', 'node-gyp', 'rebuild', '--release', `--target=${electronVersion}`, '--dist-url=https://electronjs.org/headers', `--arch=${process.arch}`])
  if (compiled.status !== 0) {
    console.error('leasehold: could not build better-sqlite3 for Electron; the desktop app cannot open its database (leasehold serve still works)')
    process.exit(1)
  }
}
copyFileSync(join(work, 'build', 'Release', 'better_sqlite3.node'), target)
writeFileSync(marker, wanted)
rmSync(work, { recursive: true, force: true })
