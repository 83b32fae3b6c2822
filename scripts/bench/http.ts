/**
 * The HTTP and worker figures of `npm run bench`: a real `leasehold serve` in its own process on
 * loopback, clients in this one on keep-alive connections (undici's, and the lean loops of
 * loop-connection.ts for one request at a time). Bounded in count and time.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { createServer } from 'node:net'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { fileURLToPath } from 'node:url'
import { DEFAULT_WORKER_CONCURRENCY, localWorkerSlots } from '../../src-main/config'
import { openDatabase } from '../../src-main/db/open'
import { buildCliBundle } from '../cli-bundle.js'
import { HostConnection } from '../../src-shared/host-connection'
import { LoopConnection } from './loop-connection'
import { insertFinished } from './measure'
import { percentile, processTreeCpuMs, type Row } from './lib'
import { ALONE, type Beside } from './peer'

const BIN = fileURLToPath(new URL('../../bin/leasehold.js', import.meta.url))

/**
 * The load under which the peer measures its pickup (peer-bench/peer-bullmq.mjs, LAT_RATE and
 * LAT_SECONDS): jobs added one request each, open loop, 500 a second for 4 s. The one-at-a-time
 * pickups wait 5–20 ms between jobs, long enough for this VM's idle cores to go cold, so only
 * the pickups under this load compare with the peer's.
 */
export const PEER_LOAD = { jobsPerS: 500, seconds: 4 }
/**
 * The pickup rows measured under PEER_LOAD once their path has run a while at that load (the
 * counts' `warmUpS`); bench.ts compares them with BullMQ's, whose process has added 42,000
 * jobs and run 20,000 before it measures its pickup.
 */
export const OPEN_LOOP_PICKUP = `pickup p50 at ${PEER_LOAD.jobsPerS} jobs/s (submit → waiting claim)`
export const OPEN_LOOP_LOCAL_PICKUP = `local pickup p50 at ${PEER_LOAD.jobsPerS} jobs/s (submit → handler starts)`
/** Submit → a local worker's handler starts, one job at a time with the pool's claims waiting. */
export const LOCAL_PICKUP = 'local pickup p50 (submit → handler starts)'
/** The same pickups in their path's seconds 1–5 at that load, while V8 still compiles it. */
export const EARLY_PICKUP = `pickup p50 at ${PEER_LOAD.jobsPerS} jobs/s, seconds 1–5 (submit → waiting claim)`
export const EARLY_LOCAL_PICKUP = `local pickup p50 at ${PEER_LOAD.jobsPerS} jobs/s, seconds 1–5 (submit → handler starts)`
/** The same path with no engine (bare Koa → a Unix socket → a worker process's thread): the floor under the row above. */
export const LOCAL_PICKUP_FLOOR = `local pickup floor p50 at ${PEER_LOAD.jobsPerS} jobs/s (bare Koa → socket → thread)`
export const LOCAL_PICKUP_FLOOR_ONE = 'local pickup floor p50, one at a time (bare Koa → socket → thread)'

export interface HttpCounts {
  /** Jobs per lifecycle run (one run per API and worker count). */
  lifecycleJobs: number
  pickups: number
  poolJobs: number
  /** Seconds a path runs at the peer's load before its pickups are compared with the peer's (see {@link underPeerLoad}). */
  warmUpS: number
  /** Milliseconds of each drive alternated between the HTTP floor and the worker API lifecycle (see {@link lifecycleBesideFloor}). */
  pairedDriveMs: number
}

interface Server {
  url: string
  token: string
  dataDir: string
  child: ChildProcess
  stop(): Promise<void>
}

const KOA_FLOOR = fileURLToPath(new URL('./koa-floor.mjs', import.meta.url))
const ROWS_FLOOR = fileURLToPath(new URL('./rows-floor.ts', import.meta.url))

/**
 * The child processes the bench has started (hosts, workers, the Koa floor) that have not exited
 * yet. Each is stopped where it was started; should the bench die first (an uncaught error), they
 * get SIGTERM as it exits, so that no host is left running beside the next run.
 */
const running = new Set<ChildProcess>()
process.once('exit', () => {
  for (const child of running) child.kill('SIGTERM')
})

function tracked(child: ChildProcess): ChildProcess {
  running.add(child)
  child.once('exit', () => running.delete(child))
  return child
}

/** A child process's URL, from the `listening on <url>` line it prints. */
function listeningUrl(child: ChildProcess): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    let out = ''
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString()
      const match = /listening on (http:\/\/\S+)/.exec(out)
      if (match) resolve(match[1]!)
    })
    child.once('exit', (code) => reject(new Error(`the server exited with ${code}`)))
  })
}

function stopChild(child: ChildProcess): Promise<unknown> {
  const exited = new Promise((r) => child.once('exit', r))
  child.kill('SIGTERM')
  return exited
}

/**
 * The hosts (and `leasehold worker`s) run as `npm start` runs them: from the command's bundle,
 * built once per bench run from these sources (bin/leasehold.js runs it, being fresh).
 */
let bundleBuilt: Promise<unknown> | null = null

async function startServer(args: string[], dataDir = mkdtempSync(join(tmpdir(), 'leasehold-bench-http-'))): Promise<Server> {
  await (bundleBuilt ??= buildCliBundle())
  const child = tracked(
    spawn(process.execPath, [BIN, 'serve', '--data-dir', dataDir, '--port', '0', '--busy', '0', ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  )
  const url = await listeningUrl(child)
  const token = readFileSync(join(dataDir, 'token'), 'utf8').trim()
  return {
    url,
    token,
    dataDir,
    child,
    stop: async () => {
      await closeConnection(url)
      await stopChild(child)
      rmSync(dataDir, { recursive: true, force: true })
    },
  }
}

/**
 * A redis-server of the bench's own on a free loopback port, empty and with no persistence (the
 * Redis rows measure the transport, not Redis's disk); null where none is installed.
 */
async function startRedis(): Promise<{ url: string; stop: () => Promise<void> } | null> {
  if (spawnSync('redis-server', ['--version']).error) return null
  const port = await new Promise<number>((resolve, reject) => {
    const probe = createServer().once('error', reject)
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number }
      probe.close(() => resolve(port))
    })
  })
  const child = tracked(spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: ['ignore', 'pipe', 'pipe'] }))
  await new Promise<void>((resolve, reject) => {
    let out = ''
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString()
      if (out.includes('Ready to accept connections')) resolve()
    })
    child.once('exit', (code) => reject(new Error(`redis-server exited with ${code}: ${out.trim()}`)))
  })
  return { url: `redis://127.0.0.1:${port}/0`, stop: async () => void (await stopChild(child)) }
}

/** A floor server, `node <nodeArgs>`, as a Server (it checks no token) once it prints its URL. */
async function startFloor(nodeArgs: string[]): Promise<Server> {
  const child = tracked(spawn(process.execPath, nodeArgs, { stdio: ['ignore', 'pipe', 'pipe'] }))
  const url = await listeningUrl(child)
  return { url, token: '', dataDir: '', child, stop: async () => void (await Promise.all([closeConnection(url), stopChild(child)])) }
}

/** The bare Koa app of koa-floor.mjs; `--pool` adds its worker process. */
const startKoaFloor = (args: string[] = []): Promise<Server> => startFloor([KOA_FLOOR, ...args])

/** The rows floor of rows-floor.ts: a job's rows, commit and hand-off to a worker, with no engine. */
const startRowsFloor = (): Promise<Server> => startFloor(['--import', 'tsx', ROWS_FLOOR])

/** Per-endpoint latencies, in milliseconds. */
class Latencies {
  readonly byEndpoint = new Map<string, number[]>()

  add(endpoint: string, ms: number): void {
    const list = this.byEndpoint.get(endpoint) ?? []
    list.push(ms)
    this.byEndpoint.set(endpoint, list)
  }
}

/**
 * The bench's client for everything but the one-request-each loops ({@link postLoops}): the
 * `leasehold worker`'s keep-alive connections (undici's Pool, src-shared/host-connection.ts),
 * timed per endpoint: ~70–110 µs of CPU a small JSON request here, node:http's `request`
 * ~150–200 and `fetch` ~700. These are the shared connections to each server the bench talks
 * to, closed when that server stops.
 */
const connections = new Map<string, HostConnection>()

function connectionTo(server: Server): HostConnection {
  let connection = connections.get(server.url)
  if (!connection) connections.set(server.url, (connection = new HostConnection(server.url, server.token)))
  return connection
}

async function closeConnection(url: string): Promise<void> {
  const connection = connections.get(url)
  connections.delete(url)
  await connection?.close()
}

async function request(server: Server, method: 'GET' | 'POST', path: string, body?: unknown, headers?: Record<string, string>): Promise<{ status: number; json: Record<string, unknown> }> {
  const answer = await connectionTo(server).request(path, { method, body, headers })
  return { status: answer.status, json: answer.body }
}

/** POSTs timed into `latencies`, over the server's shared connections. */
function client(server: Server, latencies: Latencies, headers?: Record<string, string>) {
  const connection = connectionTo(server)
  return async (endpoint: string, path: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> => {
    const started = performance.now()
    const answer = await connection.request(path, { method: 'POST', body, headers })
    latencies.add(endpoint, performance.now() - started)
    return { status: answer.status, json: answer.body }
  }
}

/**
 * The submitter of the pickup rows and their floors: POSTs over the client loops' connections
 * (loop-connection.ts), one more opened whenever each has a request in flight (an open loop may
 * send before the last answer). A pickup is timed from the submit's send, so the client's own
 * path is in it: undici's, cold after 20 ms idle, added ~0.35 ms to a pickup one at a time (block
 * medians 1.32–1.54 ms against 0.97–1.23 over these connections, alternated on one host). The
 * rows measure what the host serves, as the single-submit rows do; a user's own client pays what
 * it costs, on the user's side.
 */
function leanPoster(server: Server): (path: string, body: unknown) => Promise<{ status: number; json: Record<string, unknown> }> {
  const idle: LoopConnection[] = []
  return async (path, body) => {
    const connection = idle.pop() ?? new LoopConnection(server.url, server.token)
    try {
      const answer = await connection.post(path, JSON.stringify(body))
      return { status: answer.status, json: JSON.parse(answer.body) as Record<string, unknown> }
    } finally {
      idle.push(connection)
    }
  }
}

const get = async (server: Server, path: string): Promise<Record<string, unknown>> => (await request(server, 'GET', path)).json

/** `count` jobs of `jobType` submitted one request each from 16 loops, their latencies kept in `latencies`. */
const submitMany = (server: Server, latencies: Latencies, count: number, jobType: string, payload: unknown = {}): Promise<void> =>
  postLoops(server, latencies, 16, count, SUBMIT_PATH, 201, { job_type: jobType, cost_units: 1, payload })

const SUBMIT_PATH = '/api/scheduler/jobs/submit'
/** A no-op job's submit body. */
const NOOP = { job_type: 'noop', cost_units: 1 }

/**
 * `count` POSTs of `body` to `path`, from `clients` loops that each send the next once answered
 * with `status` (anything else throws). Each loop holds one keep-alive connection of its own, as
 * a script's loop does, on the bench's lean client (loop-connection.ts), so that the cores the
 * clients take from the host stay few.
 */
async function postLoops(server: Server, latencies: Latencies, clients: number, count: number, path: string, status: number, body: unknown = NOOP): Promise<void> {
  const connections = Array.from({ length: clients }, () => new LoopConnection(server.url, server.token))
  const text = JSON.stringify(body)
  const endpoint = `POST ${path}`
  let next = 0
  try {
    await Promise.all(
      connections.map(async (connection) => {
        while (next < count) {
          next += 1
          const started = performance.now()
          const answer = await connection.post(path, text)
          latencies.add(endpoint, performance.now() - started)
          if (answer.status !== status) throw new Error(`${path} answered ${answer.status}: ${answer.body}`)
        }
      }),
    )
  } finally {
    for (const connection of connections) connection.close()
  }
}

/**
 * `workers` clients drain the queue through the pull API or the worker API, until it is empty or
 * `ms` have passed; jobs/s over the drain.
 */
async function drain(post: ReturnType<typeof client>, api: 'pull' | 'worker', workers: number, ms = Infinity): Promise<number> {
  let done = 0
  const started = performance.now()
  await Promise.all(
    Array.from({ length: workers }, async (_, i) => {
      const worker_id = `bench-${api}-${i}`
      while (performance.now() - started < ms) {
        if (api === 'pull') {
          const granted = await post('POST …/leases/request', '/api/system/scheduler/leases/request', { worker_id })
          if (granted.json.denied) return
          const leaseId = (granted.json.lease as { lease_id: string }).lease_id
          await post('POST …/leases/{id}/heartbeat', `/api/system/scheduler/leases/${leaseId}/heartbeat`, { worker_id })
          await post('POST …/leases/{id}/complete', `/api/system/scheduler/leases/${leaseId}/complete`, { worker_id, status: 'completed' })
        } else {
          const claim = await post('POST /internal/worker/claim', '/internal/worker/claim', { worker_id, streams: ['default'], max_wait_ms: 0 })
          if (!claim.json.claimed) return
          const ref = { worker_id, job_id: claim.json.job_id, lease_token: claim.json.lease_token }
          await post('POST /internal/worker/heartbeat', '/internal/worker/heartbeat', ref)
          await post('POST /internal/worker/complete', '/internal/worker/complete', { ...ref, attempt_id: claim.json.attempt_id, result: {} })
        }
        done += 1
      }
    }),
  )
  return done / ((performance.now() - started) / 1000)
}

/**
 * The HTTP floor: `workers` clients send the bare Koa app three small JSON POSTs per job (as a
 * the worker API lifecycle does) for `ms` milliseconds. No server runs the lifecycle faster over
 * HTTP with this client on this machine. Timed rather than counted: the floor is fast enough
 * that a count small enough for --quick would be over before the JIT has warmed up.
 */
async function floorDrain(server: Server, ms: number, workers: number): Promise<number> {
  const post = client(server, new Latencies())
  let jobs = 0
  const started = performance.now()
  await Promise.all(
    Array.from({ length: workers }, async (_, i) => {
      const body = { worker_id: `floor-${i}`, job_id: '01a2152e-413d-72c2-8774-bed85243ae9f', lease_token: 'x'.repeat(32) }
      while (performance.now() - started < ms) {
        for (let k = 0; k < 3; k++) await post('floor', '/', body)
        jobs += 1
      }
    }),
  )
  return jobs / ((performance.now() - started) / 1000)
}

/** Jobs queued before each of the host's timed drives, a second: more than any drive here takes. */
const QUEUED_FOR_A_DRIVE_PER_S = 6_000

/**
 * The worker API lifecycle beside the HTTP floor, 8 workers each, as timed drives alternated
 * between the bare Koa app and the host: floor, host, host, floor, `ms` each; jobs/s of each.
 * The machine's speed moves by a fifth within minutes, so two drives a minute apart compare two
 * moments; drives alternated compare the servers. Each of the host's drives takes jobs queued
 * just before it, more than it can finish.
 */
async function lifecycleBesideFloor(koa: Server, host: Server, ms: number): Promise<{ host: number[]; floor: number[] }> {
  const post = client(host, new Latencies())
  const figures = { host: [] as number[], floor: [] as number[] }
  const driveFloor = async () => void figures.floor.push(await floorDrain(koa, ms, 8))
  const driveHost = async () => {
    await inChunks(host, Math.ceil((QUEUED_FOR_A_DRIVE_PER_S * ms) / 1000))
    figures.host.push(await drain(post, 'worker', 8, ms))
  }
  await driveFloor()
  await driveHost()
  await driveHost()
  await driveFloor()
  return figures
}

/** Submit → a waiting the worker API claim returns, one at a time. */
async function pickups(post: ReturnType<typeof client>, count: number): Promise<number[]> {
  const samples: number[] = []
  for (let i = 0; i < count; i++) {
    let claimedAt = 0
    const waiting = post('POST /internal/worker/claim (long-poll)', '/internal/worker/claim', { worker_id: 'bench-pickup', streams: ['default'], max_wait_ms: 10_000 }).then((answer) => {
      claimedAt = performance.now()
      return answer
    })
    await new Promise((r) => setTimeout(r, 5)) // let the claim reach the server and wait
    const started = performance.now()
    await post('POST /api/scheduler/jobs/submit', '/api/scheduler/jobs/submit', { job_type: 'noop', cost_units: 1 })
    const claim = await waiting
    // From sending the submit to the claim's answer, which may arrive before the submit's own.
    samples.push(claimedAt - started)
    const ref = { worker_id: 'bench-pickup', job_id: claim.json.job_id, lease_token: claim.json.lease_token, attempt_id: claim.json.attempt_id }
    await post('POST /internal/worker/complete', '/internal/worker/complete', { ...ref, result: {} })
  }
  return samples
}

const p = (samples: number[], q: number) => percentile(samples, q)

/** Run first and not counted: the connections open and the submits reach their pace. */
const PEER_LOAD_FIRST_S = 1

/** The peer's load for a stretch of `seconds`. */
export type Stretch = { jobsPerS: number; seconds: number }
const stretch = (seconds: number): Stretch => ({ jobsPerS: PEER_LOAD.jobsPerS, seconds })

/**
 * One path's samples under the peer's load (`run(stretch)` sends that load for that long and
 * resolves with the samples of its requests): in its seconds 1–5, and once it has run
 * `warmUpS` seconds. In between V8 compiles the path: at 500 jobs a second the host's own code
 * is still being optimized (some 270 functions, `--trace-opt`) in seconds 1–5, and a pickup
 * there takes ~1.2–1.5 × what it takes once compiled. (docs/performance.md, "The pickup's path").
 */
async function underPeerLoad(warmUpS: number, run: (load: Stretch) => Promise<number[]>): Promise<{ early: number[]; warm: number[] }> {
  await run(stretch(PEER_LOAD_FIRST_S))
  const early = await run(PEER_LOAD)
  const rest = warmUpS - PEER_LOAD_FIRST_S - PEER_LOAD.seconds
  if (rest > 0) await run(stretch(rest))
  const warm = await run(PEER_LOAD)
  return { early, warm }
}

interface Sent {
  jobId: string
  sentAt: number
}

/**
 * Calls `send(i)` for i = 0 … jobsPerS × seconds − 1 in an open loop: the i-th leaves at
 * i / jobsPerS s whether or not the earlier ones have been answered. Resolves with their answers
 * once all are in; if any failed, rejects then, saying how many and the first one's error. (Each
 * is settled as it leaves: a rejection left unobserved until the end would end the process.)
 */
export async function openLoop<T>(load: Stretch, send: (i: number) => Promise<T>): Promise<T[]> {
  const total = Math.round(load.jobsPerS * load.seconds)
  const sent: Promise<{ ok: true; value: T } | { ok: false; error: unknown }>[] = []
  const started = performance.now()
  while (sent.length < total) {
    const due = Math.min(total, Math.floor(((performance.now() - started) * load.jobsPerS) / 1000) + 1)
    while (sent.length < due) {
      sent.push(send(sent.length).then((value) => ({ ok: true as const, value }), (error: unknown) => ({ ok: false as const, error })))
    }
    await new Promise((r) => setTimeout(r, 1))
  }
  const settled = await Promise.all(sent)
  const failed = settled.flatMap((s) => (s.ok ? [] : [s.error]))
  if (failed.length > 0) throw new Error(`${failed.length} of ${total} requests failed (the first: ${(failed[0] as Error)?.message ?? String(failed[0])})`)
  return settled.map((s) => (s as { value: T }).value)
}

/**
 * Submits `jobsPerS × seconds` no-op jobs, one request each, in an open loop. Job `i` carries
 * `payload: { i: firstIndex + i }`, and `sentAt` is keyed by that number as each leaves, so
 * a claim answered before its submit's own answer still finds its start.
 */
async function openLoopSubmits(server: Server, load: Stretch, firstIndex: number, sentAt: Map<number, number>): Promise<Sent[]> {
  const post = leanPoster(server)
  return openLoop(load, async (n) => {
    const i = firstIndex + n
    const at = performance.now()
    sentAt.set(i, at)
    const res = await post('/api/scheduler/jobs/submit', { job_type: 'noop', cost_units: 1, payload: { i } })
    return { jobId: (res.json.job as { job_id: string }).job_id, sentAt: at }
  })
}

/**
 * Round trips of one small JSON POST each to the bare Koa app, in an open loop at the peer's
 * load: the floor under both pickups, which start with such a request. On this VM a process
 * woken from idle costs far more than one kept busy, so the floor at 500 requests/s is not
 * 1 / (the floor's requests/s).
 */
async function floorRoundTrips(server: Server, warmUpS: number): Promise<number[]> {
  const post = leanPoster(server)
  const once = async () => {
    const at = performance.now()
    await post('/', { job_type: 'noop', cost_units: 1 })
    return performance.now() - at
  }
  return (await underPeerLoad(warmUpS, (load) => openLoop(load, once))).warm
}

/**
 * Submit → a waiting the worker API claim answers, under the peer's load: 8 workers long-poll
 * /internal/worker/claim and complete each job at once, as the peer's 8 concurrent handlers do.
 */
async function openLoopPickups(server: Server, warmUpS: number): Promise<{ early: number[]; warm: number[] }> {
  const post = client(server, new Latencies())
  const sentAt = new Map<number, number>()
  let samples: number[] = []
  let sent = 0
  let stopping = false
  let workerFailed: unknown = null
  const worker = async (k: number) => {
    const worker_id = `bench-open-loop-${k}`
    while (!stopping) {
      const claim = await post('POST /internal/worker/claim (long-poll)', '/internal/worker/claim', { worker_id, streams: ['default'], max_wait_ms: 500 })
      const claimedAt = performance.now()
      if (claim.json.claimed !== true) continue
      const started = sentAt.get((claim.json.payload as { i: number }).i)
      if (started !== undefined) samples.push(claimedAt - started)
      const ref = { worker_id, job_id: claim.json.job_id, lease_token: claim.json.lease_token, attempt_id: claim.json.attempt_id }
      await post('POST /internal/worker/complete', '/internal/worker/complete', { ...ref, result: {} })
    }
  }
  // Each worker's failure is kept as it happens (left unobserved, it would end the process) and
  // ends the stretch under way.
  const workers = Array.from({ length: 8 }, (_, k) => worker(k).catch((error: unknown) => void (workerFailed ??= error)))
  const run = async (load: Stretch) => {
    const submitted = await openLoopSubmits(server, load, sent, sentAt)
    sent += submitted.length
    await waitFor(async () => {
      if (workerFailed !== null) throw workerFailed
      return samples.length >= submitted.length
    }, 10_000)
    const taken = samples
    samples = []
    return taken
  }
  try {
    return await underPeerLoad(warmUpS, run)
  } finally {
    stopping = true
    await Promise.all(workers)
  }
}

/** Jobs run untimed through each server before its figures are taken. */
const WARM_UP_JOBS = 500

export interface HttpFigures {
  rows: Row[]
  pickupP50: number
  pickupP99: number
  /** The worker API's lifecycle with 8 workers, jobs/s. */
  workerApiAt8: number
  /** The HTTP floor with 8 workers: bare Koa, 3 requests per job. */
  floorAt8: number
  /** The same two, from drives alternated between them ({@link lifecycleBesideFloor}). */
  paired: { host: number[]; floor: number[] }
}

export async function measureHttp(counts: HttpCounts, progress: (m: string) => void, rows: Row[] = [], beside: Beside = ALONE): Promise<HttpFigures> {
  progress('HTTP floor (bare Koa), 8 workers, 3 requests per job, 2 s warm-up + 3 s')
  const koa = await startKoaFloor()
  try {
    return await measureBesideFloor(koa, counts, progress, rows, beside)
  } finally {
    await koa.stop()
  }
}

/** {@link measureHttp}, with the bare Koa app `koa` running beside the host throughout. */
async function measureBesideFloor(koa: Server, counts: HttpCounts, progress: (m: string) => void, rows: Row[], beside: Beside): Promise<HttpFigures> {
  await floorDrain(koa, 2_000, 8) // lets the JIT and the connections warm up
  const floorAt8 = await floorDrain(koa, 3_000, 8)
  progress(`HTTP round trips to bare Koa at ${PEER_LOAD.jobsPerS} requests/s: ${counts.warmUpS} s, then ${PEER_LOAD.seconds} s measured`)
  const roundTrips = await floorRoundTrips(koa, counts.warmUpS)
  rows.push(
    { name: 'HTTP floor, bare Koa, 8 workers', value: floorAt8, unit: 'jobs/s', note: `3 JSON POSTs per job, same client: ${Math.round(floorAt8 * 3).toLocaleString('en-US')} requests/s` },
    {
      name: `HTTP round trip p50 at ${PEER_LOAD.jobsPerS} requests/s, bare Koa`,
      value: p(roundTrips, 50),
      unit: 'ms',
      note: `${roundTrips.length} JSON POSTs, one each, open loop, after ${counts.warmUpS} s of them: the floor under the pickups, whose submit is such a request`,
    },
  )
  const server = await startServer(['--workers', '0', '--total-units', '100000'])
  const latencies = new Latencies()
  const post = client(server, latencies)
  let workerApiAt8 = 0
  try {
    progress(`HTTP warm-up, ${WARM_UP_JOBS} jobs`)
    const untimed = client(server, new Latencies())
    await submitMany(server, new Latencies(), WARM_UP_JOBS, 'noop')
    await drain(untimed, 'worker', 8)
    for (const api of ['pull', 'worker'] as const) {
      for (const workers of [1, 8, 32]) {
        progress(`HTTP ${api} API, ${workers} worker(s), ${counts.lifecycleJobs} jobs`)
        await submitMany(server, latencies, counts.lifecycleJobs, 'noop')
        const jobsPerS = await drain(post, api, workers)
        if (api === 'worker' && workers === 8) workerApiAt8 = jobsPerS
        rows.push({
          name: `HTTP lifecycle, ${api} API, ${workers} worker${workers > 1 ? 's' : ''}`,
          value: jobsPerS,
          unit: 'jobs/s',
          note: api === 'pull' ? 'request → heartbeat → complete' : 'claim → heartbeat → complete',
        })
      }
    }
    progress(`pickup latency, ${counts.pickups} submits to a waiting claim`)
    const pickup = await pickups(post, counts.pickups)
    rows.push(
      { name: 'pickup latency p50 (submit → waiting claim)', value: p(pickup, 50), unit: 'ms', note: `${counts.pickups} pickups over loopback` },
      { name: 'pickup latency p99', value: p(pickup, 99), unit: 'ms' },
    )
    progress(`pickup latency under the peer's load: ${PEER_LOAD.jobsPerS} submits/s, 8 waiting claims: ${counts.warmUpS} s, then ${PEER_LOAD.seconds} s measured`)
    const loaded = await beside(OPEN_LOOP_PICKUP, ['pickup'], () => openLoopPickups(server, counts.warmUpS))
    rows.push(
      { name: EARLY_PICKUP, value: p(loaded.early, 50), unit: 'ms', note: `${loaded.early.length} jobs, one submit each, open loop; 8 worker API clients long-poll` },
      { name: OPEN_LOOP_PICKUP, value: p(loaded.warm, 50), unit: 'ms', note: `${loaded.warm.length} jobs as above, after ${counts.warmUpS} s of them` },
      { name: `pickup p99 at ${PEER_LOAD.jobsPerS} jobs/s`, value: p(loaded.warm, 99), unit: 'ms' },
    )
    for (const [endpoint, samples] of latencies.byEndpoint) {
      if (endpoint.includes('long-poll')) continue
      rows.push({ name: `${endpoint} p50 / p99`, value: p(samples, 50), unit: 'ms', note: `p99 ${p(samples, 99).toFixed(2)} ms over ${samples.length} requests` })
    }
    const seconds = (counts.pairedDriveMs / 1000).toLocaleString('en-US')
    progress(`the worker API lifecycle beside the HTTP floor, 8 workers: drives of ${seconds} s alternated, floor, host, host, floor`)
    const paired = await lifecycleBesideFloor(koa, server, counts.pairedDriveMs)
    return { rows, pickupP50: p(pickup, 50), pickupP99: p(pickup, 99), workerApiAt8, floorAt8, paired }
  } finally {
    await server.stop()
  }
}

async function waitFor(check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error('timed out waiting')
    await new Promise((r) => setTimeout(r, 20))
  }
}

async function doneCount(server: Server): Promise<number> {
  return ((await get(server, '/api/scheduler/stats/snapshot')) as { jobs: { done_last_24h: number } }).jobs.done_last_24h
}

async function workersReady(server: Server, count: number): Promise<boolean> {
  const { workers } = (await get(server, '/api/workers')) as { workers: { state: string }[] }
  return workers.filter((w) => w.state === 'ready' || w.state === 'active').length >= count
}

/** No-op jobs (`sleep {ms: 0}`) submitted in a burst, until all are DONE; jobs/s over that. */
async function throughput(server: Server, jobs: number): Promise<number> {
  const started = performance.now()
  await submitMany(server, new Latencies(), jobs, 'sleep', { ms: 0 })
  await waitFor(async () => (await doneCount(server)) >= jobs, 120_000)
  return jobs / ((performance.now() - started) / 1000)
}

export async function measureWorkers(counts: HttpCounts, progress: (m: string) => void, rows: Row[] = []): Promise<Row[]> {
  progress(`embedded pool (2 local workers), ${counts.poolJobs} no-op jobs`)
  const pooled = await startServer(['--workers', '2'])
  try {
    await waitFor(() => workersReady(pooled, 2), 60_000)
    rows.push({ name: 'embedded pool, 2 local workers', value: await throughput(pooled, counts.poolJobs), unit: 'jobs/s', note: `${counts.poolJobs} sleep{ms:0} jobs, submit → DONE` })
    progress(`local pickup latency, ${Math.min(100, counts.pickups)} jobs`)
    // Pickup = the host's own timestamps: JOB_SUBMITTED → LEASE_GRANTED (millisecond resolution).
    const samples: number[] = []
    const post = client(pooled, new Latencies())
    for (let i = 0; i < Math.min(100, counts.pickups); i++) {
      const before = await doneCount(pooled)
      const submitted = await post('submit', '/api/scheduler/jobs/submit', { job_type: 'sleep', cost_units: 1, payload: { ms: 0 } })
      const jobId = (submitted.json.job as { job_id: string }).job_id
      await waitFor(async () => (await doneCount(pooled)) > before, 10_000)
      const { events } = (await get(pooled, `/api/scheduler/jobs/${jobId}/events`)) as { events: { type: string; ts: string }[] }
      const at = (type: string) => Date.parse(events.find((e) => e.type === type)!.ts)
      samples.push(at('LEASE_GRANTED') - at('JOB_SUBMITTED'))
    }
    rows.push(
      { name: 'local worker pickup p50 (submit → lease granted)', value: p(samples, 50), unit: 'ms', note: "host's event timestamps, 1 ms resolution" },
      { name: 'local worker pickup p99', value: p(samples, 99), unit: 'ms' },
    )
  } finally {
    await pooled.stop()
  }

  progress(`8 external leasehold worker processes, ${counts.poolJobs} no-op jobs`)
  await withEightWorkers([], (server) => ['--url', server.url], 'bench-ext', async (server) => {
    rows.push({ name: 'external workers (8 processes)', value: await throughput(server, counts.poolJobs), unit: 'jobs/s', note: `${counts.poolJobs} sleep{ms:0} jobs, submit → DONE` })
  })
  return rows
}

// ---------------------------------------------------------------------------------------------
// Batched: jobs submitted 1,000 a request, drained by workers that run many at once

export interface BatchedCounts {
  /** No-op jobs per drain. */
  drainJobs: number
  localPickups: number
  /** Finished jobs in the database of the memory figure. */
  finishedJobs: number
  /** As {@link HttpCounts.warmUpS}. */
  warmUpS: number
  /** Drains of each drain row, after its warm-up: the row reads their median. */
  drainRounds: number
  /** Jobs per single-submit drain (BullMQ's single adds: 5,000). */
  singleJobs: number
  /** `leasehold submit` commands timed, one job each (and as many `node -e 0` beside them). */
  commands: number
}

/** Jobs per submit-batch request, as the peer's addBulk chunks. */
const SUBMIT_CHUNK = 1000

/**
 * Watches a drain through the host's API (its database file is the host's alone while it runs:
 * docs/configuration.md): whether work is left (the snapshot's counts, from the host's memory),
 * and once none is, the DONE count and the last finish time. A look every 50 ms costs the busy
 * host a few tenths of a percent of its time.
 */
function doneWatcher(server: Server): { busy(): Promise<boolean>; done(): Promise<number>; lastFinishedAt(): Promise<number> } {
  const snapshot = async () => ((await get(server, '/api/scheduler/stats/snapshot')) as { jobs: Record<'queued' | 'claimed' | 'leased' | 'running' | 'done_last_24h', number> }).jobs
  return {
    busy: async () => {
      const jobs = await snapshot()
      return jobs.queued + jobs.claimed + jobs.leased + jobs.running > 0
    },
    done: async () => (await snapshot()).done_last_24h,
    // The jobs finish about in the order they were submitted: the last to finish is among the newest.
    lastFinishedAt: async () => {
      const { jobs } = (await get(server, '/api/scheduler/jobs?state=DONE&limit=500')) as { jobs: { updated_at: string }[] }
      return Math.max(...jobs.map((job) => Date.parse(job.updated_at)))
    },
  }
}

interface Drain {
  jobsPerS: number
  /** CPU per job of the host process and of its children (the embedded pool), or of `workers`. */
  cpu: string
}

/** How a drain's jobs reach the host: all sent by the time it resolves. */
type Submitter = (server: Server, jobs: number) => Promise<void>

/**
 * In requests of 1,000, each job answered by its id (`Prefer: return=minimal`), as BullMQ's
 * addBulk, which gets ids back and builds its Job objects from what it sent.
 */
const inChunks: Submitter = async (server, jobs) => {
  const post = client(server, new Latencies(), { prefer: 'return=minimal' })
  for (let i = 0; i < jobs; i += SUBMIT_CHUNK) {
    const chunk = Array.from({ length: Math.min(SUBMIT_CHUNK, jobs - i) }, () => ({ job_type: 'noop', cost_units: 1 }))
    const res = await post('submit-batch', '/api/scheduler/jobs/submit-batch', { jobs: chunk })
    if (res.status !== 200) throw new Error(`submit-batch answered ${res.status}`)
  }
}

/**
 * One job per `POST /api/scheduler/jobs/submit`, from `clients` loops that each send their next
 * job once the last one is answered (the whole job answered, as a client that reads it back):
 * the shape of an add-on submitting on a click or a script looping over files, and of BullMQ's
 * producers calling add() once per job.
 */
const oneEach =
  (clients: number): Submitter =>
  (server, jobs) =>
    postLoops(server, new Latencies(), clients, jobs, SUBMIT_PATH, 201)

/**
 * {@link postLoops} timed: requests/s, and the CPU per request of the server (its process alone)
 * and of this process, the clients.
 */
async function timedLoops(server: Server, clients: number, count: number, path: string, status: number): Promise<{ perS: number; cpu: string }> {
  const serverBefore = processTreeCpuMs(server.child.pid!)?.own
  const clientBefore = process.cpuUsage()
  const started = performance.now()
  await postLoops(server, new Latencies(), clients, count, path, status)
  const perS = count / ((performance.now() - started) / 1000)
  const serverAfter = processTreeCpuMs(server.child.pid!)?.own
  const clientCpu = process.cpuUsage(clientBefore)
  const perRequest = (ms: number) => `${Math.round((ms * 1000) / count)} µs`
  const serverCpu = serverBefore !== undefined && serverAfter !== undefined ? `the server ${perRequest(serverAfter - serverBefore)}, ` : ''
  return { perS, cpu: `CPU per request: ${serverCpu}the clients ${perRequest((clientCpu.user + clientCpu.system) / 1000)}` }
}

/**
 * `jobs` no-op jobs (each reports progress once) submitted as `submit` sends them (by default in
 * requests of 1,000), until all are DONE: jobs/s from the first submit to the host's timestamp
 * of the last DONE, and the CPU per job of the host, of the workers (the host's child
 * processes, or the `workers` given) and of this process, the clients that submit (it shares
 * the machine's cores with the host: at one job a request, its requests are a good part of what
 * the cores do).
 */
async function drainBatched(server: Server, jobs: number, workers: ChildProcess[] = [], submit: Submitter = inChunks): Promise<Drain> {
  const watcher = doneWatcher(server)
  const cpu = () => {
    const host = processTreeCpuMs(server.child.pid!)
    const external = workers.map((w) => processTreeCpuMs(w.pid!)?.own ?? 0).reduce((a, b) => a + b, 0)
    return host && { host: host.own, workers: workers.length > 0 ? external : host.children }
  }
  const cpuBefore = cpu()
  const clientBefore = process.cpuUsage()
  const doneBefore = await watcher.done()
  const started = Date.now() // the host's clock is this machine's: its finish times are comparable
  await submit(server, jobs)
  const deadline = performance.now() + 180_000
  while (await watcher.busy()) {
    if (performance.now() > deadline) throw new Error(`jobs still running after 180 s`)
    await new Promise((r) => setTimeout(r, 50))
  }
  const done = (await watcher.done()) - doneBefore
  if (done !== jobs) throw new Error(`${done} of ${jobs} jobs DONE`)
  const cpuAfter = cpu()
  const client = process.cpuUsage(clientBefore)
  const perJob = (ms: number) => `${Math.round((ms * 1000) / jobs)} µs`
  const clients = `the submitting clients ${perJob((client.user + client.system) / 1000)}`
  return {
    jobsPerS: jobs / (((await watcher.lastFinishedAt()) - started) / 1000),
    cpu: cpuBefore && cpuAfter ? `CPU per job: host ${perJob(cpuAfter.host - cpuBefore.host)}, workers ${perJob(cpuAfter.workers - cpuBefore.workers)}, ${clients}` : `CPU per job: ${clients} (the host's not measured: no /proc)`,
  }
}

/** The job type of {@link STAMP_HANDLER}: a no-op that says when it started. */
const STAMP_TYPE = 'bench-stamp'

/**
 * A handler the bench puts in the host's handlers folder (`<data dir>/handlers`, which the local
 * workers load): it notes the moment it starts on the machine's monotonic clock
 * (`process.hrtime`, one clock for every process and thread), reports progress once as `noop`
 * does, and returns that moment as its result.
 */
const stampHandler = (startsFile: string) => `import { appendFileSync } from 'node:fs'
export default {
  type: '${STAMP_TYPE}',
  async run({ job, progress }) {
    const started_ns = String(process.hrtime.bigint())
    appendFileSync(${JSON.stringify(startsFile)}, job.id + ' ' + started_ns + '\\n')
    progress(0.5)
    return { started_ns }
  },
}
`

/** Where the stamp handler of a data dir notes each job's start, one line each (`<job id> <ns>`). */
const startsFileOf = (dataDir: string) => join(dataDir, 'bench-starts')

/** A fresh data dir whose local workers can run {@link STAMP_TYPE} jobs. */
function dataDirWithStampHandler(): string {
  const dataDir = mkdtempSync(join(tmpdir(), 'leasehold-bench-http-'))
  mkdirSync(join(dataDir, 'handlers'))
  writeFileSync(join(dataDir, 'handlers', 'bench-stamp.mjs'), stampHandler(startsFileOf(dataDir)))
  return dataDir
}

/** A stamp job submitted: its id, and when its submit left (the monotonic clock, ns). */
interface Stamped {
  jobId: string
  sentNs: bigint
}

const submitStamp = async (post: ReturnType<typeof leanPoster>): Promise<Stamped> => {
  const sentNs = process.hrtime.bigint()
  const res = await post('/api/scheduler/jobs/submit', { job_type: STAMP_TYPE, cost_units: 1 })
  if (res.status !== 201) throw new Error(`submit answered ${res.status}`)
  return { jobId: (res.json.job as { job_id: string }).job_id, sentNs }
}

/**
 * Once every one of these stamp jobs has started (read from the file its handler notes starts
 * in, as the floor's threads do, so that the host is not asked and stays as idle as the row
 * needs): for each, from its submit leaving to its handler starting in a local worker, in ms.
 */
async function handlerStarts(server: Server, jobs: Stamped[]): Promise<number[]> {
  let starts = new Map<string, bigint>()
  await waitFor(async () => {
    starts = readStarts(startsFileOf(server.dataDir))
    return jobs.every((job) => starts.has(job.jobId))
  }, 30_000)
  return jobs.map((job) => Number(starts.get(job.jobId)! - job.sentNs) / 1e6)
}

/** The starts noted so far, by job id. */
function readStarts(file: string): Map<string, bigint> {
  const starts = new Map<string, bigint>()
  if (!existsSync(file)) return starts
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const [id, ns] = line.split(' ')
    if (id && ns) starts.set(id, BigInt(ns))
  }
  return starts
}

/**
 * Submit → a local worker's handler starts, one job at a time, with the pool's claims waiting:
 * what BullMQ's pickup measures (its processor's start − the add() call). Each job's handler
 * has started before the next is sent, 20 ms later.
 */
async function localPickups(server: Server, count: number): Promise<number[]> {
  const post = leanPoster(server)
  const samples: number[] = []
  for (let i = 0; i < count; i++) {
    await new Promise((r) => setTimeout(r, 20)) // the claims wait again
    samples.push(...(await handlerStarts(server, [await submitStamp(post)])))
  }
  return samples
}

/** Submit → a local worker's handler starts, under the peer's load (jobs added one request each, open loop). */
async function openLoopLocalPickups(server: Server, warmUpS: number): Promise<{ early: number[]; warm: number[] }> {
  const post = leanPoster(server)
  return underPeerLoad(warmUpS, async (load) => handlerStarts(server, await openLoop(load, () => submitStamp(post))))
}

/**
 * The floor under the local pickups: submit → a handler thread starts through bare Koa and a
 * Unix socket straight to a worker process's thread (koa-floor.mjs --pool), as a job granted to
 * a waiting local worker goes, with no engine. In ms: under the peer's load, as
 * {@link openLoopLocalPickups}; then `oneAtATime` POSTs as {@link localPickups} sends its jobs,
 * 20 ms apart, each thread's start read before the next.
 */
async function localPickupFloor(warmUpS: number, oneAtATime: number): Promise<{ loaded: number[]; single: number[] }> {
  const startsFile = join(mkdtempSync(join(tmpdir(), 'leasehold-bench-floor-')), 'starts')
  const floor = await startKoaFloor(['--pool', `--starts=${startsFile}`])
  try {
    const post = leanPoster(floor)
    const sentNs: bigint[] = []
    const send = async () => {
      const i = sentNs.length
      sentNs.push(process.hrtime.bigint())
      await post('/', { i })
      return i
    }
    const starts = async (sent: number[]) => {
      const started = new Map<number, bigint>()
      await waitFor(async () => {
        if (existsSync(startsFile)) {
          for (const line of readFileSync(startsFile, 'utf8').split('\n')) {
            const [i, ns] = line.split(' ')
            if (ns) started.set(Number(i), BigInt(ns))
          }
        }
        return sent.every((i) => started.has(i))
      }, 10_000)
      return sent.map((i) => Number(started.get(i)! - sentNs[i]!) / 1e6)
    }
    const loaded = (await underPeerLoad(warmUpS, async (load) => starts(await openLoop(load, send)))).warm
    const single: number[] = []
    for (let i = 0; i < oneAtATime; i++) {
      await new Promise((r) => setTimeout(r, 20)) // as long idle as the host's pickups one at a time
      single.push(...(await starts([await send()])))
    }
    return { loaded, single }
  } finally {
    await floor.stop()
    rmSync(dirname(startsFile), { recursive: true, force: true })
  }
}

/** The host's resident memory (VmRSS, in MB) as Linux reports it. */
function rssMb(pid: number): number {
  const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]
  return Number(kb) / 1024
}

/**
 * A host on a database that already holds `finished` DONE jobs (with their events, all within
 * the last 24 h): how long it takes to start, and its resident memory after it has run jobs.
 */
export async function measureRss(finished: number, progress: (m: string) => void): Promise<Row[]> {
  const n = finished.toLocaleString('en-US')
  const dataDir = mkdtempSync(join(tmpdir(), 'leasehold-bench-rss-'))
  progress(`host memory: writing ${n} finished jobs`)
  const { sqlite } = openDatabase({ path: join(dataDir, 'leasehold.db') })
  const insertMs = insertFinished(sqlite, finished, Date.now())
  sqlite.close()
  progress(`host memory: starting a host on them, then 20,000 more jobs`)
  const started = performance.now()
  const server = await startServer([], dataDir)
  const startMs = performance.now() - started
  try {
    await waitFor(() => workersReady(server, 2), 60_000)
    await drainBatched(server, 20_000)
    const snapshot = await get(server, '/api/scheduler/stats/snapshot')
    const done = (snapshot as { jobs: { done_last_24h: number } }).jobs.done_last_24h
    if (done < finished) throw new Error(`the snapshot counts ${done} DONE in 24 h, fewer than the ${finished} written`)
    const mb = rssMb(server.child.pid!)
    return [
      {
        name: `host RSS, ${n} finished jobs`,
        value: mb,
        unit: 'MB',
        target: '≤ 200',
        status: mb <= 200 ? 'PASS' : 'MISS',
        note: `after 20,000 more jobs; the database written in ${(insertMs / 1000).toFixed(1)} s`,
      },
      { name: `host start, ${n} finished jobs`, value: startMs, unit: 'ms', note: 'spawn → listening, with the day\'s counts read from the event log' },
    ]
  } finally {
    await server.stop()
  }
}

/** The drains held to BullMQ, and the local pickup in microseconds. */
export async function measureBatched(counts: BatchedCounts, progress: (m: string) => void, rows: Row[] = [], beside: Beside = ALONE): Promise<Row[]> {
  const n = counts.drainJobs.toLocaleString('en-US')
  // The servers below take the slots of the environment, as the host does, or their share of the first capacity.
  const given = process.env.LEASEHOLD_WORKER_CONCURRENCY
  const slots = given ? `${given} jobs` : `${localWorkerSlots(100, 2)} jobs (their share of the first 100 units)`
  for (const durability of ['normal', 'full'] as const) {
    progress(`pool drain (${durability}): the default pool, ${n} no-op jobs submitted 1,000 a request: ${counts.warmUpS} s of drains first, then ${counts.drainRounds} measured`)
    const server = await startServer(['--durability', durability], dataDirWithStampHandler())
    try {
      await waitFor(() => workersReady(server, 2), 60_000)
      const drain = await warmDrain(server, counts.drainJobs, [], counts.warmUpS, counts.drainRounds, (measure) => beside(`pool drain (${durability})`, ['process'], measure))
      rows.push({
        name: `pool drain (${durability})`,
        value: drain.jobsPerS,
        unit: 'jobs/s',
        note: `${n} noop jobs (progress once each) submitted 1,000 a request (ids answered), 2 local workers × ${slots}, first submit → last DONE, after ${counts.warmUpS} s of such drains, the median of ${drain.each}; ${drain.cpu}`,
      })
      if (durability === 'normal') {
        progress(`local pickup under the peer's load: ${PEER_LOAD.jobsPerS} submits/s: ${counts.warmUpS} s, then ${PEER_LOAD.seconds} s measured`)
        const loaded = await beside(OPEN_LOOP_LOCAL_PICKUP, ['pickup'], () => openLoopLocalPickups(server, counts.warmUpS))
        rows.push(
          { name: EARLY_LOCAL_PICKUP, value: p(loaded.early, 50) * 1000, unit: 'µs', note: `${loaded.early.length} jobs, one submit each, open loop; the handler's start on the machine's monotonic clock` },
          { name: OPEN_LOOP_LOCAL_PICKUP, value: p(loaded.warm, 50) * 1000, unit: 'µs', note: `${loaded.warm.length} jobs as above, after ${counts.warmUpS} s of them` },
          { name: `local pickup p99 at ${PEER_LOAD.jobsPerS} jobs/s`, value: p(loaded.warm, 99) * 1000, unit: 'µs' },
        )
        // After those, as BullMQ's own one-at-a-time pickup follows its pickups under load: the
        // one-job submit's path has run a while, as the peer's has.
        progress(`local pickup, ${counts.localPickups} jobs one at a time`)
        const samples = await beside(LOCAL_PICKUP, ['pickup', 'one'], () => localPickups(server, counts.localPickups))
        rows.push(
          { name: LOCAL_PICKUP, value: p(samples, 50) * 1000, unit: 'µs', note: `${counts.localPickups} jobs, one at a time, 20 ms apart, after those at the peer's load; the handler's start on the machine's monotonic clock` },
          { name: 'local pickup p99', value: p(samples, 99) * 1000, unit: 'µs' },
        )
      }
    } finally {
      await server.stop()
    }
  }

  // With no host running: the floor is the transport alone.
  progress(`the local pickup's floor (bare Koa → socket → thread) at ${PEER_LOAD.jobsPerS} submits/s: ${counts.warmUpS} s, then ${PEER_LOAD.seconds} s measured; then ${counts.localPickups} one at a time`)
  const floor = await localPickupFloor(counts.warmUpS, counts.localPickups)
  rows.push(
    {
      name: LOCAL_PICKUP_FLOOR,
      value: p(floor.loaded, 50) * 1000,
      unit: 'µs',
      note: `${floor.loaded.length} POSTs, open loop after ${counts.warmUpS} s of them, each written over a Unix socket straight to a worker process's thread (as a job granted to a waiting local worker goes), on the same clock: the local pickup's path with no engine`,
    },
    {
      name: LOCAL_PICKUP_FLOOR_ONE,
      value: p(floor.single, 50) * 1000,
      unit: 'µs',
      note: `${floor.single.length} POSTs after those, one at a time, 20 ms apart: the path of the one-at-a-time local pickup with no engine`,
    },
  )

  progress(`external workers batched: 8 leasehold worker processes, ${n} no-op jobs`)
  await withEightWorkers([], (server) => ['--url', server.url], 'bench-batched', async (server, workers) => {
    const drain = await warmDrain(server, counts.drainJobs, workers, counts.warmUpS, counts.drainRounds, (measure) => beside('external workers batched, 8 processes', ['process'], measure))
    rows.push({
      name: 'external workers batched, 8 processes',
      value: drain.jobsPerS,
      unit: 'jobs/s',
      note: `${n} noop jobs submitted 1,000 a request (ids answered), 8 × ${DEFAULT_WORKER_CONCURRENCY} jobs at once over HTTP (POST /internal/worker/batch), first submit → last DONE, after ${counts.warmUpS} s of such drains, the median of ${drain.each}; ${drain.cpu}`,
    })
  })
  await measureOverRedis(counts, progress, rows, beside)
  return rows
}

/** The single-submit rows' names (bench.ts compares them with BullMQ's single adds). */
export const SINGLE_16 = 'single submits, 16 clients, pool drain'
export const SINGLE_1 = 'single submits, 1 client, pool drain'
/** What the same clients reach with no job run at all: the host's submit route alone, and a bare Koa app. */
export const SUBMIT_ROUTE_16 = 'submit route alone, 16 clients (no pool)'
export const SUBMIT_ROUTE_1 = 'submit route alone, 1 client (no pool)'
export const POST_FLOOR_16 = 'HTTP floor, one POST each, 16 clients'
export const POST_FLOOR_1 = 'HTTP floor, one POST each, 1 client'
/** What the same clients reach with each job's rows written and run by a worker, and no engine (rows-floor.ts). */
export const ROWS_FLOOR_16 = 'single submits with no engine, 16 clients (rows floor)'
export const ROWS_FLOOR_1 = 'single submits with no engine, 1 client (rows floor)'
/** A shell loop's job: one `leasehold submit` command, spawn to exit. */
export const SUBMIT_COMMAND = 'leasehold submit, one command a job'

/**
 * Jobs that arrive one request each, drained by the default pool: 16 client loops (BullMQ's
 * `processing_single`: 16 producers, one add() each, processed at concurrency 8), then one
 * client alone (BullMQ's sequential add() rate); the one-at-a-time local pickup is measured by
 * {@link measureBatched}. Then the ceilings over those two rows, the same client loops with no
 * job run: a host with no pool (its submits only queue), and the bare Koa app of koa-floor.mjs;
 * and their floor with each job run: its rows, commit and worker with no engine (rows-floor.ts).
 */
export async function measureSingles(counts: BatchedCounts, progress: (m: string) => void, rows: Row[] = [], beside: Beside = ALONE): Promise<Row[]> {
  const n = counts.singleJobs.toLocaleString('en-US')
  const server = await startServer([], dataDirWithStampHandler())
  try {
    await waitFor(() => workersReady(server, 2), 60_000)
    // Warm, as the peer's process is when it measures its single adds (it has run 40,000 jobs):
    // the first seconds of a fresh host spend a third of its CPU compiling its paths.
    progress(`single submits: ${counts.warmUpS} s of them first`)
    const warmUntil = performance.now() + counts.warmUpS * 1000
    while (performance.now() < warmUntil) await drainBatched(server, 1_000, [], oneEach(16))
    for (const clients of [16, 1]) {
      progress(`single submits: ${clients} client${clients > 1 ? 's' : ''}, ${n} no-op jobs, one request each, the default pool`)
      await drainBatched(server, Math.min(1_000, counts.singleJobs), [], oneEach(clients)) // this shape's own warm-up
      const name = clients > 1 ? SINGLE_16 : SINGLE_1
      const drain = await beside(name, clients > 1 ? ['single'] : ['add', 'single1'], () => medianDrain(counts.drainRounds, () => drainBatched(server, counts.singleJobs, [], oneEach(clients))))
      rows.push({
        name,
        value: drain.jobsPerS,
        unit: 'jobs/s',
        note: `${n} noop jobs, each its own POST /api/scheduler/jobs/submit (the job answered), ${clients > 1 ? `${clients} clients each sending the next once answered` : 'one client sending the next once answered'}, 2 local workers, first submit → last DONE, after ${counts.warmUpS} s of such submits, the median of ${drain.each}; ${drain.cpu}`,
      })
    }
    rows.push(await timeSubmitCommands(server, counts.commands, progress))
  } finally {
    await server.stop()
  }
  await measureCeilings(counts, progress, rows)
  return rows
}

/** Runs `node <args>` to its exit; resolves with the ms it took, spawn to exit. */
async function timeCommand(args: string[]): Promise<number> {
  const started = performance.now()
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'pipe'] })
  let stderr = ''
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve))
  if (code !== 0) throw new Error(`node ${args.join(' ')} exited with ${code}: ${stderr.trim()}`)
  return performance.now() - started
}

/**
 * The row {@link SUBMIT_COMMAND}: what a shell loop that runs `leasehold submit` once a job pays
 * a job, the median of `commands` runs from the command's bundle, with Node's own start (`node
 * -e 0`, as many runs, alternated with them) beside it.
 */
async function timeSubmitCommands(server: Server, commands: number, progress: (m: string) => void): Promise<Row> {
  progress(`leasehold submit: ${commands} commands, one job each, and as many node -e 0`)
  const submits: number[] = []
  const bare: number[] = []
  for (let i = 0; i < commands; i++) {
    submits.push(await timeCommand([BIN, 'submit', '--type', 'noop', '--url', server.url, '--token', server.token]))
    bare.push(await timeCommand(['-e', '0']))
  }
  return {
    name: SUBMIT_COMMAND,
    value: percentile(submits, 50),
    unit: 'ms',
    note: `spawn → exit, median of ${commands} (a loop of them: ${(1000 / percentile(submits, 50)).toFixed(1)} jobs/s); Node's own start (node -e 0) ${percentile(bare, 50).toFixed(0)} ms`,
  }
}

/** The ceilings of {@link measureSingles}: each server warmed as the drains were, then each client count timed. */
async function measureCeilings(counts: BatchedCounts, progress: (m: string) => void, rows: Row[]): Promise<void> {
  const ceilings = [
    { label: 'the submit route alone', names: [SUBMIT_ROUTE_16, SUBMIT_ROUTE_1], start: () => startServer(['--workers', '0']), path: '/api/scheduler/jobs/submit', status: 201, what: 'POST /api/scheduler/jobs/submit to a host with no pool (each job answered, and left QUEUED)' },
    { label: 'the HTTP floor', names: [POST_FLOOR_16, POST_FLOOR_1], start: () => startKoaFloor(), path: '/', status: 200, what: 'the same POST to a bare Koa app that parses it and answers {"ok":true} (koa-floor.mjs)' },
    { label: 'the rows floor', names: [ROWS_FLOOR_16, ROWS_FLOOR_1], start: () => startRowsFloor(), path: '/api/scheduler/jobs/submit', status: 201, what: "the same submit to a server with no engine that writes the job's rows as the host does (one commit a turn), hands the job to a worker process over a Unix socket and commits its completion with the next turn (rows-floor.ts)" },
  ]
  for (const { label, names, start, path, status, what } of ceilings) {
    const server = await start()
    try {
      progress(`${label}: ${counts.warmUpS} s first, then ${counts.singleJobs.toLocaleString('en-US')} requests from 16 clients and from 1`)
      const warmUntil = performance.now() + counts.warmUpS * 1000
      const untimed = new Latencies()
      while (performance.now() < warmUntil) await postLoops(server, untimed, 16, 1_000, path, status)
      for (const [i, clients] of [16, 1].entries()) {
        await postLoops(server, untimed, clients, Math.min(1_000, counts.singleJobs), path, status)
        const timed = await timedLoops(server, clients, counts.singleJobs, path, status)
        rows.push({ name: names[i]!, value: timed.perS, unit: 'requests/s', note: `${counts.singleJobs.toLocaleString('en-US')} × ${what}, ${clients} client${clients > 1 ? 's' : ''} each sending the next once answered; ${timed.cpu}` })
      }
    } finally {
      await server.stop()
    }
  }
}

async function stopWorkers(workers: ChildProcess[]): Promise<void> {
  for (const w of workers) w.kill('SIGTERM')
  await Promise.all(workers.map((w) => new Promise((r) => (w.exitCode === null ? w.once('exit', r) : r(null)))))
}

/**
 * A host with no pool of its own (`serverArgs` added to its flags) and 8 `leasehold worker`
 * processes that reach it as `reach` says (`--url …` or `--redis …`), each named `<prefix>-<i>`:
 * `measure` runs once all 8 are ready; then the workers and the host stop.
 */
async function withEightWorkers(serverArgs: string[], reach: (server: Server) => string[], prefix: string, measure: (server: Server, workers: ChildProcess[]) => Promise<void>): Promise<void> {
  const server = await startServer(['--workers', '0', ...serverArgs])
  const workers = Array.from({ length: 8 }, (_, i) =>
    tracked(spawn(process.execPath, [BIN, 'worker', ...reach(server), '--token', server.token, '--worker-id', `${prefix}-${i}`], { stdio: 'ignore' })),
  )
  try {
    // External workers appear with their first claim.
    await waitFor(() => workersReady(server, 8), 60_000)
    await measure(server, workers)
  } finally {
    await stopWorkers(workers)
    await server.stop()
  }
}

/** A drain row's reading: the median of its drains, and each drain's rate for the row's note. */
interface DrainReading extends Drain {
  /** "16,104, 17,715 and 18,692 jobs/s": every drain the median was taken from. */
  each: string
}

/**
 * {@link drainBatched} of `jobs` `rounds` times, after drains of up to 2,000 to warm the paths up
 * for `warmUpS` seconds; reads the median drain. A process compiles its paths as it runs them:
 * a fresh host's first drain after 2,000 jobs read ~15,300 jobs/s here where its third to sixth
 * read 18,000–20,000 (a host restarted on the same data is as slow again: the process's warming,
 * not the data's), and a fleet of fresh worker processes, after one drain of 2,000, has run ~250
 * jobs each, so the drain that followed was mostly their warming (their CPU a job 180–220 µs,
 * against 75–105 once warm). A host and a fleet serve for hours, and BullMQ's one process
 * measures warm. One drain of a second or two reads the machine's moment as much as the host, so
 * the row is the median of `rounds`.
 */
async function warmDrain(server: Server, jobs: number, workers: ChildProcess[], warmUpS: number, rounds: number, measured = (measure: () => Promise<DrainReading>) => measure()): Promise<DrainReading> {
  const warmUntil = performance.now() + warmUpS * 1000
  do await drainBatched(server, Math.min(2_000, jobs), workers)
  while (performance.now() < warmUntil)
  return measured(() => medianDrain(rounds, () => drainBatched(server, jobs, workers)))
}

/** Runs `drain` `rounds` times, one after another; reads the median drain. */
async function medianDrain(rounds: number, drain: () => Promise<Drain>): Promise<DrainReading> {
  const drains: Drain[] = []
  for (let i = 0; i < rounds; i++) drains.push(await drain())
  const rates = drains.map((d) => Math.round(d.jobsPerS).toLocaleString('en-US'))
  const each = rates.length > 1 ? `${rates.slice(0, -1).join(', ')} and ${rates.at(-1)} jobs/s` : `${rates[0]} jobs/s`
  const median = [...drains].sort((a, b) => a.jobsPerS - b.jobsPerS)[Math.floor(drains.length / 2)]!
  return { ...median, each }
}

/** The drains of a host without Redis, run between those of `pool drain (redis)`: what its ratio is read against. */
export const NORMAL_BESIDE_REDIS = 'pool drain (normal), alternated with the redis drains'

/**
 * The queues carried over Redis Streams (docs/redis.md): the pool drain with `--redis` on (the
 * outbox written with each enqueue and relayed after each commit), and 8 `leasehold worker
 * --redis` processes that reach the host through Redis alone. What turning Redis on keeps of
 * the drain is read from drains alternated with a host without Redis, two of each: the
 * machine's speed moves by more than Redis costs between drains minutes apart.
 */
async function measureOverRedis(counts: BatchedCounts, progress: (m: string) => void, rows: Row[], beside: Beside): Promise<void> {
  const redis = await startRedis()
  if (!redis) return progress('no redis-server here: the Redis rows are left out')
  const n = counts.drainJobs.toLocaleString('en-US')
  try {
    progress(`pool drain (redis): the default pool with --redis, ${n} no-op jobs submitted 1,000 a request, alternated with the same without Redis`)
    const pooled = await startServer(['--redis', redis.url], dataDirWithStampHandler())
    const plain = await startServer([], dataDirWithStampHandler())
    try {
      for (const server of [pooled, plain]) {
        await waitFor(() => workersReady(server, 2), 60_000)
        await drainBatched(server, counts.drainJobs) // warm, as each drain row's host is
      }
      // In the order with, without, without, with: a machine that speeds up or slows down
      // through the four weighs on both alike.
      const drains: { redis: Drain[]; normal: Drain[] } = { redis: [], normal: [] }
      drains.redis.push(await drainBatched(pooled, counts.drainJobs))
      drains.normal.push(await drainBatched(plain, counts.drainJobs))
      drains.normal.push(await drainBatched(plain, counts.drainJobs))
      drains.redis.push(await drainBatched(pooled, counts.drainJobs))
      const mean = (list: Drain[]) => list.reduce((sum, d) => sum + d.jobsPerS, 0) / list.length
      const each = (list: Drain[]) => list.map((d) => Math.round(d.jobsPerS).toLocaleString('en-US')).join(' and ')
      rows.push(
        { name: 'pool drain (redis)', value: mean(drains.redis), unit: 'jobs/s', note: `as pool drain (normal), each enqueue XADDed to Redis after its commit; two drains (${each(drains.redis)}), the last's ${drains.redis[1]!.cpu}` },
        { name: NORMAL_BESIDE_REDIS, value: mean(drains.normal), unit: 'jobs/s', note: `the same drains without Redis, between those with it (${each(drains.normal)}), the last's ${drains.normal[1]!.cpu}` },
      )
    } finally {
      await Promise.all([pooled.stop(), plain.stop()])
    }

    progress(`remote workers over redis: 8 leasehold worker --redis processes, ${n} no-op jobs`)
    await withEightWorkers(['--redis', redis.url], () => ['--redis', redis.url], 'bench-redis', async (server, workers) => {
      const drain = await warmDrain(server, counts.drainJobs, workers, counts.warmUpS, counts.drainRounds, (measure) => beside('remote workers over redis, 8 processes', ['process'], measure))
      rows.push({
        name: 'remote workers over redis, 8 processes',
        value: drain.jobsPerS,
        unit: 'jobs/s',
        note: `${n} noop jobs submitted 1,000 a request, 8 × ${DEFAULT_WORKER_CONCURRENCY} jobs at once, the worker exchange carried over Redis Streams (no connection to the host), after ${counts.warmUpS} s of such drains, the median of ${drain.each}; ${drain.cpu}`,
      })
    })
  } finally {
    await redis.stop()
  }
}
