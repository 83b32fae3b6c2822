import { spawn } from 'node:child_process'
import { chmodSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { afterEach, describe, expect, test, vi } from 'vitest'
import { LockFile } from '../../src-main/db/lock-file'
import { readRunningHost, runningHost, runningHostFrom } from '../../src-main/desktop/running-host'
import { processAlive } from '../../src-shared/client-target'
import { startTestHost, tempDir, type TestHost } from '../helpers/host'
import { startServe } from '../helpers/process'

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

  test("a process of another user (EPERM) is not alive: it is none of the user's hosts", () => {
    const kill = vi.spyOn(process, 'kill').mockImplementation(() => {
      throw Object.assign(new Error('kill EPERM'), { code: 'EPERM' })
    })
    try {
      expect(processAlive(4242)).toBe(false)
    } finally {
      kill.mockRestore()
    }
  })
})

describe('runningHost (the window opened on a host already running)', () => {
  test("a host.json left by a killed host, whose pid is now another live process of the user, is no host: the port it names is asked nothing, and the window's token goes nowhere", async () => {
    const dataDir = tempDir()
    const other = spawn(process.execPath, ['-e', 'setInterval(() => {}, 60_000)'], { stdio: 'ignore' })
    const heard: string[] = []
    const listener = createServer((req, res) => {
      heard.push(req.url ?? '')
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}')
    })
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve))
    try {
      // The killed host's files, with its pid now the other process's: in host.json and the lock
      // file alike (the lock itself the OS dropped at the kill).
      const lock = LockFile.open(join(dataDir, 'host.lock'))
      lock.hold(other.pid!)
      lock.release()
      writeFileSync(join(dataDir, 'host.json'), JSON.stringify({ url: `http://127.0.0.1:${(listener.address() as AddressInfo).port}`, pid: other.pid }))
      expect(await runningHost(dataDir)).toBeNull()
      // Held by another process than the one host.json names (`leasehold check`, or a host that
      // is starting and has not yet removed the file left behind): no more the named host's.
      const held = LockFile.open(join(dataDir, 'host.lock'))
      held.hold(process.pid)
      try {
        expect(await runningHost(dataDir)).toBeNull()
      } finally {
        held.release()
      }
      expect(heard).toEqual([])
    } finally {
      other.kill()
      await new Promise((resolve) => listener.close(resolve))
      rmSync(dataDir, { recursive: true, force: true })
    }
  })

  test('a host that runs (leasehold serve) is found by its host.json, the lock it holds and its health', async () => {
    const dataDir = tempDir()
    const serve = await startServe(['--data-dir', dataDir, '--port', '0'])
    try {
      const named = JSON.parse(readFileSync(join(dataDir, 'host.json'), 'utf8')) as { pid: number }
      expect(await runningHost(dataDir)).toEqual({ url: serve.url, pid: named.pid })
    } finally {
      serve.child.kill('SIGTERM')
      await serve.exited
      rmSync(dataDir, { recursive: true, force: true })
    }
  })

  test.skipIf(process.platform === 'win32')('a host.json another user may have written (a data dir writable by others) names no host for the window: its token goes nowhere', async () => {
    const dataDir = tempDir()
    const serve = await startServe(['--data-dir', dataDir, '--port', '0'])
    try {
      chmodSync(dataDir, 0o777)
      expect(await runningHost(dataDir)).toBeNull()
      chmodSync(dataDir, 0o700)
      expect(await runningHost(dataDir)).not.toBeNull()
    } finally {
      serve.child.kill('SIGTERM')
      await serve.exited
      rmSync(dataDir, { recursive: true, force: true })
    }
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
