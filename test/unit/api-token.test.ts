/**
 * The API token a host creates on first start: 32 random bytes written as hex, so that it can
 * follow `--token` on any command line (a token that starts with `-` reads as a missing value).
 */
import { chmodSync, chownSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, expect, test } from 'vitest'
import { loadOrCreateToken } from '../../src-main/host'
import { MIN_TOKEN_CHARS } from '../../src-shared/limits'

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

function freshDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-token-'))
  dirs.push(dir)
  return dir
}

test('a created token is 64 hex digits, so it never starts with a dash', () => {
  // base64url would start with `-` in about 1 of 64 tokens: 500 tries see one almost surely.
  for (let i = 0; i < 500; i++) {
    const dir = freshDir()
    const token = loadOrCreateToken(dir, null)
    expect(token).toMatch(/^[0-9a-f]{64}$/)
    expect(readFileSync(join(dir, 'token'), 'utf8')).toBe(`${token}\n`)
    expect(statSync(join(dir, 'token')).mode & 0o777).toBe(0o600)
    rmSync(dir, { recursive: true, force: true })
  }
})

test('the token file is read back on the next start, and --token wins over it', () => {
  const dir = freshDir()
  const first = loadOrCreateToken(dir, null)
  expect(loadOrCreateToken(dir, null)).toBe(first)
  expect(loadOrCreateToken(dir, 'given-token')).toBe('given-token')
})

test('an empty token file (a crash right after its creation) is replaced by a new token', () => {
  const dir = freshDir()
  writeFileSync(join(dir, 'token'), '\n')
  const token = loadOrCreateToken(dir, null)
  expect(token).toMatch(/^[0-9a-f]{64}$/)
  expect(readFileSync(join(dir, 'token'), 'utf8')).toBe(`${token}\n`)
  expect(loadOrCreateToken(dir, null)).toBe(token)
})

test('a token file others may write is refused naming its mode and the fix, not served with; so is an empty one, not written into', () => {
  const dir = freshDir()
  const path = join(dir, 'token')
  writeFileSync(path, `${'c'.repeat(64)}\n`)
  chmodSync(path, 0o664)
  expect(() => loadOrCreateToken(dir, null)).toThrow(
    `the token file ${path} is writable by its group (mode 0664): another user may have written the token, and know it; remove the file to have a new token made, or, if you wrote the token, run \`chmod 600 ${path}\``,
  )
  expect(loadOrCreateToken(dir, 'given-token')).toBe('given-token') // --token reads no file
  writeFileSync(path, '\n')
  chmodSync(path, 0o666)
  expect(() => loadOrCreateToken(dir, null)).toThrow(`the token file ${path} is writable by its group and others (mode 0666)`)
  expect(readFileSync(path, 'utf8')).toBe('\n')
})

test('a token file another user owns is refused, even when only its owner may write it; given back to this user, it is taken', (context) => {
  if (process.platform === 'win32' || process.getuid?.() !== 0) return context.skip('it needs root to give a file to another user')
  const dir = freshDir()
  const path = join(dir, 'token')
  writeFileSync(path, `${'d'.repeat(64)}\n`, { mode: 0o600 })
  chownSync(path, 65534, 65534)
  expect(() => loadOrCreateToken(dir, null)).toThrow(`the token file ${path} is owned by uid 65534 (mode 0600), not by this user (uid 0): `)
  chownSync(path, 0, 0)
  expect(loadOrCreateToken(dir, null)).toBe('d'.repeat(64))
})

test('a token file shorter than --token may be is refused, naming the file, as --token is', () => {
  const dir = freshDir()
  writeFileSync(join(dir, 'token'), 'short\n')
  expect(() => loadOrCreateToken(dir, null)).toThrow(`the token in ${join(dir, 'token')} is shorter than ${MIN_TOKEN_CHARS} characters`)
})

test('a token file with a character an Authorization header cannot carry (a space, a control character, a non-ASCII byte) is refused, naming the file, as --token is', () => {
  for (const stored of ['a token with spaces in it', 'abcdefghijklmnop\u0007', 'abcdefghijklmnop\u00e9']) {
    const dir = freshDir()
    writeFileSync(join(dir, 'token'), `${stored}\n`)
    expect(() => loadOrCreateToken(dir, null)).toThrow(`the token in ${join(dir, 'token')} must be visible ASCII characters only`)
  }
})
