import { afterEach, expect, test } from 'vitest'
import { runCliAsync } from '../helpers/process'
import { cleanUp, jobView, spawnWorker, startHost, submit, until, workerStarted } from './support'

afterEach(() => cleanUp())

const REFUSED = 'leasehold worker: the host refuses this worker (401 unauthorized'

test('a leasehold worker the host refuses (a token it does not know) says why and exits 1, instead of asking again every second', async () => {
  const host = await startHost({ workers: 0 })
  const worker = spawnWorker({ ...host, token: 'not-the-host-token' }, ['--grace-s', '1'])
  expect(await worker.exited).toBe(1)
  expect(worker.output()).toContain(REFUSED)
  expect(worker.output()).not.toContain('retrying')
})

test('a leasehold worker whose token is revoked while it runs stops at its next exchange with exit status 1; the job it held is leased again after its lease expires', async () => {
  const host = await startHost({ workers: 0, leaseTtlS: 2, heartbeatGraceS: 1 })
  const created = await runCliAsync(['token', 'create', '--scope', 'worker', '--data-dir', host.dataDir])
  const token = created.stdout.trim()
  const id = /token (\w+) \(scope worker\)/.exec(created.stderr)![1]!
  const worker = spawnWorker({ ...host, token }, ['--grace-s', '1'])
  await workerStarted(worker)
  expect((await runCliAsync(['token', 'revoke', id, '--data-dir', host.dataDir])).status).toBe(0)
  const claim = () => host.call('/internal/worker/claim', { method: 'POST', token, json: { worker_id: 'probe', streams: ['default'], max_wait_ms: 0 } })
  await until(async () => (await claim()).status === 401, 5000, 'the revoked token refused')

  // The worker's long-poll was let in before the revoke: it is granted this job, and the report
  // of its run is the exchange the host refuses.
  const job = await submit(host, { job_type: 'noop' })
  expect(await worker.exited).toBe(1)
  expect(worker.output()).toContain(REFUSED)
  expect(worker.output()).not.toContain('retrying')
  await until(async () => (await jobView(host, job)).job.state === 'QUEUED', 10_000, 'the job queued again once its lease expired')
})
