import { isAbsolute } from 'node:path'

/**
 * The entries of an `--exec-allow` list (serve's and `leasehold worker`'s). An entry is an
 * absolute path, or a bare name that the worker looks up in its own PATH. A relative path with a
 * slash is neither: it would name another file from each job's `cwd`, which the payload picks.
 */
export function execAllowEntries(value: string): string[] {
  return value.split(',').map((entry) => entry.trim()).filter(Boolean)
}

/** The first entry that is a relative path with a slash, which no list may hold (see {@link execAllowEntries}). */
export function relativeExecEntry(entries: readonly string[]): string | undefined {
  return entries.find((entry) => entry.includes('/') && !isAbsolute(entry))
}

/** Why a list is refused, naming its relative entry. */
export const EXEC_ALLOW_RULE = (entry: string) =>
  `takes absolute paths and bare names (looked up in the worker's PATH): ${JSON.stringify(entry)} is a relative path, which each job's cwd would point elsewhere`
