import { randomFillSync } from 'node:crypto'
import { lastMillisecond } from '../rules/clock'

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
 * A new id for an attempt, file lease, blocker or schedule: a UUID version 7 (RFC 9562), which
 * starts with the time in milliseconds, then 74 random bits: `tttttttt-tttt-7rrr-vrrr-rrrrrrrrrrrr`
 * (`v` is 8, 9, a or b). Ids made later sort later, so each id index grows at its end: an insert
 * dirties the one hot last page instead of a random page of a large index, which is what a
 * commit costs on this storage (one WAL frame per dirty page). Written out from the hex table,
 * as {@link keyedId} is, in half the time of the `uuid` package's (0.12 against 0.25 µs a call
 * in a loop; every grant makes one).
 */
export function newId(): string {
  const r = randomBytes(10)
  return `${timePrefix(Date.now())}-7${HEX[r[0]! & 0x0f]![1]}${HEX[r[1]!]}-${HEX[0x80 | (r[2]! & 0x3f)]}${HEX[r[3]!]}-${HEX[r[4]!]}${HEX[r[5]!]}${HEX[r[6]!]}${HEX[r[7]!]}${HEX[r[8]!]}${HEX[r[9]!]}`
}

/** The largest key an id can name: 2^48 − 1 (281 trillion jobs or leases). */
const MAX_KEY = 2 ** 48 - 1

const hex = (value: number, digits: number): string => value.toString(16).padStart(digits, '0')

/**
 * The id of a job or lease, which names its row's key (the job's `seq`, the lease's `fence`), so
 * that finding a row by its id needs no index on ids: each index entry is a page a commit
 * writes. A UUID version 8 (RFC 9562's custom layout): the time in milliseconds first, as in
 * version 7 (ids made later sort later), then the key in 48 bits, then 24 random bits:
 * `tttttttt-tttt-8kkk-8kkk-kkkkkkrrrrrr`. Version 8, not 7, so that the older rows' random
 * version-7 ids are told apart by one character (db/schema.ts UNKEYED_ID_CLAUSE). A reader still
 * checks that the row it finds has this id: anyone may send any id, and one with a row's key but
 * other bits names nothing.
 */
export function keyedId(key: number): string {
  if (!Number.isSafeInteger(key) || key < 0 || key > MAX_KEY) throw new RangeError(`keyedId: ${key} is not a key from 0 to 2^48 − 1`)
  const k = hex(key, 12)
  const random = randomBytes(3)
  return `${timePrefix(Date.now())}-8${k.slice(0, 3)}-8${k.slice(3, 6)}-${k.slice(6)}${HEX[random[0]!]}${HEX[random[1]!]}${HEX[random[2]!]}`
}

/** Each byte's two hex digits (a Buffer's toString costs more than the id's other parts). */
const HEX = Array.from({ length: 256 }, (_, byte) => hex(byte, 2))

/** `tttttttt-tttt` for the millisecond `ms`. */
const timePrefix = lastMillisecond((ms) => {
  const time = hex(ms, 12)
  return `${time.slice(0, 8)}-${time.slice(8)}`
})

const KEYED = /^[0-9a-f]{8}-[0-9a-f]{4}-8([0-9a-f]{3})-8([0-9a-f]{3})-([0-9a-f]{6})[0-9a-f]{6}$/

/**
 * The key a {@link keyedId} names, or null for any other string (an older job's or lease's id,
 * UUID version 7, is found through its partial index instead: db/schema.ts UNKEYED_ID_CLAUSE).
 */
export function idKey(id: string): number | null {
  const match = KEYED.exec(id)
  return match ? parseInt(match[1]! + match[2]! + match[3]!, 16) : null
}

/** Where the key's 12 hex digits stand in a {@link keyedId} (1-based, as SQL's substr counts). */
const KEY_DIGITS = [16, 17, 18, 21, 22, 23, 25, 26, 27, 28, 29, 30]

/**
 * {@link idKey} in SQL, of the keyed id in `column`: its key, for a read by the table's key where a
 * statement matches rows by id. SQLite reads no hex, so each digit is looked up in the digits'
 * string. Only for a column known to hold a keyed id (its 15th character `8`, UNKEYED_ID_CLAUSE).
 */
export function idKeySql(column: string): string {
  return KEY_DIGITS.map((at, i) => `(instr('0123456789abcdef', substr(${column}, ${at}, 1)) - 1) * ${16 ** (KEY_DIGITS.length - 1 - i)}`).join(' + ')
}

/** A lease token: 24 random bytes, base64url (the secret that names a lease in the worker API). */
export const newToken = (): string => randomBytes(24).toString('base64url')
