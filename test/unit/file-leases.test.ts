/**
 * the files contract, phases 1–4, in the engine: the file-lease gate (acquire / deny / release, the key),
 * liveness reclaim of a dead owner's lease, stop-idle after 30 s, and the contention heartbeat
 * with its one retry at +180 s. Every test runs on a ManualClock: time moves only when told.
 */
import { describe, expect, test } from 'vitest'
import type { EventRow, FileLeaseRow } from '../../src-main/db/schema'
import { ManualClock, SECOND } from '../../src-main/engine/rules/clock'
import { FILE_IDLE_MS, FILE_RETRY_MS } from '../../src-main/engine/verbs/files'
import { fileKey } from '../../src-main/engine/rules/file-keys'
import type { Engine } from '../../src-main/engine'
import { aJob, setup, T0 } from '../helpers/engine'
import { claimOrFail, expectEngineError, openFileEngine, tempDir } from './support'
import { join } from 'node:path'
import { sql } from '../helpers/database'

const FILE = '/repo/src/main.ts'

// ---------------------------------------------------------------------------------------------
// Helpers

function fileEvents(engine: Engine, type: string): (Omit<EventRow, 'data'> & { data: any })[] {
  return sql(engine)
    .all<EventRow>('SELECT * FROM events WHERE event_type = ? ORDER BY id', type)
    .map((e) => ({ ...e, data: JSON.parse(e.data) }))
}

function rowsOn(engine: Engine, file: string): FileLeaseRow[] {
  return sql(engine).all<FileLeaseRow>('SELECT * FROM file_leases WHERE file = ? ORDER BY rowid', file)
}

function activeOn(engine: Engine, file: string): FileLeaseRow[] {
  return rowsOn(engine, file).filter((r) => r.state === 'ACTIVE')
}

function contentionCount(engine: Engine): number {
  return sql(engine).one<{ n: number }>('SELECT COUNT(*) AS n FROM file_contentions')!.n
}

/** A running job with its job lease (the worker API claim): an owner whose liveness is that lease. */
function runningJob(engine: Engine, workerId: string) {
  engine.submit(aJob({ cost_units: 2 }))
  return claimOrFail(engine, workerId)
}

/** Grants or fails the test. */
function granted(engine: Engine, request: { file: string; owner_id: string; lease_id?: string | null }): FileLeaseRow {
  const result = engine.acquireFile(request)
  if (!result.granted) throw new Error(`expected a grant, got ${result.code}`)
  return result.file_lease
}

interface KeepAlive {
  /** Job leases to heartbeat (as their workers would). */
  leases?: string[]
  /** File leases to heartbeat, as [file, owner]. */
  files?: [string, string][]
}

/**
 * Moves the clock by `ms` in steps of at most 10 s, heartbeating what a live worker would
 * heartbeat after each step (job lease TTL 30 s + grace 5 s; file idle window 30 s).
 */
function tick(engine: Engine, clock: { advance(ms: number): void }, ms: number, alive: KeepAlive = {}): void {
  let left = ms
  while (left > 0) {
    const step = Math.min(left, 10 * SECOND)
    clock.advance(step)
    left -= step
    for (const lease_id of alive.leases ?? []) engine.heartbeat({ lease_id })
    for (const [file, owner_id] of alive.files ?? []) engine.heartbeatFile({ file, owner_id })
  }
}

// ---------------------------------------------------------------------------------------------
// 1. Acquire / deny / release

describe('acquire / deny / release', () => {
  test('a free file is granted to the first owner: one ACTIVE file lease and a FILE_LEASE_ACQUIRED event', () => {
    const { engine } = setup()
    const job = runningJob(engine, 'w1')
    const lease = granted(engine, { file: FILE, owner_id: 'w1', lease_id: job.lease.id })
    expect(lease).toMatchObject({
      file: FILE,
      owner_id: 'w1',
      lease_id: job.lease.id,
      job_id: job.job.id,
      state: 'ACTIVE',
      acquired_at: T0,
      last_heartbeat_at: T0,
      released_at: null,
    })
    expect(activeOn(engine, FILE)).toHaveLength(1)
    const [acquired] = fileEvents(engine, 'FILE_LEASE_ACQUIRED')
    expect(acquired).toMatchObject({ entity_type: 'FILE_LEASE', entity_id: lease.id, job_id: job.job.id, ts: T0 })
    expect(acquired!.data).toMatchObject({ file: FILE, owner_id: 'w1', lease_id: job.lease.id })
  })

  test('a competing acquire of a held file is denied deterministically with the holder named', () => {
    const { engine, clock } = setup()
    const a = runningJob(engine, 'w1')
    const b = runningJob(engine, 'w2')
    granted(engine, { file: FILE, owner_id: 'w1', lease_id: a.lease.id })
    clock.advance(4 * SECOND)
    const result = engine.acquireFile({ file: FILE, owner_id: 'w2', lease_id: b.lease.id })
    expect(result).toEqual({
      granted: false,
      code: 'file_lease_held',
      contention: {
        file: FILE,
        holder: { file: FILE, owner_id: 'w1', job_id: a.job.id, acquired_at: T0, age_s: 4 },
        handed_over: null,
        denied_at: T0 + 4 * SECOND,
        retry_at: T0 + 4 * SECOND + FILE_RETRY_MS,
      },
    })
    expect(activeOn(engine, FILE).map((r) => r.owner_id)).toEqual(['w1'])
    // The denied job is untouched: still running, still holding its capacity.
    expect(engine.getJob(b.job.id).state).toBe('RUNNING')
    expect(engine.getLease(b.lease.id).state).toBe('ACTIVE')
  })

  test('an owner without a job lease can hold a file, and is denied like anyone else', () => {
    const { engine } = setup()
    const lease = granted(engine, { file: FILE, owner_id: 'editor' })
    expect(lease).toMatchObject({ lease_id: null, job_id: null, state: 'ACTIVE' })
    expect(engine.acquireFile({ file: FILE, owner_id: 'other' })).toMatchObject({ granted: false, code: 'file_lease_held' })
  })

  test('re-acquire by the same owner is granted: the same lease, refreshed as a heartbeat', () => {
    const { engine, clock } = setup()
    const first = granted(engine, { file: FILE, owner_id: 'w1' })
    clock.advance(12 * SECOND)
    const again = granted(engine, { file: FILE, owner_id: 'w1' })
    expect(again.id).toBe(first.id)
    expect(again).toMatchObject({ acquired_at: T0, last_heartbeat_at: T0 + 12 * SECOND, state: 'ACTIVE' })
    expect(rowsOn(engine, FILE)).toHaveLength(1)
    expect(fileEvents(engine, 'FILE_LEASE_CONTENDED')).toHaveLength(0)
    expect(contentionCount(engine)).toBe(0)
  })

  test('release frees the file: RELEASED with reason released, an event, and the next owner is granted', () => {
    const { engine, clock } = setup()
    const held = granted(engine, { file: FILE, owner_id: 'w1' })
    clock.advance(3 * SECOND)
    const released = engine.releaseFile({ file: FILE, owner_id: 'w1' })
    expect(released).toMatchObject({ id: held.id, state: 'RELEASED', release_reason: 'released', released_at: T0 + 3 * SECOND })
    expect(activeOn(engine, FILE)).toHaveLength(0)
    const [event] = fileEvents(engine, 'FILE_LEASE_RELEASED')
    expect(event!.data).toMatchObject({ file: FILE, owner_id: 'w1', reason: 'released' })
    const next = granted(engine, { file: FILE, owner_id: 'w2' })
    expect(next.owner_id).toBe('w2')
    expect(activeOn(engine, FILE).map((r) => r.owner_id)).toEqual(['w2'])
  })

  test('releasing twice answers the same again and writes nothing more', () => {
    const { engine, clock } = setup()
    granted(engine, { file: FILE, owner_id: 'w1' })
    const first = engine.releaseFile({ file: FILE, owner_id: 'w1' })
    clock.advance(SECOND)
    const events = sql(engine).one<{ n: number }>('SELECT COUNT(*) AS n FROM events')!.n
    expect(engine.releaseFile({ file: FILE, owner_id: 'w1' })).toEqual(first)
    expect(sql(engine).one<{ n: number }>('SELECT COUNT(*) AS n FROM events')!.n).toBe(events)
  })

  test('heartbeat and release by an owner that never held the file are 404 file_lease_not_found', () => {
    const { engine } = setup()
    granted(engine, { file: FILE, owner_id: 'w1' })
    expectEngineError(() => engine.heartbeatFile({ file: FILE, owner_id: 'w2' }), 404, 'file_lease_not_found')
    expectEngineError(() => engine.releaseFile({ file: FILE, owner_id: 'w2' }), 404, 'file_lease_not_found')
    expect(activeOn(engine, FILE).map((r) => r.owner_id)).toEqual(['w1'])
  })

  test('a file_lease_not_found detail quotes the owner, the file and the job lease printably', () => {
    const { engine } = setup()
    const error = expectEngineError(() => engine.releaseFile({ file: '/tmp/a\u001b[2J', owner_id: 'w\u0007', lease_id: 'l\u000a' }), 404, 'file_lease_not_found')
    expect(error.detail).toBe('w\\u0007 holds no lease on /tmp/a\\u001b[2J under job lease l\\u000a')
  })

  test('a heartbeat on a released file lease is 409 file_lease_not_held', () => {
    const { engine } = setup()
    granted(engine, { file: FILE, owner_id: 'w1' })
    engine.releaseFile({ file: FILE, owner_id: 'w1' })
    expectEngineError(() => engine.heartbeatFile({ file: FILE, owner_id: 'w1' }), 409, 'file_lease_not_held')
  })

  test('a job lease named by the acquire is fenced: an expired or released one is refused 409', () => {
    const { engine, clock } = setup()
    const a = runningJob(engine, 'w1')
    engine.release({ lease_id: a.lease.id, status: 'SUCCEEDED' })
    expectEngineError(() => engine.acquireFile({ file: FILE, owner_id: 'w1', lease_id: a.lease.id }), 409, 'lease_not_active')
    const b = runningJob(engine, 'w2')
    clock.advance(35 * SECOND) // b's expires_at, not yet reaped
    expectEngineError(() => engine.acquireFile({ file: FILE, owner_id: 'w2', lease_id: b.lease.id }), 409, 'lease_expired')
    expectEngineError(() => engine.acquireFile({ file: FILE, owner_id: 'w3', lease_id: '00000000-0000-4000-8000-000000000000' }), 404, 'lease_not_found')
    expect(rowsOn(engine, FILE)).toHaveLength(0)
  })
})

describe('listing file leases', () => {
  test('newest first, a page at a time: every lease once, also among leases acquired in one millisecond', () => {
    const { engine, clock } = setup()
    for (let i = 0; i < 7; i++) {
      granted(engine, { file: `/repo/f${i}.txt`, owner_id: 'w' })
      if (i % 3 === 2) clock.advance(1)
    }
    engine.releaseFile({ file: '/repo/f0.txt', owner_id: 'w' })
    const whole = engine.listFileLeases(null).file_leases.map((l) => l.file)
    expect(whole).toHaveLength(7)
    expect(engine.listFileLeases(null).next_cursor).toBeNull()
    for (const state of [null, 'ACTIVE'] as const) {
      const paged: string[] = []
      let cursor: string | undefined
      do {
        const page = engine.listFileLeases(state, { limit: 2, ...(cursor ? { cursor } : {}) })
        paged.push(...page.file_leases.map((l) => l.file))
        cursor = page.next_cursor ?? undefined
      } while (cursor)
      expect(paged).toEqual(state === null ? whole : whole.filter((file) => file !== '/repo/f0.txt'))
    }
    expect(() => engine.listFileLeases('ACTIVE', { limit: 501 })).toThrow(/limit: must be a whole number from 1 to 500/)
  })
})

describe("a job's attempts share its owner id; the job lease tells them apart", () => {
  test("a stale attempt's release or heartbeat naming its job lease never touches the file lease of the job's next attempt", () => {
    const { engine, clock } = setup()
    const job = engine.submit(aJob({ cost_units: 2, max_attempts: 3 })).job
    const owner = `job:${job.id}`
    const first = claimOrFail(engine, 'wA')
    granted(engine, { file: FILE, owner_id: owner, lease_id: first.lease.id })
    // wA goes silent: its job lease expires and the job runs again, in wB, under a new job lease.
    clock.advance(60 * SECOND)
    engine.reap()
    clock.advance(60 * SECOND)
    const second = claimOrFail(engine, 'wB')
    expect(second.job.id).toBe(job.id)
    const current = granted(engine, { file: FILE, owner_id: owner, lease_id: second.lease.id })

    // wA wakes and lets go of "its" file, as a handler's finally block would.
    expect(engine.releaseFile({ file: FILE, owner_id: owner, lease_id: first.lease.id })).toMatchObject({ state: 'RELEASED', lease_id: first.lease.id })
    expectEngineError(() => engine.heartbeatFile({ file: FILE, owner_id: owner, lease_id: first.lease.id }), 409, 'file_lease_not_held')
    expect(activeOn(engine, FILE)).toEqual([expect.objectContaining({ id: current.id, lease_id: second.lease.id })])
    // So the file is still wB's: a third job is denied it.
    engine.submit(aJob({ cost_units: 2 }))
    const third = claimOrFail(engine, 'wC')
    expect(engine.acquireFile({ file: FILE, owner_id: `job:${third.job.id}`, lease_id: third.lease.id })).toMatchObject({ granted: false, code: 'file_lease_held' })
    // wB's own heartbeat and release, naming its job lease, act on its file lease.
    expect(engine.heartbeatFile({ file: FILE, owner_id: owner, lease_id: second.lease.id }).id).toBe(current.id)
    expect(engine.releaseFile({ file: FILE, owner_id: owner, lease_id: second.lease.id })).toMatchObject({ id: current.id, state: 'RELEASED' })
  })
})

describe('an acquire naming a job lease acts on the file lease acquired under that job lease only', () => {
  test('an acquire under another job lease naming the holder\'s owner id is denied, and leaves the holder\'s file lease as it was', () => {
    const { engine, clock } = setup()
    // One worker using its worker id as the owner of every job it runs (owner ids are free text).
    const one = runningJob(engine, 'ws')
    const two = runningJob(engine, 'ws')
    const held = granted(engine, { file: FILE, owner_id: 'ws', lease_id: one.lease.id })
    clock.advance(SECOND)

    expect(engine.acquireFile({ file: FILE, owner_id: 'ws', lease_id: two.lease.id })).toMatchObject({
      granted: false,
      code: 'file_lease_held',
      contention: { holder: { owner_id: 'ws', job_id: one.job.id } },
    })
    expect(activeOn(engine, FILE)).toEqual([{ ...held }]) // not refreshed by the other job's credentials
    expect(fileEvents(engine, 'FILE_LEASE_CONTENDED').map((e) => e.data.requester_owner_id)).toEqual(['ws'])

    // The holder's re-acquire under its own job lease stays a heartbeat while the other job waits.
    expect(granted(engine, { file: FILE, owner_id: 'ws', lease_id: one.lease.id })).toMatchObject({ id: held.id, last_heartbeat_at: T0 + SECOND })
    // At its one retry the other job, the file still held, is halted.
    tick(engine, clock, FILE_RETRY_MS, { leases: [one.lease.id, two.lease.id], files: [[FILE, 'ws']] })
    expect(engine.acquireFile({ file: FILE, owner_id: 'ws', lease_id: two.lease.id })).toMatchObject({ granted: false, code: 'blocked' })
    expect(activeOn(engine, FILE)).toEqual([expect.objectContaining({ id: held.id, lease_id: one.lease.id })])
  })

  test('an acquire naming a job lease is denied a file its owner id holds under no job lease', () => {
    const { engine } = setup()
    const job = runningJob(engine, 'ws')
    const held = granted(engine, { file: FILE, owner_id: 'ws' })
    expect(engine.acquireFile({ file: FILE, owner_id: 'ws', lease_id: job.lease.id })).toMatchObject({ granted: false, code: 'file_lease_held' })
    expect(activeOn(engine, FILE)).toEqual([held])
  })

  test('an acquire naming no job lease speaks for the owner id: it re-acquires the file lease the owner holds under a job lease', () => {
    const { engine, clock } = setup()
    const job = runningJob(engine, 'ws')
    const held = granted(engine, { file: FILE, owner_id: 'ws', lease_id: job.lease.id })
    clock.advance(SECOND)
    expect(granted(engine, { file: FILE, owner_id: 'ws' })).toMatchObject({ id: held.id, lease_id: job.lease.id, last_heartbeat_at: T0 + SECOND })
  })
})

describe('the end of a job lease releases its files', () => {
  test('a file taken under a job lease before a restart is released when that lease ends after it', () => {
    const { dir, cleanup } = tempDir()
    try {
      const path = join(dir, 'leasehold.db')
      const first = openFileEngine(path)
      first.engine.submit(aJob())
      const { job, lease } = claimOrFail(first.engine, 'w1')
      const held = granted(first.engine, { file: FILE, owner_id: 'w1', lease_id: lease.id })
      first.sqlite.close()

      const second = openFileEngine(path, { clock: first.clock })
      second.engine.complete({ job_id: job.id, attempt_id: lease.attempt_id, worker_id: 'w1', lease_token: lease.token })
      expect(rowsOn(second.engine, FILE)).toEqual([expect.objectContaining({ id: held.id, state: 'RELEASED', release_reason: 'job_succeeded' })])
      second.sqlite.close()
    } finally {
      cleanup()
    }
  })
})

describe('file leases that overlap, from before the gate covered folders (migration 0021)', () => {
  /** A file lease row as a release before 0021 wrote it: granted whatever it overlapped. */
  const oldRow = (engine: Engine, row: { id: string; file: string; owner_id: string; acquired_at: number; lease_id?: string; job_id?: string }) =>
    sql(engine).run(
      "INSERT INTO file_leases (id, file, owner_id, lease_id, job_id, state, acquired_at, last_heartbeat_at) VALUES (?, ?, ?, ?, ?, 'ACTIVE', ?, ?)",
      row.id,
      row.file,
      row.owner_id,
      row.lease_id ?? null,
      row.job_id ?? null,
      row.acquired_at,
      row.acquired_at,
    )

  /** A database written by an old release, then the current engine started on it. */
  function upgraded(write: (engine: Engine) => void) {
    const { dir, cleanup } = tempDir()
    const path = join(dir, 'leasehold.db')
    const old = openFileEngine(path, { clock: new ManualClock(T0 - 5 * SECOND) })
    write(old.engine)
    old.sqlite.close()
    const started = openFileEngine(path)
    return { ...started, cleanup: () => (started.sqlite.close(), cleanup()) }
  }

  test('at a start the lease granted first keeps its path, and the later one that overlaps it is revoked with its reason, once', () => {
    const { engine, clock, cleanup } = upgraded((old) => {
      oldRow(old, { id: 'f-report', file: '/srv/out/report.csv', owner_id: 'tool-1', acquired_at: T0 - 2 * SECOND })
      oldRow(old, { id: 'f-srv', file: '/srv', owner_id: 'tool-2', acquired_at: T0 - SECOND })
      oldRow(old, { id: 'f-other', file: '/other/x', owner_id: 'tool-3', acquired_at: T0 - SECOND })
    })
    try {
      const overlaps = engine.revokeOverlappingFiles()
      expect(overlaps).toEqual([{ revoked: expect.objectContaining({ id: 'f-srv', file: '/srv', owner_id: 'tool-2' }), kept: expect.objectContaining({ id: 'f-report' }) }])
      expect(rowsOn(engine, '/srv')).toEqual([expect.objectContaining({ state: 'REVOKED', release_reason: 'overlapped', released_at: T0 })])
      const event = sql(engine).one<{ data: string }>("SELECT data FROM events WHERE event_type = 'FILE_LEASE_REVOKED' AND entity_id = 'f-srv'")
      expect(JSON.parse(event!.data)).toMatchObject({ reason: 'overlapped', overlapped: { file_lease_id: 'f-report', file: '/srv/out/report.csv', owner_id: 'tool-1' } })
      expect(engine.revokeOverlappingFiles()).toEqual([])

      // The gate's rule from here on: the revoked holder's writes are refused, its folder is not granted again.
      expectEngineError(() => engine.heartbeatFile({ file: '/srv', owner_id: 'tool-2' }), 409, 'file_lease_lost')
      expect(engine.acquireFile({ file: '/srv', owner_id: 'tool-2' })).toMatchObject({ granted: false, code: 'file_lease_held', contention: { holder: { file: '/srv/out/report.csv', owner_id: 'tool-1' } } })
      clock.advance(SECOND)
      expect(granted(engine, { file: '/srv/out/report.csv', owner_id: 'tool-1' })).toMatchObject({ id: 'f-report', last_heartbeat_at: T0 + SECOND })
      expect(engine.listFileLeases().file_leases.map((lease) => lease.file).sort()).toEqual(['/other/x', '/srv/out/report.csv'])
    } finally {
      cleanup()
    }
  })

  test("an owner's own overlapping leases are kept, and a lease whose owner is dead keeps nothing from a later one", () => {
    const { engine, cleanup } = upgraded((old) => {
      oldRow(old, { id: 'f-own-file', file: '/a/b/c.txt', owner_id: 'tool-1', acquired_at: T0 - 2 * SECOND })
      oldRow(old, { id: 'f-own-dir', file: '/a', owner_id: 'tool-1', acquired_at: T0 - SECOND })
      oldRow(old, { id: 'f-idle', file: '/d/e.txt', owner_id: 'tool-2', acquired_at: T0 - FILE_IDLE_MS - SECOND })
      oldRow(old, { id: 'f-live', file: '/d', owner_id: 'tool-3', acquired_at: T0 - SECOND })
    })
    try {
      expect(engine.revokeOverlappingFiles()).toEqual([])
    } finally {
      cleanup()
    }
  })

  test('a lease revoked under a job lease takes no file again and its job cannot succeed under that lease (file_lease_lost)', () => {
    let lease!: ReturnType<typeof claimOrFail>['lease']
    let job!: ReturnType<typeof claimOrFail>['job']
    const { engine, cleanup } = upgraded((old) => {
      old.submit(aJob())
      ;({ job, lease } = claimOrFail(old, { worker_id: 'w1' }, 600))
      oldRow(old, { id: 'f-file', file: '/srv/out/report.csv', owner_id: 'tool-1', acquired_at: T0 - 3 * SECOND })
      oldRow(old, { id: 'f-dir', file: '/srv', owner_id: 'w1', lease_id: lease.id, job_id: job.id, acquired_at: T0 - 2 * SECOND })
    })
    try {
      expect(engine.revokeOverlappingFiles().map(({ revoked }) => revoked.id)).toEqual(['f-dir'])
      expectEngineError(() => engine.acquireFile({ file: '/srv/y', owner_id: 'w1', lease_id: lease.id }), 409, 'file_lease_lost')
      expectEngineError(() => engine.complete({ job_id: job.id, attempt_id: lease.attempt_id, worker_id: 'w1', lease_token: lease.token }), 409, 'file_lease_lost')
    } finally {
      cleanup()
    }
  })
})

describe('the file key: the normalized absolute path', () => {
  test('/a/./b/../c/ and /a/c are one key', () => {
    expect(fileKey('/a/./b/../c/')).toBe('/a/c')
    expect(fileKey('/a/c')).toBe('/a/c')
    expect(fileKey('/a//c')).toBe('/a/c')
    expect(fileKey('/')).toBe('/')
  })

  test('two spellings of one file contend: the second owner is denied on the normalized key', () => {
    const { engine } = setup()
    const held = granted(engine, { file: '/a/./b/../c/', owner_id: 'w1' })
    expect(held.file).toBe('/a/c')
    const result = engine.acquireFile({ file: '/a/c', owner_id: 'w2' })
    expect(result).toMatchObject({ granted: false, code: 'file_lease_held', contention: { file: '/a/c', holder: { owner_id: 'w1' } } })
    expect(activeOn(engine, '/a/c')).toHaveLength(1)
  })

  test('the holder may re-acquire, heartbeat and release under any spelling of its file', () => {
    const { engine, clock } = setup()
    const held = granted(engine, { file: '/a/c', owner_id: 'w1' })
    expect(granted(engine, { file: '/a/b/../c', owner_id: 'w1' }).id).toBe(held.id)
    clock.advance(SECOND)
    expect(engine.heartbeatFile({ file: '/a/./c/', owner_id: 'w1' })).toMatchObject({ id: held.id, last_heartbeat_at: T0 + SECOND })
    expect(engine.releaseFile({ file: '/x/../a/c', owner_id: 'w1' })).toMatchObject({ id: held.id, state: 'RELEASED' })
  })

  test.each([
    ['relative', 'a/b.txt'],
    ['dot-relative', './a/b.txt'],
    ['parent-relative', '../etc/passwd'],
    ['empty', ''],
    ['NUL', '/a/b\0c'],
  ])('a %s path is 400 invalid_request on acquire, heartbeat and release, and nothing is written', (_kind, file) => {
    const { engine } = setup()
    const before = sql(engine).one<{ n: number }>('SELECT COUNT(*) AS n FROM events')!.n
    expectEngineError(() => engine.acquireFile({ file, owner_id: 'w1' }), 400, 'invalid_request')
    expectEngineError(() => engine.heartbeatFile({ file, owner_id: 'w1' }), 400, 'invalid_request')
    expectEngineError(() => engine.releaseFile({ file, owner_id: 'w1' }), 400, 'invalid_request')
    expect(sql(engine).one<{ n: number }>('SELECT COUNT(*) AS n FROM file_leases')!.n).toBe(0)
    expect(sql(engine).one<{ n: number }>('SELECT COUNT(*) AS n FROM events')!.n).toBe(before)
  })

  test('a Windows path is keyed by Windows rules whatever the host runs on: its separators, `.` and `..`, its drive letter upper case', () => {
    expect(fileKey('C:\\x\\y.txt')).toBe('C:\\x\\y.txt')
    expect(fileKey('C:/x/y.txt')).toBe('C:\\x\\y.txt')
    expect(fileKey('c:\\x\\.\\z\\..\\y.txt\\')).toBe('C:\\x\\y.txt')
    expect(fileKey('c:/')).toBe('C:\\')
    expect(fileKey('C:\\x\\..\\..')).toBe('C:\\')
    // The rest of the path is kept as written, as a POSIX path is: two spellings in other cases are two keys.
    expect(fileKey('C:\\X\\Y.txt')).toBe('C:\\X\\Y.txt')
    expect(fileKey('\\\\srv\\share\\x\\..\\y.txt')).toBe('\\\\srv\\share\\y.txt')
    expect(fileKey('\\\\srv\\share\\..\\..')).toBe('\\\\srv\\share\\')
    // POSIX paths keep their keys: a backslash in one is part of a name.
    expect(fileKey('/data/a\\b.txt')).toBe('/data/a\\b.txt')
    expect(fileKey('//data/./x/')).toBe('/data/x')
  })

  test.each([
    ['with neither drive nor share', '\\x\\y.txt'],
    ['drive-relative', 'C:x\\y.txt'],
    ['a server without a share', '\\\\srv'],
  ])('a Windows path %s is 400 invalid_request: it names no one file', (_kind, file) => {
    expectEngineError(() => fileKey(file), 400, 'invalid_request')
  })

  test.each([
    ['a drive path', '\\\\?\\C:\\x\\y.txt'],
    ['a drive path with ..', '\\\\?\\C:\\x\\..\\y.txt'],
    ['a share', '\\\\?\\UNC\\srv\\share\\y.txt'],
    ['a device path', '\\\\.\\C:\\x\\y.txt'],
    ['a prefix with /', '\\\\?/C:/x/y.txt'],
  ])('a Windows path with the \\\\?\\ or \\\\.\\ prefix (%s) is 400 invalid_request saying to send the path it names: it is no share named ? or .', (_kind, file) => {
    const { engine } = setup()
    const error = expectEngineError(() => engine.acquireFile({ file, owner_id: 'w1' }), 400, 'invalid_request')
    expect(error.message).toContain('send it without its \\\\?\\ or \\\\.\\ prefix')
    expect(sql(engine).one<{ n: number }>('SELECT COUNT(*) AS n FROM file_leases')!.n).toBe(0)
  })

  test("a Windows path's last name is keyed without the trailing dots and spaces Windows drops and without ::$DATA, its data stream; a POSIX path keeps them", () => {
    for (const file of ['C:\\x\\y.txt.', 'C:\\x\\y.txt ', 'C:\\x\\y.txt. .', 'c:/x/y.txt::$DATA', 'C:\\x\\y.txt::$data', 'C:\\x\\z\\..\\y.txt.\\']) {
      expect(fileKey(file), file).toBe('C:\\x\\y.txt')
    }
    expect(fileKey('C:\\x\\...')).toBe('C:\\x')
    expect(fileKey('\\\\srv\\share\\y.txt. ')).toBe('\\\\srv\\share\\y.txt')
    // A folder on the way keeps them, as Windows does; a root is no name; a named stream is a key of its own.
    expect(fileKey('C:\\x.\\y.txt')).toBe('C:\\x.\\y.txt')
    expect(fileKey('\\\\srv\\share.')).toBe('\\\\srv\\share.\\')
    expect(fileKey('C:\\x\\y.txt:meta')).toBe('C:\\x\\y.txt:meta')
    expect(fileKey('/data/y.txt. ')).toBe('/data/y.txt. ')
    expect(fileKey('/data/y.txt::$DATA')).toBe('/data/y.txt::$DATA')
    // So the spellings contend.
    const { engine } = setup()
    granted(engine, { file: 'C:\\x\\y.txt', owner_id: 'w1' })
    expect(engine.acquireFile({ file: 'C:\\x\\y.txt.', owner_id: 'w2' })).toMatchObject({ code: 'file_lease_held', contention: { file: 'C:\\x\\y.txt' } })
  })

  test('Windows paths contend on their keys, and a lease on a Windows folder covers what is inside it', () => {
    const { engine } = setup()
    expect(granted(engine, { file: 'c:/x/y.txt', owner_id: 'w1' }).file).toBe('C:\\x\\y.txt')
    expect(engine.acquireFile({ file: 'C:\\x\\y.txt', owner_id: 'w2' })).toMatchObject({ code: 'file_lease_held', contention: { holder: { owner_id: 'w1' } } })
    expect(engine.acquireFile({ file: 'C:\\x', owner_id: 'w3' })).toMatchObject({ code: 'file_lease_held', contention: { holder: { file: 'C:\\x\\y.txt' } } })
    expect(engine.acquireFile({ file: 'c:\\', owner_id: 'w4' })).toMatchObject({ code: 'file_lease_held' })
    expect(granted(engine, { file: 'C:\\x2\\y.txt', owner_id: 'w5' }).file).toBe('C:\\x2\\y.txt')
    expect(granted(engine, { file: 'D:\\x\\y.txt', owner_id: 'w6' }).file).toBe('D:\\x\\y.txt')
    expect(granted(engine, { file: '\\\\srv\\share\\d', owner_id: 'w7' }).file).toBe('\\\\srv\\share\\d')
    expect(engine.acquireFile({ file: '\\\\srv\\share\\d\\f.txt', owner_id: 'w8' })).toMatchObject({ code: 'file_lease_held', contention: { holder: { file: '\\\\srv\\share\\d' } } })
    // A POSIX root is no folder above a Windows path.
    expect(granted(engine, { file: '/', owner_id: 'w9' }).file).toBe('/')
  })

  test('a path that is not a string is 400 invalid_request', () => {
    expectEngineError(() => fileKey(undefined), 400, 'invalid_request')
    expectEngineError(() => fileKey(42), 400, 'invalid_request')
  })
})

describe('a lease on a folder covers everything under it', () => {
  test.each([
    ['a folder above the file', '/data/d', '/data/d/f.txt'],
    ['the file inside a held folder', '/data/d/f.txt', '/data/d'],
    ['a deep path inside the folder', '/data/d/e/f/g.txt', '/data/d'],
    ['the root above everything', '/', '/x/a.txt'],
    ['a path inside the root', '/x/a.txt', '/'],
  ])('a lease on %s conflicts: %s held, %s denied, the contention naming the path held', (_case, held, asked) => {
    const { engine, clock } = setup()
    granted(engine, { file: held, owner_id: 'w1' })
    clock.advance(2 * SECOND)
    const result = engine.acquireFile({ file: asked, owner_id: 'w2' })
    expect(result).toMatchObject({ granted: false, code: 'file_lease_held', contention: { file: asked, holder: { file: held, owner_id: 'w1', age_s: 2 } } })
    expect(fileEvents(engine, 'FILE_LEASE_CONTENDED')[0]!.data).toMatchObject({ file: asked, holder: { file: held } })
    expect(activeOn(engine, asked)).toEqual([])
  })

  test.each([
    ['a sibling folder that shares its name as a prefix', '/data/d', '/data/d2/g.txt'],
    ['a sibling file', '/data/d/f.txt', '/data/d/f.txt2'],
    ['a file beside the folder', '/data/d', '/data/e.txt'],
  ])('%s does not conflict', (_case, held, asked) => {
    const { engine } = setup()
    granted(engine, { file: held, owner_id: 'w1' })
    expect(engine.acquireFile({ file: asked, owner_id: 'w2' })).toMatchObject({ granted: true })
  })

  test("an owner's own leases under a folder do not refuse it the folder (a job that wrote in a folder may remove it)", () => {
    const { engine } = setup()
    const job = runningJob(engine, 'w1')
    granted(engine, { file: '/data/d/f.txt', owner_id: 'job', lease_id: job.lease.id })
    granted(engine, { file: '/data/d/g.txt', owner_id: 'job', lease_id: job.lease.id })
    expect(granted(engine, { file: '/data/d', owner_id: 'job', lease_id: job.lease.id }).file).toBe('/data/d')
    // Another job sharing the owner id holds it as any other owner would.
    const other = runningJob(engine, 'w2')
    expect(engine.acquireFile({ file: '/data/d/f.txt', owner_id: 'job', lease_id: other.lease.id })).toMatchObject({ granted: false, code: 'file_lease_held' })
  })

  test('a dead owner of a path inside the folder is reclaimed, with the evidence, and the folder granted', () => {
    const { engine, clock } = setup()
    const inside = granted(engine, { file: '/data/d/f.txt', owner_id: 'w1' })
    clock.advance(FILE_IDLE_MS)
    expect(granted(engine, { file: '/data/d', owner_id: 'w2' }).owner_id).toBe('w2')
    expect(rowsOn(engine, '/data/d/f.txt')).toEqual([expect.objectContaining({ id: inside.id, state: 'RELEASED', release_reason: 'reclaimed' })])
    expect(fileEvents(engine, 'FILE_LEASE_RELEASED')[0]!.data).toMatchObject({ reason: 'reclaimed', because: 'idle', reclaimed_by: 'w2' })
  })

  test('among many dead leases inside the folder, a live one further on still refuses it', () => {
    const { engine, clock } = setup()
    for (let i = 0; i < 70; i++) granted(engine, { file: `/data/d/${String(i).padStart(3, '0')}.txt`, owner_id: 'gone' })
    clock.advance(FILE_IDLE_MS)
    granted(engine, { file: '/data/d/zzz.txt', owner_id: 'w1' })
    expect(engine.acquireFile({ file: '/data/d', owner_id: 'w2' })).toMatchObject({ granted: false, contention: { holder: { file: '/data/d/zzz.txt', owner_id: 'w1' } } })
    expect(sql(engine).one<{ n: number }>("SELECT COUNT(*) AS n FROM file_leases WHERE state = 'ACTIVE'")!.n).toBe(1)
  })

  test('still held at the retry: the blocker report and the waiting line name the path held', () => {
    const { engine, clock } = setup()
    const holder = runningJob(engine, 'w1')
    const requester = runningJob(engine, 'w2')
    granted(engine, { file: '/data/d/f.txt', owner_id: 'h', lease_id: holder.lease.id })
    engine.acquireFile({ file: '/data/d', owner_id: 'r', lease_id: requester.lease.id })
    expect(engine.waiting([engine.getJob(requester.job.id)])[0]?.reason).toBe('refused file /data/d, held by h (it holds /data/d/f.txt); waits to try it again')
    tick(engine, clock, FILE_RETRY_MS, { leases: [holder.lease.id, requester.lease.id], files: [['/data/d/f.txt', 'h']] })
    const halted = engine.acquireFile({ file: '/data/d', owner_id: 'r', lease_id: requester.lease.id })
    expect(halted).toMatchObject({ granted: false, code: 'blocked', blocker: { file: '/data/d', holder_file: '/data/d/f.txt', holder_owner_id: 'h' } })
    const blocker = engine.listBlockers('OPEN').blockers[0]!
    expect(blocker).toMatchObject({ file: '/data/d', holder_file: '/data/d/f.txt', holder_holds_now: true })
    expect(engine.waiting([engine.getJob(requester.job.id)])[0]?.reason).toContain('halted on /data/d, held by h (it holds /data/d/f.txt)')
    // A force release takes the path the holder held.
    expect(engine.resolveBlocker(blocker.id, { action: 'force_release' }).taken_from_holder).toBe(true)
    expect(rowsOn(engine, '/data/d/f.txt')).toEqual([expect.objectContaining({ state: 'REVOKED' })])
  })
})

// ---------------------------------------------------------------------------------------------
// 2. Liveness: a dead owner never retains a lease

describe('liveness reclaim: a dead owner never retains a lease', () => {
  test('an owner whose job lease expired is dead: the next acquire reclaims it, with the evidence in a FILE_LEASE_RELEASED event', () => {
    const { engine, clock } = setup()
    const a = runningJob(engine, 'w1') // expires_at = T0 + 35 s unless heartbeated
    const held = granted(engine, { file: FILE, owner_id: 'w1', lease_id: a.lease.id })
    // The worker keeps touching the file but its job lease stops heartbeating.
    clock.advance(20 * SECOND)
    engine.heartbeatFile({ file: FILE, owner_id: 'w1' })
    clock.advance(15 * SECOND) // T0 + 35 s: the job lease's expires_at has come (the reaper has not run)
    const b = granted(engine, { file: FILE, owner_id: 'w2' })
    expect(b.owner_id).toBe('w2')
    expect(rowsOn(engine, FILE).find((r) => r.id === held.id)).toMatchObject({
      state: 'RELEASED',
      release_reason: 'reclaimed',
      released_at: T0 + 35 * SECOND,
    })
    const [reclaim] = fileEvents(engine, 'FILE_LEASE_RELEASED')
    expect(reclaim).toMatchObject({ entity_id: held.id, job_id: a.job.id, ts: T0 + 35 * SECOND })
    expect(reclaim!.data).toMatchObject({
      file: FILE,
      owner_id: 'w1',
      reason: 'reclaimed',
      because: 'owner_lease_ended',
      reclaimed_by: 'w2',
      at: T0 + 35 * SECOND,
      acquired_at: T0,
      last_heartbeat_at: T0 + 20 * SECOND,
      owner_lease: { lease_id: a.lease.id, state: 'ACTIVE', expires_at: T0 + 35 * SECOND, last_heartbeat_at: T0 },
    })
    expect(activeOn(engine, FILE).map((r) => r.owner_id)).toEqual(['w2'])
  })

  test('conservative: the owner is alive until its job lease expires_at (34.999 s: still denied)', () => {
    const { engine, clock } = setup()
    const a = runningJob(engine, 'w1')
    granted(engine, { file: FILE, owner_id: 'w1', lease_id: a.lease.id })
    clock.advance(20 * SECOND)
    engine.heartbeatFile({ file: FILE, owner_id: 'w1' })
    clock.advance(15 * SECOND - 1)
    expect(engine.acquireFile({ file: FILE, owner_id: 'w2' })).toMatchObject({ granted: false, code: 'file_lease_held' })
    expect(fileEvents(engine, 'FILE_LEASE_RELEASED')).toHaveLength(0)
  })

  test('the reaper expiring a job lease releases its file leases at once (owner_lease_expired)', () => {
    const { engine, clock } = setup()
    const a = runningJob(engine, 'w1')
    const held = granted(engine, { file: FILE, owner_id: 'w1', lease_id: a.lease.id })
    clock.advance(20 * SECOND)
    engine.heartbeatFile({ file: FILE, owner_id: 'w1' })
    clock.advance(15 * SECOND)
    expect(engine.reap().leases).toBe(1)
    expect(rowsOn(engine, FILE)[0]).toMatchObject({ id: held.id, state: 'RELEASED', release_reason: 'owner_lease_expired' })
    expect(fileEvents(engine, 'FILE_LEASE_RELEASED')[0]!.data).toMatchObject({ reason: 'owner_lease_expired', owner_id: 'w1' })
    expect(granted(engine, { file: FILE, owner_id: 'w2' }).owner_id).toBe('w2')
  })

  test.each([
    ['SUCCEEDED', 'job_succeeded'],
    ['FAILED', 'job_failed'],
    ['CANCELED', 'job_ended'],
  ] as const)('releasing the job lease with %s ends its file leases (%s), and the file is free', (status, reason) => {
    const { engine, clock } = setup()
    const a = runningJob(engine, 'w1')
    granted(engine, { file: FILE, owner_id: 'w1', lease_id: a.lease.id })
    granted(engine, { file: '/repo/other.ts', owner_id: 'w1', lease_id: a.lease.id })
    clock.advance(5 * SECOND)
    engine.release({ lease_id: a.lease.id, status })
    const rows = sql(engine).all<FileLeaseRow>('SELECT * FROM file_leases WHERE lease_id = ?', a.lease.id)
    expect(rows).toHaveLength(2)
    for (const row of rows) expect(row).toMatchObject({ state: 'RELEASED', release_reason: reason, released_at: T0 + 5 * SECOND })
    expect(fileEvents(engine, 'FILE_LEASE_RELEASED').map((e) => e.data.reason)).toEqual([reason, reason])
    expect(granted(engine, { file: FILE, owner_id: 'w2' }).owner_id).toBe('w2')
  })

  test('worker API completion and failure end the file leases too', () => {
    const { engine } = setup()
    const a = runningJob(engine, 'w1')
    const b = runningJob(engine, 'w2')
    granted(engine, { file: '/f/a', owner_id: 'w1', lease_id: a.lease.id })
    granted(engine, { file: '/f/b', owner_id: 'w2', lease_id: b.lease.id })
    engine.complete({ job_id: a.job.id, attempt_id: a.lease.attempt_id, worker_id: 'w1', lease_token: a.lease.token })
    engine.fail({ job_id: b.job.id, attempt_id: b.lease.attempt_id, worker_id: 'w2', lease_token: b.lease.token, error: { retryable: true } })
    expect(rowsOn(engine, '/f/a')[0]).toMatchObject({ state: 'RELEASED', release_reason: 'job_succeeded' })
    expect(rowsOn(engine, '/f/b')[0]).toMatchObject({ state: 'RELEASED', release_reason: 'job_failed' })
  })

  test('an owner without a job lease is dead after 30 s without acquire or heartbeat: the next acquire reclaims (because idle)', () => {
    const { engine, clock } = setup()
    const held = granted(engine, { file: FILE, owner_id: 'editor' })
    clock.advance(FILE_IDLE_MS - 1)
    expect(engine.acquireFile({ file: FILE, owner_id: 'w2' })).toMatchObject({ granted: false, code: 'file_lease_held' })
    clock.advance(1)
    const next = granted(engine, { file: FILE, owner_id: 'w3' })
    expect(next.owner_id).toBe('w3')
    const [reclaim] = fileEvents(engine, 'FILE_LEASE_RELEASED')
    expect(reclaim).toMatchObject({ entity_id: held.id, ts: T0 + FILE_IDLE_MS })
    expect(reclaim!.data).toMatchObject({
      reason: 'reclaimed',
      because: 'idle',
      reclaimed_by: 'w3',
      owner_id: 'editor',
      acquired_at: T0,
      last_heartbeat_at: T0,
      at: T0 + FILE_IDLE_MS,
    })
  })

  test('a live job lease does not keep an untouched file: the owner is idle after 30 s all the same', () => {
    const { engine, clock } = setup()
    const a = runningJob(engine, 'w1')
    granted(engine, { file: FILE, owner_id: 'w1', lease_id: a.lease.id })
    tick(engine, clock, FILE_IDLE_MS, { leases: [a.lease.id] })
    expect(engine.getLease(a.lease.id).state).toBe('ACTIVE')
    expect(granted(engine, { file: FILE, owner_id: 'w2' }).owner_id).toBe('w2')
    expect(fileEvents(engine, 'FILE_LEASE_RELEASED')[0]!.data).toMatchObject({ reason: 'reclaimed', because: 'idle' })
  })

  test('an owner that keeps heartbeating its file and its job lease is never reclaimed', () => {
    const { engine, clock } = setup()
    const a = runningJob(engine, 'w1')
    granted(engine, { file: FILE, owner_id: 'w1', lease_id: a.lease.id })
    for (let i = 0; i < 30; i++) {
      tick(engine, clock, 10 * SECOND, { leases: [a.lease.id], files: [[FILE, 'w1']] })
      engine.reap()
      expect(engine.acquireFile({ file: FILE, owner_id: `w-other-${i}` })).toMatchObject({ granted: false, code: 'file_lease_held' })
    }
    expect(activeOn(engine, FILE).map((r) => r.owner_id)).toEqual(['w1'])
    expect(fileEvents(engine, 'FILE_LEASE_RELEASED')).toHaveLength(0)
  })
})

// ---------------------------------------------------------------------------------------------
// 3. Stop-idle

describe('stop-idle: released after 30 s of inactivity', () => {
  test('held at 29.999 s of inactivity, released at 30 s (engine.reap)', () => {
    const { engine, clock } = setup()
    const held = granted(engine, { file: FILE, owner_id: 'w1' })
    clock.advance(FILE_IDLE_MS - 1)
    expect(engine.reap().idleFiles).toBe(0)
    expect(activeOn(engine, FILE)).toHaveLength(1)
    clock.advance(1)
    expect(engine.reap().idleFiles).toBe(1)
    expect(rowsOn(engine, FILE)[0]).toMatchObject({ id: held.id, state: 'RELEASED', release_reason: 'idle', released_at: T0 + FILE_IDLE_MS })
    const [event] = fileEvents(engine, 'FILE_LEASE_RELEASED')
    expect(event).toMatchObject({ entity_id: held.id, ts: T0 + FILE_IDLE_MS })
    expect(event!.data).toMatchObject({ reason: 'idle', owner_id: 'w1', file: FILE, acquired_at: T0, last_heartbeat_at: T0 })
    expect(engine.reap().idleFiles).toBe(0)
  })

  test('a heartbeat restarts the window: held at heartbeat + 29.999 s, released at heartbeat + 30 s', () => {
    const { engine, clock } = setup()
    granted(engine, { file: FILE, owner_id: 'w1' })
    clock.advance(20 * SECOND)
    engine.heartbeatFile({ file: FILE, owner_id: 'w1' })
    clock.advance(FILE_IDLE_MS - 1)
    expect(engine.reap().idleFiles).toBe(0)
    clock.advance(1)
    expect(engine.reap().idleFiles).toBe(1)
    expect(rowsOn(engine, FILE)[0]!.released_at).toBe(T0 + 20 * SECOND + FILE_IDLE_MS)
  })

  test('an acquire by the holder restarts the window like a heartbeat', () => {
    const { engine, clock } = setup()
    granted(engine, { file: FILE, owner_id: 'w1' })
    clock.advance(25 * SECOND)
    granted(engine, { file: FILE, owner_id: 'w1' })
    clock.advance(FILE_IDLE_MS - 1)
    expect(engine.reap().idleFiles).toBe(0)
    clock.advance(1)
    expect(engine.reap().idleFiles).toBe(1)
  })

  test('only the idle lease is released; a heartbeated one on another file stays', () => {
    const { engine, clock } = setup()
    granted(engine, { file: '/f/idle', owner_id: 'w1' })
    granted(engine, { file: '/f/busy', owner_id: 'w2' })
    tick(engine, clock, FILE_IDLE_MS, { files: [['/f/busy', 'w2']] })
    expect(engine.reap().idleFiles).toBe(1)
    expect(activeOn(engine, '/f/idle')).toHaveLength(0)
    expect(activeOn(engine, '/f/busy')).toHaveLength(1)
  })

  test('a heartbeat at 30 s of inactivity does not revive the lease, even before the reaper runs', () => {
    const { engine, clock } = setup()
    const held = granted(engine, { file: FILE, owner_id: 'w1' })
    clock.advance(FILE_IDLE_MS)
    expectEngineError(() => engine.heartbeatFile({ file: FILE, owner_id: 'w1' }), 409, 'file_lease_not_held')
    expect(rowsOn(engine, FILE)[0]).toMatchObject({ id: held.id, state: 'RELEASED', release_reason: 'idle', released_at: T0 + FILE_IDLE_MS })
    expect(engine.reap().idleFiles).toBe(0)
  })

  test('an acquire by the holder at 30 s of inactivity gets a new lease: the old one ended idle', () => {
    const { engine, clock } = setup()
    const old = granted(engine, { file: FILE, owner_id: 'w1' })
    clock.advance(FILE_IDLE_MS)
    const fresh = granted(engine, { file: FILE, owner_id: 'w1' })
    expect(fresh.id).not.toBe(old.id)
    expect(fresh.acquired_at).toBe(T0 + FILE_IDLE_MS)
    expect(rowsOn(engine, FILE).find((r) => r.id === old.id)).toMatchObject({ state: 'RELEASED' })
    expect(activeOn(engine, FILE).map((r) => r.id)).toEqual([fresh.id])
  })
})

// ---------------------------------------------------------------------------------------------
// 4. Contention heartbeat and the one retry at +180 s

describe('contention heartbeat and the one retry at +180 s', () => {
  /** w1 holds FILE under a job lease; w2 (with its own job lease) is denied at T0 + 7 s. */
  function contended() {
    const s = setup()
    const a = runningJob(s.engine, 'w1')
    const b = runningJob(s.engine, 'w2')
    granted(s.engine, { file: FILE, owner_id: 'w1', lease_id: a.lease.id })
    s.clock.advance(7 * SECOND)
    const denial = s.engine.acquireFile({ file: FILE, owner_id: 'w2', lease_id: b.lease.id })
    expect(denial).toMatchObject({ granted: false, code: 'file_lease_held' })
    const deniedAt = T0 + 7 * SECOND
    /** Both workers alive: job heartbeats for both; the holder touches its file. */
    const alive: KeepAlive = { leases: [a.lease.id, b.lease.id], files: [[FILE, 'w1']] }
    return { ...s, a, b, deniedAt, alive }
  }

  test('a denial emits one FILE_LEASE_CONTENDED event with retry_at = denied_at + 180 s', () => {
    const { engine, a, b, deniedAt } = contended()
    const events = fileEvents(engine, 'FILE_LEASE_CONTENDED')
    expect(events).toHaveLength(1)
    expect(events[0]).toMatchObject({ entity_type: 'FILE_LEASE', job_id: b.job.id, ts: deniedAt })
    expect(events[0]!.data).toEqual({
      file: FILE,
      holder: { file: FILE, owner_id: 'w1', job_id: a.job.id, acquired_at: T0, age_s: 7 },
      handed_over: null,
      denied_at: deniedAt,
      retry_at: deniedAt + 180 * SECOND,
      requester_owner_id: 'w2',
    })
    expect(engine.fileRetryAt(FILE, 'w2')).toBe(deniedAt + 180 * SECOND)
    expect(FILE_RETRY_MS).toBe(180 * SECOND)
  })

  test('a retry at 179.999 s is 429 retry_too_early, with no new event and retry_at unchanged', () => {
    const { engine, clock, b, deniedAt, alive } = contended()
    tick(engine, clock, 10 * SECOND, alive)
    // Short-loop attempts all refused, and none of them moves the retry.
    const early = expectEngineError(() => engine.acquireFile({ file: FILE, owner_id: 'w2', lease_id: b.lease.id }), 429, 'retry_too_early')
    expect(early.extra).toEqual({ retry_at: deniedAt + FILE_RETRY_MS, retry_after_s: (FILE_RETRY_MS - 10 * SECOND) / 1000 })
    tick(engine, clock, FILE_RETRY_MS - 10 * SECOND - 1, alive)
    expect(clock.now()).toBe(deniedAt + FILE_RETRY_MS - 1)
    expectEngineError(() => engine.acquireFile({ file: FILE, owner_id: 'w2', lease_id: b.lease.id }), 429, 'retry_too_early')
    expect(fileEvents(engine, 'FILE_LEASE_CONTENDED')).toHaveLength(1)
    expect(engine.fileRetryAt(FILE, 'w2')).toBe(deniedAt + FILE_RETRY_MS)
  })

  test('before retry_at the requester is refused 429 even if the file came free meanwhile', () => {
    const { engine, clock, b, alive } = contended()
    engine.releaseFile({ file: FILE, owner_id: 'w1' })
    tick(engine, clock, 60 * SECOND, { leases: alive.leases })
    expectEngineError(() => engine.acquireFile({ file: FILE, owner_id: 'w2', lease_id: b.lease.id }), 429, 'retry_too_early')
    expect(activeOn(engine, FILE)).toHaveLength(0)
  })

  test('the retry at exactly 180 s is evaluated: granted when the holder released meanwhile, and the contention is gone', () => {
    const { engine, clock, b, deniedAt, alive } = contended()
    tick(engine, clock, 100 * SECOND, alive)
    engine.releaseFile({ file: FILE, owner_id: 'w1' })
    tick(engine, clock, deniedAt + FILE_RETRY_MS - clock.now(), { leases: alive.leases })
    expect(clock.now()).toBe(deniedAt + FILE_RETRY_MS)
    const lease = granted(engine, { file: FILE, owner_id: 'w2', lease_id: b.lease.id })
    expect(lease).toMatchObject({ owner_id: 'w2', job_id: b.job.id, acquired_at: deniedAt + FILE_RETRY_MS })
    expect(engine.fileRetryAt(FILE, 'w2')).toBeNull()
    expect(contentionCount(engine)).toBe(0)
    expect(engine.listBlockers().blockers).toHaveLength(0)
  })

  test('the retry at 180 s is granted when the holder died meanwhile (reclaimed)', () => {
    const { engine, clock, a, b, deniedAt } = contended()
    // w1 stops heartbeating anything; w2 keeps its job lease alive.
    tick(engine, clock, FILE_RETRY_MS, { leases: [b.lease.id] })
    expect(clock.now()).toBe(deniedAt + FILE_RETRY_MS)
    expect(engine.getLease(a.lease.id).expires_at).toBeLessThan(clock.now()) // dead by time; the reaper is not run here
    expect(granted(engine, { file: FILE, owner_id: 'w2', lease_id: b.lease.id }).owner_id).toBe('w2')
  })

  test('the retry at 180 s while still held halts: a blocker, and no second retry is ever scheduled', () => {
    const { engine, clock, a, b, deniedAt, alive } = contended()
    tick(engine, clock, FILE_RETRY_MS, alive)
    expect(clock.now()).toBe(deniedAt + FILE_RETRY_MS)
    const result = engine.acquireFile({ file: FILE, owner_id: 'w2', lease_id: b.lease.id })
    expect(result).toMatchObject({ granted: false, code: 'blocked', blocker: { file: FILE, holder_owner_id: 'w1', holder_job_id: a.job.id } })
    expect(engine.fileRetryAt(FILE, 'w2')).toBeNull()
    expect(contentionCount(engine)).toBe(0)
    expect(fileEvents(engine, 'FILE_LEASE_CONTENDED')).toHaveLength(1)
    // The halted job's lease is gone: it cannot try again under it.
    expectEngineError(() => engine.acquireFile({ file: FILE, owner_id: 'w2', lease_id: b.lease.id }), 409, 'lease_not_active')
    tick(engine, clock, FILE_RETRY_MS, { leases: [a.lease.id], files: [[FILE, 'w1']] })
    expect(contentionCount(engine)).toBe(0)
    expect(engine.listBlockers().blockers).toHaveLength(1)
    expect(activeOn(engine, FILE).map((r) => r.owner_id)).toEqual(['w1'])
  })

  test('a retry late (after retry_at) is the one retry too: evaluated, not rescheduled', () => {
    const { engine, clock, b, deniedAt, alive } = contended()
    tick(engine, clock, FILE_RETRY_MS + 40 * SECOND, alive)
    const result = engine.acquireFile({ file: FILE, owner_id: 'w2', lease_id: b.lease.id })
    expect(result).toMatchObject({ granted: false, code: 'blocked', blocker: { denied_at: deniedAt, retried_at: deniedAt + FILE_RETRY_MS + 40 * SECOND } })
    expect(fileEvents(engine, 'FILE_LEASE_CONTENDED')).toHaveLength(1)
  })

  test('an owner without a job lease still blocked at its retry is halted with a report that names no job', () => {
    const { engine, clock } = setup()
    granted(engine, { file: FILE, owner_id: 'holder' })
    const alive: KeepAlive = { files: [[FILE, 'holder']] }
    expect(engine.acquireFile({ file: FILE, owner_id: 'me' })).toMatchObject({ code: 'file_lease_held' })
    tick(engine, clock, FILE_RETRY_MS, alive)
    // The one retry: still held, so a halt (no job to block: the report stands alone).
    const halted = engine.acquireFile({ file: FILE, owner_id: 'me' })
    expect(halted).toMatchObject({ granted: false, code: 'blocked', blocker: { requester_owner_id: 'me', requester_job_id: null } })
    expect(contentionCount(engine)).toBe(0)
    expect(fileEvents(engine, 'FILE_LEASE_CONTENDED')).toHaveLength(1)
  })

  test('a retry naming no job lease speaks for its owner id: after a denial under a job lease, its halt names and halts no job', () => {
    const { engine, clock, b, alive, deniedAt } = contended()
    tick(engine, clock, deniedAt + FILE_RETRY_MS - clock.now(), alive)
    const halted = engine.acquireFile({ file: FILE, owner_id: 'w2' })
    expect(halted).toMatchObject({ granted: false, code: 'blocked', blocker: { requester_owner_id: 'w2', requester_job_id: null, requester_lease_id: null } })
    // The job whose lease the denial came under runs on: no report claims it was halted.
    expect(engine.getJob(b.job.id).state).toBe('RUNNING')
  })

  test('the pending retry is per file and requester: other files and other requesters are not held back by it', () => {
    const { engine, b } = contended()
    expect(granted(engine, { file: '/repo/other.ts', owner_id: 'w2', lease_id: b.lease.id }).owner_id).toBe('w2')
    expect(engine.acquireFile({ file: FILE, owner_id: 'w3' })).toMatchObject({ granted: false, code: 'file_lease_held' })
    expect(contentionCount(engine)).toBe(2)
  })

  test("the requester's job lease ending drops its pending retry", () => {
    const { engine, b } = contended()
    engine.release({ lease_id: b.lease.id, status: 'FAILED' })
    expect(engine.fileRetryAt(FILE, 'w2')).toBeNull()
    expect(contentionCount(engine)).toBe(0)
  })

  test('retry scheduling is monotonic: retry_at is denied_at + 180 s exactly, whatever time the denial happens', () => {
    const { engine, clock } = setup()
    granted(engine, { file: FILE, owner_id: 'holder' })
    for (let i = 0; i < 5; i++) {
      clock.advance(1_234 * (i + 1))
      engine.heartbeatFile({ file: FILE, owner_id: 'holder' })
      const r = engine.acquireFile({ file: FILE, owner_id: `r${i}` })
      if (r.granted || r.code !== 'file_lease_held') throw new Error('expected a denial')
      expect(r.contention.retry_at - r.contention.denied_at).toBe(180_000)
      expect(r.contention.denied_at).toBe(clock.now())
    }
  })
})
