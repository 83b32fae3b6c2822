import type { Stats } from 'node:fs'

/**
 * Whether a file or folder that holds a secret or code this process trusts (the data dir, its
 * token files, a worker's handler modules) could have been written by another user. The rule is
 * ssh's for a key file: it must be owned by the user the process runs as (its effective uid) or
 * by root, and not be writable by its group or others. Anything else lets another local user put
 * a token the host would serve with, or a handler the worker would run as this user. Root is
 * trusted because it can change any file anyway; so a host run as root takes only root's files.
 */

/** Why another user may have written the file `stats` describe, and what makes it this user's alone. */
export interface OthersMayWrite {
  /** As a line says it after the path: `is owned by uid 65534 (mode 0644), not by this user (uid 1000) or root`, `is writable by its group (mode 0775)`. */
  why: string
  /** The command that fixes it, as a line says it: `chmod 700 '/srv/a b'`, `chown 1000 /srv/ab`. */
  fix: string
}

/**
 * Why another user may have written `path` (whose `stats` are given), or null when only this
 * user or root can have. `chmod` is the mode the fix gives a file that only its mode lets
 * others write (`700` for the data dir, `600` for a token, `go-w` for a handler). Always null on
 * Windows, which has no such modes (its files follow their folder's ACL).
 */
export function othersMayWrite(path: string, stats: Stats, chmod: string): OthersMayWrite | null {
  const euid = process.geteuid?.()
  if (euid === undefined || process.platform === 'win32') return null
  const foreign = stats.uid !== euid && stats.uid !== 0
  const loose = stats.mode & 0o022
  if (!foreign && loose === 0) return null
  const word = shellWord(path)
  const mode = `mode ${(stats.mode & 0o7777).toString(8).padStart(4, '0')}`
  const chmodFix = `chmod ${chmod} ${word}`
  if (foreign) {
    const owner = `is owned by uid ${stats.uid} (${mode}), not by this user (uid ${euid})${euid === 0 ? '' : ' or root'}`
    return { why: owner, fix: `chown ${euid} ${word}${loose === 0 ? '' : ` && ${chmodFix}`}` }
  }
  const who = loose === 0o022 ? 'its group and others' : loose === 0o020 ? 'its group' : 'others'
  return { why: `is writable by ${who} (${mode})`, fix: chmodFix }
}

/** `path` as a shell reads it: as it is when it holds only plain characters, else in single quotes (a line's suggested command can be pasted as it is). */
export function shellWord(path: string): string {
  return /^[\w./+:@%=-]+$/.test(path) ? path : `'${path.replaceAll("'", `'\\''`)}'`
}
