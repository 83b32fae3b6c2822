import type { Redis } from 'ioredis'

/** Keys one SCAN asks for at most. */
const SCAN_COUNT = 1000

/**
 * Every key that matches the MATCH pattern `match` and holds the type `type`, over the whole
 * keyspace (one SCAN after another until its cursor comes back to 0). A prefix put in `match`
 * must be glob-escaped (redis-streams.ts, globEscaped), or it matches other keys than its own.
 */
export async function scanKeys(redis: Redis, match: string, type: 'stream' | 'string'): Promise<string[]> {
  const keys: string[] = []
  let cursor = '0'
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', match, 'COUNT', SCAN_COUNT, 'TYPE', type)
    cursor = next
    keys.push(...batch)
  } while (cursor !== '0')
  return keys
}
