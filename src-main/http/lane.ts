import type { IncomingMessage, ServerResponse } from 'node:http'
import { clientGone, readDeclaredJson, writeJson } from './body'
import type { ErrorReplies } from './errors'
import { checkRequest, type GuardInput, type GuardPolicy, guardInput } from './guard'
import { HttpError } from './http-error'
import { type Api, fullPath, invoke, laneAnswer, NO_INPUT, type RouteCall, type RouteDeps, routeBody, type RunRoute } from './route'

/**
 * One request of the lane's shape and its answer, however it came: through Node's HTTP server
 * ({@link nodeExchange}) or read by the front (front.ts).
 */
export interface LaneExchange {
  /** What the request guard reads. */
  guard: GuardInput
  /** A request header by its lower-case name. */
  header(name: string): string | undefined
  /** The body as JSON, or a promise of it (400 when it is not JSON). */
  body(): unknown
  /** A signal that aborts when the client hangs up before its answer. */
  clientGone(): AbortSignal
  /** Writes the answer: JSON with the API's headers. Only the first answer is sent. */
  answer(status: number, body: unknown, headers: Record<string, string>): void
  /** A fault of the lane itself: the request cannot be answered, its connection goes. */
  abandon(): void
}

/**
 * Handles a request and returns true, or returns false and leaves it to Koa; `paths` are the
 * paths it serves, and `serve` answers a request of one of them that came another way (the front).
 */
export type Lane = ((req: IncomingMessage, res: ServerResponse) => boolean) & {
  readonly paths: readonly string[]
  /** Serves `exchange` when `path` is a lane route's, and returns whether it was. */
  serve(path: string, exchange: LaneExchange): boolean
}

export interface LaneDependencies {
  /** What the routes run with. */
  routes: RouteDeps
  policy: GuardPolicy
  bodyLimitBytes: number
  errors: ErrorReplies
}

/**
 * The lane: the routes marked `lane` (route.ts), whose requests come at the rate of jobs — the
 * worker routes (the worker API's claim, heartbeat, complete, fail, and the batch and report routes)
 * and the one-job submit (the queue API) — answered straight from Node's request event, without Koa, for the shape
 * their clients send: `POST`, the path exactly as the route spells it, no query, a JSON body of a
 * declared length within the limit (`Content-Type: application/json` exactly). Koa's work per
 * request (its context, its middleware chain, its response) was a sixth of the host's CPU per job
 * of a worker API lifecycle, and ~20 µs of a submit's way to the worker waiting for its job
 * (docs/performance.md). Every other request, to these paths too, goes on to Koa, whose router
 * serves the same route records (routing.ts). The front (front.ts) hands the lane the same
 * requests before Node's HTTP server has parsed them.
 *
 * Nothing is answered differently: the lane runs the same steps as Koa's app, in the same order,
 * with the same code — the request guard (guard.ts), the body's reading and validation, the
 * route itself (route.ts `invoke`, as Koa's router calls it), the same headers (body.ts `API_HEADERS`,
 * which `writeJson` sets), and any error through the same {@link ErrorReplies}.
 */
export function createLane(apis: readonly Api[], deps: LaneDependencies): Lane {
  const byPath = new Map<string, RunRoute>()
  for (const api of apis) {
    for (const route of api.routes) {
      if (route.lane !== true) continue
      if (route.method !== 'POST' || route.params || route.query || !route.run) throw new Error(`${route.id}: a lane route is a POST without parameters or a query`)
      byPath.set(fullPath(api, route), route as RunRoute)
    }
  }
  const serve = (path: string, exchange: LaneExchange): boolean => {
    const route = byPath.get(path)
    if (route === undefined) return false
    run(route, path, exchange, deps).catch((error: unknown) => {
      // Only a fault of the lane itself gets here (its answers are caught below): the connection goes.
      deps.errors(error, 'POST', path)
      exchange.abandon()
    })
    return true
  }
  const lane = (req: IncomingMessage, res: ServerResponse): boolean => {
    if (req.method !== 'POST') return false
    const path = req.url ?? ''
    if (!byPath.has(path)) return false
    const headers = req.headers
    const length = Number(headers['content-length'])
    const encoded = headers['transfer-encoding'] !== undefined || headers['content-encoding'] !== undefined
    if (headers['content-type'] !== 'application/json' || encoded || !(length > 0 && length <= deps.bodyLimitBytes)) {
      return false
    }
    return serve(path, nodeExchange(req, res, path, length))
  }
  return Object.assign(lane, { paths: [...byPath.keys()], serve })
}

/** A request of the lane's shape as Node's HTTP server gives it, its body of the declared `length`. */
function nodeExchange(req: IncomingMessage, res: ServerResponse, path: string, length: number): LaneExchange {
  return {
    guard: guardInput(req, path),
    header: (name) => {
      const value = req.headers[name]
      return Array.isArray(value) ? value.join(', ') : value
    },
    body: () => readDeclaredJson(req, length),
    clientGone: () => clientGone(res),
    answer: (status, body, headers) => writeJson(res, status, body, headers),
    abandon: () => res.destroy(),
  }
}

async function run(route: RunRoute, path: string, exchange: LaneExchange, deps: LaneDependencies): Promise<void> {
  // The first answer is the one sent: an exchange writes nothing more once it has answered.
  const headers: Record<string, string> = {}
  try {
    const refusal = checkRequest(exchange.guard, deps.policy)
    if (refusal) throw new HttpError(refusal.code, refusal.detail)
    const body = await routeBody(route, () => exchange.body())
    const call: RouteCall<unknown> = {
      clientGone: () => exchange.clientGone(),
      answerNow: (early) => exchange.answer(route.status ?? 200, early, headers),
      header: (name) => exchange.header(name),
      setHeader: (name, value) => void (headers[name] = value),
    }
    const settled = laneAnswer(route, await invoke(route, { params: NO_INPUT, query: NO_INPUT, body }, deps.routes, call))
    exchange.answer(settled.status, settled.body, headers)
  } catch (error) {
    // Logged as Koa's error middleware logs it, even when the answer has already gone.
    const reply = deps.errors(error, 'POST', path)
    exchange.answer(reply.status, reply.body, { ...headers, ...reply.headers })
  }
}
