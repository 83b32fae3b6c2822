import { readlink, realpath } from 'node:fs/promises'
import { dirname, resolve } from 'node:path'

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
 * `path` that is not a link, and of the file a link names.
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
    let target: Buffer
    try {
      target = await readlink(path, { encoding: 'buffer' })
    } catch {
      return { path, loops: false } // not a link, or not there: the write says why, if anything is wrong
    }
    const folder = nameOf(await realpath(dirname(path), { encoding: 'buffer' }))
    path = resolve(folder, nameOf(target))
  }
  return { path, loops: true }
}
