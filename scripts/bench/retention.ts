/**
 * Retention's figures (docs/retention.md): how fast the pruner deletes a million finished jobs
 * and how long one of its steps holds the write lock, and the database's size after a million
 * jobs with and without retention. The jobs' rows are written as a real run leaves them
 * (insertFinished with every lifecycle row); the pruner is the host's own, on a ManualClock.
 */
import { statSync } from 'node:fs'
import { cpus, loadavg } from 'node:os'
import { performance } from 'node:perf_hooks'
import { Engine } from '../../src-main/engine'
import { DAY, ManualClock } from '../../src-main/engine/rules/clock'
import { openDatabase } from '../../src-main/db/open'
import { PRUNE_BATCH } from '../../src-main/engine/verbs/prune'
import { Pruner, VACUUM_STEP_PAGES } from '../../src-main/retention/pruner'
import { percentile, T0, tempDir, type Row, type TempDir } from './lib'
import { insertFinished } from './measure'
import { engineContext } from '../../src-main/engine/internals'

/** The million jobs arrive over this many days, a day's worth at a time. */
const DAYS = 30
/** The retention of the "with retention" run: the default. */
const RETAIN_DAYS = 7

const MB = 1024 * 1024
const n = (count: number) => count.toLocaleString('en-US')

interface Built {
  engine: Engine
  clock: ManualClock
  pruner: Pruner
  /** A pruner pass now; a pass that fails fails the bench. */
  pass(): Promise<void>
  close(): void
  /** The database file and its WAL, bytes. */
  size(): { file: number; wal: number }
}

function open(dir: TempDir, retainDays: number): Built {
  const path = dir.path('leasehold.db')
  const { sqlite } = openDatabase({ path })
  const clock = new ManualClock(T0)
  const engine = new Engine({ db: sqlite, clock })
  const failures: unknown[] = []
  const pruner = new Pruner({ engine, retainDays, health: { ok: () => {}, failed: (error) => failures.push(error) } })
  const size = () => ({ file: statSync(path).size, wal: statSync(`${path}-wal`, { throwIfNoEntry: false })?.size ?? 0 })
  const pass = async () => {
    await pruner.runPass()
    if (failures.length > 0) throw failures[0]
  }
  return { engine, clock, pruner, pass, close: () => sqlite.close(), size }
}

type Timed = 'pruneFinishedJobs' | 'pruneStats' | 'returnFreePages' | 'checkpoint'

/**
 * Records each call of these engine methods (the pruner calls them through the engine): its wall
 * time, and the process's CPU time during it, ms. On a shared machine the wall time of a step
 * includes the time the process waited for a core; the CPU time does not.
 */
function timeEachCall(engine: Engine, names: readonly Timed[]): Record<Timed, { wall: number[]; cpu: number[] }> {
  const out = {} as Record<Timed, { wall: number[]; cpu: number[] }>
  for (const name of names) {
    const times = (out[name] = { wall: [] as number[], cpu: [] as number[] })
    const original = engine[name] as (...args: unknown[]) => unknown
    ;(engine as unknown as Record<Timed, (...args: unknown[]) => unknown>)[name] = (...args: unknown[]) => {
      const started = performance.now()
      const cpu = process.cpuUsage()
      try {
        return original(...args)
      } finally {
        times.wall.push(performance.now() - started)
        const used = process.cpuUsage(cpu)
        times.cpu.push((used.user + used.system) / 1000)
      }
    }
  }
  return out
}

const ms = (value: number) => `${value.toFixed(1)} ms`
const max = (values: number[]) => Math.max(0, ...values)

/** `jobs` jobs arriving evenly over DAYS days, each day's finished before a pruner pass at its end. */
async function fill(b: Built, jobs: number, progress: (m: string) => void): Promise<void> {
  for (let day = 1; day <= DAYS; day++) {
    const today = Math.floor((jobs * day) / DAYS) - Math.floor((jobs * (day - 1)) / DAYS)
    b.clock.set(T0 + day * DAY)
    insertFinished(engineContext(b.engine).db, today, b.clock.now(), { lifecycle: true })
    await b.pass()
    if (day % 10 === 0) progress(`  day ${day} of ${DAYS}: ${(b.size().file / MB).toFixed(0)} MB`)
  }
}

export async function measureRetention(jobs: number, progress: (m: string) => void, rows: Row[] = []): Promise<Row[]> {
  const over = `${n(jobs)} jobs over ${DAYS} days, each with its stream message, lease, attempt and 4 events`

  progress(`database size without retention: ${n(jobs)} jobs over ${DAYS} days`)
  const keepDir = tempDir('retention-none')
  try {
    const b = open(keepDir, 0)
    await fill(b, jobs, progress)
    const kept = b.size()
    rows.push({
      name: `database size after ${n(jobs)} jobs, without retention`,
      value: (kept.file + kept.wal) / MB,
      unit: 'MB',
      note: `${over}; --retain-days 0; file ${(kept.file / MB).toFixed(0)} MB + WAL ${(kept.wal / MB).toFixed(0)} MB, ${((kept.file + kept.wal) / jobs).toFixed(0)} bytes/job`,
    })
    b.close()

    // The same million, now all older than the period: one pass deletes them all.
    progress(`pruning ${n(jobs)} finished jobs`)
    const p = open(keepDir, RETAIN_DAYS)
    // The rows were written in bulk, 40 MB of distinct pages left in the WAL; a host's own
    // commits would have checkpointed them as they went. Not the pruner's to copy.
    engineContext(p.engine).db.pragma('wal_checkpoint(TRUNCATE)')
    p.clock.set(T0 + (DAYS + RETAIN_DAYS + 1) * DAY)
    const calls = timeEachCall(p.engine, ['pruneFinishedJobs', 'pruneStats', 'returnFreePages', 'checkpoint'])
    const load = loadavg()[0]!
    await p.pass()
    const pass = p.pruner.last!
    const left = engineContext(p.engine).db.prepare('SELECT COUNT(*) FROM jobs').pluck().get() as number
    const after = p.size()
    rows.push(
      {
        name: `pruning ${n(jobs)} finished jobs`,
        value: (pass.jobs_deleted * 1000) / pass.duration_ms,
        unit: 'jobs/s',
        note: `${n(pass.jobs_deleted)} deleted (${left} kept: the newest rows' holder) in ${(pass.duration_ms / 1000).toFixed(1)} s, ${n(pass.pages_returned)} pages given back; file ${(after.file / MB).toFixed(0)} MB after`,
      },
      {
        name: 'pruning: longest write-lock hold of one step',
        value: pass.longest_step_ms,
        unit: 'ms',
        note:
          `one transaction (≤ ${PRUNE_BATCH} jobs deleted, or ≤ ${VACUUM_STEP_PAGES} pages given back), wall time; a claim waits at most this long. ` +
          `Deleting steps (${n(calls.pruneFinishedJobs.wall.length)}): p50 ${ms(percentile(calls.pruneFinishedJobs.wall, 50))}, ` +
          `p99 ${ms(percentile(calls.pruneFinishedJobs.wall, 99))}, max ${ms(max(calls.pruneFinishedJobs.wall))} ` +
          `(CPU p50 ${ms(percentile(calls.pruneFinishedJobs.cpu, 50))}, max ${ms(max(calls.pruneFinishedJobs.cpu))}); ` +
          `vacuum steps (${n(calls.returnFreePages.wall.length)}): p50 ${ms(percentile(calls.returnFreePages.wall, 50))}, max ${ms(max(calls.returnFreePages.wall))} ` +
          `(CPU max ${ms(max(calls.returnFreePages.cpu))}); load average ${load.toFixed(1)} on ${cpus().length} cores at the start`,
      },
      {
        name: 'pruning: longest checkpoint between steps',
        value: pass.longest_checkpoint_ms,
        unit: 'ms',
        note:
          `a passive WAL checkpoint every few steps (no lock held, but the event loop waits for it): ${n(calls.checkpoint.wall.length)}, ` +
          `p50 ${ms(percentile(calls.checkpoint.wall, 50))}, p99 ${ms(percentile(calls.checkpoint.wall, 99))} (CPU max ${ms(max(calls.checkpoint.cpu))})`,
      },
    )
    p.close()
  } finally {
    keepDir.cleanup()
  }

  progress(`database size with retention: ${n(jobs)} jobs over ${DAYS} days, --retain-days ${RETAIN_DAYS}`)
  const pruneDir = tempDir('retention-7')
  try {
    const b = open(pruneDir, RETAIN_DAYS)
    await fill(b, jobs, progress)
    const size = b.size()
    const held = engineContext(b.engine).db.prepare('SELECT COUNT(*) FROM jobs').pluck().get() as number
    rows.push({
      name: `database size after ${n(jobs)} jobs, with retention`,
      value: (size.file + size.wal) / MB,
      unit: 'MB',
      note: `${over}; --retain-days ${RETAIN_DAYS} (${n(held)} jobs kept); file ${(size.file / MB).toFixed(0)} MB + WAL ${(size.wal / MB).toFixed(0)} MB`,
    })
    b.close()
  } finally {
    pruneDir.cleanup()
  }
  return rows
}
