/**
 * The host's reaper on the machine's own clock: it sleeps until the next lease comes due, at most
 * a second, so a silent lease expires at its expires_at rather than at the next pass of a poll.
 */
import { afterEach, expect, test } from 'vitest'
import { startTestHost, type TestHost } from '../helpers/host'
import { body, post, PULL, submit, until } from './support'

let host: TestHost | undefined
afterEach(async () => {
  await host?.dispose()
  host = undefined
})

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

test('silent leases granted a third of a second apart each expire at their own expires_at, not at the next of once-a-second passes', async () => {
  host = await startTestHost({ leaseTtlS: 1, heartbeatGraceS: 0 })
  const leases: { job_id: string; lease_id: string; expires_at: string }[] = []
  for (const worker of ['p1', 'p2', 'p3']) {
    const job = await submit(host, { cost_units: 1, max_attempts: 5 })
    const { lease } = await body(await post(host, `${PULL}/request`, { worker_id: worker }))
    expect(lease.job_id).toBe(job.job_id)
    leases.push(lease)
    await sleep(333)
  }
  const t = host
  await until(() => leases.every((lease) => t.engine.getLease(lease.lease_id).state === 'EXPIRED'), 5_000)
  // A reaper that woke once a second whatever was due would reach these three moments, spread
  // over a second, between 0 and 1,000 ms late each: one of them at least 666 ms late.
  const lateness = leases.map((lease) => {
    const expired = t.engine.jobEvents(lease.job_id).find((event) => event.event_type === 'LEASE_EXPIRED')
    return expired!.ts - Date.parse(lease.expires_at)
  })
  for (const ms of lateness) expect(ms).toBeGreaterThanOrEqual(0)
  expect(Math.max(...lateness)).toBeLessThan(600)
})
