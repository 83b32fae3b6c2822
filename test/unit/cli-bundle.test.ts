import { execFile } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { promisify } from 'node:util'
import { afterEach, beforeEach, describe, expect, test } from 'vitest'
import { buildCliBundle, freshCliBundle, PROJECT_ROOT } from '../../scripts/cli-bundle.js'

/** A small project of the shape the builder bundles: its entries and a module they share. */
const SOURCES: Record<string, string> = {
  'package.json': '{ "type": "module" }\n',
  'tsconfig.json': '{ "compilerOptions": { "verbatimModuleSyntax": true } }\n',
  'src-main/greeting.ts': "export const greeting = (name: string): string => `hello ${name}`\n",
  'src-main/cli.ts': "import { greeting } from './greeting'\nexport async function main(argv: string[]): Promise<string> {\n  return greeting(argv[0] ?? 'world')\n}\n",
  'src-worker/main.ts': "import { greeting } from '../src-main/greeting'\nconsole.log(greeting('worker'))\n",
  'src-worker/handler-thread.ts': "console.log('thread')\n",
  'src-worker/command.ts': "export async function main(): Promise<number> {\n  return 0\n}\n",
}

let root: string
let outDir: string

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'leasehold-bundle-'))
  for (const [path, text] of Object.entries(SOURCES)) {
    mkdirSync(join(root, path, '..'), { recursive: true })
    writeFileSync(join(root, path), text)
  }
  symlinkSync(join(PROJECT_ROOT, 'node_modules'), join(root, 'node_modules')) // the builder's esbuild, through tsx
  outDir = join(root, 'out', 'cli')
})
afterEach(() => rmSync(root, { recursive: true, force: true }))

/** Rewrites a file with other bytes of the same length, and gives it back its modification time. */
function editKeepingSizeAndTime(path: string): void {
  const { atime, mtime } = statSync(path)
  const text = readFileSync(path, 'utf8')
  writeFileSync(path, text.replace('hello', 'howdy'))
  utimesSync(path, atime, mtime)
  expect(readFileSync(path, 'utf8')).not.toBe(text)
}

describe('the command bundle (out/cli) runs only while it is fresh', () => {
  test('a bundle built from the sources as they are is chosen, and runs them', async () => {
    await buildCliBundle({ root, outDir })
    const entry = freshCliBundle(outDir, root)
    expect(entry).toBe(join(outDir, 'leasehold.js'))
    const { main } = (await import(pathToFileURL(entry!).href)) as { main: (argv: string[]) => Promise<string> }
    expect(await main(['bundle'])).toBe('hello bundle')
    expect(existsSync(join(outDir, 'worker.js')) && existsSync(join(outDir, 'handler-thread.js'))).toBe(true)
  })

  test('a source file changed since the build makes it stale, even with the same size and modification time', async () => {
    await buildCliBundle({ root, outDir })
    editKeepingSizeAndTime(join(root, 'src-main/greeting.ts')) // imported, not an entry
    expect(freshCliBundle(outDir, root)).toBeNull()
  })

  test('a bundle is judged by each file\'s status alone while none changed: no file is hashed, node:crypto is not even loaded', async () => {
    await new Promise((resolve) => setTimeout(resolve, 100)) // the sources older than a tick of the file system's clock
    await buildCliBundle({ root, outDir })
    const builder = pathToFileURL(join(PROJECT_ROOT, 'scripts/cli-bundle.js')).href
    const script = `const { freshCliBundle } = await import(${JSON.stringify(builder)}); console.log(JSON.stringify([freshCliBundle(${JSON.stringify(outDir)}, ${JSON.stringify(root)}) !== null, process.moduleLoadList.includes('NativeModule crypto')]))`
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script])
    expect(JSON.parse(stdout)).toEqual([true, false])
  })

  test('a file whose status changed but not its content (its times set anew) is hashed, and the bundle is still fresh', async () => {
    await buildCliBundle({ root, outDir })
    const later = new Date(Date.now() + 60_000)
    utimesSync(join(root, 'src-main/greeting.ts'), later, later)
    utimesSync(join(outDir, 'worker.js'), later, later)
    expect(freshCliBundle(outDir, root)).toBe(join(outDir, 'leasehold.js'))
  })

  test('a file the manifest marks racy (changed within a tick of its reading) is hashed whatever its status says', async () => {
    await buildCliBundle({ root, outDir })
    const manifestPath = join(outDir, 'manifest.json')
    const manifest = JSON.parse(readFileSync(manifestPath, 'utf8'))
    const path = join(root, 'src-main/greeting.ts')
    writeFileSync(path, readFileSync(path, 'utf8').replace('hello', 'howdy'))
    const { dev, ino, size, mtimeMs, ctimeMs } = statSync(path)
    manifest.inputs['src-main/greeting.ts'] = { ...manifest.inputs['src-main/greeting.ts'], status: `${dev}:${ino}:${size}:${mtimeMs}:${ctimeMs}`, racy: true }
    writeFileSync(manifestPath, JSON.stringify(manifest))
    expect(freshCliBundle(outDir, root)).toBeNull()
  })

  test('a source file deleted since the build makes it stale', async () => {
    await buildCliBundle({ root, outDir })
    rmSync(join(root, 'src-worker/handler-thread.ts'))
    expect(freshCliBundle(outDir, root)).toBeNull()
  })

  test('a changed tsconfig.json makes it stale (it decides how TypeScript compiles)', async () => {
    await buildCliBundle({ root, outDir })
    writeFileSync(join(root, 'tsconfig.json'), '{ "compilerOptions": { "verbatimModuleSyntax": false } }\n')
    expect(freshCliBundle(outDir, root)).toBeNull()
  })

  test('a built file changed or missing makes it stale', async () => {
    await buildCliBundle({ root, outDir })
    writeFileSync(join(outDir, 'worker.js'), '// edited by hand\n', { flag: 'a' })
    expect(freshCliBundle(outDir, root)).toBeNull()
    await buildCliBundle({ root, outDir })
    const chunk = readdirSync(outDir).find((name) => name.startsWith('chunk-'))!
    rmSync(join(outDir, chunk))
    expect(freshCliBundle(outDir, root)).toBeNull()
  })

  test('no bundle, no manifest or a manifest that is not one: not chosen', async () => {
    expect(freshCliBundle(outDir, root)).toBeNull()
    await buildCliBundle({ root, outDir })
    writeFileSync(join(outDir, 'manifest.json'), '{ "format": 1, "inputs": ')
    expect(freshCliBundle(outDir, root)).toBeNull()
    writeFileSync(join(outDir, 'manifest.json'), '{ "format": 1, "inputs": {}, "outputs": {} }')
    expect(freshCliBundle(outDir, root)).toBeNull() // no builder named
    rmSync(join(outDir, 'manifest.json'))
    expect(freshCliBundle(outDir, root)).toBeNull()
  })

  test('a rebuild after a change is fresh again and replaces the old bundle whole', async () => {
    await buildCliBundle({ root, outDir })
    const before = readdirSync(outDir)
    writeFileSync(join(root, 'src-main/greeting.ts'), "export const greeting = (name: string): string => `hi ${name}!`\n")
    expect(freshCliBundle(outDir, root)).toBeNull()
    await buildCliBundle({ root, outDir })
    const entry = freshCliBundle(outDir, root)
    expect(entry).not.toBeNull()
    const { main } = (await import(`${pathToFileURL(entry!).href}?after-rebuild`)) as { main: (argv: string[]) => Promise<string> }
    expect(await main(['again'])).toBe('hi again!')
    expect(readdirSync(outDir)).not.toEqual(before) // the chunk named by its old content is gone
    expect(readdirSync(join(root, 'out'))).toEqual(['cli']) // no staging or previous directory left
  })

  test('builds running at once in several processes all succeed and leave one fresh bundle', async () => {
    const builder = pathToFileURL(join(PROJECT_ROOT, 'scripts/cli-bundle.js')).href
    const script = `const { buildCliBundle } = await import(${JSON.stringify(builder)}); await buildCliBundle(${JSON.stringify({ root, outDir })})`
    const builds = Array.from({ length: 4 }, () => promisify(execFile)(process.execPath, ['--input-type=module', '-e', script]))
    await Promise.all(builds) // rejects if any exits non-zero
    expect(freshCliBundle(outDir, root)).not.toBeNull()
    expect(readdirSync(join(root, 'out'))).toEqual(['cli'])
  })

  test('a build that fails throws and leaves the previous bundle, which is stale and so not run', async () => {
    await buildCliBundle({ root, outDir })
    writeFileSync(join(root, 'src-main/greeting.ts'), 'export const greeting = (name: string): string => `hello ${name}\n')
    await expect(buildCliBundle({ root, outDir })).rejects.toThrow(/greeting\.ts/)
    expect(existsSync(join(outDir, 'leasehold.js'))).toBe(true)
    expect(freshCliBundle(outDir, root)).toBeNull()
    expect(readdirSync(join(root, 'out'))).toEqual(['cli'])
  })
})
