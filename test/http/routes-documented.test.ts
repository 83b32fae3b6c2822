/**
 * Each route is one record (src-main/http/route.ts): Koa's router, the lane and the OpenAPI
 * document are all made from the APIs' lists, so a route is served exactly when it is
 * documented. Held here from both sides: the running router's routes (its public `stack`) and
 * the lane's paths against the document's operations.
 */
import { describe, expect, test } from 'vitest'
import { HTTP_APIS } from '../../src-main/http/apis'
import { openApiDocument } from '../../src-main/http/openapi'
import { fullPath, openApiPath } from '../../src-main/http/route'
import { appWithStubs } from './routes'

const METHODS = ['get', 'post', 'put', 'patch', 'delete']
const doc = openApiDocument('test') as unknown as { paths: Record<string, Record<string, unknown>> }
const documented = Object.entries(doc.paths)
  .flatMap(([path, item]) => Object.keys(item).filter((key) => METHODS.includes(key)).map((method) => `${method.toUpperCase()} ${path}`))
  .sort()
const app = appWithStubs()
const served = app.router.stack.map((layer) => `${layer.methods.filter((m) => m !== 'HEAD').join(',')} ${openApiPath(layer.path as string)}`).sort()

describe('a route is served exactly when it is documented', () => {
  test('every route the router serves is in the document, and every operation of the document is served', () => {
    expect(served.length).toBeGreaterThan(50)
    expect(served).toEqual(documented)
  })

  test("every path the lane answers is a POST of the document, marked for the lane in its record", () => {
    const marked = HTTP_APIS.flatMap((api) => api.routes.filter((r) => r.lane).map((r) => fullPath(api, r)))
    expect([...app.lanePaths].sort()).toEqual(marked.sort())
    for (const path of app.lanePaths) expect(doc.paths[path]?.post, path).toBeDefined()
  })

  test("a route's path parameters are its params schema's fields, no more, no fewer", () => {
    for (const api of HTTP_APIS) {
      for (const r of api.routes) {
        const inPath = [...r.path.matchAll(/:([A-Za-z_]+)/g)].map((m) => m[1]).sort()
        expect(Object.keys(r.params?.shape ?? {}).sort(), `${r.method} ${fullPath(api, r)}`).toEqual(inPath)
      }
    }
  })
})
