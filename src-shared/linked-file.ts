import type { Stats } from 'node:fs'
import { lstat, readlink, realpath, stat } from 'node:fs/promises'
import { basename, dirname, isAbsolute, join, resolve } from 'node:path'

/** How many symbolic links in a row the kernel follows before it gives up (ELOOP), on Linux. */
export const MAX_LINKS = 40

/** Where a write to a path lands, its symbolic links followed ({@link linkedFile}). */
export interface LinkedFile {
  /** The file the write changes; where the count ran out, when `loops`. */
  path: string
  /** More than {@link MAX_LINKS} links in a row (a loop of links): the kernel's open fails with ELOOP. */
  loops: boolean
}

/** Bytes as fs makes them text by default (UTF-8, a byte that is not part of it as U+FFFD). */
const asFsDecodes = (bytes: Buffer): string => bytes.toString('utf8')

/**
 * The file a write to `path` changes, as the kernel follows symbolic links: `path` itself when it
 * is not a link (or not there), else the file the link names, there yet or not (a write through a
 * dangling link makes it), link after link. A link's relative target is taken from the real
 * folder holding the link, as the kernel takes it, not from its folder as spelled (the folder of
 * `dir/link/../x` is the parent of the link's target). The rest is as written: the folders of a
 * `path` that is not a link, and of the file a link names. Every link it follows, at the end and
 * in the folders it resolves to find the real folder holding one, must pass {@link mayFollow}:
 * another user's link in a shared folder is refused with {@link ProtectedLinkError}.
 *
 * The one rule for the two that must agree on the file: the write (regular-file.ts replaces the
 * file the link names, the link kept) and the file-lease gate it passes first
 * (src-worker/gate-path.ts keys the file the write will change), so that the lease a write holds
 * is the lease of the file it writes. The names it reads from the file system (a link's target,
 * the real folder holding it) are bytes, made text by `nameOf`: the gate's refuses a name that
 * is not valid UTF-8, which no text names faithfully.
 */
export async function linkedFile(path: string, nameOf: (bytes: Buffer) => string = asFsDecodes): Promise<LinkedFile> {
  for (let hops = 0; hops <= MAX_LINKS; hops++) {
    let link: Stats
    try {
      link = await lstat(path)
    } catch {
      return { path, loops: false } // not there: the write says why, if anything is wrong
    }
    if (!link.isSymbolicLink()) return { path, loops: false }
    const folder = await realPath(dirname(path), nameOf)
    await mayFollow(join(folder, basename(path)), link, folder)
    path = resolve(folder, nameOf(await readlink(path, { encoding: 'buffer' })))
  }
  return { path, loops: true }
}

/**
 * The real path of `path`, which must exist, as realpath(3) gives it (failing as it fails:
 * ENOENT, ENOTDIR, ELOOP…), but with every symbolic link on the way passing {@link mayFollow}
 * first: realpath follows links in the process, where the kernel never sees them, so its own
 * rule for links in shared folders would not apply. On Windows, which has no such folders,
 * realpath itself. Names read from the file system are made text by `nameOf`, as in
 * {@link linkedFile}.
 */
export async function realPath(path: string, nameOf: (bytes: Buffer) => string = asFsDecodes): Promise<string> {
  if (!SHARED_FOLDERS) return nameOf(await realpath(path, { encoding: 'buffer' }))
  const rest = partsOf(isAbsolute(path) ? path : `${process.cwd()}/${path}`)
  let real = '/'
  let folder = true // whether `real` is a folder: `..` or a trailing separator after a file is ENOTDIR, as the kernel says
  let links = 0
  while (rest.length > 0) {
    const part = rest.pop()!
    if (!folder && (part === '..' || part === '.')) throw errno('ENOTDIR', 'not a directory', path)
    if (part === '..') real = dirname(real)
    else if (part !== '.') {
      const next = join(real, part)
      const stats = await lstat(next)
      if (!stats.isSymbolicLink()) [real, folder] = [next, stats.isDirectory()]
      else {
        if (++links > MAX_LINKS) throw errno('ELOOP', 'too many symbolic links encountered', path)
        await mayFollow(next, stats, real)
        const target = nameOf(await readlink(next, { encoding: 'buffer' }))
        if (isAbsolute(target)) real = '/'
        rest.push(...partsOf(target))
      }
    }
  }
  return real
}

/** The parts of a POSIX path, the first last (to pop); one `.` kept at its end, where a separator (or `/.`) asks for a folder. */
function partsOf(path: string): string[] {
  const parts = path.split('/').filter((part) => part !== '' && part !== '.')
  if (/\/\.?$/.test(path) && parts.length > 0) parts.push('.')
  return parts.reverse()
}

/** An error as fs makes one of an errno (`ENOTDIR: not a directory, realpath '…'`). */
function errno(code: string, what: string, path: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`${code}: ${what}, realpath '${path}'`), { code, syscall: 'realpath', path })
}

/** Folders may be shared (sticky and writable by anyone, as /tmp is): POSIX, not Windows. */
const SHARED_FOLDERS = process.platform !== 'win32'

/** The mode bits of a shared folder: sticky (only an entry's owner may remove or rename it) and writable by anyone. */
const SHARED = 0o1000 | 0o002

/**
 * Throws {@link ProtectedLinkError} where the kernel's rule for links in shared folders
 * (fs.protected_symlinks) refuses to follow the link at `link` (`stats`, its lstat) found in the
 * real folder `folder`: a link in a folder that is sticky and writable by anyone is followed only
 * when its owner is the process's (effective) user or the folder's owner. Anyone may plant a link
 * in such a folder, under any name, aimed at any file: followed, it would send a write to a file
 * the planter may not write but this process may. The rule applies whatever the machine's
 * setting, which Leasehold cannot rely on (the kernel never sees the links it follows itself), and
 * to every link Leasehold follows, in a folder of the path too (the kernel checks only a link at
 * the end of a path: a folder link another user planted in /tmp sends a write elsewhere as
 * surely). Checked before the link is read: in a sticky folder no one but the link's owner (and
 * the folder's) may swap it for another.
 */
export async function mayFollow(link: string, stats: Stats, folder: string): Promise<void> {
  if (!SHARED_FOLDERS || stats.uid === process.geteuid?.()) return
  const holder = await stat(folder)
  if ((holder.mode & SHARED) !== SHARED || holder.uid === stats.uid) return
  throw new ProtectedLinkError(link, stats.uid, folder, holder.mode)
}

/**
 * A symbolic link that Leasehold does not follow ({@link mayFollow}): another user's, in a folder
 * shared by everyone. Every attempt would meet it, so it is not retryable (another `EACCES`, of a
 * file's permissions, may be mended between attempts). Its message names the link and why; the
 * caller adds the path it was asked for, where that is another (`onTheWayTo`).
 */
export class ProtectedLinkError extends Error {
  override name = 'ProtectedLinkError'
  readonly code = 'EACCES'
  readonly retryable = false

  constructor(
    /** The link, in its real folder. */
    readonly path: string,
    owner: number,
    folder: string,
    mode: number,
  ) {
    super(
      `EACCES: ${path} is a symbolic link another user owns (uid ${owner}) in a shared folder, ${folder} ` +
        `(sticky and writable by anyone, mode ${(mode & 0o7777).toString(8)}): Leasehold follows no such link, ` +
        "by the kernel's rule for them (fs.protected_symlinks): anyone may plant one there, aimed at any file",
    )
  }

  /** Adds the path asked for, when it is not the link itself. */
  onTheWayTo(asked: string): this {
    if (resolve(asked) !== this.path) this.message += ` (on the way to ${asked})`
    return this
  }
}
