import { expect, test } from 'vitest'
import { Answering, UNANSWERED_AFTER_MS } from '../../src-main/redis/answering'
import { T0 } from '../helpers/engine'

const SECOND = 1000

test('Redis answers until a check has waited UNANSWERED_AFTER_MS for its answer; how long it has not counts from its last answer; its next answer ends it', () => {
  const redis = new Answering(T0)
  expect(redis.answers(T0 + 60 * SECOND)).toBe(true) // nothing asked, nothing late
  redis.sent(T0 + 1 * SECOND)
  redis.answered(T0 + 1 * SECOND + 2)
  redis.sent(T0 + 2 * SECOND)
  expect(redis.answers(T0 + 2 * SECOND + UNANSWERED_AFTER_MS - 1)).toBe(true)
  expect(redis.answers(T0 + 2 * SECOND + UNANSWERED_AFTER_MS)).toBe(false)
  expect(redis.silentFor(T0 + 10 * SECOND)).toBe(9 * SECOND - 2)
  redis.answered(T0 + 11 * SECOND)
  expect(redis.answers(T0 + 11 * SECOND)).toBe(true)
  expect(redis.silentFor(T0 + 11 * SECOND)).toBe(0)
})

test('a check that failed without an answer leaves Redis unanswered from the first one: a later check does not reset the wait', () => {
  const redis = new Answering(T0)
  redis.sent(T0)
  redis.sent(T0 + 2 * SECOND) // the first timed out; a new one goes
  expect(redis.answers(T0 + UNANSWERED_AFTER_MS)).toBe(false)
})
