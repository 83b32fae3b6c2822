/**
 * `npm run bench` — how fast the engine and the host run jobs on this machine, against the
 * machine's own floors: raw SQLite, Leasehold's data model written with plain statements, and a
 * bare Koa app over loopback (docs/performance.md). Every engine measurement uses a temp-file
 * database in os.tmpdir(), removed afterwards, the real Engine API and a ManualClock (moved 1 ms
 * per job; expiry is reached by moving it); the HTTP ones a real `leasehold serve`.
 *
 *   npm run bench                 the full run (8–11 minutes on 2 cores)
 *   npm run bench -- --quick      smaller counts (about 3.5 minutes), for a quick look
 *   npm run bench -- --json       the same figures as JSON on stdout (progress goes to stderr)
 *   npm run bench -- --only=http  one group of figures: engine, http, workers, batched, single or retention (repeatable)
 *   npm run bench -- --peer=FILE  also the ratios to BullMQ: FILE holds the JSON line that
 *                                 scripts/peer-bench/run.sh printed just before
 *   npm run bench -- --peer=live  the same ratios, BullMQ measured right before and right after
 *                                 each row it is compared with (scripts/bench/peer.ts)
 */
import { cpus } from 'node:os'
import { performance } from 'node:perf_hooks'
import { DEFAULT_ENGINE_CONFIG } from '../src-main/engine'
import { type BatchedCounts, type HttpCounts, LOCAL_PICKUP, LOCAL_PICKUP_FLOOR_ONE, measureBatched, measureHttp, measureRss, measureSingles, measureWorkers, NORMAL_BESIDE_REDIS, OPEN_LOOP_LOCAL_PICKUP, OPEN_LOOP_PICKUP, PEER_LOAD, POST_FLOOR_1, POST_FLOOR_16, ROWS_FLOOR_1, ROWS_FLOOR_16, SINGLE_1, SINGLE_16, SUBMIT_ROUTE_1, SUBMIT_ROUTE_16 } from './bench/http'
import { type BenchEngine, formatTable, openEngine, reopenEngine, tempDir, type TempDir, withTempDir, type Row } from './bench/lib'
import { type Peer, type PeerReading, ALONE, peerFromFile, startLivePeer } from './bench/peer'
import { measureRetention } from './bench/retention'
import { measureHostStart } from './bench/start'
import {
  grantLatencies,
  insertBacklog,
  latencySummary,
  lifecycleEmpty,
  modelFloor,
  rawFloor,
  engineConcurrent,
  pagesPerJob,
  reaper,
  runLifecycle,
  type Latency,
  type LifecycleResult,
} from './bench/measure'

interface Counts {
  /** Lifecycle jobs at durability normal (also the floor's job count). */
  jobs: number
  /** Lifecycle jobs at durability full (each commit is an fsync). */
  fullJobs: number
  /** The small and the large backlog for grant latency and the loaded lifecycle. */
  smallBacklog: number
  backlog: number
  latencySamples: number
  backlogJobs: number
  reaperLeases: number
  /** Time caps (ms) for the lifecycle runs: the count is cut short, and says so, past them. */
  capMs: { normal: number; full: number; backlog: number }
  http: HttpCounts
  /** Jobs for the 32 simulated workers of the group-commit figure, and lifecycles for pages per job. */
  concurrentJobs: number
  pageJobs: number
  batched: BatchedCounts
  /** Jobs for retention's figures: pruned at once, and the database's size after them. */
  retentionJobs: number
}

const FULL: Counts = {
  jobs: 50_000,
  fullJobs: 2_000,
  smallBacklog: 1_000,
  backlog: 1_000_000,
  latencySamples: 1_000,
  backlogJobs: 10_000,
  reaperLeases: 10_000,
  capMs: { normal: 75_000, full: 15_000, backlog: 25_000 },
  http: { lifecycleJobs: 2_000, pickups: 300, poolJobs: 2_000, warmUpS: 10, pairedDriveMs: 3_000 },
  concurrentJobs: 20_000,
  pageJobs: 2_000,
  batched: { drainJobs: 20_000, drainRounds: 3, localPickups: 200, finishedJobs: 1_000_000, warmUpS: 10, singleJobs: 5_000, commands: 10 },
  retentionJobs: 1_000_000,
}

const QUICK: Counts = {
  jobs: 5_000,
  fullJobs: 500,
  smallBacklog: 1_000,
  backlog: 100_000,
  latencySamples: 500,
  backlogJobs: 5_000,
  reaperLeases: 2_000,
  capMs: { normal: 15_000, full: 5_000, backlog: 10_000 },
  http: { lifecycleJobs: 300, pickups: 100, poolJobs: 300, warmUpS: 5, pairedDriveMs: 500 },
  concurrentJobs: 5_000,
  pageJobs: 500,
  batched: { drainJobs: 5_000, drainRounds: 1, localPickups: 50, finishedJobs: 100_000, warmUpS: 5, singleJobs: 1_000, commands: 3 },
  retentionJobs: 100_000,
}

/** Targets printed beside the figures. */
const ENGINE_FLOOR_TARGET = 0.7
const LATENCY_GROWTH_TARGET = 1.5
const PICKUP_P50_TARGET_MS = 2
const PICKUP_P99_TARGET_MS = 10
const WORKER_API_AT_8_TARGET = 2_000
/** The worker API against the HTTP floor: its one-job routes may cost at most twice what a bare Koa app takes per job. */
const WORKER_API_FLOOR_TARGET = 0.5
const PAGES_PER_JOB_TARGET = 14
/** How many turns the grants at the two backlog depths are timed in, alternately. */
const GRANT_TURNS = 4
/** The pool drain with its queues carried over Redis Streams, against the same drain without. */
const REDIS_KEEPS_TARGET = 0.75
/** Jobs submitted one request each: 16 clients against BullMQ's 16 producers, one client against its sequential add(). */
const SINGLE_16_TARGET = 1.5
const SINGLE_1_TARGET = 1
const PEER_TARGETS = { 'pool drain (normal)': 2, 'pool drain (full)': 1, 'external workers batched, 8 processes': 1, 'remote workers over redis, 8 processes': 1 } as const

const PARTS = ['engine', 'http', 'workers', 'batched', 'single', 'retention'] as const
type Part = (typeof PARTS)[number]

interface Options {
  quick: boolean
  json: boolean
  /** Where BullMQ's figures for the ratio rows come from: a file of peer-bench's JSON line, 'live', or none. */
  peer: string | null
  /** Which groups of figures to measure (default: all). */
  only: Set<Part>
}

function parseArgs(argv: string[]): Options {
  const only = new Set<Part>()
  let peer: string | null = null
  for (const arg of argv) {
    const part = /^--only=(\w+)$/.exec(arg)?.[1]
    const peerSource = /^--peer=(.+)$/.exec(arg)?.[1]
    if (part && (PARTS as readonly string[]).includes(part)) only.add(part as Part)
    else if (peerSource) peer = peerSource
    else if (arg !== '--quick' && arg !== '--json') {
      console.error(`bench: unknown flag ${arg} (known: --quick --json --only=${PARTS.join('|')} --peer=FILE|live)`)
      process.exit(2)
    }
  }
  return { quick: argv.includes('--quick'), json: argv.includes('--json'), peer, only: only.size > 0 ? only : new Set(PARTS) }
}

/** The peer the options name, or null; a peer that cannot be had ends the bench with its reason. */
async function openPeer(source: string | null, quick: boolean): Promise<Peer | null> {
  if (source === null) return null
  try {
    if (source !== 'live') return peerFromFile(source)
    progress('BullMQ beside each ratio row: starting scripts/peer-bench/run.sh serve (it runs every figure once first)')
    // --quick: the peer's counts cut as the bench's own are.
    return await startLivePeer(quick ? { BULL_JOBS: '5000', BULL_SINGLE: '1000', LAT_SECONDS: '2', LAT_ONE: '50' } : {})
  } catch (error) {
    console.error(`bench: --peer=${source}: ${(error as Error).message}`)
    process.exit(2)
  }
}

const n = (count: number) => count.toLocaleString('en-US')
const progress = (message: string) => console.error(`bench: ${message}`)

function verbNote(r: LifecycleResult): string {
  const v = r.verbUs
  const f = (x: number) => x.toFixed(0)
  return `µs/verb: submit ${f(v.submit)} · lease ${f(v.lease)} · heartbeat ${f(v.heartbeat)} · release ${f(v.release)}`
}

/** "50,000 jobs", or "31,200 of 50,000 jobs (time cap)" when the cap cut the run short. */
function jobCount(r: { jobs: number }, asked: number): string {
  return r.jobs < asked ? `${n(r.jobs)} of ${n(asked)} jobs (time cap)` : `${n(asked)} jobs`
}

function target(name: string, value: number, ok: boolean, targetText: string, note: string): Row {
  return { name, value, unit: 'ratio', target: targetText, status: ok ? 'PASS' : 'MISS', note }
}

// ---------------------------------------------------------------------------------------------
// The measurements, each adding its rows

function measureNormal(c: Counts, rows: Row[]): { engine: number; floor: number } {
  progress(`raw floor, ${n(c.jobs)} jobs × 5 transactions (normal)`)
  const floor = withTempDir('floor', (dir) => rawFloor(dir, 'normal', c.jobs)).jobsPerS
  progress(`data-model floor, ${n(c.jobs)} jobs × 4 transactions (normal)`)
  const model = withTempDir('model', (dir) => modelFloor(dir, c.jobs, c.capMs.normal))
  progress(`engine lifecycle, ${n(c.jobs)} jobs (normal)`)
  const engine = withTempDir('normal', (dir) => lifecycleEmpty(dir, 'normal', c.jobs, c.capMs.normal))
  rows.push(
    { name: 'raw floor (normal)', value: floor, unit: 'jobs/s', note: `${n(c.jobs)} jobs, 5 one-row write txns each` },
    {
      name: 'data-model floor (normal)',
      value: model.jobsPerS,
      unit: 'jobs/s',
      note: `${jobCount(model, c.jobs)}: the engine's rows, plain statements; ${(model.jobsPerS / floor).toFixed(2)} × raw floor`,
    },
    {
      name: 'engine lifecycle (normal)',
      value: engine.jobsPerS,
      unit: 'jobs/s',
      note: `${jobCount(engine, c.jobs)}; ${(engine.jobsPerS / model.jobsPerS).toFixed(2)} × data-model floor; ${verbNote(engine)}`,
    },
  )
  return { engine: engine.jobsPerS, floor }
}

function measureFull(c: Counts, rows: Row[]): void {
  progress(`raw floor and engine lifecycle, ${n(c.fullJobs)} jobs (full)`)
  const floorRun = withTempDir('floor-full', (dir) => rawFloor(dir, 'full', c.fullJobs, c.capMs.full))
  const floor = floorRun.jobsPerS
  const engine = withTempDir('full', (dir) => lifecycleEmpty(dir, 'full', c.fullJobs, c.capMs.full))
  rows.push(
    { name: 'raw floor (full)', value: floor, unit: 'jobs/s', note: `${jobCount(floorRun, c.fullJobs)} (fewer: every commit fsyncs)` },
    {
      name: 'engine lifecycle (full)',
      value: engine.jobsPerS,
      unit: 'jobs/s',
      note: `${jobCount(engine, c.fullJobs)}; ÷ floor(full) = ${(engine.jobsPerS / floor).toFixed(2)}; ${verbNote(engine)}`,
    },
  )
}

/**
 * Grant latency at the small and the large backlog, then the lifecycle on top of the large one.
 * The two backlogs are two databases open side by side, and their grants are timed in turns
 * (small, large, large, small, …): the machine's speed moves by more than the depth's effect
 * within seconds, and a ratio of two figures taken one after the other would read that instead.
 */
function measureBacklog(c: Counts, rows: Row[]): { small: Latency; large: Latency } {
  return withTempDir('backlog-small', (smallDir) =>
    withTempDir('backlog-large', (largeDir) => {
      const maxAttempts = DEFAULT_ENGINE_CONFIG.maxAttempts
      // Written beside an engine: it reads what it keeps in memory (the QUEUED jobs' tally, the
      // ACTIVE leases, its counters) at start, so it is opened again on them.
      const withBacklog = (dir: TempDir, jobs: number): { b: BenchEngine; insertMs: number } => {
        const fresh = openEngine(dir, 'normal')
        const insertMs = insertBacklog(fresh.db, jobs, fresh.clock.now(), maxAttempts)
        return { b: reopenEngine(dir, fresh, 'normal'), insertMs }
      }
      const small = withBacklog(smallDir, c.smallBacklog).b
      let large: BenchEngine | null = null
      try {
        progress(`inserting a backlog of ${n(c.backlog)} queued beside one of ${n(c.smallBacklog)}`)
        const inserted = withBacklog(largeDir, c.backlog)
        large = inserted.b
        progress(`grant latency at ${n(c.smallBacklog)} and at ${n(c.backlog)} queued, in turns`)
        const warmUp = Math.min(200, c.latencySamples)
        grantLatencies(small, warmUp)
        grantLatencies(large, warmUp)
        const turn = Math.ceil(c.latencySamples / GRANT_TURNS)
        const samples = { small: [] as number[], large: [] as number[] }
        for (let i = 0; i < GRANT_TURNS; i++) {
          const order = i % 2 === 0 ? (['small', 'large'] as const) : (['large', 'small'] as const)
          for (const depth of order) samples[depth].push(...grantLatencies(depth === 'small' ? small : large, turn))
        }

        progress(`engine lifecycle, ${n(c.backlogJobs)} jobs with ${n(c.backlog)} queued`)
        const loaded = runLifecycle(large, c.backlogJobs, c.capMs.backlog)
        const note = `${n(samples.small.length)} grants of the head, in ${GRANT_TURNS} turns with the other depth's`
        const latency = { small: latencySummary(samples.small), large: latencySummary(samples.large) }
        rows.push(
          { name: `grant latency p50 @ ${n(c.smallBacklog)} queued`, value: latency.small.p50, unit: 'µs', note },
          { name: `grant latency p99 @ ${n(c.smallBacklog)} queued`, value: latency.small.p99, unit: 'µs' },
          { name: `grant latency p50 @ ${n(c.backlog)} queued`, value: latency.large.p50, unit: 'µs', note },
          { name: `grant latency p99 @ ${n(c.backlog)} queued`, value: latency.large.p99, unit: 'µs' },
          {
            name: `engine lifecycle @ ${n(c.backlog)} queued`,
            value: loaded.jobsPerS,
            unit: 'jobs/s',
            note: `${jobCount(loaded, c.backlogJobs)}, NORMAL over a LOW backlog (inserted in ${(inserted.insertMs / 1000).toFixed(1)} s); ${verbNote(loaded)}`,
          },
        )
        return latency
      } finally {
        large?.db.close()
        small.db.close()
      }
    }),
  )
}

/** Pages per lifecycle, and 32 simulated workers whose verbs share commits. */
async function measureGroupCommit(c: Counts, rows: Row[]): Promise<void> {
  progress(`pages per job, ${n(c.pageJobs)} lifecycles one at a time`)
  const pages = withTempDir('pages', (dir) => pagesPerJob(dir, c.pageJobs))
  rows.push({
    name: 'pages per job',
    value: pages,
    unit: 'pages',
    target: `≤ ${PAGES_PER_JOB_TARGET}`,
    status: pages <= PAGES_PER_JOB_TARGET ? 'PASS' : 'MISS',
    note: 'WAL frames per lifecycle (submit, grant, heartbeat, complete: 4 commits)',
  })
  progress(`engine concurrent, 32 workers, ${n(c.concurrentJobs)} jobs`)
  const dir = tempDir('concurrent')
  try {
    const r = await engineConcurrent(dir, c.concurrentJobs, 32)
    rows.push({
      name: 'engine concurrent, 32 workers (normal)',
      value: r.jobsPerS,
      unit: 'jobs/s',
      note: `${n(c.concurrentJobs)} jobs, claim → heartbeat → complete through engine.run; ${r.opsPerCommit.toFixed(1)} operations per commit`,
    })
  } finally {
    dir.cleanup()
  }
}

/** The ratio rows against BullMQ, measured on the same machine just before the run or beside each row. */
function peerRows(peer: Peer, rows: Row[]): Row[] {
  const value = (name: string) => rows.find((r) => r.name === name)?.value
  const besides = (theirs: PeerReading, what: string) => `${what}: ${theirs.value.toLocaleString('en-US')}${theirs.how ? ` (${theirs.how})` : ''}`
  const out: Row[] = []
  for (const [name, wanted] of Object.entries(PEER_TARGETS)) {
    const ours = value(name)
    const theirs = peer.figure(name, 'process')
    if (ours === undefined || !theirs) continue
    const ratio = ours / theirs.value
    out.push(target(`${name} ÷ BullMQ c=8`, ratio, ratio >= wanted, `≥ ${wanted.toFixed(2)}`, `${besides(theirs, 'BullMQ process c=8')} jobs/s`))
  }
  // Jobs that arrive one request each, against BullMQ's jobs added one add() each.
  // Beside each, the same clients' ceilings with no job run (the submit route alone, bare Koa) as
  // the same ratio: what the target asks of the route before any job is processed; and the floor
  // with each job run and no engine: what it asks of the rows a job writes.
  const singles = [
    [SINGLE_16, SINGLE_16_TARGET, 'single', 'BullMQ single adds ×16, processed c=8', [SUBMIT_ROUTE_16, POST_FLOOR_16, ROWS_FLOOR_16]],
    [SINGLE_1, SINGLE_1_TARGET, 'add', 'BullMQ sequential add()', [SUBMIT_ROUTE_1, POST_FLOOR_1, ROWS_FLOOR_1]],
  ] as const
  for (const [name, wanted, figure, what, [route, floor, rowsFloor]] of singles) {
    const ours = value(name)
    const theirs = peer.figure(name, figure)
    if (ours === undefined || !theirs) continue
    const ceiling = (row: string, label: string) => {
      const of = value(row)
      return of === undefined ? '' : `; ${label} ${n(Math.round(of))}/s (${(of / theirs.value).toFixed(2)} ×)`
    }
    const ceilings = `${ceiling(route, 'with no job run, the submit route alone')}${ceiling(floor, 'and a bare Koa app')}${ceiling(rowsFloor, "with each job's rows and worker but no engine")}`
    // The sequential add() runs no worker; beside it, BullMQ in this row's own shape, its jobs processed as they come.
    const shape = name === SINGLE_1 ? peer.figure(name, 'single1') : undefined
    const alike = shape ? `; ${besides(shape, "BullMQ in this row's shape, one producer's adds processed c=8")} jobs/s (${(ours / shape.value).toFixed(2)} ×)` : ''
    out.push(target(`${name} ÷ BullMQ`, ours / theirs.value, ours / theirs.value >= wanted, `≥ ${wanted.toFixed(2)}`, `${besides(theirs, what)} jobs/s${alike}${ceilings}`))
  }
  // The one at a time pickup, and under the peer's own load (PEER_LOAD).
  for (const [name, factor] of [[LOCAL_PICKUP, 1 / 1000], [OPEN_LOOP_LOCAL_PICKUP, 1 / 1000], [OPEN_LOOP_PICKUP, 1]] as const) {
    const ours = value(name)
    const theirs = peer.figure(name, 'pickup')
    if (ours === undefined || !theirs) continue
    const ms = ours * factor
    const floor = value(LOCAL_PICKUP_FLOOR_ONE)
    const own = peer.figure(name, 'one')
    const alike =
      name !== LOCAL_PICKUP
        ? ''
        : `${own ? `; ${besides(own, "BullMQ's own one at a time")} ms` : ''}${floor !== undefined ? `; its path with no engine: ${(floor / 1000).toFixed(3)} ms` : ''}`
    out.push({ name: `${name} vs BullMQ`, value: ms, unit: 'ms', target: `≤ ${theirs.value}`, status: ms <= theirs.value ? 'PASS' : 'MISS', note: `${ms.toFixed(3)} ms against ${besides(theirs, `BullMQ's pickup p50 c=8 at ${PEER_LOAD.jobsPerS} jobs/s`)} ms${alike}` })
  }
  return out
}

function measureReaper(c: Counts, rows: Row[]): void {
  progress(`reaper, ${n(c.reaperLeases)} expired leases`)
  const r = withTempDir('reaper', (dir) => reaper(dir, c.reaperLeases))
  rows.push({
    name: `reaper, ${n(c.reaperLeases)} expired leases`,
    value: r.ms,
    unit: 'ms',
    note: `${((r.ms * 1000) / r.expired).toFixed(0)} µs/lease; each requeued with backoff (granting them took ${(r.setupMs / 1000).toFixed(1)} s)`,
  })
}

// ---------------------------------------------------------------------------------------------

/**
 * Runs one group of figures. A group that fails (a request refused, a host that would not
 * start) is noted with its error and the run goes on: the figures gathered so far, its own
 * included, are printed with what failed, and the bench exits with 1.
 */
async function group(failures: string[], name: Part, run: () => Promise<void> | void): Promise<void> {
  try {
    await run()
  } catch (error) {
    const why = (error as Error)?.message ?? String(error)
    failures.push(`${name}: ${why}`)
    progress(`${name} failed: ${why}`)
  }
}

async function main(): Promise<void> {
  const options = parseArgs(process.argv.slice(2))
  const counts = options.quick ? QUICK : FULL
  const started = performance.now()
  const rows: Row[] = []
  const failures: string[] = []
  // A last net: a rejection nothing awaited is noted as a failure rather than ending the run.
  process.on('unhandledRejection', (error) => failures.push(`unhandled: ${(error as Error)?.message ?? String(error)}`))
  const peer = await openPeer(options.peer, options.quick)
  const beside = peer?.beside ?? ALONE

  if (options.only.has('engine')) {
    await group(failures, 'engine', async () => {
      const normal = measureNormal(counts, rows)
      measureFull(counts, rows)
      const latency = measureBacklog(counts, rows)
      measureReaper(counts, rows)
      await measureGroupCommit(counts, rows)
      const ratio = normal.engine / normal.floor
      const growth = latency.large.p50 / latency.small.p50
      rows.push(
        target('engine ÷ floor (normal)', ratio, ratio >= ENGINE_FLOOR_TARGET, `≥ ${ENGINE_FLOOR_TARGET.toFixed(2)}`, 'lifecycle jobs/s ÷ raw floor jobs/s'),
        target(
          `grant p50 ${n(counts.backlog)} ÷ ${n(counts.smallBacklog)} queued`,
          growth,
          growth <= LATENCY_GROWTH_TARGET,
          `≤ ${LATENCY_GROWTH_TARGET.toFixed(2)}`,
          'p50 latency growth with queue depth',
        ),
      )
    })
  }
  if (options.only.has('http')) {
    await group(failures, 'http', async () => {
      const http = await measureHttp(counts.http, progress, rows, beside)
      const sum = (figures: number[]) => figures.reduce((a, b) => a + b, 0)
      const jobsPerS = (figures: number[]) => figures.map((f) => n(Math.round(f))).join(' and ')
      const besideFloor = sum(http.paired.host) / sum(http.paired.floor)
      rows.push(
        { name: 'pickup p50', value: http.pickupP50, unit: 'ms', target: `≤ ${PICKUP_P50_TARGET_MS}`, status: http.pickupP50 <= PICKUP_P50_TARGET_MS ? 'PASS' : 'MISS' },
        { name: 'pickup p99', value: http.pickupP99, unit: 'ms', target: `≤ ${PICKUP_P99_TARGET_MS}`, status: http.pickupP99 <= PICKUP_P99_TARGET_MS ? 'PASS' : 'MISS' },
        {
          name: 'worker API lifecycle, 8 workers',
          value: http.workerApiAt8,
          unit: 'jobs/s',
          target: `≥ ${n(WORKER_API_AT_8_TARGET)}`,
          status: http.workerApiAt8 >= WORKER_API_AT_8_TARGET ? 'PASS' : 'MISS',
          note: `${n(counts.http.lifecycleJobs)} jobs, claim → heartbeat → complete`,
        },
        target(
          'worker API lifecycle, 8 workers ÷ HTTP floor',
          besideFloor,
          besideFloor >= WORKER_API_FLOOR_TARGET,
          `≥ ${WORKER_API_FLOOR_TARGET.toFixed(2)}`,
          `one job per request triple: the one-job claim, heartbeat and complete routes; drives of ${counts.http.pairedDriveMs / 1000} s alternated: the floor ${jobsPerS(http.paired.floor)} jobs/s, the host ${jobsPerS(http.paired.host)}`,
        ),
      )
    })
  }
  if (options.only.has('workers')) await group(failures, 'workers', () => measureWorkers(counts.http, progress, rows).then(() => {}))
  if (options.only.has('batched')) {
    await group(failures, 'batched', async () => {
      await measureBatched(counts.batched, progress, rows, beside)
      const [normal, redis] = [NORMAL_BESIDE_REDIS, 'pool drain (redis)'].map((name) => rows.find((r) => r.name === name)?.value)
      if (normal && redis) {
        rows.push(target('pool drain (redis) ÷ pool drain (normal)', redis / normal, redis / normal >= REDIS_KEEPS_TARGET, `≥ ${REDIS_KEEPS_TARGET.toFixed(2)}`, 'what turning Redis on keeps of the drain (it may cost at most a quarter), from drains alternated with and without it'))
      }
      rows.push(...(await measureRss(counts.batched.finishedJobs, progress)))
    })
  }
  if (options.only.has('single')) await group(failures, 'single', () => measureSingles(counts.batched, progress, rows, beside).then(() => {}))
  if (options.only.has('retention')) await group(failures, 'retention', () => measureRetention(counts.retentionJobs, progress, rows).then(() => {}))
  if (options.only.has('retention')) await group(failures, 'retention', async () => void rows.push(...(await measureHostStart(counts.retentionJobs, progress))))
  if (peer) {
    rows.push(...peerRows(peer, rows))
    await peer.stop()
  }
  const elapsedS = (performance.now() - started) / 1000

  if (options.json) {
    const machine = { cpus: cpus().length, cpu: cpus()[0]?.model ?? 'unknown', node: process.version, platform: process.platform }
    console.log(JSON.stringify({ mode: options.quick ? 'quick' : 'full', machine, counts, elapsed_s: elapsedS, rows, failed: failures }, null, 2))
  } else {
    console.log(formatTable(rows))
    console.log(`\n${options.quick ? 'quick' : 'full'} run, ${elapsedS.toFixed(1)} s, node ${process.version}, ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}`)
    for (const failure of failures) console.log(`FAILED ${failure}`)
  }
  if (failures.length > 0) process.exitCode = 1
}

void main()
