import { expect, test } from 'vitest'
import { faultIn } from '../../src-shared/json-faults'
import { MAX_RESULT_DEPTH } from '../../src-shared/worker-exchange'
import { progressOf, resultOf } from '../../src-worker/handler-output'

test('progress takes a fraction from 0 to 1 or none, and throws at the call on anything else', () => {
  expect(progressOf(0, undefined)).toEqual({ fraction: 0, note: null })
  expect(progressOf(1, 'done')).toEqual({ fraction: 1, note: 'done' })
  expect(progressOf(null, 'a note alone')).toEqual({ fraction: null, note: 'a note alone' })
  expect(progressOf(undefined, undefined)).toEqual({ fraction: null, note: null })
  for (const wrong of [2, -0.1, Number.NaN, Infinity, '0.5', {}]) expect(() => progressOf(wrong, undefined)).toThrow(RangeError)
  expect(() => progressOf('0.5', undefined)).toThrow('progress() takes a fraction from 0 to 1, or null; got "0.5"')
  expect(() => progressOf(0.5, 42)).toThrow(TypeError)
})

test('a progress note longer than the exchange carries is cut, with a mark', () => {
  const { note } = progressOf(0.5, 'n'.repeat(20_000))
  expect(note).toHaveLength(10_000)
  expect(note!.endsWith('… (cut)')).toBe(true)
})

test("a handler's result is its JSON form: undefined is null, functions are dropped, a Date is its text", () => {
  expect(resultOf(undefined)).toEqual({ ok: true, result: null })
  expect(resultOf('text')).toEqual({ ok: true, result: 'text' })
  expect(resultOf(Number.NaN)).toEqual({ ok: true, result: null })
  expect(resultOf(() => 1)).toEqual({ ok: true, result: null })
  expect(resultOf({ n: 1, f() {}, at: new Date(0) })).toEqual({ ok: true, result: { n: 1, at: '1970-01-01T00:00:00.000Z' } })
})

test('a result JSON cannot write (a BigInt, a cycle) fails the attempt as result_not_json, not retryable', () => {
  const cycle: Record<string, unknown> = {}
  cycle.self = cycle
  for (const value of [{ n: 1n }, cycle]) {
    const outcome = resultOf(value)
    expect(outcome.ok).toBe(false)
    if (!outcome.ok) {
      expect(outcome.error.code).toBe('result_not_json')
      expect(outcome.error.retryable).toBe(false)
      expect(outcome.error.message).toMatch(/^The handler's result cannot be written as JSON: /)
    }
  }
})

/** A value nested `levels` deep: `{o: {o: … {}}}`. */
function nested(levels: number): unknown {
  let value: unknown = {}
  for (let i = 1; i < levels; i++) value = { o: value }
  return value
}

test('a result nested deeper than MAX_RESULT_DEPTH fails the attempt as result_not_json, not retryable, saying it is nested too deep', () => {
  expect(resultOf(nested(MAX_RESULT_DEPTH))).toEqual({ ok: true, result: nested(MAX_RESULT_DEPTH) })
  for (const levels of [MAX_RESULT_DEPTH + 1, 600, 1000]) {
    const outcome = resultOf(nested(levels))
    expect(outcome, `${levels} levels`).toEqual({ ok: false, error: { code: 'result_not_json', message: expect.stringContaining('nested too deep'), retryable: false } })
  }
})

test('a result as deep as MAX_RESULT_DEPTH fits in an exchange the host takes; one level more does not', () => {
  const exchange = (result: unknown) => ({ worker_id: 'w', complete: [{ job_id: 'j', attempt_id: 'a', lease_token: 't', result }] })
  expect(faultIn(exchange(nested(MAX_RESULT_DEPTH)), false)).toBeNull()
  expect(faultIn(exchange(nested(MAX_RESULT_DEPTH + 1)), false)).toMatchObject({ kind: 'depth' })
})

test('a result holding a string that is not well-formed Unicode fails as result_not_json, as the host would refuse it', () => {
  for (const value of ['\ud800', { note: 'a\udc00b' }, { ['\ud800']: 1 }]) {
    expect(resultOf(value)).toEqual({ ok: false, error: { code: 'result_not_json', message: expect.stringContaining('well-formed Unicode'), retryable: false } })
  }
})

test('a result nested so deep that JSON cannot write it (100,000 levels) is result_not_json, nested too deep, not result_too_large: only a result over the byte limit is too large', () => {
  const outcome = resultOf(nested(100_000))
  expect(outcome).toEqual({ ok: false, error: { code: 'result_not_json', message: expect.stringContaining('nested too deep'), retryable: false } })
  expect(resultOf({ rows: 'x'.repeat(2000) }, 1000)).toMatchObject({ ok: false, error: { code: 'result_too_large' } })
})
