import { rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, expect, test } from 'vitest'
import { LockFile } from '../../src-main/db/lock-file'
import { answerTimeoutMs, bulkAnswerTimeoutMs, NoHostError, readHostFile, resolveClientTarget } from '../../src-shared/client-target'
import { startTestHost, tempDir, type TestHost } from '../helpers/host'

let host: TestHost | null = null
afterEach(async () => {
  await host?.dispose()
  host = null
})

test("a client command reads the host.json a host writes as that host's URL and pid", async () => {
  host = await startTestHost()
  expect(readHostFile(host.dataDir)).toEqual({ url: host.url, pid: process.pid })
})

test('a client command takes from host.json only what a host writes: an http(s) URL and a positive whole pid', async () => {
  const dataDir = tempDir()
  // The pid host.json names holds the data dir's lock: only the file's content decides.
  const lock = LockFile.open(join(dataDir, 'host.lock'))
  lock.hold(process.pid)
  try {
    writeFileSync(join(dataDir, 'token'), `${'a'.repeat(64)}\n`, { mode: 0o600 })
    const targetOf = (hostFile: string) => {
      writeFileSync(join(dataDir, 'host.json'), hostFile, { mode: 0o600 })
      return resolveClientTarget({}, { LEASEHOLD_DATA_DIR: dataDir })
    }
    expect((await targetOf(JSON.stringify({ url: 'http://127.0.0.1:7878/', pid: process.pid }))).url).toBe('http://127.0.0.1:7878')
    for (const url of ['file:///etc/passwd', 'localhost:7878', 'http://', 7878]) {
      await expect(targetOf(JSON.stringify({ url, pid: process.pid }))).rejects.toThrow(NoHostError)
    }
  } finally {
    lock.release()
    rmSync(dataDir, { recursive: true, force: true })
  }
})

test('a bulk action waits 10 minutes for its answer and any other request 30 s, unless LEASEHOLD_TIMEOUT_S sets both', async () => {
  const target = (timeout?: string) => resolveClientTarget({ url: 'http://127.0.0.1:7878', token: 'a'.repeat(64) }, { LEASEHOLD_TIMEOUT_S: timeout })
  const byDefault = await target()
  expect([answerTimeoutMs(byDefault), bulkAnswerTimeoutMs(byDefault)]).toEqual([30_000, 600_000])
  const given = await target('5')
  expect([answerTimeoutMs(given), bulkAnswerTimeoutMs(given)]).toEqual([5_000, 5_000])
  const longer = await target('3600')
  expect([answerTimeoutMs(longer), bulkAnswerTimeoutMs(longer)]).toEqual([3_600_000, 3_600_000])
})
