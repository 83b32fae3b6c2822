/**
 * The embedded pool with real processes: two local workers (child processes over IPC) on one
 * host, plus an external `leasehold worker` over HTTP. Jobs are submitted over HTTP (the
 * queue API). The host is shared by the tests of this file (starting worker processes is what costs
 * time); each test waits on its own jobs, and the one that kills a worker comes last.
 *
 * Lease TTL 2 s + grace 1 s: heartbeats every ~1 s, a silent lease expires after 3 s. The local
 * workers yield the CPU at niceness 7 (not the default 10, so that the setting is seen to pass).
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { getPriority } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import type { TestHost } from '../helpers/host'
import {
  attempts,
  cancelUnfinished,
  cleanUp,
  dataDirWith,
  DOES_NOT_PARSE,
  ECHO,
  events,
  HOLD,
  jobView,
  killChildren,
  NOT_A_HANDLER,
  poolReady,
  QUEUE,
  settled,
  SPIN,
  spawnWorker,
  startHost,
  submit,
  THROWS_ON_LOAD,
  until,
  waitForEvent,
  workerStarted,
} from './support'
import { database } from '../helpers/database'

const TTL_S = 2
const GRACE_S = 1
const WORKER_NICE = 7
/** This process's niceness as the tests start: the host in it is not lowered. */
const OWN_NICE = getPriority()

/** A handler of `type` that computes for `ms` and says at which niceness its thread ran. */
const niceness = (type: string, ms: number) => `import { getPriority } from 'node:os'
export default {
  type: '${type}',
  run() {
    const until = Date.now() + ${ms}
    while (Date.now() < until);
    return { nice: getPriority() }
  },
}
`

let host: TestHost & { lines: string[] }
let handlersDir: string

beforeAll(async () => {
  const dataDir = dataDirWith({
    'hold.mjs': HOLD,
    'spin.mjs': SPIN,
    'echo.mjs': ECHO,
    'broken.mjs': THROWS_ON_LOAD,
    'not-a-handler.mjs': NOT_A_HANDLER,
    'typo.mjs': DOES_NOT_PARSE,
    'niceness-long.mjs': niceness('test.niceness.long', 30),
    'niceness-short.mjs': niceness('test.niceness.short', 0),
  })
  handlersDir = join(dataDir, 'handlers')
  host = await startHost({ dataDir, workers: 2, leaseTtlS: TTL_S, heartbeatGraceS: GRACE_S, execAllow: [process.execPath], workerNice: WORKER_NICE })
  await poolReady(host, 2)
})

afterEach(async () => {
  await killChildren()
  if (host) cancelUnfinished(host)
})

afterAll(() => cleanUp())

interface WorkerView {
  worker_id: string
  kind: string
  pid: number | null
  state: string
  current_job_ids: string[]
  restarts: number
}

async function workers(): Promise<WorkerView[]> {
  const res = await host.call('/api/workers')
  return ((await res.json()) as { workers: WorkerView[] }).workers
}

test('jobs submitted over HTTP run to DONE on both local workers; an external leasehold worker runs jobs too', async () => {
  // Only the external worker takes the "outside" stream, so those jobs prove it ran them.
  const external = spawnWorker(host, ['--streams', 'outside', '--worker-id', 'outside-1', '--handlers', handlersDir])
  await workerStarted(external)

  const local = await Promise.all(Array.from({ length: 6 }, (_, i) => submit(host, { job_type: 'sleep', payload: { ms: 150 + 10 * i } })))
  const outside = [
    await submit(host, { job_type: 'sleep', queue: 'outside', payload: { ms: 50 } }),
    await submit(host, { job_type: 'test.echo', queue: 'outside', payload: { hello: 'outside' } }),
  ]
  for (const id of [...local, ...outside]) {
    const { job, result } = await settled(host, id, 15_000)
    expect(job.state, id).toBe('DONE')
    expect(result).toMatchObject({ status: 'SUCCEEDED', attempts: 1 })
    expect(events(host, { job: id, type: 'JOB_DONE' })).toHaveLength(1)
    expect(attempts(host, id)).toMatchObject([{ outcome: 'SUCCEEDED', disposition: 'FINAL' }])
  }
  expect((await jobView(host, local[0]!)).result!.result_data).toEqual({ slept_ms: expect.any(Number) })
  expect((await jobView(host, outside[1]!)).result!.result_data).toEqual({ echo: { hello: 'outside' }, pid: external.pid })

  const ranBy = (ids: string[]) => [...new Set(ids.map((id) => attempts(host, id)[0]!.worker_id))].sort()
  // Six jobs of ~150 ms on two workers that run one job at a time: both took part.
  expect(ranBy(local)).toEqual(['local-1.1', 'local-2.1'])
  expect(ranBy(outside)).toEqual(['outside-1'])
  // The external worker loaded the same user handlers and reported the broken ones too.
  const reported = events(host, { type: 'WORKER_PROBLEM' }).filter((e) => e.entity_id === 'outside-1')
  expect(reported.map((e) => e.data.kind)).toEqual(['handler_load_failed', 'handler_load_failed', 'handler_load_failed'])
  expect(external.output()).toMatch(/handler .*broken\.mjs did not load: this handler is broken on purpose \(broken\.mjs line 2\)/)
})

test('a job needing a GPU is left by local workers without one and run by a leasehold worker --gpu', async () => {
  const gpu = await submit(host, { job_type: 'test.echo', constraints: { gpu_required: true }, payload: { gpu: true } })
  const plain = await submit(host, { job_type: 'test.echo', payload: { gpu: false } })
  expect((await settled(host, plain, 5000)).job.state).toBe('DONE')
  expect((await jobView(host, gpu)).job.state).toBe('QUEUED')
  const withGpu = spawnWorker(host, ['--gpu', '--worker-id', 'gpu-1', '--handlers', handlersDir])
  await workerStarted(withGpu)
  expect((await settled(host, gpu, 15_000)).job.state).toBe('DONE')
  expect(attempts(host, gpu).map((a) => a.worker_id)).toEqual(['gpu-1'])
})

test('a local worker’s driving thread claims and reports its jobs over its link: jobs submitted one at a time run to DONE once', async () => {
  const before = host.pool!.linkRequests
  const ids: string[] = []
  for (let i = 0; i < 6; i++) {
    const id = await submit(host, { job_type: 'test.echo', payload: { i } })
    expect((await settled(host, id, 5000)).result).toMatchObject({ status: 'SUCCEEDED', attempts: 1, result_data: { echo: { i } } })
    ids.push(id)
  }
  for (const id of ids) expect(events(host, { job: id, type: ['LEASE_GRANTED', 'JOB_DONE'] })).toHaveLength(2)
  // Each job was granted to a claim that came over a link, and its completion went back the same way.
  expect(host.pool!.linkRequests - before).toBeGreaterThanOrEqual(ids.length)
})

test('a user handler module that fails to load is reported (WORKER_PROBLEM + a log line, naming the line of the file where it went wrong) and skipped; the other handlers still run', async () => {
  for (const workerId of ['local-1.1', 'local-2.1']) {
    const problems = events(host, { type: 'WORKER_PROBLEM' }).filter((e) => e.entity_id === workerId)
    expect(problems.map((e) => e.data.kind)).toEqual(['handler_load_failed', 'handler_load_failed', 'handler_load_failed'])
    const details = problems.map((e) => e.data.detail as string).sort()
    expect(details[0]).toBe(`${join(handlersDir, 'broken.mjs')}: this handler is broken on purpose (broken.mjs line 2)`)
    expect(details[1]).toBe(`${join(handlersDir, 'not-a-handler.mjs')}: does not export {type, run}`)
    // Node's loader names no place for a syntax error; the worker finds it.
    expect(details[2]).toBe(`${join(handlersDir, 'typo.mjs')}: Unexpected token '}' (typo.mjs line 3: run(job) { return resize( })`)
    expect(host.lines).toContainEqual(`[${workerId}] leasehold worker ${workerId}: handler ${join(handlersDir, 'broken.mjs')} did not load: this handler is broken on purpose (broken.mjs line 2)`)
  }

  const echo = await submit(host, { job_type: 'test.echo', payload: { n: 1 } })
  const sleep = await submit(host, { job_type: 'sleep', payload: { ms: 10 } })
  // The type the broken module would have registered is run by no worker: its job is granted to
  // none (each claim names the types its worker runs), and waits for a worker that runs it.
  const never = await submit(host, { job_type: 'test.never', max_attempts: 3 })
  expect((await settled(host, echo, 5000)).result).toMatchObject({ status: 'SUCCEEDED', result_data: { echo: { n: 1 } } })
  expect((await settled(host, sleep, 5000)).job.state).toBe('DONE')
  const after = await submit(host, { job_type: 'sleep', payload: { ms: 10 } })
  expect((await settled(host, after, 5000)).job.state).toBe('DONE')
  expect(host.engine.getJob(never)).toMatchObject({ state: 'QUEUED', attempts: 0 })
  expect(attempts(host, never)).toHaveLength(0)
  host.engine.cancel(never)
})

describe('exec', () => {
  test('a program off the allow-list is refused: FAILED with exec_not_allowed, not retried', async () => {
    const ids = [
      await submit(host, { job_type: 'exec', max_attempts: 3, payload: { program: '/bin/sh', args: ['-c', 'echo hi'] } }),
      // A bare name is allowed only when the allow-list has that bare name.
      await submit(host, { job_type: 'exec', max_attempts: 3, payload: { program: 'node', args: ['-e', '1'] } }),
    ]
    for (const id of ids) {
      const { job, result } = await settled(host, id, 5000)
      expect(job.state).toBe('FAILED')
      expect(result!.error).toMatchObject({ code: 'exec_not_allowed', retryable: false })
      expect(result!.attempts).toBe(1)
      expect(events(host, { job: id, type: 'JOB_REQUEUED' })).toHaveLength(0)
    }
  })

  test("a program off the allow-list is refused naming where that worker's list is set: the host's for a local worker, leasehold worker --exec-allow for that command's", async () => {
    const local = await submit(host, { job_type: 'exec', payload: { program: '/bin/sh' } })
    expect((await settled(host, local, 5000)).result!.error).toMatchObject({
      message: `exec: "/bin/sh" is not on the allow-list (the host's --exec-allow, or LEASEHOLD_EXEC_ALLOW)`,
    })
    const worker = spawnWorker(host, ['--streams', 'exec-external', '--exec-allow', process.execPath])
    await workerStarted(worker)
    const external = await submit(host, { job_type: 'exec', queue: 'exec-external', payload: { program: '/bin/sh' } })
    expect((await settled(host, external, 10_000)).result!.error).toMatchObject({
      code: 'exec_not_allowed',
      message: 'exec: "/bin/sh" is not on the allow-list (leasehold worker --exec-allow)',
    })
  })

  test('a program on the allow-list runs without a shell; its output and exit status come back, a non-zero exit fails', async () => {
    const ok = await submit(host, {
      job_type: 'exec',
      payload: { program: process.execPath, args: ['-e', "console.log('out line'); console.error('err line'); console.log(process.argv[1])", '$(echo pwned); ls *'] },
    })
    const bad = await submit(host, {
      job_type: 'exec',
      max_attempts: 1,
      payload: { program: process.execPath, args: ['-e', "console.log('before the exit'); process.exit(3)"] },
    })

    const done = await settled(host, ok, 10_000)
    expect(done.job.state).toBe('DONE')
    expect(done.result!.result_data.exit_code).toBe(0)
    const tail = (done.result!.result_data.output_tail as string).split('\n').sort()
    // The argument arrived as one literal string: no shell expanded it.
    expect(tail).toEqual(['$(echo pwned); ls *', 'err line', 'out line'].sort())

    const failed = await settled(host, bad, 10_000)
    expect(failed.job.state).toBe('FAILED')
    expect(failed.result!.error).toMatchObject({ code: 'exit_status', message: 'exec: exited with 3' })
    expect(attempts(host, bad)).toMatchObject([{ outcome: 'FAILED' }])
  })
})

// Niceness is each thread's on Linux: there the rule is seen thread by thread.
test.runIf(process.platform === 'linux')('local workers yield the CPU: handlers run as nice as --worker-nice says, but for the driving thread and the worker’s own thread', async () => {
  // A handler that computes 30 ms is never short: each job is handed to a thread that does not drive.
  const long = await Promise.all(Array.from({ length: 6 }, () => submit(host, { job_type: 'test.niceness.long' })))
  for (const id of long) expect((await settled(host, id, 5000)).result!.result_data).toEqual({ nice: WORKER_NICE })
  // A type that proves short runs on the driving thread, at the host's niceness: all but the
  // first of its jobs in each worker, which goes to another thread while its type is unknown (and
  // the next one or two, should a loaded machine make that first run look long).
  const short: number[] = []
  for (let i = 0; i < 12; i++) short.push((await settled(host, await submit(host, { job_type: 'test.niceness.short' }), 5000)).result!.result_data.nice as number)
  expect(short.filter((nice) => nice === OWN_NICE).length).toBeGreaterThanOrEqual(6)
  expect(short.filter((nice) => nice !== OWN_NICE && nice !== WORKER_NICE)).toEqual([])
  const local = (await workers()).filter((w) => w.kind === 'local')
  expect(local).toHaveLength(2)
  for (const worker of local) expect(getPriority(worker.pid!)).toBe(OWN_NICE)
  expect(getPriority()).toBe(OWN_NICE) // the host's own thread (this test's) is not lowered
})

test('cancel of a running job aborts its handler and the job ends CANCELED', async () => {
  const marker = join(host.dataDir, 'cancel-marker.log')
  writeFileSync(marker, '')
  const id = await submit(host, { job_type: 'test.hold', payload: { ms: 30_000, marker } })
  await until(() => readFileSync(marker, 'utf8').includes('started'), 5000, 'the handler started')
  expect((await jobView(host, id)).job.state).toBe('RUNNING')

  const res = await host.call(`${QUEUE}/jobs/${id}/cancel`, { method: 'POST', json: { reason: 'changed my mind' } })
  expect(res.status).toBe(200)
  expect((await res.json()).job).toMatchObject({ state: 'RUNNING', cancel_requested: true })

  // The worker hears of it with its next heartbeat (~1 s), aborts the handler and reports: the
  // job settles long before the handler's 30 s hold would have ended.
  const { job, result } = await settled(host, id, 5000)
  expect(job.state).toBe('CANCELED')
  expect(result!.error).toMatchObject({ code: 'canceled' })
  const pid = Number(/started (\d+)/.exec(readFileSync(marker, 'utf8'))![1])
  // signal.reason says why, by its message, and is no file-gate error.
  expect(readFileSync(marker, 'utf8')).toContain(`aborted canceled ${pid} JobStopped`)
  expect(events(host, { job: id }).map((e) => e.event_type)).toEqual(['JOB_SUBMITTED', 'LEASE_GRANTED', 'JOB_CANCEL_REQUESTED', 'JOB_CANCELED'])
  // The worker is free again.
  const next = await submit(host, { job_type: 'test.echo', payload: { after: 'cancel' } })
  expect((await settled(host, next, 5000)).job.state).toBe('DONE')
})

test('a handler that blocks its thread for 3× the TTL keeps its lease: the heartbeat runs on another thread', async () => {
  const spinMs = 3 * TTL_S * 1000
  const id = await submit(host, { job_type: 'test.spin', payload: { ms: spinMs } })
  const { job, result } = await settled(host, id, spinMs + 5000)
  expect(job.state).toBe('DONE')
  expect(result).toMatchObject({ status: 'SUCCEEDED', attempts: 1, result_data: { spun_ms: expect.any(Number) } })
  expect(result!.result_data.spun_ms).toBeGreaterThanOrEqual(spinMs)
  expect(events(host, { job: id, type: ['LEASE_EXPIRED', 'JOB_REQUEUED'] })).toHaveLength(0)
  expect(attempts(host, id)).toMatchObject([{ outcome: 'SUCCEEDED' }])
  // It heartbeat all along: the last heartbeat came well after TTL + grace.
  const lease = database(host.engine).prepare('SELECT granted_at, last_heartbeat_at FROM leases WHERE job_id = ?').get(id) as { granted_at: number; last_heartbeat_at: number }
  expect(lease.last_heartbeat_at - lease.granted_at).toBeGreaterThan((TTL_S + GRACE_S) * 1000)
})

test('kill -9 of a local worker mid-job: the job is requeued as the worker exits (not at its lease TTL), completed once by another worker, and the worker is restarted', async () => {
  const id = await submit(host, { job_type: 'sleep', payload: { ms: 2500 } })
  await waitForEvent(host, { job: id, type: 'LEASE_GRANTED' }, 5000)
  const victim = attempts(host, id)[0]!.worker_id
  const before = (await workers()).find((w) => w.worker_id === victim)!
  expect(before).toMatchObject({ kind: 'local', state: 'busy', current_job_ids: [id] })
  const pid = before.pid!
  // Mid-job: it has run for a while and reported progress.
  await until(async () => (await jobView(host, id)).job.progress > 0, 3000, 'progress reported')

  process.kill(pid, 'SIGKILL')
  // Its lease expires because its worker exited (a lease that ran out would say no_heartbeat):
  // the host did not wait for the TTL.
  await waitForEvent(host, { job: id, type: 'JOB_REQUEUED' }, 5000)
  expect(events(host, { job: id, type: 'LEASE_EXPIRED' })).toMatchObject([{ data: { reason: 'worker_exited', worker_id: victim } }])
  expect((await jobView(host, id)).job.state).toBe('QUEUED')

  // After its backoff another worker runs it; exactly one completion is accepted.
  const { job } = await settled(host, id, 12_000)
  expect(job.state).toBe('DONE')
  const tries = attempts(host, id)
  expect(tries.map((a) => a.outcome)).toEqual(['TIMEOUT', 'SUCCEEDED'])
  expect(tries[0]!.worker_id).toBe(victim)
  expect(tries[1]!.worker_id).not.toBe(victim)
  expect(events(host, { job: id, type: 'JOB_DONE' })).toHaveLength(1)

  // The killed worker's slot is running again, under a new id and pid.
  const slot = victim.split('.')[0]!
  await until(async () => (await workers()).some((w) => w.worker_id === `${slot}.2` && w.state === 'ready'), 15_000, `${slot}.2 ready`)
  const after = (await workers()).find((w) => w.worker_id === `${slot}.2`)!
  expect(after.restarts).toBe(1)
  expect(after.pid).not.toBe(pid)
  expect(host.pool!.pids()).toHaveLength(2)
  expect(host.pool!.pids()).not.toContain(pid)
  expect(host.lines.some((l) => l.startsWith(`leasehold: local worker ${victim} exited (signal); 1 lease(s) expired; restarting in`))).toBe(true)
})
