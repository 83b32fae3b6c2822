import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Redis } from 'ioredis'
import { afterEach, beforeAll, describe, expect, test } from 'vitest'
import { parseServeArgs } from '../../src-main/config'
import type { RedisHealth } from '../../src-main/http/views/system'
import { AWAY_REPORT_MS, UNANSWERED_AFTER_MS } from '../../src-main/redis/relay'
import { startTestHost, type TestHost, tempDir } from '../helpers/host'
import { runCliAsync, startServe } from '../helpers/process'
import { SseReader } from '../helpers/sse'
import { until } from '../helpers/until'
import { type TestRedis, useTestRedis } from './redis-server'

const redis = useTestRedis()
let server: TestRedis
let admin: Redis
let host: TestHost | null = null
beforeAll(() => ({ server, admin } = redis.get()))
afterEach(async () => {
  await host?.dispose()
  host = null
  if (server.pid === undefined) await server.restart()
  await admin.flushall()
})

const entries = async (queue = 'default') => (await admin.xrange(`leasehold:q:${queue}`, '-', '+')).map(([id, fields]) => ({ id, job_id: fields[1] }))

async function submitJob(h: { url: string; token: string }): Promise<{ job_id: string }> {
  const res = await fetch(`${h.url}/api/scheduler/jobs/submit`, {
    method: 'POST',
    headers: { authorization: `Bearer ${h.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ job_type: 'test', cost_units: 1 }),
  })
  expect(res.status).toBe(201)
  return ((await res.json()) as { job: { job_id: string } }).job
}

describe('leasehold serve --redis', () => {
  test('--redis and LEASEHOLD_REDIS name the Redis URL; none by default; anything but redis:// or rediss:// is refused', () => {
    expect(parseServeArgs([], {}).redisUrl).toBeNull()
    expect(parseServeArgs(['--redis', 'rediss://u:p@cache:6380/2'], {}).redisUrl).toBe('rediss://u:p@cache:6380/2')
    expect(parseServeArgs([], { LEASEHOLD_REDIS: 'redis://127.0.0.1:6379/0' })).toMatchObject({ redisUrl: 'redis://127.0.0.1:6379/0', redisPrefix: 'leasehold:' })
    expect(() => parseServeArgs(['--redis', 'http://cache'], {})).toThrow('--redis must be a URL of the form redis://[user:password@]host[:port][/db], or rediss:// for TLS (got "http://cache")')
  })

  test("a submit is XADDed to its queue's stream, and the worker API's claim answers the message's Redis id", async () => {
    host = await startTestHost({ redisUrl: server.url })
    const { job_id } = await submitJob(host)
    const [entry] = await until(async () => {
      const found = await entries()
      return found.length > 0 ? found : null
    }, 5000, 'message XADDed')
    expect(entry!.job_id).toBe(job_id)
    const res = await host.call('/internal/worker/claim', { method: 'POST', json: { worker_id: 'w1', streams: ['default'], max_wait_ms: 0 } })
    expect(await res.json()).toMatchObject({ claimed: true, job_id, message_id: entry!.id })
  })

  test('without --redis nothing is written to Redis and the health names no Redis', async () => {
    host = await startTestHost()
    await submitJob(host)
    expect(await (await host.call('/api/health')).json()).toEqual({ ok: true, version: expect.any(String), storage: 'read_write' })
    expect(await admin.dbsize()).toBe(0)
  })

  test('while Redis is down submits still commit; /api/health and leasehold status say so with how many messages wait', async () => {
    host = await startTestHost({ redisUrl: server.url })
    await until(async () => ((await (await host!.call('/api/health')).json()) as { redis: { connected: boolean } }).redis.connected, 5000, 'connected')
    await server.kill()
    await until(async () => !((await (await host!.call('/api/health')).json()) as { redis: { connected: boolean } }).redis.connected, 5000, 'seen down')
    for (let i = 0; i < 3; i++) await submitJob(host)
    expect(await (await host.call('/api/health')).json()).toMatchObject({ ok: true, redis: { connected: false, waiting: 3, url: server.url } })
    const status = await runCliAsync(['status', '--url', host.url, '--token', host.token])
    expect(status.stdout).toMatch(/^redis {5}NOT connected \(redis:\/\/127\.0\.0\.1:\d+\/0, no answer for \d+ s\): jobs still run; 3 messages wait in the outbox/m)
    await server.restart()
    await until(async () => (await entries()).length === 3, 10_000, 'published once Redis is back')
    expect(await (await host.call('/api/health')).json()).toMatchObject({ redis: { connected: true, waiting: 0, oldest_wait_ms: null } })
  })

  test('a Redis that stops answering with its connection open (SIGSTOP) reads not connected within a few seconds, with how long, in /api/health, leasehold status and the event stream; connected again once it answers, and the log says so', async () => {
    const lines: string[] = []
    host = await startTestHost({ redisUrl: server.url }, { log: (line) => lines.push(line) })
    const health = async () => ((await (await host!.call('/api/health')).json()) as { redis: RedisHealth }).redis
    await until(async () => (await health()).connected, 5000, 'connected')
    const stream = new SseReader(await host.call('/api/events/stream'))
    const frames = () => stream.messages.filter((m) => m.event === 'redis').map((m) => JSON.parse(m.data!) as RedisHealth)
    process.kill(server.pid!, 'SIGSTOP')
    try {
      const stoppedAt = Date.now()
      const silent = await until(async () => {
        const h = await health()
        return h.connected ? null : h
      }, UNANSWERED_AFTER_MS + 3000, 'seen silent')
      expect(Date.now() - stoppedAt).toBeLessThan(UNANSWERED_AFTER_MS + 2500)
      expect(silent.unanswered_ms).toBeGreaterThanOrEqual(UNANSWERED_AFTER_MS - 1000)
      await stream.until(() => frames().some((h) => !h.connected))
      await submitJob(host)
      const status = await runCliAsync(['status', '--url', host.url, '--token', host.token])
      expect(status.stdout).toMatch(/^redis {5}NOT connected \(redis:\/\/127\.0\.0\.1:\d+\/0, no answer for \d+ s\): jobs still run; 1 message waits in the outbox/m)
    } finally {
      process.kill(server.pid!, 'SIGCONT')
    }
    try {
      await stream.until(() => frames().at(-1)!.connected, 5000)
      await until(async () => (await entries()).length === 1, 5000, 'published once Redis answers')
      expect(await health()).toMatchObject({ connected: true, unanswered_ms: null, waiting: 0 })
      expect(lines.filter((line) => line.includes('answers again'))).toEqual([expect.stringMatching(/^leasehold: Redis at redis:\/\/127\.0\.0\.1:\d+\/0 answers again/)])
    } finally {
      await stream.close()
    }
  }, 30_000)

  test('a Redis that answers and refuses what the host sends (out of memory) reads connected and refusing, with its words, in /api/health and leasehold status, until it takes them again', async () => {
    host = await startTestHost({ redisUrl: server.url })
    const health = async () => ((await (await host!.call('/api/health')).json()) as { redis: RedisHealth }).redis
    await until(async () => (await health()).connected, 5000, 'connected')
    await admin.config('SET', 'maxmemory', '1')
    try {
      const refusing = await until(async () => {
        const h = await health()
        return h.refused ? h : null
      }, 5000, 'the refusal seen')
      expect(refusing).toMatchObject({ connected: true, refused: expect.stringMatching(/^OOM /) })
      const status = await runCliAsync(['status', '--url', host.url, '--token', host.token])
      expect(status.stdout).toMatch(/^redis {5}connected to redis:\/\/127\.0\.0\.1:\d+\/0, and REFUSING what the host sends \(OOM .*\): jobs still run; /m)
    } finally {
      await admin.config('SET', 'maxmemory', '0')
    }
    await until(async () => (await health()).refused === null, 5000, 'taken again')
  })

  test('a --redis URL whose server does not speak the Redis protocol (an HTTP port) is said as such, in one line, in the log, /api/health and leasehold status', async () => {
    const http = createServer((_req, res) => res.end('not redis'))
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
    try {
      const url = `redis://127.0.0.1:${(http.address() as AddressInfo).port}/0`
      const lines: string[] = []
      host = await startTestHost({ redisUrl: url }, { log: (line) => lines.push(line) })
      const words = /the server at that address does not speak the Redis protocol \(its answer began with "H"\): check the host and port of the Redis URL/
      const health = await until(async () => {
        const h = ((await (await host!.call('/api/health')).json()) as { redis: RedisHealth }).redis
        return h.refused ? h : null
      }, 5000, 'the fault in health')
      expect(health).toMatchObject({ connected: false, refused: expect.stringMatching(words) })
      expect(lines).toContainEqual(expect.stringMatching(new RegExp(`^leasehold: Redis at redis://127\\.0\\.0\\.1:\\d+/0: ${words.source}; messages wait in the outbox$`)))
      expect(lines.join('\n')).not.toMatch(/Protocol error|Please report this/)
      const status = await runCliAsync(['status', '--url', host.url, '--token', host.token])
      expect(status.stdout).toMatch(new RegExp(`^redis {5}NOT connected \\(redis://127\\.0\\.0\\.1:\\d+/0: ${words.source}\\)`, 'm'))
    } finally {
      await host?.dispose()
      host = null
      http.close()
    }
  })

  test('a Redis that refuses the host as it connects (its user deleted) reads not connected, with Redis\'s words, in /api/health and leasehold status', async () => {
    await admin.call('ACL', 'SETUSER', 'doomed', 'on', '>secret', '~*', '&*', '+@all')
    try {
      host = await startTestHost({ redisUrl: server.url.replace('redis://', 'redis://doomed:secret@') })
      const health = async () => ((await (await host!.call('/api/health')).json()) as { redis: RedisHealth }).redis
      await until(async () => (await health()).connected, 5000, 'connected')
      await admin.call('ACL', 'DELUSER', 'doomed') // its connections close; every reconnect is refused
      const refused = await until(async () => {
        const h = await health()
        return !h.connected && h.refused ? h : null
      }, 10_000, 'the refusal seen')
      expect(refused.refused).toMatch(/WRONGPASS/)
      const status = await runCliAsync(['status', '--url', host.url, '--token', host.token])
      expect(status.stdout).toMatch(/^redis {5}NOT connected \(redis:\/\/doomed:\*+@127\.0\.0\.1:\d+\/0: WRONGPASS .*\): jobs still run; /m)
    } finally {
      await host?.dispose()
      host = null
      await admin.call('ACL', 'DELUSER', 'doomed')
    }
  })

  test('the event stream says what Redis is: first, when it is lost (again every 5 s with the messages waiting) and when it is back; without --redis it says nothing', async () => {
    host = await startTestHost({ redisUrl: server.url })
    await until(async () => ((await (await host!.call('/api/health')).json()) as { redis: { connected: boolean } }).redis.connected, 5000, 'connected')
    const stream = new SseReader(await host.call('/api/events/stream'))
    const told = () => stream.messages.filter((m) => m.event === 'redis').map((m) => JSON.parse(m.data!) as { connected: boolean; waiting: number; url: string })
    try {
      await stream.until(() => told().length >= 1)
      expect(told()[0]).toEqual({ url: server.url, connected: true, unanswered_ms: null, prefix: 'leasehold:', prefix_taken_by: null, refused: null, waiting: 0, oldest_wait_ms: null })
      expect(stream.messages[0]!.id).toBeUndefined() // not an event of the log: a resume goes on after the last logged one

      await server.kill()
      await stream.until(() => told().some((h) => !h.connected))
      for (let i = 0; i < 2; i++) await submitJob(host)
      await stream.until(() => told().some((h) => !h.connected && h.waiting === 2), AWAY_REPORT_MS + 3000)
      expect(told().at(-1)).toMatchObject({ connected: false, waiting: 2, oldest_wait_ms: expect.any(Number) })

      await server.restart()
      await stream.until(() => told().at(-1)!.connected, 10_000)
      expect(told().at(-1)).toMatchObject({ connected: true })
    } finally {
      await stream.close()
    }

    await host.dispose()
    host = await startTestHost()
    const plain = new SseReader(await host.call('/api/events/stream'))
    await submitJob(host)
    await plain.until((m) => m.some((e) => e.event === 'JOB_SUBMITTED'))
    await plain.close()
    expect(plain.messages.map((m) => m.event)).not.toContain('redis')
  })

  test('a host stops while Redis is away or coming back: a command queued for it does not hold the stop', async () => {
    for (const moment of ['away', 'coming back']) {
      host = await startTestHost({ redisUrl: server.url })
      await until(async () => ((await (await host!.call('/api/health')).json()) as { redis: { connected: boolean } }).redis.connected, 5000, 'connected')
      await server.kill()
      await until(async () => !((await (await host!.call('/api/health')).json()) as { redis: { connected: boolean } }).redis.connected, 5000, 'seen down')
      if (moment === 'coming back') await server.restart()
      await host.dispose() // the test's timeout is what fails when the stop waits for Redis
      host = null
      if (server.pid === undefined) await server.restart()
    }
  }, 20_000)

  test('a host stops while Redis refuses its user (deleted as it ran): the pass Redis never answers does not hold the stop, and its message stays for the next host', async () => {
    await admin.call('ACL', 'SETUSER', 'short-lived', 'on', '>secret', '~*', '&*', '+@all')
    const url = server.url.replace('redis://', 'redis://short-lived:secret@')
    const dataDir = tempDir()
    try {
      host = await startTestHost({ redisUrl: url, dataDir })
      await submitJob(host)
      await until(async () => (await entries()).length === 1, 5000, 'the first job published')
      await admin.call('ACL', 'DELUSER', 'short-lived')
      // Committed before the host has heard its connection close: its pass writes to the closed one, and ioredis keeps it for a reconnect that never succeeds.
      const job = host.engine.submit({ job_type: 'test', cost_units: 1 }).job
      await new Promise((resolve) => setTimeout(resolve, 1500))
      const started = Date.now()
      await host.stop() // the data dir kept for the next host
      host = null
      expect(Date.now() - started).toBeLessThan(5_000)
      await admin.call('ACL', 'SETUSER', 'short-lived', 'on', '>secret', '~*', '&*', '+@all')
      host = await startTestHost({ redisUrl: url, dataDir })
      await until(async () => (await entries()).some((entry) => entry.job_id === job.id), 5000, 'published by the next host')
      expect(await entries()).toHaveLength(2)
    } finally {
      await admin.call('ACL', 'DELUSER', 'short-lived')
    }
  }, 30_000)

  test('jobs queued while the host ran without --redis are in their streams, in order, once it runs with it, and a restart adds none twice', async () => {
    const dataDir = tempDir()
    const token = async () => (await import('node:fs')).readFileSync(`${dataDir}/token`, 'utf8').trim()
    const serve = async (redis: boolean) => startServe(['--data-dir', dataDir, '--port', '0', ...(redis ? ['--redis', server.url] : [])])
    const without = await serve(false)
    const queued: string[] = []
    try {
      for (let i = 0; i < 3; i++) queued.push((await submitJob({ url: without.url, token: await token() })).job_id)
    } finally {
      without.child.kill('SIGTERM')
      await without.exited
    }
    expect(await admin.dbsize()).toBe(0)

    for (const start of [1, 2]) {
      const withRedis = await serve(true)
      try {
        await until(async () => (await entries()).length === queued.length, 10_000, `the queued jobs' messages in the stream (start ${start})`)
        expect((await entries()).map((entry) => entry.job_id)).toEqual(queued)
        const status = await runCliAsync(['status', '--url', withRedis.url, '--token', await token()])
        expect(status.stdout).toMatch(/^redis .*connected.*0 messages wait in the outbox/m)
        if (start === 1) queued.push((await submitJob({ url: withRedis.url, token: await token() })).job_id)
        await until(async () => (await entries()).length === queued.length, 10_000, 'the later job in the stream')
      } finally {
        withRedis.child.kill('SIGTERM')
        await withRedis.exited
      }
    }
    expect((await entries()).map((entry) => entry.job_id)).toEqual(queued)
  })

  test('a host killed between COMMIT and XADD publishes the message when it starts again', async () => {
    const dataDir = tempDir()
    const args = ['--data-dir', dataDir, '--port', '0', '--redis', server.url]
    const first = await startServe(args, { LEASEHOLD_FAULT_KILL_BEFORE_XADD: '1' })
    const token = (await import('node:fs')).readFileSync(`${dataDir}/token`, 'utf8').trim()
    await submitJob({ url: first.url, token }).catch(() => {}) // the process dies before it answers
    await first.exited
    expect(await entries()).toEqual([])
    const second = await startServe(args)
    try {
      const list = (await (await fetch(`${second.url}/api/scheduler/jobs`, { headers: { authorization: `Bearer ${token}` } })).json()) as { jobs: { job_id: string }[] }
      expect(list.jobs).toHaveLength(1)
      await until(async () => (await entries()).length === 1, 10_000, 'published after the restart')
      expect((await entries())[0]!.job_id).toBe(list.jobs[0]!.job_id)
    } finally {
      second.child.kill('SIGTERM')
      await second.exited
    }
  })
})
