import { lstat, readlink, realpath } from 'node:fs/promises'
import { basename, dirname, join, resolve } from 'node:path'

/**
 * The path the file gate is asked for when a handler changes `path`: the file the kernel will
 * change, so that two spellings of one file meet at the gate — a path through a symlinked folder
 * and the real one, or `link/..`, which the kernel takes to the parent of the link's target, not
 * to the folder holding the link. The host keys a path as it is given (it cannot look at the
 * worker's files: a remote worker's are on another machine), so the worker resolves it first.
 *
 * A write (`followLast`) follows a symlink at the end of the path to the file it names, there yet
 * or not; `rm` and `rename` act on the link itself, so for them only the folder is resolved. A path not there yet
 * resolves as far as it exists, the rest as written. Two spellings the kernel tells apart but
 * the file system does not (case, on a file system that ignores it) stay two keys.
 */
export async function gatePath(path: string, followLast: boolean): Promise<string> {
  if (!followLast) return join(await realFolder(dirname(path)), basename(path))
  // A symlink whose target is not there yet (a dangling link) is followed too: the write creates
  // the file the link names, so that file is the key, as it will be once it exists. As many
  // links as the kernel follows (40, Linux's limit); a loop of links is keyed as written.
  for (let hops = 0; hops <= MAX_LINKS; hops++) {
    try {
      return await realpath(path)
    } catch {
      // Not there yet (or not a path that resolves): a dangling link's target, else its folder, below.
    }
    const folder = await realFolder(dirname(path))
    const target = await linkTarget(path)
    if (target === null) return join(folder, basename(path))
    path = resolve(folder, target)
  }
  return path
}

/** How many symlinks in a row the kernel follows before it gives up (ELOOP). */
const MAX_LINKS = 40

/** What the symlink at `path` names, as written in it; null when `path` is not a symlink (or not there). */
async function linkTarget(path: string): Promise<string | null> {
  try {
    return (await lstat(path)).isSymbolicLink() ? await readlink(path) : null
  } catch {
    return null
  }
}

/** A folder's real path, or — where it does not exist — its nearest existing ancestor's, with the rest as written. */
async function realFolder(folder: string): Promise<string> {
  try {
    return await realpath(folder)
  } catch {
    const parent = dirname(folder)
    return parent === folder ? folder : join(await realFolder(parent), basename(folder))
  }
}
