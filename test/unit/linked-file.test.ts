/**
 * The file a write to a path changes, its symbolic links followed (src-shared/linked-file.ts): the
 * one rule the write (regular-file.ts) and the file-lease gate it passes (src-worker/gate-path.ts)
 * both follow, so that the lease a write holds is the one of the file it writes.
 */
import { chmodSync, chownSync, existsSync, lchownSync, mkdirSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, test, type TestContext } from 'vitest'
import { linkedFile, MAX_LINKS, realPath } from '../../src-shared/linked-file'
import { writeRegularFile } from '../../src-shared/regular-file'
import { gatePath } from '../../src-worker/gate-path'
import { tempDir } from '../helpers/host'

let dir: string

beforeEach(() => {
  dir = realpathSync(tempDir('leasehold-linked-file-'))
  mkdirSync(join(dir, 'real', 'deep'), { recursive: true })
  symlinkSync(join(dir, 'real', 'deep'), join(dir, 'link'))
  writeFileSync(join(dir, 'real', 'target.txt'), 'target')
})

afterEach(() => {
  rmSync(dir, { recursive: true, force: true })
})

test('a path that is not a symlink, or is not there, is the file written, as written: its folders are the kernel\'s to follow', async () => {
  for (const path of [join(dir, 'real', 'target.txt'), `${dir}/link/new.txt`, `${dir}/link/../target.txt`, '/no/such/folder/x.txt']) {
    expect(await linkedFile(path)).toEqual({ path, loops: false })
  }
})

test('a symlink at the end is followed to the file it names, there yet or not, link after link; a relative target is taken from the real folder holding the link', async () => {
  symlinkSync(join(dir, 'real', 'target.txt'), join(dir, 'real', 'alias.txt'))
  symlinkSync(join(dir, 'real', 'new.txt'), join(dir, 'dangling'))
  symlinkSync(join(dir, 'dangling'), join(dir, 'chain'))
  symlinkSync('../later.txt', join(dir, 'real', 'deep', 'relative'))
  symlinkSync('deep/later.txt', join(dir, 'real', 'up'))
  expect(await linkedFile(join(dir, 'real', 'alias.txt'))).toEqual({ path: join(dir, 'real', 'target.txt'), loops: false })
  expect(await linkedFile(join(dir, 'dangling'))).toEqual({ path: join(dir, 'real', 'new.txt'), loops: false })
  expect(await linkedFile(join(dir, 'chain'))).toEqual({ path: join(dir, 'real', 'new.txt'), loops: false })
  // From the link's real folder (real/deep), not from `link` as spelled.
  expect(await linkedFile(`${dir}/link/relative`)).toEqual({ path: join(dir, 'real', 'later.txt'), loops: false })
  // `link/..` is the parent of the link's target (real), as the kernel takes it.
  expect(await linkedFile(`${dir}/link/../up`)).toEqual({ path: join(dir, 'real', 'deep', 'later.txt'), loops: false })
})

test('a loop of links is said after as many links as the kernel follows: the write fails with ELOOP, the gate keys it as written', async () => {
  symlinkSync(join(dir, 'loop-b'), join(dir, 'loop-a'))
  symlinkSync(join(dir, 'loop-a'), join(dir, 'loop-b'))
  // MAX_LINKS + 1 links followed from loop-a end on loop-b, as the kernel's count runs out.
  expect(MAX_LINKS % 2).toBe(0)
  expect(await linkedFile(join(dir, 'loop-a'))).toEqual({ path: join(dir, 'loop-b'), loops: true })
  await expect(writeRegularFile(join(dir, 'loop-a'), 'x', false)).rejects.toMatchObject({ code: 'ELOOP', path: join(dir, 'loop-b') })
  expect(await gatePath(join(dir, 'loop-a'), true)).toBe(join(dir, 'loop-b'))
  // A chain of exactly MAX_LINKS links is followed to its end.
  for (let i = 0; i < MAX_LINKS; i++) symlinkSync(join(dir, `hop-${i + 1}`), join(dir, `hop-${i}`))
  expect(await linkedFile(join(dir, 'hop-0'))).toEqual({ path: join(dir, `hop-${MAX_LINKS}`), loops: false })
})

test('the names it reads are made text by nameOf: fs\'s decoding by default, and a strict one may refuse a name that is not valid UTF-8', async () => {
  const bad = Buffer.concat([Buffer.from(join(dir, 'real', 'x')), Buffer.from([0xff])])
  symlinkSync(bad, join(dir, 'to-bad'))
  expect(await linkedFile(join(dir, 'to-bad'))).toEqual({ path: join(dir, 'real', 'x\uFFFD'), loops: false })
  const strict = (bytes: Buffer) => new TextDecoder('utf-8', { fatal: true }).decode(bytes)
  await expect(linkedFile(join(dir, 'to-bad'), strict)).rejects.toThrow(TypeError)
})

test('the write and the gate agree on the file: each spelling writes the file its gate key names', async () => {
  symlinkSync(join(dir, 'real', 'target.txt'), join(dir, 'real', 'alias.txt'))
  symlinkSync(join(dir, 'link', 'made.txt'), join(dir, 'dangling'))
  symlinkSync('../target.txt', join(dir, 'real', 'deep', 'relative'))
  const spellings = [`${dir}/real/alias.txt`, `${dir}/link/../alias.txt`, `${dir}/dangling`, `${dir}/link/relative`, `${dir}/link/new.txt`, `${dir}/link/../target.txt`]
  for (const [i, path] of spellings.entries()) {
    const key = await gatePath(path, true)
    await writeRegularFile(path, `written ${i}`, false)
    expect(readFileSync(key, 'utf8')).toBe(`written ${i}`)
  }
})

test('realPath, which follows the links itself to check each, finds what realpath finds, and fails where it fails', async () => {
  symlinkSync(join(dir, 'real', 'target.txt'), join(dir, 'real', 'alias.txt'))
  symlinkSync('deep/../target.txt', join(dir, 'real', 'relative'))
  symlinkSync('real/target.txt/', join(dir, 'to-file-as-folder'))
  symlinkSync('.', join(dir, 'real', 'here'))
  symlinkSync(join(dir, 'loop-b'), join(dir, 'loop-a'))
  symlinkSync(join(dir, 'loop-a'), join(dir, 'loop-b'))
  const spellings = ['link', 'link/', 'link/..', 'link/../alias.txt', 'real/relative', 'real/here/here/deep/.', 'real/alias.txt/', 'real/target.txt/..', 'real/target.txt/.', 'to-file-as-folder', 'link/nothing', 'loop-a']
  for (const spelling of [...spellings.map((path) => `${dir}/${path}`), '/', '.', 'node_modules/vitest']) {
    const real = await realPath(spelling).catch((error: NodeJS.ErrnoException) => error.code)
    let expected: string | undefined
    try {
      expected = realpathSync.native(spelling) // realpath(3), as fs/promises has it (realpathSync takes `..` as written)
    } catch (error) {
      expected = (error as NodeJS.ErrnoException).code
    }
    expect([spelling, real]).toEqual([spelling, expected])
  }
})

describe("a symlink in a shared folder (sticky and writable by anyone, as /tmp) is followed only when its owner is the follower or the folder's owner, as the kernel's fs.protected_symlinks has it, whatever the machine's setting", () => {
  /** Another user than the test's: nobody. */
  const OTHER = 65534
  let shared: string
  let victim: string

  /** The shared folder and a private file of the test's user (victim.txt, 0600) that another user may not write; skipped without root. */
  function aSharedFolder(context: TestContext, mode = 0o1777): boolean {
    // A link another user owns is made by giving it away (lchown), which only root may do.
    if (process.getuid?.() !== 0) {
      context.skip('it needs root to give a symlink to another user (lchown)')
      return false
    }
    shared = join(dir, 'shared')
    mkdirSync(shared)
    chmodSync(shared, mode)
    victim = join(dir, 'victim.txt')
    writeFileSync(victim, 'ORIGINAL')
    chmodSync(victim, 0o600)
    return true
  }

  /** A symlink at `path` to `target`, owned by `uid`. */
  function linkOf(uid: number, target: string, path: string): string {
    symlinkSync(target, path)
    lchownSync(path, uid, uid)
    return path
  }

  const refusal = (link: string) => ({ code: 'EACCES', retryable: false, message: expect.stringContaining(`${link} is a symbolic link another user owns (uid ${OTHER}) in a shared folder, ${dir}/shared`) })

  test("another user's link is refused, EACCES and not retryable, by the write (its target untouched, a dangling one making nothing) and by the gate", async (context) => {
    if (!aSharedFolder(context)) return
    const report = linkOf(OTHER, victim, join(shared, 'report.txt'))
    const dangling = linkOf(OTHER, join(dir, 'made.txt'), join(shared, 'dangling'))
    for (const link of [report, dangling]) {
      for (const append of [false, true]) await expect(writeRegularFile(link, 'job content', append, true)).rejects.toMatchObject(refusal(link))
      await expect(gatePath(link, true)).rejects.toMatchObject(refusal(link))
    }
    expect(readFileSync(victim, 'utf8')).toBe('ORIGINAL')
    expect(existsSync(join(dir, 'made.txt'))).toBe(false)
  })

  test("another user's link to a folder is refused wherever Leasehold follows it: in the folder of a link the write follows, and in every path the gate keys", async (context) => {
    if (!aSharedFolder(context)) return
    const folder = linkOf(OTHER, join(dir, 'real'), join(shared, 'folder'))
    symlinkSync(join(dir, 'real', 'target.txt'), join(dir, 'real', 'alias.txt'))
    const onTheWay = (path: string) => ({ ...refusal(folder), message: expect.stringMatching(`^EACCES: ${folder} is .* \\(on the way to ${path}\\)$`) })
    await expect(writeRegularFile(`${folder}/alias.txt`, 'job content', false)).rejects.toMatchObject(onTheWay(`${folder}/alias.txt`))
    expect(readFileSync(join(dir, 'real', 'target.txt'), 'utf8')).toBe('target')
    for (const followLast of [true, false]) await expect(gatePath(`${folder}/new.txt`, followLast)).rejects.toMatchObject(onTheWay(`${folder}/new.txt`))
    // The follower's own link, aimed through another user's link: the gate follows that one too.
    const mine = linkOf(0, `${folder}/new.txt`, join(shared, 'mine'))
    await expect(gatePath(mine, true)).rejects.toMatchObject(onTheWay(mine))
  })

  test("the same link is followed once its owner is the follower, or the folder's owner", async (context) => {
    if (!aSharedFolder(context)) return
    const link = linkOf(OTHER, victim, join(shared, 'report.txt'))
    await expect(writeRegularFile(link, 'refused', false)).rejects.toMatchObject(refusal(link))
    lchownSync(link, 0, 0)
    expect(await gatePath(link, true)).toBe(victim)
    await writeRegularFile(link, 'mine', false)
    lchownSync(link, OTHER, OTHER)
    chownSync(shared, OTHER, OTHER)
    expect(await gatePath(link, true)).toBe(victim)
    await writeRegularFile(link, " and the folder owner's", true)
    expect(readFileSync(victim, 'utf8')).toBe("mine and the folder owner's")
    const folder = linkOf(OTHER, join(dir, 'real'), join(shared, 'folder'))
    expect(await gatePath(`${folder}/target.txt`, true)).toBe(join(dir, 'real', 'target.txt'))
  })

  test("only a folder both sticky and writable by anyone is shared: another user's link elsewhere is followed as any link is", async (context) => {
    if (!aSharedFolder(context)) return
    const link = linkOf(OTHER, victim, join(shared, 'report.txt'))
    const dangling = linkOf(OTHER, join(dir, 'made.txt'), join(shared, 'dangling'))
    await expect(gatePath(link, true)).rejects.toMatchObject(refusal(link))
    for (const mode of [0o777, 0o1755]) {
      chmodSync(shared, mode)
      rmSync(join(dir, 'made.txt'), { force: true })
      expect(await gatePath(link, true)).toBe(victim)
      await writeRegularFile(link, `written in a folder of mode ${mode.toString(8)}`, false)
      await writeRegularFile(dangling, 'made', true)
      expect([readFileSync(victim, 'utf8'), readFileSync(join(dir, 'made.txt'), 'utf8')]).toEqual([`written in a folder of mode ${mode.toString(8)}`, 'made'])
    }
  })
})
