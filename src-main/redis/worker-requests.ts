import { Redis } from 'ioredis'
import { IpcRequest, type IpcResponse } from '../../src-shared/ipc-protocol'
import { REVOKED_TOKEN_REFUSAL } from '../../src-shared/error-codes'
import { validate } from '../http/errors'
import { tokensMatch } from '../http/guard'
import { HttpError } from '../http/http-error'
import { LogLimiter } from '../../src-shared/log-limiter'
import { answerWorkerRequest, type IpcHostDeps } from '../pool/ipc-host'
import { isLocalWorkerId, localWorkerIdRefused } from '../../src-shared/local-worker-id'
import { actorNameFault } from '../../src-shared/worker-id'
import type { WorkerDirectory } from '../worker-roster/directory'
import type { RedisLeaseHold } from './lease-hold'
import type { PrefixClaim } from './prefix-claim'
import type { RedisRelay } from './relay'
import { ANSWER_MARGIN_MS, CONSUMER_GROUP, DISCONNECT_TIMEOUT_MS, entryField, isRedisRefusal, entryTimeMs, READER_NAME, reconnectOnMissingDatabase, redactedUrl, redisFaultWords, REPLY_CHANNEL, replyStream, requestStream } from '../../src-shared/redis-streams'
import { grantedLeaseIds, MAX_LONG_POLL_MS } from '../../src-shared/worker-exchange'

/**
 * Workers on other machines, over Redis only (`leasehold worker --redis`): the worker exchange
 * (src-shared/worker-exchange.ts, in the local workers' IPC envelope) carried over streams.
 * A worker XADDs each request to `<prefix>worker:requests`, with its id and its token; the host
 * reads that stream in group `leasehold`, checks the token as it checks an HTTP bearer token,
 * answers through the same entry point as the local workers' IPC (pool/ipc-host.ts, and so
 * `waiters.exchange`), XADDs the answer to the worker's own `<prefix>worker:<id>:replies` (or
 * `…:replies:<channel>`, when the request names one: a worker's driving thread reads its own), and
 * only then XACKs and deletes the request. A request read again (the host died before its XACK)
 * or sent twice is answered again, as its HTTP twin would be: reports name their attempt and
 * are idempotent. A claim its worker has given up on (older, by Redis's clock, than the worker
 * waits for its answer: requests sent while no host read the stream) is answered without its
 * claim: jobs granted to it would be leased to nobody, each losing an attempt when its lease
 * expired unused. For the same reason a request waits only while Redis lists the connection its
 * worker reads answers on (the request's `reader`, checked every {@link READER_CHECK_MS} while
 * requests wait): a worker that died ends its claim's wait, as a closed connection ends an HTTP one's.
 */

/** How often the host reads Redis's clock, against which a request's age is judged (by its entry id). */
const CLOCK_CHECK_MS = 10_000
/** How often, while requests wait, the host asks Redis which of their readers it still lists. */
export const READER_CHECK_MS = 1_000
/**
 * How long an answer's write (and any other command on the answering connection) waits for
 * Redis: an answer Redis has not taken by then (Redis paused, or a network that drops packets)
 * gives its jobs back to the queue, rather than leave them leased to a worker that has not heard of them.
 */
export const ANSWER_TIMEOUT_MS = 5_000
/** How long a stop waits for the answers in progress: one whose Redis does not answer is left, its jobs' leases to expire. */
const STOP_GRACE_MS = 2_000

/**
 * The request without its claim when its worker no longer waits for the answer: older than the
 * claim's wait (as the worker caps it) and the worker's margin. Its reports still count.
 */
export function withoutStaleClaim(request: IpcRequest, ageMs: number): { request: IpcRequest; stale: boolean } {
  const claimWaitMs = claimWaitOf(request)
  if (claimWaitMs === null || ageMs <= claimWaitMs + ANSWER_MARGIN_MS) return { request, stale: false }
  return { request: withoutClaim(request), stale: true }
}

/** The request without its claim (an exchange's reports alone); any other request as it is. */
function withoutClaim(request: IpcRequest): IpcRequest {
  if (claimWaitOf(request) === null) return request
  const { claim: _claim, ...rest } = request.params as { claim?: unknown }
  return { ...request, params: rest }
}

/** How long a request's claim may wait for work, as the worker caps it; null for a request without a claim. */
function claimWaitOf(request: IpcRequest): number | null {
  if (request.method !== 'exchange' || typeof request.params !== 'object' || request.params === null) return null
  const { claim } = request.params as { claim?: { max_wait_ms?: unknown } }
  if (typeof claim !== 'object' || claim === null) return null
  return Math.min(typeof claim.max_wait_ms === 'number' ? claim.max_wait_ms : 0, MAX_LONG_POLL_MS)
}

/** Whether answering the request may wait: a claim that waits for work, or a wait for a file's retry. */
const mayWait = (request: IpcRequest): boolean => request.method === 'waitFileRetry' || (claimWaitOf(request) ?? 0) > 0

type RequestRefusal = NonNullable<IpcResponse['error']>
const UNAUTHORIZED: RequestRefusal = { status: 401, code: 'unauthorized', detail: 'The token is missing or wrong' }
/** A revoked token is one its holder is to stop using, not one to look for a typo in: said so, as over HTTP. */
const REVOKED: RequestRefusal = { status: 401, code: 'unauthorized', detail: REVOKED_TOKEN_REFUSAL }
const tooLarge = (limit: number): RequestRefusal => ({ status: 413, code: 'payload_too_large', detail: `The body is larger than ${limit} bytes` })

/** How every worker's body opens (JSON.stringify of `{type, id, method, params}`), up to its id. */
const REQUEST_OPENING = /^\{"type":"request","id":(-?\d{1,15})[,}]/

/**
 * The id of the request in a worker's entry, read without parsing its body: the entry's `id`
 * field, or, from a worker that sends none, the body's opening; null when neither names one.
 */
export function requestIdOf(idField: string | undefined, body: string): number | null {
  const named = idField ?? REQUEST_OPENING.exec(body.slice(0, 64))?.[1]
  return named !== undefined && /^-?\d{1,15}$/.test(named) ? Number(named) : null
}

/** The request in `body`, or the refusal that names what is wrong with it (400 `invalid_request`, as over HTTP). */
function parsedRequest(body: string): IpcRequest | RequestRefusal {
  const invalid = (detail: string): RequestRefusal => ({ status: 400, code: 'invalid_request', detail })
  let json: unknown
  try {
    json = JSON.parse(body)
  } catch (error) {
    return invalid(`(body): not JSON (${(error as Error).message})`)
  }
  try {
    return validate(IpcRequest, json)
  } catch (error) {
    if (error instanceof HttpError) return invalid(error.detail)
    throw error
  }
}

/** Answers a worker's reply stream keeps at most (MAXLEN ~): a worker reads each as it comes. */
const REPLIES_KEPT = 1_000
const READ_BLOCK_MS = 1_000
const READ_COUNT = 100
/** How soon a read of the request stream that failed is tried again. */
const READ_RETRY_MS = 500

/**
 * `promise`, or a rejection as soon as `signal` aborts. A command queued while Redis is away
 * waits for the reconnect; once the client is disconnected in the middle of one (ioredis drops
 * its reconnect timer) it never settles, and a stop must not wait for it.
 */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason)
  return new Promise<T>((resolve, reject) => {
    const aborted = () => reject(signal.reason)
    signal.addEventListener('abort', aborted, { once: true })
    promise.then(
      (value) => {
        signal.removeEventListener('abort', aborted)
        resolve(value)
      },
      (error: unknown) => {
        signal.removeEventListener('abort', aborted)
        reject(error)
      },
    )
  })
}

/** How the wait for the requests that waited in the stream at start ended ({@link RedisWorkerRequests.caughtUp}). */
export type CatchUp = 'answered' | 'redis away' | 'refused' | 'limit' | 'stopped'

export interface RedisWorkerRequestsOptions {
  url: string
  prefix: string
  deps: IpcHostDeps
  directory: WorkerDirectory
  /** Records each remote worker heard from, before it can hold a lease: its leases are spared while Redis is away (redis/lease-hold.ts). */
  leaseHold: Pick<RedisLeaseHold, 'heard'>
  /** What a request's token opens, as HTTP checks it: everything (the host's), a worker's routes (a worker token), or nothing (null). */
  scopeOf: (token: string) => 'host' | 'worker' | null
  /** Whether a token that opens nothing is a scoped token that was revoked (`leasehold token revoke`): refused, saying so. */
  isRevokedToken: (token: string) => boolean
  /** The largest request body the host takes (`--body-limit`), as over HTTP: a larger one is refused 413. */
  bodyLimitBytes: number
  /** The host's claim on its prefix (the relay's): requests are read only while it holds it. */
  claim: PrefixClaim
  /**
   * Whether Redis answers, as the relay judges it (redis/answering.ts), and word when that changes:
   * while it does not, no claim waits and none is granted jobs (an answer could not reach its worker).
   */
  redisHealth: Pick<RedisRelay, 'connected' | 'onHealth' | 'refusedOn'>
  log: (line: string) => void
}

export class RedisWorkerRequests {
  /** Blocking reads need a connection of their own. */
  private readonly reader: Redis
  private readonly writer: Redis
  private readonly stopping = new AbortController()
  private readonly limiter: LogLimiter
  private loop: Promise<void> | null = null
  private readonly inFlight = new Set<Promise<void>>()
  /** Requests answered and not yet acknowledged: acknowledged together, once a tick. */
  private answered: string[] = []
  private acknowledging: Promise<void> | null = null
  /** Redis's clock less this process's (ms), read every {@link CLOCK_CHECK_MS}; null until first read. */
  private redisClockOffsetMs: number | null = null
  private clockCheckedAt = -Infinity
  /** The requests that may wait: each one's way to end its wait, and the reader its worker named (null: none, or not checked). */
  private readonly readers = new Map<AbortController, string | null>()
  private readerTimer: NodeJS.Timeout | null = null
  private checkingReaders = false
  /** False once Redis refused `CLIENT LIST` (an ACL user without it): requests then wait out their time. */
  private readerChecks = true
  private readonly unsubscribeHealth: () => void
  /**
   * True until the loop has read the requests that waited in the stream when it began (those sent
   * while no host read it): see {@link caughtUp}.
   */
  private catchingUp = true
  /** Redis's clock (ms) when the loop began: requests stored from then on are no longer the backlog. */
  private catchUpTo: number | null = null
  /** The answers to the requests that waited, until they are all answered. */
  private backlog: Promise<void>[] = []
  private settleCatchUp!: (caughtUp: CatchUp) => void
  private readonly catchUp = new Promise<CatchUp>((resolve) => (this.settleCatchUp = resolve))

  constructor(private readonly options: RedisWorkerRequestsOptions) {
    const redisOptions = { lazyConnect: true, maxRetriesPerRequest: null, retryStrategy: (times: number) => Math.min(100 * times, 2_000), disconnectTimeout: DISCONNECT_TIMEOUT_MS }
    this.reader = new Redis(options.url, redisOptions)
    // Answers that finish in the same tick go to Redis in one write (ioredis' auto-pipelining).
    this.writer = new Redis(options.url, { ...redisOptions, enableOfflineQueue: false, maxRetriesPerRequest: 1, enableAutoPipelining: true, commandTimeout: ANSWER_TIMEOUT_MS })
    this.limiter = new LogLimiter(options.log, () => Date.now())
    const onError = (error: Error) => this.limiter.line('redis workers', `leasehold: Redis at ${redactedUrl(options.url)} (remote workers): ${redisFaultWords(error)}`)
    this.reader.on('error', onError)
    this.writer.on('error', onError)
    reconnectOnMissingDatabase(this.reader)
    reconnectOnMissingDatabase(this.writer)
    // No answer can go out while the writer's connection is down, or while Redis does not answer
    // on an open one (paused, or a network that drops packets): the requests that wait end now,
    // granted nothing, rather than be granted a job their worker cannot hear of.
    this.writer.on('close', () => this.endWaits(new Error('Redis is away')))
    this.unsubscribeHealth = options.redisHealth.onHealth((health) => {
      if (!health.connected) this.endWaits(new Error('Redis does not answer'))
      // The leases of remote workers are spared from here (redis/lease-hold.ts): nothing to wait for.
      if (!health.connected) this.settleCatchUp('redis away')
    })
  }

  /**
   * Whether the requests that waited in the stream when the host started (heartbeats, completions,
   * failures sent while no host read it) are answered: the host's first reaper pass waits for this,
   * at most `limitMs`, so that a lease whose worker was heard by Redis in time is not expired
   * because the host read it late (each is judged at the moment Redis stored it: {@link respond}).
   * `redis away` at once while Redis does not answer (those leases are spared until it does: a
   * host that starts then reads them after it answers again), or once it stops answering
   * meanwhile; `refused` when Redis refuses the reading of the stream (a key of another type, an
   * ACL), which no wait mends; `limit` when `limitMs` runs out first.
   */
  async caughtUp(limitMs: number): Promise<CatchUp> {
    if (!this.options.redisHealth.connected) return 'redis away'
    let timer: NodeJS.Timeout | undefined
    const limit = new Promise<CatchUp>((resolve) => (timer = setTimeout(() => resolve('limit'), limitMs)))
    try {
      return await Promise.race([this.catchUp, limit])
    } finally {
      clearTimeout(timer)
    }
  }

  /** The loop has read past the requests that waited: caught up once each is answered. */
  private endCatchUp(): void {
    this.catchingUp = false
    void Promise.allSettled(this.backlog).then(() => this.settleCatchUp('answered'))
    this.backlog = []
  }

  private endWaits(reason: Error): void {
    for (const gone of this.readers.keys()) gone.abort(reason)
  }

  start(): void {
    this.writer.connect().catch(() => {})
    this.reader.connect().catch(() => {})
    this.loop = this.read()
  }

  /**
   * Stops reading, ends every wait, and waits at most {@link STOP_GRACE_MS} for the answers in
   * progress, and not at all while Redis does not answer: an answer left is unacknowledged, and
   * its request read again by the next host.
   */
  async stop(): Promise<void> {
    this.stopping.abort()
    this.settleCatchUp('stopped')
    this.unsubscribeHealth()
    if (this.readerTimer) clearInterval(this.readerTimer)
    this.endWaits(this.stopping.signal.reason as Error)
    this.reader.disconnect()
    let grace: NodeJS.Timeout | undefined
    const graceOver = new Promise((resolve) => (grace = setTimeout(resolve, STOP_GRACE_MS)))
    const answers = this.options.redisHealth.connected ? [...this.inFlight] : []
    await Promise.race([Promise.allSettled([this.loop, ...answers]), graceOver])
    clearTimeout(grace)
    this.writer.disconnect()
  }

  private async read(): Promise<void> {
    const stream = requestStream(this.options.prefix)
    // First what this group delivered and never acknowledged (the host stopped mid-answer), page
    // after page, then new requests ('>') once that list is read to its end.
    let pending = true
    let from = '0'
    // The group is made once, and again after any failure (Redis may have restarted empty, or
    // lost the stream): not before every read, which would cost each read a round trip more.
    let groupMade = false
    const { signal } = this.stopping
    while (!signal.aborted) {
      try {
        // Another host on the prefix would read the same group as the same consumer: none is read until the prefix is this host's.
        await this.options.claim.whenHeld(signal)
        if (!groupMade) {
          await untilAborted(this.reader.xgroup('CREATE', stream, CONSUMER_GROUP, '0', 'MKSTREAM'), signal).catch((error: Error) => {
            if (!/BUSYGROUP/.test(error.message)) throw error
          })
          groupMade = true
        }
        if (Date.now() - this.clockCheckedAt >= CLOCK_CHECK_MS) {
          const [seconds, micros] = (await untilAborted(this.reader.time(), signal)) as [string | number, string | number]
          this.redisClockOffsetMs = Number(seconds) * 1000 + Number(micros) / 1000 - Date.now()
          this.clockCheckedAt = Date.now()
          this.catchUpTo ??= Date.now() + this.redisClockOffsetMs
        }
        // The backlog is read without blocking: a read that finds nothing new ends it at once.
        const readingNew = !pending
        const read = this.catchingUp
          ? this.reader.xreadgroup('GROUP', CONSUMER_GROUP, 'host', 'COUNT', READ_COUNT, 'STREAMS', stream, from)
          : this.reader.xreadgroup('GROUP', CONSUMER_GROUP, 'host', 'COUNT', READ_COUNT, 'BLOCK', READ_BLOCK_MS, 'STREAMS', stream, from)
        const answer = (await untilAborted(read, signal)) as [string, [string, string[]][]][] | null
        const entries = answer?.[0]?.[1] ?? []
        this.options.redisHealth.refusedOn(stream, null)
        if (pending && entries.length === 0) {
          pending = false
          from = '>'
        }
        for (const [id, fields] of entries) {
          if (pending && fields === null) continue // pending, but trimmed from the stream: nothing to answer
          const done = this.answer(stream, id, fields ?? []).finally(() => this.inFlight.delete(done))
          this.inFlight.add(done)
          if (this.catchingUp) this.backlog.push(done)
        }
        if (pending && entries.length > 0) from = entries[entries.length - 1]![0]
        // Past the backlog: nothing new is waiting, or what is read was stored after the loop began.
        const last = entries[entries.length - 1]?.[0]
        if (this.catchingUp && readingNew && (last === undefined || entryTimeMs(last) >= this.catchUpTo!)) this.endCatchUp()
      } catch (error) {
        if (signal.aborted) return
        // Redis may have restarted: read what is pending again
        pending = true
        from = '0'
        groupMade = false
        const message = (error as Error).message
        // The stream was deleted under a blocked read (Redis ends it so): nothing failed, and what
        // comes next (the group made anew, or the refusal of a key put in its place) is read at once.
        if (/^UNBLOCKED/.test(message)) continue
        // Redis's own refusal (a key of another type, out of memory), not its absence: health says so, with the key.
        if (isRedisRefusal(message) && !/^NOGROUP/.test(message)) {
          this.options.redisHealth.refusedOn(stream, `${message} (key ${stream})`)
          // Nothing there can be read until the key is mended: the start does not wait for it.
          this.settleCatchUp('refused')
        }
        this.limiter.line('redis workers read', `leasehold: reading remote workers' requests from ${stream} failed (${redisFaultWords(message)}); retrying every ${READ_RETRY_MS / 1000} s`)
        await new Promise((resolve) => setTimeout(resolve, READ_RETRY_MS))
      }
    }
  }

  /** One request: checked, answered on the worker's reply stream, then acknowledged. */
  private async answer(stream: string, entryId: string, fields: string[]): Promise<void> {
    const field = (name: string) => entryField(fields, name)
    const workerId = field('worker_id')
    // A channel the worker names, if well formed, else its own reply stream.
    const channel = REPLY_CHANNEL.test(field('channel') ?? '') ? field('channel') : undefined
    const response = workerId ? await this.respond(workerId, entryId, field) : null
    const replies = workerId ? replyStream(this.options.prefix, workerId, channel) : ''
    try {
      if (response && workerId) await this.writer.xadd(replies, 'MAXLEN', '~', REPLIES_KEPT, '*', 'body', JSON.stringify(response))
    } catch (error) {
      // Unanswered and unacknowledged: read again from the pending list after a reconnect. The
      // jobs it granted go back to the queue now, as those of a claim whose worker went before it
      // heard of them: not held by a worker that cannot know of them until their leases expire.
      // (An answer Redis takes after its write timed out is late to its worker, which gives it back too.)
      const leaseIds = grantedLeaseIds(response?.result)
      const given = leaseIds.length > 0 ? `; the ${leaseIds.length} job(s) it granted go back to the queue, losing no attempt` : ''
      const message = (error as Error).message
      // A key of another type where the worker's answers go (the prefix is this host's, and the key holds
      // nothing but answers): deleted, so that the worker's next request is answered there.
      const repaired = /^WRONGTYPE/.test(message) && (await this.writer.del(replies).then(() => true, () => false))
      const repair = repaired ? `; ${replies} was no stream: the host deleted it, and answers there from the worker's next request on` : ''
      this.limiter.line(`redis workers answer ${replies}`, `leasehold: answering remote worker ${workerId} on ${replies} failed (${redisFaultWords(message)})${repair}${given}`)
      if (leaseIds.length > 0 && workerId) await this.options.deps.engine.run(() => this.options.deps.engine.handBackLeases(workerId, leaseIds)).catch(() => {})
      return
    }
    this.answered.push(entryId)
    await (this.acknowledging ??= this.acknowledge(stream))
  }

  /** The answer to worker `workerId`'s request; null when it cannot be answered (no request, or no id, can be read from it). */
  private async respond(workerId: string, entryId: string, field: (name: string) => string | undefined): Promise<IpcResponse | null> {
    const body = field('body') ?? ''
    const token = field('token') ?? ''
    const scope = this.options.scopeOf(token)
    // Refused before the body is parsed (a parse costs as much as the body is large), under the id
    // the entry names: a forged exchange changes nothing, and a body larger than --body-limit is
    // refused as the worker API refuses it over HTTP (the worker sends its reports again smaller,
    // or fails a result too large on its own).
    const fault = actorNameFault(workerId)
    const refusal =
      scope === null
        ? this.options.isRevokedToken(token)
          ? REVOKED
          : UNAUTHORIZED
        : fault !== null
          ? { status: 400, code: 'invalid_request', detail: `worker_id: ${fault}` }
          : isLocalWorkerId(workerId)
            ? { status: 403, code: 'worker_mismatch', detail: localWorkerIdRefused(workerId) }
            : Buffer.byteLength(body) > this.options.bodyLimitBytes
              ? tooLarge(this.options.bodyLimitBytes)
              : null
    // A body that is no request (not JSON, an unknown method) is refused under the id the entry
    // names, so that its worker stops with the reason, as over HTTP, rather than ask for ever.
    const request = refusal ?? parsedRequest(body)
    if (!('type' in request)) {
      const id = requestIdOf(field('id'), body)
      return id === null ? null : { type: 'response', id, error: request }
    }
    const ageMs = this.redisClockOffsetMs === null ? 0 : Date.now() + this.redisClockOffsetMs - entryTimeMs(entryId)
    // A report is in time if Redis stored it before its lease's expiry, however late the host
    // reads it (one that waited while the host was stopped): judged at that moment, by the engine's clock.
    const heardAt = this.options.deps.engine.now() - Math.max(0, ageMs)
    const checked = withoutStaleClaim(request, ageMs)
    if (checked.stale) {
      this.limiter.line('redis stale claims', `leasehold: claims sent by remote workers while no host read their stream (${workerId}'s, ${Math.round(ageMs / 1000)} s old) are answered without jobs: their workers no longer wait for them`)
    }
    // Read just as Redis stopped answering (or before the relay has heard from it): a claim is
    // answered without jobs, which could not reach its worker, and its worker asks again. So is
    // one that waited for the host to start: its reports count before the first reaper pass, and
    // no job is granted before the host has expired what came due and started its timers.
    if (!this.options.redisHealth.connected || this.catchingUp) checked.request = withoutClaim(checked.request)
    const reader = field('reader')
    const watch = mayWait(checked.request) ? this.watchReader(reader !== undefined && READER_NAME.test(reader) ? reader : null) : null
    try {
      // Listed (and its leases spared while Redis is away) only once the request is found its own and well formed.
      const accepted = () => {
        this.options.directory.update(workerId, { kind: 'redis', state: 'active' })
        this.options.leaseHold.heard(workerId)
      }
      return await answerWorkerRequest(this.options.deps, { workerId, workerToken: scope === 'worker', accepted, heardAt }, checked.request, watch?.signal ?? this.stopping.signal)
    } finally {
      watch?.done()
    }
  }

  /**
   * A signal that ends the request's wait when Redis no longer lists `reader` (the connection
   * its worker reads answers on; null: none named), Redis stops answering, or the host stops
   * (`stop` aborts every one still watched; not `AbortSignal.any` with the host's signal, which
   * on Node 20 keeps every signal made from it for as long as the host runs); `done` once the
   * request is answered.
   */
  private watchReader(reader: string | null): { signal: AbortSignal; done: () => void } {
    if (this.stopping.signal.aborted) return { signal: this.stopping.signal, done: () => {} }
    const gone = new AbortController()
    const checked = this.readerChecks ? reader : null
    this.readers.set(gone, checked)
    if (checked !== null) this.readerTimer ??= setInterval(() => void this.checkReaders(), READER_CHECK_MS).unref()
    return { signal: gone.signal, done: () => void this.readers.delete(gone) }
  }

  /** Ends the wait of every request whose reader Redis no longer lists; with none left, the checks stop until the next. */
  private async checkReaders(): Promise<void> {
    // Only requests read before the list is asked for are judged by it: a reader that connected
    // after Redis made the list (a worker just started) is in the next one.
    const judged = [...this.readers].filter((watched): watched is [AbortController, string] => watched[1] !== null)
    if (judged.length === 0 && this.readerTimer) {
      clearInterval(this.readerTimer)
      this.readerTimer = null
    }
    if (this.checkingReaders || judged.length === 0) return
    this.checkingReaders = true
    try {
      const list = (await this.writer.call('CLIENT', 'LIST', 'TYPE', 'normal')) as string
      const listed = new Set<string>()
      for (const match of list.matchAll(/ name=(\S+)/g)) listed.add(match[1]!)
      for (const [gone, reader] of judged) if (!listed.has(reader)) gone.abort(new Error(`${reader} is gone`))
    } catch (error) {
      const message = (error as Error).message
      // Redis away: the next check asks again. Refused: requests wait out their time, as before there were checks.
      if (/NOPERM|unknown (sub)?command/i.test(message)) {
        this.readerChecks = false
        if (this.readerTimer) clearInterval(this.readerTimer)
        this.readerTimer = null
        this.options.log(`leasehold: Redis refused CLIENT LIST (${message}): a remote worker that dies while its claim waits is not noticed until the claim's wait ends`)
      }
    } finally {
      this.checkingReaders = false
    }
  }

  /** Acknowledges and deletes, in one MULTI, every request answered by the end of this tick. */
  private async acknowledge(stream: string): Promise<void> {
    await new Promise((resolve) => setImmediate(resolve))
    const ids = this.answered
    this.answered = []
    this.acknowledging = null
    try {
      await this.writer.multi().xack(stream, CONSUMER_GROUP, ...ids).xdel(stream, ...ids).exec()
    } catch (error) {
      // Answered and unacknowledged: read again after a reconnect, and answered again as its HTTP twin would be.
      this.limiter.line('redis workers answer', `leasehold: acknowledging remote workers' requests failed (${redisFaultWords(error)}); they are read and answered again after a reconnect, as their HTTP twins would be`)
    }
  }
}
