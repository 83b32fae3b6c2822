import { type ChainableCommander, Redis, type RedisOptions, ReplyError } from 'ioredis'
import { type EndedMessage, type Engine, type Outbox, type OutboxFillCursor, type OutboxFillStep, type OutboxGrant, type OutboxMessage, streamMessageName } from '../engine'
import type { RedisHealth } from '../http/views/system'
import { LogLimiter } from '../../src-shared/log-limiter'
import { CONSUMER_GROUP, DEFAULT_REDIS_PREFIX, DISCONNECT_TIMEOUT_MS, globEscaped, isRedisRefusal, notRedisWords, prefixTakenMessage, queueStream, redactedUrl, reconnectOnMissingDatabase, redisFaultWords } from '../../src-shared/redis-streams'
import { QueueName } from '../../src-shared/worker-exchange'
import { Answering, UNANSWERED_AFTER_MS } from './answering'
import { scanKeys } from './keys'
import { type HostIdentity, PrefixClaim, processIdentity } from './prefix-claim'

export { UNANSWERED_AFTER_MS } from './answering'

export { CONSUMER_GROUP } from '../../src-shared/redis-streams'

/**
 * The relay: carries the outbox (engine/store/outbox.ts) to Redis Streams after each commit, and keeps
 * Redis in step with SQLite, which stays the truth. Redis is transport only: it may lose
 * messages, hold them twice, or restart empty, and the relay puts it right.
 *
 * At each commit it takes what the commit changed (new messages, ended ones, grants) into
 * memory, and one pass at a time ({@link RedisRelay.pass}) sends all it holds in one pipeline, in
 * this order, so that a job's new message is always in Redis before its old one is acknowledged:
 *   1. publish: the new messages, oldest first, XADDed under their explicit ids (`0-<n>`,
 *      engine/store/streams.ts);
 *   2. claim: the messages of the jobs granted since, XCLAIMed (FORCE) to the worker's consumer
 *      in group `leasehold`, one XCLAIM per stream and worker, so XPENDING shows who holds what;
 *   3. acknowledge: the messages whose attempt ended (committed final, or a newer message
 *      committed), one XACK and one XDEL per stream.
 * A message that was both given and ended since the last pass never reaches Redis.
 *
 * What the relay holds in memory is only a shortcut: the outbox table holds every message
 * Redis should hold. When the relay cannot trust what it holds (at start, after a failed
 * pipeline, when Redis answered out of order, or when more waits than {@link HELD_MAX} while
 * Redis is away) it lets it go and reconciles: it compares each stream with the table, publishes
 * again (under the same id) what Redis lost, rebuilding a stream whose last id has moved past
 * it, deletes the entries the table does not hold (jobs that finished meanwhile), and claims the
 * messages of running jobs to their workers again. A reconciliation also runs on every
 * reconnect, when a message has waited longer than `stuckAfterMs` while Redis answers, and when a
 * stream counted every {@link COUNT_CHECK_MS} holds more or fewer entries than it should
 * ({@link RedisRelay.countStreams}: Redis lost them while it answered).
 *
 * A host that ran without Redis wrote no outbox rows: before its first reconciliation the relay
 * fills the table from the jobs ({@link RedisRelay.fill}), so that every job waiting in a queue
 * has its message in its stream, as if it had been submitted with Redis on.
 *
 * Nothing is sent before the host holds its prefix (redis/prefix-claim.ts), and nothing more once
 * another host is found on it. The claim's refresh, once a second, is also how the relay knows
 * that Redis answers: a socket that stays open is not enough (a Redis stopped with SIGSTOP, a
 * network that drops packets), so Redis counts as connected only while that refresh is answered
 * in time (redis/answering.ts).
 */

/** Entries one XRANGE reads at most (a reconciliation's reads of a stream). */
const BATCH = 1000
/** Changes the relay holds in memory at most while Redis is away; past that it lets them go and reconciles from the outbox table on reconnect. */
const HELD_MAX = 50_000
/** A message that has waited this long while Redis answers makes the relay reconcile. */
const DEFAULT_STUCK_AFTER_MS = 10_000
const CHECK_INTERVAL_MS = 1_000
/** While Redis is away, how often its health is told again (the messages waiting grow; nothing else would say so). */
export const AWAY_REPORT_MS = 5_000
/**
 * How long a command may wait for Redis's answer: a pass in progress when Redis stops answering
 * fails after this (what it carried is reconciled once Redis answers), rather than hang until the
 * connection drops, which on a network that loses packets can take many minutes.
 */
const COMMAND_TIMEOUT_MS = 10_000
/**
 * How often the relay counts each queue's stream against the outbox (XLEN, one pipeline): entries
 * lost while Redis answers (an XTRIM, an eviction under `maxmemory`, a DEL) raise no error, and
 * nothing else would notice them before a restart.
 */
export const COUNT_CHECK_MS = 5_000
/** How long a start waits for Redis to answer the prefix's claim: a host whose Redis is away starts all the same. */
const CLAIM_AT_START_MS = 2_000
/** A consumer that holds no message and has had none claimed to it for this long is deleted from its group. */
const DEFAULT_DEPARTED_AFTER_MS = 60_000
/** How often the consumers are looked over. */
const SWEEP_INTERVAL_MS = 60_000
/**
 * How long a stop waits for the pass in progress. One whose Redis never answers (a connection
 * ioredis cannot make again: the Redis user deleted, its password changed) is left: what it
 * carried stays in the outbox, for the next host.
 */
const STOP_GRACE_MS = 2_000
/** How long after a fill of the outbox that failed (a host that takes no writes) it is tried again. */
const FILL_RETRY_MS = 10_000
/** The longest a relay waits before trying again a pass that keeps failing. */
const PASS_RETRY_MAX_MS = 10_000

/**
 * How long after its `failures`-th pass in a row that failed (or found Redis out of step again
 * right after a reconciliation) the relay tries again: at once after the first, then doubling
 * from 1 s up to {@link PASS_RETRY_MAX_MS}, so that a fault that persists (a key of another type,
 * a group deleted over and over) costs a few commands a second at most, not a loop.
 */
export function passRetryDelayMs(failures: number): number {
  return failures <= 1 ? 0 : Math.min(1_000 * 2 ** (failures - 2), PASS_RETRY_MAX_MS)
}

export interface RedisRelayOptions {
  engine: Engine
  /** redis://[user:password@]host:port/db or rediss:// (TLS); handed to ioredis as it is. */
  url: string
  prefix?: string
  log?: (line: string) => void
  stuckAfterMs?: number
  /** How long a consumer that holds nothing may go without a claim before it is deleted (default 60 s). */
  departedAfterMs?: number
  /** Who this host is to hosts that share the Redis (its prefix's claim); one of this process alone by default. */
  identity?: HostIdentity
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

/** `items` grouped by `key`, each group in the items' order. */
function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>()
  for (const item of items) {
    const k = key(item)
    const group = groups.get(k)
    if (group) group.push(item)
    else groups.set(k, [item])
  }
  return groups
}

/**
 * XADDs many messages of one stream in one command: KEYS[1] the stream, ARGV entry id, job id,
 * entry id, job id, …; each entry's fields as {@link xaddArgs} writes them. Answers the entry
 * ids Redis refused, each followed by its error. One command instead of one XADD per message
 * is what keeps the client's cost per message small (a drain publishes 1,000 in a pass).
 */
const XADD_MANY = `local refused = {}
for i = 1, #ARGV, 2 do
  local ok = redis.pcall('xadd', KEYS[1], ARGV[i], 'job_id', ARGV[i + 1], 'enqueue_id', string.sub(ARGV[i], 3))
  if type(ok) == 'table' and ok.err then
    refused[#refused + 1] = ARGV[i]
    refused[#refused + 1] = ok.err
  end
end
return refused`

/** A message's entry in its stream, as {@link XADD_MANY} writes it (fields `job_id`, `enqueue_id`). */
const xaddArgs = (m: OutboxMessage): [string, string, string, string, string] => [streamMessageName(m.enqueue_id), 'job_id', m.job_id, 'enqueue_id', String(m.enqueue_id)]

/** The crash tests' injection point: the process dies between a COMMIT and its XADD. */
function beforeXadd(): void {
  if (process.env.LEASEHOLD_FAULT_KILL_BEFORE_XADD === '1') process.kill(process.pid, 'SIGKILL')
}

/** Adds to `pipeline` the XADDs of `messages`, all of `stream`, as one command. */
function xaddMany<P extends ChainableCommander>(pipeline: P, stream: string, messages: readonly OutboxMessage[]): P {
  const args: string[] = []
  for (const m of messages) args.push(streamMessageName(m.enqueue_id), m.job_id)
  pipeline.eval(XADD_MANY, 1, stream, ...args)
  return pipeline
}

/** `error` said of `key`: Redis's words first (a refusal opens with its code: WRONGTYPE, OOM…), then the key they are about. */
function aboutKey(key: string, error: unknown): Error {
  return new Error(`${String((error as Error)?.message ?? error)} (key ${key})`)
}

/** Redis's answer to one command of a pipeline. */
type Result = [Error | null, unknown]

export class RedisRelay {
  readonly redis: Redis
  /** This host's claim on its prefix: nothing is sent while it is not held. */
  readonly claim: PrefixClaim
  private readonly outbox: Outbox
  private readonly prefix: string
  private readonly limiter: LogLimiter
  private readonly stuckAfterMs: number
  /** Committed and not yet sent: new messages, in commit order. */
  private messages: OutboxMessage[] = []
  /** Committed and not yet sent: grants. */
  private grants: OutboxGrant[] = []
  /** Committed and not yet sent: messages whose attempt ended. */
  private ended: EndedMessage[] = []
  /** Messages being XADDed by the pass in progress (they still wait, for {@link health}). */
  private sending: OutboxMessage[] = []
  private running: Promise<void> | null = null
  /** The outbox table is being filled from the jobs ({@link fill}): no reconciliation before it is full. */
  private filling: Promise<void> | null = null
  private fillRetry: NodeJS.Timeout | undefined
  private again = false
  /** The relay does not know what Redis holds: a reconciliation is due, and what waits is read from the table. */
  private reconcileDue = true
  /** A reconciliation is under way: until it is over, what waits is read from the table as well. */
  private reconciling = false
  private sweepDue = false
  private lastSweepAt = 0
  /** The streams are due to be counted against the outbox ({@link countStreams}); when they last were (wall ms). */
  private countDue = false
  private lastCountAt = Date.now()
  private readonly groupsMade = new Set<string>()
  private readonly healthListeners = new Set<(health: RedisHealth) => void>()
  /** Whether the listeners were last told that Redis answers; when they were told. */
  private toldState: string | null = null
  private toldAt = 0
  /** Whether Redis answers the claim's refreshes (on wall time: Redis's pace, not the scheduler's clock, which tests move). */
  private readonly answering = new Answering(Date.now())
  /** A refresh waits for its answer: no other is sent meanwhile. */
  private probing = false
  /** In {@link start}: a prefix found taken now is its caller's to report (the host refuses to start). */
  private starting = false
  /** Connected and not yet said so in the log: said once the prefix is this host's (a host refused its prefix says that alone). */
  private sayConnected = false
  private answered!: () => void
  /** Redis's words when it answered the last check with a refusal (out of memory, a key of another type); null once it takes them. */
  private refusal: string | null = null
  /** Redis's words when it refused the last pass (a key of another type, out of memory); null once a pass goes through. */
  private passRefusal: string | null = null
  /** What Redis refused when health was last told of a change ({@link sayRefusalEnded}). */
  private lastRefused: string | null = null
  /** Redis's refusals of what other parts of the host send (the remote workers' request stream), by key. */
  private readonly refusedKeys = new Map<string, string>()
  /** Passes in a row that failed or left Redis out of step; none runs before `retryAt` (wall ms). */
  private failedPasses = 0
  private retryAt = 0
  /** The log has said that Redis is lost, and not yet that it is back. */
  private saidLost = false
  /** Resolves at Redis's first answer to the claim, its pass (if any) started. */
  private readonly firstAnswer = new Promise<void>((resolve) => (this.answered = resolve))
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
      commandTimeout: COMMAND_TIMEOUT_MS,
      disconnectTimeout: DISCONNECT_TIMEOUT_MS,
    }
    this.redis = new Redis(options.url, redisOptions)
    // A database the server does not have: its refusal is said as any other, and nothing goes to database 0.
    reconnectOnMissingDatabase(this.redis)
    this.claim = new PrefixClaim(this.prefix, options.identity ?? processIdentity())
    this.claim.onChange(() => this.claimChanged())
    this.redis.on('error', (error: Error) => {
      // Refused as it connects (its user deleted, its password changed: WRONGPASS), Redis answers, and says why.
      if (error instanceof ReplyError) this.refusal = error.message
      // A server that is no Redis (an HTTP port) answers too: health says so, as it says a refusal, until a Redis answers there.
      const notRedis = notRedisWords(error.message)
      if (notRedis !== null && notRedis !== this.refusal) {
        this.refusal = notRedis
        this.tellHealth()
      }
      this.outage('redis', `leasehold: Redis at ${redactedUrl(options.url)}: ${redisFaultWords(error)}; messages wait in the outbox`)
    })
    this.redis.on('ready', () => {
      // A reconnect may reach a Redis that restarted empty: its streams and groups are checked again.
      this.groupsMade.clear()
      this.letGo()
      this.answering.answered(Date.now())
      this.sayConnected = true
      this.tellHealth()
      this.probe() // its answer starts the reconciliation, once the prefix is this host's
    })
    this.redis.on('close', () => this.tellHealth())
    this.unsubscribe = engine.onCommit(() => {
      // Taken at the commit, when no transaction is open: every change taken here is durable.
      const taken = this.outbox.takeCommitted()
      if (this.reconcileDue) return // the reconciliation reads the table: it has them all
      for (const m of taken.messages) this.messages.push(m)
      for (const g of taken.grants) this.grants.push(g)
      for (const e of taken.ended) this.ended.push(e)
      if (this.messages.length + this.grants.length + this.ended.length > HELD_MAX) this.letGo()
      this.kick()
    })
    this.timer = setInterval(() => this.checkStuck(), CHECK_INTERVAL_MS)
    this.timer.unref()
    this.filling = this.fill()
  }

  /**
   * Fills the outbox table from the jobs (engine/store/outbox.ts, fillStep), one short operation
   * at a time with other work let in between, then reconciles: the messages of jobs queued while
   * the host ran without Redis go out in order with the rest, none twice. Until it is full no
   * pass runs (a reconciliation before it would publish newer messages first, and rebuild each
   * stream as the older ones came). A fill that fails (a host that takes no writes) is tried again
   * after {@link FILL_RETRY_MS}, the relay meanwhile carrying what the table holds.
   */
  private async fill(): Promise<void> {
    const { engine } = this.options
    let added = 0
    let removed = 0
    try {
      for (let cursor: OutboxFillCursor | null = { phase: 'rows', after: 0 }; cursor !== null && !this.stopped; ) {
        const from: OutboxFillCursor = cursor
        const step: OutboxFillStep = await engine.run(() => this.outbox.fillStep(from))
        added += step.added
        removed += step.removed
        cursor = step.next
        if (cursor !== null) await new Promise((resolve) => setImmediate(resolve))
      }
    } catch (error) {
      if (!this.stopped) {
        this.limiter.line(
          'redis fill',
          `leasehold: the Redis outbox could not be filled from the jobs (${String((error as Error)?.message ?? error)}); jobs queued while the host ran without Redis are missing from their streams until it is, tried again in ${FILL_RETRY_MS / 1000} s`,
        )
        this.fillRetry = setTimeout(() => (this.filling = this.fill()), FILL_RETRY_MS)
        this.fillRetry.unref()
      }
    } finally {
      this.filling = null
    }
    if (added + removed > 0) {
      this.limiter.line(
        'redis filled',
        `leasehold: ${added} message${added === 1 ? '' : 's'} of jobs queued while the host ran without Redis put in the outbox, ${removed} of jobs finished or queued again meanwhile taken out; Redis is brought in step with it`,
      )
    }
    this.letGo()
    this.kick()
  }

  /**
   * Connects, and resolves once Redis has answered the prefix's claim (`claim.state` says how),
   * the first attempt to connect failed, or {@link CLAIM_AT_START_MS} passed: a Redis that is
   * away is retried in the background, and the prefix claimed once it answers.
   */
  async start(): Promise<void> {
    let timer: NodeJS.Timeout | undefined
    // Failures are logged by the error listener; ioredis goes on retrying.
    const firstAttemptFailed = this.redis.connect().then(
      () => this.firstAnswer,
      () => {},
    )
    this.starting = true
    try {
      await Promise.race([this.firstAnswer, firstAttemptFailed, new Promise((resolve) => (timer = setTimeout(resolve, CLAIM_AT_START_MS)))])
    } finally {
      clearTimeout(timer)
      this.starting = false
    }
  }

  /** Redis answers: the connection is up and its last refresh of the claim was answered in time. */
  get connected(): boolean {
    return this.redis.status === 'ready' && this.answering.answers(Date.now())
  }

  health(): RedisHealth {
    const backlog = this.waiting()
    const connected = this.connected
    return {
      url: redactedUrl(this.options.url),
      connected,
      unanswered_ms: connected ? null : this.answering.silentFor(Date.now()),
      prefix: this.prefix,
      prefix_taken_by: this.claim.takenBy,
      refused: this.refused(),
      waiting: backlog.waiting,
      oldest_wait_ms: backlog.oldest_at === null ? null : Math.max(0, this.options.engine.now() - backlog.oldest_at),
    }
  }

  /** What Redis refuses now, in its words: the claim's refresh, a pass, or another part's key; null when it takes everything. */
  private refused(): string | null {
    return this.refusal ?? this.passRefusal ?? this.refusedKeys.values().next().value ?? null
  }

  /**
   * Redis refused (`refusal`, in its words with the key) or took again (null) what another part of
   * the host sends on `key`: health says so as it says the relay's own refusals.
   */
  refusedOn(key: string, refusal: string | null): void {
    if ((this.refusedKeys.get(key) ?? null) === refusal) return
    if (refusal === null) this.refusedKeys.delete(key)
    else this.refusedKeys.set(key, refusal)
    this.tellHealth()
  }

  /**
   * Refreshes the claim on the prefix, which tells whether Redis answers: one command a second,
   * whatever the traffic, and none while one waits for its answer.
   */
  private probe(): void {
    if (this.stopped || this.probing || this.redis.status !== 'ready') return
    this.probing = true
    this.answering.sent(Date.now())
    // Once another host holds the prefix, a bare PING: the claim is not asked for again.
    const asked = this.claim.state === 'taken' ? this.redis.ping() : this.claim.renew(this.redis)
    asked.then(
      () => {
        const wasAnswering = this.connected
        this.probing = false
        this.answering.answered(Date.now())
        this.refusal = null
        this.tellHealth()
        if (this.sayConnected && this.claim.state === 'held') {
          this.sayConnected = false
          this.recovery('redis ready', `leasehold: Redis at ${redactedUrl(this.options.url)} connected`)
        } else if (!wasAnswering) {
          // Silent on an open connection (paused, or a network that dropped packets), and answering again.
          this.recovery('redis back', `leasehold: Redis at ${redactedUrl(this.options.url)} answers again; the messages that waited go out now`)
        }
        // Back from silence: a pass that failed meanwhile left a reconciliation due.
        if (!wasAnswering || this.reconcileDue) this.kick()
        this.answered()
      },
      (error: Error) => {
        this.probing = false
        if (error instanceof ReplyError) {
          // An answer, if a refusal (the claim's key of another type): Redis answers, and nothing is relayed until the claim is made.
          this.answering.answered(Date.now())
          this.refusal = error.message
          this.tellHealth()
          this.limiter.line('redis probe', `leasehold: Redis at ${redactedUrl(this.options.url)} refused the claim on the prefix ${this.prefix} (${error.message}); messages wait in the outbox`)
          return
        }
        // Still unanswered since the first refresh that was not: the next one is judged from it.
        this.outage('redis probe', `leasehold: Redis at ${redactedUrl(this.options.url)} did not answer (${redisFaultWords(error)}); messages wait in the outbox`)
      },
    )
  }

  /**
   * Says that Redis is lost as soon as the host reads it not connected and silent for
   * {@link UNANSWERED_AFTER_MS} (as health says), unless an error said so already: a Redis silent
   * for less than a command's timeout (paused, busy, a network that drops packets for a while)
   * raises no error, and its outage is said all the same.
   */
  private sayIfSilent(): void {
    if (this.stopped || this.saidLost || this.connected) return
    const silentMs = this.answering.silentFor(Date.now())
    if (silentMs < UNANSWERED_AFTER_MS) return
    const silentS = Math.round(silentMs / 1000)
    this.outage('redis silent', `leasehold: Redis at ${redactedUrl(this.options.url)} does not answer (a check unanswered for ${UNANSWERED_AFTER_MS / 1000} s, nothing heard for ${silentS} s); messages wait in the outbox`)
  }

  /**
   * A line that Redis is lost (once a minute while it stays lost), after which the line that it is
   * back is said again: each outage is said, and its end, however soon one follows another.
   */
  private outage(key: string, line: string): void {
    this.saidLost = true
    this.limiter.forget('redis ready')
    this.limiter.forget('redis back')
    this.limiter.line(key, line)
  }

  /** A line that Redis is back, after which the next outage is said at once. */
  private recovery(key: string, line: string): void {
    this.saidLost = false
    this.limiter.forget('redis')
    this.limiter.forget('redis probe')
    this.limiter.forget('redis silent')
    this.limiter.line(key, line)
  }

  /** Another host was found on the prefix: nothing more is sent, and what is held goes (the outbox keeps it). */
  private claimChanged(): void {
    if (this.claim.state === 'held' && this.claim.refusal !== null) {
      this.limiter.line(
        'redis prefix unchecked',
        `leasehold: Redis refused this host's claim on ${this.prefix}host (${this.claim.refusal}): its user must be allowed EVAL, GET and SET there, and until it is this host cannot tell whether another uses its prefix; it asks again every second (docs/redis.md lists what to allow)`,
      )
    }
    if (this.claim.state !== 'taken') return
    this.letGo()
    if (!this.starting) this.limiter.line('redis prefix taken', `leasehold: Redis is no longer used: ${prefixTakenMessage(this.prefix, this.options.url, this.claim.takenBy ?? '')}, then restart this host`)
    this.tellHealth()
  }

  /**
   * Redis takes again all it refused (out of memory, a key of another type, a password): said in
   * one line, as the end of an outage is, after which the next refusal is said at once. Called with
   * every change that health is told of; a server that was no Redis refused nothing (its end is
   * the line that Redis is connected).
   */
  private sayRefusalEnded(): void {
    const was = this.lastRefused
    this.lastRefused = this.refused()
    if (this.lastRefused !== null || was === null || !isRedisRefusal(was)) return
    for (const key of ['redis pass', 'redis probe', 'redis taken again']) this.limiter.forget(key)
    this.limiter.line('redis taken again', `leasehold: Redis at ${redactedUrl(this.options.url)} takes what the host sends again (it refused: ${was}); what waited goes out now`)
  }

  /**
   * Listens to Redis's health: told when the connection is made or lost, and while Redis is away
   * every {@link AWAY_REPORT_MS} (how many messages wait). Returns the function that stops listening.
   */
  onHealth(listener: (health: RedisHealth) => void): () => void {
    this.healthListeners.add(listener)
    return () => this.healthListeners.delete(listener)
  }

  /** Tells the listeners the health, when the connection or the claim changed, or `away` says it is time to. */
  private tellHealth(away = false): void {
    if (this.stopped) return
    this.sayRefusalEnded()
    if (this.healthListeners.size === 0) return
    const connected = this.connected
    const state = `${connected} ${this.claim.state} ${this.refused()}`
    const now = this.options.engine.now()
    if (state === this.toldState && !(away && !connected && now - this.toldAt >= AWAY_REPORT_MS)) return
    let health: RedisHealth
    try {
      health = this.health()
    } catch {
      return // the database is closing
    }
    this.toldState = state
    this.toldAt = now
    for (const listener of this.healthListeners) listener(health)
  }

  /**
   * The messages committed and not known to be in Redis: those held in memory, or, when the
   * relay let them go, every message of the table (none is known to be in Redis until the
   * reconciliation has compared).
   */
  private waiting(): { waiting: number; oldest_at: number | null } {
    if (this.reconcileDue || this.reconciling) return this.outbox.backlog()
    const oldest = this.sending[0] ?? this.messages[0]
    return { waiting: this.sending.length + this.messages.length, oldest_at: oldest?.created_at ?? null }
  }

  /** Resolves once the relay has nothing in hand: no pass running or due. For tests and shutdown. */
  async idle(): Promise<void> {
    while (this.filling || this.running) await (this.filling ?? this.running)
  }

  /**
   * Stops: the pass in progress ends and the prefix's claim is deleted (or they are left after
   * {@link STOP_GRACE_MS}), and the connection closes (what waits stays in the outbox).
   */
  async stop(): Promise<void> {
    this.stopped = true
    this.unsubscribe()
    clearInterval(this.timer)
    clearTimeout(this.fillRetry)
    let grace: NodeJS.Timeout | undefined
    const graceOver = new Promise((resolve) => (grace = setTimeout(resolve, STOP_GRACE_MS)))
    await Promise.race([this.idle(), graceOver])
    // The prefix left free for the next host at once, within the same grace; a Redis that does not answer keeps it until it expires.
    if (this.connected) await Promise.race([this.claim.release(this.redis).catch(() => {}), graceOver])
    clearTimeout(grace)
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

  /** Forgets what is held in memory: the next pass reconciles from the outbox table, which holds it all. */
  private letGo(): void {
    this.reconcileDue = true
    this.messages = []
    this.grants = []
    this.ended = []
  }

  /** Deletes the consumers of workers that are gone (see {@link RedisRelay.sweepConsumers}); resolves once done. */
  async sweep(): Promise<void> {
    this.sweepDue = true
    this.kick()
    await this.idle()
  }

  private checkStuck(): void {
    this.probe()
    this.sayIfSilent()
    this.tellHealth(true)
    if (!this.connected || this.claim.state !== 'held') return
    const now = this.options.engine.now()
    if (now - this.lastSweepAt >= SWEEP_INTERVAL_MS) {
      this.lastSweepAt = now
      this.sweepDue = true
      this.kick()
    }
    if (Date.now() - this.lastCountAt >= COUNT_CHECK_MS) {
      this.lastCountAt = Date.now()
      this.countDue = true
      this.kick()
    }
    // What waits while a reconciliation is due or under way is the table's: the reconciliation settles it.
    if (this.reconcileDue || this.reconciling) return
    let oldest: number | null
    try {
      oldest = this.waiting().oldest_at
    } catch {
      return // the database is closing
    }
    if (oldest !== null && this.options.engine.now() - oldest >= this.stuckAfterMs) {
      this.letGo()
      this.kick()
    }
  }

  /** One pass (see the module's comment); a failure lets go of what is held, for the reconciliation to settle. */
  private async pass(): Promise<void> {
    if (!this.connected || this.stopped || this.claim.state !== 'held' || this.filling) return
    // Backing off after passes that failed: the probe's kick, once a second, tries again when it is time.
    if (Date.now() < this.retryAt) return
    try {
      if (this.reconcileDue) {
        // Cleared first: what commits while it runs is held as usual and sent by the next pass.
        this.reconcileDue = false
        this.reconciling = true
        try {
          await this.reconcile()
        } finally {
          this.reconciling = false
        }
      }
      const inStep = await this.send()
      if (this.sweepDue) {
        this.sweepDue = false
        await this.sweepConsumers()
      }
      if (inStep && this.countDue) {
        this.countDue = false
        await this.countStreams()
      }
      if (inStep) this.passWent()
      else this.passFailed(null)
    } catch (error) {
      if (this.stopped) return // a pass a stop left: what it carried stays in the outbox
      const message = String((error as Error)?.message ?? error)
      const delayMs = this.passFailed(isRedisRefusal(message) ? message : null)
      this.limiter.line(
        'redis pass',
        `leasehold: relaying to Redis failed (${redisFaultWords(message)}); messages wait in the outbox, and the relay compares each stream with it again ${delayMs === 0 ? 'at once' : `in ${Math.round(delayMs / 1000)} s`}, and on reconnect`,
      )
    } finally {
      this.sending = []
    }
  }

  /** A pass went through: Redis takes what the relay sends. */
  private passWent(): void {
    this.failedPasses = 0
    this.retryAt = 0
    if (this.passRefusal === null) return
    this.passRefusal = null
    this.tellHealth()
  }

  /**
   * A pass failed (refused by Redis with `refusal`, or left Redis out of step): a reconciliation is
   * due, after the back-off's delay, which is returned. The kick that runs it then is the probe's.
   */
  private passFailed(refusal: string | null): number {
    this.failedPasses += 1
    const delayMs = passRetryDelayMs(this.failedPasses)
    this.retryAt = Date.now() + delayMs
    this.letGo()
    if (delayMs === 0) this.again = true
    if (refusal !== this.passRefusal && refusal !== null) {
      this.passRefusal = refusal
      this.tellHealth()
    }
    return delayMs
  }

  private stream(queue: string): string {
    return queueStream(this.prefix, queue)
  }

  /**
   * Sends what the commits since the last pass changed, in one pipeline: publish, claim,
   * acknowledge. False when Redis turned out out of step (an entry there already, a group gone):
   * a reconciliation is due.
   */
  private async send(): Promise<boolean> {
    const { messages, grants, ended } = this
    if (messages.length + grants.length + ended.length === 0) return true
    this.messages = []
    this.grants = []
    this.ended = []
    // Given and ended since the last pass: Redis need never hear of it.
    const gone = new Set<number>()
    if (messages.length > 0 && ended.length > 0) {
      const given = new Set(messages.map((m) => m.enqueue_id))
      for (const e of ended) if (given.has(e.enqueue_id)) gone.add(e.enqueue_id)
    }
    const publish = gone.size === 0 ? messages : messages.filter((m) => !gone.has(m.enqueue_id))
    const goneNames = new Set([...gone].map(streamMessageName))
    const claims = goneNames.size === 0 ? grants : grants.filter((g) => !goneNames.has(g.redis_id))
    const acks = gone.size === 0 ? ended : ended.filter((e) => !gone.has(e.enqueue_id))
    this.sending = publish
    if (publish.length > 0) beforeXadd()

    const pipeline = this.redis.pipeline()
    let groupsAsked = 0
    const newStreams: string[] = []
    for (const stream of new Set(publish.map((m) => this.stream(m.queue)))) {
      if (this.groupsMade.has(stream)) continue
      pipeline.xgroup('CREATE', stream, CONSUMER_GROUP, '0', 'MKSTREAM')
      newStreams.push(stream)
      groupsAsked += 1
    }
    const publishGroups = groupBy(publish, (m) => this.stream(m.queue))
    for (const [stream, group] of publishGroups) xaddMany(pipeline, stream, group)
    const claimGroups = groupBy(claims, (g) => `${g.queue}\n${g.worker_id}`)
    for (const group of claimGroups.values()) {
      const { queue, worker_id } = group[0]!
      pipeline.xclaim(this.stream(queue), CONSUMER_GROUP, worker_id, 0, ...group.map((g) => g.redis_id), 'FORCE', 'JUSTID')
    }
    const ackGroups = groupBy(acks, (e) => e.queue)
    for (const [queue, group] of ackGroups) {
      const ids = group.map((e) => streamMessageName(e.enqueue_id))
      pipeline.xack(this.stream(queue), CONSUMER_GROUP, ...ids)
      pipeline.xdel(this.stream(queue), ...ids)
    }
    const results: Result[] = (await pipeline.exec()) ?? []

    results.slice(0, groupsAsked).forEach(([error], i) => {
      if (error && !/BUSYGROUP/.test(error.message)) throw aboutKey(newStreams[i]!, error)
    })
    for (const stream of newStreams) this.groupsMade.add(stream)
    let at = groupsAsked
    let outOfOrder = false
    const published = [...publishGroups.keys()]
    results.slice(at, at + publishGroups.size).forEach(([error, refused], i) => {
      if (error) throw aboutKey(published[i]!, error)
      for (const reason of (refused as string[]).filter((_, r) => r % 2 === 1)) {
        // The entry is there already (published before a crash), or the stream moved past its id: the reconciliation settles which.
        if (/equal or smaller/.test(reason)) outOfOrder = true
        else throw aboutKey(published[i]!, reason)
      }
    })
    at += publishGroups.size
    // A claim whose stream or group Redis lost: the reconciliation makes the group again and claims it anew.
    const claimErrors = results.slice(at, at + claimGroups.size).flatMap(([error]) => (error ? [error] : []))
    at += claimGroups.size
    // NOGROUP: Redis lost the stream, and with it the entry. Anything else: the reconciliation deletes it.
    const ackFailed = results.slice(at).some(([error]) => error && !/NOGROUP/.test(error.message))
    const noGroup = claimErrors.find((error) => /NOGROUP/.test(error.message))
    if (noGroup) {
      this.limiter.line('redis group gone', `leasehold: Redis at ${redactedUrl(this.options.url)} no longer holds a queue stream's consumer group (${noGroup.message}); the relay makes it again and claims the running jobs' messages anew`)
    }
    return !(outOfOrder || claimErrors.length > 0 || ackFailed)
  }

  /**
   * Counts each queue's stream (XLEN) against what it should hold, and reconciles when one holds
   * more or fewer entries: what Redis lost while it answered (an XTRIM, an eviction under
   * `maxmemory`, a DEL of the stream) goes out again, in enqueue order, without a restart. It runs
   * inside a pass, once the pass has sent what it held: nothing of the relay's own is in flight, and
   * Redis's streams change only by the next pass. What commits meanwhile is counted exactly: the
   * open group is committed first (its changes come to the relay), and a stream should hold the
   * table's messages less those committed and not yet sent, plus those ended and not yet acknowledged.
   * The table's messages per queue are the outbox's counts in memory: the check reads no row.
   */
  private async countStreams(): Promise<void> {
    let expected: Map<string, number>
    try {
      this.options.engine.flush()
      if (this.reconcileDue) return // held too much, or another host came: the reconciliation settles it
      expected = this.outbox.countsByQueue()
    } catch {
      return // the database is closing, or takes no writes: counted again at the next check
    }
    const heldIds = new Set(this.messages.map((m) => m.enqueue_id))
    const endedIds = new Set(this.ended.map((e) => e.enqueue_id))
    const add = (queue: string, n: number) => expected.set(queue, (expected.get(queue) ?? 0) + n)
    for (const m of this.messages) if (!endedIds.has(m.enqueue_id)) add(m.queue, -1)
    for (const e of this.ended) if (!heldIds.has(e.enqueue_id)) add(e.queue, 1)
    const queues = [...expected.keys()]
    if (queues.length === 0) return
    const pipeline = this.redis.pipeline()
    for (const queue of queues) pipeline.xlen(this.stream(queue))
    const results: Result[] = (await pipeline.exec()) ?? []
    // A key of another type answers WRONGTYPE here: the passes report it (refused), not this count.
    const off = queues.flatMap((queue, i) => {
      const [error, length] = results[i] ?? [null, null]
      return error || Number(length) === expected.get(queue) ? [] : [`${this.stream(queue)} holds ${Number(length)} where the outbox holds ${expected.get(queue)}`]
    })
    if (off.length === 0) return
    const more = off.length > 1 ? ` (and ${off.length - 1} other stream${off.length === 2 ? '' : 's'})` : ''
    this.limiter.line(
      'redis count',
      `leasehold: Redis at ${redactedUrl(this.options.url)} lost or gained entries while it answered (${off[0]}${more}: trimmed, evicted under maxmemory or deleted outside Leasehold); the relay compares each stream with the outbox and publishes what is missing again, in enqueue order`,
    )
    this.letGo()
    this.again = true
  }

  /**
   * Brings every stream in step with the outbox table: what Redis lost is published again, what
   * it holds beyond the table is deleted, and the messages of running jobs are claimed to their
   * workers again.
   */
  private async reconcile(): Promise<void> {
    // Read with nothing held: every change committed from here on is held and sent after this.
    this.messages = []
    this.grants = []
    this.ended = []
    const live = this.outbox.live()
    const byStream = groupBy(live, (row) => this.stream(row.queue))
    for (const stream of await this.streamKeys()) if (!byStream.has(stream)) byStream.set(stream, [])
    const holders = new Map<string, string>()
    for (const [worker, jobIds] of this.options.engine.activeLeasesByWorker()) for (const jobId of jobIds) holders.set(jobId, worker)
    // Nothing remembered is trusted: a group may be gone while its stream stayed (XGROUP DESTROY).
    this.groupsMade.clear()

    for (const [stream, rows] of byStream) {
      await this.reconcileStream(stream, rows).catch((error: unknown) => {
        throw aboutKey(stream, error)
      })
    }
    const claims = live.flatMap((row) => {
      const worker = holders.get(row.job_id)
      return worker ? [{ queue: row.queue, redis_id: streamMessageName(row.enqueue_id), worker_id: worker }] : []
    })
    // Sent with the next changes, after the publishing above.
    this.grants = [...claims, ...this.grants]
  }

  /** Brings one stream in step with its messages in the outbox table, `rows`. */
  private async reconcileStream(stream: string, rows: readonly OutboxMessage[]): Promise<void> {
    if (rows.length > 0) await this.makeGroup(stream)
    const present = await this.entryIds(stream)
    const wanted = new Set(rows.map((row) => streamMessageName(row.enqueue_id)))
    const strays = [...present].filter((id) => !wanted.has(id))
    const missing = rows.filter((row) => !present.has(streamMessageName(row.enqueue_id)))
    if (strays.length > 0) {
      for (let i = 0; i < strays.length; i += BATCH) {
        const ids = strays.slice(i, i + BATCH)
        await this.redis.pipeline().xack(stream, CONSUMER_GROUP, ...ids).xdel(stream, ...ids).exec()
      }
    }
    if (missing.length === 0) return
    const last = await this.lastGeneratedId(stream)
    if (last !== null && missing.some((row) => idAtOrBefore(streamMessageName(row.enqueue_id), last))) {
      await this.rebuild(stream, rows)
      return
    }
    beforeXadd()
    for (let i = 0; i < missing.length; i += BATCH) {
      const [error, refused] = ((await xaddMany(this.redis.pipeline(), stream, missing.slice(i, i + BATCH)).exec()) ?? [])[0] ?? [null, []]
      if (error) throw error
      if ((refused as string[]).length > 0) throw new Error(`${(refused as string[])[1]} (entry ${(refused as string[])[0]})`)
    }
  }

  /**
   * Deletes from each queue stream's group the consumers of workers that are gone: a consumer
   * (named after a worker) that holds no pending message, has had none claimed to it for
   * `departedAfterMs`, and whose worker holds no lease. A worker that comes back is a consumer
   * again at its next claim. No claim can slip between the look and the delete: claims are sent
   * by passes, and this runs inside one, after the leases were read.
   */
  private async sweepConsumers(): Promise<void> {
    const departedAfterMs = this.options.departedAfterMs ?? DEFAULT_DEPARTED_AFTER_MS
    const streams = await this.streamKeys()
    const looks = this.redis.pipeline()
    for (const stream of streams) looks.xinfo('CONSUMERS', stream, CONSUMER_GROUP)
    const answers: Result[] = (await looks.exec()) ?? []
    const holding = this.options.engine.activeLeasesByWorker()
    const deletes = this.redis.pipeline()
    let count = 0
    answers.forEach(([error, consumers], i) => {
      if (error) return // the stream or its group is gone: so are its consumers
      for (const fields of consumers as unknown[][]) {
        const info = new Map<string, unknown>()
        for (let f = 0; f + 1 < fields.length; f += 2) info.set(String(fields[f]), fields[f + 1])
        const name = String(info.get('name'))
        if (Number(info.get('pending')) > 0 || Number(info.get('idle')) < departedAfterMs || holding.has(name)) continue
        deletes.xgroup('DELCONSUMER', streams[i]!, CONSUMER_GROUP, name)
        count += 1
      }
    })
    if (count > 0) await deletes.exec()
  }

  /** Makes the stream's consumer group (and the stream), unless it is there. */
  private async makeGroup(stream: string): Promise<void> {
    await this.redis.xgroup('CREATE', stream, CONSUMER_GROUP, '0', 'MKSTREAM').catch((error: Error) => {
      if (!/BUSYGROUP/.test(error.message)) throw error
    })
    this.groupsMade.add(stream)
  }

  /** Writes a stream anew from the table (its last id moved past a message it lost: XADD cannot go back). */
  private async rebuild(stream: string, rows: readonly OutboxMessage[]): Promise<void> {
    beforeXadd()
    const multi = this.redis.multi().del(stream)
    for (const row of rows) multi.xadd(stream, ...xaddArgs(row))
    multi.xgroup('CREATE', stream, CONSUMER_GROUP, '0', 'MKSTREAM')
    await multi.exec()
    this.groupsMade.add(stream)
  }

  /**
   * This prefix's queue streams in Redis: the streams `<prefix>q:<queue>` (the prefix escaped in
   * the pattern, each key checked to be one), less those under a longer prefix another host
   * claims (`leasehold:q:q:default` is queue `default` of a host on `leasehold:q:`, not this
   * host's `q:default`). The reconciliation deletes what these hold beyond the outbox, and the
   * sweep their consumers: a key of another host's here would lose it its entries.
   */
  private async streamKeys(): Promise<string[]> {
    const queuesAt = queueStream(this.prefix, '')
    const keys = (await scanKeys(this.redis, `${globEscaped(queuesAt)}*`, 'stream')).filter((key) => key.startsWith(queuesAt) && QueueName.safeParse(key.slice(queuesAt.length)).success)
    if (keys.length === 0) return keys
    const others = await this.claim.within(this.redis)
    return keys.filter((key) => !others.some((other) => key.startsWith(other.prefix)))
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
