/**
 * A report that cannot be written (a string too long for the engine, a BigInt, a cycle) fails
 * only its own attempt: every transport finds it before anything is sent and says so as an
 * UnsentRequest, and the report budget sends the rest again in halves until the one at fault is
 * alone and fails — never the retry every second that kept a whole worker from heartbeating.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, expect, test } from 'vitest'
import { ReportBudget } from '../../src-worker/report-budget'
import { type ExchangeRequest, UnsentRequest } from '../../src-worker/transport'
import { HttpTransport } from '../../src-worker/transport-http'
import { IpcTransport } from '../../src-worker/transport-ipc'
import { LinkTransport } from '../../src-worker/transport-link'
import { RedisTransport } from '../../src-worker/transport-redis'

const dir = mkdtempSync(join(tmpdir(), 'leasehold-unsendable-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const ref = (i: number) => ({ job_id: `job-${i}`, attempt_id: `a-${i}`, lease_token: `t-${i}` })
/** What JSON.stringify throws past the engine's longest string, without making one. */
const tooLong = { toJSON: () => { throw new RangeError('Invalid string length') } }
const withResult = (result: unknown): ExchangeRequest => ({ worker_id: 'w', complete: [{ ...ref(1), result: result as null }] })

async function refusal(send: () => Promise<unknown>): Promise<UnsentRequest> {
  const error = await send().then(() => null, (e: unknown) => e)
  expect(error).toBeInstanceOf(UnsentRequest)
  return error as UnsentRequest
}

test('every transport refuses to send a request JSON cannot write, before it leaves, naming why (IPC, link, HTTP, Redis)', async () => {
  // The IPC channel writes its message as Node's does: JSON, at the call.
  const ipc = new IpcTransport({ send: (message) => void JSON.stringify(message), onMessage: () => {} })
  const server = createServer(() => {}).listen(join(dir, 'link.sock'))
  await new Promise((resolve) => server.once('listening', resolve))
  const link = (await LinkTransport.open({ path: join(dir, 'link.sock'), token: 't', thread: 0 }, 'w', () => {}))!
  const http = new HttpTransport('http://127.0.0.1:1', 'token-token-token')
  const redis = new RedisTransport('redis://127.0.0.1:1', 'token-token-token', 'w', 'leasehold', 'thread-0')
  try {
    for (const transport of [ipc, link, http, redis]) {
      expect((await refusal(() => transport.exchange(withResult({ n: 1n })))).code).toBe('result_not_json')
      expect((await refusal(() => transport.exchange(withResult(tooLong)))).code).toBe('result_too_large')
    }
  } finally {
    link.close()
    http.close()
    redis.close()
    server.close()
  }
})

test('reports that cannot be sent go again in halves, and the one at fault alone fails its attempt as result_too_large or result_not_json, not retryable', () => {
  const budget = new ReportBudget()
  const lines: string[] = []
  const sent = { complete: [1, 2, 3].map((i) => ({ ...ref(i), result: i })), fail: [] }
  const tooLarge = new UnsentRequest('result_too_large', 'The request is too large to write (Invalid string length)')
  expect(budget.afterRefused(sent, tooLarge, (l) => lines.push(l))).toBe(sent)
  expect(budget.take({ complete: [...sent.complete], fail: [] }).complete).toHaveLength(1)
  expect(budget.afterRefused({ complete: [{ ...ref(2), result: 2 }], fail: [] }, tooLarge, (l) => lines.push(l))).toEqual({
    complete: [],
    fail: [{ ...ref(2), error: { code: 'result_too_large', message: 'The result could not be sent to the host: The request is too large to write (Invalid string length)', retryable: false } }],
  })
  const notJson = new UnsentRequest('result_not_json', 'The request cannot be written as JSON (Do not know how to serialize a BigInt)')
  expect(budget.afterRefused({ complete: [{ ...ref(4), result: 4 }], fail: [] }, notJson, () => {}).fail[0]!.error).toMatchObject({ code: 'result_not_json', retryable: false })
  expect(lines).toEqual(['leasehold worker: the result of job-2 could not be sent (The request is too large to write (Invalid string length)); its attempt fails as result_too_large'])
})
