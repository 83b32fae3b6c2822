import { expect, test } from 'vitest'
import { redisFaultWords } from '../../src-shared/redis-streams'

test('an error of the Redis client that means Redis did not answer in time is said so, not in the client’s words; Redis’s own refusals and socket errors are said as they are', () => {
  const maxRetries = new Error('Reached the max retries per request limit (which is 1). Refer to "maxRetriesPerRequest" option for details.')
  expect(redisFaultWords(maxRetries)).toBe('Redis did not answer in time')
  expect(redisFaultWords(new Error('Command timed out'))).toBe('Redis did not answer in time')
  expect(redisFaultWords(new Error('WRONGTYPE Operation against a key holding the wrong kind of value'))).toBe('WRONGTYPE Operation against a key holding the wrong kind of value')
  expect(redisFaultWords(new Error('connect ECONNREFUSED 127.0.0.1:6379'))).toBe('connect ECONNREFUSED 127.0.0.1:6379')
})

test('a command sent while the connection is down is said as Redis not connected, not in ioredis’s words about its offline queue', () => {
  expect(redisFaultWords(new Error("Stream isn't writeable and enableOfflineQueue options is false"))).toBe('Redis is not connected')
})

test('a server that does not speak the Redis protocol (an HTTP port) is said to be so, not in the parser’s words', () => {
  const words = redisFaultWords(new Error('Protocol error, got "H" as reply type byte. Please report this.'))
  expect(words).toBe('the server at that address does not speak the Redis protocol (its answer began with "H"): check the host and port of the Redis URL')
})
