/**
 * The worker runtime against a scripted transport (real handler threads, no host): what it does
 * with answers that arrive late.
 */
import { afterEach, expect, test } from 'vitest'
import { WorkerRuntime } from '../../src-worker/runtime'
import type { AttemptError, Claim, ExchangeAnswer, ExchangeRequest, ReportAnswer, WorkerTransport } from '../../src-worker/transport'
import { until } from './support'

function aClaim(id: string, ms: number): Claim {
  return {
    job_id: id,
    attempt_id: `${id}-a`,
    lease_id: `${id}-l`,
    lease_token: `${id}-t`,
    job_type: 'sleep',
    payload: { ms },
    max_runtime_s: null,
    lease_ttl_seconds: 1,
    heartbeat_interval_seconds: 0.05, // scripted: beat every ~50 ms
  }
}

/**
 * Hands out the given claims as asked (up to max_jobs each time), then lets a claim wait until
 * the worker stops; heartbeats are answered as `beat` says; records every request.
 */
class ScriptedTransport implements WorkerTransport {
  readonly completed: { job_id: string; result: unknown }[] = []
  readonly failed: { job_id: string; error: AttemptError }[] = []
  readonly requests: ExchangeRequest[] = []
  constructor(
    private readonly claims: Claim[],
    private readonly beat: (jobId: string) => Promise<ReportAnswer> = async (job_id) => ({ job_id, ok: true, cancel_requested: false }),
  ) {}
  async exchange(request: ExchangeRequest, signal?: AbortSignal): Promise<ExchangeAnswer> {
    this.requests.push(request)
    for (const c of request.complete ?? []) this.completed.push({ job_id: c.job_id, result: c.result })
    for (const f of request.fail ?? []) this.failed.push({ job_id: f.job_id, error: f.error })
    const heartbeats = await Promise.all((request.heartbeat ?? []).map((h) => this.beat(h.job_id)))
    const answer: ExchangeAnswer = {
      heartbeats,
      completed: (request.complete ?? []).map((c) => ({ job_id: c.job_id, ok: true })),
      failed: (request.fail ?? []).map((f) => ({ job_id: f.job_id, ok: true })),
      jobs: this.claims.splice(0, request.claim?.max_jobs ?? 0),
    }
    if (answer.jobs.length > 0 || !request.claim || request.claim.max_wait_ms === 0) return answer
    return new Promise((resolve) => signal?.addEventListener('abort', () => resolve(answer), { once: true }))
  }
  acquireFile(): never {
    throw new Error('not scripted')
  }
  waitFileRetry(): never {
    throw new Error('not scripted')
  }
  async heartbeatFile(): Promise<void> {}
  async report(): Promise<void> {}
  close(): void {}
}

let runtime: WorkerRuntime | null = null
afterEach(async () => {
  await runtime?.stop(0)
  runtime = null
})

test("a heartbeat answer that arrives after its job ended does not stop the next job on the same thread", async () => {
  // Job 1's first heartbeat is answered late with 409 (its lease was released by the completion
  // that overtook it); by then job 1 is done and job 2 runs on the same handler thread.
  const transport = new ScriptedTransport([aClaim('job-1', 100), aClaim('job-2', 600)], (job_id) =>
    job_id === 'job-1'
      ? new Promise((resolve) => setTimeout(() => resolve({ job_id, ok: false, code: 'lease_not_active', detail: 'Lease job-1-l was released (SUCCEEDED)' }), 350))
      : Promise.resolve({ job_id, ok: true, cancel_requested: false }),
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

test('a worker with free slots claims them in one request, and reports finished jobs together with its next claim', async () => {
  const transport = new ScriptedTransport(Array.from({ length: 6 }, (_, i) => aClaim(`job-${i}`, 50)))
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
  await until(() => transport.requests.length >= 1, 5000, 'the first claim')
  await new Promise((r) => setTimeout(r, 50))
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
  await new Promise((r) => setTimeout(r, 100)) // anything still queued would go out now
  const sent = transport.requests.flatMap((r) => [...(r.heartbeat ?? []).map((h) => ({ beat: h.progress })), ...(r.complete ?? []).map((c) => ({ done: c.progress ?? null }))])
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
