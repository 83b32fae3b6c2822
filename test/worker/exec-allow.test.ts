/**
 * The exec handler's allow-list holds against the payload: the file that runs is the one the
 * worker resolves, the payload's env cannot choose which code runs, the list takes no relative
 * path, and a payload it cannot run is said so, not retried. The handler is run in this process.
 */
import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { allowedProgram, envNameAllowed, execHandler, lookUp } from '../../src-worker/handlers/exec'
import type { HandlerContext } from '../../src-worker/handler-api'
import { ConfigError, parseServeArgs } from '../../src-main/config'
import { runCli } from '../helpers/process'
import { tempDir } from '../helpers/host'

let dir: string
/** A folder holding an `echo` that leaves a marker: the program a payload would slip in. */
let evil: string
let marker: string
/** An allowed script, and a file it must never source. */
let hello: string
let rc: string

const script = (path: string, body: string) => {
  writeFileSync(path, `#!/bin/sh\n${body}\n`)
  chmodSync(path, 0o755)
}

beforeAll(() => {
  dir = tempDir()
  evil = join(dir, 'evil')
  mkdirSync(evil)
  marker = join(dir, 'pwned')
  script(join(evil, 'echo'), `touch ${marker}`)
  mkdirSync(join(dir, 'bin'))
  hello = join(dir, 'bin', 'hello.sh')
  script(hello, 'echo "hello $GREETING"')
  rc = join(dir, 'pwn.rc')
  writeFileSync(rc, `touch ${marker}\n`)
})

afterAll(() => {
  expect(existsSync(marker)).toBe(false)
})

/** Runs one exec job with `allowList`, as a worker's handler thread would. */
async function run(allowList: string[], payload: unknown): Promise<{ result?: unknown; error?: { code: string; retryable: boolean; message: string } }> {
  const ctx = { job: { id: 'j', type: 'exec', attempt_id: 'a', max_runtime_s: null }, payload, signal: new AbortController().signal, progress() {}, log() {} } as unknown as HandlerContext
  try {
    return { result: await execHandler(allowList).run(ctx) }
  } catch (error) {
    return { error: error as { code: string; retryable: boolean; message: string } }
  }
}

describe("the program that runs is the one the allow-list names, resolved in the worker's own PATH", () => {
  test("a bare name runs the file the worker's PATH finds, whatever the payload's cwd", async () => {
    const { result } = await run(['/bin/sh', 'echo'], { program: 'echo', args: ['hi'], cwd: evil })
    expect(result).toEqual({ exit_code: 0, output_tail: 'hi' })
  })

  test("the payload's env cannot set PATH: refused as invalid_payload, not retried", async () => {
    for (const env of [{ PATH: evil }, { PATH: '.' }]) {
      const { error } = await run(['echo'], { program: 'echo', args: ['hi'], cwd: evil, env })
      expect(error).toMatchObject({ code: 'invalid_payload', retryable: false })
    }
  })

  test("the worker's lookup skips relative folders of its PATH and finds only executable files", () => {
    expect(lookUp('echo', `.:evil:${join(dir, 'nowhere')}`)).toBeNull()
    writeFileSync(join(dir, 'bin', 'plain'), 'not a program')
    expect(lookUp('plain', join(dir, 'bin'))).toBeNull()
    expect(lookUp('hello.sh', join(dir, 'bin'))).toBe(hello)
  })

  test('an absolute path is allowed when the list names it or a bare name resolving to it; a relative path never', () => {
    const find = (name: string) => (name === 'hello.sh' ? hello : null)
    expect(allowedProgram(hello, [hello], find)).toEqual({ file: hello })
    expect(allowedProgram(hello, ['hello.sh'], find)).toEqual({ file: hello })
    expect(allowedProgram('hello.sh', ['hello.sh'], find)).toEqual({ file: hello })
    expect(allowedProgram('hello.sh', [hello], find)).toBeNull()
    expect(allowedProgram('bin/hello.sh', ['bin/hello.sh', hello], find)).toBeNull()
    expect(allowedProgram(join(evil, 'echo'), ['echo'], () => '/bin/echo')).toBeNull()
  })

  test("a bare name the worker's PATH does not find fails as exec_failed, saying so", async () => {
    const { error } = await run(['no-such-program-here'], { program: 'no-such-program-here' })
    expect(error).toMatchObject({ code: 'exec_failed', retryable: false, message: `exec: cannot run "no-such-program-here": not found in the worker's PATH` })
  })
})

describe("the payload's env may not set a variable that chooses which code runs", () => {
  test('BASH_ENV, LD_PRELOAD and the other loader and interpreter hooks are refused as invalid_payload; the script does not run', async () => {
    for (const name of ['BASH_ENV', 'ENV', 'LD_PRELOAD', 'LD_LIBRARY_PATH', 'DYLD_INSERT_LIBRARIES', 'BASH_FUNC_echo%%', 'PYTHONSTARTUP', 'PERL5OPT', 'RUBYOPT', 'NODE_OPTIONS', 'GIT_SSH_COMMAND', 'npm_config_script_shell', 'HOME', 'ld_preload']) {
      const { error } = await run([hello], { program: hello, env: { [name]: rc } })
      expect(error, name).toMatchObject({ code: 'invalid_payload', retryable: false })
      expect(error!.message).toContain(JSON.stringify(name))
    }
  })

  test('ordinary variables reach the program', async () => {
    expect(envNameAllowed('GREETING')).toBe(true)
    const { result } = await run([hello], { program: hello, env: { GREETING: 'there', LANG: 'C' } })
    expect(result).toEqual({ exit_code: 0, output_tail: 'hello there' })
  })
})

describe('an --exec-allow entry is an absolute path or a bare name', () => {
  test('serve refuses a relative path at start, naming the flag', () => {
    expect(() => parseServeArgs(['--exec-allow', `${hello},bin/hello.sh`], {})).toThrow(ConfigError)
    expect(() => parseServeArgs([], { LEASEHOLD_EXEC_ALLOW: './hello.sh' })).toThrow(/^LEASEHOLD_EXEC_ALLOW takes absolute paths and bare names/)
    expect(parseServeArgs(['--exec-allow', `${hello}, echo`], {}).execAllow).toEqual([hello, 'echo'])
    const { status, stderr } = runCli(['serve', '--data-dir', dir, '--exec-allow', 'bin/hello.sh'])
    expect(status).toBe(2)
    expect(stderr.trim().split('\n')).toHaveLength(1)
    expect(stderr).toContain('--exec-allow takes absolute paths and bare names')
  })

  test('leasehold worker refuses a relative path at start, naming the flag (exit 2)', () => {
    const { status, stderr } = runCli(['worker', '--url', 'http://127.0.0.1:7996', '--token', 'x'.repeat(32), '--exec-allow', 'bin/hello.sh'])
    expect(status).toBe(2)
    expect(stderr.trim().split('\n')).toHaveLength(1)
    expect(stderr).toContain('--exec-allow takes absolute paths and bare names')
  })
})

describe('a payload exec cannot run is said so', () => {
  test('a NUL in program, args, env or cwd is invalid_payload, not retried', async () => {
    for (const payload of [
      { program: 'echo\0' },
      { program: 'echo', args: ['a\0b'] },
      { program: 'echo', env: { A: 'x\0y' } },
      { program: 'echo', env: { 'A\0B': 'x' } },
      { program: 'echo', env: { 'A=B': 'x' } },
      { program: 'echo', cwd: `${dir}\0` },
    ]) {
      expect((await run(['echo'], payload)).error, JSON.stringify(payload)).toMatchObject({ code: 'invalid_payload', retryable: false })
    }
  })

  test('a cwd that does not exist fails as exec_failed naming the folder, not retried', async () => {
    const missing = join(dir, 'missing')
    expect((await run(['echo'], { program: 'echo', cwd: missing })).error).toMatchObject({
      code: 'exec_failed',
      retryable: false,
      message: `exec: cannot run "echo": cwd "${missing}" does not exist on this worker`,
    })
    expect((await run(['echo'], { program: 'echo', cwd: hello })).error).toMatchObject({ code: 'exec_failed', message: `exec: cannot run "echo": cwd "${hello}" is not a folder` })
  })
})
