/**
 * What `npm install` shows of Electron's download: one line of ours, never the installer's own
 * output (an 11-line stack where github.com cannot be reached), which goes to a log the line
 * names.
 */
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, test } from 'vitest'
import { ELECTRON_LOG, failureReason, installElectron } from '../../scripts/postinstall.js'

const STACK = `RequestError: getaddrinfo ENOTFOUND github.com
    at ClientRequest.<anonymous> (/x/node_modules/got/dist/source/core/index.js:970:111)
    at Object.onceWrapper (node:events:639:26)
    at GetAddrInfoReqWrap.onlookupall [as oncomplete] (node:dns:122:26)`

let root: string
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'leasehold-postinstall-'))
})
afterEach(() => rmSync(root, { recursive: true, force: true }))

/** An installer that prints `output` on stderr and exits with `status`. */
function fakeInstaller(output: string, status: number): string {
  const script = join(root, 'install.js')
  writeFileSync(script, `process.stderr.write(${JSON.stringify(output)}); process.stdout.write('downloading…\\n'); process.exit(${status})\n`)
  return script
}

describe("Electron's download at npm install", () => {
  test('a failure is one line with its reason, the log that holds the whole error, and the command that retries', () => {
    const line = installElectron({ script: fakeInstaller(STACK, 1), root })
    expect(line).not.toContain('\n')
    expect(line).toContain("Electron's binary could not be installed (getaddrinfo ENOTFOUND github.com;")
    expect(line).toContain('electron-install.log')
    expect(line).toContain('Retry with: node node_modules/electron/install.js')
    expect(readFileSync(join(root, ELECTRON_LOG), 'utf8')).toBe(`${STACK}downloading…\n`)
  })

  test('a success says nothing, and its output is in the log too', () => {
    expect(installElectron({ script: fakeInstaller('', 0), root })).toBeNull()
    expect(readFileSync(join(root, ELECTRON_LOG), 'utf8')).toBe('downloading…\n')
  })

  test("the installer's output never reaches npm's: a process that runs it prints nothing of it", () => {
    const script = fakeInstaller(STACK, 1)
    const run = spawnSync(
      process.execPath,
      ['--input-type=module', '-e', `import { installElectron } from ${JSON.stringify(join(process.cwd(), 'scripts/postinstall.js'))}; installElectron({ script: ${JSON.stringify(script)}, root: ${JSON.stringify(root)} })`],
      { encoding: 'utf8' },
    )
    expect(run.status).toBe(0)
    expect(run.stdout + run.stderr).toBe('')
  })

  test('the reason is the error line of the output, else its last line', () => {
    expect(failureReason(STACK)).toBe('getaddrinfo ENOTFOUND github.com')
    expect(failureReason('HTTPError: Response code 404 (Not Found)\n  at x')).toBe('Response code 404 (Not Found)')
    expect(failureReason('checksum mismatch\n')).toBe('checksum mismatch')
    expect(failureReason('')).toBe('no output')
  })
})
