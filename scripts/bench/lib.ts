/** Small helpers shared by the benchmark's measurements: temp databases, timing, percentiles, the table. */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import type { Database } from 'better-sqlite3'
import { openDatabase, type Durability } from '../../src-main/db/open'
import { ManualClock } from '../../src-main/engine/rules/clock'
import { Engine } from '../../src-main/engine'

/** The instant every benchmark clock starts from (the tests use the same one). */
export const T0 = Date.UTC(2026, 0, 1)

/** A directory in os.tmpdir() that `cleanup` removes with the database and its -wal/-shm files. */
export interface TempDir {
  path(name: string): string
  cleanup(): void
}

export function tempDir(label: string): TempDir {
  const dir = mkdtempSync(join(tmpdir(), `leasehold-bench-${label}-`))
  return { path: (name) => join(dir, name), cleanup: () => rmSync(dir, { recursive: true, force: true }) }
}

export interface BenchEngine {
  engine: Engine
  clock: ManualClock
  db: Database
}

/** A fresh, migrated file database in `dir` and an engine on a manual clock at T0. */
export function openEngine(dir: TempDir, durability: Durability, totalUnits = 100): BenchEngine {
  const { sqlite } = openDatabase({ path: dir.path('bench.sqlite'), durability })
  const clock = new ManualClock(T0)
  const engine = new Engine({ db: sqlite, clock, capacity: { total_units: totalUnits, busy_rating: 0 } })
  return { engine, clock, db: sqlite }
}

/**
 * The same database opened anew, on a clock where the old one stood: an engine hands out job
 * keys, fences and message ids from memory, so after rows were written around it (measure.ts
 * `insertBacklog`) a new one must start past what they reserved.
 */
export function reopenEngine(dir: TempDir, b: BenchEngine, durability: Durability): BenchEngine {
  const now = b.clock.now()
  b.db.close()
  const reopened = openEngine(dir, durability)
  reopened.clock.set(now)
  return reopened
}

/** Runs `fn` with a fresh temp directory and always removes it afterwards. */
export function withTempDir<T>(label: string, fn: (dir: TempDir) => T): T {
  const dir = tempDir(label)
  try {
    return fn(dir)
  } finally {
    dir.cleanup()
  }
}

/** Milliseconds `fn` takes. */
export function timeMs(fn: () => void): number {
  const start = performance.now()
  fn()
  return performance.now() - start
}

/** Nearest-rank percentile (p in 0..100) of unsorted samples. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN
  const sorted = [...samples].sort((a, b) => a - b)
  const rank = Math.ceil((p / 100) * sorted.length)
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!
}

/** One line of the report: a figure, its unit, and what it is measured against. */
export interface Row {
  name: string
  value: number
  unit: string
  /** E.g. "≥ 0.70" for a target row; empty for plain figures. */
  target?: string
  /** PASS / MISS for target rows. */
  status?: 'PASS' | 'MISS'
  note?: string
}

export function formatValue(value: number): string {
  if (!Number.isFinite(value)) return String(value)
  if (Math.abs(value) >= 100) return Math.round(value).toLocaleString('en-US')
  if (Math.abs(value) >= 10) return value.toFixed(1)
  return value.toFixed(2)
}

/** A plain text table, columns padded to their widest cell. */
export function formatTable(rows: readonly Row[]): string {
  const header = ['measurement', 'value', 'unit', 'target', 'status', 'note']
  const cells = rows.map((r) => [r.name, formatValue(r.value), r.unit, r.target ?? '', r.status ?? '', r.note ?? ''])
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)))
  const line = (c: string[]) =>
    c.map((cell, i) => (i === 1 ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!))).join('  ').trimEnd()
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...cells.map(line)].join('\n')
}

/**
 * CPU time a process and its child processes have used so far, in ms (user + system, from
 * /proc; null where there is none). On a shared machine a drain's jobs/s moves with the load;
 * CPU per job barely does, so A/B comparisons read it beside the rate.
 */
export function processTreeCpuMs(pid: number): { own: number; children: number } | null {
  const ticksOf = (stat: string) => {
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return { parent: Number(fields[1]), ticks: Number(fields[11]) + Number(fields[12]) }
  }
  try {
    const own = ticksOf(readFileSync(`/proc/${pid}/stat`, 'utf8')).ticks
    let children = 0
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue
      try {
        const stat = ticksOf(readFileSync(`/proc/${entry}/stat`, 'utf8'))
        if (stat.parent === pid) children += stat.ticks
      } catch {
        // the process ended while we looked
      }
    }
    const msPerTick = 1000 / 100 // USER_HZ is 100 on Linux
    return { own: own * msPerTick, children: children * msPerTick }
  } catch {
    return null
  }
}
