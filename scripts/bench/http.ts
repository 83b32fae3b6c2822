/**
 * The HTTP and worker figures of `npm run bench`: a real `leasehold serve` in its own process on
 * loopback, clients in this one on keep-alive connections (fetch). Bounded in count and time.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { fileURLToPath } from 'node:url'
import { percentile, type Row } from './lib'

const BIN = fileURLToPath(new URL('../../bin/leasehold.js', import.meta.url))

export interface HttpCounts {
  /** Jobs per lifecycle run (one run per dialect and worker count). */
  lifecycleJobs: number
  pickups: number
  poolJobs: number
}

interface Server {
  url: string
  token: string
  child: ChildProcess
  stop(): Promise<void>
}

async function startServer(args: string[]): Promise<Server> {
  const dataDir = mkdtempSync(join(tmpdir(), 'leasehold-bench-http-'))
  const child = spawn(process.execPath, [BIN, 'serve', '--data-dir', dataDir, '--port', '0', '--busy', '0', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const url = await new Promise<string>((resolve, reject) => {
    let out = ''
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString()
      const match = /listening on (http:\/\/\S+)/.exec(out)
      if (match) resolve(match[1]!)
    })
    child.once('exit', (code) => reject(new Error(`serve exited with ${code}`)))
  })
  const token = readFileSync(join(dataDir, 'token'), 'utf8').trim()
  return {
    url,
    token,
    child,
    stop: async () => {
      const exited = new Promise((r) => child.once('exit', r))
      child.kill('SIGTERM')
      await exited
      rmSync(dataDir, { recursive: true, force: true })
    },
  }
}

/** Per-endpoint latencies, in milliseconds. */
class Latencies {
  readonly byEndpoint = new Map<string, number[]>()

  add(endpoint: string, ms: number): void {
    const list = this.byEndpoint.get(endpoint) ?? []
    list.push(ms)
    this.byEndpoint.set(endpoint, list)
  }
}

function client(server: Server, latencies: Latencies) {
  return async (endpoint: string, path: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> => {
    const started = performance.now()
    const res = await fetch(server.url + path, {
      method: 'POST',
      headers: { authorization: `Bearer ${server.token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    })
    const text = await res.text()
    latencies.add(endpoint, performance.now() - started)
    return { status: res.status, json: text ? (JSON.parse(text) as Record<string, unknown>) : {} }
  }
}

async function submitMany(post: ReturnType<typeof client>, count: number, jobType: string, payload: unknown = {}): Promise<void> {
  let next = 0
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < count) {
        next += 1
        const res = await post('POST /api/scheduler/jobs/submit', '/api/scheduler/jobs/submit', { job_type: jobType, cost_units: 1, payload })
        if (res.status !== 201) throw new Error(`submit answered ${res.status}`)
      }
    }),
  )
}

/** `workers` clients drain the queue through dialect 001 or 003; jobs/s over the drain. */
async function drain(post: ReturnType<typeof client>, dialect: '001' | '003', workers: number): Promise<number> {
  let done = 0
  const started = performance.now()
  await Promise.all(
    Array.from({ length: workers }, async (_, i) => {
      const worker_id = `bench-${dialect}-${i}`
      for (;;) {
        if (dialect === '001') {
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

/** Submit → a waiting dialect-003 claim returns, one at a time. */
async function pickups(post: ReturnType<typeof client>, count: number): Promise<number[]> {
  const samples: number[] = []
  for (let i = 0; i < count; i++) {
    const waiting = post('POST /internal/worker/claim (long-poll)', '/internal/worker/claim', { worker_id: 'bench-pickup', streams: ['default'], max_wait_ms: 10_000 })
    await new Promise((r) => setTimeout(r, 5)) // let the claim reach the server and wait
    const started = performance.now()
    await post('POST /api/scheduler/jobs/submit', '/api/scheduler/jobs/submit', { job_type: 'noop', cost_units: 1 })
    const claim = await waiting
    samples.push(performance.now() - started)
    const ref = { worker_id: 'bench-pickup', job_id: claim.json.job_id, lease_token: claim.json.lease_token, attempt_id: claim.json.attempt_id }
    await post('POST /internal/worker/complete', '/internal/worker/complete', { ...ref, result: {} })
  }
  return samples
}

const p = (samples: number[], q: number) => percentile(samples, q)

export async function measureHttp(counts: HttpCounts, progress: (m: string) => void): Promise<{ rows: Row[]; pickupP50: number; pickupP99: number; d003at8: number }> {
  const rows: Row[] = []
  const server = await startServer(['--workers', '0', '--total-units', '100000'])
  const latencies = new Latencies()
  const post = client(server, latencies)
  let d003at8 = 0
  try {
    for (const dialect of ['001', '003'] as const) {
      for (const workers of [1, 8, 32]) {
        progress(`HTTP dialect ${dialect}, ${workers} worker(s), ${counts.lifecycleJobs} jobs`)
        await submitMany(post, counts.lifecycleJobs, 'noop')
        const jobsPerS = await drain(post, dialect, workers)
        if (dialect === '003' && workers === 8) d003at8 = jobsPerS
        rows.push({
          name: `HTTP lifecycle, dialect ${dialect}, ${workers} worker${workers > 1 ? 's' : ''}`,
          value: jobsPerS,
          unit: 'jobs/s',
          note: dialect === '001' ? 'request → heartbeat → complete' : 'claim → heartbeat → complete',
        })
      }
    }
    progress(`pickup latency, ${counts.pickups} submits to a waiting claim`)
    const pickup = await pickups(post, counts.pickups)
    rows.push(
      { name: 'pickup latency p50 (submit → waiting claim)', value: p(pickup, 50), unit: 'ms', note: `${counts.pickups} pickups over loopback` },
      { name: 'pickup latency p99', value: p(pickup, 99), unit: 'ms' },
    )
    for (const [endpoint, samples] of latencies.byEndpoint) {
      if (endpoint.includes('long-poll')) continue
      rows.push({ name: `${endpoint} p50 / p99`, value: p(samples, 50), unit: 'ms', note: `p99 ${p(samples, 99).toFixed(2)} ms over ${samples.length} requests` })
    }
    return { rows, pickupP50: p(pickup, 50), pickupP99: p(pickup, 99), d003at8 }
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
  const res = await fetch(`${server.url}/api/scheduler/stats/snapshot`, { headers: { authorization: `Bearer ${server.token}` } })
  return ((await res.json()) as { jobs: { done_last_24h: number } }).jobs.done_last_24h
}

async function workersReady(server: Server, count: number): Promise<boolean> {
  const res = await fetch(`${server.url}/api/workers`, { headers: { authorization: `Bearer ${server.token}` } })
  const { workers } = (await res.json()) as { workers: { state: string }[] }
  return workers.filter((w) => w.state === 'ready' || w.state === 'active').length >= count
}

/** No-op jobs (`sleep {ms: 0}`) submitted in a burst, until all are DONE; jobs/s over that. */
async function throughput(server: Server, jobs: number): Promise<number> {
  const post = client(server, new Latencies())
  const started = performance.now()
  await submitMany(post, jobs, 'sleep', { ms: 0 })
  await waitFor(async () => (await doneCount(server)) >= jobs, 120_000)
  return jobs / ((performance.now() - started) / 1000)
}

export async function measureWorkers(counts: HttpCounts, progress: (m: string) => void): Promise<Row[]> {
  const rows: Row[] = []
  progress(`embedded pool (2 local workers), ${counts.poolJobs} no-op jobs`)
  const pooled = await startServer(['--workers', '2'])
  try {
    await waitFor(() => workersReady(pooled, 2), 60_000)
    rows.push({ name: 'embedded pool, 2 local workers', value: await throughput(pooled, counts.poolJobs), unit: 'jobs/s', note: `${counts.poolJobs} sleep{ms:0} jobs, submit → DONE` })
    progress(`local pickup latency, ${Math.min(100, counts.pickups)} jobs`)
    // Pickup = the host's own timestamps: JOB_SUBMITTED → LEASE_GRANTED (millisecond resolution).
    const samples: number[] = []
    const post = client(pooled, new Latencies())
    const headers = { authorization: `Bearer ${pooled.token}` }
    for (let i = 0; i < Math.min(100, counts.pickups); i++) {
      const before = await doneCount(pooled)
      const submitted = await post('submit', '/api/scheduler/jobs/submit', { job_type: 'sleep', cost_units: 1, payload: { ms: 0 } })
      const jobId = (submitted.json.job as { job_id: string }).job_id
      await waitFor(async () => (await doneCount(pooled)) > before, 10_000)
      const { events } = (await (await fetch(`${pooled.url}/api/scheduler/jobs/${jobId}/events`, { headers })).json()) as { events: { type: string; ts: string }[] }
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
  const external = await startServer(['--workers', '0'])
  const workers = Array.from({ length: 8 }, (_, i) =>
    spawn(process.execPath, [BIN, 'worker', '--url', external.url, '--token', external.token, '--worker-id', `bench-ext-${i}`], { stdio: 'ignore' }),
  )
  try {
    await waitFor(async () => {
      // External workers appear with their first claim.
      return workersReady(external, 8)
    }, 60_000)
    rows.push({ name: 'external workers (8 processes)', value: await throughput(external, counts.poolJobs), unit: 'jobs/s', note: `${counts.poolJobs} sleep{ms:0} jobs, submit → DONE` })
  } finally {
    for (const w of workers) w.kill('SIGTERM')
    await Promise.all(workers.map((w) => new Promise((r) => (w.exitCode === null ? w.once('exit', r) : r(null)))))
    await external.stop()
  }
  return rows
}
