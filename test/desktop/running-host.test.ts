import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { readRunningHost, runningHostFrom } from '../../src-main/desktop/running-host'
import { processAlive } from '../../src-shared/client-target'
import { startTestHost, tempDir, type TestHost } from '../helpers/host'

const alive = (pids: number[]) => (pid: number) => pids.includes(pid)
const OWN = 100

describe('runningHostFrom', () => {
  test('host.json naming a live pid is a running host', () => {
    expect(runningHostFrom('{"url":"http://127.0.0.1:7878","pid":4242}\n', alive([4242]), OWN)).toEqual({ url: 'http://127.0.0.1:7878', pid: 4242 })
  })

  test('a dead pid is a host killed with SIGKILL: nothing runs', () => {
    expect(runningHostFrom('{"url":"http://127.0.0.1:7878","pid":4242}', alive([]), OWN)).toBeNull()
  })

  test('no file, or one that is not a host record, is no host', () => {
    for (const text of [null, '', 'not json', '[]', 'null', '{"url":"http://127.0.0.1:1"}', '{"pid":4242}', '{"url":"file:///etc","pid":4242}', '{"url":"http://x","pid":-1}', '{"url":"http://x","pid":1.5}']) {
      expect(runningHostFrom(text, alive([4242, 1]), OWN)).toBeNull()
    }
  })

  test('this very process is not another host', () => {
    expect(runningHostFrom(`{"url":"http://127.0.0.1:7878","pid":${OWN}}`, alive([OWN]), OWN)).toBeNull()
  })
})

describe('processAlive', () => {
  test('this process is alive; a pid past the kernel’s limit is not', () => {
    expect(processAlive(process.pid)).toBe(true)
    expect(processAlive(2 ** 22 + 1)).toBe(false)
  })
})

describe('readRunningHost', () => {
  let host: TestHost | null = null
  afterEach(async () => {
    await host?.dispose()
    host = null
  })

  test("reads the host's own host.json: its URL and pid while it runs, nothing once it stopped", async () => {
    host = await startTestHost()
    const path = join(host.dataDir, 'host.json')
    expect(runningHostFrom(readFileSync(path, 'utf8'), () => true, -1)).toEqual({ url: host.url, pid: process.pid })
    await host.stop()
    expect(existsSync(path)).toBe(false)
    expect(readRunningHost(host.dataDir)).toBeNull()
  })

  test('a live pid other than ours is a running host; a stale host.json left by a killed host is ignored', () => {
    const dataDir = tempDir()
    try {
      const file = join(dataDir, 'host.json')
      writeFileSync(file, JSON.stringify({ url: 'http://127.0.0.1:7878', pid: process.ppid }))
      expect(readRunningHost(dataDir)).toEqual({ url: 'http://127.0.0.1:7878', pid: process.ppid })
      writeFileSync(file, JSON.stringify({ url: 'http://127.0.0.1:7878', pid: 2 ** 22 + 1 }))
      expect(readRunningHost(dataDir)).toBeNull()
    } finally {
      rmSync(dataDir, { recursive: true, force: true })
    }
  })
})
