/**
 * A result nested deeper than the host takes, on every kind of worker: found where its handler
 * ran and failed at once as result_not_json, the other jobs' ends unaffected; and a message from
 * a handler thread that cannot be read ends the jobs it may have carried, naming why.
 */
import { join } from 'node:path'
import { afterEach, expect, test } from 'vitest'
import { cleanUp, dataDirWith, poolReady, settled, spawnWorker, startHost, submit, workerStarted } from './support'

afterEach(() => cleanUp())

const HANDLERS = {
  'deepres.mjs': "export const type = 'test.deepres'; export function run({ payload }) { let o = {}; for (let i = 0; i < payload.n; i++) o = { o }; return o }",
  'unreadable.mjs': `import { parentPort } from 'node:worker_threads'
export const type = 'test.unreadable'
export async function run() {
  let o = {}
  for (let i = 0; i < 5000; i++) o = { o }
  parentPort.postMessage([o])
  await new Promise((resolve) => setTimeout(resolve, 60_000))
}`,
}

test('a result nested too deep fails its attempt at once as result_not_json, not retried, on a local worker; the jobs ending beside it are reported', async () => {
  const host = await startHost({ dataDir: dataDirWith(HANDLERS), workers: 1 })
  await poolReady(host, 1)
  for (const n of [600, 5000, 100_000]) {
    const deep = await submit(host, { job_type: 'test.deepres', payload: { n }, max_attempts: 3 })
    const others = await Promise.all(Array.from({ length: 8 }, () => submit(host, { job_type: 'noop' })))
    const { job, result } = await settled(host, deep, 10_000)
    expect(job.state, `n=${n}`).toBe('FAILED')
    expect(result, `n=${n}`).toMatchObject({ attempts: 1, error: { code: 'result_not_json', retryable: false, message: expect.stringContaining('nested too deep') } })
    for (const other of others) expect((await settled(host, other, 10_000)).job.state).toBe('DONE')
  }
})

test('a result nested too deep fails its attempt at once as result_not_json on leasehold worker too, not dropped as the host refuses it', async () => {
  const dataDir = dataDirWith(HANDLERS)
  const host = await startHost({ dataDir, workers: 0 })
  const worker = spawnWorker(host, ['--handlers', join(dataDir, 'handlers')])
  await workerStarted(worker)
  for (const n of [600, 5000, 100_000]) {
    const { job, result } = await settled(host, await submit(host, { job_type: 'test.deepres', payload: { n }, max_attempts: 3 }), 10_000)
    expect(job.state, `n=${n}`).toBe('FAILED')
    expect(result, `n=${n}`).toMatchObject({ attempts: 1, error: { code: 'result_not_json', retryable: false } })
  }
  expect(worker.output()).not.toContain('refuses the report')
})

test('a message from a handler thread that cannot be read ends the thread: its jobs fail as thread_exited naming why, at once, and a new thread runs the next', async () => {
  const host = await startHost({ dataDir: dataDirWith(HANDLERS), workers: 1 })
  await poolReady(host, 1)
  const { job, result } = await settled(host, await submit(host, { job_type: 'test.unreadable', max_attempts: 1 }), 10_000)
  expect(job.state).toBe('FAILED')
  expect(result!.error).toMatchObject({ code: 'thread_exited', message: expect.stringContaining('a message from the handler thread could not be read') })
  expect((await settled(host, await submit(host, { job_type: 'noop' }), 10_000)).job.state).toBe('DONE')
})
