/**
 * `writeRegularFile`, the write under `files.writeFile`/`appendFile` and so `file.write`: a write
 * that fails leaves the file as it was, so that a failed attempt changed nothing and its retry is
 * safe. The full disks are small tmpfs mounts (root on Linux; skipped elsewhere); the size limit
 * is `ulimit -f` on a child process.
 */
import { spawnSync } from 'node:child_process'
import { chmodSync, chownSync, lstatSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
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

describe("a write under the file's lease removes what writes of that file ended midway left beside it, and nothing else", () => {
  /** A name tempName gives a new content of `name`, with `hex` for its 12 random digits. */
  const tempOf = (name: string, hex: string) => `.${name}.leasehold-${hex}.tmp`

  test('a new file a killed write left is removed by the next write of its file, never a link, a folder, another file\'s or a name of another pattern', async () => {
    const config = join(dir, 'config.txt')
    writeFileSync(config, OLD)
    const stale = [tempOf('config.txt', '0123456789ab'), tempOf('config.txt', 'ffffffffffff')]
    for (const name of stale) writeFileSync(join(dir, name), OLD.slice(0, 100))
    writeFileSync(join(dir, 'kept.txt'), 'kept')
    const link = tempOf('config.txt', 'aaaaaaaaaaaa')
    symlinkSync('kept.txt', join(dir, link))
    const folder = tempOf('config.txt', 'bbbbbbbbbbbb')
    mkdirSync(join(dir, folder))
    writeFileSync(join(dir, folder, 'inside'), 'inside')
    const others = [
      tempOf('other.txt', '0123456789ab'), // another file's
      tempOf('config.txt.leasehold-0123456789ab.tmp', '0123456789ab'), // the new file of `config.txt.leasehold-…tmp`, not of config.txt
      `.leasehold-0123456789ab.tmp`, // a long-named file's: it says not whose
      tempOf('config.txt', '0123456789AB'),
      tempOf('config.txt', '0123456789a'),
      `${tempOf('config.txt', '0123456789ab')}~`,
      `config.txt.leasehold-0123456789ab.tmp`,
      `.config.txt.swp`,
      `.config.txt.other-0123456789ab.tmp`,
    ]
    for (const name of others) writeFileSync(join(dir, name), 'another program\'s')
    const untouched = ['config.txt', 'kept.txt', link, folder, ...others].sort()

    // Without the lease another write of the file may be under way: nothing is removed.
    await writeRegularFile(config, 'unleased', false)
    expect(readdirSync(dir).sort()).toEqual([...untouched, ...stale].sort())
    await writeRegularFile(config, 'new', false, true)
    expect(readFileSync(config, 'utf8')).toBe('new')
    expect(readdirSync(dir).sort()).toEqual(untouched)
    expect(lstatSync(join(dir, link)).isSymbolicLink()).toBe(true)
    expect(readFileSync(join(dir, 'kept.txt'), 'utf8')).toBe('kept')
    expect(readFileSync(join(dir, folder, 'inside'), 'utf8')).toBe('inside')

    // Through a symlink, the ones beside the file it names (where its new files are made); an
    // append that makes the file replaces it, and clears them too.
    mkdirSync(join(dir, 'real'))
    symlinkSync('real/linked.txt', join(dir, 'to-linked'))
    writeFileSync(join(dir, 'real', tempOf('linked.txt', 'cccccccccccc')), 'dead')
    await writeRegularFile(join(dir, 'to-linked'), 'made', true, true)
    expect(readdirSync(join(dir, 'real'))).toEqual(['linked.txt'])
  })

  test('two writes of one file at once under its lease both land: the one that clears never takes the other\'s new file, however it spells the folder', async () => {
    const config = join(dir, 'config.txt')
    const dead = tempOf('config.txt', '0123456789ab')
    writeFileSync(join(dir, dead), 'dead')
    symlinkSync('.', join(dir, 'via'))
    const big = 'x'.repeat(8 * 1024 * 1024)
    const first = writeRegularFile(join(dir, 'via', 'config.txt'), big, false, true)
    // The first write's own new file is there: the second, made meanwhile, must leave it.
    await until(() => readdirSync(dir).some((name) => name !== dead && name.startsWith('.config.txt.leasehold-')))
    const second = writeRegularFile(config, 'second', false, true)
    await expect(Promise.all([first, second])).resolves.toEqual([undefined, undefined])
    expect(readdirSync(dir).sort()).toEqual(['config.txt', 'via'])
  })

  test('a write whose new file the file\'s next holder removed (it had lost the file meanwhile) fails file_lease_lost, retryable, not as a missing folder, and the file is as that holder left it', async () => {
    const config = join(dir, 'config.txt')
    writeFileSync(config, OLD)
    const write = writeRegularFile(config, 'x'.repeat(8 * 1024 * 1024), false, true)
    let temp: string | undefined
    await until(() => (temp = readdirSync(dir).find((name) => name.startsWith('.config.txt.leasehold-'))) !== undefined)
    rmSync(join(dir, temp!)) // as the next holder's write clears it, from another worker
    await expect(write).rejects.toMatchObject({ code: 'file_lease_lost', retryable: true, path: config })
    expect(readFileSync(config, 'utf8')).toBe(OLD)
    expect(readdirSync(dir)).toEqual(['config.txt'])
  })
})

/** Resolves once `done` holds, looked at on every turn of the event loop (a write's steps run between). */
async function until(done: () => boolean): Promise<void> {
  while (!done()) await new Promise((resolve) => setImmediate(resolve))
}
