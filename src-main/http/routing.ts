import Router from '@koa/router'
import type { Context, Middleware, Next } from 'koa'
import { type Api, fullPath, koaHandler, type RouteDeps } from './route'

/**
 * Every API's routes under Koa, as one middleware answering as one router's `routes()` then
 * `allowedMethods()` would: the first route for the path and method runs; a path some route
 * has, asked with another method, is 405 with `Allow` (OPTIONS 200), a method the router does
 * not implement 501. The router is built from the route records (route.ts), in the APIs' order.
 *
 * But for one thing: a path a route spells whole (`/api/scheduler/jobs/submit`) takes only the
 * methods of the routes that spell it. The router would also count a route with a parameter
 * that the path happens to match (`GET /api/scheduler/jobs/:job_id`, with `submit` for an id):
 * it listed GET in the `Allow` of a path that only takes POST, and ran a GET there as a lookup
 * of job "submit". Asked with another method such a path is 405 (OPTIONS 200), its `Allow`
 * naming its own routes' methods.
 *
 * The router tests a request against its routes one by one until one matches. A request for a
 * path without parameters, spelled as its route spells it (every request a worker sends), goes
 * straight to that route's handler instead, through a table built once from the same records —
 * for each such route that the router itself would run first for its path and method; any other
 * request (parameters, another spelling, no route) takes the router.
 */
export function routesMiddleware(apis: readonly Api[], deps: RouteDeps, bodyLimit: number): Middleware & { router: Router } {
  const router = new Router({ sensitive: true }) // a path has one spelling, in its case too (docs/api.md)
  const direct = new Map<string, Map<string, Middleware>>()
  /** The methods of each path a route spells whole, as the router lists them (HEAD with GET). */
  const spelled = new Map<string, string[]>()
  for (const api of apis) {
    for (const route of api.routes) {
      const path = fullPath(api, route)
      const handler = koaHandler(route, deps, bodyLimit)
      router.register(path, [route.method], handler)
      if (route.params === undefined && !path.includes(':')) {
        const methods = spelled.get(path) ?? []
        spelled.set(path, [...methods, ...router.stack.at(-1)!.methods.filter((method) => !methods.includes(method))])
        const paths = direct.get(route.method) ?? new Map<string, Middleware>()
        direct.set(route.method, paths)
        if (!paths.has(path)) paths.set(path, handler)
      }
    }
  }
  // Only where the router would run the same route: no route registered before it takes the path.
  for (const [method, paths] of direct) {
    for (const [path] of paths) if (router.match(path, method).pathAndMethod[0]?.path !== path) paths.delete(path)
  }
  const routes = router.routes() as Middleware
  const allowed = router.allowedMethods() as Middleware
  const middleware = (ctx: Context, next: Next): unknown => {
    const handler = direct.get(ctx.method)?.get(ctx.path)
    if (handler !== undefined) return handler(ctx, next)
    const own = spelled.get(ctx.path)
    if (own !== undefined && !own.includes(ctx.method) && router.methods.includes(ctx.method)) {
      // As the router answers a path's other methods: OPTIONS 200 with no body, else 405 (the
      // error middleware gives it the API's error body).
      ctx.status = ctx.method === 'OPTIONS' ? 200 : 405
      if (ctx.method === 'OPTIONS') ctx.body = ''
      ctx.set('Allow', own.join(', '))
      return undefined
    }
    return routes(ctx, () => allowed(ctx, next))
  }
  // The router stays visible (the tests walk its routes through its public `stack`).
  return Object.assign(middleware, { router })
}
