import Router from '@koa/router'
import Koa from 'koa'
import { dirname } from 'node:path'
import type { ClaimWaiters } from '../workers/claim-waiters'
import type { ClockWaiters } from '../workers/clock-waiters'
import type { Engine } from '../engine'
import type { StorageReport } from '../retention/storage-report'
import type { WorkerDirectory } from '../workers/directory'
import { HttpError } from './statuses'
import { LogLimiter } from '../log-limiter'
import { dashboardMiddleware } from './dashboard'
import { errorMiddleware } from './errors'
import { EventStreams, eventsRouter, StreamTickets } from './events-stream'
import { checkRequest, type GuardPolicy } from './guard'
import { filesRouter } from './dialect-files'
import { pullRouter } from './dialect-pull'
import { queueRouter } from './dialect-queue'
import { workerRouter } from './dialect-worker'
import { schedulesRouter } from './schedules'
import { operationsRouter } from './operations'
import { routersMiddleware } from './routing'
import { systemRouter } from './system'

export interface HttpDependencies {
  engine: Engine
  waiters: ClaimWaiters
  clockWaiters: ClockWaiters
  directory: WorkerDirectory
  version: string
  policy: GuardPolicy
  bodyLimitBytes: number
  /** The database's size and the retention setting (GET /api/storage). */
  storage: () => StorageReport
  /** The built dashboard (out/renderer), served at `/`. */
  rendererDir: string
  log: (line: string) => void
}

/**
 * The HTTP app, given its dependencies: error mapping, the request guard (Host, Origin, token),
 * then one router per dialect under its own prefix. Routes translate; the engine decides.
 */
export interface HttpApp {
  app: Koa
  /** Ends the open event streams (they never end by themselves), so the server can close. */
  closeStreams(): void
}

export function createHttpApp(deps: HttpDependencies): HttpApp {
  const app = new Koa()
  const tickets = new StreamTickets()
  const streams = new EventStreams()
  const policy: GuardPolicy = {
    token: deps.policy.token,
    allowedHosts: deps.policy.allowedHosts,
    get port() {
      return deps.policy.port // known only once the server listens (port 0)
    },
    isValidTicket: (ticket) => tickets.isValid(ticket, Date.now()),
  }
  app.proxy = false
  app.silent = true // errors are logged by errorMiddleware, never printed with their stacks twice

  app.use((ctx, next) => {
    ctx.set('Cache-Control', 'no-store')
    ctx.set('X-Content-Type-Options', 'nosniff')
    return next()
  })
  app.use(errorMiddleware(deps.log, new LogLimiter(deps.log, Date.now), () => dirname(deps.engine.databaseFile)))
  app.use((ctx, next) => {
    const headers = ctx.req.headers
    const refusal = checkRequest(
      {
        path: ctx.path,
        host: headers.host || undefined,
        origin: headers.origin || undefined,
        authorization: headers.authorization || undefined,
        // (The query is parsed only when there is one: most requests have none.)
        ticket: ctx.querystring !== '' && typeof ctx.query.ticket === 'string' ? ctx.query.ticket : undefined,
      },
      policy,
    )
    if (refusal) throw new HttpError(refusal.code, refusal.detail)
    return next()
  })

  // A request that woke waiting claims (a submit, a completion that gave capacity back) is
  // answered after them: the worker that was waiting for work hears of it first.
  app.use(async (_ctx, next) => {
    await next()
    if (deps.waiters.takeWoken()) await new Promise((resolve) => setImmediate(resolve))
  })
  app.use(dashboardMiddleware(deps.rendererDir))
  const { engine, bodyLimitBytes: limit } = deps
  const routers: Router[] = [
    systemRouter(engine, deps.directory, deps.version, limit, deps.storage),
    pullRouter(engine, limit),
    queueRouter(engine, limit),
    workerRouter(engine, deps.waiters, deps.directory, limit),
    filesRouter(engine, deps.clockWaiters, limit),
    eventsRouter(engine, tickets, streams, limit),
    schedulesRouter(engine, limit),
    operationsRouter(engine, limit),
  ]
  // 405 with its `Allow` header, and 501; the error middleware gives them the API's error body.
  app.use(routersMiddleware(routers))
  return { app, closeStreams: () => streams.closeAll() }
}
