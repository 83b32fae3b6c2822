/**
 * The command line's client (node:http, keeping connections alive between a command's requests)
 * resends a request whose reused connection was cut before any answer, when sending it twice is
 * harmless: a read, or a submit naming its client_request_id. A proxy that cuts every reused
 * connection stands in for the host closing an idle one as the request leaves.
 */
import { afterAll, beforeAll, expect, test } from 'vitest'
import { answered, hostApi } from '../../src-main/commands/http-client'
import { type CuttingProxy, cuttingProxy } from '../helpers/cutting-proxy'
import { startTestHost, type TestHost } from '../helpers/host'

let host: TestHost
let proxy: CuttingProxy

beforeAll(async () => {
  host = await startTestHost({ workers: 0 })
  proxy = await cuttingProxy(host.url)
})
afterAll(async () => {
  await proxy.close()
  await host.dispose()
})

test('the CLI client resends a read and a keyed submit whose reused connection was cut, and not a submit without a key', async () => {
  const target = { url: proxy.url, token: host.token }
  const api = hostApi(target)
  // Requests in a row reuse the agent's keep-alive connections.
  for (let i = 0; i < 6; i++) await answered(target, api.GET('/api/health'))
  expect(proxy.cuts()).toBeGreaterThan(0)

  let cuts = proxy.cuts()
  for (let i = 0; i < 6; i++) {
    const { job } = await answered(target, api.POST('/api/scheduler/jobs/submit', { body: { job_type: 'noop', cost_units: 1, client_request_id: `cli-${i}` } }))
    expect(job.client_request_id).toBe(`cli-${i}`)
  }
  expect(proxy.cuts()).toBeGreaterThan(cuts)

  cuts = proxy.cuts()
  const bare: PromiseSettledResult<unknown>[] = []
  for (let i = 0; i < 6; i++) {
    await answered(target, api.GET('/api/health')) // connections for the submit to reuse
    bare.push(...(await Promise.allSettled([answered(target, api.POST('/api/scheduler/jobs/submit', { body: { job_type: 'noop', cost_units: 1 } }))])))
  }
  expect(proxy.cuts()).toBeGreaterThan(cuts)
  const refused = bare.filter((result) => result.status === 'rejected')
  expect(refused.length).toBeGreaterThan(0)
  for (const result of refused) expect(String((result as PromiseRejectedResult).reason)).toMatch(/cannot reach the host/)
  const listed = (await (await host.call('/api/scheduler/jobs?limit=100')).json()) as { jobs: { client_request_id: string | null }[] }
  expect(listed.jobs.filter((job) => job.client_request_id === null)).toHaveLength(6 - refused.length)
})
