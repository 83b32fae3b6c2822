/**
 * `writeRegularFile`, the write under `files.writeFile`/`appendFile` and so `file.write`: a write
 * that fails leaves the file as it was, so that a failed attempt changed nothing and its retry is
 * safe. The full disks are small tmpfs mounts (root on Linux; skipped elsewhere); the size limit
 * is `ulimit -f` on a child process.
 */
import { spawnSync } from 'node:child_process'
import { chmodSync, chownSync, lstatSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, test, type TestContext } from 'vitest'
import { writeRegularFile } from '../../src-shared/regular-file'
import { tempDir } from '../helpers/host'
import { fillDisk, mountSmallDisk, type SmallDisk } from '../helpers/small-disk'

const OLD = 'old line of the config\n'.repeat(261).slice(0, 6000)
const NEW = 'new'.repeat(100_000) // 300 kB: more than the room left

let dir: string
let disk: SmallDisk | null = null

beforeEach(() => {
  dir = tempDir('leasehold-regular-file-')
})

afterEach(() => {
  disk?.unmount()
  disk = null
  rmSync(dir, { recursive: true, force: true })
})

async function failure(promise: Promise<unknown>): Promise<NodeJS.ErrnoException> {
  try {
    await promise
  } catch (error) {
    return error as NodeJS.ErrnoException
  }
  throw new Error('the write did not fail')
}

/** A file `name` holding {@link OLD} (none for null) on a disk then filled but for 8 KiB, or null with the test skipped. */
function onAFullDisk(context: TestContext, name: string | null): string | null {
  disk = mountSmallDisk(context, dir, '1m')
  if (!disk) return null
  if (name) writeFileSync(join(disk.path, name), OLD)
  fillDisk(disk.path, 8192)
  return disk.path
}

describe('a file.write that fails on a full disk leaves the file as it was', () => {
  test('a write over a file keeps its old content, and leaves nothing beside it', async (context) => {
    const full = onAFullDisk(context, 'config.txt')
    if (!full) return
    const config = join(full, 'config.txt')
    expect((await failure(writeRegularFile(config, NEW, false))).code).toBe('ENOSPC')
    expect(readFileSync(config, 'utf8')).toBe(OLD)
    expect(readdirSync(full).sort()).toEqual(['config.txt', 'filler'])
  })

  test('a write of a new file leaves no file', async (context) => {
    const full = onAFullDisk(context, null)
    if (!full) return
    for (const append of [false, true]) {
      expect((await failure(writeRegularFile(join(full, 'new.txt'), NEW, append))).code).toBe('ENOSPC')
      expect(readdirSync(full)).toEqual(['filler'])
    }
  })

  test('an append is cut back to the length the file had, so its retry appends the content once', async (context) => {
    const full = onAFullDisk(context, 'log.txt')
    if (!full) return
    const log = join(full, 'log.txt')
    expect((await failure(writeRegularFile(log, NEW, true))).code).toBe('ENOSPC')
    expect(readFileSync(log, 'utf8')).toBe(OLD)
    rmSync(join(full, 'filler')) // the disk mended: the retry
    await writeRegularFile(log, NEW, true)
    expect(readFileSync(log, 'utf8')).toBe(OLD + NEW)
  })
})

const SIZE_LIMITED = `
import { readFileSync, writeFileSync } from 'node:fs'
import { writeRegularFile } from './src-shared/regular-file.ts'
const [dir] = process.argv.slice(1)
const seen = {}
for (const append of [false, true]) {
  const path = dir + (append ? '/appended.txt' : '/written.txt')
  writeFileSync(path, 'old')
  const code = await writeRegularFile(path, 'x'.repeat(64 * 1024), append).then(() => null, (error) => error.code)
  seen[append ? 'append' : 'write'] = { code, content: readFileSync(path, 'utf8') }
}
console.log(JSON.stringify(seen))
`

test.runIf(process.platform === 'linux')('a write cut short by any other failure (EFBIG, past the file size limit) leaves the file as it was', () => {
  const run = spawnSync('bash', ['-c', 'ulimit -f 16 && exec "$0" --import tsx --input-type=module -e "$1" "$2"', process.execPath, SIZE_LIMITED, dir], {
    encoding: 'utf8',
    timeout: 30_000,
  })
  expect(run.stderr).toBe('')
  expect(JSON.parse(run.stdout)).toEqual({ write: { code: 'EFBIG', content: 'old' }, append: { code: 'EFBIG', content: 'old' } })
  expect(readdirSync(dir).sort()).toEqual(['appended.txt', 'written.txt'])
})

test('a replaced file keeps its permission bits (and its owner, where the process may set it), and a symlink to it still names it', async () => {
  const config = join(dir, 'config.txt')
  writeFileSync(config, OLD)
  chmodSync(config, 0o640)
  const root = process.getuid?.() === 0
  if (root) chownSync(config, 1234, 1235)
  const link = join(dir, 'link')
  symlinkSync('config.txt', link)
  await writeRegularFile(link, 'new', false)
  expect(lstatSync(link).isSymbolicLink()).toBe(true)
  expect(readFileSync(config, 'utf8')).toBe('new')
  const stats = statSync(config)
  expect(stats.mode & 0o777).toBe(0o640)
  if (root) expect([stats.uid, stats.gid]).toEqual([1234, 1235])
  expect(readdirSync(dir).sort()).toEqual(['config.txt', 'link'])
})

test('a write through a dangling symlink makes the file it names, the link kept', async () => {
  const link = join(dir, 'link')
  symlinkSync(join(dir, 'made.txt'), link)
  await writeRegularFile(link, 'made', false)
  expect(lstatSync(link).isSymbolicLink()).toBe(true)
  expect(readFileSync(join(dir, 'made.txt'), 'utf8')).toBe('made')
})

test('a path that ends in a separator makes no file, as an opening for writing makes none (EISDIR)', async () => {
  for (const append of [false, true]) {
    expect((await failure(writeRegularFile(join(dir, 'new.txt') + '/', 'x', append))).code).toBe('EISDIR')
    expect(readdirSync(dir)).toEqual([])
  }
})
