import type { Context, Middleware } from 'koa'
import type { ServerResponse } from 'node:http'
import { z } from 'zod'
import type { ZodOpenApiOperationObject, ZodOpenApiResponseObject } from 'zod-openapi'
import type { Dispatch } from '../dispatch/dispatch'
import type { BackupReport } from '../db/backup'
import type { IntegrityDepth, IntegrityReport } from '../db/integrity'
import type { ThreadRead } from '../db/read-thread'
import type { StorageMode } from '../db/storage-mode'
import type { ClockWaiters } from '../dispatch/clock-waiters'
import { type Engine, EngineError } from '../engine'
import type { StorageReport } from '../retention/storage-report'
import type { WorkerDirectory } from '../worker-roster/directory'
import { clientGone, earlyReply, FaultyJson, readJson } from './body'
import { validate } from './errors'
import { HttpError } from './http-error'
import { isLocalWorkerId, localWorkerIdRefused } from '../../src-shared/local-worker-id'
import type { EventStreams, StreamTickets } from './events-stream'
import type { RedisHealth } from './views/system'

/** What the routes run with: the host's parts, given once to the carriers (Koa's router and the lane). */
export interface RouteDeps {
  engine: Engine
  /** Runs a read that may walk the whole jobs table: on the host's read thread (db/read-thread.ts). */
  readJobs: (read: ThreadRead) => Promise<unknown[]>
  dispatch: Dispatch
  clockWaiters: ClockWaiters
  directory: WorkerDirectory
  version: string
  /** The database's size and the retention setting (GET /api/storage). */
  storage: () => StorageReport
  /** Checks the database file's integrity on a thread of the host (GET /api/storage/integrity). */
  checkIntegrity: (depth: IntegrityDepth) => Promise<IntegrityReport>
  /** Copies the database into the data dir's backups folder while the host serves (POST /api/storage/backup). */
  backup: () => Promise<BackupReport>
  /** Whether the host takes writes (GET /api/health). */
  storageMode: () => StorageMode
  /** Redis as GET /api/health and the event stream report it, when it carries the queues. */
  redis?: RedisReport
  tickets: StreamTickets
  streams: EventStreams
  /** The OpenAPI document (GET /api/openapi.json), built on first use. */
  openApi: () => unknown
  /** Whether a request's `Authorization` is a worker token (guard.ts isWorkerCaller), not the host's. */
  isWorkerCaller: (authorization: string | undefined) => boolean
}

/** What the relay says of Redis (redis/relay.ts): its health now, and a listener told when it changes. */
export interface RedisReport {
  health(): RedisHealth
  onHealth(listener: (health: RedisHealth) => void): () => void
}

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'

/** A route's validated input: its path parameters, its query and its JSON body. */
export interface RouteInput<Params, Query, Body> {
  params: Params
  query: Query
  body: Body
}

/** How a route's answer leaves, given by whichever carrier runs it: the lane, or Koa's router. */
export interface RouteCall<Answer> {
  /** A signal that aborts when the client hangs up (asked for only by a call that may wait). */
  clientGone(): AbortSignal
  /** Answers now, before the route's promise settles: a waiting claim, from the commit that grants it. */
  answerNow(answer: Answer): void
  /** A request header by its lower-case name; undefined when not sent. */
  header(name: string): string | undefined
  /** Sets a header of the answer. */
  setHeader(name: string, value: string): void
}

/** An answer other than the route's own (`answer` with `status`): another status, another schema, or no body (204). */
export class Reply {
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {}
}

/** A {@link Reply} whose body is typed by the schema its OpenAPI entry names, as the route's own answer is. */
export const replyWith = <S extends z.ZodType>(_schema: S, body: z.output<S>, status: number): Reply => new Reply(status, body)

/** A success the document lists beside the route's own answer (a 204), or how the route's own answer is described. */
export interface AnswerDoc {
  description: string
  schema?: z.ZodType
  mediaType?: string
  headers?: z.ZodObject
}

/** A route's own error status in the document: the codes (plain `Error`), the codes and their schema, or the whole response. */
export type RouteError = string | [codes: string, schema: z.ZodType] | ZodOpenApiResponseObject

type Output<S> = S extends z.ZodType ? z.output<S> : undefined

interface RouteBase<Params, Query, Body, Answer extends z.ZodType> {
  method: Method
  /** Under its API's prefix, with `:name` for each path parameter (each one a field of `params`). */
  path: string
  /** The operationId: a client's method name. */
  id: string
  summary: string
  description?: string
  /** The path parameters' schema; a failure is 400 naming the parameter. */
  params?: Params
  /**
   * The query's schema (strict: a key it does not name is 400 naming it); a parameter given
   * twice is 400. A route without one takes no query: any key is 400 naming it.
   */
  query?: Query
  /** Request headers the route reads (documentation only: the route reads them itself). */
  header?: z.ZodObject
  /** The JSON body's schema (POST/PUT/PATCH read a JSON body with or without one). */
  body?: Body
  /** The answer's schema: `run` returns its value, or a {@link Reply} for another one. */
  answer: Answer
  /** 200 unless said. */
  status?: 200 | 201
  /** How the answer is described in the document: `OK`, JSON, unless said. */
  answerDoc?: AnswerDoc
  /** Other success answers by status (a 204). */
  otherAnswers?: Record<number, AnswerDoc>
  /** The route's own error statuses; 400/401/403/413/415/500/503/507 are added as they apply. */
  errors?: Record<number, RouteError>
  /** Answered without the token. */
  public?: boolean
  security?: ZodOpenApiOperationObject['security']
  /**
   * Served by the lane too (lane.ts): a POST that comes at the rate of jobs, without path
   * parameters or a query.
   */
  lane?: boolean
  /** Turns an error the route threw into the one answered (the worker API's 409s carry `ok: false`). */
  refusal?: (error: unknown) => unknown
  /**
   * For a body of items each answered on its own (the worker's batch): the body the route runs
   * with when the JSON read fails `body` as a whole, or holds a value JSON cannot carry
   * (body.ts FaultyJson) — the items that fail their own schema left out, each to be refused
   * in its own slot of the answer — or the refusal of the whole request, thrown. A body that
   * passes `body` is taken as it is, without it.
   */
  itemwise?: (json: unknown) => Output<Body>
}

type In<Params, Query, Body> = RouteInput<Output<Params>, Output<Query>, Output<Body>>
/** The answer's type, never inferred from `run` (the schema says it; `run` is held to it). */
type Out<Answer extends z.ZodType> = z.output<Answer>

/**
 * One HTTP route as data: what the Koa router registers, what the lane serves, and what the
 * OpenAPI document says, all from this one record. A `grouped` route runs in the engine's commit
 * group (`engine.run`): its `run` is one synchronous step of verbs, and it is answered once the
 * group is durable. Any other route reads, waits, or groups its own steps (a bulk action runs
 * step by step; the worker's claim is granted by dispatch).
 */
export type Route<Params = unknown, Query = unknown, Body = unknown, Answer extends z.ZodType = z.ZodType> = RouteBase<Params, Query, Body, Answer> &
  (
    | {
        /** Runs in the commit group: `run` is then one synchronous step of verbs (a promise would settle after the commit). */
        grouped: boolean
        run: RouteRun<Params, Query, Body, Answer>
        koa?: undefined
      }
    | {
        grouped: false
        run?: undefined
        /**
         * A route whose answer is not one JSON body (the event stream) gets Koa's context as it
         * is, with its query validated as any route's. Never on the lane.
         */
        koa(ctx: Context, deps: RouteDeps, query: Output<Query>): void
      }
  )

/** A route that answers one JSON body: what the lane can serve. */
export type RunRoute = AnyRoute & { run: RouteRun<z.ZodObject | undefined, z.ZodObject | undefined, z.ZodType | undefined, z.ZodType> }

type RouteRun<Params, Query, Body, Answer extends z.ZodType> = (
  input: In<NoInfer<Params>, NoInfer<Query>, NoInfer<Body>>,
  deps: RouteDeps,
  call: RouteCall<Out<Answer>>,
) => Out<Answer> | Reply | Promise<Out<Answer> | Reply>

/** A route with its types inferred from its schemas, held in a list as any route. */
export function route<
  Params extends z.ZodObject | undefined = undefined,
  Query extends z.ZodObject | undefined = undefined,
  Body extends z.ZodType | undefined = undefined,
  Answer extends z.ZodType = z.ZodType,
>(definition: Route<Params, Query, Body, Answer>): AnyRoute {
  return definition as unknown as AnyRoute
}

/** A route of any schemas: what the carriers and the document read. */
export type AnyRoute = Route<z.ZodObject | undefined, z.ZodObject | undefined, z.ZodType | undefined, z.ZodType>

/** One API: its tag in the document, the prefix its routes share, and its routes in the order they are matched. */
export interface Api {
  tag: string
  /** The tag's description in the document. */
  description: string
  prefix: string
  routes: readonly AnyRoute[]
}

/** A route's full path, Koa's spelling (`:name`). */
export const fullPath = (api: Pick<Api, 'prefix'>, route: Pick<AnyRoute, 'path'>): string => api.prefix + route.path

/** The path as OpenAPI spells it (`{name}`). */
export const openApiPath = (path: string): string => path.replace(/:([A-Za-z_]+)/g, '{$1}')

const NONE = Object.freeze({}) as never

/** The methods that read a JSON body. */
export const readsBody = (method: Method): boolean => method === 'POST' || method === 'PUT' || method === 'PATCH'

/** A query string as a plain object; a repeated parameter is 400 rather than silently an array. */
function plainQuery(raw: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [key, value] of Object.entries(raw)) {
    if (Array.isArray(value)) throw new HttpError('invalid_request', `${key}: given more than once`)
    if (value !== undefined) out[key] = value
  }
  return out
}

/** Whether percent-encoded text decodes to well-formed Unicode: UTF-8 bytes, no surrogate's (`%ED%A0%80`), no stray `%`. */
function decodes(text: string): boolean {
  try {
    decodeURIComponent(text)
    return true
  } catch {
    return false
  }
}

/**
 * A path parameter whose percent-encoding is not UTF-8 (`%FF`, a lone surrogate's `%ED%A0%80`)
 * is 400 naming it. The router would pass its text on as it came, undecoded: `%ED%A0%80` would
 * pause a queue of that literal name, where a client meant a name no UTF-8 can spell. Checked
 * only for a path with a `%`, of a route with parameters (never the lane's). `segments` is the
 * route's path, split at `/`: the request's path ends with as many segments, a parameter's in
 * the same place.
 */
function checkPathEncoding(path: string, segments: readonly string[]): void {
  if (!path.includes('%')) return
  const given = path.split('/')
  const offset = given.length - segments.length
  for (let i = 0; i < segments.length; i++) {
    const name = segments[i]!
    if (name.startsWith(':') && !decodes(given[offset + i] ?? '')) {
      throw new HttpError('invalid_request', `${name.slice(1)}: the path segment is not percent-encoded UTF-8`)
    }
  }
}

/**
 * A query parameter whose percent-encoding is not UTF-8 is 400 naming it: Node's query parser
 * would put U+FFFD in place of the bytes, and a filter would look for a value nobody sent.
 */
function checkQueryEncoding(querystring: string): void {
  if (!querystring.includes('%')) return
  for (const pair of querystring.split('&')) {
    if (decodes(pair.replace(/\+/g, ' '))) continue
    const key = pair.split('=')[0]!
    throw new HttpError('invalid_request', `${decodes(key) ? decodeURIComponent(key) : '(query)'}: the parameter is not percent-encoded UTF-8`)
  }
}

/** The query of a route that declares none: any key is refused as one a declared query does not name. */
const NO_QUERY = z.strictObject({})

/**
 * A request's query held to its route's schema: 400 naming a parameter given twice, one not
 * percent-encoded UTF-8, or a key the route does not declare — on a route that declares no
 * query too, which would otherwise ignore it (a `?dry_run=true` on a bulk cancel that then
 * cancels). A request without a query string (nearly all) costs one comparison on such a route.
 */
function routeQuery(schema: z.ZodObject | undefined, ctx: Context): unknown {
  if (ctx.querystring === '') return schema ? validate(schema, {}, '(query)') : NONE
  checkQueryEncoding(ctx.querystring)
  return validate(schema ?? NO_QUERY, plainQuery(ctx.query), '(query)')
}

/**
 * Runs a route's `run` as its record says — in the commit group or not — and turns what it
 * throws through its `refusal`. Returns the answer itself when it is ready at once (a read), so
 * that a read takes no turn of promises.
 */
export function invoke(
  route: RunRoute,
  input: RouteInput<unknown, unknown, unknown>,
  deps: RouteDeps,
  call: RouteCall<unknown>,
): unknown {
  const run = route.run as (input: RouteInput<unknown, unknown, unknown>, deps: RouteDeps, call: RouteCall<unknown>) => unknown
  // Whatever the dialect, a body naming its worker cannot name one of the host's own (local-worker-id.ts).
  const named = (input.body as { worker_id?: unknown } | null | undefined)?.worker_id
  const reserved = typeof named === 'string' && isLocalWorkerId(named)
  if (route.refusal === undefined) {
    if (reserved) throw new HttpError('worker_mismatch', localWorkerIdRefused(named))
    return route.grouped ? deps.engine.run(() => run(input, deps, call)) : run(input, deps, call)
  }
  const refusal = route.refusal
  try {
    // Refused through the route's refusal, as the route's own 403s are (a worker report's carries ok: false).
    if (reserved) throw new EngineError('worker_mismatch', localWorkerIdRefused(named))
    const out = route.grouped ? deps.engine.run(() => run(input, deps, call)) : run(input, deps, call)
    return out instanceof Promise ? out.catch((error: unknown) => Promise.reject(refusal(error))) : out
  } catch (error) {
    throw refusal(error)
  }
}

/** The Koa handler of one route: its input read and validated (body, then path, then query), then run and answered. */
export function koaHandler(route: AnyRoute, deps: RouteDeps, bodyLimit: number): Middleware {
  if (route.koa) {
    const koa = route.koa
    return (ctx) => koa(ctx, deps, routeQuery(route.query, ctx) as Parameters<typeof koa>[2])
  }
  const run = route as RunRoute
  const write = readsBody(route.method)
  const answer = (ctx: Context, input: RouteInput<unknown, unknown, unknown>): unknown => {
    const reply = earlyReply(ctx, route.answer, route.status)
    const call: RouteCall<unknown> = {
      clientGone: () => clientGone(ctx.res),
      answerNow: reply.now,
      header: (name) => ctx.get(name) || undefined,
      setHeader: (name, value) => ctx.set(name, value),
    }
    const settle = (out: unknown) => {
      if (!(out instanceof Reply)) return reply.settled(() => out)
      ctx.status = out.status
      if (out.body !== undefined) ctx.body = out.body
    }
    const out = invoke(run, input, deps, call)
    return out instanceof Promise ? out.then(settle) : settle(out)
  }
  const segments = route.path.split('/')
  const rest = (ctx: Context, body: unknown) => {
    if (route.params) checkPathEncoding(ctx.path, segments)
    const params = route.params ? validate(route.params, (ctx as unknown as { params: unknown }).params, '(path)') : NONE
    return answer(ctx, { params, query: routeQuery(route.query, ctx), body })
  }
  if (!write) return (ctx) => rest(ctx, undefined) as Promise<void> | undefined
  return async (ctx) => {
    await rest(ctx, await routeBody(run, () => readJson(ctx, bodyLimit)))
  }
}

/**
 * A route's body, read by `read` and held to the route's schema: 400 naming the failing fields,
 * or, for a route that answers its items each on its own, what its `itemwise` makes of it.
 */
export async function routeBody(route: RunRoute, read: () => unknown): Promise<unknown> {
  const { body, itemwise } = route
  if (itemwise === undefined) {
    const json = await read()
    return body ? validate(body, json) : json
  }
  let json: unknown
  try {
    json = await read()
  } catch (error) {
    if (error instanceof FaultyJson) return itemwise(error.value)
    throw error
  }
  try {
    return body ? validate(body, json) : json
  } catch (error) {
    if (error instanceof HttpError) return itemwise(json)
    throw error
  }
}

/** The answer of a lane route, written by the lane: {@link invoke}'s result, as `writeJson` takes it. */
export function laneAnswer(route: AnyRoute, out: unknown): { status: number; body: unknown } {
  return out instanceof Reply ? { status: out.status, body: out.body } : { status: route.status ?? 200, body: out }
}

export { NONE as NO_INPUT }
export type { ServerResponse }

/** The 404s the document lists, by the kind of thing a route names. */
export const NOT_FOUND = {
  job: 'job_not_found',
  lease: 'lease_not_found',
  blocker: 'blocker_not_found',
  schedule: 'schedule_not_found',
} as const

/** The 409s of a route that names a job lease by its id. */
export const LEASE_409 = 'lease_expired (it expired), lease_not_active (it was released), job_mismatch, illegal_transition, file_lease_lost'
