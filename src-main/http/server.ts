import type Router from '@koa/router'
import Koa from 'koa'
import { type IncomingMessage, type ServerResponse, STATUS_CODES } from 'node:http'
import type { Duplex } from 'node:stream'
import { dirname } from 'node:path'
import type { Dispatch } from '../dispatch/dispatch'
import type { IntegrityDepth, IntegrityReport } from '../db/integrity'
import type { ThreadRead } from '../db/read-thread'
import type { BackupReport } from '../db/backup'
import type { StorageMode } from '../db/storage-mode'
import type { ClockWaiters } from '../dispatch/clock-waiters'
import type { Engine } from '../engine'
import type { StorageReport } from '../retention/storage-report'
import type { WorkerDirectory } from '../worker-roster/directory'
import { HttpError } from './http-error'
import { statusOf } from '../../src-shared/error-codes'
import { LogLimiter } from '../../src-shared/log-limiter'
import { API_HEADERS, writeJson } from './body'
import { dashboardMiddleware } from './dashboard'
import { errorMiddleware, errorReplies } from './errors'
import { EventStreams, StreamTickets } from './events-stream'
import { checkRequest, type GuardPolicy, guardInput, isApiToken, isWorkerCaller } from './guard'
import { HTTP_APIS } from './apis'
import { createLane, type Lane } from './lane'
import { openApiDocument } from './openapi'
import type { RedisReport, RouteDeps } from './route'
import { routesMiddleware } from './routing'

export interface HttpDependencies {
  engine: Engine
  /** Runs a read that may walk the whole jobs table off the main thread (db/read-thread.ts); on the main connection when not given. */
  readJobs?: (read: ThreadRead) => Promise<unknown[]>
  dispatch: Dispatch
  clockWaiters: ClockWaiters
  directory: WorkerDirectory
  version: string
  policy: GuardPolicy
  bodyLimitBytes: number
  /** The database's size and the retention setting (GET /api/storage). */
  storage: () => StorageReport
  /** Checks the database file's integrity on a thread of the host (GET /api/storage/integrity). */
  checkIntegrity: (depth: IntegrityDepth) => Promise<IntegrityReport>
  /** Copies the database into the data dir's backups folder while the host serves (POST /api/storage/backup). */
  backup: () => Promise<BackupReport>
  /** Whether the host takes writes (GET /api/health); always does when not given. */
  storageMode?: () => StorageMode
  /** Tells a listener each time the host stops or starts taking writes; never, when not given. */
  onStorageMode?: (listener: (mode: StorageMode) => void) => () => void
  /** Redis as GET /api/health and the event stream report it, when it carries the queues. */
  redis?: RedisReport
  /** The built dashboard (out/renderer), served at `/`. */
  rendererDir: string
  log: (line: string) => void
}

/**
 * The HTTP app, given its dependencies: error mapping, the request guard (Host, Origin, token),
 * then the routes of every API (apis.ts), each one record (route.ts). Routes translate; the
 * engine decides. The common requests of the routes that come at the rate of jobs (the worker
 * routes, the one-job submit) take the lane instead (lane.ts): the same routes, guard and error
 * answers, without Koa's work per request.
 */
export interface HttpApp {
  app: Koa
  /**
   * The server's request listener: the lane (lane.ts) for the common requests of its routes,
   * Koa's app for every other request.
   */
  listener: (req: IncomingMessage, res: ServerResponse) => void
  /** The paths whose common requests the lane answers. */
  lanePaths: readonly string[]
  /** The lane itself, which the front (front.ts) hands the requests it reads. */
  lane: Lane
  /** Koa's router of every route (its public `stack` lists them). */
  router: Router
  /** Ends the open event streams (they never end by themselves), so the server can close. */
  closeStreams(): void
  /** Ends the event streams opened with a token that no longer opens the API (revoked). */
  endRevokedStreams(): void
  /** The server's `clientError` listener: see {@link answerClientError}. */
  clientError: typeof answerClientError
  /** The server's `connect` listener: a CONNECT is 501 (see {@link answerConnect}). */
  connect: typeof answerConnect
  /**
   * The server's `checkExpectation` listener: an `Expect` other than `100-continue` is 417
   * `expectation_failed` with `{detail, code}` (without it Node answers a bare 417), and the
   * connection closes.
   */
  checkExpectation: (req: IncomingMessage, res: ServerResponse) => void
  /**
   * The server's `checkContinue` listener, for a request with `Expect: 100-continue`, whose client
   * waits for `100 Continue` before it sends the body (curl asks so for a body over 1 MiB). One
   * that would be refused whatever its body — the guard's refusal (no token, a foreign Host or
   * Origin), or a declared body over the limit — is refused at once, without the `100`, and the
   * connection closes (the body, should it come anyway, is never read); any other gets its `100
   * Continue` and is served by `serve` (the server's request listeners).
   */
  checkContinue: (req: IncomingMessage, res: ServerResponse, serve: () => void) => void
}

/**
 * Answers a request Node's parser refused (a request line or headers over 16 KiB, a request
 * that took too long to arrive, anything that is not HTTP, a body cut short) in the API's
 * error shape, then lets the connection go. The socket is destroyed once the answer is written,
 * not only ended: a client that keeps sending (a slow-headers attack) would otherwise hold a
 * half-closed socket, and its file descriptor, for as long as it likes.
 *
 * The requests Node read whole before the refused bytes are being carried out: their answers
 * are written first, in order, and the refusal after them (or none, when the last of them closes
 * the connection: the bytes after a `Connection: close` are Node's to refuse). Answering at once
 * would tell a client "not valid HTTP" in place of the answer of a request that was carried out
 * (a job submitted), and destroy that answer. Node calls this again for each read that follows
 * the refused bytes; the first call answers.
 */
export function answerClientError(error: NodeJS.ErrnoException, socket: Duplex): void {
  if (refusing.has(socket)) return
  refusing.add(socket)
  const [code, detail] =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? (['headers_too_large', 'The request line or headers are too large'] as const)
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? (['request_timeout', 'The request took too long to arrive'] as const)
        : (['bad_request', 'The request is not valid HTTP'] as const)
  afterAnswers(socket, () => answerAndClose(socket, code, detail))
}

/** The path of a request-target, in origin form (`/api/…?…`) or absolute form (`http://host/api/…`), as the guard reads it. */
export function pathOf(target: string | undefined): string {
  const path = (target ?? '/').split('?')[0]!
  return path.startsWith('/') ? path : new URL(path, 'http://x').pathname
}

/** The sockets {@link answerClientError} is answering. */
const refusing = new WeakSet<Duplex>()

/**
 * Calls `then` once every answer Node's server owes on `socket` has been written or lost: the
 * one in flight is the socket's `_httpMessage` (Node's field; `socketOnError` reads it too), and
 * as each closes Node gives the socket the next one queued behind it.
 *
 * A request whose body has not all come (cut short by its client's hang-up, a broken chunk, too
 * slow to arrive) owes no answer: the refused bytes are its own, and it can never complete. Its
 * route, waiting for the body, would wait for good, and the connection (its file descriptor, and
 * a stop waiting for requests in flight) with it. It is refused at once instead (`then`); its
 * route's read of the body then fails, and nothing of it runs. Should its route have begun an
 * answer already, the connection is only destroyed: a refusal cannot follow half an answer.
 */
function afterAnswers(socket: Duplex, then: () => void): void {
  const inFlight = (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage
  if (inFlight == null) return then()
  if (!inFlight.req.complete && !inFlight.writableEnded) return inFlight.headersSent ? void socket.destroy() : then()
  inFlight.once('close', () => afterAnswers(socket, then))
}

/**
 * Answers a CONNECT request, which Node's server hands only to its `connect` listeners (never
 * to the request listener) and, with none, closes unanswered. Leasehold is no proxy: 501
 * `not_implemented`, as Koa's router answers any other method it does not know, and the
 * connection closes, since what a client sends after a CONNECT's head is a tunnel's bytes.
 * (The host registers it as the server's `connect` listener, as it does {@link answerClientError}.)
 */
export function answerConnect(req: IncomingMessage, socket: Duplex): void {
  answerAndClose(socket, 'not_implemented', `${req.method ?? 'CONNECT'} is not implemented`)
}

/** Writes `{detail, code}` with the code's status straight to the socket, then destroys it. */
function answerAndClose(socket: Duplex, code: 'headers_too_large' | 'request_timeout' | 'bad_request' | 'not_implemented', detail: string): void {
  if (!socket.writable) return void socket.destroy()
  const status = statusOf(code)
  const body = JSON.stringify({ detail, code })
  socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`, () =>
    socket.destroy(),
  )
}

export function createHttpApp(deps: HttpDependencies): HttpApp {
  const app = new Koa()
  const tickets = new StreamTickets()
  const logLimiter = new LogLimiter(deps.log, Date.now)
  const streams = new EventStreams(deps.engine, deps.redis, logLimiter, (token) => isApiToken(token, policy), deps.onStorageMode)
  const policy: GuardPolicy = {
    token: deps.policy.token,
    get allowedHosts() {
      return deps.policy.allowedHosts // the server's own address among them once it listens
    },
    get port() {
      return deps.policy.port // known only once the server listens (port 0)
    },
    isValidTicket: (ticket) => {
      const token = tickets.tokenOf(ticket, Date.now())
      return token !== null && isApiToken(token, policy)
    },
    isWorkerToken: deps.policy.isWorkerToken,
    isAdminToken: deps.policy.isAdminToken,
    isRevokedToken: deps.policy.isRevokedToken,
  }
  app.proxy = false
  app.silent = true // errors are logged by errorMiddleware, never printed with their stacks twice

  app.use((ctx, next) => {
    ctx.set(API_HEADERS)
    return next()
  })
  const errors = errorReplies(deps.log, logLimiter, () => dirname(deps.engine.databaseFile))
  app.use(errorMiddleware(errors))
  app.use((ctx, next) => {
    // (The query is parsed only when there is one: most requests have none.)
    const ticket = ctx.querystring !== '' && typeof ctx.query.ticket === 'string' ? ctx.query.ticket : undefined
    const refusal = checkRequest(guardInput(ctx.req, ctx.path, ticket), policy)
    if (refusal) throw new HttpError(refusal.code, refusal.detail)
    return next()
  })

  app.use(dashboardMiddleware(deps.rendererDir))
  const limit = deps.bodyLimitBytes
  let openApi: unknown
  const routeDeps: RouteDeps = {
    engine: deps.engine,
    readJobs: deps.readJobs ?? ((read) => Promise.resolve(deps.engine.readOnMain(read))),
    dispatch: deps.dispatch,
    clockWaiters: deps.clockWaiters,
    directory: deps.directory,
    version: deps.version,
    storage: deps.storage,
    checkIntegrity: deps.checkIntegrity,
    backup: deps.backup,
    storageMode: deps.storageMode ?? (() => ({ state: 'read_write', reason: null, detail: null })),
    redis: deps.redis,
    tickets,
    streams,
    openApi: () => (openApi ??= openApiDocument(deps.version)),
    isWorkerCaller: (authorization) => isWorkerCaller(authorization, policy),
  }
  // A route has one spelling: with a trailing slash it is no route (404), where the routers
  // would take `/jobs/` for `/jobs`. Not a redirect: a client would have to send a POST's body
  // again (307/308), and the API's clients spell their paths from its document.
  app.use((ctx, next) => (ctx.path.length > 1 && ctx.path.endsWith('/') ? undefined : next()))
  // 405 with its `Allow` header, and 501; the error middleware gives them the API's error body.
  const routes = routesMiddleware(HTTP_APIS, routeDeps, limit)
  app.use(routes)
  const koa = app.callback()
  const lane = createLane(HTTP_APIS, { routes: routeDeps, policy, bodyLimitBytes: limit, errors })
  return {
    app,
    listener: (req, res) => {
      if (!lane(req, res)) void koa(req, res)
    },
    lanePaths: lane.paths,
    lane,
    router: routes.router,
    closeStreams: () => streams.closeAll(),
    endRevokedStreams: () => streams.endRevoked(),
    clientError: answerClientError,
    connect: answerConnect,
    checkExpectation: (req, res) => refuseUnread(req, res, new HttpError('expectation_failed', `Expect: ${req.headers.expect} is not supported (only 100-continue)`)),
    checkContinue: (req, res, serve) => {
      const target = req.url ?? '/'
      const query = target.includes('?') ? target.slice(target.indexOf('?') + 1) : ''
      const tickets = new URLSearchParams(query).getAll('ticket')
      const refusal = checkRequest(guardInput(req, pathOf(target), tickets.length === 1 ? tickets[0] : undefined), policy)
      if (refusal) return refuseUnread(req, res, new HttpError(refusal.code, refusal.detail))
      if (Number(req.headers['content-length']) > limit) return refuseUnread(req, res, new HttpError('payload_too_large', `The body is larger than ${limit} bytes`))
      res.writeContinue()
      serve()
    },
  }

  /** Answers `error` to a request whose body is not read, and closes the connection after it. */
  function refuseUnread(req: IncomingMessage, res: ServerResponse, error: HttpError): void {
    const reply = errors(error, req.method ?? '', req.url ?? '')
    res.shouldKeepAlive = false
    writeJson(res, reply.status, reply.body, reply.headers)
  }
}
