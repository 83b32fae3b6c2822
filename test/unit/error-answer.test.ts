import BetterSqlite3 from 'better-sqlite3'
import { describe, expect, test } from 'vitest'
import { ManualClock, MINUTE, SECOND } from '../../src-main/engine/rules/clock'
import { EngineError } from '../../src-main/engine'
import { HttpError } from '../../src-main/http/http-error'
import { answerError, storageFault } from '../../src-main/error-answer'
import { StorageUncertainError } from '../../src-main/db/commit-outcome'
import { parseStored } from '../../src-main/engine/store/stored-value'
import { LogLimiter } from '../../src-shared/log-limiter'

const sqliteError = (code: string) => new BetterSqlite3.SqliteError('from SQLite', code)
const fsError = (code: string) => Object.assign(new Error(`${code}: from the OS`), { code })

describe('one mapping from a thrown error to the answer (answerError)', () => {
  test("an HttpError keeps its code, detail and body fields, with its code's status", () => {
    const answer = answerError(new HttpError('duplicate_request', 'seen', { job: { id: 'j' } }), '/data')
    expect(answer).toEqual({ status: 409, code: 'duplicate_request', detail: 'seen', body: { job: { id: 'j' } }, internal: false })
  })

  test("an EngineError keeps its code and detail, gets its code's status, and its extra fields in wire form (times ISO)", () => {
    const answer = answerError(new EngineError('retry_too_early', 'later', { retry_at: Date.UTC(2026, 0, 1, 0, 3), retry_after_s: 180 }), '/data')
    expect(answer).toEqual({
      status: 429,
      code: 'retry_too_early',
      detail: 'later',
      body: { retry_at: '2026-01-01T00:03:00.000Z', retry_after_s: 180 },
      internal: false,
    })
    expect(answerError(new EngineError('lease_expired', 'gone', { ack: true }), '/data')).toMatchObject({ status: 409, body: { ack: true } })
  })

  test.each(['SQLITE_FULL', 'ENOSPC', 'EDQUOT'])('no space (%s) is 507 storage_full saying the disk is full and where', (code) => {
    const error = code.startsWith('SQLITE') ? sqliteError(code) : fsError(code)
    const answer = answerError(error, '/home/me/.config/leasehold')
    expect(answer).toMatchObject({ status: 507, code: 'storage_full', internal: false })
    expect(answer.detail).toMatch(/disk is full/)
    expect(answer.detail).toContain('/home/me/.config/leasehold')
  })

  test.each(['SQLITE_IOERR', 'SQLITE_IOERR_WRITE', 'SQLITE_IOERR_FSYNC', 'SQLITE_READONLY', 'EIO', 'EROFS'])(
    'another storage fault (%s) is 503 storage_error naming the data dir',
    (code) => {
      const error = code.startsWith('SQLITE') ? sqliteError(code) : fsError(code)
      const answer = answerError(error, '/data')
      expect(answer).toMatchObject({ status: 503, code: 'storage_error', internal: false })
      expect(answer.detail).toContain('/data')
    },
  )

  test.each(['SQLITE_CORRUPT', 'SQLITE_IOERR_READ', 'SQLITE_IOERR_SHORT_READ'])(
    'a read the disk failed (%s: SQLite reports a read EIO as SQLITE_CORRUPT) is 503 storage_error saying so and what to run',
    (code) => {
      const answer = answerError(sqliteError(code), '/data')
      expect(answer).toMatchObject({ status: 503, code: 'storage_error', internal: false })
      expect(answer.detail).toMatch(/failed a read .*nothing was changed/)
      expect(answer.detail).toContain('leasehold check')
    },
  )

  test('a stored value that is no JSON is 503 storage_error saying the record itself was changed, which an integrity check may pass, and to restore a backup', () => {
    let damaged: unknown
    try {
      parseStored('{"i":\u0000\u0000}')
    } catch (error) {
      damaged = error
    }
    const answer = answerError(damaged, '/data')
    expect(answer).toMatchObject({ status: 503, code: 'storage_error', internal: false })
    expect(answer.detail).toMatch(/not what Leasehold wrote \(LEASEHOLD_DAMAGED_VALUE/)
    expect(answer.detail).toMatch(/`leasehold check` may pass the file all the same: restore the data dir \/data from a backup/)
  })

  test('a commit whose outcome could not be made certain is 503 storage_uncertain, telling the client to retry the same request', () => {
    const answer = answerError(new StorageUncertainError('SQLITE_IOERR_FSYNC', sqliteError('SQLITE_IOERR_FSYNC')), '/data')
    expect(answer).toMatchObject({ status: 503, code: 'storage_uncertain', internal: false })
    expect(answer.detail).toMatch(/may or may not have been made.*client_request_id/)
    expect(answer.detail).toContain('/data')
  })

  test('anything else is a plain 500 internal_error that says nothing of the error, marked for the log', () => {
    for (const error of [new TypeError('x is undefined at /src/secret.ts:3'), sqliteError('SQLITE_CONSTRAINT_UNIQUE'), 'a string', null]) {
      expect(answerError(error, '/data')).toEqual({ status: 500, code: 'internal_error', detail: 'Internal error', body: {}, internal: true })
      expect(storageFault(error)).toBeNull()
    }
  })
})

describe('a repeated log line is printed at most once a minute (LogLimiter)', () => {
  test('per key, and the next line says how many were held back', () => {
    const clock = new ManualClock(0)
    const lines: string[] = []
    const limiter = new LogLimiter((line) => lines.push(line), () => clock.now())
    for (let i = 0; i < 4; i++) {
      limiter.line('reaper', 'reaper failed')
      limiter.line('stats', 'stats failed')
      clock.advance(SECOND)
    }
    expect(lines).toEqual(['reaper failed', 'stats failed'])
    clock.advance(MINUTE)
    limiter.line('reaper', 'reaper failed')
    expect(lines.at(-1)).toBe('reaper failed (3 more like it since the last such line)')
    limiter.line('reaper', 'reaper failed')
    expect(lines).toHaveLength(3)
  })

  test('a clock set back does not hold a line back for as long as it went back: the minute counts again from the next line', () => {
    const clock = new ManualClock(10 * MINUTE)
    const lines: string[] = []
    const limiter = new LogLimiter((line) => lines.push(line), () => clock.now())
    limiter.line('reaper', 'reaper failed')
    clock.set(clock.now() - 3 * 60 * MINUTE)
    limiter.line('reaper', 'reaper failed')
    expect(lines).toEqual(['reaper failed', 'reaper failed'])
    clock.advance(SECOND)
    limiter.line('reaper', 'reaper failed')
    expect(lines).toHaveLength(2)
  })
})
