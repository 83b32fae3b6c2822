import { INVISIBLE_CHARS } from './printable'

/**
 * What makes a name for who acts one the host takes: a worker id, whatever carries it (the
 * worker API's and the pull and queue dialects' bodies, Redis, `leasehold worker --worker-id`),
 * and who asks for an operator's action or answers a blocker (`requested_by`, a resolve's `by`).
 * Such a name is shown in the logs, `leasehold status`, the dashboard and a job's timeline, where
 * a blank one is an empty row and one with spaces around it, or a control or invisible character
 * in it (U+0000, a newline, a bidi override, a zero-width space), reads as another's name — a
 * local worker's among them (local-worker-id.ts).
 */

/** Why `id` is no such name, or null when it is one (the length is the schema's to check). */
export function actorNameFault(id: string): string | null {
  if (id.trim() === '') return 'must not be blank'
  if (id.trim() !== id) return 'must not begin or end with whitespace'
  // search(), not test(): INVISIBLE_CHARS is global, and test() would carry its lastIndex to the next call.
  if (id.search(INVISIBLE_CHARS) >= 0) return 'must not contain control or invisible characters (a newline, a bidi mark, a zero-width space)'
  return null
}
