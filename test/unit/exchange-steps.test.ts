/** The steps of an exchange both talkers of a worker take (src-worker/exchange-steps.ts). */
import { expect, test } from 'vitest'
import { MAX_CLAIM_JOBS } from '../../src-shared/limits'
import { CLAIM_WAIT_MS, claimSize, exchangeRequest, ExchangeSteps } from '../../src-worker/exchange-steps'
import { HostContact, noAnswer } from '../../src-worker/transport'

const noReports = () => ({ complete: [], fail: [] })

test('a talker with no free slot, or fewer than none, sends no claim; one with more than the host grants at once asks for MAX_CLAIM_JOBS', () => {
  const steps = new ExchangeSteps(new HostContact(null))
  for (const free of [0, -1, -3]) expect(exchangeRequest('w', undefined, noReports(), steps.claim(['default'], undefined, undefined, claimSize(free), true))).toEqual({ worker_id: 'w' })
  expect(claimSize(MAX_CLAIM_JOBS + 10)).toBe(MAX_CLAIM_JOBS)
  expect(steps.claim(['default'], ['noop'], true, claimSize(3), true)).toEqual({ streams: ['default'], job_types: ['noop'], gpu_available: true, max_jobs: 3, max_wait_ms: CLAIM_WAIT_MS })
})

test("a long-poll's claim waits at the host, but not while the host is out of reach, and again once it answers", () => {
  const steps = new ExchangeSteps(new HostContact(null), 500)
  expect(steps.claim(['default'], undefined, undefined, 1, false)?.max_wait_ms).toBe(0)
  expect(steps.claim(['default'], undefined, undefined, 1, true)?.max_wait_ms).toBe(500)
  steps.retryAt(new Error('ECONNREFUSED'), () => {})
  expect(steps.claim(['default'], undefined, undefined, 1, true)?.max_wait_ms).toBe(0)
  steps.answered(noAnswer(), performance.now(), 1, false, () => {})
  expect(steps.claim(['default'], undefined, undefined, 1, true)?.max_wait_ms).toBe(500)
})
