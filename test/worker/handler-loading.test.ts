import { chmodSync, chownSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { loadHandlers } from '../../src-worker/handlers'
import { until } from '../helpers/until'
import { WORKER_HELP } from '../../src-worker/command'

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

/** A folder of handler files (name → source), removed after the test. */
function folderWith(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-handlers-'))
  dirs.push(dir)
  for (const [name, source] of Object.entries(files)) writeFileSync(join(dir, name), source, { mode: 0o644 }) // not group-writable, whatever the umask
  return dir
}

test('two handler files of one job type: the later in name order runs it, and the earlier is reported as a handler that did not load, naming the other', async () => {
  const dir = folderWith({
    'a-resize.mjs': "export default { type: 'resize', run: () => 'a' }",
    'b-resize.mjs': "export default { type: 'resize', run: () => 'b' }",
    'other.mjs': "export default { type: 'other', run: () => 'o' }",
  })
  const { handlers, problems } = await loadHandlers({ handlersDir: dir, execAllow: [] })
  expect(await handlers.get('resize')!.run({} as never)).toBe('b')
  expect(problems).toEqual([{ file: join(dir, 'a-resize.mjs'), error: 'job type "resize" is exported by b-resize.mjs too, which loads after it (in name order) and runs it' }])
})

test('a worker whose exec allow-list is empty does not run exec: the type is not among those it takes; with programs on the list it is', async () => {
  const none = await loadHandlers({ handlersDir: null, execAllow: [] })
  expect([...none.handlers.keys()].sort()).toEqual(['file.write', 'noop', 'sleep'])
  const some = await loadHandlers({ handlersDir: null, execAllow: ['/usr/bin/true'] })
  expect([...some.handlers.keys()].sort()).toEqual(['exec', 'file.write', 'noop', 'sleep'])
})

test("a handler file whose own code throws as it loads is reported with the line of the throw", async () => {
  const dir = folderWith({ 'throws.mjs': "const size = 1\nif (size) throw new Error('no config')\nexport default { type: 'throws', run: () => 1 }\n" })
  const { problems } = await loadHandlers({ handlersDir: dir, execAllow: [] })
  expect(problems).toEqual([{ file: join(dir, 'throws.mjs'), error: 'no config (throws.mjs line 2)' }])
})

test('a handler file whose job type the host would refuse (over 200 characters, a U+0000, a lone surrogate) is reported naming the file and the rule, and skipped; the others and the built-ins load', async () => {
  const dir = folderWith({
    'long.mjs': "export const type = 'x'.repeat(300); export function run() { return 1 }",
    'nul.mjs': "export const type = 'bad\\u0000type'; export function run() { return 1 }",
    'lone.mjs': "export const type = 'bad\\ud800'; export function run() { return 1 }",
    'fine.mjs': "export const type = 'fine'; export function run() { return 1 }",
  })
  const { handlers, problems } = await loadHandlers({ handlersDir: dir, execAllow: [] })
  expect([...handlers.keys()].sort()).toEqual(['file.write', 'fine', 'noop', 'sleep'])
  expect(problems).toEqual([
    { file: join(dir, 'lone.mjs'), error: 'its job type "bad\\ud800" is not one the host takes: must be well-formed Unicode without U+0000 (no lone surrogates)' },
    { file: join(dir, 'long.mjs'), error: `its job type "${'x'.repeat(40)}"… (300 characters) is not one the host takes: Too big: expected string to have <=200 characters` },
    { file: join(dir, 'nul.mjs'), error: 'its job type "bad\\u0000type" is not one the host takes: must be well-formed Unicode without U+0000 (no lone surrogates)' },
  ])
})

test('a handler file whose type or run is wrong is reported saying which: an empty type as a type the host refuses, a type that is no string, a run that is no function', async () => {
  const dir = folderWith({
    'empty.mjs': "export const type = ''; export function run() { return 1 }",
    'number.mjs': 'export const type = 123; export function run() { return 1 }',
    'defobj.mjs': "export default { type: 'm.defobj', run: 'not a function' }",
    'norun.mjs': "export const type = 'm.norun'",
    'neither.mjs': "export const name = 'not a handler'",
  })
  const { handlers, problems } = await loadHandlers({ handlersDir: dir, execAllow: [] })
  expect([...handlers.keys()].sort()).toEqual(['file.write', 'noop', 'sleep'])
  expect(problems).toEqual([
    { file: join(dir, 'defobj.mjs'), error: 'its default export\'s run is not a function (a string: "not a function")' },
    { file: join(dir, 'empty.mjs'), error: 'its job type "" is not one the host takes: Too small: expected string to have >=1 characters' },
    { file: join(dir, 'neither.mjs'), error: 'does not export {type, run}' },
    { file: join(dir, 'norun.mjs'), error: 'its run is not a function (none)' },
    { file: join(dir, 'number.mjs'), error: 'its type is not a string (a number: 123)' },
  ])
})

test('a handler file exporting {type, run} both as its default export and as named exports is reported as not loaded, unless both are the same handler', async () => {
  const dir = folderWith({
    'both.mjs': "export default { type: 'm.default', run: () => 'd' }\nexport const type = 'm.named'\nexport function run() { return 'n' }",
    'same.mjs': "export const type = 'm.same'\nexport function run() { return 's' }\nexport default { type, run }",
  })
  const { handlers, problems } = await loadHandlers({ handlersDir: dir, execAllow: [] })
  expect([...handlers.keys()].sort()).toEqual(['file.write', 'm.same', 'noop', 'sleep'])
  expect(problems).toEqual([
    { file: join(dir, 'both.mjs'), error: 'exports {type, run} both as its default export (type a string: "m.default") and as named exports (type a string: "m.named"), which differ: export one of them' },
  ])
})

test('a handler file whose top-level await never settles is reported as not loaded within the bound, and skipped; the others load', async () => {
  const dir = folderWith({
    'tla.mjs': "await new Promise(() => {}); export const type = 'tla'; export function run() { return 1 }",
    'fine.mjs': "export const type = 'fine'; export function run() { return 1 }",
  })
  const { handlers, problems } = await loadHandlers({ handlersDir: dir, execAllow: [], loadTimeoutMs: 300 })
  expect(handlers.has('fine')).toBe(true)
  expect(handlers.has('tla')).toBe(false)
  expect(problems).toEqual([{ file: join(dir, 'tla.mjs'), error: 'did not finish loading within 0.3 s (a top-level await that has not settled?)' }])
})

test('a handler file that calls process.exit() as it loads is reported with the line of the call, and the others load: the thread is not ended', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-handlers-'))
  dirs.push(dir)
  writeFileSync(join(dir, 'exits.mjs'), "export const type = 'exits'\nprocess.exit(3)\nexport function run() { return 1 }\n")
  writeFileSync(join(dir, 'fine.mjs'), "export default { type: 'fine', run: () => 'ok' }")
  const exit = process.exit
  const { handlers, problems } = await loadHandlers({ handlersDir: dir, execAllow: [] })
  expect(problems).toEqual([{ file: join(dir, 'exits.mjs'), error: 'called process.exit(3) as it loaded (exits.mjs line 2)' }])
  expect(await handlers.get('fine')!.run({} as never)).toBe('ok')
  await new Promise((resolve) => setImmediate(resolve))
  expect(process.exit).toBe(exit) // a handler that calls it as it runs ends its thread, as workers.md says
})

test("while the modules load, Node's own call of process.exit (a thread that ends on an uncaught error) ends the thread: thrown, it would abort the process", async () => {
  const dir = folderWith({ 'slow.mjs': "await new Promise((resolve) => setTimeout(resolve, 300)); export const type = 'slow'; export function run() { return 1 }" })
  const exit = process.exit
  const exits: unknown[] = []
  const standIn = ((code?: number) => void exits.push(code)) as typeof process.exit
  process.exit = standIn
  try {
    const loading = loadHandlers({ handlersDir: dir, execAllow: [] })
    await until(() => process.exit !== standIn, 2000, 'the modules to start loading')
    expect(() => process.exit(2)).toThrow('called process.exit(2) as it loaded') // a module's own call
    // As Node's handler of an uncaught error in a worker thread calls it, `_exiting` set first.
    const state = process as { _exiting?: boolean }
    state._exiting = true
    try {
      process.exit(1)
    } finally {
      state._exiting = false
    }
    expect(exits).toEqual([1])
    expect((await loading).handlers.has('slow')).toBe(true)
  } finally {
    process.exit = exit
  }
})

describe('handlers another user may have written are not loaded (as ssh refuses a key file others can change)', () => {
  /** A module of job type `file.write` (replacing the built-in) that leaves a file at `marker` when its code runs. */
  function planted(marker: string): string {
    return `import { writeFileSync } from 'node:fs'\nwriteFileSync(${JSON.stringify(marker)}, 'ran')\nexport default { type: 'file.write', run: () => 'planted' }\n`
  }
  const markerDir = () => {
    const dir = mkdtempSync(join(tmpdir(), 'leasehold-marker-'))
    dirs.push(dir)
    return join(dir, 'ran')
  }

  test('a handlers folder writable by its group or others: none of its modules is loaded or run, reported as a handler that did not load with its mode and the fix; the built-ins stay', async () => {
    const marker = markerDir()
    const dir = folderWith({ 'evil.mjs': planted(marker) })
    chmodSync(dir, 0o777)
    const { handlers, problems, fileOf } = await loadHandlers({ handlersDir: dir, execAllow: [] })
    expect(problems).toEqual([
      {
        file: dir,
        error: `the handlers folder is writable by its group and others (mode 0777): another user could put a handler in it, which would run as this user; none of its handlers is loaded; run \`chmod go-w ${dir}\` and restart the worker`,
      },
    ])
    expect(existsSync(marker)).toBe(false)
    expect(fileOf).toEqual({})
    expect([...handlers.keys()].sort()).toEqual(['file.write', 'noop', 'sleep'])
  })

  test('a handler module writable by its group or by others is not loaded or run, and reported so; the other modules of the folder load', async () => {
    const marker = markerDir()
    const dir = folderWith({ 'evil.mjs': planted(marker), 'group.mjs': planted(marker), 'fine.mjs': "export default { type: 'fine', run: () => 'ok' }" })
    chmodSync(join(dir, 'evil.mjs'), 0o646)
    chmodSync(join(dir, 'group.mjs'), 0o664)
    const { problems, fileOf } = await loadHandlers({ handlersDir: dir, execAllow: [] })
    expect(problems).toEqual([
      { file: join(dir, 'evil.mjs'), error: `it is writable by others (mode 0646): another user could change its code, which would run as this user; run \`chmod go-w ${join(dir, 'evil.mjs')}\` and restart the worker` },
      { file: join(dir, 'group.mjs'), error: `it is writable by its group (mode 0664): another user could change its code, which would run as this user; run \`chmod go-w ${join(dir, 'group.mjs')}\` and restart the worker` },
    ])
    expect(existsSync(marker)).toBe(false)
    expect(fileOf).toEqual({ fine: join(dir, 'fine.mjs') })
  })

  test("a handler module or a handlers folder another user owns is not loaded or run; root's are", async (context) => {
    if (process.platform === 'win32' || process.getuid?.() !== 0) return context.skip('it needs root to give a file to another user')
    const marker = markerDir()
    const dir = folderWith({ 'evil.mjs': planted(marker), 'fine.mjs': "export default { type: 'fine', run: () => 'ok' }" })
    chownSync(join(dir, 'evil.mjs'), 65534, 65534)
    const one = await loadHandlers({ handlersDir: dir, execAllow: [] })
    expect(one.problems).toEqual([
      { file: join(dir, 'evil.mjs'), error: `it is owned by uid 65534 (mode 0644), not by this user (uid 0): another user could change its code, which would run as this user; run \`chown 0 ${join(dir, 'evil.mjs')}\` and restart the worker` },
    ])
    expect(one.fileOf).toEqual({ fine: join(dir, 'fine.mjs') })
    chownSync(dir, 65534, 65534)
    const all = await loadHandlers({ handlersDir: dir, execAllow: [] })
    expect(all.problems).toEqual([{ file: dir, error: expect.stringMatching(/^the handlers folder is owned by uid 65534 \(mode 0700\), not by this user \(uid 0\): .*; none of its handlers is loaded; run `chown 0 \S+` and restart the worker$/) }])
    expect(existsSync(marker)).toBe(false)
  })
})

test('leasehold worker --help gives --concurrency its range, 1–256, with its default', () => {
  expect(WORKER_HELP).toMatch(/--concurrency N +jobs at once \(1–256\), sharing up to 4 handler threads \[32\]/)
})
