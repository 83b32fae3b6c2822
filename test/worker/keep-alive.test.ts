/**
 * A request that leaves on a keep-alive connection the host has just closed fails before any
 * byte of its answer. The clients (requestJson, and the HostConnection of a `leasehold worker`)
 * resend such a request once, on a fresh connection, when sending it twice is harmless. A proxy
 * that cuts every reused connection stands in for the host closing idle ones at the worst
 * moment, every time.
 */
import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { afterEach, expect, test } from 'vitest'
import { HostConnection } from '../../src-shared/host-connection'
import { NotJsonAnswer, requestJson } from '../../src-shared/http-json'
import { type CuttingProxy, cuttingProxy } from '../helpers/cutting-proxy'
import type { TestHost } from '../helpers/host'
import { attempts, cleanUp, settled, spawnWorker, startHost, submit, until, workerStarted } from './support'

let proxy: CuttingProxy | undefined
afterEach(async () => {
  await proxy?.close()
  proxy = undefined
  await cleanUp()
})

test('leasehold worker behind a proxy that cuts reused connections: every job, file writes included, is DONE on its first attempt', async () => {
  const host = await startHost({ workers: 0 })
  proxy = await cuttingProxy(host.url)
  const worker = spawnWorker({ url: proxy.url, token: host.token } as TestHost, ['--concurrency', '2'])
  await workerStarted(worker)

  const jobs: string[] = []
  for (let i = 0; i < 6; i++) {
    jobs.push(await submit(host, { job_type: 'file.write', payload: { path: join(host.dataDir, `out-${i}.txt`), content: `${i}\n` } }))
    jobs.push(await submit(host, { job_type: 'noop' }))
  }
  for (const job of jobs) expect((await settled(host, job, 20_000)).job.state, worker.output()).toBe('DONE')
  for (const job of jobs) expect(attempts(host, job), job).toHaveLength(1)
  for (let i = 0; i < 6; i++) expect(readFileSync(join(host.dataDir, `out-${i}.txt`), 'utf8')).toBe(`${i}\n`)
  expect(proxy.cuts()).toBeGreaterThan(0)
})

test('requestJson resends a read, and a submit with a client_request_id, whose reused connection was cut; a submit without one is not resent', async () => {
  const host = await startHost({ workers: 0 })
  proxy = await cuttingProxy(host.url)
  const url = (path: string) => proxy!.url + path
  const token = host.token

  const health = () => requestJson(url('/api/health'), { method: 'GET', token })
  expect((await health()).status).toBe(200)
  // The agent's connection is reused, cut, and the read goes again on a fresh one.
  expect((await health()).status).toBe(200)
  expect(proxy.cuts()).toBe(1)

  await health() // a connection for the agent to reuse
  const keyed = { job_type: 'noop', cost_units: 1, client_request_id: 'keep-alive-1' }
  expect((await requestJson(url('/api/scheduler/jobs/submit'), { method: 'POST', token, body: keyed })).status).toBe(201)
  expect(proxy.cuts()).toBe(2)

  await health()
  const bare = requestJson(url('/api/scheduler/jobs/submit'), { method: 'POST', token, body: { job_type: 'noop', cost_units: 1 } })
  await expect(bare).rejects.toMatchObject({ code: 'ECONNRESET' })
  expect(proxy.cuts()).toBe(3)
  const listed = (await (await host.call('/api/scheduler/jobs')).json()) as { jobs: { client_request_id: string | null }[] }
  expect(listed.jobs.map((job) => job.client_request_id)).toEqual(['keep-alive-1'])
})

test('a HostConnection resends a read, a submit with a client_request_id, and a request its caller calls idempotent, whose reused connection was cut; a submit without one is not resent', async () => {
  const host = await startHost({ workers: 0 })
  proxy = await cuttingProxy(host.url)
  const connection = new HostConnection(proxy.url, host.token)
  // The pool takes a connection back a moment after its answer is read: a request sent at once
  // would go on a new one.
  const idle = () => new Promise((resolve) => setTimeout(resolve, 20))
  try {
    const health = async () => {
      await idle()
      return connection.request('/api/health', { method: 'GET' })
    }
    expect((await health()).status).toBe(200)
    expect((await health()).status).toBe(200)
    expect(proxy.cuts()).toBe(1)

    await health()
    await idle()
    const keyed = { job_type: 'noop', cost_units: 1, client_request_id: 'pooled-1' }
    expect((await connection.request('/api/scheduler/jobs/submit', { method: 'POST', body: keyed })).status).toBe(201)
    expect(proxy.cuts()).toBe(2)

    await health()
    await idle()
    // No client_request_id: resent because its caller says sending it twice is harmless.
    const declared = { job_type: 'noop', cost_units: 1, payload: { declared: true } }
    expect((await connection.request('/api/scheduler/jobs/submit', { method: 'POST', body: declared, idempotent: true })).status).toBe(201)
    expect(proxy.cuts()).toBe(3)

    await health()
    await idle()
    const bare = connection.request('/api/scheduler/jobs/submit', { method: 'POST', body: { job_type: 'noop', cost_units: 1 } })
    await expect(bare).rejects.toMatchObject({ code: 'UND_ERR_SOCKET' })
    expect(proxy.cuts()).toBe(4)
    const listed = (await (await host.call('/api/scheduler/jobs')).json()) as { jobs: { client_request_id: string | null; payload: unknown }[] }
    expect(listed.jobs.map((job) => job.client_request_id ?? job.payload).sort()).toEqual([{ declared: true }, 'pooled-1'])
  } finally {
    await connection.close()
  }
})

test('a HostConnection reads an answer that is not JSON as NotJsonAnswer, with its status and text', async () => {
  const server = createServer((_req, res) => {
    res.statusCode = 502
    res.end('<html>Bad gateway</html>')
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const connection = new HostConnection(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, 't')
  try {
    const answer = connection.request('/internal/worker/batch', { method: 'POST', body: {} })
    await expect(answer).rejects.toBeInstanceOf(NotJsonAnswer)
    await expect(answer).rejects.toMatchObject({ status: 502, statusText: 'Bad Gateway', text: '<html>Bad gateway</html>' })
  } finally {
    await connection.close()
    await new Promise((resolve) => server.close(resolve))
  }
})

test('a HostConnection to a URL with a path (a host behind a proxy under a prefix) sends every request under it, as the commands do', async () => {
  const paths: string[] = []
  const server = createServer((req, res) => {
    paths.push(req.url ?? '')
    res.setHeader('content-type', 'application/json')
    res.end('{}')
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const prefixed = new HostConnection(`${base}/leasehold/`, 't')
  const plain = new HostConnection(base, 't')
  try {
    await prefixed.request('/internal/worker/batch', { method: 'POST', body: {} })
    await plain.request('/internal/worker/batch', { method: 'POST', body: {} })
    expect(paths).toEqual(['/leasehold/internal/worker/batch', '/internal/worker/batch'])
  } finally {
    await Promise.all([prefixed.close(), plain.close()])
    await new Promise((resolve) => server.close(resolve))
  }
})

/** The clients, each sending one GET to `url`: its status, and what closes what the client holds (once the test is done). */
const clients: [string, (url: string) => Promise<{ status: number; close(): Promise<void> }>][] = [
  ['requestJson', async (url) => ({ status: (await requestJson(url, { method: 'GET', token: 't' })).status, close: async () => {} })],
  [
    'a HostConnection',
    async (url) => {
      const connection = new HostConnection(url, 't')
      return { status: (await connection.request('/', { method: 'GET' })).status, close: () => connection.close() }
    },
  ],
]

test.each(clients)("%s's connections honour the host's Keep-Alive hint: the client closes an idle one itself", async (_client, get) => {
  // A host that says it keeps idle connections 3 s, and in fact never closes them: any close is the client's.
  const server = createServer((_req, res) => {
    res.setHeader('Keep-Alive', 'timeout=3')
    res.end('{}')
  })
  server.keepAliveTimeout = 0
  let closed = false
  server.on('connection', (socket) => socket.on('close', () => (closed = true)))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const answer = await get(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`)
  try {
    expect(answer.status).toBe(200)
    // By the hint: 1 s before the host's 3 s for requestJson, 2 s before for undici (whose own
    // default is 4 s, node:http's agent's 30 s).
    await until(() => closed, 3_500, 'the idle connection closed by the client')
  } finally {
    await answer.close()
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  }
})
