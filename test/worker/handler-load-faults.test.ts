/**
 * A handler file that cannot be taken stops nothing else: on the host's pool and on `leasehold
 * worker`, it is reported as a handler that did not load, naming the file, and the other handlers
 * and the built-ins run.
 */
import { join } from 'node:path'
import { afterEach, expect, test } from 'vitest'
import { cleanUp, dataDirWith, poolReady, settled, spawnWorker, startHost, submit, workerStarted } from './support'

afterEach(() => cleanUp())

const BAD_TYPE = {
  'x.mjs': "export const type = 'x'.repeat(300); export function run() { return 1 }",
  'nul.mjs': "export const type = 'bad\\u0000type'; export function run() { return 1 }",
  'fine.mjs': "export const type = 'test.fine'; export function run() { return 'fine' }",
}

test('a handler whose job type the host refuses is reported naming its file and skipped: the pool runs the rest, noop too', async () => {
  const host = await startHost({ dataDir: dataDirWith(BAD_TYPE), workers: 1 })
  await poolReady(host, 1)
  for (const type of ['noop', 'test.fine']) expect((await settled(host, await submit(host, { job_type: type }), 10_000)).job.state, type).toBe('DONE')
  const log = host.lines.join('\n')
  expect(log).toMatch(/handler \S*x\.mjs did not load: its job type "x{40}"… \(300 characters\) is not one the host takes: Too big: expected string to have <=200 characters/)
  expect(log).toMatch(/handler \S*nul\.mjs did not load: its job type "bad\\u0000type" is not one the host takes/)
  expect(log).not.toContain('refuses this worker')
})

test('leasehold worker --handlers with a handler whose job type the host refuses reports it and takes jobs', async () => {
  const dataDir = dataDirWith(BAD_TYPE)
  const host = await startHost({ dataDir, workers: 0 })
  const worker = spawnWorker(host, ['--handlers', join(dataDir, 'handlers')])
  await workerStarted(worker)
  for (const type of ['noop', 'test.fine']) expect((await settled(host, await submit(host, { job_type: type }), 10_000)).job.state, type).toBe('DONE')
  expect(worker.output()).toMatch(/handler \S*x\.mjs did not load: its job type/)
  expect(worker.output()).not.toContain('refuses this worker')
})
