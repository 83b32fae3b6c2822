import type { ChildProcess } from 'node:child_process'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Redis } from 'ioredis'
import { afterEach, beforeAll, describe, expect, test } from 'vitest'
import { IpcResponse } from '../../src-shared/ipc-protocol'
import { REVOKED_TOKEN_REFUSAL } from '../../src-shared/error-codes'
import { RedisTransport } from '../../src-worker/transport-redis'
import { exchangeFailure, TransportSilence } from '../../src-worker/transport'
import { createScopedToken, revokeScopedToken } from '../../src-main/data-dir/worker-tokens'
import { ManualClock } from '../../src-main/engine/rules/clock'
import { UNANSWERED_AFTER_MS } from '../../src-main/redis/relay'
import { ANSWER_TIMEOUT_MS } from '../../src-main/redis/worker-requests'
import { limitRetryLines } from '../../src-shared/log-limiter'
import { entryField, prefixClaimKey, replyStream, requestStream } from '../../src-shared/redis-streams'
import { startTestHost, type TestHost, tempDir } from '../helpers/host'
import { runCliAsync } from '../helpers/process'
import { until } from '../helpers/until'
import { type TestRedis, useTestRedis } from './redis-server'

const redis = useTestRedis()
let server: TestRedis
let admin: Redis
let host: TestHost | null = null
const children: ChildProcess[] = []
beforeAll(() => ({ server, admin } = redis.get()))
afterEach(async () => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  await host?.dispose()
  host = null
  await admin.flushall()
})

/** `leasehold worker --redis`: no URL, and a data dir with no host file, so Redis is all it can reach. */
function remoteWorker(workerId: string, token: string, extra: string[] = [], url = server.url) {
  let child!: ChildProcess
  const done = runCliAsync(['worker', '--redis', url, '--token', token, '--worker-id', workerId, ...extra], { LEASEHOLD_DATA_DIR: tempDir(), LEASEHOLD_URL: '' }, (c) => {
    child = c
    children.push(c)
  })
  return { child, done }
}

/** `n` no-op jobs, submitted together: their ids. */
async function noops(host: TestHost, n: number): Promise<string[]> {
  const submitted = await host.engine.run(() => host.engine.submitMany(Array.from({ length: n }, () => ({ job_type: 'noop', cost_units: 1 }))))
  return submitted.map((r) => {
    if (!r.ok) throw new Error('submit failed')
    return r.value.job.id
  })
}

/** The answers on a reply stream. */
async function answersOn(stream: string, after = '-'): Promise<IpcResponse[]> {
  const entries = await admin.xrange(stream, after, '+')
  return entries.map(([, fields]) => IpcResponse.parse(JSON.parse(entryField(fields, 'body')!)))
}

/**
 * Sends one request as a remote worker would (naming a reply channel, or with `channel` sent as
 * it is), and reads the answer from the reply stream `readFrom` (the worker's own by default).
 */
async function exchangeAs(workerId: string, token: string, id: number, method: string, params: unknown, channel?: { sent: string; readFrom: string }, entryId = '*'): Promise<IpcResponse> {
  const replies = channel?.readFrom ?? replyStream('leasehold:', workerId)
  const before = (await admin.xrevrange(replies, '+', '-', 'COUNT', 1))[0]?.[0] ?? '0'
  const naming = channel ? ['channel', channel.sent] : []
  await admin.xadd(requestStream('leasehold:'), entryId, 'worker_id', workerId, 'token', token, ...naming, 'body', JSON.stringify({ type: 'request', id, method, params }))
  return until(async () => (await answersOn(replies, `(${before}`)).find((a) => a.id === id) ?? null, 5000, `answer to ${method}`)
}

/** Whether the host reads Redis connected (answering), as /api/health says. */
const redisConnected = async () => ((await (await host!.call('/api/health')).json()) as { redis: { connected: boolean } }).redis.connected

/** One exchange as worker `w1`, with the host's token, that claims a job: its answer. */
const claim = (id: number) => exchangeAs('w1', host!.token, id, 'exchange', { worker_id: 'w1', claim: { streams: ['default'], max_jobs: 1 } })

describe('remote workers over Redis only', () => {
  test('a worker process with no connection to the host runs every job over Redis, and is listed with its transport', async () => {
    host = await startTestHost({ redisUrl: server.url })
    const ids = await noops(host, 300)
    remoteWorker('remote-1', host.token, ['--concurrency', '16'])
    await until(() => ids.every((id) => host!.engine.getJob(id).state === 'DONE'), 60_000, 'every job DONE')
    const workers = (await (await host.call('/api/workers')).json()) as { workers: { worker_id: string; kind: string }[] }
    expect(workers.workers).toContainEqual(expect.objectContaining({ worker_id: 'remote-1', kind: 'redis' }))
    for (const id of ids) expect(host.engine.attempts(id)).toHaveLength(1)
  })

  test('a remote worker’s first thread claims on a reply channel of its own: every answer that grants jobs comes there, none on the stream its runtime reads', async () => {
    host = await startTestHost({ redisUrl: server.url })
    const ids = await noops(host, 200)
    remoteWorker('channeled', host.token, ['--concurrency', '16'])
    await until(() => ids.every((id) => host!.engine.getJob(id).state === 'DONE'), 60_000, 'every job DONE')
    const jobsIn = (answers: IpcResponse[]) => answers.flatMap((a) => (a.result as { jobs?: { job_id: string }[] } | undefined)?.jobs ?? []).map((j) => j.job_id)
    expect(jobsIn(await answersOn(replyStream('leasehold:', 'channeled', 'thread-0'))).sort()).toEqual([...ids].sort())
    expect(jobsIn(await answersOn(replyStream('leasehold:', 'channeled')))).toEqual([])
  })

  test('a request naming a reply channel is answered on that channel; one naming anything else, on its worker’s own stream', async () => {
    host = await startTestHost({ redisUrl: server.url })
    const claim = { worker_id: 'w3', claim: { streams: ['default'], max_jobs: 1 } }
    const onChannel = await exchangeAs('w3', host.token, 1, 'exchange', claim, { sent: 'thread-0', readFrom: replyStream('leasehold:', 'w3', 'thread-0') })
    expect(onChannel.result).toMatchObject({ jobs: [] })
    for (const [id, sent] of [[2, '../other:replies'], [3, 'replies'], [4, '']] as const) {
      const own = await exchangeAs('w3', host.token, id, 'exchange', claim, { sent, readFrom: replyStream('leasehold:', 'w3') })
      expect(own.result).toMatchObject({ jobs: [] })
    }
  })

  test('a remote worker killed mid-run: its leases expire and its jobs finish elsewhere', async () => {
    host = await startTestHost({ redisUrl: server.url, leaseTtlS: 2, heartbeatGraceS: 1 })
    const jobs = [0, 1, 2].map(() => host!.engine.submit({ job_type: 'sleep', cost_units: 1, payload: { ms: 60_000 } }).job)
    const { child } = remoteWorker('doomed', host.token, ['--concurrency', '3'])
    await until(() => jobs.every((j) => host!.engine.getJob(j.id).state === 'RUNNING'), 20_000, 'the remote worker runs them')
    child.kill('SIGKILL')
    // Another worker (in-process here) takes them once the dead one's leases expire.
    await until(async () => {
      const claims = await host!.engine.run(() => host!.engine.claimBatch({ worker_id: 'rescuer' }, 3))
      for (const g of claims.granted) host!.engine.complete({ job_id: g.job_id, attempt_id: g.attempt_id, lease_token: g.lease_token, worker_id: 'rescuer' })
      return jobs.every((j) => host!.engine.getJob(j.id).state === 'DONE')
    }, 15_000, 'finished elsewhere')
    for (const j of jobs) expect(host.engine.attempts(j.id).map((a) => a.number)).toEqual([1, 2])
  })

  test('a remote worker that dies while its claims wait is granted nothing: their waits end once Redis no longer lists the connection it read answers on', async () => {
    host = await startTestHost({ redisUrl: server.url })
    const { child } = remoteWorker('mortal', host.token)
    // Its claims wait: read by the host, not yet answered (pending in the group).
    const waiting = async () => Number(((await admin.xpending(requestStream('leasehold:'), 'leasehold').catch(() => [0])) as [number])[0])
    await until(async () => (await waiting()) >= 1, 20_000, 'a claim of the worker waiting')
    child.kill('SIGKILL')
    await until(async () => (await waiting()) === 0, 5_000, 'the dead worker’s claims answered')
    const job = host.engine.submit({ job_type: 'noop', cost_units: 1 }).job
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(host.engine.getJob(job.id)).toMatchObject({ state: 'QUEUED', attempts: 0 })
  })

  test('a job submitted while Redis is away is not granted to a remote worker that cannot hear of it: it waits, and runs as soon as Redis is back, its first attempt', async () => {
    host = await startTestHost({ redisUrl: server.url })
    remoteWorker('patient', host.token)
    const waiting = async () => Number(((await admin.xpending(requestStream('leasehold:'), 'leasehold').catch(() => [0])) as [number])[0])
    await until(async () => (await waiting()) >= 1, 20_000, 'a claim of the worker waiting')
    await server.kill()
    let back = false
    try {
      await new Promise((resolve) => setTimeout(resolve, 300)) // the host's connections see Redis gone
      const job = host.engine.submit({ job_type: 'noop', cost_units: 1, max_attempts: 1 }).job
      await new Promise((resolve) => setTimeout(resolve, 500))
      expect(host.engine.getJob(job.id)).toMatchObject({ state: 'QUEUED', attempts: 0 })
      await server.restart()
      back = true
      // Redis came back empty, its claim lost: the worker asks again as it reconnects, not once the lost claim's answer is overdue (35 s).
      await until(() => host!.engine.getJob(job.id).state === 'DONE', 15_000, 'the job DONE once Redis is back')
      expect(host.engine.getJob(job.id).attempts).toBe(1)
    } finally {
      if (!back) await server.restart()
    }
  }, 45_000)

  test('while Redis is paused (SIGSTOP) no remote worker’s claim is granted a job it could not hear of: a grant whose answer Redis does not take goes back losing no attempt, a job submitted once Redis reads silent waits QUEUED, and both run once Redis answers; the host’s log says it in its own words', async () => {
    const lines: string[] = []
    host = await startTestHost({ redisUrl: server.url }, { log: (line) => lines.push(line) })
    remoteWorker('paused', host.token)
    const waiting = async () => Number(((await admin.xpending(requestStream('leasehold:'), 'leasehold').catch(() => [0])) as [number])[0])
    await until(async () => (await waiting()) >= 1, 20_000, 'a claim of the worker waiting')
    process.kill(server.pid!, 'SIGSTOP')
    let early: string, late: string
    try {
      // Granted before the host can tell Redis is silent: its answer's write times out, and the job goes back.
      early = host.engine.submit({ job_type: 'noop', cost_units: 1, max_attempts: 1 }).job.id
      expect(host.engine.getJob(early).state).not.toBe('QUEUED')
      await until(() => host!.engine.getJob(early).state === 'QUEUED', ANSWER_TIMEOUT_MS + 3_000, 'the undelivered grant given back')
      expect(host.engine.getJob(early)).toMatchObject({ attempts: 1, max_attempts: 2, dead_letter: false })
      expect(host.engine.attempts(early)).toEqual([expect.objectContaining({ error: expect.objectContaining({ reason: 'not_delivered' }) })])
      await until(async () => !(await redisConnected()), UNANSWERED_AFTER_MS + 3_000, 'Redis read silent')
      late = host.engine.submit({ job_type: 'noop', cost_units: 1, max_attempts: 1 }).job.id
      await new Promise((resolve) => setTimeout(resolve, 1_000))
      expect(host.engine.getJob(late)).toMatchObject({ state: 'QUEUED', attempts: 0 })
    } finally {
      process.kill(server.pid!, 'SIGCONT')
    }
    await until(() => host!.engine.getJob(early).state === 'DONE' && host!.engine.getJob(late).state === 'DONE', 15_000, 'the jobs DONE once Redis answers')
    expect(host.engine.getJob(late).attempts).toBe(1)
    expect(lines.join('\n')).not.toMatch(/maxRetriesPerRequest|max retries per request|Command timed out/)
  }, 60_000)

  test('a Redis outage longer than the lease TTL costs a remote worker no lease: its leases do not expire while the host cannot hear Redis, last their TTL from its return, and its late completion counts; a remote worker that died meanwhile loses its lease one TTL after; an HTTP worker’s lease expires as ever', async () => {
    const clock = new ManualClock(Date.now())
    host = await startTestHost({ redisUrl: server.url, leaseTtlS: 2, heartbeatGraceS: 1 }, { clock })
    const [running, orphaned, overHttp] = await noops(host, 3)
    const held = (jobId: string) => host!.engine.activeLeases().some((l) => l.job_id === jobId)
    const granted = await claim(1)
    const lease = (granted.result as { jobs: { job_id: string; attempt_id: string; lease_token: string }[] }).jobs[0]!
    expect(lease.job_id).toBe(running)
    await exchangeAs('w2', host.token, 1, 'exchange', { worker_id: 'w2', claim: { streams: ['default'], max_jobs: 1 } })
    host.engine.claimBatch({ worker_id: 'http-worker' }, 1)
    expect([held(running!), held(orphaned!), held(overHttp!)]).toEqual([true, true, true])
    await server.kill()
    let back = false
    try {
      await until(async () => !(await redisConnected()), UNANSWERED_AFTER_MS + 3_000, 'Redis read away')
      clock.advance(60_000)
      // The reaper passed (the HTTP worker's lease expired), and spared the remote workers'.
      await until(() => !held(overHttp!), 5_000, 'the HTTP worker’s lease expired')
      await new Promise((resolve) => setTimeout(resolve, 500))
      expect([held(running!), held(orphaned!)]).toEqual([true, true])
      await server.restart()
      back = true
      await until(async () => await redisConnected(), 10_000, 'Redis answers again')
      const returned = clock.now()
      await until(() => host!.engine.activeLeases().find((l) => l.job_id === running)?.expires_at === returned + 3_000, 5_000, 'the lease renewed from Redis’s return')
      const done = await exchangeAs('w1', host.token, 2, 'exchange', { worker_id: 'w1', complete: [{ job_id: lease.job_id, attempt_id: lease.attempt_id, lease_token: lease.lease_token, result: { n: 1 } }] })
      expect(done).toMatchObject({ result: { completed: [{ job_id: running, ok: true }] } })
      expect(host.engine.getJob(running!)).toMatchObject({ state: 'DONE', attempts: 1 })
      clock.advance(3_001)
      await until(() => !held(orphaned!), 5_000, 'the dead remote worker’s lease expired one TTL after Redis came back')
      expect(host.engine.attempts(orphaned!)).toEqual([expect.objectContaining({ outcome: 'TIMEOUT' })])
    } finally {
      if (!back) await server.restart()
    }
  }, 60_000)

  test('a host told to stop while Redis is paused (SIGSTOP) and remote workers’ claims wait stops within seconds, not once Redis answers again', async () => {
    host = await startTestHost({ redisUrl: server.url })
    remoteWorker('stopping', host.token)
    const waiting = async () => Number(((await admin.xpending(requestStream('leasehold:'), 'leasehold').catch(() => [0])) as [number])[0])
    await until(async () => (await waiting()) >= 1, 20_000, 'a claim of the worker waiting')
    process.kill(server.pid!, 'SIGSTOP')
    try {
      await until(async () => !(await redisConnected()), UNANSWERED_AFTER_MS + 3_000, 'Redis read silent')
      const stopping = Date.now()
      await host.dispose()
      host = null
      // The answers ended by the stop cannot be written to a Redis that does not answer: none is waited for.
      expect(Date.now() - stopping).toBeLessThan(2_500)
    } finally {
      process.kill(server.pid!, 'SIGCONT')
    }
    // The stopped host left its claim on the prefix to expire (10 s), and the refreshes it sent
    // while Redis was paused reach Redis now: the next test's host needs the prefix at once.
    await new Promise((resolve) => setTimeout(resolve, 500))
    await admin.del('leasehold:host')
  }, 40_000)

  test('a worker’s reply stream of another type (a string) is deleted by the host, naming the key and the worker: the claim it could not answer gives its job back losing no attempt, and the next claim is answered there', async () => {
    const lines: string[] = []
    host = await startTestHost({ redisUrl: server.url }, { log: (line) => lines.push(line) })
    const replies = replyStream('leasehold:', 'w1')
    await admin.set(replies, 'junk')
    const job = host.engine.submit({ job_type: 'noop', cost_units: 1, max_attempts: 1 }).job
    await admin.xadd(requestStream('leasehold:'), '*', 'worker_id', 'w1', 'token', host.token, 'body', JSON.stringify({ type: 'request', id: 1, method: 'exchange', params: { worker_id: 'w1', claim: { streams: ['default'], max_jobs: 1 } } }))
    await until(() => host!.engine.getJob(job.id).state === 'QUEUED' && host!.engine.getJob(job.id).attempts === 1, 5_000, 'the grant given back')
    expect(host.engine.getJob(job.id)).toMatchObject({ max_attempts: 2, dead_letter: false })
    expect(await admin.type(replies)).toBe('none')
    expect(lines).toContainEqual(expect.stringMatching(/^leasehold: answering remote worker w1 on leasehold:worker:w1:replies failed \(WRONGTYPE .*\); leasehold:worker:w1:replies was no stream: the host deleted it/))
    expect((await claim(2)).result).toMatchObject({ jobs: [expect.objectContaining({ job_id: job.id })] })
  })

  test('a remote worker whose own reply stream holds another type deletes it itself as it starts, says so once, and loses no job: those its runtime takes over are heartbeaten and end DONE, first attempt', async () => {
    host = await startTestHost({ redisUrl: server.url, leaseTtlS: 2, heartbeatGraceS: 1 })
    const replies = replyStream('leasehold:', 'w9')
    await admin.set(replies, 'notastream')
    const jobs = [0, 1, 2].map(() => host!.engine.submit({ job_type: 'sleep', cost_units: 1, max_attempts: 1, payload: { ms: 4_000 } }).job)
    const { child } = remoteWorker('w9', host.token, ['--concurrency', '3'])
    let stderr = ''
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    await until(() => jobs.every((j) => ['DONE', 'TIMEOUT', 'FAILED'].includes(host!.engine.getJob(j.id).state)), 30_000, 'every job ended')
    expect(jobs.map((j) => host!.engine.getJob(j.id).state)).toEqual(['DONE', 'DONE', 'DONE'])
    expect(['stream', 'none']).toContain(await admin.type(replies))
    expect(stderr.match(/leasehold:worker:w9:replies was no stream \(WRONGTYPE .*\) and could hold no answer for this worker: the worker deleted it/g)).toHaveLength(1)
  }, 40_000)

  test('a remote worker whose own reply stream holds another type it may not delete (its ACL) lets its driving thread claim nothing, saying Redis refused its runtime; once the key goes every job runs', async () => {
    await admin.set(replyStream('leasehold:', 'nodel'), 'notastream')
    await asRedisUser('nodel', ['~leasehold:worker:nodel:replies*', '+xadd', '+xread', '+xrevrange', '+info', '+client|setname'], async ({ stderr, ids }) => {
      await until(() => stderr().includes('Redis refused this worker'), 10_000, 'the refusal said')
      await new Promise((resolve) => setTimeout(resolve, 1_500))
      expect(ids.map((id) => host!.engine.getJob(id))).toEqual(ids.map(() => expect.objectContaining({ state: 'QUEUED', attempts: 0 })))
      await admin.del(replyStream('leasehold:', 'nodel'))
      await allDone(ids)
    })
  })

  test('a request stream of another type: /api/health says what Redis refuses with the key, and the log names the stream; once the key is free requests are answered and the refusal goes', async () => {
    const lines: string[] = []
    host = await startTestHost({ redisUrl: server.url }, { log: (line) => lines.push(line) })
    const refused = async () => ((await (await host!.call('/api/health')).json()) as { redis: { refused: string | null } }).redis.refused
    await admin.del(requestStream('leasehold:'))
    await admin.set(requestStream('leasehold:'), 'junk')
    await until(async () => (await refused())?.startsWith('WRONGTYPE') ?? false, 5_000, 'the refusal in health')
    expect(await refused()).toMatch(/\(key leasehold:worker:requests\)$/)
    expect(lines).toContainEqual(expect.stringMatching(/^leasehold: reading remote workers' requests from leasehold:worker:requests failed \(WRONGTYPE .*\); retrying every 0.5 s/))
    await admin.del(requestStream('leasehold:'))
    expect((await claim(1)).result).toMatchObject({ jobs: [] })
    await until(async () => (await refused()) === null, 5_000, 'the refusal gone')
  })

  test('a result larger than the host takes (--body-limit) fails its job result_too_large over Redis, as over HTTP', async () => {
    host = await startTestHost({ redisUrl: server.url, bodyLimitBytes: 100_000 })
    const handlers = join(tempDir(), 'handlers')
    mkdirSync(handlers, { recursive: true })
    writeFileSync(join(handlers, 'big.mjs'), "export default { type: 'test.big', run: () => 'x'.repeat(200_000) }\n")
    remoteWorker('big-results', host.token, ['--handlers', handlers])
    const job = host.engine.submit({ job_type: 'test.big', cost_units: 1, max_attempts: 1 }).job
    await until(() => host!.engine.getJob(job.id).state === 'FAILED', 20_000, 'the job FAILED')
    expect(host.engine.attempts(job.id)[0]!.error).toMatchObject({ code: 'result_too_large' })
  })

  test('a request larger than --body-limit is refused 413 from its size, its body never parsed: answered under the id its entry names, or the id its body opens with', async () => {
    host = await startTestHost({ redisUrl: server.url, bodyLimitBytes: 1024 })
    const replies = replyStream('leasehold:', 'w1')
    const send = (...fields: string[]) => admin.xadd(requestStream('leasehold:'), '*', 'worker_id', 'w1', 'token', host!.token, ...fields)
    const answerTo = (id: number) => until(async () => (await answersOn(replies)).find((a) => a.id === id) ?? null, 5000, `the answer to ${id}`)
    // Bodies that are not even JSON past their opening: a host that parsed them could not answer.
    await send('id', '5', 'body', 'x'.repeat(5000))
    expect(await answerTo(5)).toMatchObject({ error: { status: 413, code: 'payload_too_large', detail: 'The body is larger than 1024 bytes' } })
    await send('body', `{"type":"request","id":6,"method":"exchange","params":{"worker_id":"w1","pad":"${'x'.repeat(5000)}`)
    expect(await answerTo(6)).toMatchObject({ error: { status: 413, code: 'payload_too_large' } })
    await until(async () => (await admin.xlen(requestStream('leasehold:'))) === 0, 5000, 'both acknowledged and deleted')
  })

  test('a remote worker names each request\'s id in a field of its own, beside its body', async () => {
    remoteWorker('lonely', 'a-token-no-host-checks') // no host: its first request stays in the stream
    const [, fields] = await until(async () => (await admin.xrange(requestStream('leasehold:'), '-', '+'))[0], 20_000, 'a request sent')
    expect(entryField(fields, 'id')).toBe(String((JSON.parse(entryField(fields, 'body')!) as { id: number }).id))
  })

  test('a host whose Redis user may not list clients says so once, and its remote workers run their jobs as before', async () => {
    await admin.call('ACL', 'SETUSER', 'no-client-list', 'on', '>secret', '~*', '&*', '+@all', '-client|list')
    try {
      const said: string[] = []
      const limitedUrl = server.url.replace('redis://', 'redis://no-client-list:secret@')
      host = await startTestHost({ redisUrl: limitedUrl }, { log: (line) => said.push(line) })
      const ids = await noops(host, 20)
      remoteWorker('limited', host.token)
      await until(() => ids.every((id) => host!.engine.getJob(id).state === 'DONE'), 20_000, 'every job DONE')
      await until(() => said.some((line) => line.includes('CLIENT LIST')), 5_000, 'the line')
      expect(said.filter((line) => line.includes('CLIENT LIST'))).toEqual([expect.stringMatching(/refused CLIENT LIST .*NOPERM.*not noticed until the claim's wait ends/)])
    } finally {
      await host?.dispose() // before its user goes
      host = null
      await admin.call('ACL', 'DELUSER', 'no-client-list')
    }
  })

  test('the Redis users docs/redis.md gives the host and a remote worker are all they need: every job runs, and nothing is refused', async () => {
    const acls = [...readFileSync(fileURLToPath(new URL('../../docs/redis.md', import.meta.url)), 'utf8').matchAll(/^\s*ACL SETUSER (.+)$/gm)].map((m) => m[1]!.trim().split(/\s+/))
    expect(acls.map((acl) => acl[0])).toEqual(['leasehold', 'worker-w1'])
    const as = (user: string, password: string) => server.url.replace('redis://', `redis://${user}:${password}@`)
    await admin.call('ACL', 'LOG', 'RESET') // what earlier tests' users were refused
    try {
      for (const acl of acls) await admin.call('ACL', 'SETUSER', ...acl)
      const said: string[] = []
      host = await startTestHost({ redisUrl: as('leasehold', 'secret') }, { log: (line) => said.push(line) })
      const ids = await noops(host, 20)
      const worker = remoteWorker('w1', host.token, [], as('worker-w1', 'wpass'))
      await until(() => ids.every((id) => host!.engine.getJob(id).state === 'DONE'), 20_000, 'every job DONE')
      worker.child.kill('SIGTERM')
      const { stderr } = await worker.done
      expect([...said, stderr].join('\n')).not.toMatch(/NOPERM|refused/)
      expect(await admin.call('ACL', 'LOG')).toEqual([])
    } finally {
      await host?.dispose() // before its user goes
      host = null
      await admin.call('ACL', 'DELUSER', 'leasehold', 'worker-w1')
      await admin.call('ACL', 'LOG', 'RESET')
    }
  })

  /**
   * A remote worker `name` run as a Redis user of its own that `grants` allow (ACL rules on its
   * keys and commands), against a host of the test's; `use` gets the worker's stderr as it comes
   * and the jobs queued before it started. The user goes after the host.
   */
  async function asRedisUser(name: string, grants: string[], use: (worker: { stderr: () => string; ids: string[] }) => Promise<void>): Promise<void> {
    await admin.call('ACL', 'SETUSER', name, 'on', '>wpass', '~leasehold:worker:requests', ...grants)
    try {
      host = await startTestHost({ redisUrl: server.url })
      const ids = await noops(host, 3)
      const worker = remoteWorker(name, host.token, [], server.url.replace('redis://', `redis://${name}:wpass@`))
      let stderr = ''
      worker.child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
      await use({ stderr: () => stderr, ids })
    } finally {
      await host?.dispose()
      host = null
      await admin.call('ACL', 'DELUSER', name)
      await admin.call('ACL', 'LOG', 'RESET')
    }
  }

  const allDone = (ids: string[]) => until(() => ids.every((id) => host!.engine.getJob(id).state === 'DONE'), 20_000, 'every job DONE once the ACL allows it')

  test('a remote worker whose Redis user may not read its reply streams says Redis refused it, naming what to allow, and goes on once its ACL is mended, without a restart', async () => {
    await asRedisUser('narrow', ['~leasehold:worker:narrow:replies', '+xadd', '+xread', '+xrevrange', '+info'], async ({ stderr, ids }) => {
      await until(() => stderr().includes('retrying'), 10_000, 'the refusal said')
      expect(stderr()).toMatch(/Redis refused this worker's user \(NOPERM .*\); its ACL must allow .*CLIENT SETNAME/)
      expect(stderr()).not.toContain('the host did not answer')
      expect(ids.map((id) => host!.engine.getJob(id).state)).toEqual(ids.map(() => 'QUEUED'))
      await admin.call('ACL', 'SETUSER', 'narrow', '~leasehold:worker:narrow:replies*', '+client|setname')
      await allDone(ids)
    })
  })

  test('a remote worker whose Redis user may send requests but not XREAD its answers says Redis refused it, and is granted no job it could not hear of', async () => {
    await asRedisUser('deaf', ['~leasehold:worker:deaf:replies*', '+xadd', '+xrevrange', '+info', '+client|setname'], async ({ stderr, ids }) => {
      await until(() => stderr().includes('Redis refused this worker'), 10_000, 'the refusal said')
      expect(stderr()).toMatch(/Redis refused this worker's user \(NOPERM .*xread.*\)/i)
      await new Promise((resolve) => setTimeout(resolve, 1_000))
      expect(ids.map((id) => host!.engine.getJob(id))).toEqual(ids.map(() => expect.objectContaining({ state: 'QUEUED', attempts: 0 })))
      await admin.call('ACL', 'SETUSER', 'deaf', '+xread')
      await allDone(ids)
    })
  })

  test('a remote worker whose Redis user may not name its connection (CLIENT SETNAME) says Redis refused it, rather than asking again every second unheard', async () => {
    await asRedisUser('nameless', ['~leasehold:worker:nameless:replies*', '+xadd', '+xread', '+xrevrange', '+info'], async ({ stderr }) => {
      await until(() => stderr().includes('Redis refused this worker'), 10_000, 'the refusal said')
      expect(stderr()).toMatch(/Redis refused this worker's user \(NOPERM .*client\|setname.*\)/i)
    })
  })

  test('a remote worker whose Redis is out of memory says Redis refused its request for want of memory, not that the host did not answer; its jobs run once Redis has room', async () => {
    host = await startTestHost({ redisUrl: server.url })
    const ids = await noops(host, 2)
    await admin.config('SET', 'maxmemory-policy', 'noeviction')
    await admin.config('SET', 'maxmemory', '1')
    try {
      const worker = remoteWorker('starved', host.token)
      let stderr = ''
      worker.child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
      await until(() => stderr.includes('out of memory'), 10_000, 'the refusal said')
      expect(stderr).toMatch(/Redis refused this worker's request \(OOM .*\): Redis is out of memory \(its maxmemory\), not the host/)
      expect(stderr).not.toContain('the host did not answer')
    } finally {
      await admin.config('SET', 'maxmemory', '0')
    }
    await until(() => ids.every((id) => host!.engine.getJob(id).state === 'DONE'), 20_000, 'every job DONE once Redis has room')
  })

  test('a remote worker says Redis refused it, not that the host did not answer, when Redis wants a password (NOAUTH) or holds a key of another type where its requests go (WRONGTYPE)', async () => {
    const failureOf = async (workerId: string) => {
      const transport = new RedisTransport(server.url, 'token', workerId, 'leasehold:')
      try {
        return exchangeFailure(await transport.exchange({ worker_id: workerId }).then(() => new Error('answered'), (error: Error) => error))
      } finally {
        transport.close()
      }
    }
    await admin.set(requestStream('leasehold:'), 'not a stream')
    expect(await failureOf('w-wrongtype')).toMatch(/^Redis refused this worker's request \(WRONGTYPE .*\), not the host/)
    await admin.del(requestStream('leasehold:'))
    await admin.config('SET', 'requirepass', 'secret')
    try {
      expect(await failureOf('w-noauth')).toMatch(/^Redis refused this worker's connection \(NOAUTH .*\): check the user and password in its --redis URL; not the host/)
    } finally {
      await admin.auth('secret')
      await admin.config('SET', 'requirepass', '')
    }
  })

  test('an exchange without a valid token is refused and changes nothing', async () => {
    host = await startTestHost({ redisUrl: server.url })
    const job = host.engine.submit({ job_type: 'noop', cost_units: 1 }).job
    const forged = await exchangeAs('mallory', 'not-the-token', 1, 'exchange', { worker_id: 'mallory', claim: { streams: ['default'], max_jobs: 1 } })
    expect(forged).toMatchObject({ id: 1, error: { status: 401, code: 'unauthorized' } })
    expect(host.engine.getJob(job.id).state).toBe('QUEUED')
    const granted = host.engine.claimBatch({ worker_id: 'w1' }, 1).granted[0]!
    const complete = { worker_id: 'w1', complete: [{ job_id: granted.job_id, attempt_id: granted.attempt_id, lease_token: granted.lease_token }] }
    expect(await exchangeAs('w1', '', 2, 'exchange', complete)).toMatchObject({ error: { status: 401 } })
    expect(host.engine.getJob(job.id).state).toBe('RUNNING')
  })

  test('a request refused over Redis (bad params, another worker’s id, a wrong token) lists no worker, as over HTTP; one taken lists its worker with kind redis', async () => {
    host = await startTestHost({ redisUrl: server.url })
    const listed = async () => ((await (await host!.call('/api/workers')).json()) as { workers: { worker_id: string; kind: string }[] }).workers
    expect(await exchangeAs('ghost1', host.token, 5, 'exchange', 'wrong')).toMatchObject({ id: 5, error: { status: 400, code: 'invalid_request' } })
    expect(await exchangeAs('ghost2', host.token, 6, 'exchange', { worker_id: 'someone-else', claim: { streams: ['default'], max_jobs: 1 } })).toMatchObject({ id: 6, error: { status: 403, code: 'worker_mismatch' } })
    expect(await exchangeAs('ghost3', 'not-the-token', 7, 'exchange', { worker_id: 'ghost3' })).toMatchObject({ id: 7, error: { status: 401 } })
    expect(await listed()).toEqual([])
    expect(await exchangeAs('real', host.token, 8, 'exchange', { worker_id: 'real' })).toMatchObject({ id: 8, result: {} })
    expect(await listed()).toEqual([expect.objectContaining({ worker_id: 'real', kind: 'redis' })])
  })

  test('a request over Redis naming a local worker id (local-<slot>.<generation>) is refused 403 worker_mismatch, with any token: it claims nothing and lists no worker', async () => {
    host = await startTestHost({ redisUrl: server.url })
    const job = host.engine.submit({ job_type: 'noop', cost_units: 1 }).job
    const forged = await exchangeAs('local-2.1', host.token, 9, 'exchange', { worker_id: 'local-2.1', claim: { streams: ['default'], max_jobs: 1 } })
    expect(forged).toMatchObject({ id: 9, error: { status: 403, code: 'worker_mismatch' } })
    expect(forged.error!.detail).toContain("reserved to the host's own local workers")
    expect(host.engine.getJob(job.id).state).toBe('QUEUED')
    expect(((await (await host.call('/api/workers')).json()) as { workers: unknown[] }).workers).toEqual([])
  })

  test('a request over Redis from a worker id that is blank, has whitespace around it or holds an invisible character is 400 naming worker_id; one that reads as a local worker\'s is 403', async () => {
    host = await startTestHost({ redisUrl: server.url })
    const job = host.engine.submit({ job_type: 'noop', cost_units: 1 }).job
    let id = 20
    for (const worker of [' ', ' w1', 'w1 ', 'w\u200b1']) {
      const refused = await exchangeAs(worker, host.token, ++id, 'exchange', { worker_id: worker, claim: { streams: ['default'], max_jobs: 1 } })
      expect(refused, JSON.stringify(worker)).toMatchObject({ id, error: { status: 400, code: 'invalid_request', detail: expect.stringMatching(/^worker_id: must not/) } })
    }
    for (const worker of ['LOCAL-2.1', 'local-\uff12.1']) {
      expect(await exchangeAs(worker, host.token, ++id, 'exchange', { worker_id: worker, claim: { streams: ['default'], max_jobs: 1 } })).toMatchObject({ id, error: { status: 403, code: 'worker_mismatch' } })
    }
    expect(host.engine.getJob(job.id).state).toBe('QUEUED')
    expect(((await (await host.call('/api/workers')).json()) as { workers: unknown[] }).workers).toEqual([])
  })

  test('a request whose body is no request (an unknown method, not JSON) is answered 400 invalid_request naming what is wrong, under the id its entry names', async () => {
    host = await startTestHost({ redisUrl: server.url })
    const unknown = await exchangeAs('w1', host.token, 6, 'nosuchmethod', {})
    expect(unknown).toMatchObject({ id: 6, error: { status: 400, code: 'invalid_request', detail: expect.stringMatching(/^method: .*"exchange"/) } })
    const replies = replyStream('leasehold:', 'w1')
    const before = (await admin.xrevrange(replies, '+', '-', 'COUNT', 1))[0]![0]
    await admin.xadd(requestStream('leasehold:'), '*', 'worker_id', 'w1', 'token', host.token, 'id', '7', 'body', '{"type":"request","id":7,')
    const notJson = await until(async () => (await answersOn(replies, `(${before}`)).find((a) => a.id === 7) ?? null, 5000, 'the answer to a body that is not JSON')
    expect(notJson).toMatchObject({ error: { status: 400, code: 'invalid_request', detail: expect.stringMatching(/^\(body\): not JSON/) } })
  })

  test('a replayed request is answered as its first was, and completes the job once', async () => {
    host = await startTestHost({ redisUrl: server.url })
    const job = host.engine.submit({ job_type: 'noop', cost_units: 1 }).job
    const granted = host.engine.claimBatch({ worker_id: 'w1' }, 1).granted[0]!
    const complete = { worker_id: 'w1', complete: [{ job_id: granted.job_id, attempt_id: granted.attempt_id, lease_token: granted.lease_token, result: { n: 1 } }] }
    const first = await exchangeAs('w1', host.token, 7, 'exchange', complete)
    const again = await exchangeAs('w1', host.token, 7, 'exchange', complete)
    expect(first.result).toMatchObject({ completed: [{ job_id: job.id, ok: true, ack: true }] })
    expect(again.result).toEqual(first.result)
    expect(host.engine.getJob(job.id)).toMatchObject({ state: 'DONE', attempts: 1 })
    expect(host.engine.jobEvents(job.id).filter((e) => e.event_type === 'JOB_DONE')).toHaveLength(1)
  })

  test('a claim its worker gave up on (sent while no host read the stream) is answered without jobs; its reports still count, and a fresh claim gets the job', async () => {
    host = await startTestHost({ redisUrl: server.url })
    const running = host.engine.submit({ job_type: 'noop', cost_units: 1 }).job
    const granted = host.engine.claimBatch({ worker_id: 'w1' }, 1).granted[0]!
    const waiting = host.engine.submit({ job_type: 'noop', cost_units: 1 }).job
    // Stored by Redis a minute ago: the worker waited its claim's 20 s and 15 s more, then gave it up.
    const [seconds] = await admin.time()
    const aMinuteAgo = `${Number(seconds) * 1000 - 60_000}-0`
    const complete = [{ job_id: granted.job_id, attempt_id: granted.attempt_id, lease_token: granted.lease_token }]
    const stale = await exchangeAs('w1', host.token, 1, 'exchange', { worker_id: 'w1', complete, claim: { streams: ['default'], max_jobs: 4, max_wait_ms: 20_000 } }, undefined, aMinuteAgo)
    expect(stale.result).toMatchObject({ completed: [{ job_id: running.id, ok: true }] })
    expect((stale.result as { jobs?: unknown[] }).jobs ?? []).toEqual([])
    expect(host.engine.getJob(running.id).state).toBe('DONE')
    expect(host.engine.getJob(waiting.id)).toMatchObject({ state: 'QUEUED', attempts: 0 })
    const fresh = await claim(2)
    expect(fresh.result).toMatchObject({ jobs: [expect.objectContaining({ job_id: waiting.id })] })
  })

  test('an answer that comes after its worker stopped waiting for it gives back the jobs it grants: they run on, losing no attempt', async () => {
    host = await startTestHost({ redisUrl: server.url })
    const transport = new RedisTransport(server.url, host.token, 'w-late', 'leasehold:')
    try {
      // A claim that waits at the host, given up by the worker (as when its timer ran out while Redis was paused).
      const gaveUp = new AbortController()
      const claimed = transport.exchange({ worker_id: 'w-late', claim: { streams: ['default'], max_jobs: 2, max_wait_ms: 10_000 } }, gaveUp.signal)
      const waiting = async () => Number(((await admin.xpending(requestStream('leasehold:'), 'leasehold').catch(() => [0])) as [number])[0])
      await until(async () => (await waiting()) >= 1, 5_000, 'the claim waiting at the host')
      gaveUp.abort()
      expect((await claimed).jobs).toEqual([])
      const job = host.engine.submit({ job_type: 'noop', cost_units: 1, max_attempts: 1 }).job // granted to the claim the host still holds
      await until(() => host!.engine.getJob(job.id).state === 'QUEUED' && host!.engine.getJob(job.id).attempts === 1, 5_000, 'the grant given back')
      expect(host.engine.getJob(job.id)).toMatchObject({ max_attempts: 2, dead_letter: false })
      expect(host.engine.attempts(job.id)).toEqual([expect.objectContaining({ disposition: 'REQUEUED', error: expect.objectContaining({ reason: 'not_delivered' }) })])
      expect(host.engine.getCapacity().leased).toBe(0)
    } finally {
      transport.close()
    }
  })

  test('a worker-scoped token runs jobs over Redis until it is revoked, then is told it was revoked; and takes files only under its own jobs’ leases', async () => {
    host = await startTestHost({ redisUrl: server.url })
    host.engine.submit({ job_type: 'noop', cost_units: 1 })
    const { id, token } = createScopedToken(host.dataDir, 'worker')
    const claim = { worker_id: 'w2', claim: { streams: ['default'], max_jobs: 1 } }
    const claimed = await exchangeAs('w2', token, 1, 'exchange', claim)
    expect(claimed.result).toMatchObject({ jobs: [expect.objectContaining({ claimed: true })] })
    const job = (claimed.result as { jobs: { lease_id: string; lease_token: string }[] }).jobs[0]!
    const file = { file: '/data/remote.txt', owner_id: 'w2', lease_id: job.lease_id }
    expect((await exchangeAs('w2', token, 2, 'acquireFile', file)).error).toMatchObject({ status: 400, code: 'invalid_request' })
    expect((await exchangeAs('w2', token, 3, 'acquireFile', { ...file, lease_token: 'not-its-token' })).error).toMatchObject({ status: 409, code: 'lease_token_mismatch' })
    expect((await exchangeAs('w2', token, 4, 'acquireFile', { ...file, lease_token: job.lease_token })).result).toEqual({ granted: true })
    revokeScopedToken(host.dataDir, id)
    await until(async () => (await exchangeAs('w2', token, Date.now(), 'exchange', claim)).error?.status === 401, 5000, 'revoked token refused')
    // Told it was revoked, as over HTTP: not a token to look for a typo in.
    expect((await exchangeAs('w2', token, Date.now(), 'exchange', claim)).error).toEqual({ status: 401, code: 'unauthorized', detail: REVOKED_TOKEN_REFUSAL })
  })

  test('the host makes its consumer group on the request stream once, not again before every read of it', async () => {
    host = await startTestHost({ redisUrl: server.url })
    await claim(1)
    await admin.config('RESETSTAT')
    for (let id = 2; id <= 6; id++) expect((await claim(id)).error).toBeUndefined()
    const stats = await admin.info('commandstats')
    expect(stats).toMatch(/cmdstat_xreadgroup:calls=\d+/)
    expect(stats).not.toMatch(/cmdstat_xgroup\|create:/)
  })

  test('a host that starts with requests pending (its predecessor was killed mid-answer) answers them, then reads new requests as ever', async () => {
    // A request the group delivered to a host that died before it answered: pending, unacknowledged.
    const stream = requestStream('leasehold:')
    await admin.xgroup('CREATE', stream, 'leasehold', '0', 'MKSTREAM')
    const first = { type: 'request', id: 1, method: 'exchange', params: { worker_id: 'w1', claim: { streams: ['default'], max_jobs: 1 } } }
    host = await startTestHost({ redisUrl: server.url }) // only to have its token
    const token = host.token
    const dataDir = host.dataDir
    await host.dispose()
    await admin.xadd(stream, '*', 'worker_id', 'w1', 'token', token, 'body', JSON.stringify(first))
    await admin.xreadgroup('GROUP', 'leasehold', 'host', 'COUNT', 10, 'STREAMS', stream, '>')
    host = await startTestHost({ redisUrl: server.url, dataDir })
    await until(async () => (await answersOn(replyStream('leasehold:', 'w1'))).some((a) => a.id === 1), 5000, 'the pending request answered')
    for (let id = 2; id <= 4; id++) expect((await claim(id)).error).toBeUndefined()
  })

  test('a request stream Redis lost while the host reads it is read again: the host makes its group anew and answers the next request', async () => {
    host = await startTestHost({ redisUrl: server.url })
    expect((await claim(1)).error).toBeUndefined()
    await admin.del(requestStream('leasehold:'))
    expect((await claim(2)).error).toBeUndefined()
  })

  test('a remote worker the host refuses (a token it does not know) says why and exits 1, instead of asking again every second', async () => {
    host = await startTestHost({ redisUrl: server.url })
    const { done } = remoteWorker('unknown', 'not-the-host-token', ['--grace-s', '1'])
    const { status, stderr } = await done
    expect(status).toBe(1)
    expect(stderr).toContain('leasehold worker: the host refuses this worker (401 unauthorized: The token is missing or wrong; the token came from --token); stopping')
    expect(stderr).not.toContain('retrying')
  })

  test('a remote worker whose URL names a database the server does not have sends nothing to database 0, and says what to mend', async () => {
    const lines: string[] = []
    const transport = new RedisTransport(server.url.replace(/\/0$/, '/99'), 'token', 'w-nodb', 'leasehold:', undefined, (line) => lines.push(line))
    try {
      void transport.exchange({ worker_id: 'w-nodb' }).catch(() => {})
      await new Promise((resolve) => setTimeout(resolve, 1_500))
      expect(await admin.keys('*')).toEqual([])
      expect(lines).toContainEqual(expect.stringMatching(/^leasehold worker: Redis at redis:\/\/127\.0\.0\.1:\d+\/99: Redis has no database of the URL's number .*check the \/db of the Redis URL; it asks again every 2 s at most$/))
    } finally {
      transport.close()
    }
  }, 15_000)

  test('a remote worker whose Redis is paused (SIGSTOP) says Redis does not answer, not the host, and says so when Redis answers again', async () => {
    host = await startTestHost({ redisUrl: server.url })
    const lines: string[] = []
    const transport = new RedisTransport(server.url, host.token, 'w-paused', 'leasehold:', undefined, (line) => lines.push(line))
    try {
      await transport.exchange({ worker_id: 'w-paused' }) // its reads of the answers under way
      process.kill(server.pid!, 'SIGSTOP')
      let failure: Error | null = null
      try {
        failure = await transport.exchange({ worker_id: 'w-paused' }).then(() => null, (error: Error) => error)
      } finally {
        process.kill(server.pid!, 'SIGCONT')
      }
      expect(failure).toBeInstanceOf(TransportSilence)
      expect(exchangeFailure(failure!)).toMatch(/^Redis at redis:\/\/127\.0\.0\.1:\d+\/0 has not answered \(for 1\d s, on an open connection: paused, or a network that drops packets\), not the host/)
      await until(() => lines.some((line) => /^leasehold worker: Redis at \S+ answers again/.test(line)), 5_000, 'Redis said to answer again')
    } finally {
      transport.close()
    }
  }, 30_000)

  test('a remote worker whose Redis is down (killed) says Redis refuses connections, not that it is paused, and its retry lines are one kind, printed once a minute', async () => {
    host = await startTestHost({ redisUrl: server.url })
    const said: string[] = []
    const log = limitRetryLines((line) => said.push(line))
    const transport = new RedisTransport(server.url, host.token, 'w-down', 'leasehold:', undefined, log)
    try {
      await transport.exchange({ worker_id: 'w-down' }) // its reads of the answers under way
      await server.kill()
      for (let i = 0; i < 2; i++) {
        const failure = await transport.exchange({ worker_id: 'w-down' }).then(() => null, (error: Error) => error)
        expect(failure).toBeInstanceOf(TransportSilence)
        expect(exchangeFailure(failure!)).toMatch(/^Redis at redis:\/\/127\.0\.0\.1:\d+\/0 refuses connections \(connect ECONNREFUSED [^)]*: Redis is down, or does not listen there\), not the host/)
        log(`leasehold worker: ${exchangeFailure(failure!)}; retrying in 1 s`)
      }
      expect(said.join('\n')).not.toMatch(/paused|has not answered/)
      expect(said.filter((line) => line.endsWith('retrying in 1 s'))).toHaveLength(1)
      // The connection's own errors (reset as Redis died, then refused), once a minute too.
      expect(said.filter((line) => /ioredis reconnects/.test(line))).toHaveLength(1)
    } finally {
      transport.close()
      await server.restart()
    }
  }, 60_000)

  test('while Redis is down, leasehold status does not say that jobs still run when the only workers are remote ones over Redis, which run nothing then', async () => {
    host = await startTestHost({ redisUrl: server.url })
    expect((await claim(1)).error).toBeUndefined()
    await until(async () => ((await (await host!.call('/api/workers')).json()) as { workers: { kind: string }[] }).workers.some((w) => w.kind === 'redis'), 5_000, 'the remote worker listed')
    await server.kill()
    try {
      await until(async () => !(await redisConnected()), 5_000, 'seen down')
      const status = await runCliAsync(['status', '--url', host.url, '--token', host.token])
      expect(status.stdout).toMatch(/^redis {5}NOT connected \(redis:\/\/127\.0\.0\.1:\d+\/0.*\): the only workers, remote ones over Redis, run nothing meanwhile; 0 messages wait in the outbox/m)
      expect(status.stdout).not.toMatch(/jobs still run/)
    } finally {
      await server.restart()
    }
  }, 20_000)

  test('a remote worker waits for the answer to its reports at most a third of the lease TTL it was granted, and its claim carried with them waits none of it, so that one request lost over Redis does not cost the lease', async () => {
    // A host of the test's own: it grants one job with a 9 s lease, then answers nothing (its requests lost).
    const requests: { method: string; params: { claim?: { max_wait_ms?: number } } }[] = []
    let from = '0'
    let stopped = false
    const fakeHost = (async () => {
      while (!stopped) {
        const read = (await admin.xread('BLOCK', 200, 'STREAMS', requestStream('lh-fake:'), from)) as [string, [string, string[]][]][] | null
        for (const [entryId, fields] of read?.[0]?.[1] ?? []) {
          from = entryId
          const body = JSON.parse(entryField(fields, 'body')!) as { id: number; method: string; params: { claim?: { max_wait_ms?: number } } }
          requests.push(body)
          if (requests.length > 1) continue
          const job = { claimed: true, job_id: 'j1', attempt_id: 'a1', lease_id: 'l1', lease_token: 't1', stream: 'default', message_id: null, payload: null, job_type: 'noop', max_runtime_s: null, lease_ttl_seconds: 9, heartbeat_interval_seconds: 3 }
          const result = { heartbeats: [], completed: [], failed: [], jobs: [job], claim_waited_ms: 0 }
          await admin.xadd(replyStream('lh-fake:', 'w-short'), '*', 'body', JSON.stringify({ type: 'response', id: body.id, result }))
        }
      }
    })()
    const transport = new RedisTransport(server.url, 'token', 'w-short', 'lh-fake:')
    try {
      const granted = await transport.exchange({ worker_id: 'w-short', claim: { streams: ['default'], max_jobs: 1, max_wait_ms: 0 } })
      expect(granted.jobs.map((j) => j.lease_ttl_seconds)).toEqual([9])
      let sentAt = Date.now()
      await expect(transport.exchange({ worker_id: 'w-short', heartbeat: [{ job_id: 'j1', lease_token: 't1' }] })).rejects.toThrow()
      expect(Date.now() - sentAt).toBeGreaterThanOrEqual(2_900)
      expect(Date.now() - sentAt).toBeLessThan(4_500)
      sentAt = Date.now()
      const completion = { worker_id: 'w-short', job_id: 'j1', attempt_id: 'a1', lease_token: 't1' }
      await expect(transport.exchange({ worker_id: 'w-short', complete: [completion], claim: { streams: ['default'], max_jobs: 1, max_wait_ms: 20_000 } })).rejects.toThrow()
      expect(Date.now() - sentAt).toBeLessThan(4_500)
      expect(requests.at(-1)).toMatchObject({ method: 'exchange', params: { claim: { max_wait_ms: 0 } } })
    } finally {
      stopped = true
      transport.close()
      await fakeHost
    }
  }, 60_000)

  test('a remote worker on a prefix no host claims says so, naming the prefix and --redis-prefix, rather than that the host did not answer', async () => {
    host = await startTestHost({ redisUrl: server.url }) // on leasehold:, not the worker's lh2:
    const transport = new RedisTransport(server.url, host.token, 'w-lost', 'lh2:')
    try {
      transport.leaseHeld(3) // its reports wait 1 s for their answer, rather than 15 s
      const failure = await transport.exchange({ worker_id: 'w-lost', heartbeat: [{ job_id: 'j1', lease_token: 't1' }] }).then(() => null, (error: Error) => error)
      expect(exchangeFailure(failure!)).toBe("no Leasehold host claims the prefix lh2: on this Redis: check --redis-prefix (the host's serve --redis-prefix)")
      // On the host's prefix, where a host claims it, a request unanswered is the host's silence, as before.
      await admin.set(prefixClaimKey('lh2:'), 'other-host pid 1 on elsewhere')
      const unanswered = await transport.exchange({ worker_id: 'w-lost', heartbeat: [{ job_id: 'j1', lease_token: 't1' }] }).then(() => null, (error: Error) => error)
      expect(exchangeFailure(unanswered!)).toMatch(/^the host did not answer \(no answer from the host over Redis within 1 s\)$/)
    } finally {
      transport.close()
    }
  }, 30_000)

  test('a remote worker whose --redis URL names a server that does not speak the Redis protocol (an HTTP port) says so in one line, not in the parser’s words', async () => {
    const http = createServer((_req, res) => res.end('not redis'))
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
    const lines: string[] = []
    const transport = new RedisTransport(`redis://127.0.0.1:${(http.address() as AddressInfo).port}/0`, 'token', 'w-http', 'leasehold:', undefined, (line) => lines.push(line))
    try {
      await until(() => lines.length > 0, 5_000, 'a line from the worker')
      expect(lines[0]).toMatch(
        /^leasehold worker: Redis at redis:\/\/127\.0\.0\.1:\d+\/0 cannot be used: the server at that address does not speak the Redis protocol \(its answer began with "H"\): check the host and port of the Redis URL; ioredis reconnects every 2 s at most$/,
      )
      expect(lines.join('\n')).not.toMatch(/Protocol error|Please report this/)
    } finally {
      transport.close()
      http.close()
    }
  })

  test('a remote worker whose Redis restarts under a waiting call says Redis connected again, not that the host did not answer, and asks again', async () => {
    host = await startTestHost({ redisUrl: server.url })
    const transport = new RedisTransport(server.url, host.token, 'w-restart', 'leasehold:', undefined, () => {})
    try {
      await transport.exchange({ worker_id: 'w-restart' }) // its reads of the answers under way
      // A claim that waits for work: the host holds it while Redis goes and comes back.
      const waiting = transport.exchange({ worker_id: 'w-restart', claim: { streams: ['default'], max_jobs: 1, max_wait_ms: 20_000 } }).then(
        () => null,
        (error: Error) => error,
      )
      await new Promise((resolve) => setTimeout(resolve, 300))
      await server.kill()
      await server.restart()
      const failure = await waiting
      expect(failure).toBeInstanceOf(TransportSilence)
      expect(exchangeFailure(failure!)).toMatch(/^Redis at redis:\/\/127\.0\.0\.1:\d+\/0 connected again, not the host/)
    } finally {
      transport.close()
    }
  }, 30_000)

  test('a remote worker whose password Redis refuses says Redis refused its connection, not that Redis did not answer', async () => {
    const url = server.url.replace('redis://', 'redis://nobody:wrong@')
    const { child, done } = remoteWorker('locked-out', 'any-token', ['--grace-s', '1'], url)
    let err = ''
    child.stderr!.on('data', (chunk: Buffer) => {
      err += chunk.toString()
      if (/refused this worker's connection/.test(err)) child.kill('SIGTERM')
    })
    await done
    expect(err).toMatch(/^leasehold worker: Redis at redis:\/\/nobody:\*+@127\.0\.0\.1:\d+\/0 refused this worker's connection \(WRONGPASS .*\): check the user and password in the URL/m)
    expect(err).not.toMatch(/did not answer \(WRONGPASS/)
  })

  test('a remote worker told to stop while Redis cannot be reached stops, instead of waiting for Redis; its first line names the prefix it reads', async () => {
    const { child, done } = remoteWorker('stranded', 'any-token', ['--redis-prefix', 'h7:', '--grace-s', '1'], 'redis://127.0.0.1:1/0')
    // Stopped the instant its "taking" line arrives: the worker must already be listening for the signal.
    let out = ''
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString()
      if (out.includes('taking')) child.kill('SIGTERM')
    })
    expect(await done).toMatchObject({ status: 0, stderr: expect.stringContaining('stopping') })
    expect(out).toMatch(/^leasehold worker stranded taking .* from redis:\/\/127\.0\.0\.1:1\/0 \(prefix h7:\)$/m)
  })
})

describe('requests that waited in Redis while the host was stopped', () => {
  /** The leases below last 10 s and 5 s of grace: a heartbeat keeps one this long. */
  const LASTS_MS = 15_000
  /** How long the host stays stopped, by the clock it runs on: longer than a lease lasts. */
  const DOWN_MS = 60_000
  type Granted = { job_id: string; attempt_id: string; lease_token: string }

  /** A host that grants `n` jobs to remote worker w1 and stops: what the next start needs, and what it granted. */
  async function grantThenStop(n: number): Promise<{ dataDir: string; token: string; granted: Granted[]; grantedAt: number }> {
    const clock = new ManualClock(Date.now())
    const first = await startTestHost({ redisUrl: server.url, leaseTtlS: 10, heartbeatGraceS: 5 }, { clock })
    await noops(first, n)
    const granted = first.engine.claimBatch({ worker_id: 'w1' }, n).granted
    expect(granted).toHaveLength(n)
    await first.stop()
    return { dataDir: first.dataDir, token: first.token, granted, grantedAt: clock.now() }
  }

  /**
   * Requests of w1 stored by Redis while no host reads the stream, each `msAgo` before now by
   * Redis's clock (oldest first): as the worker sent them while its host was stopped.
   */
  async function waitInRedis(token: string, requests: { msAgo: number; params: unknown }[]): Promise<number[]> {
    const [seconds, micros] = await admin.time()
    const redisNow = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)
    const ids: number[] = []
    for (const [i, { msAgo, params }] of requests.entries()) {
      const id = 100 + i
      ids.push(id)
      await admin.xadd(requestStream('leasehold:'), `${redisNow - msAgo}-${i}`, 'worker_id', 'w1', 'token', token, 'id', String(id), 'body', JSON.stringify({ type: 'request', id, method: 'exchange', params }))
    }
    return ids
  }

  /** The host again on the same data dir, `DOWN_MS` after the grant by its clock; resolves once every one of `ids` is answered. */
  async function restart(dataDir: string, grantedAt: number, ids: number[]): Promise<Map<number, IpcResponse>> {
    host = await startTestHost({ redisUrl: server.url, leaseTtlS: 10, heartbeatGraceS: 5, dataDir }, { clock: new ManualClock(grantedAt + DOWN_MS) })
    return until(async () => {
      const answers = new Map((await answersOn(replyStream('leasehold:', 'w1'))).map((a) => [a.id, a]))
      return ids.every((id) => answers.has(id)) ? answers : null
    }, 10_000, 'the waiting requests answered')
  }

  const beat = (lease: Granted) => ({ worker_id: 'w1', heartbeat: [{ job_id: lease.job_id, lease_token: lease.lease_token }] })

  test('a heartbeat that reached Redis before its lease’s expiry while the host was down keeps the lease across the restart: the lease lasts its TTL and grace from the last heartbeat in time, and the job runs on, its first attempt', async () => {
    const { dataDir, token, granted, grantedAt } = await grantThenStop(1)
    const lease = granted[0]!
    // Every 10 s while the host is down (a heartbeat keeps the lease 15 s), the last 5 s before the start.
    const beats = [55_000, 45_000, 35_000, 25_000, 15_000, 5_000].map((msAgo) => ({ msAgo, params: beat(lease) }))
    const ids = await waitInRedis(token, beats)
    const answers = await restart(dataDir, grantedAt, ids)
    for (const id of ids) expect(answers.get(id)).toMatchObject({ result: { heartbeats: [{ job_id: lease.job_id, ok: true }] } })
    // The start's first reaper pass is behind it: the lease is still held, and lasts from the last heartbeat.
    const held = host!.engine.activeLeases().find((l) => l.job_id === lease.job_id)
    expect(held?.expires_at).toBeGreaterThan(host!.engine.now())
    expect(held!.expires_at).toBeLessThanOrEqual(grantedAt + DOWN_MS - 5_000 + LASTS_MS)
    expect(host!.engine.getJob(lease.job_id)).toMatchObject({ state: 'RUNNING', attempts: 1 })
    expect(host!.engine.attempts(lease.job_id)).toHaveLength(1)
  }, 30_000)

  test('a completion that reached Redis before its lease’s expiry while the host was down is accepted at the restart: the job is DONE once, its first attempt', async () => {
    const { dataDir, token, granted, grantedAt } = await grantThenStop(1)
    const lease = granted[0]!
    const complete = { worker_id: 'w1', complete: [{ job_id: lease.job_id, attempt_id: lease.attempt_id, lease_token: lease.lease_token, result: { n: 1 } }] }
    // Sent 5 s after the grant (its lease had 10 s more), and sent again as the worker's wait for the answer ran out.
    const ids = await waitInRedis(token, [
      { msAgo: DOWN_MS - 5_000, params: complete },
      { msAgo: DOWN_MS - 45_000, params: complete },
    ])
    const answers = await restart(dataDir, grantedAt, ids)
    for (const id of ids) expect(answers.get(id)).toMatchObject({ result: { completed: [{ job_id: lease.job_id, ok: true }] } })
    expect(host!.engine.getJob(lease.job_id)).toMatchObject({ state: 'DONE', attempts: 1, result: { n: 1 } })
    expect(host!.engine.attempts(lease.job_id)).toEqual([expect.objectContaining({ outcome: 'SUCCEEDED' })])
    expect(host!.engine.jobEvents(lease.job_id).filter((e) => e.event_type === 'JOB_DONE')).toHaveLength(1)
  }, 30_000)

  test('a request that reached Redis after its lease’s expiry does not save it: the lease expires at the restart and its report is refused, while a lease whose heartbeats reached Redis in time is kept', async () => {
    const { dataDir, token, granted, grantedAt } = await grantThenStop(3)
    const [kept, beatenLate, completedLate] = granted as [Granted, Granted, Granted]
    const lateCompletion = { worker_id: 'w1', complete: [{ job_id: completedLate.job_id, attempt_id: completedLate.attempt_id, lease_token: completedLate.lease_token, result: { n: 1 } }] }
    // Each lease lasted 15 s from the grant: what Redis stored 20 s after it came 5 s late.
    const ids = await waitInRedis(token, [
      { msAgo: 50_000, params: beat(kept) },
      { msAgo: DOWN_MS - 20_000, params: beat(beatenLate) },
      { msAgo: DOWN_MS - 20_000, params: lateCompletion },
      { msAgo: 40_000, params: beat(kept) },
      { msAgo: 30_000, params: beat(kept) },
      { msAgo: 20_000, params: beat(beatenLate) },
      { msAgo: 20_000, params: beat(kept) },
      { msAgo: 10_000, params: beat(kept) },
    ])
    const answers = await restart(dataDir, grantedAt, ids)
    for (const id of [ids[1]!, ids[5]!]) expect(answers.get(id)).toMatchObject({ result: { heartbeats: [{ job_id: beatenLate.job_id, ok: false, code: 'lease_expired' }] } })
    expect(answers.get(ids[2]!)).toMatchObject({ result: { completed: [{ job_id: completedLate.job_id, ok: false, code: 'lease_expired' }] } })
    for (const late of [beatenLate, completedLate]) {
      expect(host!.engine.getJob(late.job_id)).toMatchObject({ state: 'QUEUED', attempts: 1 })
      expect(host!.engine.attempts(late.job_id)).toEqual([expect.objectContaining({ outcome: 'TIMEOUT', error: expect.objectContaining({ reason: 'no_heartbeat' }) })])
    }
    for (const id of [ids[0]!, ids[3]!, ids[4]!, ids[6]!, ids[7]!]) expect(answers.get(id)).toMatchObject({ result: { heartbeats: [{ job_id: kept.job_id, ok: true }] } })
    expect(host!.engine.getJob(kept.job_id)).toMatchObject({ state: 'RUNNING', attempts: 1 })
  }, 30_000)
})
