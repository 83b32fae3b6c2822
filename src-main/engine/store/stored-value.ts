/**
 * A stored value that does not read as what the engine wrote: the file is damaged (a page
 * overwritten, a disk that returns other bytes). A read fault, as SQLite's SQLITE_CORRUPT is:
 * answered 503 storage_error naming `leasehold check`, never a 500 with a stack trace.
 */
export class DamagedValueError extends Error {
  override name = 'DamagedValueError'
  readonly code = 'LEASEHOLD_DAMAGED_VALUE'
}

/** A JSON column's value as stored: null stays null; one that does not parse is a {@link DamagedValueError}. */
export function parseStored(text: string | null): unknown {
  if (text === null) return null
  try {
    return JSON.parse(text)
  } catch {
    throw new DamagedValueError(`a stored value does not read as JSON (${JSON.stringify(text.slice(0, 24))}…): the database file may be damaged`)
  }
}
