import { Redis, type RedisOptions } from 'ioredis'
import { type Engine, type Outbox, type OutboxGrant, type OutboxMessage, streamMessageName } from '../engine'
import type { RedisHealth } from '../http/views/system'
import { LogLimiter } from '../log-limiter'
import { CONSUMER_GROUP, DEFAULT_REDIS_PREFIX, queueStream, redactedUrl } from '../../src-shared/redis-streams'

export { CONSUMER_GROUP } from '../../src-shared/redis-streams'

/**
 * The relay: carries the outbox (engine/store/outbox.ts) to Redis Streams after each commit, and keeps
 * Redis in step with SQLite, which stays the truth. Redis is transport only: it may lose
 * messages, hold them twice, or restart empty, and the relay puts it right.
 *
 * One pass at a time ({@link RedisRelay.pass}), each in this order, so that a job's new message
 * is always in Redis before its old one is acknowledged:
 *   1. publish: the outbox's rows, oldest first, XADDed in one pipeline under their explicit ids
 *      (`0-<n>`, engine/store/streams.ts), then recorded as published;
 *   2. claim: the messages of the jobs granted since, XCLAIMed (FORCE) to the worker's consumer
 *      in group `leasehold`, so XPENDING shows who holds what;
 *   3. acknowledge: the messages whose attempt ended (committed final, or a newer message
 *      published), XACKed and XDELed in one pipeline, then their rows deleted.
 *
 * A reconciliation (at start, on every reconnect, and when a message has waited in the outbox
 * longer than `stuckAfterMs`) compares each stream with the ledger: a message Redis lost is
 * published again, under the same id (the stream is rebuilt when its last id has moved past
 * it); an entry the ledger does not hold (a job that finished while Redis was away) is deleted.
 */

/** Rows one pipeline carries at most. */
const BATCH = 1000
/** A message that has waited this long in the outbox while Redis answers makes the relay reconcile. */
const DEFAULT_STUCK_AFTER_MS = 10_000
const CHECK_INTERVAL_MS = 1_000

export interface RedisRelayOptions {
  engine: Engine
  /** redis://[user:password@]host:port/db or rediss:// (TLS); handed to ioredis as it is. */
  url: string
  prefix?: string
  log?: (line: string) => void
  stuckAfterMs?: number
}



/** An entry id's two parts, for ordering (`<ms>-<seq>`). */
function idParts(id: string): [bigint, bigint] {
  const [ms, seq] = id.split('-')
  return [BigInt(ms ?? '0'), BigInt(seq ?? '0')]
}

/** Whether entry id `a` sorts at or before `b`. */
function idAtOrBefore(a: string, b: string): boolean {
  const [am, as] = idParts(a)
  const [bm, bs] = idParts(b)
  return am < bm || (am === bm && as <= bs)
}

export class RedisRelay {
  readonly redis: Redis
  private readonly outbox: Outbox
  private readonly prefix: string
  private readonly limiter: LogLimiter
  private readonly stuckAfterMs: number
  /** Grants committed and not yet XCLAIMed. */
  private grants: OutboxGrant[] = []
  private running: Promise<void> | null = null
  private again = false
  private reconcileDue = true
  private readonly groupsMade = new Set<string>()
  private readonly unsubscribe: () => void
  private readonly timer: NodeJS.Timeout
  private stopped = false

  constructor(private readonly options: RedisRelayOptions) {
    const { engine } = options
    this.outbox = engine.outbox()
    this.prefix = options.prefix ?? DEFAULT_REDIS_PREFIX
    const log = options.log ?? ((line: string) => console.error(line))
    this.limiter = new LogLimiter(log, () => Date.now())
    this.stuckAfterMs = options.stuckAfterMs ?? DEFAULT_STUCK_AFTER_MS
    const redisOptions: RedisOptions = {
      lazyConnect: true,
      // A command while Redis is away fails at once: the outbox holds the message, not ioredis' memory.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      retryStrategy: (times) => Math.min(100 * times, 2_000),
    }
    this.redis = new Redis(options.url, redisOptions)
    this.redis.on('error', (error: Error) => this.limiter.line('redis', `leasehold: Redis at ${redactedUrl(options.url)}: ${error.message}; messages wait in the outbox`))
    this.redis.on('ready', () => {
      // A reconnect may reach a Redis that restarted empty: its streams and groups are checked again.
      this.groupsMade.clear()
      this.reconcileDue = true
      this.limiter.line('redis ready', `leasehold: Redis at ${redactedUrl(options.url)} connected`)
      this.kick()
    })
    this.unsubscribe = engine.onCommit(() => {
      // Taken at the commit, when no transaction is open: every grant taken here is durable.
      this.grants.push(...this.outbox.takeGrants())
      this.kick()
    })
    this.timer = setInterval(() => this.checkStuck(), CHECK_INTERVAL_MS)
    this.timer.unref()
  }

  /** Connects (a Redis that is down is retried in the background: the host starts all the same). */
  start(): void {
    this.redis.connect().catch(() => {
      // Logged by the error listener; ioredis goes on retrying.
    })
  }

  get connected(): boolean {
    return this.redis.status === 'ready'
  }

  health(): RedisHealth {
    const backlog = this.outbox.backlog()
    return {
      url: redactedUrl(this.options.url),
      connected: this.connected,
      waiting: backlog.waiting,
      oldest_wait_ms: backlog.oldest_at === null ? null : Math.max(0, this.options.engine.now() - backlog.oldest_at),
    }
  }

  /** Resolves once the relay has nothing in hand: no pass running or due. For tests and shutdown. */
  async idle(): Promise<void> {
    while (this.running) await this.running
  }

  /** Stops: the pass in progress ends, and the connection closes (what waits stays in the outbox). */
  async stop(): Promise<void> {
    this.stopped = true
    this.unsubscribe()
    clearInterval(this.timer)
    await this.idle()
    this.redis.disconnect()
  }

  /** Asks for a pass: now, or right after the one in progress. */
  kick(): void {
    if (this.stopped) return
    if (this.running) {
      this.again = true
      return
    }
    this.running = (async () => {
      do {
        this.again = false
        await this.pass()
      } while (this.again && !this.stopped)
      this.running = null
    })()
  }

  private checkStuck(): void {
    if (!this.connected) return
    let oldest: number | null
    try {
      oldest = this.outbox.backlog().oldest_at
    } catch {
      return // the database is closing
    }
    if (oldest !== null && this.options.engine.now() - oldest >= this.stuckAfterMs) {
      this.reconcileDue = true
      this.kick()
    }
  }

  /** One pass (see the module's comment); a failure leaves everything in the ledger for the next. */
  private async pass(): Promise<void> {
    if (!this.connected || this.stopped) return
    try {
      if (this.reconcileDue) {
        this.reconcileDue = false
        await this.reconcile()
      }
      await this.publish()
      await this.claim()
      await this.acknowledge()
    } catch (error) {
      this.reconcileDue = true
      this.limiter.line('redis pass', `leasehold: relaying to Redis failed (${(error as Error).message}); it is tried again on reconnect`)
    }
  }

  private stream(queue: string): string {
    return queueStream(this.prefix, queue)
  }

  private async publish(): Promise<void> {
    for (;;) {
      const rows = this.outbox.unpublished(BATCH)
      if (rows.length === 0) return
      // The crash tests' injection point: the process dies between a COMMIT and its XADD.
      if (process.env.LEASEHOLD_FAULT_KILL_BEFORE_XADD === '1') process.kill(process.pid, 'SIGKILL')
      const pipeline = this.redis.pipeline()
      for (const stream of new Set(rows.map((row) => this.stream(row.queue)))) {
        if (!this.groupsMade.has(stream)) pipeline.xgroup('CREATE', stream, CONSUMER_GROUP, '0', 'MKSTREAM')
      }
      for (const row of rows) pipeline.xadd(this.stream(row.queue), streamMessageName(row.enqueue_id), 'job_id', row.job_id, 'enqueue_id', String(row.enqueue_id))
      const results = (await pipeline.exec()) ?? []
      const groups = results.length - rows.length
      for (const [error] of results.slice(0, groups)) {
        if (error && !/BUSYGROUP/.test(error.message)) throw error
      }
      for (const row of rows) this.groupsMade.add(this.stream(row.queue))
      const published: { enqueue_id: number; redis_id: string }[] = []
      let outOfOrder = false
      rows.forEach((row, i) => {
        const [error] = results[groups + i]!
        if (!error) published.push({ enqueue_id: row.enqueue_id, redis_id: streamMessageName(row.enqueue_id) })
        else if (/equal or smaller/.test(error.message)) outOfOrder = true
        else throw error
      })
      this.outbox.published(published)
      if (outOfOrder) {
        // The entry is there already (published before a crash recorded it), or the stream moved past its id: reconcile settles which.
        await this.reconcile()
      }
    }
  }

  private async claim(): Promise<void> {
    const grants = this.grants
    if (grants.length === 0) return
    this.grants = []
    const pipeline = this.redis.pipeline()
    for (const g of grants) pipeline.xclaim(this.stream(g.queue), CONSUMER_GROUP, g.worker_id, 0, g.redis_id, 'FORCE', 'JUSTID')
    const results = (await pipeline.exec()) ?? []
    // A grant whose stream or group Redis lost is claimed again by the reconciliation that republishes it.
    if (results.some(([error]) => error)) this.reconcileDue = true
  }

  private async acknowledge(): Promise<void> {
    for (;;) {
      const rows = this.outbox.ackDue(BATCH)
      if (rows.length === 0) return
      const pipeline = this.redis.pipeline()
      for (const row of rows) {
        if (row.redis_id === null) continue // never published: nothing in Redis to acknowledge
        pipeline.xack(this.stream(row.queue), CONSUMER_GROUP, row.redis_id)
        pipeline.xdel(this.stream(row.queue), row.redis_id)
      }
      const results = (await pipeline.exec()) ?? []
      // NOGROUP: Redis lost the stream, and with it the entry. Anything else: try again next pass.
      const failed = results.find(([error]) => error && !/NOGROUP/.test(error.message))
      if (failed) throw failed[0]
      this.outbox.acknowledged(rows.map((row) => row.enqueue_id))
    }
  }

  /**
   * Brings every stream in step with the ledger: what Redis lost is published again, what it
   * holds beyond the ledger is deleted, and the messages of running jobs are claimed to their
   * workers again.
   */
  private async reconcile(): Promise<void> {
    const live = this.outbox.live()
    const byStream = new Map<string, OutboxMessage[]>()
    for (const row of live) {
      const stream = this.stream(row.queue)
      byStream.set(stream, [...(byStream.get(stream) ?? []), row])
    }
    for (const stream of await this.streamKeys()) if (!byStream.has(stream)) byStream.set(stream, [])
    const holders = new Map<string, string>()
    for (const [worker, jobIds] of this.options.engine.activeLeasesByWorker()) for (const jobId of jobIds) holders.set(jobId, worker)

    for (const [stream, rows] of byStream) {
      const present = await this.entryIds(stream)
      const wanted = new Map(rows.map((row) => [streamMessageName(row.enqueue_id), row]))
      const strays = [...present].filter((id) => !wanted.has(id))
      const missing = rows.filter((row) => !present.has(streamMessageName(row.enqueue_id)))
      const found = rows.filter((row) => row.redis_id === null && present.has(streamMessageName(row.enqueue_id)))
      if (strays.length > 0) {
        const pipeline = this.redis.pipeline()
        for (const id of strays) pipeline.xack(stream, CONSUMER_GROUP, id).xdel(stream, id)
        await pipeline.exec()
      }
      if (found.length > 0) this.outbox.published(found.map((row) => ({ enqueue_id: row.enqueue_id, redis_id: streamMessageName(row.enqueue_id) })))
      if (missing.length === 0) continue
      const last = await this.lastGeneratedId(stream)
      if (last !== null && missing.some((row) => idAtOrBefore(streamMessageName(row.enqueue_id), last))) {
        await this.rebuild(stream, rows)
      } else {
        // Published again by the pass's publish step, in order, under the same ids.
        this.outbox.unpublish(missing.filter((row) => row.redis_id !== null).map((row) => row.enqueue_id))
      }
    }
    await this.publish()
    const pipeline = this.redis.pipeline()
    let claims = 0
    for (const row of live) {
      const worker = holders.get(row.job_id)
      if (!worker) continue
      pipeline.xclaim(this.stream(row.queue), CONSUMER_GROUP, worker, 0, streamMessageName(row.enqueue_id), 'FORCE', 'JUSTID')
      claims += 1
    }
    if (claims > 0) await pipeline.exec()
  }

  /** Writes a stream anew from the ledger (its last id moved past a message it lost: XADD cannot go back). */
  private async rebuild(stream: string, rows: readonly OutboxMessage[]): Promise<void> {
    const multi = this.redis.multi().del(stream)
    for (const row of rows) multi.xadd(stream, streamMessageName(row.enqueue_id), 'job_id', row.job_id, 'enqueue_id', String(row.enqueue_id))
    multi.xgroup('CREATE', stream, CONSUMER_GROUP, '0', 'MKSTREAM')
    await multi.exec()
    this.groupsMade.add(stream)
    this.outbox.published(rows.map((row) => ({ enqueue_id: row.enqueue_id, redis_id: streamMessageName(row.enqueue_id) })))
  }

  private async streamKeys(): Promise<string[]> {
    const keys: string[] = []
    let cursor = '0'
    do {
      const [next, batch] = await this.redis.scan(cursor, 'MATCH', `${this.prefix}q:*`, 'COUNT', 1000, 'TYPE', 'stream')
      cursor = next
      keys.push(...batch)
    } while (cursor !== '0')
    return keys
  }

  private async entryIds(stream: string): Promise<Set<string>> {
    const ids = new Set<string>()
    let start = '-'
    for (;;) {
      const entries = await this.redis.xrange(stream, start, '+', 'COUNT', BATCH)
      for (const [id] of entries) ids.add(id)
      if (entries.length < BATCH) return ids
      start = `(${entries[entries.length - 1]![0]}`
    }
  }

  private async lastGeneratedId(stream: string): Promise<string | null> {
    try {
      const info = (await this.redis.xinfo('STREAM', stream)) as unknown[]
      const at = info.indexOf('last-generated-id')
      return at >= 0 ? String(info[at + 1]) : null
    } catch {
      return null // no such stream
    }
  }
}
