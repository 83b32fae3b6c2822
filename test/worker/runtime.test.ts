/**
 * The worker runtime against a scripted transport (real handler threads, no host): what it does
 * with answers that arrive late.
 */
import { execFileSync, spawn } from 'node:child_process'
import { constants, copyFileSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { type AddressInfo, createServer as createNetServer } from 'node:net'
import { join } from 'node:path'
import { afterEach, describe, expect, test, vi } from 'vitest'
import { type RuntimeOptions, WorkerRuntime } from '../../src-worker/runtime'
import { CLAIM_PACE_MS, CLAIM_STREAM_MS, ClaimPace, claimWaitedMs, nextExchange, type SendState } from '../../src-worker/exchange-plan'
import type { AttemptFailure } from '../../src-shared/worker-exchange'
import { type Claim, type ExchangeAnswer, type ExchangeRequest, type FileAcquireAnswer, type GateRequest, type HeartbeatAnswer, HostError, type HostRoute, LeaseLostError, type WorkerTransport } from '../../src-worker/transport'
import { tempDir } from '../helpers/host'
import { fillDisk, mountSmallDisk } from '../helpers/small-disk'
import { ThreadLinks } from '../../src-main/pool/thread-links'
import { LINK_PATH_ENV, LINK_TOKEN_ENV } from '../../src-shared/thread-link'
import { aClaimOf, SPIN, until, writeHandlers } from './support'

/** A heartbeat's answer: the lease goes on, not canceled. */
const beating = (job_id: string): HeartbeatAnswer => ({ job_id, ok: true, lease_expires_at: new Date(0).toISOString(), cancel_requested: false })

function aClaim(id: string, ms: number): Claim {
  return aClaimOf(id, { job_type: 'sleep', payload: { ms } })
}

/**
 * Hands out the given claims as asked (up to max_jobs each time), then lets a claim wait until
 * the worker stops; heartbeats are answered as `beat` says; records every request.
 */
class ScriptedTransport implements WorkerTransport {
  readonly completed: { job_id: string; result: unknown }[] = []
  readonly failed: { job_id: string; error: AttemptFailure }[] = []
  readonly requests: ExchangeRequest[] = []
  /** The job ids of each answer that handed out jobs. */
  readonly answered: string[][] = []
  /** How long an exchange that carries completions or failures takes to be answered. */
  reportRoundTripMs = 0
  /** When each request arrived (performance.now()), in the order of {@link requests}. */
  readonly arrivedAt: number[] = []
  /** Jobs an operator took a file from (force_release): their completions are refused `file_lease_lost`. */
  readonly fileTaken = new Set<string>()
  /** Jobs whose completions and failures the host refuses in their slots as invalid (400 invalid_request: a report that fails its schema). */
  readonly invalidReports = new Set<string>()
  /** Jobs that are there for a claim as it arrives, besides those offered (a host that jobs stream into). */
  arriving: (() => Claim[]) | null = null
  /** Set, every exchange from then on is refused so (a token revoked), and counted in {@link refusedExchanges}. */
  refusal: HostError | null = null
  refusedExchanges = 0
  constructor(
    private readonly claims: Claim[],
    /** How a heartbeat is answered, by its job and the lease it names. */
    private readonly beat: (jobId: string, leaseToken: string) => Promise<HeartbeatAnswer> = async (job_id) => beating(job_id),
    private readonly files: (file: string) => FileAcquireAnswer = () => {
      throw new Error('not scripted')
    },
  ) {}
  /** Completions and failures a driving thread reported itself (their job ids), besides being in `completed` and `failed`. */
  readonly viaThread: string[] = []
  /** The exchanges a driving thread sent (the rest came from the runtime). */
  readonly threadRequests: ExchangeRequest[] = []

  exchange(request: ExchangeRequest, signal?: AbortSignal): Promise<ExchangeAnswer> {
    return this.answerOf(request, signal)
  }

  /** An exchange from the driving thread: recorded as such, and answered as the runtime's are. */
  private fromThread(params: ExchangeRequest, gone: AbortSignal): Promise<ExchangeAnswer> {
    this.threadRequests.push(params)
    for (const r of [...(params.complete ?? []), ...(params.fail ?? [])]) this.viaThread.push(r.job_id)
    return this.answerOf(params, gone)
  }

  /** As the host does for a local worker's link (src-shared/thread-link.ts). */
  link(): { links: ThreadLinks; link: HostRoute } {
    const links = new ThreadLinks(
      () => {},
      (_worker, raw, gone, reply) => {
        const { id, params } = raw as { id: number; params: ExchangeRequest }
        void this.fromThread(params, gone).then(
          (result) => reply({ type: 'response', id, result }),
          (error: HostError) => reply({ type: 'response', id, error: { status: error.status, code: error.code, detail: error.message } }),
        )
      },
    )
    const env = links.envFor('w')
    return { links, link: { via: 'link', path: env[LINK_PATH_ENV]!, token: env[LINK_TOKEN_ENV]! } }
  }

  /** As the host's worker API does for `leasehold worker`'s driving thread: POST /internal/worker/batch. */
  async http(): Promise<{ close(): void; route: HostRoute }> {
    const server = createServer((req, res) => {
      let body = ''
      req.setEncoding('utf8')
      req.on('data', (chunk: string) => (body += chunk))
      req.on('end', () => {
        const gone = new AbortController()
        res.on('close', () => gone.abort())
        void this.fromThread(JSON.parse(body) as ExchangeRequest, gone.signal).then((answer) => {
          const text = JSON.stringify(answer)
          res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text)
        })
      })
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const close = () => {
      server.closeAllConnections()
      server.close()
    }
    return { close, route: { via: 'http', url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, token: 'test' } }
  }

  /** The driving thread's way to the host, of either kind, and how to close it. */
  async driveOver(kind: 'link' | 'http'): Promise<{ drive: HostRoute; close(): void }> {
    if (kind === 'http') {
      const { route, close } = await this.http()
      return { drive: route, close }
    }
    const { links, link } = this.link()
    return { drive: link, close: () => links.close() }
  }

  private async answerOf(request: ExchangeRequest, signal?: AbortSignal): Promise<ExchangeAnswer> {
    if (this.refusal) {
      this.refusedExchanges++
      throw this.refusal
    }
    this.requests.push(request)
    this.arrivedAt.push(performance.now())
    if (request.claim && this.arriving) this.claims.push(...this.arriving())
    for (const c of request.complete ?? []) this.completed.push({ job_id: c.job_id, result: c.result })
    for (const f of request.fail ?? []) this.failed.push({ job_id: f.job_id, error: f.error })
    if (this.reportRoundTripMs > 0 && (request.complete?.length || request.fail?.length)) await new Promise((r) => setTimeout(r, this.reportRoundTripMs))
    const heartbeats = await Promise.all((request.heartbeat ?? []).map((h) => this.beat(h.job_id, h.lease_token)))
    const answer: ExchangeAnswer = {
      heartbeats,
      completed: (request.complete ?? []).map((c) =>
        this.invalidReports.has(c.job_id)
          ? { job_id: c.job_id, ok: false as const, ack: false, code: 'invalid_request', detail: `complete.0.result.s: must be well-formed Unicode` }
          : this.fileTaken.has(c.job_id)
            ? { job_id: c.job_id, ok: false as const, ack: false, code: 'file_lease_lost', detail: 'An operator took a file from this lease; the job cannot succeed under it' }
            : { job_id: c.job_id, ok: true as const, ack: true },
      ),
      failed: (request.fail ?? []).map((f) =>
        this.invalidReports.has(f.job_id)
          ? { job_id: f.job_id, ok: false as const, ack: false, code: 'invalid_request', detail: 'fail.0.error.message: Too big' }
          : { job_id: f.job_id, ok: true as const, ack: true, requeued: false, dlq: true },
      ),
      jobs: this.claims.splice(0, request.claim?.max_jobs ?? 0),
      claim_waited_ms: 0,
    }
    if (answer.jobs.length > 0) this.answered.push(answer.jobs.map((j) => j.job_id))
    // As the host does, an exchange with heartbeats or a refused report is answered at once, though its claim would wait.
    const refused = [...answer.completed, ...answer.failed].some((c) => !c.ok)
    if (answer.jobs.length > 0 || refused || heartbeats.length > 0 || !request.claim || request.claim.max_wait_ms === 0 || signal?.aborted) return answer
    // A waiting claim: answered with the next offer, or when the worker stops.
    const since = performance.now()
    return new Promise((resolve) => {
      const answerNow = () => {
        if (!this.waiting.delete(answerNow)) return
        answer.jobs = this.claims.splice(0, request.claim!.max_jobs)
        answer.claim_waited_ms = performance.now() - since
        if (answer.jobs.length > 0) this.answered.push(answer.jobs.map((j) => j.job_id))
        resolve(answer)
      }
      this.waiting.add(answerNow)
      signal?.addEventListener('abort', answerNow, { once: true })
    })
  }
  /** The long-polls waiting (a driving thread's and the runtime's may wait at once), oldest first. */
  private readonly waiting = new Set<() => void>()
  /** A long-poll waits for an offer. */
  get polled(): boolean {
    return this.waiting.size > 0
  }
  /** More claims: the waiting claims get them at once, the oldest first. */
  offer(claims: Claim[]): void {
    this.claims.push(...claims)
    for (const answerNow of [...this.waiting]) answerNow()
  }
  /** Every acquire the gate sent. */
  readonly gateRequests: GateRequest[] = []
  async acquireFile(request: GateRequest): Promise<FileAcquireAnswer> {
    this.gateRequests.push(request)
    return this.files(request.file)
  }
  /** How a wait for the one retry is answered: unscripted, it ends only when its signal aborts. */
  waitRetry: (signal: AbortSignal) => Promise<boolean> = (signal) => new Promise((resolve) => signal.addEventListener('abort', () => resolve(false), { once: true }))
  waitFileRetry(_request: unknown, signal: AbortSignal): Promise<boolean> {
    return this.waitRetry(signal)
  }
  async heartbeatFile(): Promise<void> {}
  async report(): Promise<void> {}
  close(): void {}
}

let runtime: WorkerRuntime | null = null
const dirs: string[] = []
afterEach(async () => {
  await runtime?.stop(0)
  runtime = null
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

function aTempDir(): string {
  const dir = tempDir('leasehold-runtime-test-')
  dirs.push(dir)
  return dir
}

test("a heartbeat answer that arrives after its job ended does not stop the next job on the same thread", async () => {
  // Job 1's first heartbeat is answered late with 409 (its lease was released by the completion
  // that overtook it); by then job 1 is done and job 2 runs on the same handler thread.
  const transport = new ScriptedTransport([aClaim('job-1', 100), aClaim('job-2', 600)], (job_id) =>
    job_id === 'job-1'
      ? new Promise((resolve) => setTimeout(() => resolve({ job_id, ok: false, code: 'lease_not_active', detail: 'Lease job-1-l was released (SUCCEEDED)' }), 350))
      : Promise.resolve(beating(job_id)),
  )
  const lines: string[] = []
  runtime = new WorkerRuntime({ transport, workerId: 'w', streams: ['default'], concurrency: 1, handlers: { handlersDir: null, execAllow: [] }, log: (l) => lines.push(l) })
  await runtime.start()
  runtime.begin()
  await until(() => transport.completed.length + transport.failed.length >= 2, 5000, 'both jobs reported')
  expect(transport.failed).toEqual([])
  expect(transport.completed.map((c) => c.job_id)).toEqual(['job-1', 'job-2'])
  expect(lines).toEqual([])
})

test('a worker claims only the job types its handlers run: each claim names them', async () => {
  const transport = new ScriptedTransport([aJobOf('one', 'test.where', {})])
  await started(transport, { modules: { 'where.mjs': WHERE } })
  await until(() => transport.completed.length === 1, 5000, 'the job ran')
  const claims = transport.requests.filter((r) => r.claim).map((r) => r.claim!)
  expect(claims.length).toBeGreaterThan(0)
  for (const claim of claims) expect([...claim.job_types!].sort()).toEqual(['file.write', 'noop', 'sleep', 'test.where']) // no exec: its allow-list is empty
})

test('a worker with free slots claims them in one request, and reports finished jobs together with its next claim', async () => {
  const transport = new ScriptedTransport(Array.from({ length: 6 }, (_, i) => aClaim(`job-${i}`, 50)))
  // Reports that finish while one is on its way wait for it and go together with the next. The
  // round trip is long next to the jobs, so a slow machine that ends them apart still batches.
  transport.reportRoundTripMs = 200
  runtime = new WorkerRuntime({ transport, workerId: 'w', streams: ['default'], concurrency: 4, threads: 2, handlers: { handlersDir: null, execAllow: [] }, log: () => {} })
  await runtime.start()
  runtime.begin()
  await until(() => transport.completed.length >= 6, 5000, 'every job reported')
  expect(transport.requests[0]!.claim).toMatchObject({ max_jobs: 4 })
  expect(transport.completed.map((c) => c.job_id).sort()).toEqual(['job-0', 'job-1', 'job-2', 'job-3', 'job-4', 'job-5'])
  // Fewer requests than jobs: completions travel together, and with the claim for the slots they free.
  const reporting = transport.requests.filter((r) => r.complete?.length)
  expect(reporting.length).toBeLessThan(6)
  expect(reporting.some((r) => r.claim && r.claim.max_wait_ms === 0)).toBe(true)
  expect(transport.failed).toEqual([])
})

test('a stopping worker claims nothing more, lets its jobs finish and reports them before it ends', async () => {
  const transport = new ScriptedTransport([aClaim('job-1', 300), aClaim('job-2', 300)])
  runtime = new WorkerRuntime({ transport, workerId: 'w', streams: ['default'], concurrency: 2, handlers: { handlersDir: null, execAllow: [] }, log: () => {} })
  await runtime.start()
  runtime.begin()
  const beating = (id: string) => transport.requests.some((r) => r.heartbeat?.some((h) => h.job_id === id))
  await until(() => beating('job-1') && beating('job-2'), 5000, 'both jobs running (each has beaten)')
  const stopping = runtime.stop(5_000)
  await stopping
  runtime = null
  expect(transport.completed.map((c) => c.job_id).sort()).toEqual(['job-1', 'job-2'])
  const afterStop = transport.requests.slice(1)
  expect(afterStop.every((r) => r.claim === undefined)).toBe(true)
})

test('a job’s progress reaches the host once: with a heartbeat if one went out, else with its completion, never after it', async () => {
  const noop = { ...aClaim('job-1', 0), job_type: 'noop', payload: {} }
  const transport = new ScriptedTransport([noop])
  runtime = new WorkerRuntime({ transport, workerId: 'w', streams: ['default'], concurrency: 1, handlers: { handlersDir: null, execAllow: [] }, log: () => {} })
  await runtime.start()
  runtime.begin()
  await until(() => transport.completed.length >= 1, 5000, 'the job reported')
  await afterALaterJob(transport)
  const ofJob1 = <T extends { job_id: string }>(items: T[] | undefined): T[] => (items ?? []).filter((item) => item.job_id === 'job-1')
  const sent = transport.requests.flatMap((r) => [...ofJob1(r.heartbeat).map((h) => ({ beat: h.progress })), ...ofJob1(r.complete).map((c) => ({ done: c.progress ?? null }))])
  // Usually the handler's progress and its end arrive in one turn: one request, the progress in the completion.
  expect([[{ done: 0.5 }], [{ beat: 0.5 }, { done: null }]]).toContainEqual(sent)
})

test('a stopping worker whose host no longer answers still stops: its last reports are dropped, and their leases expire on the host', async () => {
  class GoneHost extends ScriptedTransport {
    override async exchange(request: ExchangeRequest, signal?: AbortSignal): Promise<ExchangeAnswer> {
      if (request.complete?.length || request.fail?.length) throw new Error('connect ECONNREFUSED')
      return super.exchange(request, signal)
    }
  }
  const transport = new GoneHost([aClaim('job-1', 200)])
  const lines: string[] = []
  runtime = new WorkerRuntime({ transport, workerId: 'w', streams: ['default'], concurrency: 1, handlers: { handlersDir: null, execAllow: [] }, log: (l) => lines.push(l) })
  await runtime.start()
  runtime.begin()
  await until(() => transport.requests.length >= 1, 5000, 'the claim')
  await runtime.stop(5_000)
  runtime = null
  expect(lines.some((l) => l.includes('1 report(s) dropped on the way out'))).toBe(true)
})

test('heartbeats the host refused as too large go again at once without their notes; the job runs on', async () => {
  class SmallBodies extends ScriptedTransport {
    refused = 0
    override async exchange(request: ExchangeRequest, signal?: AbortSignal): Promise<ExchangeAnswer> {
      if (request.heartbeat?.some((h) => h.note)) {
        this.refused++
        throw new HostError(413, 'payload_too_large', 'The body is larger than 1048576 bytes')
      }
      return super.exchange(request, signal)
    }
  }
  const NOTED = `export default { type: 'test.noted', run: async ({ progress }) => { progress(0.5, 'n'.repeat(10_000)); await new Promise((r) => setTimeout(r, 300)); return 'done' } }\n`
  const transport = new SmallBodies([aJobOf('noted', 'test.noted', {})])
  const lines = await started(transport, { modules: { 'noted.mjs': NOTED } })
  await until(() => transport.completed.some((c) => c.job_id === 'noted'), 5000, 'the job reported')
  expect(transport.refused).toBeGreaterThan(0)
  const beats = transport.requests.flatMap((r) => r.heartbeat ?? []).filter((h) => h.job_id === 'noted')
  expect(beats.length).toBeGreaterThan(0)
  expect(beats.every((h) => h.note === undefined && h.progress === 0.5)).toBe(true)
  expect(lines.filter((l) => l.includes('retrying'))).toEqual([])
})

test('a completion refused because an operator took a file from its lease (file_lease_lost) is reported again as a retryable failure naming why', async () => {
  const transport = new ScriptedTransport([aJobOf('taken', 'noop', {})])
  transport.fileTaken.add('taken')
  await started(transport)
  await until(() => transport.failed.some((f) => f.job_id === 'taken'), 5000, 'the failure reported')
  expect(transport.failed).toEqual([{ job_id: 'taken', error: expect.objectContaining({ code: 'file_lease_lost', retryable: true }) }])
  await afterALaterJob(transport)
  expect(transport.failed).toHaveLength(1)
})

test('a completion the host refuses as invalid in its slot is not sent again: its attempt fails report_refused, not retryable; a failure refused so is dropped', async () => {
  const transport = new ScriptedTransport([aJobOf('bad', 'noop', {})])
  transport.invalidReports.add('bad')
  const lines = await started(transport)
  await until(() => transport.failed.some((f) => f.job_id === 'bad'), 5000, 'the failure reported')
  await afterALaterJob(transport)
  expect(transport.completed.filter((c) => c.job_id === 'bad')).toHaveLength(1)
  expect(transport.failed).toEqual([{ job_id: 'bad', error: { code: 'report_refused', message: expect.stringContaining('complete.0.result.s: must be well-formed Unicode'), retryable: false } }])
  expect(lines.filter((l) => l.includes('as invalid'))).toEqual([
    'leasehold worker: the host refuses the completion of bad as invalid (complete.0.result.s: must be well-formed Unicode); its attempt fails as report_refused',
    'leasehold worker: the host refuses the failure of bad as invalid (fail.0.error.message: Too big); dropped, its lease expires on the host',
  ])
})

test('a heartbeat the host refuses as invalid in its slot leaves its job running: it completes, not stopped as a lost lease', async () => {
  const transport = new ScriptedTransport([aJobOf('noisy', 'sleep', { ms: 400 })], async (job_id) => ({ job_id, ok: false, code: 'invalid_request', detail: 'heartbeat.0.note: Too big' }))
  const lines = await started(transport)
  await until(() => transport.completed.some((c) => c.job_id === 'noisy'), 5000, 'the job completed')
  expect(transport.requests.some((r) => r.heartbeat?.some((h) => h.job_id === 'noisy'))).toBe(true)
  expect(lines).toContain('leasehold worker: the host refuses the heartbeat of noisy as invalid (heartbeat.0.note: Too big)')
  expect(transport.failed).toEqual([])
})

/** A claim of `type` with `payload` (heartbeats every ~50 ms unless `more` says otherwise). */
function aJobOf(id: string, type: string, payload: unknown, more: Partial<Claim> = {}): Claim {
  return { ...aClaim(id, 0), job_type: type, payload, ...more }
}

/** A transport offering `jobs` whose file gate grants every file, and the files it was asked for. */
function grantingEvery(jobs: Claim[]): { transport: ScriptedTransport; asked: string[] } {
  const asked: string[] = []
  const transport = new ScriptedTransport(jobs, undefined, (file) => {
    asked.push(file)
    return { granted: true }
  })
  return { transport, asked }
}

/**
 * Offers one more no-op job and waits until its completion is in: each exchange carries every
 * report gathered before it, so whatever the runtime still held of the earlier jobs has gone out
 * by then. The check that nothing more comes, without a wall-clock wait.
 */
async function afterALaterJob(transport: ScriptedTransport): Promise<void> {
  transport.offer([aJobOf('later', 'noop', {})])
  await until(() => transport.completed.some((c) => c.job_id === 'later'), 5000, 'a later job reported')
}

/** A runtime on `transport` with the built-in handlers and user handler `modules` (file name → source). */
async function started(transport: WorkerTransport, options: Partial<Omit<RuntimeOptions, 'handlers'>> & { modules?: Record<string, string>; loadTimeoutMs?: number } = {}) {
  const lines: string[] = []
  const { modules, loadTimeoutMs, ...rest } = options
  runtime = new WorkerRuntime({
    transport,
    workerId: 'w',
    streams: ['default'],
    concurrency: 1,
    log: (l) => lines.push(l),
    // A module that did not load, as a line of its own: `problem <file>: <error>`.
    onProblem: (problem) => lines.push(`problem ${problem.file}: ${problem.error}`),
    ...rest,
    handlers: { handlersDir: modules ? writeHandlers(aTempDir(), modules) : null, execAllow: [], ...(loadTimeoutMs ? { loadTimeoutMs } : {}) },
  })
  const { problems } = await runtime.start()
  for (const problem of problems) lines.push(`problem ${problem.file}: ${problem.error}`)
  runtime.begin()
  return lines
}

/** `test.where`: answers with the id of the thread it ran on. */
const WHERE = `import { threadId } from 'node:worker_threads'
export default { type: 'test.where', run: () => ({ thread: threadId }) }
`

/** `test.write {path}`: writes the file through the gate (nothing, with no path). */
const WRITE = `export default {
  type: 'test.write',
  async run({ payload, files }) {
    if (!payload.path) return null
    await files.writeFile(payload.path, 'written')
    return { wrote: payload.path }
  },
}
`

test('a no-op job’s progress crosses from its thread with its end: the completion carries it, and no heartbeat goes', async () => {
  const transport = new ScriptedTransport([aJobOf('job-1', 'noop', {}, { heartbeat_interval_seconds: 30 })])
  await started(transport)
  await until(() => transport.completed.length >= 1, 5000, 'the job reported')
  await afterALaterJob(transport)
  expect(transport.requests.flatMap((r) => r.heartbeat ?? []).filter((h) => h.job_id === 'job-1')).toEqual([])
  expect(transport.requests.flatMap((r) => r.complete ?? []).filter((c) => c.job_id === 'job-1')).toEqual([{ job_id: 'job-1', attempt_id: 'job-1-a', lease_token: 'job-1-t', result: null, progress: 0.5, note: null }])
})

test('jobs of a type not seen yet spread over the threads; a batch of a type known to be short runs in one thread', async () => {
  const batch = (from: number) => Array.from({ length: 8 }, (_, i) => aJobOf(`job-${from + i}`, 'test.where', {}))
  // Every known type counts as short here, so the rule, not the machine's speed, decides.
  const transport = new ScriptedTransport(batch(0))
  await started(transport, { concurrency: 8, threads: 4, shortRunMs: Number.POSITIVE_INFINITY, modules: { 'where.mjs': WHERE } })
  await until(() => transport.completed.length >= 8, 5000, 'the first batch reported')
  const threadsOf = (ids: string[]) => new Set(transport.completed.filter((c) => ids.includes(c.job_id)).map((c) => (c.result as { thread: number }).thread))
  expect(threadsOf(batch(0).map((c) => c.job_id)).size).toBe(4)

  // Now known: each answer's jobs of the next batch go to one thread.
  transport.offer(batch(8))
  await until(() => transport.completed.length >= 16, 5000, 'the second batch reported')
  const answers = transport.answered.filter((jobs) => jobs.some((id) => Number(id.slice(4)) >= 8))
  expect(answers.some((jobs) => jobs.length > 1)).toBe(true)
  for (const jobs of answers) expect(threadsOf(jobs).size, jobs.join()).toBe(1)
  expect(transport.failed).toEqual([])
})

test('a handler that blocks its thread delays neither another thread’s messages nor the heartbeats', async () => {
  const transport = new ScriptedTransport([aJobOf('spin', 'test.spin', { ms: 1500 }), aJobOf('sleep', 'sleep', { ms: 300 })])
  await started(transport, { concurrency: 2, threads: 2, modules: { 'spin.mjs': SPIN } })
  await until(() => transport.completed.length >= 2, 10_000, 'both jobs reported')
  const reported = (id: string) => transport.requests.findIndex((r) => r.complete?.some((c) => c.job_id === id))
  // The sleeping job's progress and end came back while the other thread was still blocked…
  expect(reported('sleep')).toBeLessThan(reported('spin'))
  // …and the blocked job kept heartbeating meanwhile (every ~50 ms here, from the runtime's thread).
  const beatsWhileBlocked = transport.requests.slice(0, reported('spin')).filter((r) => r.heartbeat?.some((h) => h.job_id === 'spin'))
  expect(beatsWhileBlocked.length).toBeGreaterThan(1)
  expect(transport.failed).toEqual([])
})

/** `test.wait {ms}`: waits `ms` (a short type while `ms` is 0). */
const WAIT = `export default { type: 'test.wait', run: ({ payload }) => new Promise((resolve) => setTimeout(() => resolve({ waited: payload.ms }), payload.ms)) }
`

/** `test.exits {exit}`: ends its thread with process.exit(3) when `exit` is set. */
const EXITS = `export default { type: 'test.exits', run({ payload }) { if (payload.exit) process.exit(3); return null } }
`

/** Every type seen counts as short in the tests of a driving thread, so the rule, not the machine's speed, decides. */
const KNOWN_IS_SHORT = 60_000

/**
 * Jobs of `type` until the driving thread knows it as short: the first goes to the runtime, and
 * once the thread has heard how long it took, the next run where they were claimed.
 */
async function teachShort(transport: ScriptedTransport, type: string, payload: unknown, more: Partial<Claim> = {}, tag = type): Promise<void> {
  for (let i = 0; i < 10; i++) {
    const id = `${tag}-${i}`
    transport.offer([aJobOf(id, type, payload, more)])
    await until(() => transport.completed.some((c) => c.job_id === id), 5000, `${id} reported`)
    if (transport.viaThread.includes(id)) return
  }
  throw new Error(`the driving thread never ran a ${type} job itself`)
}

describe.each(['link', 'http'] as const)('a driving thread over its %s', (kind) => {
  test('the first thread claims, runs and reports its short jobs itself; a job of a type not known to be short goes to the runtime, which runs it on another thread', async () => {
    const transport = new ScriptedTransport([])
    const { drive, close } = await transport.driveOver(kind)
    try {
      await started(transport, { concurrency: 8, threads: 2, shortRunMs: KNOWN_IS_SHORT, drive, modules: { 'where.mjs': WHERE } })
      transport.offer([aJobOf('first', 'test.where', {}, { heartbeat_interval_seconds: 30 })])
      await until(() => transport.completed.length === 1, 5000, 'the first job reported')
      const ids = Array.from({ length: 8 }, (_, i) => `job-${i}`)
      transport.offer(ids.map((id) => aJobOf(id, 'test.where', {}, { heartbeat_interval_seconds: 30 })))
      await until(() => transport.completed.length === 9, 5000, 'every job reported')
      // The first, of a type not seen yet, ran on the other thread and was reported by the runtime;
      // the rest ran on the driving thread and were reported by it, each once.
      const threadOf = (id: string) => (transport.completed.find((c) => c.job_id === id)!.result as { thread: number }).thread
      expect(new Set(ids.map(threadOf)).size).toBe(1)
      expect(threadOf('first')).not.toBe(threadOf('job-0'))
      expect(transport.viaThread.sort()).toEqual(ids)
      expect(transport.completed.map((c) => c.job_id).sort()).toEqual(['first', ...ids])
      // Every claim came from the thread: the runtime's own exchanges only report.
      const runtimes = transport.requests.filter((r) => !transport.threadRequests.includes(r))
      expect(runtimes.map((r) => r.complete?.map((c) => c.job_id))).toEqual([['first']])
      expect(runtimes.every((r) => r.claim === undefined)).toBe(true)
      // The thread's claims name the job types its handlers run, as the runtime's do.
      for (const request of transport.threadRequests.filter((r) => r.claim)) expect(request.claim!.job_types).toEqual(expect.arrayContaining(['test.where', 'sleep', 'noop']))
    } finally {
      close()
    }
  })

  test('a completion of its own the host refuses file_lease_lost is reported again by the thread as a retryable failure', async () => {
    const transport = new ScriptedTransport([])
    const { drive, close } = await transport.driveOver(kind)
    try {
      await started(transport, { concurrency: 8, threads: 2, shortRunMs: KNOWN_IS_SHORT, drive, modules: { 'where.mjs': WHERE } })
      // The runtime looks only every second: at the scripted 50 ms beat it could take the job over
      // while the host's refusal is on its way, on a loaded machine, and report it itself.
      await teachShort(transport, 'test.where', {}, { heartbeat_interval_seconds: 60 })
      transport.fileTaken.add('taken')
      transport.offer([aJobOf('taken', 'test.where', {}, { heartbeat_interval_seconds: 30 })])
      await until(() => transport.failed.some((f) => f.job_id === 'taken'), 5000, 'the failure reported')
      expect(transport.failed).toEqual([{ job_id: 'taken', error: expect.objectContaining({ code: 'file_lease_lost', retryable: true }) }])
      expect(transport.viaThread.filter((id) => id === 'taken')).toHaveLength(2) // its completion, then its failure
    } finally {
      close()
    }
  })

  test('a completion of its own the host refuses as invalid in its slot is not sent again by the thread: its attempt fails report_refused, not retryable, and that failure refused so is dropped', async () => {
    const transport = new ScriptedTransport([])
    const { drive, close } = await transport.driveOver(kind)
    try {
      await started(transport, { concurrency: 8, threads: 2, shortRunMs: KNOWN_IS_SHORT, drive, modules: { 'where.mjs': WHERE } })
      await teachShort(transport, 'test.where', {}, { heartbeat_interval_seconds: 60 })
      transport.invalidReports.add('bad')
      transport.offer([aJobOf('bad', 'test.where', {}, { heartbeat_interval_seconds: 30 })])
      await until(() => transport.failed.some((f) => f.job_id === 'bad'), 5000, 'the failure reported')
      await afterALaterJob(transport)
      expect(transport.failed).toEqual([{ job_id: 'bad', error: expect.objectContaining({ code: 'report_refused', retryable: false }) }])
      expect(transport.viaThread.filter((id) => id === 'bad')).toHaveLength(2) // its completion, then its failure, once each
    } finally {
      close()
    }
  })

  test('a job the driving thread runs that blocks its thread is taken over by the runtime: heartbeated from the runtime’s thread, and its end reported once, by the runtime', async () => {
    const transport = new ScriptedTransport([])
    const { drive, close } = await transport.driveOver(kind)
    try {
      await started(transport, { concurrency: 2, threads: 2, shortRunMs: KNOWN_IS_SHORT, drive, modules: { 'spin.mjs': SPIN } })
      await teachShort(transport, 'test.spin', { ms: 0 })
      transport.offer([aJobOf('spin', 'test.spin', { ms: 600 })])
      await until(() => transport.completed.some((c) => c.job_id === 'spin'), 5000, 'the job reported')
      const reported = transport.requests.findIndex((r) => r.complete?.some((c) => c.job_id === 'spin'))
      const beatsWhileBlocked = transport.requests.slice(0, reported).filter((r) => r.heartbeat?.some((h) => h.job_id === 'spin'))
      expect(beatsWhileBlocked.length).toBeGreaterThan(1) // every ~50 ms here, from the runtime's thread
      await afterALaterJob(transport)
      expect(transport.completed.filter((c) => c.job_id === 'spin')).toEqual([{ job_id: 'spin', result: { spun_ms: expect.any(Number), turns: expect.any(Number) } }])
      expect(transport.viaThread).not.toContain('spin')
      expect(transport.failed).toEqual([])
    } finally {
      close()
    }
  })

  test('the watch over the driving thread slows down once no job was taken for a while, and the next job taken restores its pace; one that blocks its thread is still heartbeated', async () => {
    const transport = new ScriptedTransport([])
    const { drive, close } = await transport.driveOver(kind)
    try {
      await started(transport, { concurrency: 2, threads: 2, shortRunMs: KNOWN_IS_SHORT, watchIdleMs: 100, drive, modules: { 'spin.mjs': SPIN } })
      await teachShort(transport, 'test.spin', { ms: 0 })
      const slow = () => (runtime as unknown as { watchSlow: boolean }).watchSlow
      await until(slow, 5000, 'the watch slowed down')
      transport.offer([aJobOf('quick', 'test.spin', { ms: 0 })])
      await until(() => transport.completed.some((c) => c.job_id === 'quick'), 5000, 'the quick job reported')
      await until(() => !slow(), 5000, 'the watch at its pace again')
      await until(slow, 5000, 'the watch slowed down again')
      transport.offer([aJobOf('spin', 'test.spin', { ms: 600 })])
      await until(() => transport.completed.some((c) => c.job_id === 'spin'), 5000, 'the job reported')
      const reported = transport.requests.findIndex((r) => r.complete?.some((c) => c.job_id === 'spin'))
      const beatsWhileBlocked = transport.requests.slice(0, reported).filter((r) => r.heartbeat?.some((h) => h.job_id === 'spin'))
      expect(beatsWhileBlocked.length).toBeGreaterThan(1)
      expect(transport.failed).toEqual([])
    } finally {
      close()
    }
  })

  test('while a handler blocks the driving thread, the runtime claims for the other threads; once the thread answers again it claims again itself', async () => {
    const transport = new ScriptedTransport([])
    const { drive, close } = await transport.driveOver(kind)
    try {
      const lines = await started(transport, { concurrency: 4, threads: 2, shortRunMs: KNOWN_IS_SHORT, drive, modules: { 'spin.mjs': SPIN } })
      await teachShort(transport, 'test.spin', { ms: 0 })
      transport.offer([aJobOf('spin', 'test.spin', { ms: 4000 })])
      await new Promise((resolve) => setTimeout(resolve, 2000)) // the watch has found the thread blocked (a tick takes the job over, the next finds no answer)
      transport.offer([aJobOf('other', 'sleep', { ms: 50 })])
      await until(() => transport.completed.some((c) => c.job_id === 'other'), 2000, 'the other job reported while the driving thread is blocked')
      expect(transport.completed.some((c) => c.job_id === 'spin')).toBe(false)
      expect(transport.viaThread).not.toContain('other')
      await until(() => transport.completed.some((c) => c.job_id === 'spin'), 5000, 'the blocking job reported')
      expect(lines.filter((l) => l.includes('claims for the other threads'))).toHaveLength(1)
      await until(() => lines.some((l) => l.includes('answers again')), 2000, 'claiming given back')
      // The runtime's long-poll in flight runs its course (its job goes to the other thread); it sends no other claim.
      const runtimeClaims = () => transport.requests.filter((r) => r.claim && !transport.threadRequests.includes(r)).length
      const claimed = runtimeClaims()
      for (const id of ['after-0', 'after-1']) {
        transport.offer([aJobOf(id, 'test.spin', { ms: 0 })])
        await until(() => transport.completed.some((c) => c.job_id === id), 5000, `${id} reported`)
      }
      expect(transport.viaThread).toContain('after-1') // claimed, run and reported by the driving thread again
      expect(runtimeClaims()).toBe(claimed)
      expect(transport.failed).toEqual([])
    } finally {
      close()
    }
  })

  test('a job of its own that returned before a handler started after it blocks the thread is reported done when that thread is replaced, not thread_exited', async () => {
    const transport = new ScriptedTransport([])
    const { drive, close } = await transport.driveOver(kind)
    try {
      await started(transport, { concurrency: 4, threads: 2, shortRunMs: KNOWN_IS_SHORT, abortGraceMs: 300, drive, modules: { 'spin.mjs': SPIN, 'where.mjs': WHERE } })
      await teachShort(transport, 'test.spin', { ms: 0 })
      await teachShort(transport, 'test.where', {})
      transport.offer([aJobOf('quick', 'test.where', {}), aJobOf('stuck', 'test.spin', { ms: 8000 }, { max_runtime_s: 0.3 })])
      const ended = (id: string) => [...transport.completed, ...transport.failed].some((r) => r.job_id === id)
      await until(() => ended('stuck') && ended('quick'), 8000, 'both jobs ended')
      expect(transport.failed).toEqual([{ job_id: 'stuck', error: expect.objectContaining({ code: 'max_runtime_exceeded' }) }])
      expect(transport.completed.filter((c) => c.job_id === 'quick')).toEqual([{ job_id: 'quick', result: { thread: expect.any(Number) } }])
    } finally {
      close()
    }
  })

  test('a driving thread that exits has the jobs it still ran ended at once as thread_exited, and a new first thread drives on', async () => {
    const transport = new ScriptedTransport([])
    const { drive, close } = await transport.driveOver(kind)
    const slow = { heartbeat_interval_seconds: 60 } // the runtime does not look before the thread exits
    try {
      await started(transport, { concurrency: 2, threads: 2, shortRunMs: KNOWN_IS_SHORT, drive, modules: { 'exits.mjs': EXITS } })
      await teachShort(transport, 'test.exits', { exit: false }, slow)
      transport.offer([aJobOf('exits', 'test.exits', { exit: true }, slow)])
      await until(() => transport.failed.length === 1, 5000, 'the job reported')
      expect(transport.failed).toEqual([{ job_id: 'exits', error: expect.objectContaining({ code: 'thread_exited', retryable: true }) }])
      const linked = transport.viaThread.length
      await teachShort(transport, 'test.exits', { exit: false }, slow, 'again') // the new thread learns the type anew
      expect(transport.viaThread.length).toBe(linked + 1)
    } finally {
      close()
    }
  })

  test('a job whose handler returned as its stray rejection ends the driving thread ends as thread_exited naming the error, not at its lease’s expiry', async () => {
    const transport = new ScriptedTransport([])
    const { drive, close } = await transport.driveOver(kind)
    const slow = { heartbeat_interval_seconds: 60 } // the runtime does not look before the thread exits
    try {
      await started(transport, { concurrency: 2, threads: 2, shortRunMs: KNOWN_IS_SHORT, drive, modules: { 'flip.mjs': FLIP } })
      await teachShort(transport, 'test.flip', { rej: false }, slow)
      transport.offer([aJobOf('flip', 'test.flip', { rej: true }, slow)])
      await until(() => transport.failed.length === 1, 5000, 'the job reported')
      expect(transport.failed).toEqual([{ job_id: 'flip', error: expect.objectContaining({ code: 'thread_exited', message: expect.stringContaining('flip unhandled'), retryable: true }) }])
      expect(transport.completed.map((c) => c.job_id)).not.toContain('flip')
    } finally {
      close()
    }
  })

  test('a stopping worker’s driving thread claims nothing more; its own jobs finish and are reported before the worker ends', async () => {
    const transport = new ScriptedTransport([])
    const { drive, close } = await transport.driveOver(kind)
    try {
      await started(transport, { concurrency: 2, threads: 2, shortRunMs: KNOWN_IS_SHORT, drive, modules: { 'wait.mjs': WAIT } })
      await teachShort(transport, 'test.wait', { ms: 0 }, { heartbeat_interval_seconds: 60 }) // the runtime looks only every second
      transport.offer([aJobOf('finishing', 'test.wait', { ms: 300 }, { heartbeat_interval_seconds: 60 })])
      await until(() => transport.answered.some((jobs) => jobs.includes('finishing')), 5000, 'the job claimed')
      await runtime!.stop(5000)
      runtime = null
      // Reported once, by the thread (or by the runtime, had it looked in the table meanwhile).
      expect(transport.completed.filter((c) => c.job_id === 'finishing')).toEqual([{ job_id: 'finishing', result: { waited: 300 } }])
      const claimsSince = transport.requests.slice(transport.requests.findIndex((r) => r.complete?.some((c) => c.job_id === 'finishing')))
      expect(claimsSince.filter((r) => r.claim)).toEqual([])
    } finally {
      close()
    }
  })

  test('a driving thread’s job that writes a file passes the gate through the runtime: the file is written and the job reported once', async () => {
    const dir = aTempDir()
    const file = join(dir, 'gated.txt')
    const transport = new ScriptedTransport([], undefined, () => ({ granted: true }))
    const { drive, close } = await transport.driveOver(kind)
    try {
      await started(transport, { concurrency: 2, threads: 2, shortRunMs: KNOWN_IS_SHORT, drive, modules: { 'write.mjs': WRITE } })
      await teachShort(transport, 'test.write', { path: null })
      transport.offer([aJobOf('gated', 'test.write', { path: file }, { heartbeat_interval_seconds: 60 })])
      await until(() => transport.completed.some((c) => c.job_id === 'gated'), 5000, 'the job reported')
      await afterALaterJob(transport)
      expect(readFileSync(file, 'utf8')).toBe('written')
      expect(transport.completed.filter((c) => c.job_id === 'gated')).toEqual([{ job_id: 'gated', result: { wrote: file } }])
      expect(transport.viaThread).not.toContain('gated') // the runtime holds a job at the gate, and reports it
    } finally {
      close()
    }
  })
})

test('a stopping worker whose host no longer answers still stops: its driving thread’s last reports are dropped, and their leases expire on the host', async () => {
  const transport = new ScriptedTransport([])
  const { drive, close } = await transport.driveOver('http')
  const lines = await started(transport, { concurrency: 2, threads: 2, shortRunMs: KNOWN_IS_SHORT, drive, modules: { 'wait.mjs': WAIT } })
  await teachShort(transport, 'test.wait', { ms: 0 }, { heartbeat_interval_seconds: 60 }) // the runtime looks only every second
  transport.offer([aJobOf('last', 'test.wait', { ms: 300 }, { heartbeat_interval_seconds: 60 })])
  await until(() => transport.answered.some((jobs) => jobs.includes('last')), 5000, 'the job claimed')
  close() // the host is gone
  await runtime!.stop(5_000)
  runtime = null
  expect(transport.completed.map((c) => c.job_id)).not.toContain('last')
  expect(lines.some((l) => l.includes('1 report(s) dropped on the way out'))).toBe(true)
})

test('a worker the host refuses while its driving thread runs a job of its own sends the host nothing more, from either thread: the job ends in its grace, and its dropped report is one line', async () => {
  const transport = new ScriptedTransport([])
  const { drive, close } = await transport.driveOver('link')
  try {
    const lines = await started(transport, { concurrency: 2, threads: 2, shortRunMs: KNOWN_IS_SHORT, drive, modules: { 'wait.mjs': WAIT }, onRefused: () => void runtime!.stop(5_000) })
    await teachShort(transport, 'test.wait', { ms: 0 }, { heartbeat_interval_seconds: 60 }) // the runtime looks only every second
    transport.offer([aJobOf('own', 'test.wait', { ms: 600 }, { heartbeat_interval_seconds: 1 })])
    await until(() => transport.answered.some((jobs) => jobs.includes('own')), 5000, 'the job claimed')
    await until(() => transport.polled, 5000, 'the long-poll for the free slot')
    transport.refusal = new HostError(401, 'unauthorized', 'The token is missing or wrong')
    transport.offer([]) // the long-poll comes back empty; the thread's next exchange is refused
    await until(() => lines.some((line) => line.includes('dropped')), 5000, 'the worker stopped')
    expect(transport.refusedExchanges).toBe(1)
    expect(transport.completed.map((c) => c.job_id)).not.toContain('own')
    expect(lines.filter((line) => line.includes('refuses this worker') || line.includes('dropped'))).toEqual([
      'leasehold worker: the host refuses this worker (401 unauthorized: The token is missing or wrong); stopping',
      'leasehold worker: 1 report(s) dropped on the way out, the host refusing this worker; their leases expire on the host',
    ])
  } finally {
    close()
  }
})

test('a worker whose link closes: the driving thread gives the runtime the jobs it runs, and the runtime claims from then on', async () => {
  const transport = new ScriptedTransport([])
  const { links, link } = transport.link()
  try {
    await started(transport, { concurrency: 2, threads: 2, shortRunMs: KNOWN_IS_SHORT, drive: link, modules: { 'wait.mjs': WAIT } })
    await teachShort(transport, 'test.wait', { ms: 0 }, { heartbeat_interval_seconds: 60 }) // the runtime looks only every second
    transport.offer([aJobOf('running', 'test.wait', { ms: 400 }, { heartbeat_interval_seconds: 60 })])
    await until(() => transport.answered.some((jobs) => jobs.includes('running')), 5000, 'the job claimed')
    links.forget('w') // the host closes the link
    await until(() => transport.completed.some((c) => c.job_id === 'running'), 5000, 'the job reported')
    expect(transport.viaThread).not.toContain('running') // the runtime reported it
    await afterALaterJob(transport)
    const claims = transport.requests.filter((r) => !transport.threadRequests.includes(r) && r.claim)
    expect(claims.length).toBeGreaterThan(0)
    expect(transport.viaThread).not.toContain('later')
    expect(transport.failed).toEqual([])
  } finally {
    links.close()
  }
})
test('a file write passes the gate through the runtime: granted, it is written; refused as blocked, the handler is stopped and nothing is reported', async () => {
  const dir = aTempDir()
  const [granted, refused] = [join(dir, 'granted.txt'), join(dir, 'refused.txt')]
  const transport = new ScriptedTransport(
    [aJobOf('ok', 'test.write', { path: granted }), aJobOf('halted', 'test.write', { path: refused })],
    undefined,
    (file) => (file === granted ? { granted: true } : { granted: false, code: 'blocked', blocker: { id: 'b-1' } }),
  )
  const lines = await started(transport, { concurrency: 2, modules: { 'write.mjs': WRITE } })
  await until(() => transport.completed.length >= 1 && lines.some((l) => l.includes('halted on a file-lease blocker')), 5000, 'both jobs ended')
  await afterALaterJob(transport)
  expect(readFileSync(granted, 'utf8')).toBe('written')
  expect(existsSync(refused)).toBe(false)
  expect(transport.completed).toEqual([
    { job_id: 'ok', result: { wrote: granted } },
    { job_id: 'later', result: null },
  ])
  expect(transport.failed).toEqual([])
})

test('a file.write over a file clears the new files that writes of it ended midway left beside it (the job holds its lease), and leaves a symlink of that name', async () => {
  const dir = aTempDir()
  const config = join(dir, 'config.txt')
  writeFileSync(config, 'old')
  const dead = '.config.txt.leasehold-0123456789ab.tmp'
  writeFileSync(join(dir, dead), 'a killed write\'s')
  const link = '.config.txt.leasehold-aaaaaaaaaaaa.tmp'
  symlinkSync('config.txt', join(dir, link))
  const { transport, asked } = grantingEvery([aJobOf('write', 'file.write', { path: config, content: 'new' })])
  await started(transport)
  await until(() => transport.completed.length === 1, 5000, 'the write reported')
  expect(asked).toEqual([realpathSync(config)])
  expect(readFileSync(config, 'utf8')).toBe('new')
  expect(readdirSync(dir).sort()).toEqual([link, 'config.txt'].sort())
})

test('file.write fails without a retry where a retry would meet the same refusal (a folder that is not there), and is retried where it may mend (a busy file)', async () => {
  const dir = aTempDir()
  const missing = join(dir, 'no-such-folder', 'out.txt')
  // A program that is running cannot be written (ETXTBSY) until it exits: a busy file.
  const busy = join(dir, 'busy-program')
  copyFileSync('/bin/sleep', busy)
  const running = spawn(busy, ['30'], { stdio: 'ignore' })
  try {
    await new Promise((resolve) => running.once('spawn', resolve))
    const transport = new ScriptedTransport(
      [aJobOf('missing', 'file.write', { path: missing, content: 'x' }), aJobOf('busy', 'file.write', { path: busy, content: 'x' })],
      undefined,
      () => ({ granted: true }),
    )
    await started(transport)
    await until(() => transport.failed.length === 2, 5000, 'both failures reported')
    const failure = (id: string) => transport.failed.find((f) => f.job_id === id)!.error
    expect(failure('missing')).toMatchObject({ code: 'ENOENT', retryable: false })
    expect(failure('missing').message).toContain(missing)
    expect(failure('busy')).toMatchObject({ code: 'ETXTBSY', retryable: true })
    expect(existsSync(missing)).toBe(false)
  } finally {
    running.kill('SIGKILL')
  }
})

test('a file.write that fails on a full disk fails its attempt (ENOSPC, retried) and leaves the file as it was', async (context) => {
  const dir = aTempDir()
  const disk = mountSmallDisk(context, dir, '1m')
  if (!disk) return
  try {
    const config = join(disk.path, 'config.txt')
    const log = join(disk.path, 'log.txt')
    writeFileSync(config, 'old config\n'.repeat(500))
    writeFileSync(log, 'old log\n')
    fillDisk(disk.path, 8192)
    const content = 'new'.repeat(100_000)
    const transport = new ScriptedTransport(
      [aJobOf('write', 'file.write', { path: config, content }), aJobOf('append', 'file.write', { path: log, content, mode: 'append' })],
      undefined,
      () => ({ granted: true }),
    )
    await started(transport, { concurrency: 2 })
    await until(() => transport.failed.length === 2, 5000, 'both failures reported')
    for (const { error } of transport.failed) expect(error).toMatchObject({ code: 'ENOSPC', retryable: true })
    expect(readFileSync(config, 'utf8')).toBe('old config\n'.repeat(500))
    expect(readFileSync(log, 'utf8')).toBe('old log\n')
    expect(readdirSync(disk.path).sort()).toEqual(['config.txt', 'filler', 'log.txt'])
  } finally {
    await runtime?.stop(0)
    runtime = null
    disk.unmount()
  }
})

test('files.* writes regular files only: a FIFO, a socket or a device fails its job at once (ENOTREGULAR, not retried), and the worker\'s later file writes are not held up', async () => {
  const dir = aTempDir()
  const fifos = Array.from({ length: 10 }, (_, i) => join(dir, `ff${i + 1}`))
  for (const fifo of [...fifos, join(dir, 'ff-handler')]) execFileSync('mkfifo', [fifo])
  const socket = join(dir, 'sock')
  const server = createNetServer().listen(socket)
  await new Promise((resolve) => server.once('listening', resolve))
  const normal = join(dir, 'normal.txt')
  try {
    const transport = new ScriptedTransport(
      [
        ...fifos.map((path, i) => aJobOf(`fifo-${i + 1}`, 'file.write', { path, content: 'x' })),
        aJobOf('fifo-append', 'file.write', { path: fifos[0], content: 'x', mode: 'append' }),
        aJobOf('fifo-handler', 'test.write', { path: join(dir, 'ff-handler') }),
        aJobOf('socket', 'file.write', { path: socket, content: 'x' }),
        aJobOf('device', 'file.write', { path: '/dev/full', content: 'x' }),
      ],
      undefined,
      () => ({ granted: true }),
    )
    await started(transport, { concurrency: 14, modules: { 'write.mjs': WRITE } })
    await until(() => transport.failed.length === 14, 10_000, 'every refusal reported')
    for (const { job_id, error } of transport.failed) {
      expect(error, job_id).toMatchObject({ code: 'ENOTREGULAR', retryable: false })
    }
    const failure = (id: string) => transport.failed.find((f) => f.job_id === id)!.error
    expect(failure('fifo-1').message).toContain(`${fifos[0]} is not written: it is a FIFO, not a regular file`)
    expect(failure('socket').message).toContain('it is a socket')
    expect(failure('device').message).toContain('/dev/full is not written: it is a character device')

    // No thread of the worker is left waiting on a FIFO: a plain write after them is done at once.
    transport.offer([aJobOf('normal', 'file.write', { path: normal, content: 'fine' })])
    await until(() => transport.completed.some((c) => c.job_id === 'normal'), 5000, 'the normal write done')
    expect(readFileSync(normal, 'utf8')).toBe('fine')
  } finally {
    server.close()
    // Whatever an old build left waiting on a FIFO gets its reader, so the test run can end.
    for (const fifo of fifos) openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK)
  }
})

test('file.write refuses a relative path as invalid_payload, not retried, and writes nothing into the worker\'s working folder', async () => {
  const name = `leasehold-relative-${process.pid}.txt`
  const { transport, asked } = grantingEvery([aJobOf('relative', 'file.write', { path: name, content: 'x' })])
  await started(transport)
  await until(() => transport.failed.length === 1, 5000, 'the refusal reported')
  expect(transport.failed[0]!.error).toMatchObject({ code: 'invalid_payload', retryable: false })
  expect(transport.failed[0]!.error.message).toContain('path must be absolute')
  expect(asked).toEqual([])
  expect(existsSync(join(process.cwd(), name))).toBe(false)
})

test('a path the gate refuses as such fails its attempt at once, not retryable, with a code and a message naming the path: too long to key, a folder not valid UTF-8, one the host refuses', async () => {
  const dir = realpathSync(aTempDir())
  const long = `${dir}/${'a/'.repeat(2500)}x.txt`
  mkdirSync(Buffer.concat([Buffer.from(`${dir}/nu`), Buffer.from([0xff])]))
  symlinkSync(Buffer.concat([Buffer.from(`${dir}/nu`), Buffer.from([0xff])]), join(dir, 'nulink'))
  const refused = join(dir, 'refused.txt')
  const transport = new ScriptedTransport(
    [
      aJobOf('long-builtin', 'file.write', { path: long, content: 'z' }),
      aJobOf('long-handler', 'test.write', { path: long }),
      aJobOf('unnamable', 'file.write', { path: `${dir}/nulink/x.txt`, content: 'z' }),
      aJobOf('refused', 'test.write', { path: refused }),
    ],
    undefined,
    (file) => {
      if (file === refused) throw new HostError(400, 'invalid_request', 'file: Too big')
      return { granted: true }
    },
  )
  await started(transport, { concurrency: 4, modules: { 'write.mjs': WRITE } })
  await until(() => transport.failed.length === 4, 20_000, 'four failures reported') // a bound, not a timing: four handler threads start on a loaded machine first
  const failure = (id: string) => transport.failed.find((f) => f.job_id === id)!.error
  for (const id of ['long-builtin', 'long-handler']) {
    expect(failure(id)).toMatchObject({ code: 'ENAMETOOLONG', retryable: false })
    // Named by its start and end, with its length: the whole would fill the message.
    expect(failure(id).message).toContain(`${dir}/a/a/`)
    expect(failure(id).message).toContain(`(${long.length} characters)`)
    expect(failure(id).message).toContain('a/a/x.txt')
  }
  expect(failure('unnamable')).toMatchObject({ code: 'EILSEQ', retryable: false })
  expect(failure('unnamable').message).toContain(`${dir}/nu\\xff`)
  expect(failure('unnamable').message).toContain(`${dir}/nulink/x.txt`)
  expect(failure('refused')).toMatchObject({ code: 'invalid_request', retryable: false })
  expect(failure('refused').message).toContain(refused)
  // Only the path the worker could key reached the host; nothing was written.
  expect(transport.gateRequests.map((r) => r.file)).toEqual([refused])
  expect(existsSync(refused)).toBe(false)
})

test('the gate is asked for the file the kernel writes: through a symlinked folder, or `..` after one, the real file; each with its job’s lease and token', async () => {
  const dir = realpathSync(aTempDir())
  mkdirSync(join(dir, 'real', 'deep'), { recursive: true })
  symlinkSync(join(dir, 'real', 'deep'), join(dir, 'link'))
  const asked: string[] = []
  const transport = new ScriptedTransport(
    // Written as strings: path.join would take `link/..` away before the kernel sees it.
    [aJobOf('up', 'test.write', { path: `${dir}/link/../up.txt` }), aJobOf('through', 'test.write', { path: `${dir}/link/in.txt` })],
    undefined,
    (file) => {
      asked.push(file)
      return { granted: true }
    },
  )
  await started(transport, { concurrency: 2, modules: { 'write.mjs': WRITE } })
  await until(() => transport.completed.length >= 2, 5000, 'both jobs ended')
  expect(asked.sort()).toEqual([join(dir, 'real', 'deep', 'in.txt'), join(dir, 'real', 'up.txt')])
  expect(readFileSync(join(dir, 'real', 'up.txt'), 'utf8')).toBe('written')
  const underLeases = transport.gateRequests.map(({ owner_id, lease_id, lease_token }) => ({ owner_id, lease_id, lease_token }))
  expect(underLeases).toHaveLength(2)
  for (const id of ['up', 'through']) expect(underLeases).toContainEqual({ owner_id: `job:${id}`, lease_id: `${id}-l`, lease_token: `${id}-t` })
})

/** `test.twice {path}`: writes the file, then appends to it, each through the gate. */
const TWICE = `export default {
  type: 'test.twice',
  async run({ payload, files }) {
    await files.writeFile(payload.path, 'first\\n')
    await files.appendFile(payload.path, 'second\\n')
    return null
  },
}
`

test('every change asks the gate, even of a file the job holds: one lost since (taken by an operator) is not written again, and the job fails', async () => {
  const file = join(aTempDir(), 'out.txt')
  const answers: (() => FileAcquireAnswer)[] = [
    () => ({ granted: true }),
    () => {
      throw new LeaseLostError('file_lease_lost', 'An operator took a file from job lease lost-l')
    },
  ]
  const transport = new ScriptedTransport([aJobOf('lost', 'test.twice', { path: file })], undefined, () => answers.shift()!())
  await started(transport, { modules: { 'twice.mjs': TWICE } })
  await until(() => transport.failed.length === 1, 5000, 'the job failed')
  expect(transport.gateRequests.map((r) => r.file)).toEqual([file, file])
  expect(readFileSync(file, 'utf8')).toBe('first\n')
  expect(transport.failed[0]).toMatchObject({ job_id: 'lost', error: { code: 'file_lease_lost' } })
  expect(transport.completed).toEqual([])
})

/** `test.stray`: leaves a rejection no one handles, which ends its thread, then waits. */
const STRAY = `export default {
  type: 'test.stray',
  async run() {
    Promise.reject(new Error('stray rejection from test.stray'))
    await new Promise((resolve) => setTimeout(resolve, 200))
    return null
  },
}
`

test('a handler thread that a handler ends is replaced: the jobs placed after it run, none ends at once on the dead thread', async () => {
  const transport = new ScriptedTransport([aJobOf('exits', 'test.exits', { exit: true })])
  const lines = await started(transport, { concurrency: 2, threads: 2, modules: { 'exits.mjs': EXITS } })
  await until(() => transport.failed.length === 1, 5000, 'the exiting job ended')
  expect(transport.failed[0]).toMatchObject({ job_id: 'exits', error: { code: 'thread_exited', retryable: true } })
  const later = Array.from({ length: 8 }, (_, i) => aJobOf(`later-${i}`, 'sleep', { ms: 20 }))
  transport.offer(later)
  await until(() => transport.completed.length + transport.failed.length >= 9, 10_000, 'the later jobs ended')
  expect(transport.failed).toHaveLength(1)
  expect(transport.completed.map((c) => c.job_id).sort()).toEqual(later.map((j) => j.job_id).sort())
  expect(lines.filter((l) => l.includes('uncaught error'))).toEqual([])
})

test('a thread ended by an uncaught error says which error, in the failed jobs and in the log', async () => {
  const transport = new ScriptedTransport([aJobOf('stray', 'test.stray', {})])
  const lines = await started(transport, { modules: { 'stray.mjs': STRAY } })
  await until(() => transport.failed.length === 1, 5000, 'the job ended')
  expect(transport.failed[0]).toMatchObject({
    job_id: 'stray',
    error: { code: 'thread_exited', message: expect.stringContaining('stray rejection from test.stray'), stack: expect.stringContaining('stray rejection') },
  })
  expect(lines.some((l) => l.includes('a handler thread ended on an uncaught error') && l.includes('stray rejection from test.stray'))).toBe(true)
})

/** Returns at once, leaving a rejection no one awaits when `payload.rej`. */
const FLIP = `export default { type: 'test.flip', async run({ payload }) { if (payload.rej) { Promise.reject(new Error('flip unhandled')); return 'x' } return null } }
`

test('a job whose handler returned as its stray rejection ends the thread ends as thread_exited naming the error', async () => {
  const transport = new ScriptedTransport([aJobOf('flip', 'test.flip', { rej: true })])
  await started(transport, { modules: { 'flip.mjs': FLIP } })
  await until(() => transport.failed.length === 1, 5000, 'the job ended')
  expect(transport.failed[0]).toMatchObject({ job_id: 'flip', error: { code: 'thread_exited', message: expect.stringContaining('flip unhandled'), retryable: true } })
  expect(transport.completed).toEqual([])
})

/** Its timer throws just after it has loaded: every thread that loads it dies. */
const LATE = `setTimeout(() => { throw new Error('late') }, 100)
export default { type: 'test.late', run: () => null }
`

/**
 * As LATE, but a thread dies of it only when told: each thread that loads it marks `loaded-<its
 * thread id>` in `control`, and throws from a timer once `die-<its thread id>` is there.
 */
const toldToDie = (control: string) => `import { threadId } from 'node:worker_threads'
import { existsSync, writeFileSync } from 'node:fs'
writeFileSync(${JSON.stringify(control)} + '/loaded-' + threadId, '')
setInterval(() => { if (existsSync(${JSON.stringify(control)} + '/die-' + threadId)) throw new Error('late') }, 20)
export default { type: 'test.late', run: () => null }
`

/** The ids of the threads that loaded a toldToDie module, in the order they were started (a thread's id counts up). */
function loaders(control: string): number[] {
  return readdirSync(control)
    .filter((f) => f.startsWith('loaded-'))
    .map((f) => Number(f.slice('loaded-'.length)))
    .sort((a, b) => a - b)
}

describe('a module whose timer throws just after it loads, in one thread first', () => {
  const deaths = (lines: string[]) => lines.filter((l) => l.includes('ended on an uncaught error'))

  test('is reported once and skipped: its type is claimed no more from then, the other threads that loaded it are replaced before it ends them, and a job of another type offered at once runs', async () => {
    const control = aTempDir()
    const transport = new ScriptedTransport([])
    let claimsBefore = -1
    const lines = await started(transport, { concurrency: 2, threads: 2, onProblem: () => (claimsBefore = transport.requests.length), modules: { 'exits.mjs': EXITS, 'late.mjs': toldToDie(control) } })
    const [first, second] = loaders(control)
    writeFileSync(join(control, `die-${second}`), '')
    await until(() => claimsBefore >= 0, 5000, 'the module reported')
    // Two seconds: long enough to die with a thread that loaded the module, were it placed there.
    transport.offer([aJobOf('after', 'sleep', { ms: 2000 })])
    await until(() => transport.completed.length === 1, 10_000, 'the job of the other type ran')
    writeFileSync(join(control, `die-${first}`), '')
    await new Promise((r) => setTimeout(r, 300))
    expect(transport.failed).toEqual([])
    expect(deaths(lines)).toHaveLength(1)
    const claimedAfter = transport.requests.slice(claimsBefore).flatMap((r) => r.claim?.job_types ?? [])
    expect(claimedAfter).toContain('test.exits')
    expect(claimedAfter).not.toContain('test.late')
  })

  test('loaded by a driving thread: the thread drains, is replaced by one that skips it before it ends, and the new one claims the other types', async () => {
    const control = aTempDir()
    const transport = new ScriptedTransport([])
    const { drive, close } = await transport.driveOver('link')
    try {
      const problems: string[] = []
      const lines = await started(transport, { concurrency: 2, threads: 2, drive, onProblem: (p) => problems.push(p.error), modules: { 'exits.mjs': EXITS, 'late.mjs': toldToDie(control) } })
      // The first thread started drives; the other dies first.
      const [driving, other] = loaders(control)
      writeFileSync(join(control, `die-${other}`), '')
      await until(() => problems.length > 0, 5000, 'the module reported')
      const claimed = () => transport.threadRequests.at(-1)?.claim?.job_types ?? []
      await until(() => claimed().includes('test.exits') && !claimed().includes('test.late'), 5000, 'a driving thread claiming without the module')
      transport.offer([aJobOf('after', 'sleep', { ms: 2000 })])
      await until(() => transport.completed.length === 1, 10_000, 'the job of the other type ran')
      writeFileSync(join(control, `die-${driving}`), '')
      await new Promise((r) => setTimeout(r, 300))
      expect(transport.failed).toEqual([])
      expect(deaths(lines)).toHaveLength(1)
      expect(problems).toEqual([expect.stringMatching(/^threw as it loaded, ending its thread \(skipped from now on\): late$/)])
    } finally {
      close()
    }
  })
})

test('a module whose timer throws just after it loads in every thread is reported once as a handler that did not load, and skipped: its threads are replaced once, and the other types run', async () => {
  const transport = new ScriptedTransport([])
  const lines = await started(transport, { concurrency: 2, threads: 2, modules: { 'exits.mjs': EXITS, 'late.mjs': LATE } })
  await until(() => lines.some((l) => l.startsWith('problem ')), 5000, 'the module reported')
  expect(lines.filter((l) => l.startsWith('problem '))).toEqual([expect.stringMatching(/^problem .*late\.mjs: threw as it loaded, ending its thread \(skipped from now on\): late$/)])
  transport.offer([aJobOf('after', 'test.exits', { exit: false })])
  await until(() => transport.completed.length === 1, 5000, 'the job of the other type ran')
  expect(transport.failed).toEqual([])
  // One death per thread first started, none after: the threads since skip the module.
  expect(lines.filter((l) => l.includes('ended on an uncaught error')).length).toBeLessThanOrEqual(2)
  expect(transport.requests.at(-1)?.claim?.job_types).not.toContain('test.late')
})

test('a thread killed by an uncaught error as its modules still load names that error, not a process.exit() the module did not call', async () => {
  const transport = new ScriptedTransport([])
  const lines = await started(transport, { loadTimeoutMs: 1000, modules: { 'late.mjs': LATE, 'never.mjs': 'await new Promise(() => {})\nexport default { type: "test.never", run: () => null }\n' } })
  await until(() => lines.some((l) => l.includes('late.mjs')), 5000, 'the module reported')
  expect(lines.filter((l) => l.includes('process.exit'))).toEqual([])
  expect(lines.some((l) => l.includes('ended on an uncaught error: Error: late'))).toBe(true)
})

test('threads that die again and again before running a job, of an error that names no module, are replaced after a growing delay, and the log says so', async () => {
  const transport = new ScriptedTransport([])
  const lines = await started(transport, { modules: { 'boom.mjs': `setTimeout(() => { throw 'boom' }, 20)\nexport default { type: 'test.boom', run: () => null }\n` } })
  await until(() => lines.filter((l) => l.includes('ended on an uncaught error')).length >= 4, 10_000, 'four deaths')
  const deaths = lines.filter((l) => l.includes('ended on an uncaught error'))
  expect(deaths[1]).toContain('2 threads in a row died so before running a job, the next starts in 200 ms')
  expect(deaths[2]).toContain('3 threads in a row died so before running a job, the next starts in 400 ms')
  expect(lines.filter((l) => l.startsWith('problem '))).toEqual([])
})

test('a host that does not answer the gate, or answers that it is stopping, is asked again every second: the job gets its file when it answers, and loses no attempt', async () => {
  const file = join(aTempDir(), 'out.txt')
  const answers: (() => FileAcquireAnswer)[] = [
    () => {
      throw new Error('connect ECONNREFUSED 127.0.0.1:7878')
    },
    () => {
      throw new HostError(503, 'stopping', 'The host is stopping')
    },
    () => ({ granted: true }),
  ]
  const transport = new ScriptedTransport([aJobOf('restarted', 'test.write', { path: file })], undefined, () => answers.shift()!())
  const lines = await started(transport, { modules: { 'write.mjs': WRITE } })
  await until(() => transport.completed.length === 1, 10_000, 'the job completed')
  expect(transport.completed).toEqual([{ job_id: 'restarted', result: { wrote: file } }])
  expect(transport.failed).toEqual([])
  expect(answers).toEqual([])
  expect(lines.filter((l) => l.includes('asking again every second'))).toHaveLength(1)
})

test('an acquire refused as too early (its denial’s answer lost) waits for the one retry, as a denial does', async () => {
  const file = join(aTempDir(), 'out.txt')
  const answers: (() => FileAcquireAnswer)[] = [
    () => {
      throw new HostError(429, 'retry_too_early', 'The one retry is at …')
    },
    () => ({ granted: true }),
  ]
  const transport = new ScriptedTransport([aJobOf('early', 'test.write', { path: file })], undefined, () => answers.shift()!())
  let waited = 0
  transport.waitRetry = async () => ++waited > 0
  await started(transport, { modules: { 'write.mjs': WRITE } })
  await until(() => transport.completed.length === 1, 5000, 'the job completed')
  expect(waited).toBe(1)
  expect(transport.completed).toEqual([{ job_id: 'early', result: { wrote: file } }])
})

test('a job cancelled while it waits for its one retry leaves the gate at once: it ends as canceled, and no thread is replaced under the other jobs', async () => {
  const file = join(aTempDir(), 'out.txt')
  let cancel = false
  const transport = new ScriptedTransport(
    [aJobOf('waiting', 'test.write', { path: file }), aJobOf('neighbour', 'sleep', { ms: 1500 })],
    async (job_id) => ({ ...beating(job_id), cancel_requested: cancel && job_id === 'waiting' }),
    () => ({ granted: false, code: 'file_lease_held', retry_at: new Date(0).toISOString(), holder: null }),
  )
  const lines = await started(transport, { concurrency: 2, threads: 1, modules: { 'write.mjs': WRITE } })
  await until(() => lines.some((l) => l.includes('waits for its one retry')), 5000, 'the job waits at the gate')
  cancel = true
  await until(() => transport.failed.length === 1, 2000, 'the cancelled job ended')
  expect(transport.failed[0]).toMatchObject({ job_id: 'waiting', error: { code: 'canceled' } })
  await until(() => transport.completed.some((c) => c.job_id === 'neighbour'), 5000, 'its neighbour completed')
  expect(lines.filter((l) => l.includes('did not stop'))).toEqual([])
})

test('a handler that does not stop within the grace has its thread replaced: it fails as stopped, the other job of its thread as thread_exited, and the next job runs on the new thread', async () => {
  const transport = new ScriptedTransport([
    aJobOf('stuck', 'test.spin', { ms: 5000 }, { max_runtime_s: 0.2 }),
    aJobOf('neighbour', 'sleep', { ms: 5000 }),
    aJobOf('next', 'noop', {}),
  ])
  const lines = await started(transport, { concurrency: 2, threads: 1, abortGraceMs: 300, modules: { 'spin.mjs': SPIN } })
  await until(() => transport.completed.length >= 1, 10_000, 'the next job reported')
  expect(lines).toContain('leasehold worker: the handler of stuck did not stop; replacing its thread')
  const failed = Object.fromEntries(transport.failed.map((f) => [f.job_id, f.error]))
  expect(failed).toEqual({
    stuck: { code: 'max_runtime_exceeded', message: 'Ran past its max_runtime_s', retryable: false },
    neighbour: { code: 'thread_exited', message: expect.stringMatching(/^handler thread exited with /), retryable: true },
  })
  expect(transport.completed).toEqual([{ job_id: 'next', result: null }])
})

test('a job that returned before a handler started after it on its thread blocks the thread is reported done, not thread_exited when that thread is replaced; the jobs that do end so name the job that did not stop', async () => {
  const transport = new ScriptedTransport([
    aJobOf('quick', 'noop', {}),
    aJobOf('neighbour', 'sleep', { ms: 8000 }),
    aJobOf('stuck', 'test.spin', { ms: 8000 }, { max_runtime_s: 0.3 }),
  ])
  const lines = await started(transport, { concurrency: 3, threads: 1, abortGraceMs: 300, modules: { 'spin.mjs': SPIN } })
  await until(() => transport.failed.length >= 2, 10_000, 'the stuck job and its neighbour ended')
  expect(lines).toContain('leasehold worker: the handler of stuck did not stop; replacing its thread')
  const failed = Object.fromEntries(transport.failed.map((f) => [f.job_id, f.error]))
  expect(failed).toEqual({
    stuck: { code: 'max_runtime_exceeded', message: 'Ran past its max_runtime_s', retryable: false },
    neighbour: { code: 'thread_exited', message: expect.stringContaining('the handler of stuck did not stop'), retryable: true },
  })
  expect(transport.completed).toEqual([{ job_id: 'quick', result: null }])
})

test('a job’s new attempt granted while its old attempt’s handler still runs is heartbeated and reported as its own, whatever the old one does', async () => {
  // Attempt 1 lost its lease (the worker stalled past its TTL, say) while its handler spins on,
  // deaf to its abort; the host grants the job's attempt 2 to this same worker meanwhile. The old
  // attempt's refused heartbeats and its end (its thread replaced as stuck) are its own: attempt 2
  // beats under its own lease, and completes.
  const attempt = (n: number, type: string, payload: unknown) => aJobOf('j', type, payload, { attempt_id: `j-a${n}`, lease_id: `j-l${n}`, lease_token: `j-t${n}` })
  const transport = new ScriptedTransport([attempt(1, 'test.spin', { ms: 3000 })], async (job_id, token) =>
    token === 'j-t1' ? { job_id, ok: false, code: 'lease_expired', detail: 'Lease j-l1 expired' } : beating(job_id),
  )
  const lines = await started(transport, { concurrency: 2, threads: 2, abortGraceMs: 500, modules: { 'spin.mjs': SPIN } })
  const beatsOf = (token: string) => transport.requests.flatMap((r) => r.heartbeat ?? []).filter((h) => h.lease_token === token).length
  await until(() => beatsOf('j-t1') > 0 && transport.polled, 5000, 'attempt 1 refused its heartbeat, and a claim waits')
  transport.offer([attempt(2, 'sleep', { ms: 1500 })])
  await until(() => lines.some((l) => l.includes('did not stop')), 5000, 'attempt 1 ended as stuck')
  const beatsBefore = beatsOf('j-t2')
  await until(() => transport.completed.length + transport.failed.length > 0, 5000, 'attempt 2 reported')
  expect(beatsOf('j-t2')).toBeGreaterThan(beatsBefore) // still beating after attempt 1 ended
  const reports = transport.requests.flatMap((r) => [...(r.complete ?? []), ...(r.fail ?? [])])
  expect(reports.map((r) => [r.attempt_id, r.lease_token, 'result' in r])).toEqual([['j-a2', 'j-t2', true]])
  expect(lines.filter((l) => l.includes('lost the lease'))).toEqual(['leasehold worker: lost the lease of j; its result is dropped'])
})

test("a handler's result is what JSON makes of it (a function in it dropped); one JSON cannot write fails its own job, and the other jobs of its batch and thread complete", async () => {
  const WITH_FUNCTION = `export default { type: 'test.with-function', run: () => ({ kept: 1, callback: () => 1 }) }\n`
  const BIGINT = `export default { type: 'test.bigint', run: () => ({ n: 1n }) }\n`
  const transport = new ScriptedTransport([aJobOf('fn', 'test.with-function', {}), aJobOf('bad', 'test.bigint', {}), aJobOf('good', 'noop', {})])
  await started(transport, { concurrency: 3, threads: 1, modules: { 'with-function.mjs': WITH_FUNCTION, 'bigint.mjs': BIGINT } })
  await until(() => transport.completed.length + transport.failed.length >= 3, 5000, 'the three jobs reported')
  expect(transport.completed).toEqual(expect.arrayContaining([{ job_id: 'fn', result: { kept: 1 } }, { job_id: 'good', result: null }]))
  expect(transport.failed).toEqual([{ job_id: 'bad', error: expect.objectContaining({ code: 'result_not_json', message: expect.stringMatching(/BigInt/), retryable: false }) }])
})

const idle: SendState = { reports: false, heartbeats: false, reporting: false, polling: false, free: 4, reportsDueInMs: null, claimDueInMs: 0 }

test('reports carry the long-poll for the free slots when none is in flight, unless they hold heartbeats', () => {
  expect(nextExchange({ ...idle, reports: true })).toEqual({ longPoll: true })
  expect(nextExchange({ ...idle, reports: true, polling: true })).toEqual({ longPoll: false })
  // A heartbeat's answer may stop its job: it never waits behind a claim.
  expect(nextExchange({ ...idle, reports: true, heartbeats: true })).toEqual({ longPoll: false })
  expect(nextExchange({ ...idle, reports: true, free: 0 })).toEqual({ longPoll: false })
  // One exchange with reports at a time: later reports wait for it.
  expect(nextExchange({ ...idle, reports: true, reporting: true })).toBeNull()
})

test('free slots are claimed at once, unless every running job is short and its report will carry the claim', () => {
  expect(nextExchange(idle)).toEqual({ longPoll: true })
  expect(nextExchange({ ...idle, reportsDueInMs: 3 })).toEqual({ pollInMs: 3 })
  expect(nextExchange({ ...idle, polling: true })).toBeNull()
  expect(nextExchange({ ...idle, reporting: true })).toBeNull()
  expect(nextExchange({ ...idle, free: 0 })).toBeNull()
})

test('while jobs stream in one at a time, the next claim waits out its pace, and reports without heartbeats wait with it', () => {
  expect(nextExchange({ ...idle, claimDueInMs: 0.6 })).toEqual({ pollInMs: 0.6 })
  expect(nextExchange({ ...idle, reports: true, claimDueInMs: 0.6 })).toEqual({ pollInMs: 0.6 })
  // A heartbeat's answer may stop its job: it goes at once (its claim does not wait for work).
  expect(nextExchange({ ...idle, reports: true, heartbeats: true, claimDueInMs: 0.6 })).toEqual({ longPoll: false })
  // With a long-poll already waiting, or no slot free, no claim is due: the reports go.
  expect(nextExchange({ ...idle, reports: true, polling: true, claimDueInMs: 0.6 })).toEqual({ longPoll: false })
  expect(nextExchange({ ...idle, reports: true, free: 0, claimDueInMs: 0.6 })).toEqual({ longPoll: false })
  expect(nextExchange({ ...idle, free: 0, claimDueInMs: 0.6 })).toBeNull()
})

test('a claim that waited at the host less than CLAIM_STREAM_MS and got fewer jobs than it asked for sets the pace of the next; one that waited for its job, came back full or came back empty does not', () => {
  const dueAfter = (waitedMs: number, asked: number, got: number): number => {
    const pace = new ClaimPace()
    pace.answered(100, waitedMs, asked, got)
    return pace.dueInMs(100.3)
  }
  expect(dueAfter(0.2, 8, 1)).toBeCloseTo(CLAIM_PACE_MS - 0.3)
  expect(dueAfter(0, 8, 3)).toBeCloseTo(CLAIM_PACE_MS - 0.3) // jobs were queued when it came
  expect(dueAfter(CLAIM_STREAM_MS, 8, 1)).toBe(0) // it waited for its job: jobs come slower than that
  expect(dueAfter(0.2, 8, 8)).toBe(0) // a backlog: the next claim takes more of it at once
  expect(dueAfter(0.2, 8, 0)).toBe(0)
  expect(dueAfter(0, 8, 0)).toBe(0) // the host says an empty answer waited 0 ms, however long it waited for none
  const pace = new ClaimPace()
  pace.answered(100, 0.2, 8, 1)
  expect(pace.dueInMs(100 + CLAIM_PACE_MS)).toBe(0) // the pace is how far apart claims leave, not a wait after each answer
})

test('a paced claim that came back with a single job sets no pace for the next: waiting out the pace gathered nothing; one that gathered several keeps it', () => {
  const pace = new ClaimPace()
  pace.answered(100, 0.2, 8, 1)
  pace.answered(104, 0.1, 8, 3) // the paced claim took the three jobs that came meanwhile
  expect(pace.dueInMs(104.3)).toBeCloseTo(CLAIM_PACE_MS - 0.3)
  pace.answered(108, 0.1, 8, 1) // a stream slower than the pace
  expect(pace.dueInMs(108.3)).toBe(0)
  pace.answered(108.5, 0.1, 8, 1) // claimed at once, and answered at once again: jobs come fast, the pace is set again
  expect(pace.dueInMs(108.8)).toBeCloseTo(CLAIM_PACE_MS - 0.3)
})

test('a claim is paced by the wait its answer reports, not by its round trip; from a host that reports none, by the round trip', () => {
  // A busy host or a long way: the claim waited 0.1 ms at the host, its round trip took 30.
  expect(claimWaitedMs({ claim_waited_ms: 0.1 }, 100, 130)).toBe(0.1)
  expect(claimWaitedMs({}, 100, 130)).toBe(30)
})

/**
 * Lets 20 jobs stream into `transport`, faster than a pace, and returns how long after the one
 * before each claim the talker sent while they did. Every claim finds a job there as it arrives,
 * so each is answered at once: one that arrives 3 ms or more after the claim before finds three
 * (the jobs that came meanwhile, fewer than the 8 a talker with 8 free slots asks for), a sooner
 * one finds one. (Counted from the claims, not the clock, so that a loaded machine that delays a
 * claim does not make it come back full.)
 */
async function claimGapsOfAStream(transport: ScriptedTransport, fromThread: boolean): Promise<number[]> {
  let streamed = 0
  let lastClaimAt = Number.NEGATIVE_INFINITY
  transport.arriving = () => {
    const now = performance.now()
    const due = Math.min(20, streamed + (now - lastClaimAt >= 3 ? 3 : 1))
    lastClaimAt = now
    const jobs: Claim[] = []
    while (streamed < due) jobs.push({ ...aClaimOf(`job-${streamed++}`), job_type: 'noop', payload: {} })
    return jobs
  }
  transport.offer([])
  await until(() => transport.completed.length === 20, 10_000, 'the 20 jobs reported')
  const claims = transport.requests.flatMap((request, i) => (request.claim && (!fromThread || transport.threadRequests.includes(request)) ? [transport.arrivedAt[i]!] : []))
  return claims.slice(1, 20).map((at, i) => at - claims[i]!)
}

const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!

test('a worker that jobs stream to one at a time, faster than its pace, each claim answered at once, claims once a pace: the jobs that come meanwhile go in one answer', async () => {
  const transport = new ScriptedTransport([])
  await started(transport, { concurrency: 8 })
  const gaps = await claimGapsOfAStream(transport, false)
  // Read as the host reads them, as they arrive: the time on the way moves a gap either way.
  expect(median(gaps), JSON.stringify(gaps)).toBeGreaterThanOrEqual(CLAIM_PACE_MS)
})

/** {@link claimGapsOfAStream} for a local worker whose one thread drives its claims over its link. */
async function drivingThreadClaimGaps(transport: ScriptedTransport): Promise<number[]> {
  const { drive, close } = await transport.driveOver('link')
  try {
    await started(transport, { concurrency: 8, threads: 1, drive })
    return await claimGapsOfAStream(transport, true)
  } finally {
    close()
  }
}

test('a local worker’s driving thread that jobs stream to one at a time, faster than its pace, each claim answered at once, claims once a pace', async () => {
  // Over its link; the pace is the same over any transport, since it reads the host's wait.
  const gaps = await drivingThreadClaimGaps(new ScriptedTransport([]))
  expect(median(gaps), JSON.stringify(gaps)).toBeGreaterThanOrEqual(CLAIM_PACE_MS)
})

test('a claim the host answered at once keeps the pace though its answer came back late (a busy host, a long way)', async () => {
  // Each exchange carries the reports of the job before, and comes back ~2 ms after it left: by
  // its round trip no claim would count as answered at once, and the next would leave as the
  // answer came, less than a pace apart. By the host's reading (no wait) they leave a pace apart.
  const transport = new ScriptedTransport([])
  transport.reportRoundTripMs = 2
  const gaps = await drivingThreadClaimGaps(transport)
  expect(median(gaps), JSON.stringify(gaps)).toBeGreaterThanOrEqual(CLAIM_PACE_MS)
})

/** A host whose every exchange fails with `error`: it counts them. */
class FailingTransport extends ScriptedTransport {
  exchanges = 0
  constructor(private readonly error: Error) {
    super([])
  }
  override exchange(): Promise<ExchangeAnswer> {
    this.exchanges++
    return Promise.reject(this.error)
  }
}

test('a worker the host refuses (its token revoked, say, or its claim invalid to a host of another version) says why once, asks nothing more and is stopped by its owner', async () => {
  // 400 to an exchange with no completion or failure in it: what the host cannot read is the claim.
  for (const status of [400, 401, 403, 404]) {
    const transport = new FailingTransport(new HostError(status, 'refused', 'no worker of ours'))
    const refusals: HostError[] = []
    const lines = await started(transport, { onRefused: (error) => refusals.push(error) })
    await until(() => refusals.length === 1, 5000, 'the refusal')
    // Past the second in which a worker asks again after an exchange that failed.
    await new Promise((resolve) => setTimeout(resolve, 1300))
    expect(transport.exchanges).toBe(1)
    expect(refusals.map((error) => error.status)).toEqual([status])
    expect(lines).toEqual([`leasehold worker: the host refuses this worker (${status} refused: no worker of ours); stopping`])
    await runtime!.stop(0)
    runtime = null
  }
})

test('a worker whose host does not answer, or answers that it is stopping, asks again every second', async () => {
  for (const [error, said] of [
    [new Error('connect ECONNREFUSED 127.0.0.1:1'), 'the host did not answer (connect ECONNREFUSED 127.0.0.1:1)'],
    [new HostError(503, 'stopping', 'The host is stopping'), 'the host answered 503 stopping (The host is stopping)'],
  ] as const) {
    const transport = new FailingTransport(error)
    const refusals: HostError[] = []
    const lines = await started(transport, { onRefused: (refusal) => refusals.push(refusal) })
    await until(() => transport.exchanges >= 2, 5000, 'a second exchange')
    expect(refusals).toEqual([])
    expect(lines[0]).toBe(`leasehold worker: ${said}; retrying in 1 s`)
    await runtime!.stop(0)
    runtime = null
  }
})

test('a worker whose host does not answer asks again within a second of each failure on the monotonic clock: a wall clock set back meanwhile does not hold it back', async () => {
  const wall = Date.now
  const transport = new FailingTransport(new Error('connect ECONNREFUSED 127.0.0.1:1'))
  const exchange = transport.exchange.bind(transport)
  transport.exchange = () => {
    // While the worker waits out its second, the clock is set back an hour (NTP stepping it, say).
    if (transport.exchanges === 0) setTimeout(() => vi.spyOn(Date, 'now').mockImplementation(() => wall() - 3_600_000), 200)
    return exchange()
  }
  try {
    await started(transport)
    await until(() => transport.exchanges >= 3, 5000, 'two more exchanges after the clock went back')
  } finally {
    vi.restoreAllMocks()
    await runtime!.stop(0)
    runtime = null
  }
})

test('a worker that runs short jobs one at a time makes one round trip per job: its report carries its next claim', async () => {
  const transport = new ScriptedTransport([])
  // Every job type seen once counts as short here, so the rule, not the machine's speed, decides.
  await started(transport, { concurrency: 4, shortRunMs: Number.POSITIVE_INFINITY })
  // 100 ms runs: a job is late for its report only past twice that, which even a loaded machine
  // rarely is.
  const oneJob = async (i: number) => {
    transport.offer([{ ...aClaim(`job-${i}`, 100), heartbeat_interval_seconds: 30 }])
    await until(() => transport.completed.some((c) => c.job_id === `job-${i}`) && transport.polled, 5000, `job-${i} reported, and a claim waiting`)
  }
  await until(() => transport.polled, 5000, 'the first claim')
  for (let i = 0; i < 3; i++) await oneJob(i) // the first of a type runs as one that may be long
  const before = transport.requests.length
  for (let i = 3; i < 9; i++) await oneJob(i)
  // One request per job: 6. A late report lets the claim go alone, so each hiccup of a loaded
  // machine adds one; the claim and the report apart would be 12.
  expect(transport.requests.length - before).toBeLessThanOrEqual(9)
  const carried = transport.requests.slice(before).filter((r) => r.complete?.length && r.claim && (r.claim.max_wait_ms ?? 0) > 0)
  expect(carried.length).toBeGreaterThanOrEqual(3)
})

test('a job that may run long does not hold back the claim for the other free slots', async () => {
  const transport = new ScriptedTransport([aClaim('job-1', 300)])
  // Even where every type seen once counts as short: a type not seen yet may run long, so the
  // free slot is claimed while the job runs.
  await started(transport, { concurrency: 2, shortRunMs: Number.POSITIVE_INFINITY })
  await until(() => transport.requests.length >= 2, 5000, 'a second claim')
  expect(transport.completed).toEqual([])
  expect(transport.requests[1]!.claim).toMatchObject({ max_jobs: 1 })
  expect(transport.requests[1]!.claim!.max_wait_ms).toBeGreaterThan(0)
})

test('a stopping worker sends the reports of the long-poll it gives up again, without a claim (completions are idempotent)', async () => {
  const transport = new ScriptedTransport([aJobOf('job-1', 'noop', {}, { heartbeat_interval_seconds: 30 })])
  await started(transport, { concurrency: 1 })
  // One slot: the job's completion carries the next long-poll, which waits.
  await until(() => transport.completed.length >= 1 && transport.polled, 5000, 'the completion, waiting as a claim')
  await runtime!.stop(5_000)
  runtime = null
  expect(transport.completed.map((c) => c.job_id)).toEqual(['job-1', 'job-1'])
  const last = transport.requests.at(-1)!
  expect(last.complete?.map((c) => c.job_id)).toEqual(['job-1'])
  expect(last.claim).toBeUndefined()
})

test.each(['the runtime', 'a driving thread'])("a handler's log lines reach the worker's log with control characters escaped, under the job's short id, whether its job was claimed by %s: a program's escape sequence never reaches the operator's terminal", async (claimer) => {
  const NOISY = `export default { type: 'test.noisy', run: ({ log }) => { log('\\u001b[2J\\u001b]0;owned\\u0007red\\rline'); return null } }\n`
  const id = '0195f3a2-7c1e-7b44-9a1d-5e7f81c03f9a'
  const transport = new ScriptedTransport([aJobOf(id, 'test.noisy', {})])
  const link = claimer === 'a driving thread' ? await transport.driveOver('link') : null
  try {
    const lines = await started(transport, { modules: { 'noisy.mjs': NOISY }, ...(link ? { threads: 1, drive: link.drive } : {}) })
    await until(() => transport.completed.some((c) => c.job_id === id), 5000, 'the job reported')
    expect(transport.viaThread.includes(id)).toBe(link !== null)
    expect(lines).toContain('[test.noisy …81c03f9a] \\u001b[2J\\u001b]0;owned\\u0007red\\u000dline')
    expect(lines.every((line) => !/[\u0000-\u001f\u007f-\u009f]/.test(line))).toBe(true)
  } finally {
    link?.close()
  }
})

test('ctx.log writes a value that is not a string as util.inspect shows it, on one line, under the job’s name', async () => {
  const transport = new ScriptedTransport([aJobOf('logs-1', 'test.logs', {})])
  const lines = await started(transport, { modules: { 'logs.mjs': "export default { type: 'test.logs', run({ log }) { log({ a: 1, b: [2, 'x'] }); log('as it is'); return null } }\n" } })
  await until(() => transport.completed.length === 1, 5000, 'the job ran')
  expect(lines).toContain("[test.logs logs-1] { a: 1, b: [ 2, 'x' ] }")
  expect(lines).toContain('[test.logs logs-1] as it is')
})

test('.js and .cjs files in the handlers folder are not loaded, and the worker says so in one line naming them as it starts', async () => {
  const transport = new ScriptedTransport([])
  const lines = await started(transport, { modules: { 'old.js': 'module.exports = {}\n', 'legacy.cjs': 'module.exports = {}\n', 'where.mjs': WHERE } })
  const said = lines.filter((l) => l.includes('only *.mjs'))
  expect(said).toEqual([expect.stringMatching(/^leasehold worker: legacy\.cjs, old\.js in .* not loaded: only \*\.mjs files are loaded as handlers$/)])
})
