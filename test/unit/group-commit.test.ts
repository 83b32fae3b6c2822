import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { afterEach, describe, expect, it } from 'vitest'
import { DEFAULT_ENGINE_CONFIG } from '../../src-main/engine/store/context'
import { EngineError } from '../../src-main/engine/rules/errors'
import type { Event } from '../../src-main/engine'
import { aJob, setup } from '../helpers/engine'
// White-box where the transaction is the point: a few cases open one (and a savepoint) around verbs.
import { engineContext } from '../../src-main/engine/internals'
import { database } from '../helpers/database'

const MAX_GROUP_OPERATIONS = DEFAULT_ENGINE_CONFIG.groupMaxOperations
/** No time bound, so that a loaded test machine does not cut groups short. */
const UNTIMED = { config: { groupMaxMs: 60_000 } }

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

/** An engine over a file database, and a second connection that sees only committed rows. */
function withObserver(options: Parameters<typeof setup>[0] = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-group-'))
  dirs.push(dir)
  const path = join(dir, 'leasehold.db')
  const { engine, clock } = setup({ ...options, path })
  const observer = new Database(path, { readonly: true })
  const committedJobs = () => (observer.prepare('SELECT COUNT(*) AS n FROM jobs').get() as { n: number }).n
  return { engine, clock, committedJobs, close: () => observer.close() }
}

/** Counts commits that carried events (the engine calls beforeCommit listeners once per such commit). */
function countCommits(engine: ReturnType<typeof setup>['engine']): { commits: number } {
  const counter = { commits: 0 }
  engine.beforeCommit(() => (counter.commits += 1))
  return counter
}

describe('group commit', () => {
  it('operations that arrive in the same turn share one commit', async () => {
    const { engine } = setup(UNTIMED)
    const counter = countCommits(engine)
    const answers = await Promise.all([1, 2, 3].map(() => engine.run(() => engine.submit(aJob()))))
    expect(answers).toHaveLength(3)
    expect(counter.commits).toBe(1)
    expect(engine.listJobs({ limit: 10 }).jobs).toHaveLength(3)
  })

  it('no answer and no event leaves before the group commits, and another connection sees nothing before it', async () => {
    const { engine, committedJobs, close } = withObserver(UNTIMED)
    const seen: Event[] = []
    engine.onEvent((event) => seen.push(event))
    let answered = false
    const answer = engine.run(() => engine.submit(aJob())).then((result) => {
      answered = true
      return result
    })
    await Promise.resolve() // microtasks run; the group commits only when the turn ends
    expect(answered).toBe(false)
    expect(seen).toHaveLength(0)
    expect(committedJobs()).toBe(0)
    const { job } = await answer
    expect(committedJobs()).toBe(1)
    expect(seen.map((event) => event.event_type)).toContain('JOB_SUBMITTED')
    expect(engine.getJob(job.id).state).toBe('QUEUED')
    close()
  })

  it('an operation that fails undoes only itself: the others of its group commit and are answered', async () => {
    const { engine } = setup(UNTIMED)
    const { job: held } = engine.submit(aJob())
    const before = engine.submit(aJob({ idempotency_key: 'first' }))
    const results = await Promise.allSettled([
      engine.run(() => engine.submit(aJob({ idempotency_key: 'a' }))),
      engine.run(() => engine.cancel('no-such-job')), // 404 from the engine
      engine.run(() => engine.updateStatus(held.id, { state: 'RUNNING' })), // an illegal transition
      engine.run(() => {
        engine.submit(aJob({ idempotency_key: 'kept' })) // its own savepoint: stays
        throw new Error('the operation itself throws')
      }),
      engine.run(() => engine.submit(aJob({ idempotency_key: 'b' }))),
    ])
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'rejected', 'rejected', 'fulfilled'])
    expect((results[1] as PromiseRejectedResult).reason).toBeInstanceOf(EngineError)
    expect((results[2] as PromiseRejectedResult).reason).toMatchObject({ code: 'illegal_transition' })
    const keys = engine.listJobs({ limit: 10 }).jobs.map((job) => job.idempotency_key)
    expect(keys.sort()).toEqual(['a', 'b', 'first', 'kept', null].sort())
    expect(engine.getJob(held.id).state).toBe('QUEUED')
    expect(before.duplicate).toBe(false)
  })

  it("a group's first verb runs without a savepoint; should it fail after writing, the transaction begins again without it and the group goes on", async () => {
    const { engine, committedJobs, close } = withObserver(UNTIMED)
    const ctx = engineContext(engine)
    const seen: Event[] = []
    engine.onEvent((event) => seen.push(event))
    const statements: string[] = []
    const proto = Object.getPrototypeOf(ctx.db.prepare('SELECT 1')) as { run: (...params: unknown[]) => unknown }
    const run = proto.run
    proto.run = function (this: { source: string }, ...params: unknown[]) {
      if (/^(SAVEPOINT|RELEASE|ROLLBACK|BEGIN)/.test(this.source)) statements.push(this.source.split(' ')[0]!)
      return run.apply(this, params)
    }
    try {
      const results = await Promise.allSettled([
        engine.run(() =>
          ctx.transact(() => {
            engine.submit(aJob({ idempotency_key: 'undone', queue: 'mail' }))
            throw new Error('fails after its write')
          }),
        ),
        engine.run(() => engine.submit(aJob({ idempotency_key: 'kept' }))),
      ])
      expect(results.map((r) => r.status)).toEqual(['rejected', 'fulfilled'])
      // BEGIN for the group; no savepoint for its first verb; ROLLBACK and BEGIN when it fails;
      // the next verb is again the first of an untouched transaction.
      expect(statements).toEqual(['BEGIN', 'ROLLBACK', 'BEGIN'])
    } finally {
      proto.run = run
    }
    expect(engine.listJobs({ limit: 10 }).jobs.map((job) => job.idempotency_key)).toEqual(['kept'])
    expect(committedJobs()).toBe(1)
    expect(seen.map((event) => event.event_type)).toEqual(['JOB_SUBMITTED'])
    expect(ctx.jobTally.count('mail', 1)).toBe(0)
    expect(ctx.jobTally.count('default', 1)).toBe(1)
    close()
  })

  it('a later operation of a group sees the earlier ones: a repeated key in one group is a duplicate', async () => {
    const { engine } = setup(UNTIMED)
    const [first, second] = await Promise.all([
      engine.run(() => engine.submit(aJob({ idempotency_key: 'same' }))),
      engine.run(() => engine.submit(aJob({ idempotency_key: 'same' }))),
    ])
    expect(first.duplicate).toBe(false)
    expect(second).toMatchObject({ duplicate: true, job: { id: first.job.id } })
  })

  it('a failed commit fails every operation of the group, and nothing of it stays in the database or in memory', async () => {
    const { engine } = setup({ ...UNTIMED, total_units: 100 })
    const seen: Event[] = []
    engine.onEvent((event) => seen.push(event))
    let failCommit = true
    engine.beforeCommit(() => {
      if (failCommit) throw new Error('disk I/O error')
    })
    const results = await Promise.allSettled([
      engine.run(() => engine.submit(aJob())),
      engine.run(() => engine.setCapacity({ total_units: 7 })),
      engine.run(() => engine.cancel('no-such-job')),
    ])
    expect(results.every((r) => r.status === 'rejected')).toBe(true)
    for (const result of results) expect((result as PromiseRejectedResult).reason).toMatchObject({ message: 'disk I/O error' })
    expect(seen).toHaveLength(0)
    failCommit = false
    expect(engine.listJobs({ limit: 10 }).jobs).toHaveLength(0)
    expect(engine.getCapacity().total_units).toBe(100) // the in-memory setting was put back
  })

  it('a stream message id reserved by a group that failed is reserved again: no id is given twice after a restart', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'leasehold-group-'))
    dirs.push(dir)
    const path = join(dir, 'leasehold.db')
    const first = setup({ ...UNTIMED, path })
    let failCommit = true
    first.engine.beforeCommit(() => {
      if (failCommit) throw new Error('disk I/O error')
    })
    await expect(first.engine.run(() => first.engine.submit(aJob()))).rejects.toThrow('disk I/O error')
    failCommit = false
    const kept = (await first.engine.run(() => first.engine.submit(aJob()))).job
    const second = setup({ path })
    expect(second.engine.submit(aJob()).job.stream_message_id).toBeGreaterThan(kept.stream_message_id!)
  })

  it('a group whose transaction SQLite rolled back under it fails whole, and the next operation opens a new one', async () => {
    const { engine } = setup(UNTIMED)
    const first = engine.run(() => engine.submit(aJob()))
    const lost = engine.run(() =>
      engineContext(engine).transact(() => {
        database(engine).exec('ROLLBACK') // what SQLite does by itself on a full disk or an I/O error
        throw Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' })
      }),
    )
    const next = engine.run(() => engine.submit(aJob({ idempotency_key: 'after' })))
    await expect(first).rejects.toMatchObject({ code: 'SQLITE_FULL' })
    await expect(lost).rejects.toMatchObject({ code: 'SQLITE_FULL' })
    await expect(next).resolves.toMatchObject({ duplicate: false })
    expect(engine.listJobs({ limit: 10 }).jobs.map((job) => job.idempotency_key)).toEqual(['after'])
  })

  it('a plain call or a read while a group is open commits the group first: outside a group only committed state is seen', async () => {
    const { engine, committedJobs, close } = withObserver(UNTIMED)
    const grouped = engine.run(() => engine.submit(aJob()))
    expect(committedJobs()).toBe(0)
    expect(engine.listJobs({ limit: 10 }).jobs).toHaveLength(1) // the read committed the group
    expect(committedJobs()).toBe(1)
    engine.submit(aJob()) // a plain call: its own transaction, durable on return
    expect(committedJobs()).toBe(2)
    await grouped
    close()
  })

  it(`a group holds at most ${MAX_GROUP_OPERATIONS} operations`, async () => {
    const { engine } = setup(UNTIMED)
    const sizes: number[] = []
    engine.beforeCommit((events) => sizes.push(events.filter((e) => e.event_type === 'JOB_SUBMITTED').length))
    await Promise.all(Array.from({ length: MAX_GROUP_OPERATIONS + 1 }, () => engine.run(() => engine.submit(aJob()))))
    expect(sizes).toEqual([MAX_GROUP_OPERATIONS, 1])
  })

  it('a group open longer than its time bound commits with the operation that reaches it', async () => {
    const { engine } = setup({ config: { groupMaxMs: 0 } })
    const sizes: number[] = []
    engine.beforeCommit((events) => sizes.push(events.length))
    await Promise.all([engine.run(() => engine.submit(aJob())), engine.run(() => engine.submit(aJob()))])
    expect(sizes).toEqual([1, 1])
  })

  it('a waiting claim woken by a grouped submit is leased inside that group’s commit', async () => {
    const { engine } = setup(UNTIMED)
    const counter = countCommits(engine)
    const granted: string[] = []
    engine.beforeCommit((events) => {
      if (!events.some((e) => e.event_type === 'JOB_SUBMITTED')) return
      const decision = engineContext(engine).attempt(() => engine.claimAndLease({ worker_id: 'w1' }))
      if (decision?.granted) granted.push(decision.job.id)
    })
    const { job } = await engine.run(() => engine.submit(aJob()))
    expect(granted).toEqual([job.id])
    expect(engine.getJob(job.id).state).toBe('RUNNING')
    expect(counter.commits).toBe(1)
  })
})
