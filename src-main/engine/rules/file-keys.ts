import { posix, win32 } from 'node:path'
import { invalid } from './errors'

/**
 * The rules a path is read by: Windows' for a drive path (`C:\…`, `c:/…`) or a UNC share
 * (`\\server\share\…`), POSIX's for one that starts with `/`, whatever the host's own platform —
 * a remote worker's files are on another machine, and its paths are written by its rules. Null
 * for any other path (relative, or a Windows path with neither drive nor share, `\x\y.txt`,
 * which names a different file on each drive).
 */
function rulesOf(path: string): typeof posix | typeof win32 | null {
  if (WINDOWS_DRIVE.test(path) || WINDOWS_SHARE.test(path)) return win32
  return path.startsWith('/') ? posix : null
}

const WINDOWS_DRIVE = /^[A-Za-z]:[\\/]/
const WINDOWS_SHARE = /^\\\\[^\\/]+[\\/][^\\/]+/
/**
 * A Windows path under the `\\?\` (verbatim) or `\\.\` (device) prefix: no share named `?` or `.`,
 * and a second spelling of a path that has one without it (`\\?\C:\x` is `C:\x`), refused rather
 * than keyed apart from it. A verbatim path skips Windows' own reading (its `..`, its trailing
 * dots), so it cannot be keyed as the path it names by the rules below.
 */
const WINDOWS_PREFIX = /^\\\\[?.](?:[\\/]|$)/
/**
 * What Windows drops from a path's last name when it opens it: trailing dots and spaces
 * (`y.txt.` and `y.txt ` open `y.txt`), and `::$DATA`, the name of a file's unnamed data stream.
 * A folder on the way keeps them, as Windows keeps them there.
 */
const WINDOWS_DROPPED = /(?:::\$DATA)?[. ]*$/i

/** The rules of a key (fileKey's answer): its own kind of path, read as it was keyed. */
const rulesOfKey = (key: string): typeof posix | typeof win32 => rulesOf(key) ?? posix

/**
 * The key of a file: its normalized absolute path, by the rules of its kind ({@link rulesOf}):
 * `.` and `..` resolved, no trailing separator but the root's; a Windows path with `\` for its
 * separators, its drive letter upper case (`c:/x/./y.txt` is `C:\x\y.txt`: Windows ignores the
 * case of a drive letter, and shows it upper case) and its last name as Windows opens it
 * (`C:\x\y.txt.` is `C:\x\y.txt`), the rest of it as written. A relative, empty or
 * NUL-containing path is refused, as is a Windows path under the `\\?\` or `\\.\` prefix.
 */
export function fileKey(file: unknown): string {
  if (typeof file !== 'string' || file.length === 0) throw invalid('file: must be a non-empty absolute path')
  if (file.includes('\0')) throw invalid('file: must not contain a NUL character')
  if (WINDOWS_PREFIX.test(file)) throw invalid(`file: send it without its \\\\?\\ or \\\\.\\ prefix, as the path it names (C:\\x\\y.txt, \\\\server\\share\\y.txt; got "${file}")`)
  const rules = rulesOf(file)
  if (!rules) {
    const windows = file.startsWith('\\') ? ' (a Windows path names its drive, C:\\…, or its share, \\\\server\\share\\…)' : ''
    throw invalid(`file: must be an absolute path${windows} (got "${file}")`)
  }
  if (rules === posix) return posix.resolve(file)
  const key = windowsOpened(win32.resolve(file))
  return WINDOWS_DRIVE.test(key) ? key[0]!.toUpperCase() + key.slice(1) : key
}

/** A resolved Windows path as Windows opens it: its last name without what Windows drops ({@link WINDOWS_DROPPED}); a root as it is. */
function windowsOpened(path: string): string {
  if (path.length === win32.parse(path).root.length) return path
  const opened = path.replace(WINDOWS_DROPPED, '')
  // A last name of dots and spaces alone (`...`) names the folder it is in.
  return opened === path ? path : win32.resolve(opened)
}

/** The keys whose leases cover a file: the key itself and every folder above it, nearest first (`/data/a.txt`, `/data`, `/`). */
export function keysAbove(file: string): string[] {
  const { dirname } = rulesOfKey(file)
  const keys = [file]
  for (let up = dirname(file); up !== keys[keys.length - 1]; up = dirname(up)) keys.push(up)
  return keys
}

/**
 * The keys inside a folder, as a range `[from, to)`: those that start with the folder and a
 * separator (a root's own separator is its whole key). The separator's successor bounds it,
 * as keys compare byte by byte.
 */
export function keysBelow(dir: string): [from: string, to: string] {
  const { sep } = rulesOfKey(dir)
  const from = dir.endsWith(sep) ? dir : dir + sep
  return [from, from.slice(0, -1) + String.fromCharCode(sep.charCodeAt(0) + 1)]
}
