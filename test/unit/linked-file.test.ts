/**
 * The file a write to a path changes, its symbolic links followed (src-shared/linked-file.ts): the
 * one rule the write (regular-file.ts) and the file-lease gate it passes (src-worker/gate-path.ts)
 * both follow, so that the lease a write holds is the one of the file it writes.
 */
import { mkdirSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, expect, test } from 'vitest'
import { linkedFile, MAX_LINKS } from '../../src-shared/linked-file'
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
