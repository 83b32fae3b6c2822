import type { IncomingMessage, ServerResponse } from 'node:http'
import type { ClaimWaiters } from '../workers/claim-waiters'
import { clientGone, readDeclaredJson, writeJson } from './body'
import { WORKER_PREFIX, type WorkerRoute } from './dialect-worker'
import { type ErrorReplies, validate } from './errors'
import { checkRequest, type GuardPolicy } from './guard'
import { HttpError } from './statuses'

/** Handles a request and returns true, or returns false and leaves it to Koa. */
export type Lane = (req: IncomingMessage, res: ServerResponse) => boolean

export interface LaneDependencies {
  policy: GuardPolicy
  bodyLimitBytes: number
  /** Before each answer, the claims its request woke are answered first (as server.ts does for Koa). */
  waiters: Pick<ClaimWaiters, 'afterWokenClaims'>
  errors: ErrorReplies
}

/**
 * The worker lane: the worker routes (dialect 003's claim, heartbeat, complete, fail, and the
 * batch and report routes) answered straight from Node's request event, without Koa, for the
 * shape every worker sends — `POST`, the path exactly as the route spells it, no query, a JSON
 * body of a declared length within the limit (`Content-Type: application/json` exactly). Those
 * requests come at the rate of jobs, and Koa's work per request (its context, its middleware
 * chain, its response) was a sixth of the host's CPU per job of a dialect-003 lifecycle
 * (docs/performance.md). Every other request, to these paths too, goes on to Koa, which serves
 * the same routes (dialect-worker.ts `workerRouter`).
 *
 * Nothing is answered differently: the lane runs the same steps as Koa's app, in the same order,
 * with the same code — the request guard (guard.ts), the body's reading and validation, the
 * route itself, the woken claims' turn before the answer (server.ts), the same headers, and any
 * error through the same {@link ErrorReplies}.
 */
export function workerLane(routes: readonly WorkerRoute[], deps: LaneDependencies): Lane {
  const byPath = new Map(routes.map((route) => [WORKER_PREFIX + route.path, route]))
  return (req, res) => {
    if (req.method !== 'POST') return false
    const route = byPath.get(req.url ?? '')
    if (route === undefined) return false
    const headers = req.headers
    const length = Number(headers['content-length'])
    if (headers['content-type'] !== 'application/json' || headers['transfer-encoding'] !== undefined || !(length > 0 && length <= deps.bodyLimitBytes)) {
      return false
    }
    serve(route, req, res, length, deps).catch((error: unknown) => {
      // Only a fault of the lane itself gets here (its answers are caught below): the connection goes.
      deps.errors(error, 'POST', req.url ?? '')
      res.destroy()
    })
    return true
  }
}

async function serve(route: WorkerRoute, req: IncomingMessage, res: ServerResponse, length: number, deps: LaneDependencies): Promise<void> {
  const path = WORKER_PREFIX + route.path
  // The first answer is the one sent: writeJson writes nothing more once the response has ended.
  try {
    const headers = req.headers
    const refusal = checkRequest(
      { path, host: headers.host || undefined, origin: headers.origin || undefined, authorization: headers.authorization || undefined },
      deps.policy,
    )
    if (refusal) throw new HttpError(refusal.code, refusal.detail)
    const input = validate(route.body, await readDeclaredJson(req, length))
    const settled = await route.run(input, { clientGone: () => clientGone(res), answerNow: (early) => writeJson(res, 200, early) })
    await deps.waiters.afterWokenClaims()
    writeJson(res, 200, settled)
  } catch (error) {
    // Logged as Koa's error middleware logs it, even when the answer has already gone.
    const reply = deps.errors(error, 'POST', path)
    writeJson(res, reply.status, reply.body, reply.headers)
  }
}
