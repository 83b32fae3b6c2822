/**
 * A local pool started with --worker-gpu true: its workers say in their claims that they have a
 * GPU, so a job submitted with constraints.gpu_required runs on them (a pool without the setting
 * leaves it: pool.test.ts).
 */
import { afterAll, expect, test } from 'vitest'
import { attempts, cleanUp, dataDirWith, ECHO, poolReady, settled, startHost, submit } from './support'

afterAll(() => cleanUp())

test('a local pool started with --worker-gpu true runs a job that needs a GPU', async () => {
  const host = await startHost({ dataDir: dataDirWith({ 'echo.mjs': ECHO }), workers: 1, workerGpu: true })
  await poolReady(host, 1)
  const gpu = await submit(host, { job_type: 'test.echo', constraints: { gpu_required: true }, payload: { gpu: true } })
  expect((await settled(host, gpu, 15_000)).result).toMatchObject({ status: 'SUCCEEDED', result_data: { echo: { gpu: true } } })
  expect(attempts(host, gpu).map((a) => a.worker_id)).toEqual([expect.stringMatching(/^local-1\./)])
})
