import type Router from '@koa/router'
import type { RouterContext } from '@koa/router'
import type { Context, Middleware, Next } from 'koa'

/**
 * The dialects' routers as one middleware, answering exactly as each router's `routes()` then
 * `allowedMethods()` in turn would: the first router with a route for the path and method runs
 * it; a path some router knows, asked with another method, is 405 with `Allow` (OPTIONS 200),
 * a method no router implements 501.
 *
 * Run in turn, the routers test a request against every route of each router before the one
 * that answers it, and each pair adds two steps to the middleware chain. A request for a path
 * without parameters, spelled as its route spells it (every request a worker sends), goes
 * straight to its handler instead, through a table built once from the routers' own matching;
 * any other request (parameters, another spelling, no route) takes the routers in turn.
 */
export function routersMiddleware(routers: readonly Router[]): Middleware & { routers: readonly Router[] } {
  const chain: Middleware[] = routers.flatMap((router) => [router.routes() as Middleware, router.allowedMethods() as Middleware])
  const direct = directRoutes(routers)
  const middleware = (ctx: Context, next: Next): Promise<unknown> => {
    const route = direct.get(ctx.method)?.get(ctx.path)
    if (route === undefined) return step(chain, 0, ctx, next)
    // What the owning router sets before the handler runs (the routers before it match nothing
    // here); a handler that passes on reaches that router's allowedMethods() and those after it.
    const routed = ctx as RouterContext
    routed.matched = [...route.matched]
    routed.router = route.router
    routed.routeMatched = true
    routed.captures = []
    routed.params = {}
    routed.request.params = routed.params
    routed.routerPath = route.path
    routed.routerName = route.name
    routed._matchedRoute = route.path
    if (route.name !== undefined) routed._matchedRouteName = route.name
    return Promise.resolve(route.handler(ctx, () => step(chain, route.after, ctx, next)))
  }
  // The routers stay visible, as each router's own middleware keeps its router (the tests list the routes from them).
  return Object.assign(middleware, { routers })
}

/** Runs chain[i], whose `next` runs chain[i + 1], and the last one's the app's `next` (koa-compose's contract). */
function step(chain: readonly Middleware[], i: number, ctx: Context, next: Next): Promise<unknown> {
  if (i === chain.length) return next()
  try {
    return Promise.resolve(chain[i]!(ctx, () => step(chain, i + 1, ctx, next)))
  } catch (error) {
    return Promise.reject(error)
  }
}

interface DirectRoute {
  handler: Middleware
  router: Router
  path: string
  name: string | undefined
  /** The owning router's routes whose path matches (its `allowedMethods()` reads them). */
  matched: ReturnType<Router['match']>['path']
  /** The owning router's `allowedMethods()` in the chain: where the handler's `next` goes. */
  after: number
}

/**
 * Method → path → its route, for each route without parameters that the routers in turn would
 * run alone: no router before its own matches the path at all, and within its router the path
 * and method reach that route's one handler and nothing else (no router middleware, no earlier
 * route with parameters that takes the path first).
 */
function directRoutes(routers: readonly Router[]): Map<string, Map<string, DirectRoute>> {
  const direct = new Map<string, Map<string, DirectRoute>>()
  for (const router of routers) {
    for (const layer of router.stack) {
      const path = layer.path
      if (typeof path !== 'string' || layer.paramNames.length > 0 || layer.stack.length !== 1) continue
      for (const method of layer.methods) {
        const paths = direct.get(method) ?? new Map<string, DirectRoute>()
        direct.set(method, paths)
        if (paths.has(path)) continue
        const owner = routers.findIndex((r) => r.match(path, method).path.length > 0)
        const match = owner === -1 ? undefined : routers[owner]!.match(path, method)
        if (match?.pathAndMethod.length !== 1 || match.pathAndMethod[0] !== layer) continue
        paths.set(path, {
          handler: layer.stack[0] as Middleware,
          router: routers[owner]!,
          path,
          name: layer.name ?? undefined,
          matched: match.path,
          after: 2 * owner + 1,
        })
      }
    }
  }
  return direct
}
