/**
 * Fuzzing the HTTP layer with fast-check: bad bodies (random JSON, wrong types, huge strings,
 * deep nesting, `__proto__` keys, numbers beyond safe integers, broken JSON), bad headers and
 * bad paths against every POST/PUT/PATCH route. The server answers 4xx, never 5xx, and writes
 * nothing: the database digest (row counts per table, job and lease states, the last event id)
 * is the same after every request.
 *
 * Bodies the route's own zod schema accepts are filtered out: only bad input is sent.
 */
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import type { z } from 'zod'
import { ManualClock } from '../../src-main/engine/rules/clock'
import { rawRequest, startTestHost, type TestHost } from '../helpers/host'
import { BODY_ROUTES, BODYLESS_WRITE_ROUTES, allRoutes, fill, isWrite, type BodyRoute } from './routes'
import { body, dbDigest, post, PULL, QUEUE, submit, UNKNOWN_ID, WORKER } from './support'

const RUNS = Number(process.env.FUZZ_RUNS ?? 300)
const SEED = Number(process.env.FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31))

let host: TestHost
/** Real ids of each kind, so a path names something that exists and only the body is wrong. */
const ids: Record<string, string[]> = { lease_id: [], job_id: [], blocker_id: [], name: [] }

beforeAll(async () => {
  host = await startTestHost({ totalUnits: 50, busy: 0, statsIntervalS: 3600, bodyLimitBytes: 1024 * 1024 }, { clock: new ManualClock(Date.parse('2026-02-06T20:10:00.000Z')) })
  // A job of every kind: claimed (002), leased (001), running with a lease (002), running (003), queued.
  const claimed = await submit(host)
  expect((await body(await post(host, `${QUEUE}/jobs/claim`, { worker_id: 'q1' }))).job.job_id).toBe(claimed.job_id)
  ids.job_id!.push(claimed.job_id)
  await submit(host)
  const pulled = await body(await post(host, `${PULL}/request`, { worker_id: 'p1' }))
  ids.lease_id!.push(pulled.lease.lease_id)
  ids.job_id!.push(pulled.job.job_id)
  const viaQueue = await submit(host)
  await post(host, `${QUEUE}/jobs/claim`, { worker_id: 'q2' })
  const leased = await body(await post(host, `${QUEUE}/lease/request`, { job_id: viaQueue.job_id }))
  ids.lease_id!.push(leased.lease.lease_id)
  ids.job_id!.push(viaQueue.job_id)
  await submit(host, { queue: 'w' })
  const claim = await body(await post(host, `${WORKER}/claim`, { worker_id: 'w1', streams: ['w'], max_wait_ms: 0 }))
  ids.job_id!.push(claim.job_id)
  ids.lease_id!.push(host.engine.getJob(claim.job_id).lease_id!)
  ids.job_id!.push((await submit(host)).job_id)
  // A schedule (its clock never reaches a firing), so a PATCH names one that exists.
  expect((await post(host, '/api/schedules', { name: 'nightly', cron: '0 2 * * *', timezone: 'UTC', job: { job_type: 'x', cost_units: 1 } })).status).toBe(201)
  ids.name!.push('nightly')
  console.log(`fuzz seed ${SEED} (FUZZ_SEED=${SEED} to replay), ${RUNS} runs per route`)
}, 30_000)

afterAll(async () => {
  await host?.dispose()
})

/** What the server will validate: an empty body reads as {}; text that is not JSON is never valid. */
function schemaAccepts(schema: z.ZodType, text: string): boolean {
  if (text.trim() === '') return schema.safeParse({}).success
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return false
  }
  return schema.safeParse(parsed).success
}

const HUGE = 'x'.repeat(300_000)
const nestedArrays = (n: number) => `${'['.repeat(n)}${']'.repeat(n)}`
const nestedObjects = (n: number) => `${'{"a":'.repeat(n)}1${'}'.repeat(n)}`
const BIG_NUMBERS = ['9007199254740993', '-9007199254740993', '1e400', '-1e400', '123456789012345678901234567890', '-0', '1e-400', '4.5e15', '1e21']
const NOT_JSON_NUMBERS = ['0x10', 'NaN', 'Infinity', '-Infinity', '01', '.5', '+1', '1_000']

function shapeKeys(schema: z.ZodType): string[] {
  const shape = (schema as unknown as { shape?: Record<string, unknown> }).shape
  return shape ? Object.keys(shape) : ['x']
}

/** Bad bodies for one route, as the exact text sent. */
function badBody(route: BodyRoute): fc.Arbitrary<string> {
  const fields = shapeKeys(route.schema)
  const field = fc.constantFrom(...fields)
  const key = fc.oneof(
    { weight: 5, arbitrary: field },
    { weight: 2, arbitrary: fc.string({ maxLength: 12 }) },
    { weight: 1, arbitrary: fc.constantFrom('__proto__', 'constructor', 'prototype', '', ' worker_id', 'WORKER_ID') },
  )
  const value = fc.oneof(
    fc.jsonValue({ maxDepth: 3 }),
    fc.constantFrom(null, true, false, 0, -1, 1.5, 2 ** 53 + 2, -(2 ** 53) - 2, 1e308, -1e308, Number.MIN_VALUE, '', ' ', '0', 'null', 'ACTIVE', 'SUCCEEDED'),
    fc.string({ maxLength: 40 }),
    fc.string({ unit: 'binary', maxLength: 20 }),
    fc.constant(HUGE),
    fc.array(fc.string({ maxLength: 5 }), { maxLength: 4 }),
    fc.dictionary(fc.string({ maxLength: 6 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }),
  )
  const objects = fc.dictionary(key, value, { maxKeys: fields.length + 2 }).map((o) => JSON.stringify(o))
  const rawNumbers = fc
    .tuple(fc.subarray(fields, { minLength: 1 }), fc.constantFrom(...BIG_NUMBERS, ...NOT_JSON_NUMBERS))
    .map(([ks, n]) => `{${ks.map((k) => `"${k}": ${n}`).join(', ')}}`)
  const proto = fc
    .tuple(fc.jsonValue({ maxDepth: 2 }), fc.dictionary(field, fc.string({ maxLength: 8 }), { maxKeys: 3 }))
    .map(([v, rest]) => {
      const inner = JSON.stringify(rest).slice(1, -1)
      return `{"__proto__": ${JSON.stringify(v)}, "constructor": {"prototype": {"polluted": true}}${inner ? `, ${inner}` : ''}}`
    })
  const deep = fc
    .tuple(field, fc.constantFrom(10, 1000, 10_000), fc.boolean())
    .map(([k, n, arrays]) => `{"${k}": ${arrays ? nestedArrays(n) : nestedObjects(n)}}`)
  const topLevel = fc.constantFrom(
    'null',
    'true',
    '1',
    '"x"',
    '[]',
    '[{}]',
    '\uFEFF{}',
    '{',
    '{"a":1,}',
    "{'a':1}",
    '{"a":1}{"b":2}',
    '{"a":"\\ud800"}',
    nestedArrays(10_000),
    nestedObjects(10_000),
    `"${HUGE}"`,
  )
  const garbage = fc.string({ maxLength: 200 })
  const randomJson = fc.jsonValue().map((v) => JSON.stringify(v))
  return fc.oneof(objects, objects, rawNumbers, proto, deep, topLevel, garbage, randomJson).filter((text) => !schemaAccepts(route.schema, text))
}

function pathFor(route: BodyRoute): fc.Arbitrary<string> {
  const param = /:([a-z_]+)/.exec(route.path)?.[1]
  if (!param) return fc.constant(route.path)
  const real = ids[param]?.length ? fc.constantFrom(...ids[param]!) : fc.constant(UNKNOWN_ID)
  return fc.oneof(real, real, fc.constant(UNKNOWN_ID), fc.string({ minLength: 1, maxLength: 30 })).map((id) => fill(route.path, id))
}

async function send(method: string, path: string, text: string, contentType = 'application/json') {
  const res = await host.call(path, { method, body: text, headers: { 'content-type': contentType } })
  const answer = await res.text()
  return { status: res.status, text: answer, headers: res.headers }
}

function expectClientError(status: number, text: string, what: string) {
  if (status < 400 || status >= 500) throw new Error(`${what} → ${status} ${text.slice(0, 300)}`)
  const parsed = JSON.parse(text) as { code?: unknown; detail?: unknown }
  if (typeof parsed.code !== 'string' || typeof parsed.detail !== 'string') throw new Error(`${what} → ${status} without {code, detail}: ${text.slice(0, 200)}`)
  if (/\bat .*\.(ts|js):\d+/.test(text)) throw new Error(`${what} → a stack trace: ${text.slice(0, 300)}`)
}

describe('fuzzed bodies on every POST/PUT/PATCH route → 4xx and no change', () => {
  test('the route list covers every POST/PUT/PATCH route the app serves', () => {
    const served = allRoutes()
      .filter(isWrite)
      .map((r) => `${r.method} ${r.path}`)
    const fuzzed = BODY_ROUTES.map((r) => `${r.method} ${r.path}`)
    // The routes that read no body (a stream ticket, a backup): no body is invalid for a schema.
    expect(served.filter((r) => !fuzzed.includes(r)).sort()).toEqual(BODYLESS_WRITE_ROUTES.map((r) => `${r.method} ${r.path}`).sort())
  })

  for (const route of BODY_ROUTES) {
    test(`${route.method} ${route.path}`, async () => {
      const before = dbDigest(host)
      await fc.assert(
        fc.asyncProperty(pathFor(route), badBody(route), async (path, text) => {
          const { status, text: answer } = await send(route.method, path, text)
          expectClientError(status, answer, `${route.method} ${path} ${text.slice(0, 200)}`)
          const after = dbDigest(host)
          if (after !== before) throw new Error(`${route.method} ${path} ${text.slice(0, 200)} changed the database:\n${before}\n${after}`)
        }),
        { numRuns: RUNS, seed: SEED, endOnFailure: true },
      )
    }, 60_000)
  }
})

/** A body each route would accept: with a bad header it must still change nothing. */
const VALID_BODIES: Record<string, unknown> = {
  'PUT /api/capacity': { total_units: 7 },
  'POST /api/system/scheduler/leases/request': { worker_id: 'hdr' },
  'POST /api/scheduler/jobs/submit': { job_type: 'hdr', cost_units: 1 },
  'POST /api/scheduler/jobs/claim': { worker_id: 'hdr' },
  'POST /internal/worker/claim': { worker_id: 'hdr', streams: ['default'], max_wait_ms: 0 },
  'POST /internal/worker/report': { worker_id: 'hdr', kind: 'k', detail: 'd' },
}

describe('bad headers → 4xx and no change', () => {
  test('a valid body with a Content-Type that is not JSON is 415 and does nothing', async () => {
    const before = dbDigest(host)
    const contentType = fc.oneof(
      fc.constantFrom(
        'text/plain',
        'text/json',
        'application/x-www-form-urlencoded',
        'multipart/form-data; boundary=x',
        'application/jsonp',
        'application/json-patch+json',
        'application/xml',
        'application/octet-stream',
        'image/png',
        '*/*',
        'application/*',
        'json',
      ),
      fc.stringMatching(/^[a-z0-9!#$&^_.+-]{1,20}\/[a-z0-9!#$&^_.+-]{1,20}$/).filter((t) => !t.includes('json')),
    )
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...Object.keys(VALID_BODIES)), contentType, async (name, ct) => {
        const [method, path] = name.split(' ') as [string, string]
        const { status, text } = await send(method, path, JSON.stringify(VALID_BODIES[name]), ct)
        expectClientError(status, text, `${name} Content-Type: ${ct}`)
        if (status !== 415) throw new Error(`${name} Content-Type: ${ct} → ${status}, not 415`)
        if (dbDigest(host) !== before) throw new Error(`${name} Content-Type: ${ct} changed the database`)
      }),
      { numRuns: RUNS, seed: SEED, endOnFailure: true },
    )
  }, 60_000)

  test('a valid body without any Content-Type is 415 and does nothing', async () => {
    const before = dbDigest(host)
    for (const name of Object.keys(VALID_BODIES)) {
      const [method, path] = name.split(' ') as [string, string]
      const text = JSON.stringify(VALID_BODIES[name])
      const res = await rawRequest(host.url, {
        method,
        path,
        headers: { host: new URL(host.url).host, authorization: `Bearer ${host.token}`, 'content-length': String(Buffer.byteLength(text)) },
        body: text,
      })
      expect(res.status, name).toBe(415)
    }
    expect(dbDigest(host)).toBe(before)
  })

  test('random extra headers, odd Accept, Expect and chunked bodies with bad bodies are 4xx and do nothing', async () => {
    const before = dbDigest(host)
    const headerName = fc.stringMatching(/^[a-z][a-z0-9-]{0,20}$/).filter((n) => !['host', 'authorization', 'content-type', 'content-length', 'transfer-encoding', 'origin', 'connection', 'expect', 'upgrade', 'te', 'trailer', 'keep-alive'].includes(n))
    const headerValue = fc.stringMatching(/^[\x21-\x7e]{0,60}$/)
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...BODY_ROUTES),
        fc.dictionary(headerName, headerValue, { maxKeys: 5 }),
        fc.constantFrom<Record<string, string>>({}, { accept: 'text/html' }, { accept: '*/*;q=0' }, { 'accept-encoding': 'gzip, br' }, { 'content-encoding': 'gzip' }, { 'x-http-method-override': 'DELETE' }, { 'x-forwarded-host': 'evil.example' }, { 'x-forwarded-for': '8.8.8.8' }),
        fc.boolean(),
        async (route, extra, odd, chunked) => {
          const text = '{"worker_id": 5, "__proto__": {"admin": true}}'
          fc.pre(!schemaAccepts(route.schema, text))
          const path = fill(route.path, ids.lease_id![0]!)
          const headers: Record<string, string> = {
            ...extra,
            ...odd,
            host: new URL(host.url).host,
            authorization: `Bearer ${host.token}`,
            'content-type': 'application/json',
            ...(chunked ? { 'transfer-encoding': 'chunked' } : { 'content-length': String(text.length) }),
          }
          const res = await rawRequest(host.url, { method: route.method, path, headers, body: text })
          expectClientError(res.status, res.body, `${route.method} ${path} ${JSON.stringify(headers)}`)
          if (dbDigest(host) !== before) throw new Error(`${route.method} ${path} with ${JSON.stringify(headers)} changed the database`)
        },
      ),
      { numRuns: RUNS, seed: SEED, endOnFailure: true },
    )
  }, 60_000)

  test('a body over the size limit is 413 however it is sent, and does nothing', async () => {
    const before = dbDigest(host)
    const big = JSON.stringify({ job_type: 'x', cost_units: 1, payload: 'y'.repeat(1024 * 1024 + 10) })
    for (const chunked of [false, true]) {
      const res = await rawRequest(host.url, {
        method: 'POST',
        path: `${QUEUE}/jobs/submit`,
        headers: {
          host: new URL(host.url).host,
          authorization: `Bearer ${host.token}`,
          'content-type': 'application/json',
          ...(chunked ? { 'transfer-encoding': 'chunked' } : { 'content-length': String(big.length) }),
        },
        body: big,
      }).catch((error: Error) => ({ status: 0, body: String(error), headers: {} }))
      // The server may close the connection before the whole upload was written; if an answer arrived it is 413.
      if (res.status !== 0) {
        expect(res.status).toBe(413)
        expect(JSON.parse(res.body).code).toBe('payload_too_large')
      }
    }
    expect(dbDigest(host)).toBe(before)
  })
})

describe('bad paths → 4xx and no change', () => {
  test('random paths under every prefix, with malformed escapes, dot segments and huge segments, are 4xx', async () => {
    const before = dbDigest(host)
    const prefixes = ['/api', '/api/scheduler', '/api/scheduler/jobs', '/api/scheduler/lease', '/api/system/scheduler/leases', '/internal/worker', '/internal', '/api/files/leases', '/api/blockers', '/api/events']
    const segment = fc.oneof(
      fc.constantFrom('..', '.', '%', '%2e%2e', '%2F', '%00', '%zz', '%E0%A4%A', '%C0%AF', '~', ';', ':', '@', '!', '$', "'", '(', ')', '*', '+', ',', '=', ''),
      fc.constantFrom('jobs', 'lease', 'claim', 'submit', 'heartbeat', 'release', 'complete', 'fail', 'status', 'cancel', 'request', 'resolve', UNKNOWN_ID),
      fc.constantFrom('x'.repeat(4000)),
      fc.string({ maxLength: 20 }).map(encodeURIComponent),
    )
    const path = fc.tuple(fc.constantFrom(...prefixes), fc.array(segment, { minLength: 1, maxLength: 6 })).map(([p, segs]) => `${p}/${segs.join('/')}`)
    await fc.assert(
      fc.asyncProperty(path, fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH'), async (p, method) => {
        const withBody = method !== 'GET'
        const res = await rawRequest(host.url, {
          method,
          path: p,
          headers: {
            host: new URL(host.url).host,
            authorization: `Bearer ${host.token}`,
            ...(withBody ? { 'content-type': 'application/json', 'content-length': '2' } : {}),
          },
          body: withBody ? '{}' : undefined,
        })
        if (res.status < 400 || res.status >= 500) {
          // A random path may spell a real read route (GET …/jobs/ lists jobs): allowed only for GET.
          if (!(method === 'GET' && res.status === 200)) throw new Error(`${method} ${p} → ${res.status} ${res.body.slice(0, 200)}`)
        } else {
          // Including 431 for a request line over Node's 16 KiB limit: the host's clientError
          // handler answers it in the API's error shape too.
          expectClientError(res.status, res.body, `${method} ${p}`)
        }
        if (dbDigest(host) !== before) throw new Error(`${method} ${p} changed the database`)
      }),
      { numRuns: RUNS * 2, seed: SEED, endOnFailure: true },
    )
  }, 60_000)

  test('random query strings on the read routes never cause a 5xx or a write', async () => {
    const before = dbDigest(host)
    const reads = allRoutes().filter((r) => r.method === 'GET' && r.path !== '/api/events/stream')
    const pair = fc.tuple(
      fc.oneof(fc.constantFrom('state', 'limit', 'cursor', 'addon_id', 'job_type', 'created_after', 'created_before', 'metric', 'bucket', 'range', 'ticket', '__proto__'), fc.string({ maxLength: 8 })),
      fc.oneof(fc.constantFrom('500', '501', '-1', '1e3', '0x10', 'QUEUED', 'all', '5m', '7d', 'leases_active', '%', '%zz', 'x'.repeat(3000)), fc.string({ maxLength: 10 }).map(encodeURIComponent)),
    )
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...reads), fc.array(pair, { maxLength: 5 }), async (route, pairs) => {
        const path = `${fill(route.path, ids.job_id![0]!)}?${pairs.map(([k, v]) => `${encodeURIComponent(k)}=${v}`).join('&')}`
        const res = await rawRequest(host.url, { path, headers: { host: new URL(host.url).host, authorization: `Bearer ${host.token}` } })
        if (res.status >= 500) throw new Error(`GET ${path} → ${res.status} ${res.body.slice(0, 200)}`)
        if (res.status >= 400) expectClientError(res.status, res.body, `GET ${path}`)
        if (dbDigest(host) !== before) throw new Error(`GET ${path} changed the database`)
      }),
      { numRuns: RUNS, seed: SEED, endOnFailure: true },
    )
  }, 60_000)
})

describe('valid bodies carrying extreme values', () => {
  test('a submit whose payload nests 10,000 or 100,000 levels deep is 400, never 5xx, and stores nothing', async () => {
    const before = dbDigest(host)
    for (const depth of [1_000, 10_000, 100_000]) {
      for (const nested of [nestedArrays(depth), nestedObjects(depth)]) {
        const text = `{"job_type": "deep", "cost_units": 1, "payload": ${nested}}`
        for (const path of [`${QUEUE}/jobs/submit`, `${PULL}/${ids.lease_id![0]}/complete`]) {
          const { status, text: answer } = await send('POST', path, text)
          expectClientError(status, answer, `${path} depth ${depth}`)
          expect(JSON.parse(answer)).toMatchObject({ code: 'invalid_request', detail: expect.stringContaining('nested') })
        }
      }
    }
    expect(dbDigest(host)).toBe(before)
  })

  test('a payload nested 500 levels deep is stored and read back intact', async () => {
    const text = `{"job_type": "deep", "cost_units": 1, "payload": ${nestedArrays(500)}}`
    const { status, text: answer } = await send('POST', `${QUEUE}/jobs/submit`, text)
    expect(status, answer.slice(0, 200)).toBe(201)
    const job = JSON.parse(answer).job
    const read = await body(await host.call(`${QUEUE}/jobs/${job.job_id}`))
    expect(JSON.stringify(read.job.payload)).toBe(nestedArrays(500))
  })
})
