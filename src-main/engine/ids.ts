import { randomFillSync } from 'node:crypto'
import { v7 } from 'uuid'

/**
 * Cryptographically random bytes, drawn 4 KiB at a time: one call into the random source per
 * ~170 ids instead of one per id (a call costs ~10 µs here). Each byte is handed out once, and
 * only to the two functions below, which use it at once.
 */
const pool = Buffer.alloc(4096)
let used = pool.length

function randomBytes(count: number): Buffer {
  if (used + count > pool.length) {
    randomFillSync(pool)
    used = 0
  }
  used += count
  return pool.subarray(used - count, used)
}

/**
 * A new id for a job, lease, attempt, stream message, file lease or blocker: a UUID version 7,
 * which starts with the time. Ids made later sort later, so each id index grows at its end: an
 * insert dirties the one hot last page instead of a random page of a large index, which is what
 * a commit costs on this storage (one WAL frame per dirty page).
 */
export const newId = (): string => v7({ random: randomBytes(16) })

/** A lease token: 24 random bytes, base64url (the secret that names a lease in dialect 003). */
export const newToken = (): string => randomBytes(24).toString('base64url')
