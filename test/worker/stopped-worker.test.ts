/**
 * A worker frozen with SIGSTOP past its lease: the host expires the lease, another worker
 * completes the job, and when the frozen worker wakes (SIGCONT) the host refuses what it says
 * under the old lease (409), so it drops its result and aborts its handler. Each job ends with
 * exactly one accepted completion.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, expect, test } from 'vitest'
import { tempDir } from '../helpers/host'
import { attempts, cleanUp, events, HOLD, settled, spawnWorker, startHost, submit, until, waitForEvent, workerStarted, writeHandlers } from './support'

const dirs: string[] = []
afterEach(() => cleanUp(dirs))

test('SIGSTOP past the lease: another worker completes the job; after SIGCONT the old worker is refused, drops its result and aborts its handler', async () => {
  const host = await startHost({ workers: 0, leaseTtlS: 2, heartbeatGraceS: 1 })
  const dir = tempDir('leasehold-stopped-')
  dirs.push(dir)
  const handlers = writeHandlers(join(dir, 'handlers'), { 'hold.mjs': HOLD })
  const marker = join(dir, 'marker.log')
  writeFileSync(marker, '')

  // The worker to be frozen holds test.hold jobs for a minute (its environment says so).
  const frozen = spawnWorker(host, ['--worker-id', 'frozen', '--concurrency', '2', '--handlers', handlers], { LEASEHOLD_TEST_HOLD_MS: '60000' })
  await workerStarted(frozen)
  const held = await submit(host, { job_type: 'test.hold', payload: { ms: 200, marker } })
  const sleeping = await submit(host, { job_type: 'sleep', payload: { ms: 1000 } })
  await until(() => [held, sleeping].every((id) => attempts(host, id)[0]?.worker_id === 'frozen'), 5000, 'both jobs claimed by the frozen worker')
  await until(() => readFileSync(marker, 'utf8').includes(`started ${frozen.pid}`), 5000, 'the held handler started')

  frozen.child.kill('SIGSTOP')
  const rescuer = spawnWorker(host, ['--worker-id', 'rescuer', '--concurrency', '2', '--handlers', handlers])

  // No heartbeat for ttl + grace = 3 s: the reaper expires both leases and requeues the jobs.
  for (const id of [held, sleeping]) {
    const expired = await waitForEvent(host, { job: id, type: 'LEASE_EXPIRED' }, 8000)
    expect(expired.data).toMatchObject({ reason: 'no_heartbeat', worker_id: 'frozen' })
    await waitForEvent(host, { job: id, type: 'JOB_REQUEUED', where: (e) => e.id > expired.id }, 1000)
  }
  await workerStarted(rescuer)
  // Requeued with a 2 s backoff, then claimed and run by the rescuer.
  for (const id of [held, sleeping]) {
    const { job, result } = await settled(host, id, 10_000).catch((error: Error) => {
      throw new Error(`${error.message}; the rescuer's output: ${rescuer.output()}`)
    })
    expect(job.state).toBe('DONE')
    expect(attempts(host, id).map((a) => [a.worker_id, a.outcome])).toEqual([
      ['frozen', 'TIMEOUT'],
      ['rescuer', 'SUCCEEDED'],
    ])
    if (id === held) expect(result!.result_data).toEqual({ pid: rescuer.pid, held_ms: 200 })
  }

  frozen.child.kill('SIGCONT')
  // Its next heartbeat (or its completion) is refused with 409: it says so and drops the result…
  await until(() => frozen.output().includes(`lost the lease of ${held}`), 5000, `frozen worker logs the lost lease of ${held}; output: ${frozen.output()}`)
  await until(() => frozen.output().includes(`lost the lease of ${sleeping}`), 5000, `frozen worker logs the lost lease of ${sleeping}; output: ${frozen.output()}`)
  // …and the handler still holding its job is aborted, told why.
  await until(() => readFileSync(marker, 'utf8').includes(`aborted lease_lost ${frozen.pid}`), 5000, 'the frozen handler aborted')

  // It carries on as a worker: with the rescuer gone, it takes a new job and completes it. A
  // worker's reports go out in order, each exchange carrying all gathered before it, so once that
  // completion is in, any late report of the old leases has arrived too: nothing it said is accepted.
  rescuer.child.kill('SIGKILL')
  await rescuer.exited
  const next = await submit(host, { job_type: 'sleep', payload: { ms: 0 } })
  expect((await settled(host, next, 10_000)).job.state).toBe('DONE')
  expect(attempts(host, next).map((a) => [a.worker_id, a.outcome])).toEqual([['frozen', 'SUCCEEDED']])
  for (const id of [held, sleeping]) {
    expect(events(host, { job: id, type: 'JOB_DONE' })).toHaveLength(1)
    expect(events(host, { job: id, type: 'LEASE_EXPIRED' })).toHaveLength(1)
    expect(attempts(host, id).filter((a) => a.outcome === 'SUCCEEDED')).toHaveLength(1)
    expect((await settled(host, id, 100)).job.state).toBe('DONE')
  }
  expect(frozen.child.exitCode).toBeNull() // it carries on as a worker
}, 45_000)
