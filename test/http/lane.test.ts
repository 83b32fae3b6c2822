/**
 * The lane (src-main/http/lane.ts): the common requests of the worker routes and of the one-job
 * submit answered without Koa, every other request left to Koa, and nothing answered
 * differently. First the lane alone, in front of a marker that stands for Koa; then a real host,
 * where each of its routes is asked once through the lane and once through Koa and must answer
 * alike.
 */
import { createServer, request, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest'
import { EngineError } from '../../src-main/engine'
import { ManualClock } from '../../src-main/engine/rules/clock'
import { WORKER_PREFIX } from '../../src-main/http/worker-api'
import { startTestHost, type TestHost } from '../helpers/host'
import { echoLane } from './echo-lane'
import { appWithStubs } from './routes'
import { API_T0, QUEUE, submit } from './support'

const TOKEN = 't'.repeat(32)
const LIMIT = 1024
/** The status the marker standing for Koa answers: the lane left the request. */
const LEFT_TO_KOA = 599

interface Raw {
  status: number
  headers: Record<string, string | string[] | undefined>
  body: string
}

/** One request over a fresh connection, the body written as given. */
function send(port: number, method: string, path: string, headers: Record<string, string>, body?: string): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, headers: { host: `127.0.0.1:${port}`, ...headers }, agent: false }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (chunk) => (text += chunk))
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text }))
    })
    req.on('error', reject)
    req.end(body)
  })
}

const json = (value: unknown) => JSON.stringify(value)
const asWorker = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }

describe('the lane alone', () => {
  let server: Server
  let port = 0
  const echo = echoLane(TOKEN, LIMIT, () => port)
  const logged = echo.logged
  const behave = echo.behave

  beforeAll(async () => {
    const lane = echo.lane
    server = createServer((req, res) => {
      if (lane(req, res)) return
      req.resume()
      res.writeHead(LEFT_TO_KOA).end()
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    port = (server.address() as AddressInfo).port
  })
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())))
  beforeEach(() => echo.reset())

  test("a worker's request in its common shape is answered by the lane, with the API's headers", async () => {
    const res = await send(port, 'POST', `${WORKER_PREFIX}/echo`, asWorker, json({ worker_id: 'w1', say: 'hi' }))
    expect(res.status).toBe(200)
    expect(JSON.parse(res.body)).toEqual({ heard: 'hi' })
    expect(res.headers).toMatchObject({
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
      'content-type': 'application/json; charset=utf-8',
      'content-length': String(Buffer.byteLength(res.body)),
    })
  })

  test.each([
    ['another method', 'PUT', `${WORKER_PREFIX}/echo`, asWorker, json({ worker_id: 'w1' })],
    ['a path no worker route has', 'POST', `${WORKER_PREFIX}/nothing`, asWorker, json({ worker_id: 'w1' })],
    ['a query string', 'POST', `${WORKER_PREFIX}/echo?x=1`, asWorker, json({ worker_id: 'w1' })],
    ['a trailing slash', 'POST', `${WORKER_PREFIX}/echo/`, asWorker, json({ worker_id: 'w1' })],
    ['the path in capitals', 'POST', `${WORKER_PREFIX}/ECHO`, asWorker, json({ worker_id: 'w1' })],
    ['a JSON type with a charset', 'POST', `${WORKER_PREFIX}/echo`, { ...asWorker, 'content-type': 'application/json; charset=utf-8' }, json({ worker_id: 'w1' })],
    ['another type', 'POST', `${WORKER_PREFIX}/echo`, { ...asWorker, 'content-type': 'text/plain' }, json({ worker_id: 'w1' })],
    ['no body', 'POST', `${WORKER_PREFIX}/echo`, asWorker, undefined],
    ['a body over the limit', 'POST', `${WORKER_PREFIX}/echo`, asWorker, json({ worker_id: 'w1', say: 'x'.repeat(LIMIT) })],
    ['a chunked body', 'POST', `${WORKER_PREFIX}/echo`, { ...asWorker, 'transfer-encoding': 'chunked' }, json({ worker_id: 'w1' })],
  ])('a request with %s is left to Koa', async (_, method, path, headers, body) => {
    const res = await send(port, method, path, headers, body)
    expect(res.status).toBe(LEFT_TO_KOA)
  })

  test('the request guard runs first: no token is 401, a foreign Host 403, and the route does not run', async () => {
    let ran = false
    behave(async () => (ran = true))
    const noToken = await send(port, 'POST', `${WORKER_PREFIX}/echo`, { 'content-type': 'application/json' }, json({ worker_id: 'w1' }))
    expect(noToken.status).toBe(401)
    expect(JSON.parse(noToken.body)).toMatchObject({ code: 'unauthorized' })
    const foreign = await send(port, 'POST', `${WORKER_PREFIX}/echo`, { ...asWorker, host: 'evil.example' }, json({ worker_id: 'w1' }))
    expect(foreign.status).toBe(403)
    expect(JSON.parse(foreign.body)).toMatchObject({ code: 'forbidden_host' })
    expect(foreign.headers['cache-control']).toBe('no-store')
    expect(ran).toBe(false)
  })

  test('a body that is not JSON is 400 invalid_json; one that fails the schema is 400 invalid_request naming the field', async () => {
    const broken = await send(port, 'POST', `${WORKER_PREFIX}/echo`, asWorker, '{"worker_id":')
    expect(broken.status).toBe(400)
    expect(JSON.parse(broken.body)).toEqual({ code: 'invalid_json', detail: 'The body is not well-formed JSON' })
    const wrong = await send(port, 'POST', `${WORKER_PREFIX}/echo`, asWorker, json({ worker_id: 7 }))
    expect(wrong.status).toBe(400)
    expect(JSON.parse(wrong.body)).toMatchObject({ code: 'invalid_request', detail: expect.stringContaining('worker_id') })
  })

  test("a route's error is answered as Koa's error middleware answers it: a domain error with its status, a bug as a logged 500 without its stack", async () => {
    behave(async () => {
      throw new EngineError('lease_expired', 'Lease L expired', { ack: false })
    })
    const expired = await send(port, 'POST', `${WORKER_PREFIX}/echo`, asWorker, json({ worker_id: 'w1' }))
    expect(expired.status).toBe(409)
    expect(JSON.parse(expired.body)).toMatchObject({ code: 'lease_expired', detail: 'Lease L expired' })
    expect(logged).toEqual([])

    behave(async () => {
      throw new TypeError('a bug')
    })
    const bug = await send(port, 'POST', `${WORKER_PREFIX}/echo`, asWorker, json({ worker_id: 'w1' }))
    expect(bug.status).toBe(500)
    expect(JSON.parse(bug.body)).toEqual({ code: 'internal_error', detail: 'Internal error' })
    expect(logged).toHaveLength(1)
    expect(logged[0]).toMatch(/^leasehold: internal error on POST \/internal\/worker\/echo: TypeError: a bug/)
  })

  test('an answer given early (a waiting claim granted at a commit) is the one sent; the settled answer is not sent after it', async () => {
    behave(async (_, call) => {
      call.answerNow({ early: true })
      return { settled: true }
    })
    const res = await send(port, 'POST', `${WORKER_PREFIX}/echo`, asWorker, json({ worker_id: 'w1' }))
    expect(res.status).toBe(200)
    expect(JSON.parse(res.body)).toEqual({ early: true })
    expect(logged).toEqual([])
  })

  test('a client that hangs up while its call waits aborts the call, and the lane goes on serving', async () => {
    const { waiting, aborted } = echo.waitForHangUp()
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: `${WORKER_PREFIX}/echo`, headers: { host: `127.0.0.1:${port}`, ...asWorker }, agent: false })
    req.on('error', () => {})
    req.end(json({ worker_id: 'w1' }))
    await waiting
    req.destroy()
    expect(await aborted).toBe(true)
    echo.reset()
    expect((await send(port, 'POST', `${WORKER_PREFIX}/echo`, asWorker, json({ worker_id: 'w1', say: 'next' }))).body).toBe(json({ heard: 'next' }))
  })
})

test('the lane serves the worker routes and the one-job submit, and nothing else', () => {
  expect([...appWithStubs().lanePaths].sort()).toEqual(
    [...['claim', 'heartbeat', 'complete', 'fail', 'batch', 'report'].map((route) => `${WORKER_PREFIX}/${route}`), `${QUEUE}/jobs/submit`].sort(),
  )
})

describe('the lane and Koa answer each of its routes alike', () => {
  let host: TestHost
  beforeAll(async () => {
    host = await startTestHost({ busy: 0, totalUnits: 10 }, { clock: new ManualClock(API_T0) }) // a clock that stands still: the same times
  })
  afterAll(() => host.dispose())

  const port = () => Number(new URL(host.url).port)
  /** `application/json` goes through the lane; with a charset the same request goes to Koa. */
  const THROUGH = { lane: 'application/json', koa: 'application/json; charset=utf-8' } as const
  type Carrier = keyof typeof THROUGH
  const ask = (carrier: Carrier, route: string, body: unknown, token = host.token) =>
    send(port(), 'POST', `${WORKER_PREFIX}/${route}`, { authorization: `Bearer ${token}`, 'content-type': THROUGH[carrier] }, json(body))

  /** The parts of an answer both carriers must give alike: the ids of the two jobs (and their lengths) left out. */
  const IDS = new Set(['job_id', 'attempt_id', 'lease_id', 'lease_token', 'message_id'])
  const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g
  const comparable = (res: Raw) => ({
    status: res.status,
    headers: Object.fromEntries(Object.entries(res.headers).filter(([name]) => name !== 'date' && name !== 'content-length')),
    body: JSON.parse(res.body, (key, value) => (IDS.has(key) ? typeof value : typeof value === 'string' ? value.replace(UUID, 'ID') : value)),
  })

  /** A job's whole the worker API life through one carrier, every answer recorded. */
  async function lifecycle(carrier: Carrier, workerId = 'w1'): Promise<unknown[]> {
    const job = await submit(host, { queue: 'parity' })
    const answers: Raw[] = []
    const claimed = await ask(carrier, 'claim', { worker_id: workerId, streams: [job.queue], max_wait_ms: 0 })
    answers.push(claimed)
    const grant = JSON.parse(claimed.body)
    const lease = { worker_id: workerId, job_id: grant.job_id, lease_token: grant.lease_token }
    answers.push(await ask(carrier, 'heartbeat', { ...lease, progress: 0.5 }))
    answers.push(await ask(carrier, 'complete', { ...lease, attempt_id: grant.attempt_id, result: { ok: 1 } }))
    answers.push(await ask(carrier, 'complete', { ...lease, attempt_id: grant.attempt_id, result: { ok: 1 } })) // again: answered alike, ack
    answers.push(await ask(carrier, 'heartbeat', lease)) // the lease is gone: 409
    answers.push(await ask(carrier, 'claim', { worker_id: workerId, streams: [job.queue], max_wait_ms: 0 })) // nothing left
    answers.push(await ask(carrier, 'batch', { worker_id: workerId, claim: { streams: [job.queue], max_jobs: 2 } }))
    answers.push(await ask(carrier, 'report', { worker_id: workerId, kind: 'handler_missing', detail: 'no handler for x' }))
    answers.push(await ask(carrier, 'fail', { ...lease, attempt_id: grant.attempt_id, error: { message: 'late' } }))
    answers.push(await ask(carrier, 'claim', { worker_id: workerId, streams: [] })) // invalid
    answers.push(await ask(carrier, 'claim', { worker_id: workerId, streams: ['x'] }, 'wrong-token'))
    return answers.map(comparable)
  }

  test('a one-job submit, a repeated client_request_id and a refusal: the same statuses, headers and bodies', async () => {
    const submitVia = (carrier: Carrier, body: unknown) =>
      send(port(), 'POST', `${QUEUE}/jobs/submit`, { authorization: `Bearer ${host.token}`, 'content-type': THROUGH[carrier] }, json(body))
    const answers = async (carrier: Carrier) => {
      const request = { job_type: 'generic', cost_units: 1, client_request_id: `req-${carrier}`, payload: { n: 1 } }
      const shown = [await submitVia(carrier, request), await submitVia(carrier, request), await submitVia(carrier, { job_type: 'generic', cost_units: 0 })]
      return shown.map(comparable)
    }
    const throughLane = await answers('lane')
    const throughKoa = await answers('koa')
    expect(throughLane.map((answer: any) => answer.status)).toEqual([201, 409, 400])
    // The client_request_id each carrier sent is the one difference.
    expect(JSON.stringify(throughLane).replaceAll('req-lane', 'req')).toBe(JSON.stringify(throughKoa).replaceAll('req-koa', 'req'))
  })

  test('a lifecycle, its refusals and its errors: the same statuses, headers and bodies', async () => {
    const throughLane = await lifecycle('lane')
    const throughKoa = await lifecycle('koa')
    expect(throughLane.map((answer: any) => answer.status)).toEqual([200, 200, 200, 200, 409, 200, 200, 200, 409, 400, 401])
    expect(throughLane).toEqual(throughKoa)
  })
})
