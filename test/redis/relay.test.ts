import type { Redis } from 'ioredis'
import { afterEach, beforeAll, describe, expect, test } from 'vitest'
import { openDatabase } from '../../src-main/db/open'
import { Engine, streamMessageName } from '../../src-main/engine'
import { ManualClock } from '../../src-main/engine/rules/clock'
import { engineContext } from '../../src-main/engine/internals'
import { claimAnswer } from '../../src-main/http/views/worker'
import { CONSUMER_GROUP, COUNT_CHECK_MS, passRetryDelayMs, RedisRelay, UNANSWERED_AFTER_MS } from '../../src-main/redis/relay'
import { prefixClaimKey } from '../../src-shared/redis-streams'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { database, onDatabase } from '../helpers/database'
import { aJob, setup, T0 } from '../helpers/engine'
import { until } from '../helpers/until'
import { watchRedis } from './monitor'
import { type TestRedis, useTestRedis } from './redis-server'

const PREFIX = 'lh-test:'
const stream = (queue = 'default') => `${PREFIX}q:${queue}`

const redis = useTestRedis()
let server: TestRedis
let admin: Redis
const relays: RedisRelay[] = []
beforeAll(() => ({ server, admin } = redis.get()))
afterEach(async () => {
  for (const relay of relays.splice(0)) await relay.stop()
  if (admin.status === 'ready') await admin.flushall()
})

function relayFor(engine: Engine, options: { url?: string; stuckAfterMs?: number; departedAfterMs?: number; log?: (line: string) => void } = {}): RedisRelay {
  const relay = new RedisRelay({ engine, url: server.url, prefix: PREFIX, log: () => {}, ...options })
  relays.push(relay)
  return relay
}

async function started(engine: Engine, options: { departedAfterMs?: number; log?: (line: string) => void } = {}): Promise<RedisRelay> {
  const relay = relayFor(engine, options)
  await relay.start()
  await until(() => relay.connected && relay.claim.state === 'held', 5000, 'relay connected')
  await relay.idle()
  return relay
}

const entryIds = async (queue = 'default') => (await admin.xrange(stream(queue), '-', '+')).map(([id]) => id)
/** [consumer, count] pairs of the group's pending entries. */
const pendingByConsumer = async (queue = 'default') => {
  const summary = (await admin.xpending(stream(queue), CONSUMER_GROUP)) as [number, string | null, string | null, [string, string][] | null]
  return summary[3] ?? []
}

function claimOne(engine: Engine, worker = 'w1') {
  const granted = engine.claimBatch({ worker_id: worker }, 1).granted[0]
  if (!granted) throw new Error('nothing granted')
  return granted
}

const reportOf = (g: ReturnType<typeof claimOne>, worker = 'w1') => ({ job_id: g.job_id, attempt_id: g.attempt_id, lease_token: g.lease_token, worker_id: worker })

/**
 * An engine on a database that lists the SQL of every statement it runs (run, get, all, iterate)
 * while `recording(true)`: the engine prepares each statement once, so prepares alone would miss
 * the statements run again.
 */
function engineRecordingStatements(): { engine: Engine; ran: string[]; recording(on: boolean): void } {
  const { sqlite } = openDatabase({ path: ':memory:' })
  const ran: string[] = []
  let on = false
  const prepare = sqlite.prepare.bind(sqlite)
  sqlite.prepare = ((source: string) => {
    const statement = prepare(source) as unknown as Record<'run' | 'get' | 'all' | 'iterate', (...args: unknown[]) => unknown>
    for (const method of ['run', 'get', 'all', 'iterate'] as const) {
      const original = statement[method].bind(statement)
      statement[method] = (...args: unknown[]) => {
        if (on) ran.push(source)
        return original(...args)
      }
    }
    return statement
  }) as typeof sqlite.prepare
  const engine = onDatabase(new Engine({ db: sqlite, clock: new ManualClock(T0), capacity: { total_units: 100, busy_rating: 0 } }), sqlite)
  return { engine, ran, recording: (value) => (on = value) }
}

/**
 * Every command Redis runs from now on, each as its arguments (a script's own commands
 * included, as MONITOR shows them), until `stop`. An id is looked for among the arguments,
 * never inside one: a short entry id such as `0-2` can stand inside a job's id by chance.
 */
const watchCommands = () => watchRedis(server.port)

describe('the outbox of a data dir that ran without Redis', () => {
  const messageIds = (jobs: { stream_message_id: number | null }[]) => jobs.map((job) => streamMessageName(job.stream_message_id!))

  test('every job that waits in a queue has its message in its stream once the host runs with Redis, in order, and a restart adds none twice', async () => {
    const { engine } = setup()
    // A host without Redis: no outbox is kept while these are written.
    const waiting = [engine.submit(aJob()).job, engine.submit(aJob()).job]
    const mail = engine.submit(aJob({ queue: 'mail' })).job
    const finished = engine.submit(aJob()).job
    engine.cancel(finished.id)
    waiting.push(engine.submit(aJob({ run_at: Date.UTC(2027, 0, 1) })).job)

    const first = await started(engine)
    expect(await entryIds()).toEqual(messageIds(waiting))
    expect(await entryIds('mail')).toEqual(messageIds([mail]))
    expect(first.health().waiting).toBe(0)
    // Submitted with Redis on: after them, as ever.
    const later = engine.submit(aJob()).job
    await until(async () => (await entryIds()).length === waiting.length + 1, 3000, 'the later job XADDed')
    expect(await entryIds()).toEqual(messageIds([...waiting, later]))

    // A restart on the same data dir finds every message there: none is added again.
    await first.stop()
    const { commands, stop } = await watchCommands()
    try {
      await started(engine)
      expect(commands.filter(([name]) => name === 'xadd')).toEqual([])
    } finally {
      stop()
    }
    expect(await entryIds()).toEqual(messageIds([...waiting, later]))
  })

  test('the messages of jobs that finished or were queued again while the host ran without Redis leave the outbox, and the requeued job gets its new one', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'leasehold-outbox-')), 'leasehold.db')
    // With Redis: both jobs get their outbox rows.
    const before = setup({ path }).engine
    before.outbox()
    const done = before.submit(aJob({ max_attempts: 3 })).job
    const retried = before.submit(aJob({ max_attempts: 3 })).job
    database(before).close()

    // Without Redis: one job ends, the other fails and is queued again under a new message.
    const without = setup({ path }).engine
    without.complete(reportOf(claimOne(without)))
    without.fail({ ...reportOf(claimOne(without)), error: { message: 'try again', retryable: true } })
    const requeued = without.getJob(retried.id)
    expect(requeued.stream_message_id).not.toBe(retried.stream_message_id)
    database(without).close()

    const { engine } = setup({ path })
    await started(engine)
    expect(engine.getJob(done.id).state).toBe('DONE')
    expect(engine.outbox().live()).toEqual([expect.objectContaining({ enqueue_id: requeued.stream_message_id, job_id: retried.id })])
    expect(await entryIds()).toEqual(messageIds([requeued]))
  })
})

describe('the outbox and the relay', () => {
  test('an enqueue writes its outbox row in its own transaction; the relay XADDs it to the queue stream after the commit', async () => {
    const { engine } = setup()
    const outbox = engine.outbox()
    // A submit whose transaction rolls back leaves no row.
    expect(() =>
      engineContext(engine).transact(() => {
        engine.submit(aJob())
        throw new Error('rolled back')
      }),
    ).toThrow('rolled back')
    expect(outbox.live()).toEqual([])

    const job = engine.submit(aJob({ queue: 'mail' })).job
    expect(outbox.live()).toEqual([expect.objectContaining({ enqueue_id: job.stream_message_id, job_id: job.id, queue: 'mail' })])
    expect(await admin.exists(stream('mail'))).toBe(0)

    await started(engine)
    const id = streamMessageName(job.stream_message_id!)
    expect(await admin.xrange(stream('mail'), '-', '+')).toEqual([[id, ['job_id', job.id, 'enqueue_id', String(job.stream_message_id)]]])
    expect(outbox.live()).toEqual([expect.objectContaining({ enqueue_id: job.stream_message_id })])

    // Later commits are relayed as they commit.
    const next = engine.submit(aJob({ queue: 'mail' })).job
    await until(async () => (await entryIds('mail')).includes(streamMessageName(next.stream_message_id!)), 3000, 'second message XADDed')
  })

  test("a claim answers its message's Redis id, and the message is XCLAIMed to the worker's consumer", async () => {
    const { engine } = setup()
    const relay = await started(engine)
    engine.submit(aJob())
    await relay.idle()
    const [id] = await entryIds()
    const granted = claimOne(engine, 'w1')
    expect(claimAnswer(granted)).toMatchObject({ claimed: true, message_id: id })
    await until(async () => (await pendingByConsumer()).length > 0, 3000, 'XCLAIM')
    expect(await pendingByConsumer()).toEqual([['w1', '1']])
  })

  test('a message is acknowledged (XACK, XDEL) only once the final state is committed', async () => {
    const { engine } = setup()
    const relay = await started(engine)
    engine.submit(aJob())
    const granted = claimOne(engine)
    await relay.idle()
    // A completion that rolls back acknowledges nothing.
    expect(() =>
      engineContext(engine).transact(() => {
        engine.complete(reportOf(granted))
        throw new Error('rolled back')
      }),
    ).toThrow('rolled back')
    await relay.idle()
    expect(await pendingByConsumer()).toEqual([['w1', '1']])
    expect(await entryIds()).toHaveLength(1)

    engine.complete(reportOf(granted))
    await until(async () => (await entryIds()).length === 0, 3000, 'entry deleted')
    expect(await pendingByConsumer()).toEqual([])
    expect(engine.outbox().live()).toEqual([])
  })

  test("a requeue XADDs the job's new message before it acknowledges the old one", async () => {
    const { engine } = setup()
    const relay = await started(engine)
    const job = engine.submit(aJob()).job
    const granted = claimOne(engine)
    await relay.idle()
    const { commands, stop } = await watchCommands()
    try {
      engine.fail({ ...reportOf(granted), error: { message: 'try again', retryable: true } })
      const requeued = engine.getJob(job.id)
      expect(requeued.state).toBe('QUEUED')
      const oldId = streamMessageName(job.stream_message_id!)
      const newId = streamMessageName(requeued.stream_message_id!)
      await until(() => commands.some(([name]) => name === 'xack'), 3000, 'XACK')
      const added = commands.findIndex(([name, ...args]) => name === 'xadd' && args.includes(newId))
      const acked = commands.findIndex(([name, ...args]) => name === 'xack' && args.includes(oldId))
      expect(added).toBeGreaterThanOrEqual(0)
      expect(acked).toBeGreaterThan(added)
      await until(async () => JSON.stringify(await entryIds()) === JSON.stringify([newId]), 3000, 'only the new message left')
    } finally {
      stop()
    }
  })

  test('a message given and ended between two passes never reaches Redis; the messages around it do', async () => {
    const { engine } = setup()
    const relay = await started(engine)
    const { commands, stop } = await watchCommands()
    try {
      // The first commit starts a pass; the rest commit while it waits for Redis, and go in the next one.
      const first = engine.submit(aJob()).job
      const brief = engine.submit(aJob()).job
      const granted = claimOne(engine)
      expect(granted.job_id).toBe(first.id)
      const second = claimOne(engine)
      expect(second.job_id).toBe(brief.id)
      engine.complete(reportOf(second))
      await relay.idle()
      const firstId = streamMessageName(first.stream_message_id!)
      const briefId = streamMessageName(brief.stream_message_id!)
      expect(await entryIds()).toEqual([firstId])
      expect(await pendingByConsumer()).toEqual([['w1', '1']])
      expect(commands.some((args) => args.includes(firstId))).toBe(true) // the watch saw the pass
      expect(commands.filter((args) => args.includes(briefId))).toEqual([])
    } finally {
      stop()
    }
  })

  test('the consumer of a worker that holds nothing and has had no claim for the bound is deleted from the group; a holder stays', async () => {
    const { engine } = setup()
    const relay = await started(engine, { departedAfterMs: 0 })
    engine.submit(aJob())
    engine.submit(aJob())
    const done = claimOne(engine, 'gone')
    claimOne(engine, 'holder')
    engine.complete(reportOf(done, 'gone'))
    await relay.idle()
    const consumers = async () => ((await admin.xinfo('CONSUMERS', stream(), CONSUMER_GROUP)) as unknown[][]).map((fields) => fields[1])
    expect((await consumers()).sort()).toEqual(['gone', 'holder'])
    await relay.sweep()
    expect(await consumers()).toEqual(['holder'])
    expect(await pendingByConsumer()).toEqual([['holder', '1']])
  })

  /** Streams of another host's (or application's) beside the relay's: a queue with entries, one pending and an idle consumer, and a reply stream. */
  async function othersStreams(queueKey: string, repliesKey: string): Promise<() => Promise<unknown>> {
    await admin.xgroup('CREATE', queueKey, CONSUMER_GROUP, '0', 'MKSTREAM')
    for (const id of ['0-1', '0-2', '0-3']) await admin.xadd(queueKey, id, 'job_id', `other-${id}`, 'enqueue_id', id.slice(2))
    await admin.xreadgroup('GROUP', CONSUMER_GROUP, 'busy', 'COUNT', 1, 'STREAMS', queueKey, '>')
    await admin.call('XGROUP', 'CREATECONSUMER', queueKey, CONSUMER_GROUP, 'idle')
    await admin.xadd(repliesKey, '*', 'body', '{"answer":1}')
    const look = async () => ({
      entries: (await admin.xrange(queueKey, '-', '+')).map(([id]) => id),
      pending: (await admin.xpending(queueKey, CONSUMER_GROUP)) as unknown,
      consumers: ((await admin.xinfo('CONSUMERS', queueKey, CONSUMER_GROUP)) as unknown[][]).map((fields) => fields[1]).sort(),
      replies: await admin.xlen(repliesKey),
    })
    const before = await look()
    expect(before).toMatchObject({ entries: ['0-1', '0-2', '0-3'], consumers: ['busy', 'idle'], replies: 1 })
    return async () => expect(await look()).toEqual(before)
  }

  /** Makes the relay reconcile (a reconnect), and resolves once it has: a job submitted meanwhile is in its stream. */
  async function reconciled(engine: Engine, relay: RedisRelay, queueKey: string): Promise<void> {
    await admin.client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes')
    await until(() => relay.connected, 5000, 'reconnected')
    const job = engine.submit(aJob()).job
    await until(async () => (await admin.xrange(queueKey, '-', '+')).some(([, fields]) => fields[1] === job.id), 5000, 'reconciled')
    await relay.idle()
    await relay.sweep()
  }

  test("a relay's reconciliation and consumer sweep leave the streams under a longer prefix another host claims (lh-test:q:q:default is that host's queue default)", async () => {
    const { engine } = setup()
    const relay = await started(engine, { departedAfterMs: 0 })
    await admin.set(prefixClaimKey(`${PREFIX}q:`), 'f00d pid 7 on elsewhere, data dir /srv/other', 'PX', 60_000)
    const unchanged = await othersStreams(`${PREFIX}q:q:default`, `${PREFIX}q:worker:wc:replies`)
    await reconciled(engine, relay, stream())
    await unchanged()
  })

  test("a relay on a prefix with glob characters reconciles only its own streams: the prefix is escaped in SCAN's pattern", async () => {
    const { engine } = setup()
    const prefix = 'g*:'
    const relay = new RedisRelay({ engine, url: server.url, prefix, log: () => {}, departedAfterMs: 0 })
    relays.push(relay)
    await relay.start()
    await until(() => relay.connected && relay.claim.state === 'held', 5000, 'relay connected')
    const unchanged = await othersStreams('gx:q:default', 'g-other:q:worker:wc:replies')
    await reconciled(engine, relay, `${prefix}q:default`)
    await unchanged()
  })

  test('while Redis is away enqueues still commit and wait in the outbox; health says how many', async () => {
    const { engine } = setup()
    const relay = await started(engine)
    await server.kill()
    await until(() => !relay.connected, 5000, 'relay sees Redis gone')
    for (let i = 0; i < 5; i++) engine.submit(aJob())
    expect(relay.health()).toMatchObject({ connected: false, waiting: 5 })
    await server.restart()
    await until(() => relay.health().waiting === 0, 10_000, 'outbox drained after restart')
    expect(relay.health()).toMatchObject({ connected: true, waiting: 0, oldest_wait_ms: null })
    expect(await entryIds()).toHaveLength(5)
  })

  test('Redis killed and restarted empty under load: the host publishes every missing message again, and every job ends DONE exactly once', async () => {
    const { engine } = setup({ total_units: 1000 })
    const relay = await started(engine)
    const JOBS = 300
    const ids: string[] = []
    const completions = new Map<string, number>()
    let stop = false
    let paused = false
    // Workers: claim and complete in a loop, as the host's transports do, while jobs keep coming.
    const work = async (worker: string) => {
      while (!stop) {
        const claims = paused ? { granted: [] } : await engine.run(() => engine.claimBatch({ worker_id: worker }, 4))
        for (const g of claims.granted) {
          await engine.run(() => engine.complete(reportOf(g, worker)))
          completions.set(g.job_id, (completions.get(g.job_id) ?? 0) + 1)
        }
        await new Promise((resolve) => setImmediate(resolve))
      }
    }
    const workers = [work('a'), work('b')]
    const submitSome = async (n: number) => {
      for (let i = 0; i < n; i++) ids.push((await engine.run(() => engine.submit(aJob()))).job.id)
    }
    await submitSome(JOBS / 3)
    paused = true // some jobs stay queued with their messages published
    await submitSome(20)
    await relay.idle()
    await server.kill()
    await submitSome(JOBS / 3 - 20) // committed while Redis is away: they wait in the outbox
    await server.restart() // empty: no streams, no groups
    // Every unfinished job's message is in Redis again, under its id: those Redis lost and those that waited.
    const unfinished = () => ids.map((id) => engine.getJob(id)).filter((job) => job.state !== 'DONE').map((job) => streamMessageName(job.stream_message_id!))
    expect(unfinished().length).toBeGreaterThan(JOBS / 3 - 20)
    await until(async () => relay.connected && JSON.stringify((await entryIds().catch(() => [])).sort()) === JSON.stringify(unfinished().sort()), 10_000, 'republished')
    paused = false
    await submitSome(JOBS / 3)
    await until(() => ids.every((id) => engine.getJob(id).state === 'DONE'), 20_000, 'every job DONE')
    stop = true
    await Promise.all(workers)
    expect([...completions.values()].every((n) => n === 1)).toBe(true)
    expect(completions.size).toBe(JOBS)
    for (const id of ids) expect(engine.attempts(id)).toHaveLength(1)
    // Redis caught up with SQLite: nothing left in the outbox or in the stream, nothing pending.
    await until(async () => relay.connected && engine.outbox().live().length === 0, 10_000, 'ledger settled')
    await relay.idle()
    expect(await entryIds()).toEqual([])
    expect(await pendingByConsumer()).toEqual([])
  })

  test('messages Redis lost are published again under their ids at reconnect, and held ones are claimed to their workers again', async () => {
    const { engine } = setup()
    const relay = await started(engine)
    const jobs = [0, 1, 2].map(() => engine.submit(aJob()).job)
    claimOne(engine, 'w1')
    await until(async () => (await pendingByConsumer()).length > 0, 3000, 'claimed')
    await server.kill()
    await server.restart()
    const expected = jobs.map((j) => streamMessageName(j.stream_message_id!))
    await until(async () => admin.status === 'ready' && JSON.stringify(await entryIds().catch(() => [])) === JSON.stringify(expected), 10_000, 'republished')
    await until(async () => JSON.stringify(await pendingByConsumer()) === JSON.stringify([['w1', '1']]), 3000, 'held message claimed again')
    await relay.idle()
  })

  test("a stream whose last id moved past a lost message is rebuilt from the ledger, and entries the ledger does not hold are deleted", async () => {
    const { engine } = setup()
    const relay = await started(engine)
    const [a, b] = [engine.submit(aJob()).job, engine.submit(aJob()).job]
    await relay.idle()
    // Redis lost the first message (a failover to a replica that lagged), and holds one nobody wrote.
    await admin.xdel(stream(), streamMessageName(a.stream_message_id!))
    await admin.xadd(stream(), '0-999999', 'job_id', 'ghost', 'enqueue_id', '999999')
    // A message that has waited past the bound makes the relay reconcile; so does a reconnect.
    await admin.client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes')
    await until(
      async () => JSON.stringify(await entryIds()) === JSON.stringify([a, b].map((j) => streamMessageName(j.stream_message_id!))),
      10_000,
      'stream rebuilt',
    )
    await relay.idle()
  })

  test.each([
    ['its consumer group destroyed (XGROUP DESTROY)', (key: string) => admin.xgroup('DESTROY', key, CONSUMER_GROUP)],
    ['its stream deleted (DEL)', (key: string) => admin.del(key)],
    ['the database flushed (FLUSHDB)', () => admin.flushdb()],
  ])('a queue stream with %s while Redis answers: the next grant makes the group again and claims its message, without a loop of commands', async (_, lose) => {
    const { engine } = setup()
    const lines: string[] = []
    const relay = await started(engine, { log: (line) => lines.push(line) })
    // The stream and its group made by a job that ran and ended: the stream stays, empty.
    engine.submit(aJob())
    await relay.idle()
    engine.complete(reportOf(claimOne(engine, 'w1')))
    await relay.idle()
    await lose(stream())
    const { commands, stop } = await watchCommands()
    try {
      engine.submit(aJob())
      claimOne(engine, 'w1')
      await until(async () => (await pendingByConsumer().catch(() => [])).length > 0, 5000, 'the grant claimed in a group made again')
      expect(await pendingByConsumer()).toEqual([['w1', '1']])
      expect(await entryIds()).toHaveLength(1)
      // Settled: a second later Redis has heard little more than the claim's refreshes.
      const settled = commands.length
      await new Promise((resolve) => setTimeout(resolve, 1_000))
      expect(commands.length - settled).toBeLessThan(10)
    } finally {
      stop()
    }
    expect(relay.health()).toMatchObject({ connected: true, refused: null, waiting: 0 })
    expect(lines).toContainEqual(expect.stringMatching(/^leasehold: Redis at \S+ no longer holds a queue stream's consumer group \(NOGROUP /))
  })

  test('queue streams that lose entries while Redis answers (XTRIM, DEL) are refilled within the count check’s period, in enqueue order, without a restart, said in one line', async () => {
    const { engine } = setup()
    const lines: string[] = []
    const relay = await started(engine, { log: (line) => lines.push(line) })
    const jobs = [engine.submit(aJob()).job, engine.submit(aJob()).job]
    const others = [engine.submit(aJob({ queue: 'other' })).job, engine.submit(aJob({ queue: 'other' })).job, engine.submit(aJob({ queue: 'other' })).job]
    await relay.idle()
    const ids = (list: { stream_message_id: number | null }[]) => list.map((job) => streamMessageName(job.stream_message_id!))
    expect(await entryIds('other')).toEqual(ids(others))
    await admin.xtrim(stream('other'), 'MAXLEN', 0)
    await admin.del(stream())
    await until(async () => (await entryIds('other')).length === 3 && (await entryIds()).length === 2, COUNT_CHECK_MS + 4_000, 'the streams refilled')
    expect(await entryIds('other')).toEqual(ids(others))
    expect(await entryIds()).toEqual(ids(jobs))
    expect(lines.filter((line) => /lost or gained entries while it answered/.test(line))).toEqual([expect.stringMatching(/\(lh-test:q:\S+ holds 0 where the outbox holds [23] \(and 1 other stream\): trimmed, evicted under maxmemory or deleted outside Leasehold\)/)])
  }, 20_000)

  test('a normal drain never sets off the count check: streams counted while jobs are submitted, claimed and completed are found in step', async () => {
    const { engine } = setup()
    const lines: string[] = []
    const relay = await started(engine, { log: (line) => lines.push(line) })
    const watch = await watchCommands()
    const end = Date.now() + COUNT_CHECK_MS * 2 + 1_000
    while (Date.now() < end) {
      await engine.run(() => engine.submitMany(Array.from({ length: 20 }, (_, i) => aJob({ queue: i % 2 ? 'a' : 'b' }))))
      const granted = await engine.run(() => engine.claimBatch({ worker_id: 'w1' }, 15).granted)
      await engine.run(() => {
        for (const g of granted.slice(0, 10)) engine.complete(reportOf(g))
      })
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    await relay.idle()
    watch.stop()
    expect(watch.commands.filter((args) => args[0]?.toLowerCase() === 'xlen').length).toBeGreaterThanOrEqual(2)
    expect(lines.filter((line) => /lost or gained/.test(line))).toEqual([])
  }, 30_000)

  test('the count check reads no outbox row: each stream is counted against the counts the outbox keeps in memory', async () => {
    const { engine, ran, recording } = engineRecordingStatements()
    const lines: string[] = []
    const relay = await started(engine, { log: (line) => lines.push(line) })
    for (const queue of ['a', 'b', 'b']) engine.submit(aJob({ queue }))
    await relay.idle()
    const watch = await watchCommands()
    recording(true)
    try {
      await until(() => watch.commands.some((args) => args[0]?.toLowerCase() === 'xlen'), COUNT_CHECK_MS + 2_000, 'a count check')
      await relay.idle()
    } finally {
      recording(false)
      watch.stop()
    }
    expect(ran.filter((sql) => /redis_outbox/i.test(sql))).toEqual([])
    // It counted all the same, and found the streams in step.
    expect(watch.commands.filter((args) => args[0]?.toLowerCase() === 'xlen').map((args) => args[1]).sort()).toEqual([stream('a'), stream('b')])
    expect(lines.filter((line) => /lost or gained/.test(line))).toEqual([])
  }, 15_000)

  test('a URL naming a database the server does not have is no connection: health says Redis refuses it, the messages wait in the outbox, and nothing is written to database 0', async () => {
    const { engine } = setup()
    const lines: string[] = []
    const relay = relayFor(engine, { url: server.url.replace(/\/0$/, '/99'), log: (line) => lines.push(line) })
    await relay.start()
    const job = engine.submit(aJob()).job
    await until(() => relay.health().refused !== null, 5000, 'the refusal in health')
    // Long enough for a connection that went on, on database 0, to have published the job's message and claimed the prefix.
    await new Promise((resolve) => setTimeout(resolve, 1_500))
    expect(relay.health()).toMatchObject({ connected: false, refused: expect.stringMatching(/DB index is out of range/), waiting: 1 })
    expect(await admin.keys('*')).toEqual([])
    expect(lines).toContainEqual(expect.stringMatching(/^leasehold: Redis at redis:\/\/127\.0\.0\.1:\d+\/99: Redis has no database of the URL's number .*check the \/db of the Redis URL; messages wait in the outbox$/))
    expect(lines.join('\n')).not.toMatch(/connected/)
    expect(job.stream_message_id).not.toBeNull()
  }, 15_000)

  /** A relay whose queue stream's key holds a string, once Redis has refused the pass that publishes a job's message there. */
  async function refusedWrongType() {
    const { engine } = setup()
    const lines: string[] = []
    const relay = await started(engine, { log: (line) => lines.push(line) })
    await admin.set(stream(), 'junk')
    const job = engine.submit(aJob()).job
    await until(() => relay.health().refused !== null, 5000, 'the refusal in health')
    return { relay, lines, job }
  }

  test('a queue stream’s key of another type: health says what Redis refuses and names the key, the log says when it is tried again, and the message goes out once the key is a stream again', async () => {
    const { relay, lines, job } = await refusedWrongType()
    expect(relay.health()).toMatchObject({ connected: true, refused: expect.stringMatching(/^WRONGTYPE .*\(key lh-test:q:default\)$/), waiting: 1 })
    expect(lines).toContainEqual(expect.stringMatching(/^leasehold: relaying to Redis failed \(WRONGTYPE .*\(key lh-test:q:default\)\); messages wait in the outbox, and the relay compares each stream with it again (at once|in \d+ s)/))
    expect(lines.join('\n')).not.toMatch(/tried again on reconnect/)
    await admin.del(stream())
    await until(async () => (await entryIds()).includes(streamMessageName(job.stream_message_id!)), 12_000, 'published once the key is free')
    await until(() => relay.health().refused === null, 2000, 'the refusal gone from health')
  }, 20_000)

  test('a refusal that clears is said in the log in one line, as an outage’s end is: Redis takes what the host sends again', async () => {
    const { relay, lines } = await refusedWrongType()
    expect(lines.filter((line) => /takes what the host sends again/.test(line))).toEqual([])
    await admin.del(stream())
    await until(() => relay.health().refused === null, 12_000, 'the refusal gone from health')
    expect(lines.filter((line) => /takes what the host sends again/.test(line))).toEqual([
      expect.stringMatching(/^leasehold: Redis at redis:\/\/127\.0\.0\.1:\d+\/0 takes what the host sends again \(it refused: WRONGTYPE .*\(key lh-test:q:default\)\); what waited goes out now$/),
    ])
  }, 20_000)

  test('each Redis outage is said in the log, and its end, however soon one follows another', async () => {
    const { engine } = setup()
    const lines: string[] = []
    const relay = await started(engine, { log: (line) => lines.push(line) })
    const said = (pattern: RegExp) => lines.filter((line) => pattern.test(line)).length
    for (const outage of [1, 2]) {
      await server.kill()
      await until(() => said(/^leasehold: Redis at \S+: .*; messages wait in the outbox/) === outage, 5000, `outage ${outage} said`)
      await server.restart()
      await until(() => said(/^leasehold: Redis at \S+ connected$/) === outage + 1, 10_000, `the end of outage ${outage} said`)
    }
    expect(relay.connected).toBe(true)
  }, 40_000)

  test('a Redis silent for less than a command\'s timeout (paused a few seconds) has its outage said once the host reads it not connected, and its end, each time', async () => {
    const { engine } = setup()
    const lines: string[] = []
    const relay = await started(engine, { log: (line) => lines.push(line) })
    const said = (pattern: RegExp) => lines.filter((line) => pattern.test(line)).length
    for (const outage of [1, 2]) {
      process.kill(server.pid!, 'SIGSTOP')
      try {
        await until(() => !relay.connected, UNANSWERED_AFTER_MS + 2000, `outage ${outage} read`)
        await until(() => said(/^leasehold: Redis at \S+ does not answer \(a check unanswered for 3 s, nothing heard for \d+ s\); messages wait in the outbox$/) === outage, 2000, `outage ${outage} said`)
      } finally {
        process.kill(server.pid!, 'SIGCONT')
      }
      await until(() => said(/^leasehold: Redis at \S+ answers again/) === outage, 5000, `the end of outage ${outage} said`)
    }
    expect(relay.connected).toBe(true)
  }, 40_000)

  test('a pass that keeps failing is tried again at once, then after 1 s, doubling up to 10 s', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 20].map(passRetryDelayMs)).toEqual([0, 1_000, 2_000, 4_000, 8_000, 10_000, 10_000, 10_000])
  })
})
