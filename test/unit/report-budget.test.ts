import { expect, test } from 'vitest'
import { failuresOfRefusedCompletions, ReportBudget, type Reports } from '../../src-worker/report-budget'
import { HostError } from '../../src-worker/transport'

const TOO_LARGE = new HostError(413, 'payload_too_large', 'The body is larger than 1048576 bytes')
const completion = (i: number) => ({ job_id: `job-${i}`, attempt_id: `a-${i}`, lease_token: `t-${i}`, result: { i } })
const failure = (i: number, message: string, stack?: string) => ({ job_id: `job-${i}`, attempt_id: `a-${i}`, lease_token: `t-${i}`, error: { code: 'boom', message, stack, retryable: true } })
const outboxOf = (complete: number, fail = 0): Reports => ({
  complete: Array.from({ length: complete }, (_, i) => completion(i)),
  fail: Array.from({ length: fail }, (_, i) => failure(complete + i, 'failed')),
})

test('an exchange carries the reports the budget allows, completions first, and leaves the rest for the next', () => {
  const budget = new ReportBudget()
  const outbox = outboxOf(3, 2)
  const sent = budget.take(outbox)
  expect(sent.complete).toHaveLength(3)
  expect(sent.fail).toHaveLength(2)
  expect(outbox).toEqual({ complete: [], fail: [] })

  const large = outboxOf(1500)
  expect(budget.take(large).complete).toHaveLength(1000) // the most one exchange may carry
  expect(large.complete).toHaveLength(500)
})

test('reports refused as too large go again half as many at a time, and the budget grows back as the host takes them', () => {
  const budget = new ReportBudget()
  const lines: string[] = []
  const sent = budget.take(outboxOf(8))
  expect(budget.afterRefused(sent, TOO_LARGE, (l) => lines.push(l))).toBe(sent)
  const outbox = outboxOf(8)
  expect(budget.take(outbox).complete).toHaveLength(4)
  budget.afterRefused(budget.take(outboxOf(4)), TOO_LARGE, () => {})
  expect(budget.take(outboxOf(8)).complete).toHaveLength(2)
  budget.taken()
  budget.taken()
  expect(budget.take(outboxOf(8)).complete).toHaveLength(8)
  expect(lines).toEqual([])
})

test('a completion too large on its own fails its attempt as result_too_large, not retryable', () => {
  const lines: string[] = []
  const again = new ReportBudget().afterRefused({ complete: [completion(7)], fail: [] }, TOO_LARGE, (l) => lines.push(l))
  expect(again).toEqual({
    complete: [],
    fail: [{ job_id: 'job-7', attempt_id: 'a-7', lease_token: 't-7', error: { code: 'result_too_large', message: 'The result is larger than the host accepts (413 payload_too_large: The body is larger than 1048576 bytes)', retryable: false } }],
  })
  expect(lines).toEqual(['leasehold worker: the result of job-7 is larger than the host accepts (413 payload_too_large: The body is larger than 1048576 bytes); its attempt fails as result_too_large'])
})

test('a failure too large on its own goes again cut short, and is dropped if even that is too large', () => {
  const budget = new ReportBudget()
  const lines: string[] = []
  const again = budget.afterRefused({ complete: [], fail: [failure(1, 'm'.repeat(5000), 's'.repeat(5000))] }, TOO_LARGE, (l) => lines.push(l))
  expect(again.fail).toEqual([{ job_id: 'job-1', attempt_id: 'a-1', lease_token: 't-1', error: { code: 'boom', message: 'm'.repeat(1000), retryable: true } }])
  expect(budget.afterRefused(again, TOO_LARGE, (l) => lines.push(l))).toEqual({ complete: [], fail: [] })
  expect(lines).toEqual(['leasehold worker: the failure of job-1 is larger than the host accepts (413 payload_too_large: The body is larger than 1048576 bytes) even cut short; dropped, its lease expires on the host'])
})

test('reports refused as invalid go again in halves until the one the host refuses is alone, and that one is dropped', () => {
  const INVALID = new HostError(400, 'invalid_request', 'exchange: Too big: expected number to be <=1')
  const budget = new ReportBudget()
  const lines: string[] = []
  const sent = budget.take(outboxOf(2, 2))
  expect(budget.afterRefused(sent, INVALID, (l) => lines.push(l))).toBe(sent)
  expect(budget.take(outboxOf(4)).complete).toHaveLength(2)
  expect(budget.afterRefused({ complete: [], fail: [failure(3, 'failed')] }, INVALID, (l) => lines.push(l))).toEqual({ complete: [], fail: [] })
  expect(budget.afterRefused({ complete: [completion(5)], fail: [] }, INVALID, (l) => lines.push(l))).toEqual({ complete: [], fail: [] })
  expect(lines).toEqual([
    'leasehold worker: the host refuses the report of job-3 as invalid (400 invalid_request: exchange: Too big: expected number to be <=1); dropped, its lease expires on the host',
    'leasehold worker: the host refuses the report of job-5 as invalid (400 invalid_request: exchange: Too big: expected number to be <=1); dropped, its lease expires on the host',
  ])
})

test('a completion refused file_lease_lost fails as its own attempt: the answer in its place names it, not its job id (two attempts of one job may go in one exchange)', () => {
  const old = { job_id: 'j', attempt_id: 'j-a1', lease_token: 'j-t1', result: null }
  const next = { job_id: 'j', attempt_id: 'j-a2', lease_token: 'j-t2', result: null }
  const answers = [
    { job_id: 'j', ok: true as const, ack: true },
    { job_id: 'j', ok: false as const, ack: false, code: 'file_lease_lost', detail: 'An operator took a file from this lease' },
  ]
  expect(failuresOfRefusedCompletions([old, next], answers)).toEqual([{ job_id: 'j', attempt_id: 'j-a2', lease_token: 'j-t2', error: expect.objectContaining({ code: 'file_lease_lost', retryable: true }) }])
})
