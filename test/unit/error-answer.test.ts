import BetterSqlite3 from 'better-sqlite3'
import { describe, expect, test } from 'vitest'
import { ManualClock, MINUTE, SECOND } from '../../src-main/engine/clock'
import { EngineError } from '../../src-main/engine/errors'
import { answerError, storageFault } from '../../src-main/error-answer'
import { LogLimiter } from '../../src-main/log-limiter'

const sqliteError = (code: string) => new BetterSqlite3.SqliteError('from SQLite', code)
const fsError = (code: string) => Object.assign(new Error(`${code}: from the OS`), { code })

describe('one mapping from a thrown error to the answer (answerError)', () => {
  test('an EngineError keeps its status, code, detail and extra body fields', () => {
    const answer = answerError(new EngineError(409, 'duplicate_request', 'seen', { job: { id: 'j' } }), '/data')
    expect(answer).toEqual({ status: 409, code: 'duplicate_request', detail: 'seen', body: { job: { id: 'j' } }, internal: false })
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
})
