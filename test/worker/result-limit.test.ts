/**
 * The body limit holds for the host's own workers too: a result or an error larger than the
 * host's `--body-limit` is found in the worker, before it crosses to the host, as `leasehold
 * worker` finds it from the host's 413.
 */
import { afterEach, expect, test } from 'vitest'
import { join } from 'node:path'
import { REPORT_ENVELOPE_BYTES } from '../../src-shared/limits'
import { cleanUp, dataDirWith, poolReady, settled, spawnWorker, startHost, submit, workerStarted } from './support'

afterEach(() => cleanUp())

const LIMIT = 64 * 1024

const HANDLERS = {
  'big-text.mjs': "export default { type: 'test.big-text', run: () => 'x'.repeat(100_000) }",
  'big-object.mjs': "export default { type: 'test.big-object', run: () => ({ rows: Array.from({ length: 20_000 }, (_, i) => i * 1000) }) }",
  'big-error.mjs': "export default { type: 'test.big-error', run: () => { throw Object.assign(new Error('e'.repeat(100_000)), { code: 'too_wordy' }) } }",
  'fits.mjs': "export default { type: 'test.fits', run: () => 'y'.repeat(10_000) }",
}

test("a local worker's result larger than the host's --body-limit fails its attempt as result_too_large, not retried; a larger error is reported cut short; the rest go on", async () => {
  const host = await startHost({ dataDir: dataDirWith(HANDLERS), workers: 1, bodyLimitBytes: LIMIT })
  await poolReady(host, 1)
  // Each type twice, one at a time: the first runs on a thread the runtime reports for, the next
  // on the driving thread, which reports its own.
  for (let i = 0; i < 2; i++) {
    for (const type of ['test.big-text', 'test.big-object']) {
      const { job, result } = await settled(host, await submit(host, { job_type: type, max_attempts: 3 }), 10_000)
      expect(job.state, type).toBe('FAILED')
      expect(result, type).toMatchObject({ attempts: 1, error: { code: 'result_too_large', retryable: false } })
      expect(result!.error.message, type).toContain(`at most ${LIMIT - REPORT_ENVELOPE_BYTES} bytes: its --body-limit, ${LIMIT}, less ${REPORT_ENVELOPE_BYTES} for the exchange around it`)
    }
    const { result } = await settled(host, await submit(host, { job_type: 'test.big-error', max_attempts: 1 }), 10_000)
    expect(result!.error).toMatchObject({ code: 'too_wordy', retryable: true })
    expect(result!.error.message).toHaveLength(1000)
    expect(result!.error.stack ?? null).toBeNull()
    expect((await settled(host, await submit(host, { job_type: 'test.fits' }), 10_000)).result!.result_data).toHaveLength(10_000)
  }
  expect(host.lines.join('\n')).not.toContain('retrying')
})

/** Results of `bytes` bytes of JSON (a string of `bytes - 2` characters and its quotes). */
const SIZED = { 'sized.mjs': "export default { type: 'test.sized', run: ({ payload }) => 'x'.repeat(payload.bytes - 2) }" }

test('a result is held to the body limit less the room for the exchange around it: one that fits the limit only without its exchange fails on a local worker as on leasehold worker, one within the room is taken by both', async () => {
  const dataDir = dataDirWith(SIZED)
  const host = await startHost({ dataDir, workers: 1, bodyLimitBytes: LIMIT })
  await poolReady(host, 1)
  const outcomes = async () => {
    const out: Record<number, unknown> = {}
    for (const bytes of [LIMIT - 100, LIMIT - REPORT_ENVELOPE_BYTES]) {
      const { job, result } = await settled(host, await submit(host, { job_type: 'test.sized', payload: { bytes }, max_attempts: 3 }), 20_000)
      out[bytes] = { state: job.state, attempts: result?.attempts, code: result?.error?.code ?? null }
    }
    return out
  }
  const expected = {
    [LIMIT - 100]: { state: 'FAILED', attempts: 1, code: 'result_too_large' },
    [LIMIT - REPORT_ENVELOPE_BYTES]: { state: 'DONE', attempts: 1, code: null },
  }
  expect(await outcomes()).toEqual(expected)
  await host.pool!.stop(1000)
  const worker = spawnWorker(host, ['--handlers', join(dataDir, 'handlers')])
  await workerStarted(worker)
  expect(await outcomes()).toEqual(expected)
})
