/**
 * The pruner: retention on a timer, in short steps with the event loop between them, and a
 * database file that stops growing once finished jobs are deleted as fast as new ones finish.
 * The engine's clock is a ManualClock; the pruner's own timer is vitest's fake timers.
 */
import { afterEach, describe, expect, it, vi } from 'vitest'
import type { Engine } from '../../src-main/engine'
import { DAY, HOUR, MINUTE, SECOND } from '../../src-main/engine/rules/clock'
import { PRUNE_BATCH, SWEEP_READS_PER_DELETE } from '../../src-main/engine/verbs/prune'
import { PRUNE_FIRST_DELAY_MS, PRUNE_INTERVAL_MS, Pruner, type PassHealth } from '../../src-main/retention/pruner'
import { DELETION_LOG_EVERY_MS } from '../../src-main/retention/deletion-log'
import { aJob, setup } from '../helpers/engine'
import { StorageFaultInjector } from '../helpers/storage-faults'
import { database } from '../helpers/database'

/** Health that remembers what it was told. */
function recordingHealth(): PassHealth & { outcomes: string[] } {
  const outcomes: string[] = []
  return { outcomes, ok: () => outcomes.push('ok'), failed: (error) => outcomes.push(`failed: ${(error as Error).message}`) }
}

/** `count` jobs run to DONE, with a payload of `payloadBytes`. */
function finishJobs(engine: Engine, count: number, payloadBytes = 16): void {
  const payload = { pad: 'x'.repeat(payloadBytes) }
  for (let done = 0; done < count; done += 500) {
    engine.submitMany(Array.from({ length: Math.min(500, count - done) }, () => aJob({ payload })))
    let claimed = engine.claimBatch({ worker_id: 'w' }, 100).granted
    while (claimed.length > 0) {
      const complete = claimed.map(({ job_id, attempt_id, lease_token }) => ({ job_id, attempt_id, lease_token }))
      claimed = engine.exchange({ worker_id: 'w', complete, claim: { filter: {}, max_jobs: 100 } }).claimed.granted
    }
  }
}

const jobCount = (engine: Engine) => database(engine).prepare('SELECT COUNT(*) FROM jobs').pluck().get() as number
const pages = (engine: Engine) => engine.storage().page_count

let pruner: Pruner | undefined
afterEach(async () => {
  await pruner?.stop()
  pruner = undefined
  vi.useRealTimers()
})

describe('the pruner runs on its timer', () => {
  it('a pass soon after start, then one a minute, each deleting what has expired by then', async () => {
    // The timer's clock is faked; setImmediate is not: a pass yields to the real event loop.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] })
    const { engine, clock } = setup()
    finishJobs(engine, 10)
    clock.advance(2 * DAY)
    pruner = new Pruner({ engine, retainDays: 1, health: recordingHealth() })
    pruner.start()
    await vi.advanceTimersByTimeAsync(PRUNE_FIRST_DELAY_MS - 1)
    await pruner.idle()
    expect(jobCount(engine)).toBe(10)
    await vi.advanceTimersByTimeAsync(1)
    await pruner.idle()
    expect(jobCount(engine)).toBe(0)
    expect(pruner.last).toMatchObject({ at: clock.now(), retain_days: 1, jobs_deleted: 10 })

    finishJobs(engine, 5)
    clock.advance(DAY + MINUTE)
    await vi.advanceTimersByTimeAsync(PRUNE_INTERVAL_MS - PRUNE_FIRST_DELAY_MS - 1)
    await pruner.idle()
    expect(jobCount(engine)).toBe(5)
    await vi.advanceTimersByTimeAsync(1)
    await pruner.idle()
    expect(jobCount(engine)).toBe(0)
  })

  it('a pass deletes the skipped runs of a schedule older than the cutoff, keeping its newest run', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] })
    const { engine, clock } = setup()
    engine.createSchedule({ name: 'big', cron: '* * * * *', timezone: 'UTC', job: { job_type: 'report', cost_units: 50 } })
    engine.setCapacity({ total_units: 10 }) // every firing is skipped: its cost exceeds the capacity
    for (let minute = 1; minute <= 5; minute++) {
      clock.advance(MINUTE)
      engine.fireDueSchedules()
    }
    const runs = () => database(engine).prepare('SELECT COUNT(*) FROM schedule_runs').pluck().get() as number
    expect(runs()).toBe(5)
    clock.advance(2 * DAY)
    pruner = new Pruner({ engine, retainDays: 1, health: recordingHealth() })
    pruner.start()
    await vi.advanceTimersByTimeAsync(PRUNE_FIRST_DELAY_MS)
    await pruner.idle()
    expect(runs()).toBe(1)
  })

  it('a pass deletes the file leases of owners without a job that ended before the cutoff, and keeps one still held', async () => {
    const { engine, clock } = setup()
    engine.acquireFile({ file: '/tools/held', owner_id: 'keeper' })
    for (let n = 0; n < 30; n++) {
      engine.acquireFile({ file: `/tools/f${n}`, owner_id: `tool${n}` })
      engine.releaseFile({ file: `/tools/f${n}`, owner_id: `tool${n}` })
    }
    const fileLeases = () => database(engine).prepare('SELECT owner_id FROM file_leases').pluck().all()
    expect(fileLeases()).toHaveLength(31)
    clock.advance(2 * DAY)
    pruner = new Pruner({ engine, retainDays: 1, health: recordingHealth() })
    await pruner.runPass()
    expect(fileLeases()).toEqual(['keeper'])
  })

  it('with --retain-days 0 a pass deletes no job', async () => {
    const { engine, clock } = setup()
    finishJobs(engine, 10)
    clock.advance(1000 * DAY)
    pruner = new Pruner({ engine, retainDays: 0, health: recordingHealth() })
    await pruner.runPass()
    expect(jobCount(engine)).toBe(10)
    expect(pruner.last).toMatchObject({ jobs_deleted: 0, retain_days: 0 })
  })
})

describe('what retention deletes is said in the log', () => {
  it('the first pass of a start that deletes anything says at once how many finished jobs and events, older than what, and the flag that sets it', async () => {
    const { engine, clock } = setup()
    finishJobs(engine, 3)
    engine.setCapacity({ total_units: 50 }) // an event that names no job
    clock.advance(8 * DAY)
    const lines: string[] = []
    pruner = new Pruner({ engine, retainDays: 7, health: recordingHealth(), log: (line) => lines.push(line) })
    await pruner.runPass()
    expect(lines).toEqual([
      `leasehold: retention deleted 3 finished jobs and 1 event that named no job, older than 7 days (before ${new Date(clock.now() - 7 * DAY).toISOString()}); --retain-days sets how long they are kept (0 keeps every job)`,
    ])
  })

  it('later deletions are added up into at most one line an hour, and what is left is said at the stop; a pass that deletes nothing says nothing', async () => {
    const { engine, clock } = setup()
    const lines: string[] = []
    pruner = new Pruner({ engine, retainDays: 1, health: recordingHealth(), log: (line) => lines.push(line) })
    await pruner.runPass()
    expect(lines).toEqual([]) // nothing to delete
    // Five batches of finished jobs, 10 minutes apart but for the 50 minutes after the third.
    for (const [count, gap] of [[1, 10], [2, 10], [3, 50], [4, 10], [5, 0]] as const) {
      finishJobs(engine, count)
      clock.advance(gap * MINUTE)
    }
    clock.advance(DAY - 80 * MINUTE + 1) // the first batch is a day and a millisecond old
    await pruner.runPass()
    const firstAt = clock.now()
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/^leasehold: retention deleted 1 finished job and 0 events that named no job, older than 1 day \(before /)
    for (const minutes of [10, 10]) {
      clock.advance(minutes * MINUTE)
      await pruner.runPass() // deletes the next batch, within the hour of the first line: held
    }
    clock.advance(40 * MINUTE)
    await pruner.runPass() // an hour on, but nothing deleted: nothing said
    expect(lines).toHaveLength(1)
    clock.advance(10 * MINUTE)
    await pruner.runPass()
    expect(lines).toHaveLength(2)
    expect(lines[1]).toMatch(new RegExp(`^leasehold: retention deleted 9 finished jobs and 0 events that named no job since ${new Date(firstAt).toISOString()}, older than 1 day \\(before `))
    clock.advance(10 * MINUTE)
    await pruner.runPass()
    expect(lines).toHaveLength(2)
    await pruner.stop()
    expect(lines).toHaveLength(3)
    expect(lines[2]).toMatch(/^leasehold: retention deleted 5 finished jobs and 0 events that named no job since /)
    expect(HOUR).toBe(DELETION_LOG_EVERY_MS)
  })
})

describe('a pass works in short steps', () => {
  it('lets the event loop run between steps of at most PRUNE_BATCH jobs', async () => {
    const { engine, clock } = setup()
    finishJobs(engine, 3 * PRUNE_BATCH + 10)
    clock.advance(2 * DAY)
    pruner = new Pruner({ engine, retainDays: 1, health: recordingHealth() })
    // What other callbacks see while the pass runs: the jobs left between its steps.
    const seen: number[] = []
    let watching = true
    const watch = () => {
      seen.push(jobCount(engine))
      if (watching) setImmediate(watch)
    }
    setImmediate(watch)
    await pruner.runPass()
    watching = false
    const total = 3 * PRUNE_BATCH + 10
    expect(seen).toContain(total - PRUNE_BATCH)
    expect(seen).toContain(total - 2 * PRUNE_BATCH)
    expect(seen).toContain(total - 3 * PRUNE_BATCH)
    expect(jobCount(engine)).toBe(0)
  })

  it('a pass goes on through steps that delete nothing until its sweep has read every old job', async () => {
    const { engine, clock } = setup()
    // More old jobs that never finish than a step reads, then finished ones.
    const waiting = SWEEP_READS_PER_DELETE * PRUNE_BATCH + 50
    engine.submitMany(Array.from({ length: waiting }, () => aJob({ queue: 'parked' })))
    engine.pauseQueue('parked', null)
    finishJobs(engine, 20)
    engine.submit(aJob({ queue: 'parked' })) // one made after them
    clock.advance(2 * DAY)
    pruner = new Pruner({ engine, retainDays: 1, health: recordingHealth() })
    await pruner.runPass()
    expect(pruner.last).toMatchObject({ jobs_deleted: 20 })
    expect(jobCount(engine)).toBe(waiting + 1)
  })

  it('stop ends a pass in progress at its next step', async () => {
    const { engine, clock } = setup()
    finishJobs(engine, 4 * PRUNE_BATCH)
    clock.advance(2 * DAY)
    pruner = new Pruner({ engine, retainDays: 1, health: recordingHealth() })
    const pass = pruner.runPass()
    await pruner.stop()
    await pass
    expect(jobCount(engine)).toBe(3 * PRUNE_BATCH) // one step ran before the stop was seen
    expect(pruner.last).toBeNull()
    await pruner.runPass() // stopped: no more passes
    expect(jobCount(engine)).toBe(3 * PRUNE_BATCH)
  })

  it('a failing pass is reported, and the next one that works says so', async () => {
    const { engine, clock } = setup()
    finishJobs(engine, 10)
    clock.advance(2 * DAY)
    const health = recordingHealth()
    pruner = new Pruner({ engine, retainDays: 1, health })
    const faults = new StorageFaultInjector(database(engine))
    try {
      faults.code = 'SQLITE_FULL'
      await pruner.runPass()
      expect(health.outcomes).toEqual(['failed: database or disk is full'])
      expect(jobCount(engine)).toBe(10)
      faults.code = null
      await pruner.runPass()
      expect(health.outcomes.at(-1)).toBe('ok')
      expect(jobCount(engine)).toBe(0)
    } finally {
      faults.dispose()
    }
    expect(database(engine).pragma('foreign_keys', { simple: true })).toBe(1)
  })
})

describe('the database stops growing in steady state', () => {
  /**
   * Runs `days` days of 300 jobs a day (1 KB payloads) and 100 events that name no job (worker
   * problems), a pruner pass at the end of each; returns the page count after each day.
   */
  async function days(engine: Engine, advance: (ms: number) => void, retainDays: number, count: number): Promise<number[]> {
    pruner = new Pruner({ engine, retainDays, health: recordingHealth() })
    const counts: number[] = []
    for (let day = 0; day < count; day++) {
      for (let i = 0; i < 100; i++) engine.recordWorkerProblem('w', { kind: 'handler', detail: 'x'.repeat(200) })
      finishJobs(engine, 300, 1024)
      advance(DAY)
      await pruner.runPass()
      counts.push(pages(engine))
    }
    return counts
  }

  it('with retention the page count stays bounded over submit, finish and prune cycles', async () => {
    const { engine, clock } = setup()
    const counts = await days(engine, (ms) => clock.advance(ms), 2, 16)
    const settled = counts[3]!
    // From the fourth day on, two days of jobs are kept: the file reuses the pages of the jobs it deleted.
    for (const count of counts.slice(4)) expect(count).toBeLessThanOrEqual(settled * 1.05)
    expect(jobCount(engine)).toBeLessThanOrEqual(2 * 300 + 1)
    expect(database(engine).prepare('SELECT COUNT(*) FROM events WHERE job_id IS NULL').pluck().get()).toBeLessThanOrEqual(2 * 100)
  })

  it('without retention it grows with every day (what the bound above is measured against)', async () => {
    const { engine, clock } = setup()
    const counts = await days(engine, (ms) => clock.advance(ms), 0, 6)
    for (let i = 1; i < counts.length; i++) expect(counts[i]!).toBeGreaterThan(counts[i - 1]! + 100)
  })

  it('surplus free pages go back to the file system after a large deletion', async () => {
    const { engine, clock } = setup()
    finishJobs(engine, 4000, 4096) // enough that a quarter of the file is more than the free reserve kept (1,024 pages)
    const full = pages(engine)
    clock.advance(2 * DAY)
    pruner = new Pruner({ engine, retainDays: 1, health: recordingHealth() })
    await pruner.runPass()
    const after = engine.storage()
    expect(pruner.last!.pages_returned).toBeGreaterThan(full / 2)
    expect(after.page_count).toBeLessThan(full / 4)
    // What stays free is the reserve the next jobs will reuse.
    expect(after.freelist_count).toBeLessThanOrEqual(Math.max(1024, after.page_count / 10))
    expect(database(engine).pragma('integrity_check', { simple: true })).toBe('ok')
  })
})

describe('timing', () => {
  it('a pass records the longest step it took', async () => {
    const { engine, clock } = setup()
    finishJobs(engine, PRUNE_BATCH * 2)
    clock.advance(2 * DAY + 10 * SECOND)
    pruner = new Pruner({ engine, retainDays: 1, health: recordingHealth() })
    await pruner.runPass()
    expect(pruner.last!.longest_step_ms).toBeGreaterThan(0)
    expect(pruner.last!.longest_step_ms).toBeLessThanOrEqual(pruner.last!.duration_ms)
  })
})
