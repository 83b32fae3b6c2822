import type { ChildProcess } from 'node:child_process'
import type { Redis } from 'ioredis'
import { afterEach, beforeAll, describe, expect, test } from 'vitest'
import { CLAIM_TTL_MS } from '../../src-main/redis/prefix-claim'
import type { RedisHealth } from '../../src-main/http/views/system'
import { prefixClaimKey, requestStream } from '../../src-shared/redis-streams'
import { startTestHost, type TestHost, tempDir } from '../helpers/host'
import { runCliAsync, type ServeProcess, startServe } from '../helpers/process'
import { SseReader } from '../helpers/sse'
import { until } from '../helpers/until'
import { watchRedis } from './monitor'
import { type TestRedis, useTestRedis } from './redis-server'

const redis = useTestRedis()
let server: TestRedis
let admin: Redis
const hosts: TestHost[] = []
const processes: ServeProcess[] = []
beforeAll(() => ({ server, admin } = redis.get()))
afterEach(async () => {
  for (const host of hosts.splice(0)) await host.dispose()
  for (const serve of processes.splice(0)) {
    if (serve.child.exitCode === null && serve.child.signalCode === null) serve.child.kill('SIGKILL')
    await serve.exited
  }
  await admin.flushall()
})

async function hostOn(prefix = 'leasehold:', dataDir = tempDir()): Promise<TestHost> {
  const host = await startTestHost({ redisUrl: server.url, redisPrefix: prefix, dataDir })
  hosts.push(host)
  return host
}

const redisHealth = async (host: TestHost) => ((await (await host.call('/api/health')).json()) as { redis: RedisHealth }).redis

/** `leasehold serve` on a data dir of its own and `server`: how it ended (killed if it still runs after 15 s: it started). */
async function serveToEnd(prefix = 'leasehold:'): Promise<{ status: number | null; stderr: string }> {
  let child!: ChildProcess
  const run = runCliAsync(['serve', '--data-dir', tempDir(), '--port', '0', '--workers', '0', '--busy', '0', '--redis', server.url, '--redis-prefix', prefix], {}, (c) => (child = c))
  const started = setTimeout(() => child.kill('SIGTERM'), 15_000)
  const { status, stderr } = await run
  clearTimeout(started)
  return { status, stderr }
}

/** The commands Redis runs from now on whose client is none of those connected now (a script's own commands excepted), until `stop`. */
async function newClientsCommands(): Promise<{ commands: string[][]; stop(): void }> {
  const known = new Set([...((await admin.client('LIST')) as string).matchAll(/ addr=(\S+)/g)].map((m) => m[1]!))
  return watchRedis(server.port, ({ source }) => !known.has(source) && source !== 'lua')
}

describe('one host per Redis prefix', () => {
  test('a second host on the prefix of a running one refuses to start with one line naming the prefix and --redis-prefix, exits 1 and touches none of its keys; on a prefix of its own it starts', async () => {
    const first = await hostOn()
    await until(async () => (await redisHealth(first)).connected, 5000, 'the first host connected')
    const watch = await newClientsCommands()
    let refused
    try {
      refused = await serveToEnd()
    } finally {
      watch.stop()
    }
    expect(refused.status).toBe(1)
    expect(refused.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(
        new RegExp(
          `^leasehold: could not start: another Leasehold host \\(pid ${process.pid} on .+, data dir ${first.dataDir}\\) uses the Redis prefix "leasehold:" on redis://127\\.0\\.0\\.1:${server.port}/0; ` +
            'each host needs a prefix of its own: give this one another with --redis-prefix; if that host is gone \\(killed\\), its claim expires in ~(9|10) s: try again then$',
        ),
      ),
    ])
    // It asked who holds the prefix, and nothing of the streams.
    expect(watch.commands.map(([name]) => name!.toLowerCase()).filter((name) => name.startsWith('x') || name === 'del')).toEqual([])
    expect(watch.commands.some(([name]) => name!.toLowerCase() === 'eval')).toBe(true)
    expect((await redisHealth(first)).prefix_taken_by).toBeNull()

    const own = await startServe(['--data-dir', tempDir(), '--port', '0', '--redis', server.url, '--redis-prefix', 'second:']) // would throw if refused
    processes.push(own)
  }, 40_000)

  test("a host on a prefix that nests with a running host's (one begins the other) refuses to start with one line naming both, exits 1, and leaves the other's streams, pending entries and answers as they were", async () => {
    // Host B on leasehold:q:, with queued and running jobs and an answer to one of its workers.
    const b = await hostOn('leasehold:q:')
    await until(async () => (await redisHealth(b)).connected, 5000, 'host B connected')
    for (let i = 0; i < 6; i++) b.engine.submit({ job_type: 'test', cost_units: 1 })
    b.engine.claimBatch({ worker_id: 'wb' }, 2)
    const bQueue = 'leasehold:q:q:default'
    const bReplies = 'leasehold:q:worker:wc:replies'
    await admin.xadd(bReplies, '*', 'body', '{"answer":1}')
    const pendingOf = async () => ((await admin.xpending(bQueue, 'leasehold')) as [number])[0]
    await until(async () => (await admin.xlen(bQueue)) === 6 && (await pendingOf()) === 2, 5000, "B's messages published and claimed")
    const before = { entries: await admin.xrange(bQueue, '-', '+'), replies: await admin.xrange(bReplies, '-', '+') }

    const nestingLine = (other: string, own: string, holderDir: string) =>
      new RegExp(
        `^leasehold: could not start: another Leasehold host \\(pid ${process.pid} on .+, data dir ${holderDir}\\) uses the Redis prefix "${other}" on redis://127\\.0\\.0\\.1:${server.port}/0, ` +
          `which nests with this host's "${own}": the keys of "leasehold:q:" are keys of "leasehold:" too, and each host would take the other's for its own; ` +
          'each host needs a prefix that neither begins another host\'s nor begins with one: give this one another with --redis-prefix$',
      )
    const shorter = await serveToEnd('leasehold:')
    expect(shorter.status).toBe(1)
    expect(shorter.stderr.trim().split('\n')).toEqual([expect.stringMatching(nestingLine('leasehold:q:', 'leasehold:', b.dataDir))])
    // It went before anything of B's was touched, and gave its own claim up.
    await new Promise((resolve) => setTimeout(resolve, 500))
    expect(await admin.xrange(bQueue, '-', '+')).toEqual(before.entries)
    expect(await pendingOf()).toBe(2)
    expect(await admin.xrange(bReplies, '-', '+')).toEqual(before.replies)
    expect(await admin.get(prefixClaimKey('leasehold:'))).toBeNull()
    expect((await redisHealth(b)).prefix_taken_by).toBeNull()
    await b.dispose()
    hosts.splice(0)

    // The other way round: a host on leasehold: runs, and one on leasehold:q: is refused.
    const a = await hostOn('leasehold:')
    await until(async () => (await redisHealth(a)).connected, 5000, 'host A connected')
    const longer = await serveToEnd('leasehold:q:')
    expect(longer.status).toBe(1)
    expect(longer.stderr.trim().split('\n')).toEqual([expect.stringMatching(nestingLine('leasehold:', 'leasehold:q:', a.dataDir))])
    expect(await admin.get(prefixClaimKey('leasehold:q:'))).toBeNull()
    expect((await redisHealth(a)).prefix_taken_by).toBeNull()

    const apart = await startServe(['--data-dir', tempDir(), '--port', '0', '--redis', server.url, '--redis-prefix', 'leasehold-two:']) // would throw if refused
    processes.push(apart)
  }, 60_000)

  test('a start refused by the claim of a host that may be gone (killed) says in how many seconds that claim expires, read from Redis, so it is tried again then', async () => {
    await admin.set(prefixClaimKey('leasehold:'), 'gone-host pid 999999 on elsewhere, data dir /srv/gone', 'PX', 7_000)
    const refused = await serveToEnd()
    expect(refused.status).toBe(1)
    expect(refused.stderr).toMatch(
      /another Leasehold host \(pid 999999 on elsewhere, data dir \/srv\/gone\) uses the Redis prefix "leasehold:" on redis:\/\/127\.0\.0\.1:\d+\/0; each host needs a prefix of its own: give this one another with --redis-prefix; if that host is gone \(killed\), its claim expires in ~[4-7] s: try again then\n/,
    )
  })

  test('a host whose prefix key holds something other than a Leasehold claim refuses to start saying so and naming the key to delete; it does not call it another Leasehold host', async () => {
    await admin.set(prefixClaimKey('leasehold:'), 'hello world')
    const refused = await serveToEnd()
    expect(refused.status).toBe(1)
    expect(refused.stderr).toMatch(/the key leasehold:host on redis:\/\/127\.0\.0\.1:\d+\/0 holds "hello world", which is no Leasehold host's claim: something else uses the Redis prefix "leasehold:"; delete that key \(DEL leasehold:host\)/)
    expect(refused.stderr).not.toMatch(/another Leasehold host/)
    expect(await admin.get(prefixClaimKey('leasehold:'))).toBe('hello world')
  })

  test('a host stopped leaves its prefix free at once; one killed keeps it from other hosts until its claim expires, and takes it back at once when restarted on its data dir', async () => {
    const dataDir = tempDir()
    const args = ['--data-dir', dataDir, '--port', '0', '--redis', server.url]
    const stopped = await startServe(args)
    processes.push(stopped)
    await until(async () => (await admin.get(prefixClaimKey('leasehold:'))) !== null, 5000, 'the prefix claimed')
    stopped.child.kill('SIGTERM')
    await stopped.exited
    expect(await admin.get(prefixClaimKey('leasehold:'))).toBeNull()
    const next = await hostOn()
    await next.dispose()
    hosts.splice(0)

    const killed = await startServe(args)
    processes.push(killed)
    await until(async () => (await admin.get(prefixClaimKey('leasehold:'))) !== null, 5000, 'the prefix claimed')
    killed.child.kill('SIGKILL')
    await killed.exited
    await expect(hostOn()).rejects.toThrow(`data dir ${dataDir}) uses the Redis prefix "leasehold:"`)
    const left = await admin.pttl(prefixClaimKey('leasehold:'))
    expect(left).toBeGreaterThan(0)
    expect(left).toBeLessThanOrEqual(CLAIM_TTL_MS)

    const restarted = await startServe(args) // would throw if refused
    processes.push(restarted)
  }, 40_000)

  test('a host whose Redis user may not run GET and SET says once in its log that it cannot check its prefix, relays as before, and claims its prefix once the ACL allows it', async () => {
    await admin.call('ACL', 'SETUSER', 'older', 'on', '>secret', '~leasehold:*', '&*', '+@stream', '+del', '+scan', '+multi', '+exec', '+eval', '+ping', '+info', '+client')
    const lines: string[] = []
    try {
      const host = await startTestHost({ redisUrl: server.url.replace('redis://', 'redis://older:secret@') }, { log: (line) => lines.push(line) })
      hosts.push(host)
      const job = host.engine.submit({ job_type: 'test', cost_units: 1 }).job
      await until(async () => (await admin.xrange('leasehold:q:default', '-', '+')).some(([, fields]) => fields[1] === job.id), 5000, 'published')
      expect(lines.filter((line) => line.includes('cannot tell whether another uses its prefix'))).toEqual([
        expect.stringMatching(/Redis refused this host's claim on leasehold:host \(.*can't run this command.*\): its user must be allowed EVAL, GET and SET there/),
      ])
      expect(await admin.get(prefixClaimKey('leasehold:'))).toBeNull()
      await admin.call('ACL', 'SETUSER', 'older', '+get', '+set')
      await until(async () => (await admin.get(prefixClaimKey('leasehold:'))) !== null, 5000, 'the prefix claimed')
    } finally {
      await admin.call('ACL', 'DELUSER', 'older')
    }
  })

  test('a running host whose prefix another host claimed stops using Redis, says so in /api/health, the event stream and leasehold status, and does not fight for it', async () => {
    const host = await hostOn()
    await until(async () => (await redisHealth(host)).connected, 5000, 'connected')
    const stream = new SseReader(await host.call('/api/events/stream'))
    try {
      const intruder = 'f00d pid 7 on elsewhere, data dir /srv/other'
      await admin.set(prefixClaimKey('leasehold:'), intruder, 'PX', 60_000)
      const health = await until(async () => {
        const h = await redisHealth(host)
        return h.prefix_taken_by ? h : null
      }, 5000, 'the other host seen')
      expect(health).toMatchObject({ connected: true, prefix: 'leasehold:', prefix_taken_by: 'pid 7 on elsewhere, data dir /srv/other' })
      await stream.until((frames) => frames.some((f) => f.event === 'redis' && JSON.parse(f.data!).prefix_taken_by !== null))

      // Nothing more is written: a job's message waits in the outbox, a worker's request is not read.
      const job = host.engine.submit({ job_type: 'test', cost_units: 1 }).job
      await new Promise((resolve) => setTimeout(resolve, 1500)) // the read of the requests in progress when it saw the claim ends
      await admin.xadd(requestStream('leasehold:'), '*', 'worker_id', 'w1', 'token', host.token, 'body', JSON.stringify({ type: 'request', id: 1, method: 'exchange', params: { worker_id: 'w1' } }))
      await new Promise((resolve) => setTimeout(resolve, 1500)) // a check of the host's, and a read of the requests if it made one
      expect(await admin.keys('leasehold:q:*')).toEqual([])
      expect(await admin.xlen(requestStream('leasehold:'))).toBe(1)
      expect((await admin.xpending(requestStream('leasehold:'), 'leasehold'))[0]).toBe(0)
      expect(await admin.get(prefixClaimKey('leasehold:'))).toBe(intruder)
      expect(await redisHealth(host)).toMatchObject({ waiting: 1, prefix_taken_by: 'pid 7 on elsewhere, data dir /srv/other' })
      expect(host.engine.getJob(job.id).state).toBe('QUEUED')

      const status = await runCliAsync(['status', '--url', host.url, '--token', host.token])
      expect(status.stdout).toContain(
        `redis     NOT USED: another Leasehold host (pid 7 on elsewhere, data dir /srv/other) uses the Redis prefix "leasehold:" on ${server.url}; ` +
          'each host needs a prefix of its own: give this one another with --redis-prefix, then restart it; jobs still run; 1 message waits in the outbox',
      )
    } finally {
      await stream.close()
    }
  }, 20_000)
})
