import type Router from '@koa/router'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { z } from 'zod'
import { clientGone, earlyReply, readDeclaredJson, readJson, writeJson } from './body'
import { type ErrorReplies, validate } from './errors'
import { checkRequest, type GuardPolicy, guardInput } from './guard'
import { HttpError } from './http-error'

/** How a lane route's answer leaves, given by whichever carrier runs it: the lane, or Koa's router. */
export interface LaneCall<Answer> {
  /** A signal that aborts when the client hangs up (asked for only by a call that may wait). */
  clientGone(): AbortSignal
  /** Answers now, before the route's promise settles: a waiting claim, from the commit that grants it. */
  answerNow(answer: Answer): void
}

/** A route the lane serves: `POST` its router's prefix + `path`, its body's schema, its answer's (and status), and what it does. */
export interface LaneRoute<Body extends z.ZodType = z.ZodType, Answer extends z.ZodType = z.ZodType> {
  path: string
  body: Body
  answer: Answer
  /** 200 unless said. */
  status?: 201
  run(input: z.output<Body>, call: LaneCall<z.output<Answer>>): Promise<z.output<Answer>>
}

/** The lane routes of one router, under its prefix. */
export interface LaneRoutes {
  prefix: string
  routes: readonly LaneRoute[]
}

/**
 * The same routes under Koa's `router`: every request the lane leaves to Koa (another spelling
 * of the path, another method, another body encoding) is answered there, by the same code.
 */
export function postRoutes(router: Router, routes: readonly LaneRoute[], bodyLimit: number): void {
  for (const { path, body, answer, status, run } of routes) {
    router.post(path, async (ctx) => {
      const input = validate(body, await readJson(ctx, bodyLimit))
      const reply = earlyReply(ctx, answer, status)
      const settled = await run(input, { clientGone: () => clientGone(ctx.res), answerNow: reply.now })
      reply.settled(() => settled)
    })
  }
}

/** Handles a request and returns true, or returns false and leaves it to Koa; `paths` are the paths it serves. */
export type Lane = ((req: IncomingMessage, res: ServerResponse) => boolean) & { readonly paths: readonly string[] }

export interface LaneDependencies {
  policy: GuardPolicy
  bodyLimitBytes: number
  errors: ErrorReplies
}

/**
 * The lane: the routes whose requests come at the rate of jobs — the worker routes (dialect
 * 003's claim, heartbeat, complete, fail, and the batch and report routes) and the one-job
 * submit (dialect 002) — answered straight from Node's request event, without Koa, for the shape
 * their clients send: `POST`, the path exactly as the route spells it, no query, a JSON body of a
 * declared length within the limit (`Content-Type: application/json` exactly). Koa's work per
 * request (its context, its middleware chain, its response) was a sixth of the host's CPU per job
 * of a dialect-003 lifecycle, and ~20 µs of a submit's way to the worker waiting for its job
 * (docs/performance.md). Every other request, to these paths too, goes on to Koa, whose routers
 * serve the same routes ({@link postRoutes}).
 *
 * Nothing is answered differently: the lane runs the same steps as Koa's app, in the same order,
 * with the same code — the request guard (guard.ts), the body's reading and validation, the
 * route itself, the same headers, and any error through the same {@link ErrorReplies}.
 */
export function createLane(groups: readonly LaneRoutes[], deps: LaneDependencies): Lane {
  const byPath = new Map(groups.flatMap(({ prefix, routes }) => routes.map((route) => [prefix + route.path, route] as const)))
  const lane = (req: IncomingMessage, res: ServerResponse): boolean => {
    if (req.method !== 'POST') return false
    const path = req.url ?? ''
    const route = byPath.get(path)
    if (route === undefined) return false
    const headers = req.headers
    const length = Number(headers['content-length'])
    if (headers['content-type'] !== 'application/json' || headers['transfer-encoding'] !== undefined || !(length > 0 && length <= deps.bodyLimitBytes)) {
      return false
    }
    serve(route, path, req, res, length, deps).catch((error: unknown) => {
      // Only a fault of the lane itself gets here (its answers are caught below): the connection goes.
      deps.errors(error, 'POST', path)
      res.destroy()
    })
    return true
  }
  return Object.assign(lane, { paths: [...byPath.keys()] })
}

async function serve(route: LaneRoute, path: string, req: IncomingMessage, res: ServerResponse, length: number, deps: LaneDependencies): Promise<void> {
  // The first answer is the one sent: writeJson writes nothing more once the response has ended.
  try {
    const refusal = checkRequest(guardInput(req, path), deps.policy)
    if (refusal) throw new HttpError(refusal.code, refusal.detail)
    const input = validate(route.body, await readDeclaredJson(req, length))
    const settled = await route.run(input, { clientGone: () => clientGone(res), answerNow: (early) => writeJson(res, route.status ?? 200, early) })
    writeJson(res, route.status ?? 200, settled)
  } catch (error) {
    // Logged as Koa's error middleware logs it, even when the answer has already gone.
    const reply = deps.errors(error, 'POST', path)
    writeJson(res, reply.status, reply.body, reply.headers)
  }
}
