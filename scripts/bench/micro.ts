// Quick per-verb timing of the engine lifecycle (not part of npm run bench): tsx scripts/bench/micro.ts [jobs]
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { openDatabase } from '../../src-main/db/open'
import { Engine } from '../../src-main/engine'
import { ManualClock } from '../../src-main/engine/rules/clock'

const n = Number(process.argv[2] ?? 3000)
const dir = mkdtempSync(join(tmpdir(), 'micro-'))
const { sqlite } = openDatabase({ path: join(dir, 'db') })
const clock = new ManualClock(Date.UTC(2026, 0, 1))
const engine = new Engine({ db: sqlite, clock, capacity: { total_units: 100, busy_rating: 0 } })
const t = { submit: 0, grant: 0, heartbeat: 0, release: 0 }
const t0 = performance.now()
const c0 = process.cpuUsage()
for (let i = 0; i < n; i++) {
  let a = performance.now()
  engine.submit({ job_type: 'noop', cost_units: 1 })
  let b = performance.now(); t.submit += b - a; a = b
  const d = engine.requestLease({ worker_id: 'w' })
  if (!d.granted) throw new Error(d.reason)
  b = performance.now(); t.grant += b - a; a = b
  engine.heartbeat({ lease_id: d.lease.id, worker_id: 'w' })
  b = performance.now(); t.heartbeat += b - a; a = b
  engine.release({ lease_id: d.lease.id, worker_id: 'w', status: 'SUCCEEDED' })
  b = performance.now(); t.release += b - a
  clock.advance(1)
}
const total = performance.now() - t0
const cpu = process.cpuUsage(c0)
console.log(`${n} jobs: ${Math.round(n / (total / 1000))} jobs/s, CPU ${Math.round((cpu.user + cpu.system) / n)} µs/job; wall µs/job: ` + Object.entries(t).map(([k, v]) => `${k} ${Math.round((v * 1000) / n)}`).join(' · '))
sqlite.close()
rmSync(dir, { recursive: true, force: true })
