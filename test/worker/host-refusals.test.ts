import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { afterEach, expect, test } from 'vitest'
import { cuttingProxy } from '../helpers/cutting-proxy'
import type { TestHost } from '../helpers/host'
import { runCliAsync } from '../helpers/process'
import { cleanUp, dataDirWith, jobView, settled, spawnWorker, startHost, submit, until, workerStarted } from './support'

afterEach(() => cleanUp())

const REFUSED = 'leasehold worker: the host refuses this worker (401 unauthorized'

test('a leasehold worker the host refuses (a token it does not know) says why and exits 1, instead of asking again every second', async () => {
  const host = await startHost({ workers: 0 })
  const worker = spawnWorker({ ...host, token: 'not-the-host-token' }, ['--grace-s', '1'])
  expect(await worker.exited).toBe(1)
  expect(worker.output()).toContain(REFUSED)
  expect(worker.output()).not.toContain('retrying')
})

test.each([
  ['--token', ['--token', 'not-the-host-token'], {}],
  ['LEASEHOLD_TOKEN', [], { LEASEHOLD_TOKEN: 'not-the-host-token' }],
] as const)('a refused token is named by where it came from (%s), as the client commands name it', async (source, args, env) => {
  const host = await startHost({ workers: 0 })
  const worker = await runCliAsync(['worker', '--url', host.url, '--grace-s', '1', ...args], { LEASEHOLD_DATA_DIR: undefined, LEASEHOLD_URL: undefined, LEASEHOLD_TOKEN: undefined, ...env })
  expect(worker.status).toBe(1)
  const refused = worker.stderr.split('\n').find((line) => line.startsWith(REFUSED))
  expect(refused).toMatch(new RegExp(`; the token came from ${source}\\); stopping$`))
})

test('a leasehold worker pointed at a server that is no Leasehold host (404, a page not JSON) says so and exits 1', async () => {
  const server = createServer((_req, res) => res.writeHead(404, { 'content-type': 'text/html' }).end('<h1>Not Found</h1>'))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  try {
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    const worker = spawnWorker({ url, token: 'any-token' } as TestHost, ['--grace-s', '1'])
    expect(await worker.exited).toBe(1)
    expect(worker.output()).toContain(`leasehold worker: the server at ${url} answered HTTP 404 Not Found without Leasehold's JSON ("Not Found"): it is not a Leasehold host, or a proxy stands between (another program may listen on a port a host left); stopping`)
    expect(worker.output()).not.toContain('retrying')
  } finally {
    server.close()
  }
})

test('a leasehold worker whose token is revoked while it runs stops at its next exchange with exit status 1; the job it held is queued again once its lease expires', async () => {
  const host = await startHost({ workers: 0, leaseTtlS: 2, heartbeatGraceS: 1 })
  const created = await runCliAsync(['token', 'create', '--scope', 'worker', '--data-dir', host.dataDir])
  const token = created.stdout.trim()
  const id = /token (\w+) \(scope worker\)/.exec(created.stderr)![1]!
  const worker = spawnWorker({ ...host, token }, ['--grace-s', '1'])
  await workerStarted(worker)
  expect((await runCliAsync(['token', 'revoke', id, '--data-dir', host.dataDir])).status).toBe(0)
  const claim = () => host.call('/internal/worker/claim', { method: 'POST', token, json: { worker_id: 'probe', streams: ['default'], max_wait_ms: 0 } })
  await until(async () => (await claim()).status === 401, 5000, 'the revoked token refused')

  // The worker's long-poll was let in before the revoke: it is granted this job, and the report
  // of its run is the exchange the host refuses.
  const job = await submit(host, { job_type: 'noop' })
  expect(await worker.exited).toBe(1)
  expect(worker.output()).toContain(REFUSED)
  expect(worker.output()).not.toContain('retrying')
  await until(async () => (await jobView(host, job)).job.state === 'QUEUED', 10_000, 'the job queued again once its lease expired')
})

test('a leasehold worker whose token is revoked while jobs run sends the host nothing more: its jobs get their grace, and their dropped reports are said in one line', async () => {
  const host = await startHost({ workers: 0 })
  const proxy = await cuttingProxy(host.url, { cut: false })
  try {
    const created = await runCliAsync(['token', 'create', '--scope', 'worker', '--data-dir', host.dataDir])
    const token = created.stdout.trim()
    const id = /token (\w+) \(scope worker\)/.exec(created.stderr)![1]!
    const worker = spawnWorker({ ...host, url: proxy.url, token }, ['--concurrency', '2', '--grace-s', '3'])
    await workerStarted(worker)
    const jobs = [await submit(host, { job_type: 'sleep', payload: { ms: 30_000 } }), await submit(host, { job_type: 'sleep', payload: { ms: 30_000 } })]
    // Running, and reporting their progress: each heartbeat is an exchange to send.
    await until(async () => (await Promise.all(jobs.map((job) => jobView(host, job)))).every(({ job }) => job.progress > 0), 10_000, 'both jobs running')
    expect((await runCliAsync(['token', 'revoke', id, '--data-dir', host.dataDir])).status).toBe(0)

    expect(await worker.exited).toBe(1)
    const lines = worker.output().split('\n')
    expect(lines.filter((line) => line.startsWith(REFUSED))).toHaveLength(1)
    expect(lines.filter((line) => line.includes('dropped'))).toEqual(['leasehold worker: 2 report(s) dropped on the way out, the host refusing this worker; their leases expire on the host'])
    // Each of its two talkers (the runtime, and the driving thread on its own connection) may be
    // refused once before it hears of the other's refusal; none is refused again over the 3 s grace.
    expect(proxy.statuses().filter((status) => status === 401).length).toBeLessThanOrEqual(2)
  } finally {
    await proxy.close()
  }
})

test('a job whose result is larger than the host accepts fails as result_too_large, not retried; the worker’s other reports go on', async () => {
  const dataDir = dataDirWith({ 'big.mjs': "export default { type: 'test.big', run: () => ({ text: 'x'.repeat(100_000) }) }" })
  const host = await startHost({ dataDir, workers: 0, bodyLimitBytes: 64 * 1024 })
  const worker = spawnWorker(host, ['--handlers', join(dataDir, 'handlers')])
  await workerStarted(worker)
  // One at a time: the first of the type runs on a thread the runtime reports for, the next ones,
  // short, on the driving thread, which reports its own.
  for (const type of ['test.big', 'noop', 'test.big', 'noop', 'test.big']) {
    const { job, result } = await settled(host, await submit(host, { job_type: type }), 15_000)
    if (type === 'noop') expect(job.state).toBe('DONE')
    else expect(result).toMatchObject({ status: 'FAILED', attempts: 1, error: { code: 'result_too_large', retryable: false } })
  }
  expect(worker.output()).toContain('is larger than the host accepts (413 payload_too_large')
  expect(worker.output()).not.toContain('retrying')
})
