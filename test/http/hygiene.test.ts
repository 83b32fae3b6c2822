/**
 * HTTP hygiene at the host's edge, each over a raw socket so that the request is exactly what a
 * client sent: strict UTF-8, names that are well-formed Unicode without U+0000, an unknown
 * `Expect`, two Host headers, a request-target in absolute form, a trailing slash, and a client
 * let go of after the 408 for headers that never finished.
 */
import { createServer } from 'node:http'
import { connect, type AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { answerClientError, answerConnect } from '../../src-main/http/server'
import { startTestHost, type TestHost } from '../helpers/host'
import { until } from '../helpers/until'
import { allRoutes, fill } from './routes'
import { dbDigest } from './support'

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

  test('a job type, queue or worker id with a lone surrogate or U+0000 is 400 naming the field; a name outside the BMP is fine', async () => {
    for (const [field, value] of [['job_type', 'no\ud800op'], ['job_type', 'no\u0000op'], ['job_type', '\udc00'], ['queue', 'q\u0000'], ['queue', 'q\udbff']] as const) {
      const answer = await raw(request('POST', SUBMIT, json({ job_type: 'noop', cost_units: 1, [field]: value })))
      expect(answer.status, `${field} ${JSON.stringify(value)}`).toBe(400)
      expect(answer.json).toMatchObject({ code: 'invalid_request', detail: expect.stringContaining(field) })
    }
    const claim = await raw(request('POST', '/internal/worker/claim', json({ worker_id: 'w', streams: ['a\ud800'], max_wait_ms: 0 })))
    expect(claim.status).toBe(400)
    const nulWorker = await raw(request('POST', '/internal/worker/claim', json({ worker_id: 'a\u0000b', streams: ['a'], max_wait_ms: 0 })))
    expect(nulWorker.status).toBe(400)
    expect(nulWorker.json).toMatchObject({ code: 'invalid_request', detail: expect.stringContaining('worker_id') })
    expect((await raw(request('POST', '/api/queues/q%00/pause', json({})))).status).toBe(400)
    const emoji = await raw(request('POST', SUBMIT, json({ job_type: 'noop-\u{1F600}', cost_units: 1, queue: 'q-\u{1F600}' })))
    expect(emoji.status).toBe(201)
  })

  test('a queue named "." or ".." is 400: its pause and resume paths would lose the segment, so it could never be paused', async () => {
    for (const queue of ['.', '..']) {
      const answer = await raw(request('POST', SUBMIT, json({ job_type: 'noop', cost_units: 1, queue })))
      expect(answer.status, queue).toBe(400)
      expect(answer.json).toMatchObject({ code: 'invalid_request', detail: expect.stringContaining('cannot be "." or ".."') })
      const claim = await raw(request('POST', '/internal/worker/claim', json({ worker_id: 'w', streams: ['a', queue], max_wait_ms: 0 })))
      expect(claim.status, queue).toBe(400)
    }
    for (const queue of ['...', '.hidden', 'a.b']) {
      expect((await raw(request('POST', SUBMIT, json({ job_type: 'noop', cost_units: 1, queue })))).status, queue).toBe(201)
    }
  })
})

describe('every string a body carries reads back as sent, or is refused', () => {
  /** Each body with a lone surrogate somewhere, and the field its refusal must name. */
  const SURROGATES: [target: string, body: Record<string, unknown>, field: string][] = [
    [SUBMIT, { job_type: 'noop', cost_units: 1, addon_id: '\ud800' }, 'addon_id'],
    [SUBMIT, { job_type: 'noop', cost_units: 1, client_request_id: 'k\udbff' }, 'client_request_id'],
    [SUBMIT, { job_type: 'noop', cost_units: 1, tags: ['ok', 't\udc00'] }, 'tags.1'],
    [SUBMIT, { job_type: 'noop', cost_units: 1, payload: { text: ['x', 'p\ud800q'] } }, 'payload.text.1'],
    [SUBMIT, { job_type: 'noop', cost_units: 1, payload: { '\ud800': 1 } }, 'payload'],
    [SUBMIT, { job_type: 'noop', cost_units: 1, constraints: { 'gpu\udfff': true } }, 'constraints'],
    ['/api/scheduler/jobs/submit-batch', { jobs: [{ job_type: 'noop', cost_units: 1 }, { job_type: 'noop', cost_units: 1, addon_id: 'a\ud800' }] }, 'jobs.1.addon_id'],
    ['/internal/worker/claim', { worker_id: 'w\ud800', streams: ['default'], max_wait_ms: 0 }, 'worker_id'],
    ['/api/files/leases/acquire', { file: '/tmp/out\ud800.pdf', owner_id: 'job:1' }, 'file'],
    ['/api/queues/reports/pause', { requested_by: 'ops\udbff' }, 'requested_by'],
  ]

  test('a lone surrogate in any string of a body (an id, a tag, a key, a payload) is 400 invalid_request naming the field, and nothing is stored', async () => {
    const before = dbDigest(host)
    for (const [target, body, field] of SURROGATES) {
      const answer = await raw(request('POST', target, json(body)))
      expect(answer.status, `${target} ${field}`).toBe(400)
      expect(answer.json).toMatchObject({ code: 'invalid_request', detail: expect.stringMatching(new RegExp(`^${field.replace(/\./g, '\\.')}: `)) })
    }
    expect(dbDigest(host)).toBe(before)
  })

  test('a key named __proto__ in a map of flags (constraints) is 400 naming the field, on the lane and through Koa; in a payload it is stored and reads back', async () => {
    const before = dbDigest(host)
    for (const constraints of ['{"__proto__":{"a":1}}', '{"__proto__":true}', '{"gpu_required":true,"\\u005f_proto__":true}']) {
      const body = Buffer.from(`{"job_type":"noop","cost_units":1,"constraints":${constraints}}`)
      // The lane takes `application/json` exactly; a charset sends it through Koa.
      for (const type of [[], ['Content-Type: application/json; charset=utf-8']]) {
        const bytes = type.length === 0 ? request('POST', SUBMIT, body) : Buffer.concat([Buffer.from(`POST ${SUBMIT} HTTP/1.1\r\nHost: ${hostHeader()}\r\nAuthorization: Bearer ${host.token}\r\n${type[0]}\r\nContent-Length: ${body.length}\r\n\r\n`), body])
        const answer = await raw(bytes)
        expect(answer.status, `${constraints} ${type}`).toBe(400)
        expect(answer.json).toMatchObject({ code: 'invalid_request', detail: 'constraints: a key named "__proto__" is not taken' })
      }
    }
    expect(dbDigest(host)).toBe(before)
    const stored = await raw(request('POST', SUBMIT, Buffer.from('{"job_type":"noop","cost_units":1,"payload":{"__proto__":{"a":1}}}')))
    expect(stored.status).toBe(201)
    const id = (stored.json!.job as { job_id: string }).job_id
    const read = await host.call(`/api/scheduler/jobs/${id}`)
    expect(JSON.stringify(((await read.json()) as { job: { payload: unknown } }).job.payload)).toBe('{"__proto__":{"a":1}}')
  })

  test('client_request_ids that differ only in ill-formed text are refused, not stored as one; U+FFFD itself, and text outside the BMP, read back exactly', async () => {
    for (const key of ['k\ud800', 'k\udbff']) {
      expect((await raw(request('POST', SUBMIT, json({ job_type: 'noop', cost_units: 1, client_request_id: key })))).status).toBe(400)
    }
    const sent = { job_type: 'noop', cost_units: 1, client_request_id: 'k\ufffd\ufffd\ufffd', addon_id: 'add-on \u{1F600}', tags: ['\u{1F600}'], payload: { '\u{1F600}': '\ufffd' } }
    const created = await raw(request('POST', SUBMIT, json(sent)))
    expect(created.status).toBe(201)
    const read = await raw(request('GET', `/api/scheduler/jobs/${(created.json!.job as { job_id: string }).job_id}`))
    expect(read.json!.job).toMatchObject({ client_request_id: sent.client_request_id, addon_id: sent.addon_id, tags: sent.tags, payload: sent.payload })
  })

  test('a number a double cannot hold (1e400) is 400 naming the field; an integer past 2^53 is read as the nearest double', async () => {
    const before = dbDigest(host)
    for (const [text, field] of [
      ['{"job_type":"noop","cost_units":1,"payload":{"n":1e400}}', 'payload.n'],
      ['{"job_type":"noop","cost_units":1,"payload":{"a":[1,-1e400]}}', 'payload.a.1'],
      ['{"job_type":"noop","cost_units":1,"payload":1' + '0'.repeat(400) + '}', 'payload'],
    ] as const) {
      const answer = await raw(request('POST', SUBMIT, Buffer.from(text)))
      expect(answer.status, text.slice(0, 80)).toBe(400)
      expect(answer.json).toMatchObject({ code: 'invalid_request', detail: expect.stringMatching(new RegExp(`^${field.replace(/\./g, '\\.')}: `)) })
    }
    expect(dbDigest(host)).toBe(before)
    const big = await raw(request('POST', SUBMIT, Buffer.from('{"job_type":"noop","cost_units":1,"payload":{"n":9007199254740993}}')))
    expect(big.status).toBe(201)
    expect((big.json!.job as { payload: unknown }).payload).toEqual({ n: 9007199254740992 })
  })

  test('an empty body reads as {}: a route whose fields are all optional takes it, one with required fields is 400 naming them', async () => {
    const submit = await raw(request('POST', SUBMIT, Buffer.alloc(0)))
    expect(submit.status).toBe(400)
    expect(submit.json).toMatchObject({ code: 'invalid_request', detail: expect.stringContaining('job_type') })
    expect(submit.json!.detail).toContain('cost_units')
    expect((await raw(request('POST', '/api/queues/empty-body/resume', Buffer.alloc(0)))).status).toBe(200)
  })

  test('a POST that takes no fields (the event ticket) refuses any: 400 naming the field; none at all is fine', async () => {
    for (const body of [json({ x: 1 }), json([1, 2]), json('text'), json(null)]) {
      const answer = await raw(request('POST', '/api/events/ticket', body))
      expect(answer.status, body.toString()).toBe(400)
      expect(answer.json).toMatchObject({ code: 'invalid_request' })
    }
    expect((await raw(request('POST', '/api/events/ticket', json({ x: 1 })))).json!.detail).toContain('"x"')
    for (const body of [Buffer.alloc(0), json({})]) expect((await raw(request('POST', '/api/events/ticket', body))).status).toBe(200)
  })

  test('PUT /api/capacity with a body that names no setting is 400 naming the ones it takes; one setting the values in force writes nothing', async () => {
    const before = dbDigest(host)
    for (const body of [Buffer.alloc(0), json({})]) {
      const answer = await raw(request('PUT', '/api/capacity', body))
      expect(answer.status).toBe(400)
      expect(answer.json).toEqual({ code: 'invalid_request', detail: '(body): give at least one of total_units, busy_rating' })
    }
    const current = (await raw(request('GET', '/api/capacity'))).json!
    const same = await raw(request('PUT', '/api/capacity', json({ total_units: current.total_units })))
    expect([same.status, same.json]).toEqual([200, current])
    expect(dbDigest(host)).toBe(before)
  })
})

describe('paths and queries', () => {
  test('a path segment whose percent-encoding is not UTF-8 is 400 invalid_request naming the parameter; nothing is paused', async () => {
    for (const [method, target, param] of [
      ['POST', '/api/queues/%ED%A0%80/pause', 'queue'],
      ['POST', '/api/queues/q%FF/resume', 'queue'],
      ['GET', '/api/scheduler/jobs/%FF', 'job_id'],
      ['GET', '/api/scheduler/jobs/%E2%82/events', 'job_id'],
    ] as const) {
      const answer = await raw(request(method, target, method === 'POST' ? json({}) : undefined))
      expect(answer.status, target).toBe(400)
      expect(answer.json).toMatchObject({ code: 'invalid_request', detail: expect.stringMatching(new RegExp(`^${param}: `)) })
    }
    const queues = (await raw(request('GET', '/api/queues'))).json!.queues as { queue: string; paused: boolean }[]
    expect(queues.filter((q) => q.paused || q.queue.includes('%'))).toEqual([])
    // Encoded well, a `%` is a name's own: %25FF is the id "%FF", which names no job.
    expect((await raw(request('GET', '/api/scheduler/jobs/%25FF'))).json).toMatchObject({ code: 'job_not_found' })
  })

  test('a not-found detail quotes the id printably: a control character the path encoded (%00, %1B) is written \\u0000, never echoed', async () => {
    for (const [target, code, shown] of [
      ['/api/blockers/%00', 'blocker_not_found', 'No blocker \\u0000'],
      ['/api/scheduler/jobs/a%1B%5B2J', 'job_not_found', 'No job a\\u001b[2J'],
      ['/api/scheduler/lease/%07', 'lease_not_found', 'No lease \\u0007'],
      ['/api/schedules/s%0A', 'schedule_not_found', 'No schedule s\\u000a'],
    ] as const) {
      const answer = await raw(request('GET', target))
      expect(answer.status, target).toBe(404)
      expect(answer.json).toEqual({ code, detail: shown })
    }
  })

  test('a query parameter whose percent-encoding is not UTF-8 is 400 naming it', async () => {
    const answer = await raw(request('GET', '/api/scheduler/jobs?limit=5&addon_id=a%ED%A0%80'))
    expect(answer.status).toBe(400)
    expect(answer.json).toMatchObject({ code: 'invalid_request', detail: expect.stringMatching(/^addon_id: /) })
    expect((await raw(request('GET', '/api/scheduler/jobs?addon_id=caf%C3%A9'))).status).toBe(200)
  })

  test('an integer query parameter is plain decimal digits: 0x10, 0b11, 1e1, " 5", "5 " are 400 naming it and saying what it takes, not that it is a string', async () => {
    const detail = 'limit: must be a whole number from 1 to 500, in plain decimal digits'
    for (const limit of ['0x10', '0b11', '1e1', '%205', '5%20', '', '-0', '+5', '5.0', '12345678901234567', '0', '501']) {
      const answer = await raw(request('GET', `/api/scheduler/jobs?limit=${limit}`))
      expect(answer.status, limit).toBe(400)
      expect(answer.json, limit).toEqual({ code: 'invalid_request', detail })
    }
    // Every list's page takes it alike: the blockers', the file leases', a job's timeline.
    const job = host.engine.submit({ job_type: 'noop', cost_units: 1 }).job.id
    for (const target of ['/api/blockers', '/api/files/leases', `/api/scheduler/jobs/${job}/events`]) {
      const answer = await raw(request('GET', `${target}?limit=0x10`))
      expect(answer.status, target).toBe(400)
      expect(answer.json, target).toEqual({ code: 'invalid_request', detail })
    }
    for (const limit of ['16', '016', '500']) expect((await raw(request('GET', `/api/scheduler/jobs?limit=${limit}`))).status, limit).toBe(200)
  })

  test('an unknown query parameter is 400 naming the query, not the body', async () => {
    const answer = await raw(request('GET', '/api/scheduler/jobs?foo=bar'))
    expect(answer.status).toBe(400)
    expect(answer.json).toMatchObject({ code: 'invalid_request', detail: '(query): Unrecognized key: "foo"' })
  })

  test('a query key a route does not declare is refused 400 naming it, on every route, the fast paths too', async () => {
    const refused = (answer: Raw, what: string) => {
      expect(answer.status, `${what}: ${answer.head}`).toBe(400)
      expect(answer.json, what).toMatchObject({ code: 'invalid_request', detail: expect.stringContaining('(query): Unrecognized key: "dry_run"') })
    }
    const job = host.engine.submit({ job_type: 'noop', cost_units: 1, queue: 'dry' }).job.id
    // Every GET, the event stream and the routes that declare a query of their own among them.
    for (const route of allRoutes().filter((r) => r.method === 'GET')) {
      const target = `${fill(route.path, job)}?dry_run=true`
      refused(await raw(request('GET', target)), target)
    }
    // Destructive POSTs carry out nothing: the bulk cancel, a queue's pause.
    refused(await raw(request('POST', '/api/jobs/bulk/cancel?dry_run=true', json({ states: ['QUEUED'], queue: 'dry' }))), 'bulk cancel')
    refused(await raw(request('POST', '/api/queues/dry/pause?dry_run=true', json({}))), 'pause')
    refused(await raw(request('DELETE', '/api/schedules/nightly?dry_run=true')), 'schedule rm')
    refused(await raw(request('POST', '/api/events/ticket?dry_run=true', json({}))), 'ticket')
    expect(host.engine.getJob(job).state).toBe('QUEUED')
    const queues = (await raw(request('GET', '/api/queues'))).json!.queues as { queue: string; paused: boolean }[]
    expect(queues.filter((q) => q.paused)).toEqual([])
    // The lane's routes, in the very shape the front and the lane serve but for the query: nothing is submitted or claimed.
    const before = (await raw(request('GET', '/api/scheduler/jobs'))).json!.jobs as unknown[]
    refused(await raw(request('POST', `${SUBMIT}?dry_run=true`, json({ job_type: 'noop', cost_units: 1 }))), 'submit')
    refused(await raw(request('POST', '/internal/worker/claim?dry_run=true', json({ worker_id: 'w-query', streams: ['dry'], max_wait_ms: 0 }))), 'claim')
    expect((await raw(request('GET', '/api/scheduler/jobs'))).json!.jobs).toHaveLength(before.length)
    expect(host.engine.getJob(job).state).toBe('QUEUED')
    // Given twice, the key is named as on every route; an empty query is none.
    expect((await raw(request('GET', '/api/capacity?x=1&x=2'))).json).toEqual({ code: 'invalid_request', detail: 'x: given more than once' })
    expect((await raw(request('GET', '/api/capacity?'))).status).toBe(200)
  })
})

describe('the request line and headers', () => {
  test('Expect other than 100-continue is 417 expectation_failed with {detail, code}', async () => {
    const answer = await raw(request('POST', SUBMIT, json({ job_type: 'noop', cost_units: 1 }), ['Expect: bogus']))
    expect(answer.status).toBe(417)
    expect(answer.head).toMatch(/content-type: application\/json/i)
    expect(answer.json).toEqual({ detail: expect.stringContaining('bogus'), code: 'expectation_failed' })
  })

  test('Expect: 100-continue on a request refused whatever its body (no token, a body declared over the limit) is that refusal at once, without 100 Continue', async () => {
    const before = dbDigest(host)
    const head = (lines: string[]) => Buffer.from(`POST ${SUBMIT} HTTP/1.1\r\nHost: ${hostHeader()}\r\nContent-Type: application/json\r\nExpect: 100-continue\r\n${lines.join('\r\n')}\r\n\r\n`)
    const cases = [
      [head(['Content-Length: 31']), 401, 'unauthorized'],
      [head([`Authorization: Bearer ${host.token}`, `Content-Length: ${100 * 1024 * 1024}`]), 413, 'payload_too_large'],
    ] as const
    for (const [bytes, status, code] of cases) {
      const answer = await raw(bytes) // the body is never sent: the answer must come without it
      expect(answer.status, code).toBe(status)
      expect(answer.json).toMatchObject({ code })
      expect(answer.head).toMatch(/connection: close/i)
    }
    expect(dbDigest(host)).toBe(before)
  })

  test('Expect: 100-continue on a request that may be carried out is 100 Continue, and then its answer once the body came', async () => {
    const body = '{"job_type":"noop","cost_units":1}'
    const socket = connect(Number(new URL(host.url).port), '127.0.0.1')
    let received = ''
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')))
    socket.write(`POST ${SUBMIT} HTTP/1.1\r\nHost: ${hostHeader()}\r\nAuthorization: Bearer ${host.token}\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: ${body.length}\r\n\r\n`)
    await until(() => received.includes('\r\n\r\n'), 3000, 'the 100')
    expect(received).toBe('HTTP/1.1 100 Continue\r\n\r\n')
    socket.write(body)
    await until(() => /\r\n\r\n[^]*\r\n\r\n\{/.test(received), 3000, 'the answer')
    expect(received).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 201 /)
    socket.destroy()
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

  test('a path in another case is no route: 404 not_found, and nothing is submitted', async () => {
    const before = dbDigest(host)
    for (const [method, target, body] of [['GET', '/API/capacity', undefined], ['POST', SUBMIT.toUpperCase(), json({ job_type: 'noop', cost_units: 1 })], ['GET', '/api/Scheduler/jobs', undefined]] as const) {
      const answer = await raw(request(method, target, body))
      expect(answer.status, target).toBe(404)
      expect(answer.json).toMatchObject({ code: 'not_found' })
    }
    expect(dbDigest(host)).toBe(before)
  })
})

test('CONNECT, which Node hands only to the connect listener, is 501 not_implemented as any unknown method, and the connection closes', async () => {
  // The host's own listener on a bare server (the host registers it as it does clientError).
  const server = createServer(() => {})
  server.on('connect', answerConnect)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  try {
    const port = (server.address() as AddressInfo).port
    const answer = await raw(`CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n`, port)
    expect(answer.status).toBe(501)
    expect(answer.head).toMatch(/connection: close/i)
    expect(answer.json).toEqual({ detail: 'CONNECT is not implemented', code: 'not_implemented' })
  } finally {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  }
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
    expect(received).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/) // the reason phrase HTTP names, as Koa's answers have it
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

test.each([
  ['bytes that are not HTTP', ['/a'], 'GARBAGE\r\n\r\n', ['201 /a', '400 bad_request']],
  ['bytes that are not HTTP after two requests', ['/a', '/b'], 'GARBAGE\r\n\r\n', ['201 /a', '201 /b', '400 bad_request']],
  ['a request after one asking to close (its answer closes the connection: no 400)', ['/a close'], 'GET /c HTTP/1.1\r\nHost: x\r\n\r\n', ['201 /a']],
])('a request Node refuses after requests being carried out is refused after their answers, never instead of them: %s', async (_, targets, after, expected) => {
  // The host's own listener; each request is answered only once Node has refused what follows it.
  let refused!: () => void
  const refusal = new Promise<void>((resolve) => (refused = resolve))
  const server = createServer((req, res) => {
    req.resume()
    void refusal.then(() => res.writeHead(201, { 'Content-Type': 'text/plain', 'Content-Length': String(req.url!.length) }).end(req.url))
  })
  server.on('clientError', (error: NodeJS.ErrnoException, socket) => {
    answerClientError(error, socket)
    refused()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  try {
    const socket = connect((server.address() as AddressInfo).port, '127.0.0.1')
    let received = ''
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')))
    socket.on('error', () => {})
    const closed = new Promise((resolve) => socket.on('close', resolve))
    const requests = targets.map((target) => {
      const [path, close] = target.split(' ')
      return `POST ${path} HTTP/1.1\r\nHost: x\r\n${close ? 'Connection: close\r\n' : ''}Content-Length: 2\r\n\r\n{}`
    })
    socket.write(requests.join('') + after)
    await closed
    const answers = [...received.matchAll(/HTTP\/1\.1 (\d+) [^\r]*\r\n[^]*?\r\n\r\n(\/\w|\{[^}]*\})/g)].map(([, status, body]) =>
      `${status} ${body!.startsWith('{') ? (JSON.parse(body!) as { code: string }).code : body}`,
    )
    expect(answers, received).toEqual(expected)
  } finally {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  }
})

describe('a request whose body never comes whole is refused, never left waiting', () => {
  const SUBMITS = ['/api/scheduler/jobs/submit', '/internal/worker/heartbeat']

  test.each([['zz'], ['ffffffffffffffffff']])('a chunk size that is not one (%s) is 400 bad_request at once, the connection closes, and nothing is submitted', async (size) => {
    const before = dbDigest(host)
    const { port } = new URL(host.url)
    const socket = connect(Number(port), '127.0.0.1')
    let received = ''
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')))
    socket.on('error', () => {})
    const closed = new Promise((resolve) => socket.once('close', resolve))
    socket.write(
      `POST /api/scheduler/jobs/submit HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${host.token}\r\nContent-Type: application/json\r\n` +
        `Transfer-Encoding: chunked\r\n\r\n${size}\r\n{"job_type":"chunked","cost_units":1}\r\n0\r\n\r\n`,
    )
    await closed // the client keeps its side open: the host closes the connection
    expect(received).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/)
    expect(received).toContain('"code":"bad_request"')
    expect(dbDigest(host)).toBe(before)
  })

  test.each(SUBMITS)('a client that hangs up mid-body on %s leaves no connection behind, and the host stops at once', async (path) => {
    const own = await startTestHost({ workers: 0 })
    try {
      const { port } = new URL(own.url)
      const socket = connect(Number(port), '127.0.0.1')
      socket.on('error', () => {})
      socket.resume() // the 400, which nobody needs
      const closed = new Promise((resolve) => socket.once('close', resolve))
      // The head reaches its route (a request in flight), whose body never comes whole.
      socket.end(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${own.token}\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n{"job_type"`)
      await closed
      // The stop waits for requests in flight: this one must not be among them for good.
      await own.stop()
    } finally {
      await own.dispose()
    }
  }, 10_000)

  test("a client that holds its body unfinished does not hold up the host's stop until the request timeout", async () => {
    const own = await startTestHost({ workers: 0 })
    try {
      const { port } = new URL(own.url)
      const socket = connect(Number(port), '127.0.0.1')
      let received = ''
      socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')))
      socket.on('error', () => {})
      // The 100 Continue says the request is in flight, its route reading the body.
      socket.write(`POST ${SUBMIT} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${own.token}\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: 50\r\n\r\n`)
      await until(() => received.startsWith('HTTP/1.1 100 Continue'), 3000, 'the 100')
      socket.write('{"job_type"')
      const closed = new Promise((resolve) => socket.once('close', resolve))
      await own.stop() // within the test's timeout, far below the request timeout (60 s)
      await closed
    } finally {
      await own.dispose()
    }
  }, 10_000)

  test('a client that never reads an answer it asked for holds up the host\'s stop only for a grace, then its connection closes', async () => {
    const { mkdirSync, writeFileSync } = await import('node:fs')
    const { join } = await import('node:path')
    const { tempDir } = await import('../helpers/host')
    // A file larger than the kernel's buffers between the two ends hold: its answer cannot end.
    const rendererDir = tempDir('leasehold-renderer-')
    mkdirSync(join(rendererDir, 'assets'))
    writeFileSync(join(rendererDir, 'index.html'), '<!doctype html><title>Leasehold</title>')
    writeFileSync(join(rendererDir, 'assets', 'large.js'), Buffer.alloc(48 * 1024 * 1024, 0x20))
    const own = await startTestHost({ workers: 0 }, { rendererDir })
    try {
      const { port } = new URL(own.url)
      const socket = connect(Number(port), '127.0.0.1')
      socket.on('error', () => {})
      socket.pause() // never reads
      const closed = new Promise((resolve) => socket.once('close', resolve))
      socket.write(`GET /assets/large.js HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`)
      await new Promise((resolve) => setTimeout(resolve, 300)) // the answer has begun, and backed up
      const stopping = Date.now()
      await own.stop()
      expect(Date.now() - stopping).toBeLessThan(10_000)
      socket.resume() // what the kernel holds of the answer, then the end
      await closed
    } finally {
      await own.dispose()
    }
  }, 20_000)

  test('a body too slow to arrive is 408 request_timeout once the request timeout passes, and the connection closes', async () => {
    // The host's own listener on a server with short limits (the host waits 60 s for a request).
    let bodyRead: unknown = 'pending'
    const server = createServer({ headersTimeout: 200, requestTimeout: 300, connectionsCheckingInterval: 50 }, (req) => {
      const chunks: Buffer[] = []
      req.on('data', (chunk: Buffer) => chunks.push(chunk))
      req.on('end', () => (bodyRead = Buffer.concat(chunks).toString()))
      req.on('close', () => bodyRead === 'pending' && (bodyRead = 'never'))
    })
    server.on('clientError', answerClientError)
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    try {
      const socket = connect({ port: (server.address() as AddressInfo).port, host: '127.0.0.1', allowHalfOpen: true })
      let received = ''
      socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')))
      socket.on('error', () => {})
      const ended = new Promise((resolve) => socket.once('end', resolve))
      socket.write('POST /a HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n{"job_type"')
      await ended // the host's end of the connection
      expect(received).toMatch(/^HTTP\/1\.1 408 /)
      expect(received).toContain('"code":"request_timeout"')
      expect(bodyRead).toBe('never')
    } finally {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    }
  })
})
