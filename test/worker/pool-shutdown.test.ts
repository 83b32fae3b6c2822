/**
 * A local worker's handler that ignores its abort signal when the host stops: the pool gives its
 * workers the drain grace, then aborts their jobs; the worker reports the stuck job as failed
 * `shutdown` before the pool's kill, as `leasehold worker` does, and the stop costs the job no attempt.
 */
import { afterEach, expect, test } from 'vitest'
import { startTestHost } from '../helpers/host'
import { attempts, cleanUp, dataDirWith, jobView, poolReady, startHost, submit, until } from './support'

afterEach(() => cleanUp())

const DEAF = `export const type = 'test.deaf'
export async function run() { await new Promise((resolve) => setTimeout(resolve, 60_000)); return 'too late' }
`

test('a handler stuck at the pool\'s shutdown fails its attempt as shutdown, not as a worker that exited holding its lease, and its job loses no attempt to the stop', async () => {
  const host = await startHost({ dataDir: dataDirWith({ 'deaf.mjs': DEAF }), workers: 1, drainGraceS: 1 })
  await poolReady(host, 1)
  const id = await submit(host, { job_type: 'test.deaf', max_attempts: 1 })
  await until(() => attempts(host, id)[0], 10_000, 'the stuck job started')
  await host.stop()
  // The stopped host's records, read by the next host on its data dir.
  const next = await startTestHost({ dataDir: host.dataDir, workers: 0 })
  try {
    // Its one attempt ended FAILED `shutdown`; the job is back in the queue with one more, not dead-lettered.
    expect(attempts(next, id)).toEqual([expect.objectContaining({ outcome: 'FAILED', disposition: 'REQUEUED', error: expect.objectContaining({ code: 'shutdown', retryable: true }) })])
    const { job } = await jobView(next, id)
    expect(job).toMatchObject({ state: 'QUEUED', max_attempts: 2, dead_letter: false })
  } finally {
    await next.stop()
  }
}, 30_000)
