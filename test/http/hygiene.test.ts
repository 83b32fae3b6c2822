/**
 * HTTP hygiene at the host's edge, each over a raw socket so that the request is exactly what a
 * client sent: strict UTF-8, names that are well-formed Unicode without U+0000, an unknown
 * `Expect`, two Host headers, a request-target in absolute form, a trailing slash, and a client
 * let go of after the 408 for headers that never finished.
 */
import { createServer } from 'node:http'
import { connect, type AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { answerClientError } from '../../src-main/http/server'
import { startTestHost, type TestHost } from '../helpers/host'
import { until } from '../helpers/until'

let host: TestHost
beforeAll(async () => {
  host = await startTestHost({ workers: 0 })
})
afterAll(() => host.dispose())

interface Raw {
  status: number
  head: string
  json: Record<string, unknown> | null
}

/** Sends `bytes` on a fresh connection and reads one answer (its length from Content-Length). */
function raw(bytes: Buffer | string, port = Number(new URL(host.url).port)): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1')
    let received = Buffer.alloc(0)
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk])
      const end = received.indexOf('\r\n\r\n')
      if (end === -1) return
      const head = received.subarray(0, end).toString('latin1')
      const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0)
      if (received.length < end + 4 + length) return
      const text = received.subarray(end + 4, end + 4 + length).toString('utf8')
      socket.destroy()
      resolve({ status: Number(head.split(' ')[1]), head, json: text ? (JSON.parse(text) as Record<string, unknown>) : null })
    })
    socket.on('error', reject)
    socket.write(bytes)
  })
}

const hostHeader = () => new URL(host.url).host

/** A request with the token and the Host header, `extra` header lines, and a JSON body (bytes as given). */
function request(method: string, target: string, body?: Buffer, extra: string[] = []): Buffer {
  const lines = [`${method} ${target} HTTP/1.1`, `Host: ${hostHeader()}`, `Authorization: Bearer ${host.token}`, ...extra]
  if (body) lines.push('Content-Type: application/json', `Content-Length: ${body.length}`)
  return Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), body ?? Buffer.alloc(0)])
}

const SUBMIT = '/api/scheduler/jobs/submit'
const json = (value: unknown) => Buffer.from(JSON.stringify(value), 'utf8')

describe('bodies and names', () => {
  test('a body that is not valid UTF-8 is 400 invalid_json, on the lane and through Koa alike', async () => {
    const bad = Buffer.concat([Buffer.from('{"job_type":"no'), Buffer.from([0xc3]), Buffer.from('op","cost_units":1}')])
    const answer = await raw(request('POST', SUBMIT, bad))
    expect(answer.status, answer.head).toBe(400)
    expect(answer.json).toMatchObject({ code: 'invalid_json' })
    // Through Koa: a content type the lane does not take.
    const viaKoa = await raw(
      Buffer.concat([
        Buffer.from(`POST ${SUBMIT} HTTP/1.1\r\nHost: ${hostHeader()}\r\nAuthorization: Bearer ${host.token}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${bad.length}\r\n\r\n`),
        bad,
      ]),
    )
    expect(viaKoa.status).toBe(400)
    expect(viaKoa.json).toMatchObject({ code: 'invalid_json' })
  })

  test('a job type or queue with a lone surrogate or U+0000 is 400 naming the field; a name outside the BMP is fine', async () => {
    for (const [field, value] of [['job_type', 'no\ud800op'], ['job_type', 'no\u0000op'], ['job_type', '\udc00'], ['queue', 'q\u0000'], ['queue', 'q\udbff']] as const) {
      const answer = await raw(request('POST', SUBMIT, json({ job_type: 'noop', cost_units: 1, [field]: value })))
      expect(answer.status, `${field} ${JSON.stringify(value)}`).toBe(400)
      expect(answer.json).toMatchObject({ code: 'invalid_request', detail: expect.stringContaining(field) })
    }
    const claim = await raw(request('POST', '/internal/worker/claim', json({ worker_id: 'w', streams: ['a\ud800'], max_wait_ms: 0 })))
    expect(claim.status).toBe(400)
    expect((await raw(request('POST', '/api/queues/q%00/pause', json({})))).status).toBe(400)
    const emoji = await raw(request('POST', SUBMIT, json({ job_type: 'noop-\u{1F600}', cost_units: 1, queue: 'q-\u{1F600}' })))
    expect(emoji.status).toBe(201)
  })
})

describe('the request line and headers', () => {
  test('Expect other than 100-continue is 417 expectation_failed with {detail, code}', async () => {
    const answer = await raw(request('POST', SUBMIT, json({ job_type: 'noop', cost_units: 1 }), ['Expect: bogus']))
    expect(answer.status).toBe(417)
    expect(answer.head).toMatch(/content-type: application\/json/i)
    expect(answer.json).toEqual({ detail: expect.stringContaining('bogus'), code: 'expectation_failed' })
  })

  test('two Host headers are 400 bad_request, on the lane and through Koa', async () => {
    for (const [method, target, body] of [['POST', SUBMIT, json({ job_type: 'noop', cost_units: 1 })], ['GET', '/api/capacity', undefined]] as const) {
      const answer = await raw(request(method, target, body, [`Host: ${hostHeader()}`]))
      expect(answer.status, target).toBe(400)
      expect(answer.json).toMatchObject({ code: 'bad_request' })
    }
  })

  test('a request-target in absolute form must name this server, as the Host header must', async () => {
    const foreign = await raw(request('POST', `http://evil.example${SUBMIT}`, json({ job_type: 'noop', cost_units: 1 })))
    expect(foreign.status).toBe(403)
    expect(foreign.json).toMatchObject({ code: 'forbidden_host' })
    const foreignPort = await raw(request('GET', `http://127.0.0.1:1/api/capacity`))
    expect(foreignPort.status).toBe(403)
    const own = await raw(request('POST', `http://${hostHeader()}${SUBMIT}`, json({ job_type: 'noop', cost_units: 1 })))
    expect(own.status).toBe(201)
  })

  test('a path with a trailing slash is no route: 404 not_found', async () => {
    for (const [method, target, body] of [['GET', '/api/scheduler/jobs/', undefined], ['POST', `${SUBMIT}/`, json({ job_type: 'noop', cost_units: 1 })], ['GET', '/api/capacity/', undefined]] as const) {
      const answer = await raw(request(method, target, body))
      expect(answer.status, target).toBe(404)
      expect(answer.json).toMatchObject({ code: 'not_found' })
    }
    expect((await raw(request('GET', '/api/scheduler/jobs'))).status).toBe(200)
  })
})

test('after the 408 for headers that never finished, the socket is destroyed: a client that keeps sending is cut off', async () => {
  // The host's own listener on a server with short limits (the host waits 10 s for headers).
  const server = createServer({ headersTimeout: 200, requestTimeout: 300, connectionsCheckingInterval: 50 }, () => {})
  server.on('clientError', answerClientError)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  try {
    const socket = connect({ port: (server.address() as AddressInfo).port, host: '127.0.0.1', allowHalfOpen: true })
    let received = ''
    let closed = false
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')))
    socket.on('error', () => {})
    socket.on('close', () => (closed = true))
    socket.write('GET / HTTP/1.1\r\nHost: x\r\n')
    await until(() => received.includes('\r\n\r\n'), 5000, 'the 408')
    expect(received).toMatch(/^HTTP\/1\.1 408 /)
    // A slow client keeps sending header bytes: the host must not keep taking them.
    await until(() => {
      if (!socket.destroyed) socket.write('X-Slow: 1\r\n')
      return closed
    }, 5000, 'the socket closed by the host')
  } finally {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  }
})
