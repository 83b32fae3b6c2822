/**
 * The file of scoped tokens (`leasehold token`): a file that is not one Leasehold wrote is an
 * error naming it, never taken as empty and written over; a write that fails leaves the old file
 * and no temporary file behind.
 */
import { chmodSync, chownSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { expect, test, vi } from 'vitest'
import { createScopedToken, listScopedTokens, revokeScopedToken, ScopedTokens, WORKER_TOKENS_FILE } from '../../src-main/data-dir/worker-tokens'
import { tempDir } from '../helpers/host'

test.each([
  ['not JSON', 'garbage{', 'is not JSON'],
  ['JSON of another shape', '{"tokens": 5}', 'is not a token file Leasehold wrote (tokens: '],
  ['a token without its digest', '{"tokens": [{"id": "a", "scope": "worker", "created_at": 1, "revoked_at": null}]}', 'is not a token file Leasehold wrote (tokens.0.sha256: '],
])('a token file that is %s is an error naming it, and creating or revoking a token leaves it as it was', (_what, text, message) => {
  const dir = tempDir()
  const path = join(dir, WORKER_TOKENS_FILE)
  writeFileSync(path, text)
  expect(() => listScopedTokens(dir)).toThrow(`${path} ${message}`)
  expect(() => createScopedToken(dir, 'worker')).toThrow(path)
  expect(() => revokeScopedToken(dir, 'a')).toThrow(path)
  expect(readFileSync(path, 'utf8')).toBe(text)
})

test('a token file that cannot be written (a full disk) leaves the tokens as they were and no temporary file', () => {
  const dir = tempDir()
  const first = createScopedToken(dir, 'worker')
  const before = readFileSync(join(dir, WORKER_TOKENS_FILE), 'utf8')
  // The temporary file is written through this link to /dev/full, whose every write is ENOSPC.
  symlinkSync('/dev/full', join(dir, `${WORKER_TOKENS_FILE}.${process.pid}.tmp`))
  expect(() => createScopedToken(dir, 'worker')).toThrow(`cannot write ${join(dir, WORKER_TOKENS_FILE)} (the disk is full); no token was changed`)
  expect(readFileSync(join(dir, WORKER_TOKENS_FILE), 'utf8')).toBe(before)
  expect(readdirSync(dir).sort()).toEqual([WORKER_TOKENS_FILE, 'worker-tokens.lock']) // the lock each change holds, and no temporary file
  expect(listScopedTokens(dir).map((t) => t.id)).toEqual([first.id])
})

test('the host takes no scoped token while the file is unreadable, says so once, and takes them again once it is fixed', () => {
  const dir = tempDir()
  const { token } = createScopedToken(dir, 'worker')
  const good = readFileSync(join(dir, WORKER_TOKENS_FILE), 'utf8')
  writeFileSync(join(dir, WORKER_TOKENS_FILE), 'garbage{')
  const lines: string[] = []
  let now = 0
  const clock = vi.spyOn(Date, 'now').mockImplementation(() => now)
  try {
    const tokens = new ScopedTokens(dir, (line) => lines.push(line))
    expect(tokens.scopeOf(token)).toBeNull()
    now += 5_000
    expect(tokens.scopeOf(token)).toBeNull()
    expect(lines).toEqual([expect.stringContaining(`${join(dir, WORKER_TOKENS_FILE)} is not JSON`)])
    writeFileSync(join(dir, WORKER_TOKENS_FILE), good)
    now += 5_000
    expect(tokens.scopeOf(token)).toBe('worker')
  } finally {
    clock.mockRestore()
  }
})

test('a token file others may write is refused, not served with: no scoped token works, the host says why once, and the tokens work again once it is made private', () => {
  const dir = tempDir()
  const path = join(dir, WORKER_TOKENS_FILE)
  const { token } = createScopedToken(dir, 'worker')
  chmodSync(path, 0o666)
  const lines: string[] = []
  const tokens = new ScopedTokens(dir, (line) => lines.push(line))
  expect(tokens.scopeOf(token)).toBeNull()
  expect(tokens.scopeOf(token)).toBeNull()
  expect(lines).toEqual([`leasehold: ${path} is writable by its group and others (mode 0666): another user may have added tokens to it; run \`chmod 600 ${path}\`, then \`leasehold token list\` and revoke any you did not make, or move it away to start with no scoped tokens; no worker token is taken until then`])
  expect(() => listScopedTokens(dir)).toThrow(`${path} is writable by its group and others`)
  expect(() => createScopedToken(dir, 'admin')).toThrow(`${path} is writable by its group and others`)
  chmodSync(path, 0o600)
  expect(tokens.scopeOf(token)).toBe('worker')
})

test('a token file another user owns is refused, as one others may write is', (context) => {
  if (process.platform === 'win32' || process.getuid?.() !== 0) return context.skip('it needs root to give a file to another user')
  const dir = tempDir()
  const path = join(dir, WORKER_TOKENS_FILE)
  const { token } = createScopedToken(dir, 'worker')
  chownSync(path, 65534, 65534)
  expect(() => listScopedTokens(dir)).toThrow(`${path} is owned by uid 65534 (mode 0600), not by this user (uid 0): another user may have added tokens to it; run \`chown 0 ${path}\``)
  expect(new ScopedTokens(dir).scopeOf(token)).toBeNull()
})

test('a token created while the host runs works from its first request, not only after the host next looks at the file', () => {
  const dir = tempDir()
  const now = Date.now()
  const clock = vi.spyOn(Date, 'now').mockImplementation(() => now) // no time passes: no periodic look
  try {
    const tokens = new ScopedTokens(dir)
    expect(tokens.scopeOf('no-such-token')).toBeNull()
    const { token } = createScopedToken(dir, 'worker')
    expect(tokens.scopeOf(token)).toBe('worker')
  } finally {
    clock.mockRestore()
  }
})

/** A host's view that has taken a worker token, which is then revoked; `revoked` is what the host is told. */
function revokedWhileTaken() {
  const dir = tempDir()
  const tokens = new ScopedTokens(dir)
  const revoked = vi.fn()
  const stop = tokens.watch(revoked)
  const { id, token } = createScopedToken(dir, 'worker')
  expect(tokens.scopeOf(token)).toBe('worker')
  revokeScopedToken(dir, id)
  return { tokens, token, revoked, stop }
}

test('a token revoked is refused from the host’s next check, with no time passed, and the revoke is told to the host', () => {
  const now = Date.now()
  const clock = vi.spyOn(Date, 'now').mockImplementation(() => now) // no time passes: no periodic look
  try {
    const { tokens, token, revoked, stop } = revokedWhileTaken()
    expect(tokens.scopeOf(token)).toBeNull()
    expect(revoked).toHaveBeenCalledTimes(1)
    stop()
  } finally {
    clock.mockRestore()
  }
})

test('before a waiting claim is handed work the host looks at the file, and a revoke written since is told to it then', () => {
  const { tokens, revoked, stop } = revokedWhileTaken()
  tokens.recheck()
  expect(revoked).toHaveBeenCalledTimes(1)
  stop()
})
