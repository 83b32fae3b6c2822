/**
 * The one routing middleware (src-main/http/routing.ts) answers every request exactly as the
 * routers' own `routes()` + `allowedMethods()` pairs, mounted in turn, answer it: the same
 * handler, status, `Allow` header and body, for routes with and without parameters, paths
 * spelled with another case or a trailing slash, unknown paths and methods, OPTIONS and HEAD.
 */
import Router from '@koa/router'
import Koa from 'koa'
import { request } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { routersMiddleware } from '../../src-main/http/routing'

/** Routers shaped like the app's: shared prefixes, a route with parameters before a path it also matches, a router middleware. */
function makeRouters(): Router[] {
  const answer = (name: string) => (ctx: Koa.Context) => {
    ctx.body = { route: name, params: (ctx as unknown as { params: unknown }).params }
  }
  const system = new Router({ prefix: '/api' })
  system.get('/health', answer('system GET /api/health'))
  system.put('/capacity', answer('system PUT /api/capacity'))
  system.get('/capacity', answer('system GET /api/capacity'))
  const jobs = new Router({ prefix: '/api/jobs' })
  jobs.get('/:id', answer('jobs GET /api/jobs/:id'))
  jobs.post('/submit', answer('jobs POST /api/jobs/submit'))
  const later = new Router({ prefix: '/api' })
  // Taken first by /api/jobs/:id for GET, reached for POST.
  later.get('/jobs/stats', answer('later GET /api/jobs/stats'))
  later.post('/jobs/stats', answer('later POST /api/jobs/stats'))
  later.post('/capacity', answer('later POST /api/capacity'))
  const guarded = new Router({ prefix: '/internal' })
  guarded.use('/worker', async (ctx, next) => {
    ctx.set('X-Router-Middleware', 'yes')
    await next()
  })
  guarded.post('/worker/claim', answer('guarded POST /internal/worker/claim'))
  const worker = new Router({ prefix: '/internal/worker' })
  worker.post('/heartbeat', answer('worker POST /internal/worker/heartbeat'))
  worker.post('/complete', answer('worker POST /internal/worker/complete'))
  // A route that passes on: the next router answers.
  worker.post('/passes', (_ctx, next) => next())
  const last = new Router({ prefix: '/internal/worker' })
  last.post('/passes', answer('last POST /internal/worker/passes'))
  return [system, jobs, later, guarded, worker, last]
}

interface Answer {
  status: number
  allow: string | undefined
  middleware: string | undefined
  body: string
}

async function serve(mount: (app: Koa) => void): Promise<{ url: string; close: () => Promise<void> }> {
  const app = new Koa()
  mount(app)
  const server = app.listen(0, '127.0.0.1')
  await new Promise((resolve) => server.once('listening', resolve))
  const { port } = server.address() as AddressInfo
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise((resolve) => server.close(() => resolve())) }
}

function ask(url: string, method: string, path: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(url + path, { method }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => (body += chunk))
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, allow: res.headers.allow, middleware: res.headers['x-router-middleware'] as string | undefined, body }),
      )
    })
    req.on('error', reject)
    req.end()
  })
}

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'PROPFIND']
const PATHS = [
  '/api/health',
  '/API/health',
  '/api/health/',
  '/api/capacity',
  '/api/jobs/submit',
  '/api/jobs/stats',
  '/api/jobs/0192',
  '/api/jobs/caf%C3%A9',
  '/api/jobs',
  '/internal/worker/claim',
  '/internal/worker/claim/',
  '/internal/worker/heartbeat',
  '/Internal/Worker/Complete',
  '/internal/worker/passes',
  '/internal/worker/nothing',
  '/nothing',
  '/',
]

describe('one routing middleware for every router', () => {
  let inTurn: Awaited<ReturnType<typeof serve>>
  let together: Awaited<ReturnType<typeof serve>>
  beforeAll(async () => {
    inTurn = await serve((app) => {
      for (const router of makeRouters()) {
        app.use(router.routes())
        app.use(router.allowedMethods())
      }
    })
    together = await serve((app) => app.use(routersMiddleware(makeRouters())))
  })
  afterAll(async () => {
    await inTurn.close()
    await together.close()
  })

  test('answers every method on every path exactly as the routers mounted in turn', async () => {
    let answered = 0
    for (const path of PATHS) {
      for (const method of METHODS) {
        const expected = await ask(inTurn.url, method, path)
        expect(await ask(together.url, method, path), `${method} ${path}`).toEqual(expected)
        if (expected.status === 200 && expected.body !== '') answered += 1
      }
    }
    // The comparison covers answered routes, not only refusals.
    expect(answered).toBeGreaterThan(10)
  })

  test('a path a route with parameters matches first is answered by that route, not by a later route without', async () => {
    expect(JSON.parse((await ask(together.url, 'GET', '/api/jobs/stats')).body)).toEqual({ route: 'jobs GET /api/jobs/:id', params: { id: 'stats' } })
    expect(JSON.parse((await ask(together.url, 'POST', '/api/jobs/stats')).body).route).toBe('later POST /api/jobs/stats')
  })

  test("a route under a router middleware runs that middleware; a route without parameters has empty params", async () => {
    const claim = await ask(together.url, 'POST', '/internal/worker/claim')
    expect(claim.middleware).toBe('yes')
    expect(JSON.parse((await ask(together.url, 'POST', '/internal/worker/heartbeat')).body)).toEqual({ route: 'worker POST /internal/worker/heartbeat', params: {} })
  })

  test('the routers stay listed on the middleware', () => {
    const routers = makeRouters()
    expect(routersMiddleware(routers).routers).toEqual(routers)
  })
})
