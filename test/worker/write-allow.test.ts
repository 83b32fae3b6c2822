/**
 * `--write-allow` holds the built-in file.write to the folders it lists, judging the file a
 * write lands in (its links followed, as the write follows them); `none` turns it off; without
 * the flag it writes anywhere its user may, as it always did. A refused write fails at once,
 * not retried, as `write_not_allowed`, its message naming where the list is set. The handler is
 * run in this process first; then through serve's local workers and `leasehold worker`.
 */
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { fileWriteHandler } from '../../src-worker/handlers/file-write'
import type { HandlerContext } from '../../src-worker/handler-api'
import type { WriteAllow } from '../../src-shared/write-allow'
import { writeRegularFile } from '../../src-shared/regular-file'
import { ConfigError, parseServeArgs } from '../../src-main/config'
import { runCli } from '../helpers/process'
import { tempDir } from '../helpers/host'
import { cleanUp, killChildren, poolReady, settled, spawnWorker, startHost, submit, workerStarted } from './support'

let dir: string
/** The folder the lists allow, and one beside it they do not. */
let allowed: string
let outside: string

beforeAll(() => {
  dir = tempDir()
  allowed = join(dir, 'allowed')
  outside = join(dir, 'outside')
  mkdirSync(allowed)
  mkdirSync(outside)
})

type Outcome = { result?: unknown; error?: { code: string; retryable: boolean; message: string } }

/** Runs one file.write job with `allow`, its gated writes made as the worker's are (the gate granting). */
async function write(allow: WriteAllow, payload: unknown): Promise<Outcome> {
  const files = {
    writeFile: (path: string, data: string) => writeRegularFile(path, data, false),
    appendFile: (path: string, data: string) => writeRegularFile(path, data, true),
  }
  const ctx = { job: { id: 'j', type: 'file.write', attempt_id: 'a', max_runtime_s: null }, payload, files, signal: new AbortController().signal, progress() {}, log() {} } as unknown as HandlerContext
  try {
    return { result: await fileWriteHandler(allow, 'leasehold worker --write-allow').run(ctx) }
  } catch (error) {
    return { error: error as Outcome['error'] }
  }
}

describe('file.write under --write-allow', () => {
  test('a write under an allowed folder is written, in a folder below it too', async () => {
    mkdirSync(join(allowed, 'sub'), { recursive: true })
    for (const path of [join(allowed, 'a.txt'), join(allowed, 'sub', 'b.txt')]) {
      expect((await write([allowed], { path, content: 'yes' })).result).toMatchObject({ path, bytes: 3 })
      expect(readFileSync(path, 'utf8')).toBe('yes')
    }
    expect((await write([allowed], { path: join(allowed, 'a.txt'), content: '+', mode: 'append' })).result).toMatchObject({ mode: 'append' })
    expect(readFileSync(join(allowed, 'a.txt'), 'utf8')).toBe('yes+')
  })

  test('a write outside the allowed folders fails as write_not_allowed, not retried, naming the flag, and writes nothing', async () => {
    // `allowed-not` shares the folder's name as text, and `allowed/../outside` spells its way out.
    mkdirSync(`${allowed}-not`, { recursive: true })
    for (const path of [join(outside, 'x.txt'), `${allowed}-not/x.txt`, `${allowed}/../outside/y.txt`, allowed]) {
      const { error } = await write([allowed], { path, content: 'no' })
      expect(error).toMatchObject({ code: 'write_not_allowed', retryable: false })
      expect(error!.message).toContain(`is not under a folder this worker may write in (leasehold worker --write-allow: ${allowed})`)
    }
    expect(existsSync(join(outside, 'x.txt'))).toBe(false)
    expect(existsSync(join(outside, 'y.txt'))).toBe(false)
    expect(existsSync(`${allowed}-not/x.txt`)).toBe(false)
  })

  test('a write whose link leads outside the allowed folders fails as write_not_allowed: a link to a file, dangling or not, and a linked folder', async () => {
    const target = join(outside, 'authorized_keys')
    writeFileSync(target, 'kept')
    symlinkSync(target, join(allowed, 'keys'))
    symlinkSync(join(outside, 'new.txt'), join(allowed, 'dangling'))
    symlinkSync(outside, join(allowed, 'elsewhere'))
    for (const path of [join(allowed, 'keys'), join(allowed, 'dangling'), join(allowed, 'elsewhere', 'z.txt')]) {
      const { error } = await write([allowed], { path, content: 'ssh-ed25519 AAAA' })
      expect(error).toMatchObject({ code: 'write_not_allowed', retryable: false })
      expect(error!.message).toContain(`(it lands at ${outside}/`)
    }
    expect(readFileSync(target, 'utf8')).toBe('kept')
    expect(existsSync(join(outside, 'new.txt'))).toBe(false)
    expect(existsSync(join(outside, 'z.txt'))).toBe(false)
  })

  test('a link that leads into an allowed folder, and an allowed folder listed through a link, are written', async () => {
    symlinkSync(join(allowed, 'via-link.txt'), join(outside, 'into'))
    symlinkSync(allowed, join(dir, 'allowed-link'))
    expect((await write([allowed], { path: join(outside, 'into'), content: 'in' })).result).toBeDefined()
    expect(readFileSync(join(allowed, 'via-link.txt'), 'utf8')).toBe('in')
    expect((await write([join(dir, 'allowed-link')], { path: join(allowed, 'c.txt'), content: 'c' })).result).toBeDefined()
    expect(readFileSync(join(allowed, 'c.txt'), 'utf8')).toBe('c')
  })

  test('--write-allow none refuses every write as write_not_allowed, saying the list allows folders', async () => {
    const path = join(allowed, 'none.txt')
    const { error } = await write([], { path, content: 'no' })
    expect(error).toMatchObject({ code: 'write_not_allowed', retryable: false })
    expect(error!.message).toBe('file.write: writes are off on this worker (leasehold worker --write-allow: none); a folder listed there allows the writes under it')
    expect(existsSync(path)).toBe(false)
  })

  test('without --write-allow a write lands anywhere the worker may write, as before the flag', async () => {
    const path = join(outside, 'anywhere.txt')
    expect((await write(null, { path, content: 'ok' })).result).toMatchObject({ path, bytes: 2 })
    expect(readFileSync(path, 'utf8')).toBe('ok')
  })
})

describe('--write-allow is read as serve and leasehold worker take it', () => {
  test('serve: folders (resolved), none, LEASEHOLD_WRITE_ALLOW, and anywhere without either', () => {
    expect(parseServeArgs([], {}).writeAllow).toBeNull()
    expect(parseServeArgs(['--write-allow', '/srv/out/, /tmp/a/../b'], {}).writeAllow).toEqual(['/srv/out', '/tmp/b'])
    expect(parseServeArgs(['--write-allow', 'none'], {}).writeAllow).toEqual([])
    expect(parseServeArgs([], { LEASEHOLD_WRITE_ALLOW: '/srv/out' }).writeAllow).toEqual(['/srv/out'])
  })

  test('serve refuses a relative folder, and none beside folders, naming the flag or the variable', () => {
    expect(() => parseServeArgs(['--write-allow', 'out'], {})).toThrow(ConfigError)
    expect(() => parseServeArgs(['--write-allow', 'out'], {})).toThrow(/^--write-allow takes absolute folders: "out" is a relative path/)
    expect(() => parseServeArgs([], { LEASEHOLD_WRITE_ALLOW: 'none,/srv' })).toThrow(/^LEASEHOLD_WRITE_ALLOW takes none alone/)
  })

  test('leasehold worker refuses a relative folder at start, exit 2, in one line naming the flag', () => {
    const { status, stderr } = runCli(['worker', '--url', 'http://127.0.0.1:9', '--token', 'x'.repeat(32), '--write-allow', 'out/files'])
    expect(status).toBe(2)
    expect(stderr).toContain('--write-allow takes absolute folders: "out/files" is a relative path')
  })

  test('the --help of serve and of leasehold worker say what the flag holds', () => {
    expect(runCli(['serve', '--help']).stdout).toMatch(/--write-allow FOLDERS\|none[\s\S]*env LEASEHOLD_WRITE_ALLOW/)
    expect(runCli(['worker', '--help']).stdout).toMatch(/--write-allow F,G {4}the folders file\.write may write under/)
  })
})

describe('through the workers', () => {
  afterAll(async () => {
    await killChildren()
    await cleanUp()
  })

  test("a local worker holds file.write to the host's --write-allow, and a leasehold worker with --write-allow none refuses it, each naming where its list is set", async () => {
    const host = await startHost({ workers: 1, writeAllow: [allowed] })
    await poolReady(host, 1)
    const inside = await submit(host, { job_type: 'file.write', payload: { path: join(allowed, 'local.txt'), content: 'local' } })
    const off = await submit(host, { job_type: 'file.write', max_attempts: 3, payload: { path: join(outside, 'local.txt'), content: 'x' } })
    expect((await settled(host, inside, 10_000)).job.state).toBe('DONE')
    expect(readFileSync(join(allowed, 'local.txt'), 'utf8')).toBe('local')
    const refused = await settled(host, off, 10_000)
    expect(refused.job.state).toBe('FAILED')
    expect(refused.result!.attempts).toBe(1)
    expect(refused.result!.error).toMatchObject({
      code: 'write_not_allowed',
      retryable: false,
      message: `file.write: ${join(outside, 'local.txt')} is not under a folder this worker may write in (the host's --write-allow, or LEASEHOLD_WRITE_ALLOW: ${allowed})`,
    })
    expect(existsSync(join(outside, 'local.txt'))).toBe(false)

    const worker = spawnWorker(host, ['--streams', 'remote', '--write-allow', 'none'])
    await workerStarted(worker)
    const remote = await submit(host, { job_type: 'file.write', queue: 'remote', payload: { path: join(allowed, 'remote.txt'), content: 'x' } })
    expect((await settled(host, remote, 10_000)).result!.error).toMatchObject({
      code: 'write_not_allowed',
      retryable: false,
      message: 'file.write: writes are off on this worker (leasehold worker --write-allow: none); a folder listed there allows the writes under it',
    })
    expect(existsSync(join(allowed, 'remote.txt'))).toBe(false)
  })
})
