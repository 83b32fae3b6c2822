/**
 * The path a handler's file change asks the gate for (src-worker/gate-path.ts): the file the
 * kernel will change, whatever spelling the handler used.
 */
import { mkdirSync, realpathSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { expect, test } from 'vitest'
import { gatePath, shownPath, UnnamablePath } from '../../src-worker/gate-path'
import { tempDir } from '../helpers/host'

function aTree(): string {
  const dir = realpathSync(tempDir())
  mkdirSync(join(dir, 'real', 'deep'), { recursive: true })
  symlinkSync(join(dir, 'real', 'deep'), join(dir, 'link'))
  writeFileSync(join(dir, 'real', 'target.txt'), '')
  symlinkSync(join(dir, 'real', 'target.txt'), join(dir, 'real', 'alias.txt'))
  return dir
}

test('a write is keyed by the file it reaches: past a symlinked folder, `..` after one, and a symlink at the end', async () => {
  const dir = aTree()
  expect(await gatePath(`${dir}/link/new.txt`, true)).toBe(join(dir, 'real', 'deep', 'new.txt'))
  expect(await gatePath(`${dir}/link/../new.txt`, true)).toBe(join(dir, 'real', 'new.txt'))
  expect(await gatePath(`${dir}/real/alias.txt`, true)).toBe(join(dir, 'real', 'target.txt'))
})

test('a write through a symlink whose target is not there yet is keyed by the file it will create, as once it exists', async () => {
  const dir = aTree()
  symlinkSync(join(dir, 'real', 'new.txt'), join(dir, 'dangling'))
  symlinkSync('deep/later.txt', join(dir, 'real', 'relative'))
  symlinkSync(join(dir, 'dangling'), join(dir, 'chain'))
  expect(await gatePath(`${dir}/dangling`, true)).toBe(join(dir, 'real', 'new.txt'))
  expect(await gatePath(`${dir}/link/../relative`, true)).toBe(join(dir, 'real', 'deep', 'later.txt'))
  expect(await gatePath(`${dir}/chain`, true)).toBe(join(dir, 'real', 'new.txt'))
  writeFileSync(join(dir, 'real', 'new.txt'), '')
  expect(await gatePath(`${dir}/dangling`, true)).toBe(join(dir, 'real', 'new.txt'))
  // A loop of links resolves to nothing the kernel would write: it is keyed as written.
  symlinkSync(join(dir, 'loop-b'), join(dir, 'loop-a'))
  symlinkSync(join(dir, 'loop-a'), join(dir, 'loop-b'))
  expect(await gatePath(`${dir}/loop-a`, true)).toMatch(/loop-[ab]$/)
  // rm acts on the dangling link itself.
  expect(await gatePath(`${dir}/dangling`, false)).toBe(join(dir, 'dangling'))
})

test('rm and rename are keyed by the entry they change: a symlink at the end is the link, not what it names', async () => {
  const dir = aTree()
  expect(await gatePath(`${dir}/real/alias.txt`, false)).toBe(join(dir, 'real', 'alias.txt'))
  expect(await gatePath(`${dir}/link/../alias.txt`, false)).toBe(join(dir, 'real', 'alias.txt'))
})

test('a path not there yet resolves as far as it exists, the rest as written', async () => {
  const dir = aTree()
  expect(await gatePath(`${dir}/link/a/b/../c.txt`, true)).toBe(join(dir, 'real', 'deep', 'a', 'c.txt'))
  expect(await gatePath('/no/such/folder/x.txt', true)).toBe('/no/such/folder/x.txt')
})

test('a folder whose name is not valid UTF-8 fails the change with an error naming its bytes: two such folders never share a key', async () => {
  const dir = aTree()
  for (const byte of [0xff, 0xfe]) {
    const folder = Buffer.concat([Buffer.from(`${dir}/nu`), Buffer.from([byte])])
    mkdirSync(folder)
    symlinkSync(folder, join(dir, `to-${byte}`))
  }
  for (const followLast of [true, false]) {
    await expect(gatePath(`${dir}/to-255/f.txt`, followLast)).rejects.toThrow(new UnnamablePath(Buffer.from(`${dir}/nu\xff`, 'latin1')).message)
    await expect(gatePath(`${dir}/to-254/f.txt`, followLast)).rejects.toThrow(/\/nu\\xfe: it is not valid UTF-8/)
  }
  // A symlink at the end whose target is such a name: the write is refused too.
  symlinkSync(Buffer.concat([Buffer.from(`${dir}/real/x`), Buffer.from([0xff])]), join(dir, 'real', 'to-bad'))
  await expect(gatePath(`${dir}/real/to-bad`, true)).rejects.toThrow(UnnamablePath)
  // Names that are valid UTF-8 are keyed as ever.
  mkdirSync(join(dir, 'nü'))
  expect(await gatePath(`${dir}/nü/f.txt`, true)).toBe(join(dir, 'nü', 'f.txt'))
})

test('a path with a lone surrogate is refused: it would reach the file system as another name', async () => {
  await expect(gatePath('/tmp/a\uD800b.txt', true)).rejects.toThrow(UnnamablePath)
})

test('a path the gate cannot key is refused for good (not retryable), with a code and the path: EILSEQ for a name not valid UTF-8, ENAMETOOLONG past 4096 characters', async () => {
  const dir = aTree()
  const folder = Buffer.concat([Buffer.from(`${dir}/nu`), Buffer.from([0xff])])
  mkdirSync(folder)
  symlinkSync(folder, join(dir, 'nulink'))
  const unnamable = await gatePath(`${dir}/nulink/x.txt`, true).catch((error: unknown) => error)
  expect(unnamable).toMatchObject({ code: 'EILSEQ', retryable: false })
  expect((unnamable as Error).message).toContain(`(on the way to ${dir}/nulink/x.txt)`)
  const long = `${dir}/${'a/'.repeat(2100)}x.txt`
  const tooLong = await gatePath(long, true).catch((error: unknown) => error)
  expect(tooLong).toMatchObject({ code: 'ENAMETOOLONG', retryable: false })
  expect((tooLong as Error).message).toContain(shownPath(long))
  expect(shownPath(long).length).toBeLessThan(300)
  // 4096 characters are keyed.
  const longest = `/${'b'.repeat(4095)}`
  expect(await gatePath(longest, true)).toBe(longest)
})
