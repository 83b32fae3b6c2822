import { describe, expect, test } from 'vitest'
import { faultIn } from '../../src-shared/json-faults'
import { MAX_ERROR_CHARS, MAX_ID_CHARS, MAX_NOTE_CHARS, WorkerExchange } from '../../src-shared/worker-exchange'
import { attemptErrorOf } from '../../src-worker/attempt-error'
import { progressOf } from '../../src-worker/handler-output'

const ref = { job_id: 'j', attempt_id: 'a', lease_token: 't' }
const carried = (error: unknown) => WorkerExchange.safeParse({ worker_id: 'w', fail: [{ ...ref, error: attemptErrorOf(error) }] }).success

describe("a handler's error as its attempt reports it", () => {
  test('an error of any size is cut to what the exchange carries, so the report is never refused', () => {
    const huge = Object.assign(new Error('m'.repeat(3 * MAX_ERROR_CHARS)), { code: 'c'.repeat(1000) })
    huge.stack = 's'.repeat(3 * MAX_ERROR_CHARS)
    const reported = attemptErrorOf(huge)
    expect(reported.message.length).toBe(MAX_ERROR_CHARS)
    expect(reported.message.endsWith('… (cut)')).toBe(true)
    expect(reported.stack!.length).toBe(MAX_ERROR_CHARS)
    expect(reported.code.length).toBe(MAX_ID_CHARS)
    expect(carried(huge)).toBe(true)
  })

  test('a small error is reported whole, with its code, and retried unless it says retryable: false', () => {
    const error = Object.assign(new Error('disk on fire'), { code: 'EFIRE', retryable: false })
    expect(attemptErrorOf(error)).toMatchObject({ code: 'EFIRE', message: 'disk on fire', retryable: false, stack: error.stack })
    expect(attemptErrorOf(new Error('x'))).toMatchObject({ code: 'handler_error', retryable: true })
    expect(attemptErrorOf(Object.assign(new Error('stop'), { name: 'AbortError' })).code).toBe('aborted')
  })

  test('a thrown value that is not an Error still reports: its text as the message, no stack', () => {
    expect(attemptErrorOf('plain text')).toEqual({ code: 'handler_error', message: 'plain text', retryable: true })
    expect(attemptErrorOf(undefined)).toEqual({ code: 'handler_error', message: 'undefined', retryable: true })
    expect(carried(42)).toBe(true)
  })

  test('a rejected value with no message of its own (a plain object) is reported as util.inspect writes it, cut to the error size limit', () => {
    expect(attemptErrorOf({ weird: 1n })).toEqual({ code: 'handler_error', message: '{ weird: 1n }', retryable: true })
    expect(attemptErrorOf([1, 'two'])).toMatchObject({ message: "[ 1, 'two' ]" })
    const huge = attemptErrorOf({ text: 'x'.repeat(3 * MAX_ERROR_CHARS) })
    expect(huge.message.length).toBe(MAX_ERROR_CHARS)
    expect(huge.message.endsWith('… (cut)')).toBe(true)
    expect(carried({ weird: 1n })).toBe(true)
  })
  test('an error with a lone surrogate, its own or half of a pair its cut split, is reported well-formed, as the host takes no other body', () => {
    const reported = attemptErrorOf(Object.assign(new Error('bad \ud800 text'), { code: 'c\udc00' }))
    expect(reported).toMatchObject({ code: 'c\ufffd', message: 'bad \ufffd text' })
    const split = attemptErrorOf(new Error('m'.repeat(MAX_ERROR_CHARS - 8) + '😀'.repeat(10)))
    expect(faultIn(split, false)).toBeNull()
    expect(split.message.length).toBe(MAX_ERROR_CHARS)
    expect(faultIn(progressOf(0.5, 'n'.repeat(MAX_NOTE_CHARS - 8) + '😀'.repeat(10)), false)).toBeNull()
  })
  test('a hostile thrown value (a proxy whose traps throw, an error whose message getter throws) is reported as handler_error, and reporting it never throws', () => {
    const trap = () => {
      throw new Error('trap')
    }
    const proxy = new Proxy({}, { get: trap })
    const everyTrap = new Proxy({}, { get: trap, getPrototypeOf: trap, ownKeys: trap, has: trap, getOwnPropertyDescriptor: trap })
    const getter = new Error('m')
    Object.defineProperty(getter, 'message', { get: trap })
    Object.defineProperty(getter, 'code', { get: trap })
    for (const hostile of [proxy, everyTrap, getter]) {
      expect(attemptErrorOf(hostile)).toEqual({ code: 'handler_error', message: expect.any(String), retryable: true })
      expect(carried(hostile)).toBe(true)
    }
    expect(attemptErrorOf(proxy).message).toBe('{}')
    expect(attemptErrorOf(getter).message).toBe('[object Error]')
  })
})
