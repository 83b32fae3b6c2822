import { INVISIBLE_CHARS } from './printable'

/**
 * What makes a worker id one the host takes, whatever carries it (the worker API's and the pull
 * and queue dialects' bodies, Redis, `leasehold worker --worker-id`). An id is shown in the logs,
 * `leasehold status` and the dashboard, where a blank one is an empty row and one with spaces
 * around it, or a control or invisible character in it (a newline, a bidi override, a zero-width
 * space), reads as another worker's id — a local worker's among them (local-worker-id.ts).
 */

/** Why `id` is no worker id, or null when it is one (the length is the schema's to check). */
export function workerIdFault(id: string): string | null {
  if (id.trim() === '') return 'must not be blank'
  if (id.trim() !== id) return 'must not begin or end with whitespace'
  // search(), not test(): INVISIBLE_CHARS is global, and test() would carry its lastIndex to the next call.
  if (id.search(INVISIBLE_CHARS) >= 0) return 'must not contain control or invisible characters (a newline, a bidi mark, a zero-width space)'
  return null
}
