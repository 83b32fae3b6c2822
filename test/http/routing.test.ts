/**
 * The routing middleware (src-main/http/routing.ts) answers every request exactly as one Koa
 * router with the same route records, mounted as `routes()` + `allowedMethods()`, answers it:
 * the same route, status, `Allow` header and body, for routes with and without parameters, paths
 * spelled with another case or a trailing slash, unknown paths and methods, OPTIONS and HEAD.
 */
import Router from '@koa/router'
import Koa from 'koa'
import { request } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { z } from 'zod'
import { type Api, fullPath, koaHandler, type Method, route, type RouteDeps } from '../../src-main/http/route'
import { routesMiddleware } from '../../src-main/http/routing'

const deps = null as unknown as RouteDeps // the test routes use none

/** A route that answers with its own name and the path parameters it was given. */
const named = (method: Method, path: string, params?: z.ZodObject) =>
  route({ method, path, id: 'test', summary: '', params, answer: z.unknown(), grouped: false, run: ({ params: given }) => ({ route: `${method} ${path}`, params: given }) })

/** APIs shaped like the host's: shared prefixes, and a route with parameters before a path it also matches. */
const APIS: Api[] = [
  { tag: 'system', description: '', prefix: '/api', routes: [named('GET', '/health'), named('PUT', '/capacity'), named('GET', '/capacity')] },
  { tag: 'jobs', description: '', prefix: '/api/jobs', routes: [named('GET', '/:id', z.object({ id: z.string() })), named('POST', '/submit')] },
  // Taken first by /api/jobs/:id for GET, reached for POST.
  { tag: 'later', description: '', prefix: '/api', routes: [named('GET', '/jobs/stats'), named('POST', '/jobs/stats'), named('POST', '/capacity')] },
  { tag: 'worker', description: '', prefix: '/internal/worker', routes: [named('POST', '/claim'), named('POST', '/heartbeat'), named('POST', '/complete')] },
]

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
  '/internal/worker/nothing',
  '/nothing',
  '/',
]

describe('one routing middleware for every API', () => {
  let plain: Awaited<ReturnType<typeof serve>>
  let together: Awaited<ReturnType<typeof serve>>
  beforeAll(async () => {
    plain = await serve((app) => {
      const router = new Router({ sensitive: true }) // as the API's: a path has one spelling, in its case too
      for (const api of APIS) for (const r of api.routes) router.register(fullPath(api, r), [r.method], koaHandler(r, deps, 1024))
      app.use(router.routes())
      app.use(router.allowedMethods())
    })
    together = await serve((app) => app.use(routesMiddleware(APIS, deps, 1024)))
  })
  afterAll(async () => {
    await plain.close()
    await together.close()
  })

  test('answers every method on every path exactly as a plain router of the same routes, but where a whole path takes only its own routes (below)', async () => {
    let answered = 0
    for (const path of PATHS) {
      for (const method of METHODS) {
        if (path === '/api/jobs/submit' && method !== 'POST' && method !== 'PROPFIND') continue
        const expected = await ask(plain.url, method, path)
        expect(await ask(together.url, method, path), `${method} ${path}`).toEqual(expected)
        if (expected.status === 200 && expected.body !== '') answered += 1
      }
    }
    // The comparison covers answered routes, not only refusals.
    expect(answered).toBeGreaterThan(10)
  })

  test('a path a route with parameters matches first is answered by that route, not by a later route without', async () => {
    expect(JSON.parse((await ask(together.url, 'GET', '/api/jobs/stats')).body)).toEqual({ route: 'GET /:id', params: { id: 'stats' } })
    expect(JSON.parse((await ask(together.url, 'POST', '/api/jobs/stats')).body).route).toBe('POST /jobs/stats')
  })

  test('a path a route spells whole takes only the methods of the routes that spell it: OPTIONS lists them, another is 405, never a route with a parameter it also matches', async () => {
    for (const method of ['GET', 'HEAD', 'PUT', 'DELETE', 'PATCH']) {
      const refused = await ask(together.url, method, '/api/jobs/submit')
      expect([method, refused.status, refused.allow]).toEqual([method, 405, 'POST'])
    }
    expect(await ask(together.url, 'OPTIONS', '/api/jobs/submit')).toMatchObject({ status: 200, allow: 'POST', body: '' })
    // A method the router does not implement is still 501; the path's own method still runs.
    expect((await ask(together.url, 'PROPFIND', '/api/jobs/submit')).status).toBe(501)
    expect(JSON.parse((await ask(together.url, 'POST', '/api/jobs/submit')).body).route).toBe('POST /submit')
    // A path with a value of the parameter is the parameter's route.
    expect(await ask(together.url, 'OPTIONS', '/api/jobs/0192')).toMatchObject({ status: 200, allow: 'HEAD, GET' })
  })

  test('a route without parameters runs with none', async () => {
    expect(JSON.parse((await ask(together.url, 'POST', '/internal/worker/heartbeat')).body)).toEqual({ route: 'POST /heartbeat', params: {} })
  })

  test('the router lists every route, in order, through its public stack', () => {
    const { router } = routesMiddleware(APIS, deps, 1024)
    expect(router.stack.map((layer) => `${layer.methods.at(-1)} ${layer.path}`)).toEqual(APIS.flatMap((api) => api.routes.map((r) => `${r.method} ${fullPath(api, r)}`)))
  })
})
