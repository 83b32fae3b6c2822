import { isAbsolute, resolve } from 'node:path'

/**
 * Where the built-in `file.write` of a worker may write, as `--write-allow` sets it (serve's for
 * the local workers, `leasehold worker`'s for that command's): `null` anywhere the worker's user
 * may (the flag not given), an empty list nowhere (`none`), else under these absolute folders.
 * A token that may submit jobs is the power to write files as the worker's user, on every
 * machine a worker runs on: the list is how an operator holds that to the folders jobs are for.
 */
export type WriteAllow = readonly string[] | null

/** The value that turns `file.write` off. */
export const WRITE_ALLOW_NONE = 'none'

/**
 * The folders of a `--write-allow` value, each as `resolve` writes it (no `..`, no trailing
 * slash); `[]` for `none`, `null` for no value (anywhere). Check them with {@link writeAllowProblem}.
 */
export function writeAllowEntries(value: string | undefined): WriteAllow {
  if (value === undefined) return null
  const entries = value.split(',').map((entry) => entry.trim()).filter(Boolean)
  if (entries.length === 1 && entries[0] === WRITE_ALLOW_NONE) return []
  return entries.map((entry) => (isAbsolute(entry) ? resolve(entry) : entry))
}

/**
 * Why a `--write-allow` value is refused, or null: an entry that is not an absolute path (a
 * relative folder would be taken from wherever the worker was started, which the operator may
 * not see), `none` beside folders (which of the two was meant?), or no entry at all.
 */
export function writeAllowProblem(value: string, entries: WriteAllow): string | null {
  if (entries === null) return null
  if (entries.length === 0 && value.trim() !== WRITE_ALLOW_NONE) return `takes absolute folders, comma-separated, or ${WRITE_ALLOW_NONE}: ${JSON.stringify(value)} names none`
  if (entries.includes(WRITE_ALLOW_NONE)) return `takes ${WRITE_ALLOW_NONE} alone (no file.write at all) or absolute folders, not both`
  const relative = entries.find((entry) => !isAbsolute(entry))
  return relative === undefined ? null : `takes absolute folders: ${JSON.stringify(relative)} is a relative path, which would be taken from the folder the worker was started in`
}

/** A list as a local worker's environment carries it (LEASEHOLD_WORKER_WRITE_ALLOW): empty for anywhere, `none`, or the folders. */
export function writeAllowVariable(entries: WriteAllow): string {
  if (entries === null) return ''
  return entries.length === 0 ? WRITE_ALLOW_NONE : entries.join(',')
}

/** The list a local worker's variable carries ({@link writeAllowVariable}'s inverse). */
export function writeAllowFromVariable(value: string | undefined): WriteAllow {
  return value ? writeAllowEntries(value) : null
}
