/**
 * The electron-builder configuration cannot be run here (it downloads Electron to package it),
 * so this checks what can be: with electron-builder's own file matcher, that every file the app
 * opens by path is packaged, that the native addon is unpacked from the asar, and that the
 * packaged binary's fuses and the installers are the ones the README promises.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { FuseV1Options } from '@electron/fuses'
import { join, relative } from 'node:path'
import { Minimatch } from 'minimatch'
import { describe, expect, test } from 'vitest'
import config, { FUSES, packagedElectron } from '../../electron-builder.config.js'
import { APP_FILES } from '../../scripts/app-files.js'

const ROOT = join(import.meta.dirname, '../..')

type Filter = (file: string, stat: { isDirectory(): boolean }) => boolean
const { FileMatcher } = createRequire(import.meta.url)('app-builder-lib/out/fileMatcher.js') as {
  FileMatcher: new (from: string, to: string, expand: (s: string) => string, patterns?: string[]) => {
    addPattern(pattern: string): void
    prependPattern(pattern: string): void
    createFilter(): Filter
  }
}
const patterns = config.files as string[]

const file = { isDirectory: () => false }
/** Whether electron-builder copies this app file (relative to the package root) into the app. */
function packaged(path: string): boolean {
  return new FileMatcher(ROOT, '/app', (s) => s, patterns).createFilter()(join(ROOT, path), file)
}
/** Whether it copies this file of a production dependency: every file but the exclusions, as electron-builder does. */
function packagedDependencyFile(path: string): boolean {
  const matcher = new FileMatcher(ROOT, '/app', (s) => s)
  for (const pattern of patterns.filter((p) => p.startsWith('!'))) matcher.addPattern(pattern)
  matcher.prependPattern('**/*')
  return matcher.createFilter()(join(ROOT, path), file)
}
function filesUnder(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(ROOT, join(entry.parentPath, entry.name)))
}

describe('the packaged app', () => {
  test('package.json "main" is the entry the app-file list names', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { main: string }
    expect(pkg.main).toBe(APP_FILES.main)
  })

  test.each([APP_FILES.main, APP_FILES.worker, APP_FILES.preload, APP_FILES.nativeAddon, APP_FILES.walVfs, 'out/main/handler-thread.js', 'package.json'])('contains %s', (path) => {
    expect(packaged(path)).toBe(true)
  })

  test('contains the built dashboard', () => {
    expect(packaged(`${APP_FILES.renderer}/index.html`)).toBe(true)
    expect(packaged(`${APP_FILES.renderer}/assets/index-abc123.js`)).toBe(true)
  })

  test('contains every migration and the journal that lists them', () => {
    const migrations = filesUnder(APP_FILES.migrations)
    expect(migrations).toContain(join(APP_FILES.migrations, 'meta', '_journal.json'))
    expect(migrations.filter((path) => path.endsWith('.sql')).length).toBeGreaterThan(0)
    for (const path of migrations) expect(packaged(path), path).toBe(true)
  })

  test('leaves the sources, tests and the native build scratch out', () => {
    for (const path of ['src-main/electron.ts', 'test/desktop/packaging.test.ts', 'scripts/start.js', 'out/native/better-sqlite3/binding.gyp', 'out/native/build.log']) {
      expect(packaged(path), path).toBe(false)
    }
  })

  test("unpacks the native addon and the SQLite extension from the asar (dlopen cannot read inside one), and nothing else", () => {
    const unpack = (config.asarUnpack as string[]).map((pattern) => new Minimatch(pattern, { dot: true }))
    expect(unpack.some((pattern) => pattern.match(APP_FILES.nativeAddon))).toBe(true)
    expect(unpack.some((pattern) => pattern.match(APP_FILES.walVfs))).toBe(true)
    expect(unpack.some((pattern) => pattern.match(APP_FILES.main))).toBe(false)
  })

  test("better-sqlite3 goes in without its sources or its Node build; its JavaScript stays", () => {
    expect(packagedDependencyFile('node_modules/better-sqlite3/lib/index.js')).toBe(true)
    expect(packagedDependencyFile('node_modules/better-sqlite3/build/Release/better_sqlite3.node')).toBe(false)
    expect(packagedDependencyFile('node_modules/better-sqlite3/deps/sqlite3/sqlite3.c')).toBe(false)
    expect(packagedDependencyFile('node_modules/koa/lib/application.js')).toBe(true)
  })

  test("electron-builder does not rebuild node_modules in place (the CLI's Node build stays)", () => {
    expect(config.npmRebuild).toBe(false)
  })

  test('makes AppImage and deb, dmg, and an NSIS installer', () => {
    expect(config.linux?.target).toEqual(['AppImage', 'deb'])
    expect(config.mac?.target).toBe('dmg')
    expect(config.win?.target).toBe('nsis')
  })
})

describe('fuses', () => {
  test('no plain-Node mode, no NODE_OPTIONS, no --inspect; the app only from the asar', () => {
    expect(FUSES[FuseV1Options.RunAsNode]).toBe(false)
    expect(FUSES[FuseV1Options.EnableNodeOptionsEnvironmentVariable]).toBe(false)
    expect(FUSES[FuseV1Options.EnableNodeCliInspectArguments]).toBe(false)
    expect(FUSES[FuseV1Options.OnlyLoadAppFromAsar]).toBe(true)
  })

  test('are flipped on the binary electron-builder laid out, per platform', () => {
    const app = { appOutDir: '/d/out', productFilename: 'Leasehold', executableName: 'leasehold' }
    expect(packagedElectron({ ...app, platform: 'darwin' })).toBe(join('/d/out', 'Leasehold.app'))
    expect(packagedElectron({ ...app, platform: 'win32' })).toBe(join('/d/out', 'Leasehold.exe'))
    expect(packagedElectron({ ...app, platform: 'linux' })).toBe(join('/d/out', 'leasehold'))
  })
})
