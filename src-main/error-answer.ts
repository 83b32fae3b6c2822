import { StorageUncertainError } from './db/commit-outcome'
import { DISK_FULL, type StorageMode } from './db/storage-mode'
import { EngineError, type ErrorExtra } from './engine'
import { iso } from './engine/rules/clock'
import { type ErrorCode, statusOf } from '../src-shared/error-codes'
import { HttpError } from './http/http-error'

/** What a client is told about a thrown error, over HTTP and over the local workers' IPC alike. */
export interface ErrorAnswer {
  /** From the one table of statuses (src-shared/error-codes.ts). */
  status: number
  code: ErrorCode
  detail: string
  /** Fields the wire shows beside `{detail, code}`: an HttpError's body, an EngineError's extra. */
  body: Record<string, unknown>
  /** Not a refusal by a rule nor a storage fault: a bug, which the caller logs in full. */
  internal: boolean
}

/**
 * A storage fault: the disk is full (`full`), it failed or refused a write (`io`), it failed a
 * read (`read`), or it failed to sync a commit whose outcome could not be made certain (`uncertain`).
 */
export type StorageFault = 'full' | 'io' | 'read' | 'uncertain'

/** Error codes meaning "no space": SQLite's, and the OS's from a file write (quota included). */
const FULL_CODES = new Set(['SQLITE_FULL', 'ENOSPC', 'EDQUOT'])
/** Other storage faults, besides every extended SQLITE_IOERR_* code. */
const IO_CODES = new Set(['EIO', 'EROFS'])
/**
 * A read the disk failed. SQLite reports a read that failed with EIO as SQLITE_CORRUPT (its VFS
 * returns SQLITE_IOERR_CORRUPTFS, which it turns into SQLITE_CORRUPT): from the code alone a
 * failing disk and a damaged file look the same, and an integrity check (`leasehold check`)
 * tells them apart. Either way the read changed nothing.
 */
const DAMAGED_VALUE = 'LEASEHOLD_DAMAGED_VALUE'
const READ_CODES = new Set([DAMAGED_VALUE, 'SQLITE_CORRUPT', 'SQLITE_CORRUPT_VTAB', 'SQLITE_CORRUPT_SEQUENCE', 'SQLITE_CORRUPT_INDEX', 'SQLITE_IOERR_READ', 'SQLITE_IOERR_SHORT_READ', 'SQLITE_IOERR_CORRUPTFS'])

/** The `code` of a thrown error, whatever was thrown (a string, null…). */
function errorCode(error: unknown): string | null {
  const code = (error as { code?: unknown } | null | undefined)?.code
  return typeof code === 'string' ? code : null
}

/**
 * Which storage fault a thrown error is, from its `code` alone: a better-sqlite3 SqliteError
 * carries SQLite's extended code ('SQLITE_FULL', 'SQLITE_IOERR_WRITE'), a Node fs error its
 * errno name. The code is read from the raw error, so a statement's failure and a grouped
 * COMMIT's failure rethrown to each of its callers are classified alike.
 */
export function storageFault(error: unknown): StorageFault | null {
  if (error instanceof StorageUncertainError) return 'uncertain'
  const code = errorCode(error)
  if (code === null) return null
  if (FULL_CODES.has(code)) return 'full'
  if (READ_CODES.has(code)) return 'read'
  if (code === 'SQLITE_IOERR' || code.startsWith('SQLITE_IOERR_') || code.startsWith('SQLITE_READONLY') || IO_CODES.has(code)) return 'io'
  return null
}

/**
 * The answer to a write while the host is read-only (db/storage-mode.ts): because its disk was
 * full at start, 507 `storage_full`, as a write the disk cannot hold is answered once running;
 * because its database file went while it ran, 503 `storage_error` with what the host says of it.
 */
export function readOnlyAnswer(mode: StorageMode, dataDir: string): ErrorAnswer {
  const full = mode.reason === DISK_FULL
  const code = full ? 'storage_full' : 'storage_error'
  return {
    status: statusOf(code),
    code,
    detail: full
      ? `The disk is full: the host started read-only and the write was not made. Free space on the disk that holds the data dir ${dataDir}; ` +
        'writes resume within seconds, without a restart, and reads still work'
      : `The write was not made. ${mode.detail ?? `The host is read-only (${mode.reason})`}`,
    body: {},
    internal: false,
  }
}

/** An engine error's extra fields as the wire shows them: times as ISO-8601. */
function wireExtra(extra: ErrorExtra): Record<string, unknown> {
  return extra.retry_at === undefined ? { ...extra } : { ...extra, retry_at: iso(extra.retry_at) }
}

/**
 * What cut short a call made of several transactions (a bulk action's steps) after some of them
 * committed: answered as `failed` is, its detail told first what was made before it (`made`),
 * so that "not made" speaks of the step that failed and not of the whole call.
 */
export class PartlyMadeError extends Error {
  constructor(
    readonly failed: unknown,
    readonly made: string,
  ) {
    super(made)
    this.name = 'PartlyMadeError'
  }
}

/**
 * Turns any thrown error into the answer a client gets. An EngineError or HttpError keeps its
 * code, and its status is the code's; a write the disk cannot hold is 507 `storage_full`, another
 * storage fault 503 `storage_error` (a failed write or a failed read), each naming the data dir
 * so the operator knows which disk; anything else is a plain 500 — never a stack trace. The
 * write did not happen in either storage case: SQLite rolled its transaction back, and a commit
 * whose sync failed was made certainly not made (db/commit-outcome.ts) — or, when that could
 * not be done, the answer is 503 `storage_uncertain`, which says the outcome is unknown.
 */
export function answerError(error: unknown, dataDir: string): ErrorAnswer {
  if (error instanceof PartlyMadeError) {
    const answer = answerError(error.failed, dataDir)
    return { ...answer, detail: `${error.made} ${answer.detail}` }
  }
  if (error instanceof EngineError) {
    return { status: statusOf(error.code), code: error.code, detail: error.detail, body: wireExtra(error.extra), internal: false }
  }
  if (error instanceof HttpError) {
    return { status: error.status, code: error.code, detail: error.detail, body: error.body, internal: false }
  }
  const code = errorCode(error)
  switch (storageFault(error)) {
    case 'full':
      return {
        status: statusOf('storage_full'),
        code: 'storage_full',
        detail: `The disk is full: the write was not made (${code}). Free space on the disk that holds the data dir ${dataDir}; reads still work`,
        body: {},
        internal: false,
      }
    case 'io':
      return {
        status: statusOf('storage_error'),
        code: 'storage_error',
        detail: `The disk failed a write: it was not made (${code}). Check the disk that holds the data dir ${dataDir}; reads may still work`,
        body: {},
        internal: false,
      }
    case 'read':
      return {
        status: statusOf('storage_error'),
        code: 'storage_error',
        detail:
          code === DAMAGED_VALUE
            ? // SQLite's pages are sound (an integrity check passes them): the bytes of a value inside a row are not what was written.
              `A value read from the database is not what Leasehold wrote (${code}: a payload or an event's data that is no JSON); ` +
              'nothing was changed. A sector damaged inside a row, or a change made to the file from outside Leasehold, does this, and ' +
              `\`leasehold check\` may pass the file all the same: restore the data dir ${dataDir} from a backup to read that record again`
            : `The disk failed a read (${code}); nothing was changed. Try again; should it persist, run \`leasehold check\`, which tells ` +
              `a failing disk from a damaged file, and check the disk that holds the data dir ${dataDir}`,
        body: {},
        internal: false,
      }
    case 'uncertain':
      return {
        status: statusOf('storage_uncertain'),
        code: 'storage_uncertain',
        detail:
          `The disk failed to confirm the write (${(error as StorageUncertainError).failedCode}): it may or may not have been made. ` +
          `Retry the same request (a submit with the same client_request_id) once the host has been restarted: after a failed sync it takes no write until then; check the disk that holds the data dir ${dataDir}`,
        body: {},
        internal: false,
      }
    default:
      return { status: statusOf('internal_error'), code: 'internal_error', detail: 'Internal error', body: {}, internal: true }
  }
}
