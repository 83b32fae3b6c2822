/**
 * the files contract over real HTTP (the files API, `/api/files` and `/api/blockers`), on a host whose clock
 * the test moves: two workers with their own job leases (the worker API claims) contend for one
 * file; the loser waits its one retry at +180 s while its job keeps heartbeating, and either
 * gets the file or is halted with a blocker report the operator answers.
 */
import { afterEach, describe, expect, test } from 'vitest'
import { ManualClock, SECOND } from '../../src-main/engine/rules/clock'
import { startTestHost, type TestHost } from '../helpers/host'
import { body, expectError, expectInvalid, ISO_MS, keys, post, QUEUE, submit, UNKNOWN_ID, WORKER } from './support'
import { database } from '../helpers/database'

const T0 = Date.parse('2026-02-06T20:10:00.000Z')
const FILE = '/work/repo/src/app.ts'
const RETRY_MS = 180 * SECOND
const COST = 2

let host: TestHost
let clock: ManualClock

async function start() {
  clock = new ManualClock(T0)
  host = await startTestHost({ totalUnits: 10, busy: 0, leaseTtlS: 30, heartbeatGraceS: 5 }, { clock })
  return host
}

afterEach(async () => {
  await host?.dispose()
})

const iso = (ms: number) => new Date(ms).toISOString()

/** A worker process as the worker API sees it: a claimed job with its lease, heartbeating as it runs. */
interface Worker {
  id: string
  job_id: string
  attempt_id: string
  lease_id: string
  lease_token: string
}

async function claimJob(workerId: string): Promise<Worker> {
  const job = await submit(host, { cost_units: COST })
  const res = await post(host, `${WORKER}/claim`, { worker_id: workerId, streams: ['default'], max_wait_ms: 0 })
  const c = await body(res)
  expect(res.status).toBe(200)
  expect(c).toMatchObject({ claimed: true, job_id: job.job_id })
  return { id: workerId, job_id: c.job_id, attempt_id: c.attempt_id, lease_id: c.lease_id, lease_token: c.lease_token }
}

const acquire = (w: Worker | string, file = FILE) =>
  typeof w === 'string'
    ? post(host, '/api/files/leases/acquire', { file, owner_id: w })
    : post(host, '/api/files/leases/acquire', { file, owner_id: w.id, lease_id: w.lease_id })
const fileHeartbeat = (owner: string, file = FILE) => post(host, '/api/files/leases/heartbeat', { file, owner_id: owner })
const fileRelease = (owner: string, file = FILE) => post(host, '/api/files/leases/release', { file, owner_id: owner })
const attempt = (w: Worker) => ({ worker_id: w.id, job_id: w.job_id, attempt_id: w.attempt_id, lease_token: w.lease_token })

async function jobHeartbeat(w: Worker) {
  const res = await post(host, `${WORKER}/heartbeat`, { worker_id: w.id, job_id: w.job_id, lease_token: w.lease_token })
  expect(res.status, await res.clone().text()).toBe(200)
}

async function jobState(jobId: string): Promise<string> {
  const res = await host.call(`${QUEUE}/jobs/${jobId}`)
  expect(res.status).toBe(200)
  return (await body(res)).job.state
}

async function activeHolders(file = FILE): Promise<string[]> {
  const res = await host.call('/api/files/leases')
  expect(res.status).toBe(200)
  const { file_leases } = await body(res)
  // The database agrees with the view: the one-owner rule, checked where it is enforced.
  const rows = database(host.engine).prepare("SELECT owner_id FROM file_leases WHERE file = ? AND state = 'ACTIVE'").all(file) as { owner_id: string }[]
  const viewed = (file_leases as any[]).filter((l) => l.file === file).map((l) => l.owner_id)
  expect(viewed).toEqual(rows.map((r) => r.owner_id))
  expect(viewed.length).toBeLessThanOrEqual(1)
  return viewed
}

async function leasedUnits(): Promise<number> {
  const res = await host.call('/api/capacity')
  expect(res.status).toBe(200)
  return (await body(res)).leased
}

/**
 * Moves the host's clock by `ms` in steps of at most 10 s; after each step every worker in
 * `jobs` heartbeats its job lease and every owner in `files` heartbeats its file, as a real
 * worker would. `each` runs after every step.
 */
async function advance(ms: number, alive: { jobs?: Worker[]; files?: string[] } = {}, each?: () => Promise<void>) {
  let left = ms
  while (left > 0) {
    const step = Math.min(left, 10 * SECOND)
    clock.advance(step)
    left -= step
    for (const w of alive.jobs ?? []) await jobHeartbeat(w)
    for (const owner of alive.files ?? []) expect((await fileHeartbeat(owner)).status).toBe(200)
    await each?.()
  }
}

async function jobEvents(jobId: string): Promise<any[]> {
  const res = await host.call(`${QUEUE}/jobs/${jobId}/events`)
  expect(res.status).toBe(200)
  return (await body(res)).events
}

// ---------------------------------------------------------------------------------------------

describe('acquire / heartbeat / release over HTTP', () => {
  test('granted: 200 {granted:true, file_lease} with the normalized file, the owner, its job lease and ISO times', async () => {
    await start()
    const w1 = await claimJob('w1')
    const res = await post(host, '/api/files/leases/acquire', { file: '/work/repo/./x/../src/app.ts/', owner_id: 'w1', lease_id: w1.lease_id })
    expect(res.status).toBe(200)
    const answer = await body(res)
    expect(keys(answer)).toEqual(['file_lease', 'granted'])
    expect(answer.granted).toBe(true)
    expect(answer.file_lease).toMatchObject({
      file_lease_id: expect.any(String),
      file: FILE,
      owner_id: 'w1',
      lease_id: w1.lease_id,
      job_id: w1.job_id,
      state: 'ACTIVE',
      acquired_at: iso(T0),
      last_heartbeat_at: iso(T0),
      age_s: 0,
      released_at: null,
      release_reason: null,
    })
    clock.advance(4 * SECOND)
    const hb = await fileHeartbeat('w1', '/work/repo/src/app.ts')
    expect(hb.status).toBe(200)
    expect((await body(hb)).file_lease).toMatchObject({ last_heartbeat_at: iso(T0 + 4 * SECOND), age_s: 4 })
    const rel = await fileRelease('w1')
    expect(rel.status).toBe(200)
    expect((await body(rel)).file_lease).toMatchObject({ state: 'RELEASED', release_reason: 'released', released_at: expect.stringMatching(ISO_MS) })
    expect(await activeHolders()).toEqual([])
  })

  test('/a/./b/../c/ and /a/c are one key: the second owner is denied', async () => {
    await start()
    expect((await acquire('o1', '/a/./b/../c/')).status).toBe(200)
    const res = await acquire('o2', '/a/c')
    expect(res.status).toBe(409)
    expect((await body(res)).contention).toMatchObject({ file: '/a/c', holder: { owner_id: 'o1' } })
  })

  test('re-acquire by the same owner is granted (the same lease)', async () => {
    await start()
    const first = await body(await acquire('o1'))
    clock.advance(3 * SECOND)
    const again = await acquire('o1')
    expect(again.status).toBe(200)
    expect((await body(again)).file_lease).toMatchObject({ file_lease_id: first.file_lease.file_lease_id, last_heartbeat_at: iso(T0 + 3 * SECOND) })
  })

  test.each([
    ['relative', 'src/app.ts'],
    ['empty', ''],
    ['NUL', '/work/a\0b'],
  ])('a %s path is 400 invalid_request naming the file', async (_kind, file) => {
    await start()
    await expectInvalid(await post(host, '/api/files/leases/acquire', { file, owner_id: 'o1' }), 'file')
    await expectInvalid(await post(host, '/api/files/leases/heartbeat', { file, owner_id: 'o1' }), 'file')
    await expectInvalid(await post(host, '/api/files/leases/release', { file, owner_id: 'o1' }), 'file')
    expect(await activeHolders(file)).toEqual([])
  })

  test('a Windows absolute path is keyed by Windows rules whatever the host runs on: C:\\x\\y.txt, C:/x/y.txt and c:\\x\\y.txt are one key; a UNC path is granted', async () => {
    await start()
    const held = await acquire('w1', 'C:\\x\\y.txt')
    expect(held.status).toBe(200)
    expect((await body(held)).file_lease).toMatchObject({ file: 'C:\\x\\y.txt' })
    for (const [owner, file] of [['w2', 'C:/x/y.txt'], ['w4', 'c:\\x\\y.txt']] as const) {
      const res = await acquire(owner, file)
      expect(res.status).toBe(409)
      expect((await body(res)).contention).toMatchObject({ file: 'C:\\x\\y.txt', holder: { owner_id: 'w1' } })
    }
    const unc = await acquire('w3', '\\\\srv\\share\\y.txt')
    expect(unc.status).toBe(200)
    expect((await body(unc)).file_lease).toMatchObject({ file: '\\\\srv\\share\\y.txt' })
    // \\x\y.txt is the root of share y.txt on server x: a root keeps its separator, as / and C:\ do.
    const share = await acquire('w5', '\\\\x\\y.txt')
    expect(share.status).toBe(200)
    expect((await body(share)).file_lease).toMatchObject({ file: '\\\\x\\y.txt\\' })
  })

  test('a Windows path under the \\\\?\\ prefix is 400 saying to send the path it names, and one Windows opens without its trailing dot is held as that file', async () => {
    await start()
    expect((await acquire('w1', 'C:\\x\\y.txt')).status).toBe(200)
    const prefixed = await expectInvalid(await acquire('w2', '\\\\?\\C:\\x\\y.txt'), 'file')
    expect(prefixed.detail).toContain('send it without its \\\\?\\ or \\\\.\\ prefix')
    const dotted = await acquire('w3', 'C:\\x\\y.txt.')
    expect(dotted.status).toBe(409)
    expect((await body(dotted)).contention).toMatchObject({ file: 'C:\\x\\y.txt', holder: { owner_id: 'w1' } })
    expect(await activeHolders('C:\\x\\y.txt')).toEqual(['w1'])
  })

  test('a lease on a folder covers everything under it: the root and a file inside it are never granted to two owners, either way round', async () => {
    await start()
    expect((await acquire('o1', '/')).status).toBe(200)
    const inside = await acquire('o2', '/x/a.txt')
    expect(inside.status).toBe(409)
    expect(await body(inside)).toMatchObject({ code: 'file_lease_held', detail: '/x/a.txt is held by o1 (it holds /)', contention: { file: '/x/a.txt', holder: { file: '/', owner_id: 'o1' } } })
    expect((await fileRelease('o1', '/')).status).toBe(200)
    expect((await acquire('o3', '/x/a.txt')).status).toBe(200)
    const root = await acquire('o4', '/')
    expect(root.status).toBe(409)
    expect(await body(root)).toMatchObject({ code: 'file_lease_held', contention: { file: '/', holder: { file: '/x/a.txt', owner_id: 'o3' } } })
  })

  test("an acquire under another job's lease naming the holder's owner id is 409 file_lease_held: two jobs never both hold the file", async () => {
    await start()
    // One worker running two jobs, using its worker id as the owner of both (owner ids are free text).
    const first = await claimJob('ws')
    const second = await claimJob('ws')
    const held = await body(await acquire(first))
    const res = await acquire(second)
    expect(res.status).toBe(409)
    expect(await body(res)).toMatchObject({ granted: false, code: 'file_lease_held', contention: { holder: { owner_id: 'ws', job_id: first.job_id } } })
    expect((await jobEvents(second.job_id)).map((e) => e.type)).toContain('FILE_LEASE_CONTENDED')
    const leases = (await body(await host.call('/api/files/leases'))).file_leases
    expect(leases).toEqual([expect.objectContaining({ file_lease_id: held.file_lease.file_lease_id, lease_id: first.lease_id, last_heartbeat_at: held.file_lease.last_heartbeat_at })])
  })

  test('a missing owner or an unknown field is 400 invalid_request', async () => {
    await start()
    await expectInvalid(await post(host, '/api/files/leases/acquire', { file: FILE }), 'owner_id')
    await expectInvalid(await post(host, '/api/files/leases/acquire', { file: FILE, owner_id: 'o', extra: 1 }))
  })

  test('an owner id is a name as any other the host shows: one with U+0000 or a lone surrogate is 400 invalid_request', async () => {
    await start()
    for (const owner_id of ['a\u0000b', 'a\ud800b']) {
      await expectInvalid(await post(host, '/api/files/leases/acquire', { file: FILE, owner_id }), 'owner_id')
    }
    expect(await activeHolders(FILE)).toEqual([])
  })

  test('an empty path is refused once, as not absolute', async () => {
    await start()
    const refused = await expectError(await post(host, '/api/files/leases/acquire', { file: '', owner_id: 'o1' }), 400, 'invalid_request')
    expect(refused.detail).toBe('file: must be an absolute path')
  })

  test('heartbeat and release of a file never held are 404 file_lease_not_found', async () => {
    await start()
    await expectError(await fileHeartbeat('nobody'), 404, 'file_lease_not_found')
    await expectError(await fileRelease('nobody'), 404, 'file_lease_not_found')
  })

  test('stop-idle on the host: a file untouched for 30 s is released by the reaper, reason idle', async () => {
    await start()
    await acquire('o1')
    clock.advance(30 * SECOND - 1)
    host.engine.reap()
    expect(await activeHolders()).toEqual(['o1'])
    clock.advance(1)
    host.engine.reap()
    expect(await activeHolders()).toEqual([])
    const res = await host.call('/api/files/leases?state=RELEASED')
    expect((await body(res)).file_leases).toMatchObject([{ owner_id: 'o1', release_reason: 'idle', released_at: iso(T0 + 30 * SECOND) }])
  })

  test("age_s is how long the file has been held: until now while it is, until its release once it ended, and then it stays", async () => {
    await start()
    await acquire('o1')
    clock.advance(12 * SECOND)
    expect((await body(await host.call('/api/files/leases'))).file_leases).toMatchObject([{ owner_id: 'o1', age_s: 12 }])
    expect((await fileRelease('o1')).status).toBe(200)
    clock.advance(60 * SECOND)
    expect((await body(await host.call('/api/files/leases?state=RELEASED'))).file_leases).toMatchObject([{ owner_id: 'o1', age_s: 12 }])
  })
})

// ---------------------------------------------------------------------------------------------
// 5. Two agents, one file

describe('integration: two workers contend for one file', () => {
  /** w1 holds FILE; w2 is denied at T0 + 5 s. Both have their own job leases. */
  async function contend() {
    await start()
    const w1 = await claimJob('w1')
    const w2 = await claimJob('w2')
    expect((await acquire(w1)).status).toBe(200)
    clock.advance(5 * SECOND)
    await jobHeartbeat(w1)
    await jobHeartbeat(w2)
    const res = await acquire(w2)
    expect(res.status).toBe(409)
    const denial = await body(res)
    expect(keys(denial)).toEqual(['code', 'contention', 'detail', 'granted'])
    expect(denial).toMatchObject({ granted: false, code: 'file_lease_held' })
    const deniedAt = T0 + 5 * SECOND
    expect(denial.contention).toEqual({
      file: FILE,
      holder: { file: FILE, owner_id: 'w1', job_id: w1.job_id, acquired_at: iso(T0), age_s: 5 },
      handed_over: null,
      denied_at: iso(deniedAt),
      retry_at: iso(deniedAt + RETRY_MS),
    })
    // The contention heartbeat is in the denied job's timeline.
    const contended = (await jobEvents(w2.job_id)).filter((e) => e.type === 'FILE_LEASE_CONTENDED')
    expect(contended).toHaveLength(1)
    expect(contended[0].data).toMatchObject({ retry_at: iso(deniedAt + RETRY_MS), denied_at: iso(deniedAt), requester_owner_id: 'w2' })
    expect(await activeHolders()).toEqual(['w1'])
    return { w1, w2, deniedAt, retryAt: deniedAt + RETRY_MS }
  }

  test('exactly one holds it at a time; the other waits (heartbeating its job), is refused early, and gets it at its retry after the holder released', async () => {
    const { w1, w2, retryAt } = await contend()
    // While w1 works: w1 heartbeats job and file, w2 heartbeats its job and waits.
    await advance(60 * SECOND, { jobs: [w1, w2], files: ['w1'] }, async () => expect(await activeHolders()).toEqual(['w1']))
    const early = await acquire(w2)
    const retryAfter = early.headers.get('retry-after')
    const error = await expectError(early, 429, 'retry_too_early', ['retry_at', 'retry_after_s'])
    expect(error.retry_at).toBe(iso(retryAt))
    // The one retry is 120 s away on the host's clock: said in the body and as HTTP's Retry-After.
    expect(error.retry_after_s).toBe(Math.ceil((retryAt - clock.now()) / 1000))
    expect(retryAfter).toBe(String(error.retry_after_s))
    // w1 is done with the file.
    expect((await fileRelease('w1')).status).toBe(200)
    await advance(retryAt - 1 - clock.now(), { jobs: [w1, w2] }, async () => expect(await activeHolders()).toEqual([]))
    expect(clock.now()).toBe(retryAt - 1)
    // 179.999 s: still too early, though the file is free.
    const lastMs = await expectError(await acquire(w2), 429, 'retry_too_early', ['retry_at', 'retry_after_s'])
    expect(lastMs.retry_after_s).toBe(1) // 1 ms left rounds up: never "come back now" too early
    clock.advance(1)
    const res = await acquire(w2)
    expect(res.status).toBe(200)
    expect((await body(res)).file_lease).toMatchObject({ owner_id: 'w2', job_id: w2.job_id, acquired_at: iso(retryAt) })
    expect(await activeHolders()).toEqual(['w2'])
    expect(await jobState(w2.job_id)).toBe('RUNNING')
    // w2 finishes its job: its file lease goes with it.
    const done = await post(host, `${WORKER}/complete`, attempt(w2))
    expect(done.status).toBe(200)
    expect(await activeHolders()).toEqual([])
    expect(await jobState(w2.job_id)).toBe('DONE')
  })

  test("the holder's job completing releases its file (job_succeeded); the waiter gets it at its retry", async () => {
    const { w1, w2, retryAt } = await contend()
    await advance(30 * SECOND, { jobs: [w1, w2], files: ['w1'] }, async () => expect(await activeHolders()).toEqual(['w1']))
    const done = await post(host, `${WORKER}/complete`, attempt(w1))
    expect(done.status).toBe(200)
    expect(await activeHolders()).toEqual([])
    const released = await body(await host.call('/api/files/leases?state=RELEASED'))
    expect(released.file_leases).toMatchObject([{ owner_id: 'w1', release_reason: 'job_succeeded' }])
    await advance(retryAt - clock.now(), { jobs: [w2] })
    const res = await acquire(w2)
    expect(res.status).toBe(200)
    expect(await activeHolders()).toEqual(['w2'])
    // Only one contention event, no second retry was scheduled.
    expect((await jobEvents(w2.job_id)).filter((e) => e.type === 'FILE_LEASE_CONTENDED')).toHaveLength(1)
    expect(host.engine.fileRetryAt(FILE, 'w2')).toBeNull()
  })

  test("the holder's job lease expiring (its worker gone) frees the file; the reclaim is on record", async () => {
    const { w2, retryAt } = await contend()
    // w1 stops heartbeating anything; the host's reaper expires its job lease at T0 + 35 s.
    await advance(retryAt - clock.now(), { jobs: [w2] })
    host.engine.reap()
    const res = await acquire(w2)
    expect(res.status).toBe(200)
    expect(await activeHolders()).toEqual(['w2'])
    const ended = (await body(await host.call('/api/files/leases?state=RELEASED'))).file_leases
    expect(ended).toHaveLength(1)
    expect(ended[0].owner_id).toBe('w1')
    // At T0 + 35 s both are due: the job lease's expiry (reaped first) and the file's idle window.
    expect(ended[0].release_reason).toBe('owner_lease_expired')
  })
})

// ---------------------------------------------------------------------------------------------
// 6. Still blocked after the retry → halt, blocker report, operator answers

describe('integration: blocked after the retry → halt and the blocker contract', () => {
  /** w1 holds FILE the whole time; w2 is denied at T0 + 5 s and halted at its retry. */
  async function halt() {
    await start()
    const w1 = await claimJob('w1')
    const w2 = await claimJob('w2')
    expect((await acquire(w1)).status).toBe(200)
    clock.advance(5 * SECOND)
    const deniedAt = clock.now()
    expect((await acquire(w2)).status).toBe(409)
    await advance(RETRY_MS, { jobs: [w1, w2], files: ['w1'] }, async () => expect(await activeHolders()).toEqual(['w1']))
    const retryAt = deniedAt + RETRY_MS
    expect(clock.now()).toBe(retryAt)
    const leasedBefore = await leasedUnits()
    expect(leasedBefore).toBe(2 * COST)
    const res = await acquire(w2)
    expect(res.status).toBe(409)
    const answer = await body(res)
    return { w1, w2, deniedAt, retryAt, answer, leasedBefore }
  }

  test('409 {granted:false, code:"blocked", blocker} whose report has every field', async () => {
    const { w1, w2, deniedAt, retryAt, answer } = await halt()
    expect(keys(answer)).toEqual(['blocker', 'code', 'detail', 'granted'])
    expect(answer).toMatchObject({ granted: false, code: 'blocked' })
    expect(keys(answer.blocker)).toEqual(
      [
        'blocker_id',
        'file',
        'holder',
        'age_s',
        'retry_s',
        'denied_at',
        'retried_at',
        'requester',
        'state',
        'resolution',
        'note',
        'resolved_by',
        'resolved_at',
        'taken_from_holder',
        'created_at',
      ].sort(),
    )
    expect(answer.blocker).toEqual({
      blocker_id: expect.any(String),
      file: FILE,
      holder: { file: FILE, owner_id: 'w1', job_id: w1.job_id, acquired_at: iso(T0), last_heartbeat_at: iso(retryAt), holds_now: true, holds_again: false, held_s: (retryAt - T0) / 1000 },
      age_s: (retryAt - T0) / 1000,
      retry_s: 180,
      denied_at: iso(deniedAt),
      retried_at: iso(retryAt),
      requester: { owner_id: 'w2', job_id: w2.job_id, lease_id: w2.lease_id },
      state: 'OPEN',
      resolution: null,
      note: null,
      resolved_by: null,
      resolved_at: null,
      taken_from_holder: null,
      created_at: iso(retryAt),
    })
    const one = await host.call(`/api/blockers/${answer.blocker.blocker_id}`)
    expect(one.status).toBe(200)
    expect((await body(one)).blocker).toEqual(answer.blocker)
  })

  test('a report read later keeps the halt as it was, and says how long its holder holds the file now, or that it let go', async () => {
    const { answer } = await halt()
    const id = answer.blocker.blocker_id
    clock.advance(60 * SECOND)
    const later = (await body(await host.call(`/api/blockers/${id}`))).blocker
    expect(later.age_s).toBe(answer.blocker.age_s)
    expect(later.holder).toMatchObject({ holds_now: true, held_s: answer.blocker.age_s + 60 })
    expect((await fileRelease('w1')).status).toBe(200)
    const [listed] = (await body(await host.call('/api/blockers'))).blockers
    expect(listed).toMatchObject({ blocker_id: id, age_s: answer.blocker.age_s, holder: { holds_now: false, held_s: null } })
  })

  test('the halted job is BLOCKED with no capacity held; its worker is told its lease is over; the holder is untouched', async () => {
    const { w1, w2, answer, leasedBefore } = await halt()
    expect(await jobState(w2.job_id)).toBe('BLOCKED')
    expect(await leasedUnits()).toBe(leasedBefore - COST)
    const hb = await post(host, `${WORKER}/heartbeat`, { worker_id: 'w2', job_id: w2.job_id, lease_token: w2.lease_token })
    expect(hb.status).toBe(409)
    expect(await body(hb)).toMatchObject({ ok: false, code: 'lease_not_active' })
    expect(await jobState(w1.job_id)).toBe('RUNNING')
    expect(await activeHolders()).toEqual(['w1'])
    const types = (await jobEvents(w2.job_id)).map((e) => e.type)
    expect(types).toEqual(expect.arrayContaining(['FILE_LEASE_CONTENDED', 'BLOCKER_OPENED', 'JOB_BLOCKED']))
    expect(answer.blocker.state).toBe('OPEN')
  })

  test('resolve retry → the job is QUEUED; a BLOCKER_RESOLVED event with its note', async () => {
    const { w2, answer } = await halt()
    const id = answer.blocker.blocker_id
    const res = await post(host, `/api/blockers/${id}/resolve`, { action: 'retry', note: 'w1 will be done soon' })
    expect(res.status).toBe(200)
    const resolved = await body(res)
    expect(resolved.job_state).toBe('QUEUED')
    expect(resolved.taken_from_holder).toBeNull()
    expect(resolved.blocker).toMatchObject({ state: 'RESOLVED', resolution: 'retry', note: 'w1 will be done soon', resolved_by: 'operator', resolved_at: iso(clock.now()), taken_from_holder: null })
    expect(await jobState(w2.job_id)).toBe('QUEUED')
    const events = (await jobEvents(w2.job_id)).filter((e) => e.type === 'BLOCKER_RESOLVED')
    expect(events).toHaveLength(1)
    expect(events[0].data).toMatchObject({ action: 'retry', note: 'w1 will be done soon' })
    // Resolving twice is refused.
    await expectError(await post(host, `/api/blockers/${id}/resolve`, { action: 'cancel' }), 409, 'blocker_resolved')
  })

  test("resolve force_release → the holder's file lease is REVOKED; its heartbeat/release are 409 file_lease_lost; its job cannot succeed but can fail; the blocked job is requeued", async () => {
    const { w1, w2, answer } = await halt()
    const id = answer.blocker.blocker_id
    const res = await post(host, `/api/blockers/${id}/resolve`, { action: 'force_release', note: 'w1 hangs', by: 'alice' })
    expect(res.status).toBe(200)
    expect(await body(res)).toMatchObject({ job_state: 'QUEUED', taken_from_holder: true, blocker: { resolution: 'force_release', note: 'w1 hangs', resolved_by: 'alice', taken_from_holder: true } })
    expect(await jobState(w2.job_id)).toBe('QUEUED')
    expect(await activeHolders()).toEqual([])
    const revoked = (await body(await host.call('/api/files/leases?state=REVOKED'))).file_leases
    expect(revoked).toMatchObject([{ owner_id: 'w1', file: FILE, state: 'REVOKED', release_reason: 'force_released' }])
    await expectError(await fileHeartbeat('w1'), 409, 'file_lease_lost')
    await expectError(await fileRelease('w1'), 409, 'file_lease_lost')
    // The holder's job: success is refused, and nothing changed.
    await expectError(await post(host, `${WORKER}/complete`, attempt(w1)), 409, 'file_lease_lost', ['ok', 'ack'])
    expect(await jobState(w1.job_id)).toBe('RUNNING')
    const failed = await post(host, `${WORKER}/fail`, { ...attempt(w1), error: { code: 'file_lost', message: 'file taken by an operator' } })
    expect(failed.status).toBe(200)
    expect(await body(failed)).toMatchObject({ ok: true, ack: true })
    expect(await jobState(w1.job_id)).toBe('FAILED')
    const events = (await jobEvents(w2.job_id)).filter((e) => e.type === 'BLOCKER_RESOLVED')
    expect(events.map((e) => e.data)).toMatchObject([{ action: 'force_release', note: 'w1 hangs', by: 'alice' }])
    await expectError(await post(host, `/api/blockers/${id}/resolve`, { action: 'force_release' }), 409, 'blocker_resolved')
  })

  test('a handover ends when its job ends: the requester canceled after a force release, a third owner is granted the file at once', async () => {
    const { w1, w2, answer } = await halt()
    expect(await body(await post(host, `/api/blockers/${answer.blocker.blocker_id}/resolve`, { action: 'force_release' }))).toMatchObject({ taken_from_holder: true, job_state: 'QUEUED' })
    expect((await post(host, `${QUEUE}/jobs/${w2.job_id}/cancel`, {})).status).toBe(200)
    expect(await jobState(w2.job_id)).toBe('CANCELED')
    expect((await post(host, `${WORKER}/fail`, { ...attempt(w1), error: { code: 'file_lost', message: 'file taken by an operator' } })).status).toBe(200)
    const res = await acquire('someone-else')
    expect(res.status).toBe(200)
    expect(await body(res)).toMatchObject({ granted: true, file_lease: { owner_id: 'someone-else' } })
  })

  /** qholder holds FILE, and qreq, naming no job lease, is halted on it at its retry: the open report's id. */
  async function haltWithoutJobs(): Promise<string> {
    await start()
    expect((await acquire('qholder')).status).toBe(200)
    expect((await acquire('qreq')).status).toBe(409)
    for (let t = 0; t < 36; t++) {
      clock.advance(5 * SECOND)
      expect((await acquire('qholder')).status).toBe(200)
    }
    const halted = await body(await acquire('qreq'))
    expect(halted).toMatchObject({ code: 'blocked' })
    return halted.blocker.blocker_id
  }

  test('resolve force_release hands the file to the requester: an owner that names no job lease and re-acquires at once is refused, the contention saying so, and the requester is granted it', async () => {
    const id = await haltWithoutJobs()
    expect(await body(await post(host, `/api/blockers/${id}/resolve`, { action: 'force_release' }))).toMatchObject({ taken_from_holder: true })
    const handedAt = clock.now()
    clock.advance(SECOND)
    const refused = await acquire('qholder')
    expect(refused.status).toBe(409)
    expect(await body(refused)).toMatchObject({
      code: 'file_lease_held',
      detail: `${FILE} is kept for qreq, to whom an operator's force release handed it (blocker ${id}), until it acquires it or until ${iso(handedAt + RETRY_MS)}`,
      contention: { holder: { file: FILE, owner_id: 'qreq', job_id: null, acquired_at: iso(handedAt) }, handed_over: { blocker_id: id, expires_at: iso(handedAt + RETRY_MS) }, retry_at: iso(clock.now() + RETRY_MS) },
    })
    expect(await body(await acquire('qreq'))).toMatchObject({ granted: true, file_lease: { owner_id: 'qreq' } })
  })

  test('a folder above a file handed over is refused naming the file kept for the requester, which holds nothing yet', async () => {
    const id = await haltWithoutJobs()
    expect(await body(await post(host, `/api/blockers/${id}/resolve`, { action: 'force_release' }))).toMatchObject({ taken_from_holder: true })
    const handedAt = clock.now()
    const refused = await acquire('zz', '/work/repo')
    expect(refused.status).toBe(409)
    expect(await body(refused)).toMatchObject({
      code: 'file_lease_held',
      detail: `/work/repo is refused while ${FILE} is kept for qreq, to whom an operator's force release handed it (blocker ${id}), until it acquires it or until ${iso(handedAt + RETRY_MS)}`,
      contention: { file: '/work/repo', holder: { file: FILE, owner_id: 'qreq' }, handed_over: { blocker_id: id } },
    })
  })

  test('resolve force_release after the holder let go takes nothing, and the answer and the report read later say so (taken_from_holder: false)', async () => {
    const { w2, answer } = await halt()
    expect((await fileRelease('w1')).status).toBe(200)
    const res = await post(host, `/api/blockers/${answer.blocker.blocker_id}/resolve`, { action: 'force_release' })
    expect(res.status).toBe(200)
    expect(await body(res)).toMatchObject({ job_state: 'QUEUED', taken_from_holder: false, blocker: { resolution: 'force_release', taken_from_holder: false } })
    expect(await jobState(w2.job_id)).toBe('QUEUED')
    expect((await body(await host.call(`/api/blockers/${answer.blocker.blocker_id}`))).blocker).toMatchObject({ resolution: 'force_release', taken_from_holder: false })
  })

  test('resolve cancel → the job is CANCELED; a BLOCKER_RESOLVED event with its note; resolving twice is 409', async () => {
    const { w1, w2, answer } = await halt()
    const id = answer.blocker.blocker_id
    const res = await post(host, `/api/blockers/${id}/resolve`, { action: 'cancel', note: 'obsolete' })
    expect(res.status).toBe(200)
    expect(await body(res)).toMatchObject({ job_state: 'CANCELED', blocker: { resolution: 'cancel', note: 'obsolete' } })
    expect(await jobState(w2.job_id)).toBe('CANCELED')
    expect(await jobState(w1.job_id)).toBe('RUNNING')
    const events = (await jobEvents(w2.job_id)).filter((e) => e.type === 'BLOCKER_RESOLVED')
    expect(events.map((e) => e.data)).toMatchObject([{ action: 'cancel', note: 'obsolete' }])
    await expectError(await post(host, `/api/blockers/${id}/resolve`, { action: 'cancel', note: 'again' }), 409, 'blocker_resolved')
    expect((await body(await host.call(`/api/blockers/${id}`))).blocker.note).toBe('obsolete')
  })

  test('who answers is a name or left out (operator): an empty, blank or NUL-holding by is 400 invalid_request and the report stays open', async () => {
    const { w2, answer } = await halt()
    const id = answer.blocker.blocker_id
    await expectInvalid(await post(host, `/api/blockers/${id}/resolve`, { action: 'retry', by: '' }), 'by')
    await expectInvalid(await post(host, `/api/blockers/${id}/resolve`, { action: 'retry', by: '   ' }), 'by: must not be blank')
    await expectInvalid(await post(host, `/api/blockers/${id}/resolve`, { action: 'cancel', by: 'a\u0000b' }), 'by: must not contain control or invisible characters')
    expect((await body(await host.call(`/api/blockers/${id}`))).blocker.state).toBe('OPEN')
    expect(await jobState(w2.job_id)).toBe('BLOCKED')
  })

  test('GET /api/blockers lists open first (oldest first), then resolved; ?state filters; bad input is 400/404', async () => {
    await start()
    const holder = await claimJob('w1')
    const files = ['/r/f1', '/r/f2', '/r/f3']
    for (const f of files) expect((await acquire(holder, f)).status).toBe(200)
    clock.advance(SECOND)
    const requesters = [await claimJob('r1'), await claimJob('r2'), await claimJob('r3')]
    for (const [i, r] of requesters.entries()) expect((await acquire(r, files[i])).status).toBe(409)
    await advance(RETRY_MS, { jobs: [holder, ...requesters] }, async () => {
      for (const f of files) expect((await fileHeartbeat('w1', f)).status).toBe(200)
    })
    const ids: string[] = []
    for (const [i, r] of requesters.entries()) {
      const res = await acquire(r, files[i])
      expect(res.status).toBe(409)
      ids.push((await body(res)).blocker.blocker_id)
    }
    expect(await leasedUnits()).toBe(COST)
    expect((await post(host, `/api/blockers/${ids[0]}/resolve`, { action: 'retry' })).status).toBe(200)
    const list = async (query = '') => {
      const res = await host.call(`/api/blockers${query}`)
      expect(res.status).toBe(200)
      return ((await body(res)).blockers as any[]).map((b) => [b.blocker_id, b.state])
    }
    expect(await list()).toEqual([
      [ids[1], 'OPEN'],
      [ids[2], 'OPEN'],
      [ids[0], 'RESOLVED'],
    ])
    expect(await list('?state=OPEN')).toEqual([
      [ids[1], 'OPEN'],
      [ids[2], 'OPEN'],
    ])
    expect(await list('?state=RESOLVED')).toEqual([[ids[0], 'RESOLVED']])
    await expectInvalid(await host.call('/api/blockers?state=MAYBE'), 'state')
    await expectError(await host.call(`/api/blockers/${UNKNOWN_ID}`), 404, 'blocker_not_found')
    await expectError(await post(host, `/api/blockers/${UNKNOWN_ID}/resolve`, { action: 'retry' }), 404, 'blocker_not_found')
    await expectInvalid(await post(host, `/api/blockers/${ids[1]}/resolve`, { action: 'ignore' }), 'action')
    expect(await list('?state=OPEN')).toHaveLength(2)
  })
})

describe('a data dir from before the gate covered folders (migration 0021)', () => {
  test('a host that starts on overlapping file leases keeps the one granted first, revokes the later one and says so once; the gate refuses its holder from then on', async () => {
    await start()
    const dataDir = host.dataDir
    // As a release before 0021 wrote them: a file, then a folder above it for another owner, both granted.
    const old = database(host.engine)
    const insert = old.prepare("INSERT INTO file_leases (id, file, owner_id, state, acquired_at, last_heartbeat_at) VALUES (?, ?, ?, 'ACTIVE', ?, ?)")
    insert.run('f-report', '/srv/out/report.csv', 'tool-1', T0, T0)
    insert.run('f-srv', '/srv', 'tool-2', T0 + SECOND, T0 + SECOND)
    old.close()
    await host.stop()

    const restart = async () => {
      const lines: string[] = []
      host = await startTestHost({ dataDir, totalUnits: 10, busy: 0 }, { clock, log: (line) => lines.push(line) })
      return lines.filter((line) => /overlapped/.test(line))
    }
    clock.advance(2 * SECOND)
    expect(await restart()).toEqual([expect.stringMatching(/^leasehold: 1 file lease\(s\) revoked \(overlapped\): .*\/srv of tool-2 \(tool-1 holds \/srv\/out\/report\.csv since before it\)$/)])
    await expectError(await post(host, '/api/files/leases/heartbeat', { file: '/srv', owner_id: 'tool-2' }), 409, 'file_lease_lost')
    const refused = await post(host, '/api/files/leases/acquire', { file: '/srv', owner_id: 'tool-2' })
    expect(refused.status).toBe(409)
    expect(await body(refused)).toMatchObject({ granted: false, code: 'file_lease_held', contention: { holder: { file: '/srv/out/report.csv', owner_id: 'tool-1' } } })
    const kept = await post(host, '/api/files/leases/acquire', { file: '/srv/out/report.csv', owner_id: 'tool-1' })
    expect(kept.status).toBe(200)
    expect(await body(kept)).toMatchObject({ granted: true })
    await host.stop()
    expect(await restart()).toEqual([])
  })
})
