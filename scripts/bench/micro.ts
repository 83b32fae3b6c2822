// Quick timings of the engine alone, in this process (not part of npm run bench):
//
//   tsx scripts/bench/micro.ts [jobs]
//     per-verb timing of the one-job lifecycle: submit → lease → heartbeat → release, each its
//     own transaction, on a ManualClock.
//   tsx scripts/bench/micro.ts --single-submits K [seconds]
//     the engine's part of jobs submitted one request each: every event-loop turn, K one-job
//     submits and one local worker's exchange (the completions of the jobs it was granted the
//     turn before, and a claim for up to 16 more), through engine.run and Dispatch as the host
//     calls them, committed at the turn's end; on a temp file, the checkpointer thread running.
//     Prints the main thread's CPU a job: what the host's main thread spends on a job besides its
//     HTTP, its worker's link and Node's own work (docs/performance.md, "Jobs submitted one
//     request each"). K = 7 is the 16-client row's shape (~7 submits a commit), K = 1 the one-client row's.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { Checkpointer } from '../../src-main/db/checkpointer'
import { connectionPath } from '../../src-main/db/connection'
import { openDatabase } from '../../src-main/db/open'
import { Dispatch } from '../../src-main/dispatch/dispatch'
import { type Assignment, Engine } from '../../src-main/engine'
import { ManualClock, systemClock } from '../../src-main/engine/rules/clock'

const dir = mkdtempSync(join(tmpdir(), 'micro-'))
const { sqlite } = openDatabase({ path: join(dir, 'db') })
try {
  if (process.argv[2] === '--single-submits') await singleSubmits(Number(process.argv[3] ?? 7), Number(process.argv[4] ?? 4))
  else lifecycle(Number(process.argv[2] ?? 3000))
} finally {
  sqlite.close()
  rmSync(dir, { recursive: true, force: true })
}

function lifecycle(n: number): void {
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
}

/** This thread's CPU time in µs: the main thread's own on Linux (its line in /proc), else the process's. */
function threadCpuUs(): number {
  try {
    // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th, in clock ticks (100 a second).
    const fields = readFileSync(`/proc/${process.pid}/task/${process.pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
    return (Number(fields[11]) + Number(fields[12])) * 10_000
  } catch {
    const { user, system } = process.cpuUsage()
    return user + system
  }
}

async function singleSubmits(perTurn: number, seconds: number): Promise<void> {
  const engine = new Engine({ db: sqlite, clock: systemClock, capacity: { total_units: 100, busy_rating: null } })
  const dispatch = new Dispatch(engine)
  const checkpointer = new Checkpointer({ path: connectionPath(sqlite.name), durability: 'normal', onError: (error) => console.error(error.message) })
  const nextTurn = () => new Promise((resolve) => setImmediate(resolve))
  let granted: Assignment[] = []
  const drive = async (ms: number) => {
    let jobs = 0
    const end = performance.now() + ms
    const cpu = threadCpuUs()
    while (performance.now() < end) {
      const calls: Promise<unknown>[] = []
      for (let i = 0; i < perTurn; i++) calls.push(engine.run(() => engine.submit({ job_type: 'noop', cost_units: 1 })))
      const complete = granted.map(({ job_id, attempt_id, lease_token }) => ({ job_id, attempt_id, lease_token, result: null }))
      granted = []
      const exchange = { worker_id: 'local-1.1', complete, claim: { streams: ['default'], max_jobs: 16, max_wait_ms: 0 } }
      calls.push(dispatch.exchange(exchange, (answer) => void granted.push(...answer.claimed.granted)))
      await Promise.all(calls)
      await nextTurn()
      jobs += perTurn
    }
    return { jobs, cpuUsPerJob: (threadCpuUs() - cpu) / jobs }
  }
  try {
    await drive(2000) // V8 compiles the paths first, as a host that has run a while has
    for (let round = 1; round <= 3; round++) {
      const { jobs, cpuUsPerJob } = await drive(seconds * 1000)
      console.log(`${perTurn} submit${perTurn === 1 ? '' : 's'} a turn: ${jobs} jobs in ${seconds} s, the main thread ${cpuUsPerJob.toFixed(0)} µs of CPU a job`)
    }
  } finally {
    dispatch.close()
    await checkpointer.stop()
  }
}
