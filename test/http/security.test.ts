/**
 * The HTTP server's security rules, on every route the routers declare: the token on every
 * /api and /internal route but /api/health (401 otherwise), the Host check (403), a foreign
 * Origin (403), and never a CORS header.
 */
import { connect } from 'node:net'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { rawRequest, startTestHost, type TestHost } from '../helpers/host'
import { BODY_ROUTES, BODYLESS_WRITE_ROUTES, allRoutes, fill, isWrite, type Route } from './routes'
import { dbDigest, UNKNOWN_ID } from './support'

let host: TestHost
const seen: { where: string; headers: Headers | Record<string, unknown> }[] = []

beforeAll(async () => {
  host = await startTestHost({ totalUnits: 10, busy: 0, statsIntervalS: 3600 })
  host.engine.submit({ job_type: 'kept', cost_units: 1 })
})
afterAll(async () => {
  await host?.dispose()
})

const ROUTES = allRoutes()
const PUBLIC = new Set(['GET /api/health'])
const hostHeader = () => `127.0.0.1:${new URL(host.url).port}`

function record(where: string, headers: Headers | Record<string, unknown>) {
  seen.push({ where, headers })
}

/** One request to `route`; the body is a plausible one so nothing but the guard can refuse it. */
async function hit(route: Route, headers: Record<string, string>) {
  const body = route.method === 'GET' ? undefined : '{}'
  const res = await rawRequest(host.url, {
    method: route.method,
    path: fill(route.path, UNKNOWN_ID),
    headers: { host: hostHeader(), ...(body ? { 'content-type': 'application/json', 'content-length': String(body.length) } : {}), ...headers },
    body,
  })
  record(`${route.method} ${route.path} ${JSON.stringify(headers)}`, res.headers)
  return res
}

describe('the route list', () => {
  test('covers the routes of every API, and every POST/PUT/PATCH route is either fuzzed with a schema or takes no body', () => {
    const names = ROUTES.map((r) => `${r.method} ${r.path}`)
    expect(names).toEqual(
      expect.arrayContaining([
        'GET /api/health',
        'GET /api/capacity',
        'PUT /api/capacity',
        'POST /api/system/scheduler/leases/request',
        'POST /api/system/scheduler/leases/:lease_id/heartbeat',
        'POST /api/system/scheduler/leases/:lease_id/complete',
        'POST /api/scheduler/jobs/submit',
        'POST /api/scheduler/jobs/claim',
        'GET /api/scheduler/jobs',
        'GET /api/scheduler/jobs/:job_id',
        'POST /api/scheduler/jobs/:job_id/status',
        'POST /api/scheduler/jobs/:job_id/cancel',
        'GET /api/scheduler/jobs/:job_id/events',
        'POST /api/scheduler/lease/request',
        'POST /api/scheduler/lease/:lease_id/heartbeat',
        'POST /api/scheduler/lease/:lease_id/release',
        'GET /api/scheduler/lease/:lease_id',
        'GET /api/scheduler/stats/snapshot',
        'GET /api/scheduler/stats/timeseries',
        'POST /internal/worker/claim',
        'POST /internal/worker/heartbeat',
        'POST /internal/worker/complete',
        'POST /internal/worker/fail',
      ]),
    )
    const writes = ROUTES.filter(isWrite).map((r) => `${r.method} ${r.path}`)
    const covered = [...BODY_ROUTES, ...BODYLESS_WRITE_ROUTES].map((r) => `${r.method} ${r.path}`)
    expect(writes.sort()).toEqual(covered.sort())
  })
})

describe('token', () => {
  test('no token is 401 unauthorized, naming the Bearer scheme (WWW-Authenticate), on every route but GET /api/health, and writes nothing', async () => {
    const before = dbDigest(host)
    for (const route of ROUTES) {
      const res = await hit(route, {})
      const name = `${route.method} ${route.path}`
      if (PUBLIC.has(name)) {
        expect(res.status, name).toBe(200)
        continue
      }
      expect(res.status, name).toBe(401)
      expect(res.headers['www-authenticate'], name).toBe('Bearer')
      expect(JSON.parse(res.body), name).toEqual({ code: 'unauthorized', detail: expect.any(String) })
    }
    expect(dbDigest(host)).toBe(before)
  })

  test('the scheme is named in any case, as HTTP has it: bearer and BEARER open a route as Bearer does', async () => {
    for (const scheme of ['Bearer', 'bearer', 'BEARER']) {
      const res = await rawRequest(host.url, { method: 'GET', path: '/api/capacity', headers: { host: hostHeader(), authorization: `${scheme} ${host.token}` } })
      expect(res.status, scheme).toBe(200)
    }
  })

  test('a wrong token, a token without "Bearer", another scheme, or the token in the query string is 401 on every route', async () => {
    const before = dbDigest(host)
    const variants: { headers: Record<string, string>; query?: string }[] = [
      { headers: { authorization: 'Bearer wrong-token-wrong-token-wrong-token' } },
      { headers: { authorization: `Bearer ${host.token}x` } },
      { headers: { authorization: `Bearer ${host.token.slice(0, -1)}` } },
      { headers: { authorization: host.token } },
      { headers: { authorization: `Basic ${Buffer.from(`user:${host.token}`).toString('base64')}` } },
      { headers: { authorization: 'Bearer ' } },
      { headers: {}, query: `?token=${host.token}` },
      { headers: {}, query: `?access_token=${host.token}` },
      { headers: {}, query: `?ticket=not-a-ticket` },
    ]
    for (const route of ROUTES) {
      if (PUBLIC.has(`${route.method} ${route.path}`)) continue
      for (const v of variants) {
        const res = await rawRequest(host.url, {
          method: route.method,
          path: fill(route.path, UNKNOWN_ID) + (v.query ?? ''),
          headers: { host: hostHeader(), ...v.headers },
        })
        record(`${route.method} ${route.path} variant`, res.headers)
        expect(res.status, `${route.method} ${route.path} ${JSON.stringify(v)}`).toBe(401)
      }
    }
    expect(dbDigest(host)).toBe(before)
  })

  test('a stream ticket opens only the event stream, not any other route', async () => {
    const ticket = (await (await host.call('/api/events/ticket', { method: 'POST' })).json()).ticket as string
    expect(typeof ticket).toBe('string')
    for (const route of ROUTES) {
      const name = `${route.method} ${route.path}`
      if (PUBLIC.has(name) || name === 'GET /api/events/stream') continue
      const res = await hit({ ...route, path: `${route.path}?ticket=${ticket}` }, {})
      expect(res.status, name).toBe(401)
    }
  })

  test('other spellings of a protected path never get past the guard without the token', async () => {
    const paths = [
      '/API/capacity',
      '//api/capacity',
      '/api//capacity',
      '/api/%63apacity',
      '/%61pi/capacity',
      '/Internal/Worker/claim',
      '/internal/worker/claim/',
      '/api/scheduler/jobs/',
      '/api/scheduler/stats/snapshot?x=1',
      '/api/health/../capacity',
      '/api/health/%2e%2e/capacity',
      '/./api/capacity',
    ]
    for (const path of paths) {
      for (const method of ['GET', 'POST', 'PUT']) {
        const res = await rawRequest(host.url, { method, path, headers: { host: hostHeader() } })
        record(`${method} ${path}`, res.headers)
        expect([401, 404], `${method} ${path}: ${res.status} ${res.body}`).toContain(res.status)
      }
    }
  })
})

describe('Host and Origin', () => {
  test('a foreign Host is 403 forbidden_host on every route, even with the token', async () => {
    const before = dbDigest(host)
    const port = new URL(host.url).port
    for (const foreign of ['evil.example', `evil.example:${port}`, `localhost:${Number(port) + 1}`, `127.0.0.1.evil.example:${port}`, `localhost.:${port}`]) {
      for (const route of ROUTES) {
        const res = await hit(route, { host: foreign, authorization: `Bearer ${host.token}` })
        expect(res.status, `${route.method} ${route.path} Host: ${foreign}`).toBe(403)
        expect(JSON.parse(res.body).code).toBe('forbidden_host')
      }
    }
    expect(dbDigest(host)).toBe(before)
  })

  test('a request without a Host header, or an HTTP/1.0 one, is refused', async () => {
    const port = Number(new URL(host.url).port)
    for (const head of [
      `GET /api/health HTTP/1.1\r\nConnection: close\r\n\r\n`,
      `GET /api/health HTTP/1.0\r\n\r\n`,
      `GET /api/capacity HTTP/1.0\r\nAuthorization: Bearer ${host.token}\r\n\r\n`,
    ]) {
      const answer = await new Promise<string>((resolve, reject) => {
        const socket = connect(port, '127.0.0.1', () => socket.end(head))
        let text = ''
        socket.setEncoding('utf8')
        socket.on('data', (chunk: string) => (text += chunk))
        socket.on('end', () => resolve(text))
        socket.on('error', reject)
      })
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(answer)?.[1])
      expect([400, 403], `${JSON.stringify(head)} → ${answer.slice(0, 80)}`).toContain(status)
      expect(answer.toLowerCase()).not.toContain('access-control-')
      // In the API's shape, as every refusal: an HTTP/1.1 request without a Host is malformed (400).
      const body = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))
      expect(body).toEqual({ detail: expect.any(String), code: expect.any(String) })
      if (head.includes('HTTP/1.1')) expect(body).toEqual({ detail: 'The request has no Host header', code: 'bad_request' })
    }
  })

  test('the loopback names with the right port are accepted', async () => {
    const port = new URL(host.url).port
    for (const name of [`localhost:${port}`, `127.0.0.1:${port}`, `LOCALHOST:${port}`, `[::1]:${port}`]) {
      const res = await rawRequest(host.url, { path: '/api/capacity', headers: { host: name, authorization: `Bearer ${host.token}` } })
      expect(res.status, name).toBe(200)
    }
  })

  test('a foreign Origin (or "null", or a malformed one) is 403 forbidden_origin on every route, even with the token', async () => {
    const before = dbDigest(host)
    const port = new URL(host.url).port
    for (const origin of ['http://evil.example', `http://evil.example:${port}`, `http://localhost:${Number(port) + 1}`, 'null', 'not a url', `https://127.0.0.1.evil.example:${port}`]) {
      for (const route of ROUTES) {
        const res = await hit(route, { origin, authorization: `Bearer ${host.token}` })
        expect(res.status, `${route.method} ${route.path} Origin: ${origin}`).toBe(403)
        expect(JSON.parse(res.body).code).toBe('forbidden_origin')
      }
    }
    expect(dbDigest(host)).toBe(before)
  })

  test('a CORS preflight is never answered with CORS headers', async () => {
    const port = new URL(host.url).port
    for (const route of ROUTES) {
      for (const origin of ['http://evil.example', `http://127.0.0.1:${port}`]) {
        const res = await rawRequest(host.url, {
          method: 'OPTIONS',
          path: fill(route.path, UNKNOWN_ID),
          headers: {
            host: hostHeader(),
            origin,
            'access-control-request-method': route.method,
            'access-control-request-headers': 'authorization, content-type',
          },
        })
        record(`OPTIONS ${route.path} ${origin}`, res.headers)
        expect(res.status).toBeGreaterThanOrEqual(200)
      }
    }
  })
})

describe('CORS', () => {
  test('no response on any route carries an Access-Control-Allow-* header', async () => {
    // Authorised requests too, so success answers are checked as well as refusals.
    for (const route of ROUTES) {
      if (route.path === '/api/events/stream') {
        const controller = new AbortController()
        const res = await host.call(route.path, { signal: controller.signal })
        record('GET /api/events/stream authorised', res.headers)
        expect(res.status).toBe(200)
        controller.abort()
        continue
      }
      const res = await host.call(fill(route.path, UNKNOWN_ID), {
        method: route.method,
        ...(route.method === 'GET' ? {} : { json: {} }),
        headers: { origin: host.url },
      })
      await res.arrayBuffer()
      record(`${route.method} ${route.path} authorised`, res.headers)
    }
    expect(seen.length).toBeGreaterThan(ROUTES.length * 10)
    const offenders = seen.filter(({ headers }) => {
      const names = headers instanceof Headers ? [...headers.keys()] : Object.keys(headers)
      return names.some((n) => n.toLowerCase().startsWith('access-control-'))
    })
    expect(offenders.map((o) => o.where)).toEqual([])
  })
})

describe('slow clients', () => {
  test('a client trickling its headers is answered 408 and cut off after the 10 s headers timeout', async () => {
    const slowHost = await startTestHost()
    try {
      const { hostname, port } = new URL(slowHost.url)
      const socket = connect(Number(port), hostname)
      let answer = ''
      socket.setEncoding('utf8')
      socket.on('data', (chunk: string) => (answer += chunk))
      const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now())))
      const started = Date.now()
      socket.write(`GET /api/health HTTP/1.1\r\nHost: ${hostname}:${port}\r\n`)
      const trickle = setInterval(() => socket.writable && socket.write(`X-Slow-${Date.now()}: 1\r\n`), 500)
      const at = await closed
      clearInterval(trickle)
      // A floor only (a loaded machine answers later, never sooner); the test's own timeout is the ceiling.
      expect(at - started).toBeGreaterThanOrEqual(9_000)
      expect(answer).toMatch(/^HTTP\/1\.1 408/)
      expect(answer).toContain('"code":"request_timeout"')
    } finally {
      await slowHost.dispose()
    }
  }, 20_000)
})
