import { randomBytes, randomInt } from 'node:crypto'
import { Redis } from 'ioredis'
import { type IpcMethod, type IpcParams, IpcResponse } from '../src-shared/ipc-protocol'
import { LogLimiter } from '../src-shared/log-limiter'
import { ANSWER_MARGIN_MS, entryField, isMissingDatabase, isRedisRefusal, notRedisWords, prefixClaimKey, reconnectOnMissingDatabase, redactedUrl, redisFaultWords, replyStream, requestStream } from '../src-shared/redis-streams'
import { grantedLeaseIds, MAX_LONG_POLL_MS } from '../src-shared/worker-exchange'
import { type ExchangeAnswer, type ExchangeRequest, type FileAcquireAnswer, type GateRequest, HostError, LeaseLostError, noAnswer, TransportRefusal, TransportSilence, requestText, type WorkerTransport } from './transport'

const READ_BLOCK_MS = 1_000
/** A read of the answers unanswered this long past its block means Redis does not answer (paused, or a network that drops packets). */
const SILENT_AFTER_MS = READ_BLOCK_MS + 3_000
/** How many calls that stopped waiting a transport remembers, to give back what their late answers grant. */
const ABANDONED_REMEMBERED = 1_024
/** How long a look at whether a host claims the prefix may take: Redis answered a read within the last few seconds. */
const CLAIM_LOOK_MS = 1_000
/** The shortest wait for the answer to an exchange that carries reports, however short the leases. */
const MIN_REPORT_WAIT_MS = 1_000

/**
 * How long an exchange that carries reports (heartbeats, completions, failures) waits for its answer
 * before it is sent again, while the worker holds leases of `leaseTtlMs` at the shortest: a third of
 * that TTL, and never past the claim's wait and {@link ANSWER_MARGIN_MS}. A lease is heartbeated
 * every third of its TTL, so a request lost on the way (Redis restarted empty, a FLUSHALL) is sent
 * again with at least a third of the TTL, and the grace, left: a lost report does not cost the
 * lease, as a 15 s wait did under a TTL of 10 s. The claim the exchange carries waits what is left
 * after the margin (none, under a TTL of 45 s); a worker asks again as it is answered.
 */
export function reportWait(claimWaitMs: number, leaseTtlMs: number | null): { claimWaitMs: number; marginMs: number } {
  if (leaseTtlMs === null) return { claimWaitMs, marginMs: ANSWER_MARGIN_MS }
  const budgetMs = Math.max(MIN_REPORT_WAIT_MS, Math.floor(leaseTtlMs / 3))
  if (claimWaitMs + ANSWER_MARGIN_MS <= budgetMs) return { claimWaitMs, marginMs: ANSWER_MARGIN_MS }
  const marginMs = Math.min(ANSWER_MARGIN_MS, budgetMs)
  return { claimWaitMs: Math.min(claimWaitMs, budgetMs - marginMs), marginMs }
}

/**
 * Redis cannot be reached, in words that name the cause: a connection refused means that nothing
 * listens there (Redis is down, or at another address); any other error of the socket (a timeout,
 * no route) is said as it is.
 */
function unreachable(fault: string): string {
  if (/ECONNREFUSED/.test(fault)) return `refuses connections (${fault}: Redis is down, or does not listen there)`
  const notRedis = notRedisWords(fault)
  if (notRedis !== null) return `cannot be used: ${notRedis}`
  return `cannot be reached (${fault})`
}

/** Redis refused a command because its key holds another type (a string where a stream should be). */
const isWrongType = (error: Error): boolean => /^WRONGTYPE\b/.test(error.message)

interface Pending {
  resolve(response: IpcResponse): void
  reject(error: Error): void
  timer: NodeJS.Timeout
}

/**
 * A refusal by Redis itself said as such, naming what to mend: its user's ACL does not allow a
 * command or a key (NOPERM), it is out of memory (OOM), it wants a password (NOAUTH, WRONGPASS),
 * or any other refusal in its words (a key of another type: WRONGTYPE). The host never saw the call.
 */
function redisRefusal(error: Error): Error {
  const { message } = error
  if (/^OOM\b/.test(message)) {
    return new TransportRefusal(`Redis refused this worker's request (${message}): Redis is out of memory (its maxmemory), not the host; the worker asks again until it has room`)
  }
  if (/^NOPERM\b/.test(message)) {
    return new TransportRefusal(
      `Redis refused this worker's user (${message}); its ACL must allow XADD on the host's request stream, XREAD, XREVRANGE and DEL on the worker's reply streams (<prefix>worker:<id>:replies*), CLIENT SETNAME and INFO: docs/redis.md, "Redis ACLs"`,
    )
  }
  if (/^(NOAUTH|WRONGPASS)\b/.test(message)) {
    return new TransportRefusal(`Redis refused this worker's connection (${message}): check the user and password in its --redis URL; not the host; the worker asks again`)
  }
  if (isRedisRefusal(message)) return new TransportRefusal(`Redis refused this worker's request (${message}), not the host; the worker asks again`)
  return error
}

/**
 * The worker exchange over Redis Streams, for a worker with no connection to the host
 * (`leasehold worker --redis`, docs/redis.md): each request (the local workers' IPC envelope,
 * src-shared/ipc-protocol.ts) is XADDed to the host's request stream with this worker's id and
 * token; answers come on this worker's own reply stream (or the channel the transport names),
 * matched by request id. The connection they are read on is named, and each request names it
 * (`reader`), so that the host can tell a claim whose worker has died.
 */
export class RedisTransport implements WorkerTransport {
  private readonly writer: Redis
  /** Blocking reads need a connection of their own. */
  private readonly reader: Redis
  private readonly pending = new Map<number, Pending>()
  /** Request ids start at random, so the answers to an earlier process of the same worker id are not taken for ours. */
  private nextId = randomInt(1, 2 ** 40)
  private closed = false
  /** Where this transport's answers begin in its reply stream, once read (see {@link start}). */
  private ready: Promise<string> | null = null
  /** The name of the connection answers are read on (READER_NAME), sent with every request. */
  private readonly readerName = `leasehold-reader-${randomBytes(8).toString('hex')}`
  /**
   * Redis's refusal of this transport's reads of its answers (the user may not XREAD its reply
   * stream), while it refuses: a call then fails at once, unsent, saying so. Sent, it would be
   * answered where the worker cannot read, and the jobs granted would be held by nobody.
   */
  private readRefusal: Error | null = null
  /**
   * A driving thread's transport: Redis's refusal of its worker's runtime reading its answers (see
   * {@link runtimeHears}), while it refuses. The thread's calls then fail at once, unsent: the jobs
   * it would claim are heartbeaten by the runtime, which would never hear the host's answers.
   */
  private runtimeDeaf: Error | null = null
  private runtimeCheckedAt = Number.NEGATIVE_INFINITY
  /** The calls that stopped waiting before their answer came (the newest {@link ABANDONED_REMEMBERED}): their answers are late. */
  private readonly abandoned = new Set<number>()
  /** When Redis last answered a read of the answers (one returns at least every {@link READ_BLOCK_MS}). */
  private heardAt = performance.now()
  /** Why the connection to Redis could not be made, while it cannot (the socket's error); null while it is open. */
  private connectFault: string | null = null
  /** A call ended saying Redis did not answer: its next answer is said too. */
  private saidSilent = false
  /** The shortest lease TTL the host granted this worker (ms), once it granted one: exchanges with reports wait for their answers no longer than a third of it ({@link reportWait}). */
  private leaseTtlMs: number | null = null
  private readonly log?: (line: string) => void
  private readonly url: string

  constructor(
    url: string,
    private readonly token: string,
    private readonly workerId: string,
    private readonly prefix: string,
    /** The reply channel this transport reads (REPLY_CHANNEL); none: the worker's own reply stream. */
    private readonly channel?: string,
    /** Where a Redis that cannot be reached is said (the worker's log); none: not said (a handler thread's transport: the worker's own says it). */
    log?: (line: string) => void,
  ) {
    const options = { maxRetriesPerRequest: null, retryStrategy: (times: number) => Math.min(100 * times, 2_000) }
    this.writer = new Redis(url, options)
    this.reader = new Redis(url, { ...options, connectionName: this.readerName })
    // ioredis reconnects by itself, and a call waits for it: without a line a worker whose Redis
    // is away would print nothing at all. One line, as the HTTP transport's "the host did not
    // answer", at most once a minute with the count of those held back (both connections fail
    // together, every 2 s at most).
    this.log = log
    this.url = url
    const limiter = log ? new LogLimiter(log, Date.now) : null
    // A refusal as it connects (WRONGPASS: a wrong user or password) is Redis answering, and said so.
    const said = (error: Error) => {
      if (this.reader.status !== 'ready') this.connectFault = error.message
      limiter?.line(
        'redis',
        isMissingDatabase(error.message)
          ? `leasehold worker: Redis at ${redactedUrl(url)}: ${redisFaultWords(error)}; it asks again every 2 s at most`
          : isRedisRefusal(error.message)
          ? `leasehold worker: Redis at ${redactedUrl(url)} refused this worker's connection (${error.message}): check the user and password in the URL; it asks again every 2 s at most`
          : `leasehold worker: Redis at ${redactedUrl(url)} ${unreachable(error.message)}; ioredis reconnects every 2 s at most`,
      )
    }
    this.writer.on('error', said)
    this.reader.on('error', said)
    // Requests sent on database 0 would never reach the host: the connection is dropped and made again.
    reconnectOnMissingDatabase(this.writer)
    reconnectOnMissingDatabase(this.reader)
    // A reconnect may reach a Redis that restarted empty, and lost the requests waiting there: the
    // calls waiting for an answer end now and are asked again at once, rather than when their
    // timers run out. An answer that still comes for one is late, and what it grants is given back.
    let dropped = false
    this.reader.on('close', () => (dropped = !this.closed))
    this.reader.on('ready', () => {
      this.connectFault = null
      if (!dropped) return
      dropped = false
      if (limiter) log?.(`leasehold worker: Redis at ${redactedUrl(url)} connected again`)
      for (const id of [...this.pending.keys()]) this.abandon(id, new TransportSilence(`Redis at ${redactedUrl(url)} connected again, not the host: the requests that waited through it are sent again`))
    })
    void this.readReplies()
  }

  /**
   * The reply stream's end as this transport starts: only answers written after it are ours.
   * Read once it can be: a read that failed (Redis away, or its user not yet allowed the stream)
   * is tried again by the next call, so a worker whose ACL is mended goes on without a restart.
   */
  private start(): Promise<string> {
    this.ready ??= this.open().catch((error: Error) => {
      this.ready = null
      throw error instanceof TransportRefusal ? error : redisRefusal(error)
    })
    return this.ready
  }

  private async open(): Promise<string> {
    const stream = replyStream(this.prefix, this.workerId, this.channel)
    // The XREAD (of nothing: no BLOCK, from the end) asks only whether Redis lets this user read
    // the stream: a worker that could send requests and not read their answers would be granted
    // jobs it never hears of. The name, set as the connection opens, is set again here, where a
    // refusal is heard: unnamed, the host cannot tell the worker reads, and ends each claim's wait.
    const look = () => Promise.all([this.reader.xrevrange(stream, '+', '-', 'COUNT', 1), this.reader.xread('COUNT', 1, 'STREAMS', stream, '$'), this.reader.client('SETNAME', this.readerName)])
    let last: [string, string[]][]
    try {
      ;[last] = await look()
    } catch (error) {
      if (!isWrongType(error as Error)) throw error
      await this.repair(stream, error as Error)
      ;[last] = await look()
    }
    // A driving thread's jobs are heartbeaten and ended by its worker's runtime, which hears the
    // host on the worker's own reply stream: while the runtime cannot read it, the thread claims nothing.
    await this.runtimeHears()
    return last[0]?.[0] ?? '0'
  }

  /**
   * This transport's own reply stream holds another type (a string SET there): it can hold no
   * answer for this worker, whose key it is, so the worker deletes it, and the host writes its next
   * answers there as a stream again. Said in the log once for each repair; a user that may not
   * delete it (its ACL) is refused as for any other command, and the worker sends no request meanwhile.
   */
  private async repair(stream: string, found: Error): Promise<void> {
    await this.writer.del(stream)
    ;(this.log ?? console.error)(`leasehold worker: ${stream} was no stream (${found.message}) and could hold no answer for this worker: the worker deleted it, and reads its answers there from now on`)
  }

  /**
   * For a driving thread's transport: whether its worker's runtime can read its answers (its own
   * reply stream is a stream this user may read); else a refusal, and the thread's calls go unsent
   * until it can (checked again at least every {@link READ_BLOCK_MS} while the thread reads).
   */
  private async runtimeHears(): Promise<void> {
    if (!this.channel) return
    const stream = replyStream(this.prefix, this.workerId)
    try {
      await this.reader.xread('COUNT', 1, 'STREAMS', stream, '$')
      this.runtimeDeaf = null
    } catch (error) {
      const { message } = error as Error
      if (!isRedisRefusal(message)) throw error
      this.runtimeDeaf = new TransportRefusal(`Redis refused this worker's runtime the reading of its answers on ${stream} (${message}), not the host: its driving thread claims no job the runtime could not heartbeat, and asks again`)
      throw this.runtimeDeaf
    }
  }

  private async readReplies(): Promise<void> {
    const stream = replyStream(this.prefix, this.workerId, this.channel)
    let from: string | null = null
    while (!this.closed) {
      try {
        from ??= await this.start()
        if (this.channel && performance.now() - this.runtimeCheckedAt >= READ_BLOCK_MS) {
          this.runtimeCheckedAt = performance.now()
          await this.runtimeHears()
        }
        const answer = (await this.reader.xread('COUNT', 100, 'BLOCK', READ_BLOCK_MS, 'STREAMS', stream, from)) as [string, [string, string[]][]][] | null
        this.heard()
        this.readRefusal = null
        for (const [entryId, fields] of answer?.[0]?.[1] ?? []) {
          from = entryId
          const parsed = IpcResponse.safeParse(JSON.parse(entryField(fields, 'body') ?? 'null'))
          if (!parsed.success) continue
          // A late answer finds its call abandoned: the jobs it grants are given back. A repeated
          // one (or another transport's, on the same stream) finds no call of this one's, and is dropped.
          const response = parsed.data
          if (!this.settle(response.id, (call) => call.resolve(response)) && this.abandoned.delete(response.id)) this.handBackUnheard(response)
        }
      } catch (error) {
        const refusal = error instanceof TransportRefusal ? error : redisRefusal(error as Error)
        // Its own reply stream turned into another type: read from its start again, once repaired (see open).
        if (isWrongType(error as Error)) {
          from = null
          this.ready = null
        }
        if (refusal instanceof TransportRefusal && refusal !== this.runtimeDeaf) {
          // Its user may no longer read its answers: the calls waiting for one end now, saying why.
          this.readRefusal = refusal
          for (const id of [...this.pending.keys()]) this.abandon(id, refusal)
        }
        if (!this.closed) await new Promise((resolve) => setTimeout(resolve, 200))
      }
    }
  }

  /** Redis answered a read: said in the log when a call ended saying it did not. */
  private heard(): void {
    const silentMs = performance.now() - this.heardAt
    this.heardAt = performance.now()
    if (!this.saidSilent) return
    this.saidSilent = false
    this.log?.(`leasehold worker: Redis at ${redactedUrl(this.url)} answers again (after ${Math.round(silentMs / 1000)} s)`)
  }

  /**
   * Why a call had no answer in `waitedMs`: Redis itself, when it has not answered a read meanwhile
   * (its connection down, or open and silent), else the host. What varies (how long, the socket's
   * error) is in the parentheses: the worker prints a retry line once a minute for each kind of
   * fault, the kind being the line up to its first parenthesis (limitRetryLines).
   */
  private unanswered(waitedMs: number): Error {
    const silentMs = performance.now() - this.heardAt
    if (silentMs < SILENT_AFTER_MS) return new Error(`no answer from the host over Redis within ${Math.round(waitedMs / 1000)} s`)
    this.saidSilent = true
    const url = redactedUrl(this.url)
    if (this.reader.status !== 'ready') return new TransportSilence(`Redis at ${url} ${unreachable(this.connectFault ?? 'its connection is closed')}, not the host: no answer can come through it`)
    return new TransportSilence(`Redis at ${url} has not answered (for ${Math.round(silentMs / 1000)} s, on an open connection: paused, or a network that drops packets), not the host: no answer can come through it`)
  }

  /**
   * Why a call had no answer, as {@link unanswered} says it, or that no host claims this worker's
   * prefix: its host's claim key (`<prefix>host`, src-main/redis/prefix-claim.ts) holds nothing,
   * so its requests wait in a stream no host reads, most likely under another --redis-prefix than
   * its host's. A user that may not read that key (its ACL) is told as before.
   */
  private async whyUnanswered(waitedMs: number): Promise<Error> {
    const error = this.unanswered(waitedMs)
    if (error instanceof TransportSilence) return error
    const look = this.writer.exists(prefixClaimKey(this.prefix)).catch(() => null)
    const claimed = await Promise.race([look, new Promise<null>((resolve) => setTimeout(() => resolve(null), CLAIM_LOOK_MS))])
    if (claimed !== 0) return error
    return new TransportSilence(`no Leasehold host claims the prefix ${this.prefix} on this Redis: check --redis-prefix (the host's serve --redis-prefix)`)
  }

  /** The worker holds a lease of `ttlS` seconds: exchanges with reports wait for their answers to fit it ({@link reportWait}). */
  leaseHeld(ttlS: number): void {
    this.leaseTtlMs = Math.min(this.leaseTtlMs ?? Number.POSITIVE_INFINITY, ttlS * 1000)
  }

  /** Ends the call `id`, if it is still waiting, with `end`; false when it no longer waits. */
  private settle(id: number, end: (call: Pending) => void): boolean {
    const call = this.pending.get(id)
    if (!call) return false
    this.pending.delete(id)
    clearTimeout(call.timer)
    end(call)
    return true
  }

  /** Ends the call `id` unanswered, with `error`: an answer that still comes is late. */
  private abandon(id: number, error: Error): void {
    if (!this.settle(id, (call) => call.reject(error))) return
    this.abandoned.add(id)
    if (this.abandoned.size > ABANDONED_REMEMBERED) this.abandoned.delete(this.abandoned.values().next().value!)
  }

  /**
   * An answer that came after its call stopped waiting (its timer ran out while Redis was paused
   * or away, and the request reached the host only once it was back; or the worker stopped): the
   * jobs it grants would be held by nobody until their leases expired, each losing an attempt.
   * They are given back now, and the host requeues them at once, costing no attempt.
   */
  private handBackUnheard(response: IpcResponse): void {
    const unheard = grantedLeaseIds(response.result)
    if (unheard.length === 0 || this.closed) return
    this.call('handBack', { worker_id: this.workerId, lease_ids: unheard }).catch(() => {
      // Not given back (Redis away again, the host gone): the leases expire unheartbeated, as before.
    })
  }

  private async call<M extends IpcMethod>(method: M, params: IpcParams<M>, waitMs = 0, signal?: AbortSignal, marginMs = ANSWER_MARGIN_MS): Promise<unknown> {
    if (this.readRefusal) throw this.readRefusal
    if (this.runtimeDeaf) throw this.runtimeDeaf
    const id = this.nextId++
    // Written before anything waits on it: a request that cannot be fails at once (report-budget.ts), not as a Redis refusal asked again every second.
    const body = requestText({ type: 'request', id, method, params })
    const answered = new Promise<IpcResponse>((resolve, reject) => {
      const timer = setTimeout(() => void this.whyUnanswered(waitMs + marginMs).then((error) => this.abandon(id, error)), waitMs + marginMs)
      this.pending.set(id, { resolve, reject, timer })
      const abort = () => this.abandon(id, new Error('aborted'))
      if (signal?.aborted) abort()
      else signal?.addEventListener('abort', abort, { once: true })
    })
    // Sent once the reply stream's end is known; while Redis cannot be reached that waits, and the
    // call ends by its timer or its signal (a worker told to stop is not held by a Redis that is away).
    const channel = this.channel ? ['channel', this.channel] : []
    this.start()
      .then(() =>
        // The id in a field of its own too: a host refuses a body too large (or a token it does not know) without parsing the body.
        this.writer.xadd(requestStream(this.prefix), '*', 'worker_id', this.workerId, 'token', this.token, ...channel, 'reader', this.readerName, 'id', String(id), 'body', body),
      )
      .catch((error: Error) => this.settle(id, (call) => call.reject(redisRefusal(error))))
    const response = await answered
    if (response.error) {
      const { status, code, detail } = response.error
      if (status === 409) throw new LeaseLostError(code, detail)
      throw new HostError(status, code, detail)
    }
    return response.result
  }

  async exchange(request: ExchangeRequest, signal?: AbortSignal): Promise<ExchangeAnswer> {
    const reports = (request.heartbeat?.length ?? 0) + (request.complete?.length ?? 0) + (request.fail?.length ?? 0)
    const { claimWaitMs, marginMs } = reportWait(request.claim ? Math.min(request.claim.max_wait_ms ?? 0, MAX_LONG_POLL_MS) : 0, reports > 0 ? this.leaseTtlMs : null)
    const sent = request.claim && claimWaitMs < (request.claim.max_wait_ms ?? 0) ? { ...request, claim: { ...request.claim, max_wait_ms: claimWaitMs } } : request
    try {
      const answer = (await this.call('exchange', sent, claimWaitMs, signal, marginMs)) as ExchangeAnswer
      for (const job of answer.jobs) this.leaseHeld(job.lease_ttl_seconds)
      return answer
    } catch (error) {
      if (signal?.aborted) return noAnswer()
      throw error
    }
  }

  async acquireFile(request: GateRequest): Promise<FileAcquireAnswer> {
    return (await this.call('acquireFile', request)) as FileAcquireAnswer
  }

  async waitFileRetry(request: { file: string; owner_id: string; max_wait_ms: number }, signal: AbortSignal): Promise<boolean> {
    try {
      return (await this.call('waitFileRetry', request, Math.min(request.max_wait_ms, MAX_LONG_POLL_MS), signal)) === true
    } catch (error) {
      if (signal.aborted) return false
      throw error
    }
  }

  async heartbeatFile(request: GateRequest): Promise<void> {
    await this.call('heartbeatFile', request)
  }

  async report(problem: { worker_id: string; kind: string; detail: string }): Promise<void> {
    await this.call('report', problem)
  }

  close(): void {
    this.closed = true
    for (const [, call] of this.pending) {
      clearTimeout(call.timer)
      call.reject(new Error('the transport is closed'))
    }
    this.pending.clear()
    this.writer.disconnect()
    this.reader.disconnect()
  }
}
