/**
 * A `leasehold worker` whose host goes away and comes back: its log says each outage where it
 * begins (the retry line) and where it ends (the line that it reached the host again).
 */
import { afterEach, expect, test } from 'vitest'
import { cleanUp, spawnWorker, startHost, until, workerStarted } from './support'

afterEach(() => cleanUp())

test('leasehold worker says when it reaches the host again after it lost it, and logs a later outage again', async () => {
  const first = await startHost({ workers: 0 })
  const port = Number(new URL(first.url).port)
  const worker = spawnWorker(first, ['--worker-id', 'w-outage', '--grace-s', '1'])
  await workerStarted(worker)
  const lines = () => worker.output().split('\n')
  const retries = () => lines().filter((line) => line.startsWith('leasehold worker: the host did not answer (') && line.endsWith('; retrying in 1 s'))
  const agains = () => lines().filter((line) => line === `leasehold worker w-outage: connected to the host at ${first.url} again`)

  // Two outages within a minute, each ended by a host started again on the same port and data dir.
  let host = first
  for (const outage of [1, 2]) {
    await host.stop()
    await until(() => retries().length === outage, 10_000, `the retry line of outage ${outage} (output: ${worker.output()})`)
    host = await startHost({ workers: 0, dataDir: first.dataDir, port })
    await until(() => agains().length === outage, 10_000, `the end of outage ${outage} said (output: ${worker.output()})`)
  }
  // Said once each, whichever of the worker's talkers lost the host; each after its retry line.
  expect(lines().filter((line) => line.includes('connected to the host'))).toEqual(agains())
  expect(agains()).toHaveLength(2)
  const order = lines().filter((line) => retries().includes(line) || agains().includes(line))
  expect(order.map((line) => (line.includes('again') ? 'again' : 'retry'))).toEqual(['retry', 'again', 'retry', 'again'])
}, 60_000)
