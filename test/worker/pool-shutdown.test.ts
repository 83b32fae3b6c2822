/**
 * A local worker's handler that ignores its abort signal when the host stops: the pool gives its
 * workers the drain grace, then aborts their jobs; the worker reports the stuck job as failed
 * `shutdown` before the pool's kill, as `leasehold worker` does.
 */
import { afterEach, expect, test } from 'vitest'
import { startTestHost } from '../helpers/host'
import { attempts, cleanUp, dataDirWith, poolReady, settled, startHost, submit, until } from './support'

afterEach(() => cleanUp())

const DEAF = `export const type = 'test.deaf'
export async function run() { await new Promise((resolve) => setTimeout(resolve, 60_000)); return 'too late' }
`

test('a handler stuck at the pool\'s shutdown fails its attempt as shutdown (retryable), not as a worker that exited holding its lease', async () => {
  const host = await startHost({ dataDir: dataDirWith({ 'deaf.mjs': DEAF }), workers: 1, drainGraceS: 1 })
  await poolReady(host, 1)
  const id = await submit(host, { job_type: 'test.deaf', max_attempts: 1 })
  await until(() => attempts(host, id)[0], 10_000, 'the stuck job started')
  await host.stop()
  // The stopped host's records, read by the next host on its data dir.
  const next = await startTestHost({ dataDir: host.dataDir, workers: 0 })
  try {
    const { job, result } = await settled(next, id, 5_000)
    expect(job.state).toBe('FAILED')
    expect(result).toMatchObject({ error: { code: 'shutdown', retryable: true } })
  } finally {
    await next.stop()
  }
}, 30_000)
