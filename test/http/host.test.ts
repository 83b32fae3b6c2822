import { existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { HTTP_APIS } from '../../src-main/http/apis'
import { fullPath } from '../../src-main/http/route'
import { rawRequest, startTestHost, tempDir, type TestHost } from '../helpers/host'
import { until } from '../helpers/until'

let host: TestHost
afterEach(async () => {
  await host?.dispose()
})

describe('health and capacity', () => {
  test('GET /api/health needs no token and reports ok and the version', async () => {
    host = await startTestHost()
    const res = await host.call('/api/health', { token: null })
    expect(res.status).toBe(200)
    expect(await res.json()).toEqual({ ok: true, version: expect.stringMatching(/^\d+\.\d+\.\d+/), storage: 'read_write' })
  })

  test('the token is created on first start in <data-dir>/token with mode 0600', async () => {
    host = await startTestHost()
    const stat = statSync(join(host.dataDir, 'token'))
    expect(stat.mode & 0o777).toBe(0o600)
    expect(host.token.length).toBeGreaterThanOrEqual(32)
  })

  test('in a data dir the user made before the first start, the database, its log and a loose token are made private (0600)', async () => {
    const dataDir = join(tempDir(), 'made-by-the-user')
    mkdirSync(dataDir, { mode: 0o755 })
    writeFileSync(join(dataDir, 'token'), `${'b'.repeat(64)}\n`, { mode: 0o644 })
    host = await startTestHost({ dataDir })
    host.engine.submit({ job_type: 'private', cost_units: 1 })
    for (const name of ['token', 'leasehold.db', 'leasehold.db-wal']) {
      if (existsSync(join(dataDir, name))) expect(statSync(join(dataDir, name)).mode & 0o777, name).toBe(0o600)
    }
    expect(statSync(join(dataDir, 'leasehold.db')).mode & 0o777).toBe(0o600)
  })

  test('GET /api/capacity reports total, busy rating and mode, usable, leased, available', async () => {
    host = await startTestHost({ totalUnits: 50, busy: 8 })
    const res = await host.call('/api/capacity')
    expect(res.status).toBe(200)
    expect(await res.json()).toEqual({ total_units: 50, busy_rating: 8, busy_mode: 'manual', usable: 10, leased: 0, available: 10 })
  })

  test('PUT /api/capacity changes total units and the busy rating; null switches to auto', async () => {
    host = await startTestHost()
    let res = await host.call('/api/capacity', { method: 'PUT', json: { total_units: 40, busy_rating: 5 } })
    expect(await res.json()).toMatchObject({ total_units: 40, busy_rating: 5, busy_mode: 'manual', usable: 20 })
    res = await host.call('/api/capacity', { method: 'PUT', json: { busy_rating: null } })
    expect(await res.json()).toMatchObject({ total_units: 40, busy_mode: 'auto' })
  })

  test('on auto the machine is measured before anything is served or leased: the first answer already carries the measured rating, logged as BUSY_MEASURED', async () => {
    host = await startTestHost({ busy: 'auto' })
    const capacity = await (await host.call('/api/capacity')).json()
    expect(capacity.busy_mode).toBe('auto')
    const measured = host.engine.replayAfter(0, 100).events.filter((e) => e.event_type === 'BUSY_MEASURED')
    expect(measured.map((e) => e.data)).toEqual([{ busy_rating: capacity.busy_rating }])
  })

  test('PUT /api/capacity with anything else is 400 naming the fields, and changes nothing', async () => {
    host = await startTestHost({ totalUnits: 30 })
    for (const body of [{ busy_rating: 11 }, { busy_rating: '5' }, { total_units: -1 }, { total_units: 0 }, { total_units: 1.5 }, { extra: true }]) {
      const res = await host.call('/api/capacity', { method: 'PUT', json: body })
      expect(res.status).toBe(400)
      const error = await res.json()
      expect(error.code).toBe('invalid_request')
      expect(error.detail).toMatch(/busy_rating|total_units|extra/)
    }
    expect((await (await host.call('/api/capacity')).json()).total_units).toBe(30)
  })
})

describe('request guard', () => {
  test('no token or a wrong token is 401 unauthorized', async () => {
    host = await startTestHost()
    expect((await host.call('/api/capacity', { token: null })).status).toBe(401)
    const wrong = await host.call('/api/capacity', { token: 'x'.repeat(43) })
    expect(wrong.status).toBe(401)
    expect(await wrong.json()).toEqual({ code: 'unauthorized', detail: expect.any(String) })
  })

  test('a foreign Host header is 403 even for /api/health (DNS rebinding)', async () => {
    host = await startTestHost()
    const res = await rawRequest(host.url, { path: '/api/health', headers: { host: 'evil.example' } })
    expect(res.status).toBe(403)
    expect(JSON.parse(res.body).code).toBe('forbidden_host')
    const wrongPort = await rawRequest(host.url, { path: '/api/health', headers: { host: 'localhost:1' } })
    expect(wrongPort.status).toBe(403)
    const own = await rawRequest(host.url, { path: '/api/health', headers: { host: `localhost:${new URL(host.url).port}` } })
    expect(own.status).toBe(200)
  })

  test('a foreign Origin is 403 and no response carries CORS headers', async () => {
    host = await startTestHost()
    const res = await host.call('/api/capacity', { headers: { origin: 'http://evil.example' } })
    expect(res.status).toBe(403)
    expect((await res.json()).code).toBe('forbidden_origin')
    const own = await host.call('/api/capacity', { headers: { origin: host.url } })
    expect(own.status).toBe(200)
    for (const r of [res, own]) {
      expect([...r.headers.keys()].filter((k) => k.startsWith('access-control-'))).toEqual([])
    }
  })

  test('unknown routes are 404 JSON and wrong methods 405 JSON', async () => {
    host = await startTestHost()
    const missing = await host.call('/api/nothing-here')
    expect(missing.status).toBe(404)
    expect((await missing.json()).code).toBe('not_found')
    const wrongMethod = await host.call('/api/capacity', { method: 'DELETE' })
    expect(wrongMethod.status).toBe(405)
    expect((await wrongMethod.json()).code).toBe('method_not_allowed')
  })

  test('a 405 names the methods the route allows in an Allow header (HTTP requires it)', async () => {
    host = await startTestHost()
    const capacity = await host.call('/api/capacity', { method: 'DELETE' })
    expect(capacity.status).toBe(405)
    expect(capacity.headers.get('allow')?.split(/,\s*/).sort()).toEqual(['GET', 'HEAD', 'PUT'])
    expect(await capacity.json()).toMatchObject({ code: 'method_not_allowed', detail: expect.stringContaining('GET') })
    const submit = await host.call('/internal/worker/claim', { method: 'GET' })
    expect(submit.status).toBe(405)
    expect(submit.headers.get('allow')).toBe('POST')
  })

  test("every route's OPTIONS and 405 name the methods its path takes: a path a route spells whole, only its routes' (POST on jobs/submit, not the GET of jobs/{job_id})", async () => {
    host = await startTestHost()
    const methodsOf = new Map<string, Set<string>>()
    for (const api of HTTP_APIS) {
      for (const route of api.routes) {
        // A path with parameters asked with one value each; a whole path as spelled.
        const path = fullPath(api, route).replace(/:\w+/g, 'x-0')
        const methods = methodsOf.get(path) ?? new Set<string>()
        methods.add(route.method)
        if (route.method === 'GET') methods.add('HEAD')
        methodsOf.set(path, methods)
      }
    }
    for (const [path, methods] of methodsOf) {
      const options = await host.call(path, { method: 'OPTIONS' })
      expect(options.status, path).toBe(200)
      const allow = new Set(options.headers.get('allow')?.split(/,\s*/))
      if (!path.includes('x-0')) expect(allow, path).toEqual(methods)
      else for (const method of methods) expect(allow, path).toContain(method)
    }
    for (const path of ['/api/scheduler/jobs/submit', '/api/scheduler/jobs/submit-batch', '/api/scheduler/jobs/claim', '/api/scheduler/lease/request']) {
      for (const method of ['GET', 'HEAD', 'DELETE']) {
        const refused = await host.call(path, { method })
        expect([method, path, refused.status, refused.headers.get('allow')]).toEqual([method, path, 405, 'POST'])
      }
    }
  })

  test('a non-JSON body is 415, malformed JSON 400, a body over the limit 413', async () => {
    host = await startTestHost({ bodyLimitBytes: 2048 })
    const text = await host.call('/api/capacity', { method: 'PUT', body: 'busy=1', headers: { 'content-type': 'text/plain' } })
    expect(text.status).toBe(415)
    const broken = await host.call('/api/capacity', { method: 'PUT', body: '{"busy_rating":', headers: { 'content-type': 'application/json' } })
    expect(broken.status).toBe(400)
    expect((await broken.json()).code).toBe('invalid_json')
    const big = await host.call('/api/capacity', { method: 'PUT', json: { note: 'x'.repeat(4096) } })
    expect(big.status).toBe(413)
    expect((await big.json()).code).toBe('payload_too_large')
  })
})

describe('restart', () => {
  test('capacity settings and jobs survive a restart on the same data dir', async () => {
    host = await startTestHost()
    await host.call('/api/capacity', { method: 'PUT', json: { total_units: 12, busy_rating: 3 } })
    const { job } = host.engine.submit({ job_type: 'kept', cost_units: 2 })
    await host.stop()
    host = await startTestHost({ dataDir: host.dataDir, totalUnits: null, busy: null })
    expect(await (await host.call('/api/capacity')).json()).toMatchObject({ total_units: 12, busy_rating: 3 })
    expect(host.engine.getJob(job.id).job_type).toBe('kept')
  })
})

describe('stopping', () => {
  test('stop does not wait for connections that never sent a request, nor for idle keep-alive ones', async () => {
    host = await startTestHost()
    await host.call('/api/health') // a keep-alive connection, idle now
    const { port } = new URL(host.url)
    const silent = connect(Number(port), '127.0.0.1') // opened ahead, as HTTP clients do, and never used
    await new Promise((resolve) => silent.once('connect', resolve))
    let received = ''
    silent.on('data', (chunk) => (received += chunk))
    const closed = new Promise((resolve) => silent.once('close', resolve))
    await host.stop()
    await closed
    // Closed by the stop itself: a socket left to the stalled-header timer would have had its 408 first.
    expect(received).toBe('')
  })

  test('a request in flight when stop begins is answered before the server closes', async () => {
    host = await startTestHost()
    const waiting = host.call('/internal/worker/claim', { method: 'POST', json: { worker_id: 'w', streams: ['default'], max_wait_ms: 10_000 } })
    await until(async () => ((await (await host.call('/api/workers')).json()) as { workers: { worker_id: string }[] }).workers.some((w) => w.worker_id === 'w'), 5000, 'the claim arrived')
    await host.stop()
    const answer = await waiting
    expect(answer.status).toBe(200)
    expect(await answer.json()).toMatchObject({ claimed: false })
    expect(answer.headers.get('connection')).toBe('close') // the client's next request needs a new connection, which the stopped server refuses
  })
})

describe('stopping, with claims that wait', () => {
  test('every answer from the stop on closes its connection: claims waiting when it begins are answered Connection: close, on the front\'s path and on Koa\'s', async () => {
    host = await startTestHost()
    const { url, token } = host
    /** A waiting claim; `contentType` other than application/json exactly sends it to Node and Koa rather than the front. */
    const claim = (workerId: string, contentType: string) =>
      fetch(`${url}/internal/worker/claim`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': contentType },
        body: JSON.stringify({ worker_id: workerId, streams: ['default'], max_wait_ms: 20_000 }),
      })
    const front = claim('w-front', 'application/json')
    const koa = claim('w-koa', 'application/json; charset=utf-8')
    const listed = async () => ((await (await host.call('/api/workers')).json()) as { workers: { worker_id: string }[] }).workers.map((w) => w.worker_id)
    await until(async () => (await listed()).sort().join() === 'w-front,w-koa', 5000, 'both claims wait')
    await host.stop()
    for (const [path, answer] of [['front', await front], ['koa', await koa]] as const) {
      expect(await answer.json(), path).toEqual({ claimed: false })
      expect(answer.headers.get('connection'), path).toBe('close')
    }
  })
})

describe('stopping, with workers that keep asking', () => {
  test('claims and file retries asked while the host stops are granted nothing, wait at most a second, and close their connections, so a worker that keeps asking cannot hold the stop up', async () => {
    host = await startTestHost()
    const { url, token } = host
    const post = (path: string, json: unknown) =>
      fetch(`${url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(json) })
    const file = { file: '/data/held.txt', owner_id: 'holder' }
    expect((await post('/api/files/leases/acquire', file)).status).toBe(200)
    expect((await post('/api/files/leases/acquire', { ...file, owner_id: 'waiter' })).status).toBe(409)
    // Two workers that ask again as soon as they are answered, until the host is gone.
    const answers: unknown[] = []
    let began = Infinity
    /** How the answers given once the stop began left their connections: each closes it, so no client keeps one busy. */
    const connections = new Set<string | null>()
    const keepAsking = async (path: string, json: unknown) => {
      for (;;) {
        try {
          const asked = Date.now()
          const answer = await post(path, json)
          if (asked > began) connections.add(answer.headers.get('connection'))
          answers.push(await answer.json())
        } catch {
          return // the host has stopped
        }
      }
    }
    const claiming = keepAsking('/internal/worker/claim', { worker_id: 'w', streams: ['default'], max_wait_ms: 20_000 })
    const waiting = keepAsking('/api/files/leases/wait', { ...file, owner_id: 'waiter', max_wait_ms: 30_000 })
    await until(async () => ((await (await host.call('/api/workers')).json()) as { workers: { worker_id: string }[] }).workers.some((w) => w.worker_id === 'w'), 5000, 'the claim waits')
    began = Date.now()
    const stopped = host.stop()
    host.engine.submit({ job_type: 'late', cost_units: 1 }) // work that comes during the stop goes to no claim
    await stopped
    await Promise.all([claiming, waiting])
    expect(Date.now() - began).toBeLessThan(5000) // each loop's waits are 20 and 30 s long
    expect(answers.length).toBeGreaterThanOrEqual(1)
    expect([...connections].filter((connection) => connection !== 'close')).toEqual([])
    expect(answers.filter((a) => (a as { claimed?: boolean }).claimed === true)).toEqual([])
  })
})

describe('OpenAPI', () => {
  test('GET /api/openapi.json is an OpenAPI 3.1 document covering every API, built from the zod schemas', async () => {
    host = await startTestHost()
    const res = await host.call('/api/openapi.json')
    expect(res.status).toBe(200)
    const doc = await res.json()
    expect(doc.openapi).toBe('3.1.0')
    for (const path of [
      '/api/capacity',
      '/api/system/scheduler/leases/request',
      '/api/system/scheduler/leases/{lease_id}/heartbeat',
      '/api/scheduler/jobs/submit',
      '/api/scheduler/lease/{lease_id}/release',
      '/api/scheduler/stats/timeseries',
      '/internal/worker/claim',
      '/internal/worker/fail',
    ]) {
      expect(Object.keys(doc.paths)).toContain(path)
    }
    const submit = doc.paths['/api/scheduler/jobs/submit'].post.requestBody.content['application/json'].schema
    const schema = submit.$ref ? doc.components.schemas[submit.$ref.split('/').pop()] : submit
    expect(schema.required).toEqual(expect.arrayContaining(['job_type', 'cost_units']))
    expect(schema.properties.cost_units).toMatchObject({ type: 'integer', minimum: 1 })
  })
})

describe('dashboard', () => {
  test('GET / serves the dashboard page without a token, with a CSP; /api still needs the token', async () => {
    const { mkdirSync, writeFileSync } = await import('node:fs')
    const { tempDir } = await import('../helpers/host')
    const rendererDir = tempDir('leasehold-renderer-')
    mkdirSync(join(rendererDir, 'assets'))
    writeFileSync(join(rendererDir, 'index.html'), '<!doctype html><title>Leasehold</title>')
    writeFileSync(join(rendererDir, 'assets', 'app.js'), 'console.log(1)')
    host = await startTestHost({}, { rendererDir })
    const page = await host.call('/', { token: null })
    expect(page.status).toBe(200)
    expect(await page.text()).toContain('<title>Leasehold</title>')
    expect(page.headers.get('content-security-policy')).toContain("default-src 'self'")
    expect((await host.call('/assets/app.js', { token: null })).status).toBe(200)
    expect((await host.call('/assets/../../token', { token: null })).status).toBe(404)
    expect((await host.call('/api/capacity', { token: null })).status).toBe(401)
    // Sent as written (fetch would take the dots away): a path out of the folder is no page, never a 500.
    for (const path of ['/assets/../../token', '/..%2f..', '/%2e%2e/token', '/assets/%2e%2e/%2e%2e/token']) {
      const res = await rawRequest(host.url, { method: 'GET', path, headers: { host: new URL(host.url).host } })
      expect(res.status, path).toBe(404)
      expect(JSON.parse(res.body)).toMatchObject({ code: 'not_found' })
    }
  })

  test('without a built dashboard, / says how to build it', async () => {
    host = await startTestHost({}, { rendererDir: join(tempDirPath(), 'missing') })
    const page = await host.call('/', { token: null })
    expect(page.status).toBe(200)
    expect(await page.text()).toContain('npm run build')
  })
})

function tempDirPath(): string {
  return tmpdir()
}

describe('requests Node refuses itself', () => {
  test('a request line over 16 KiB gets 431 with the {detail, code} shape', async () => {
    host = await startTestHost()
    const res = await rawRequest(host.url, { path: `/api/health?${'x'.repeat(20_000)}` })
    expect(res.status).toBe(431)
    expect(JSON.parse(res.body)).toEqual({ detail: expect.any(String), code: 'headers_too_large' })
  })

  test('a stream ticket request with a non-JSON body is 415 like any other', async () => {
    host = await startTestHost()
    const res = await host.call('/api/events/ticket', { method: 'POST', body: 'hi', headers: { 'content-type': 'text/plain' } })
    expect(res.status).toBe(415)
  })
})

describe('dashboard reads', () => {
  test('GET /api/leases lists the ACTIVE leases with the host clock; GET …/jobs/{id}/attempts lists attempts with outcome and error', async () => {
    host = await startTestHost()
    const { job } = host.engine.submit({ job_type: 'viewed', cost_units: 3 })
    const first = host.engine.claimAndLease({ worker_id: 'w1' })
    if (!first.granted) throw new Error('not granted')
    const leases = await (await host.call('/api/leases')).json()
    expect(Date.parse(leases.now)).toBeGreaterThan(0)
    expect(leases.leases).toEqual([
      expect.objectContaining({ lease_id: first.lease.id, job_id: job.id, job_type: 'viewed', worker_id: 'w1', cost_units: 3 }),
    ])
    host.engine.fail({ job_id: job.id, attempt_id: first.lease.attempt_id, worker_id: 'w1', lease_token: first.lease.token, error: { code: 'boom', retryable: true } })
    const { attempts } = await (await host.call(`/api/scheduler/jobs/${job.id}/attempts`)).json()
    expect(attempts).toEqual([
      expect.objectContaining({ attempt: 1, worker_id: 'w1', outcome: 'FAILED', disposition: 'REQUEUED', error: { code: 'boom', retryable: true } }),
    ])
    expect((await host.call('/api/leases')).ok).toBe(true)
    expect((await (await host.call('/api/leases')).json()).leases).toEqual([])
    expect((await host.call('/api/scheduler/jobs/nope/attempts')).status).toBe(404)
  })
})
