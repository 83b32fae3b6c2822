import { afterEach, expect, test } from 'vitest'
import { cleanUp, dataDirWith, poolReady, settled, startHost, submit } from './support'

afterEach(() => cleanUp())

const HANDLERS = {
  'over.mjs': "export default { type: 'test.progress-over-1', run: ({ progress }) => { progress(2); return 'unreached' } }",
  'caught.mjs': "export default { type: 'test.progress-caught', run: ({ progress }) => { try { progress(Number.NaN) } catch { return 'went on' } } }",
  'note.mjs': "export default { type: 'test.long-note', run: ({ progress }) => { progress(0.5, 'n'.repeat(20_000)); return 'noted' } }",
  'bigint.mjs': "export default { type: 'test.bigint', run: () => ({ n: 1n }) }",
  'cycle.mjs': "export default { type: 'test.cycle', run: () => { const o = {}; o.self = o; return o } }",
  'function.mjs': "export default { type: 'test.function', run: () => ({ kept: 1, dropped() {} }) }",
  'proxy.mjs': "export default { type: 'test.throws-proxy', run: () => { throw new Proxy({}, { get() { throw new Error('trap') } }) } }",
  'getter.mjs':
    "export default { type: 'test.throws-getter', run: () => { const e = new Error('m'); Object.defineProperty(e, 'message', { get() { throw new Error('getter') } }); throw e } }",
}

test("a handler's mistakes (a progress outside 0–1, a result JSON cannot write, a thrown value that cannot be read) fail its own attempt; the worker's later reports go on", async () => {
  const host = await startHost({ dataDir: dataDirWith(HANDLERS), workers: 1 })
  await poolReady(host, 1)
  // Each type twice, one at a time: the first of a type runs on a thread the runtime reports
  // for, the next on the driving thread, which reports its own. A noop after each must be DONE.
  const expected: [string, Record<string, unknown>][] = [
    ['test.progress-over-1', { status: 'FAILED', error: { code: 'handler_error', message: 'progress() takes a fraction from 0 to 1, or null; got 2' } }],
    ['test.progress-caught', { status: 'SUCCEEDED', result_data: 'went on' }],
    ['test.long-note', { status: 'SUCCEEDED', result_data: 'noted' }],
    ['test.bigint', { status: 'FAILED', error: { code: 'result_not_json', retryable: false } }],
    ['test.cycle', { status: 'FAILED', error: { code: 'result_not_json', retryable: false } }],
    ['test.function', { status: 'SUCCEEDED', result_data: { kept: 1 } }],
    ['test.throws-proxy', { status: 'FAILED', error: { code: 'handler_error', message: '{}', retryable: true } }],
    ['test.throws-getter', { status: 'FAILED', error: { code: 'handler_error', message: '[object Error]', retryable: true } }],
  ]
  for (const [type, outcome] of expected) {
    for (let i = 0; i < 2; i++) {
      const { result } = await settled(host, await submit(host, { job_type: type, max_attempts: 1 }), 10_000)
      expect(result, type).toMatchObject(outcome)
      expect((await settled(host, await submit(host, { job_type: 'noop' }), 10_000)).job.state).toBe('DONE')
    }
  }
  expect(host.lines.join('\n')).not.toContain('retrying')
})

test('a progress note longer than 10,000 characters is kept cut, with a mark', async () => {
  const host = await startHost({ dataDir: dataDirWith(HANDLERS), workers: 1 })
  await poolReady(host, 1)
  const { job } = await settled(host, await submit(host, { job_type: 'test.long-note' }), 10_000)
  expect(job.note).toHaveLength(10_000)
  expect(job.note.endsWith('… (cut)')).toBe(true)
})
