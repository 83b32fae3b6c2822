/**
 * The worker runtime against a scripted transport (real handler threads, no host): what it does
 * with answers that arrive late.
 */
import { afterEach, expect, test } from 'vitest'
import { WorkerRuntime } from '../../src-worker/runtime'
import { type AttemptError, type Claim, type HeartbeatAnswer, LeaseLostError, type WorkerTransport } from '../../src-worker/transport'
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

/** Hands out the given claims in order, then waits; heartbeats answer as `beat` says. */
class ScriptedTransport implements WorkerTransport {
  readonly completed: { job_id: string; result: unknown }[] = []
  readonly failed: { job_id: string; error: AttemptError }[] = []
  constructor(
    private readonly claims: Claim[],
    private readonly beat: (jobId: string) => Promise<HeartbeatAnswer>,
  ) {}
  claim(_request: unknown, signal: AbortSignal): Promise<Claim | null> {
    const next = this.claims.shift()
    if (next) return Promise.resolve(next)
    return new Promise((resolve) => signal.addEventListener('abort', () => resolve(null), { once: true }))
  }
  heartbeat(ref: { job_id: string }): Promise<HeartbeatAnswer> {
    return this.beat(ref.job_id)
  }
  async complete(ref: { job_id: string; result: unknown }): Promise<void> {
    this.completed.push({ job_id: ref.job_id, result: ref.result })
  }
  async fail(ref: { job_id: string; error: AttemptError }): Promise<void> {
    this.failed.push({ job_id: ref.job_id, error: ref.error })
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
  const transport = new ScriptedTransport([aClaim('job-1', 100), aClaim('job-2', 600)], (jobId) =>
    jobId === 'job-1'
      ? new Promise((_, reject) => setTimeout(() => reject(new LeaseLostError('lease_not_active', 'Lease job-1-l was released (SUCCEEDED)')), 350))
      : Promise.resolve({ cancel_requested: false }),
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
