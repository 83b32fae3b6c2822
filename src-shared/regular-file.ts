import { closeSync, constants, fstatSync, openSync, readFileSync, type Stats, statSync } from 'node:fs'
import { open, stat } from 'node:fs/promises'

/**
 * A file of the data dir that is not a regular file: a FIFO, a socket, a device, a directory.
 * Opening a FIFO blocks until another process opens its other end, and reading a device may never
 * end: a command or a start would hang with no word. So every file of the data dir is looked at
 * before it is read or handed to SQLite, and one of another kind is named and refused.
 */
export class NotRegularFileError extends Error {
  override name = 'NotRegularFileError'
  readonly code = 'ENOTREGULAR'

  constructor(
    readonly path: string,
    /** What it is, as a line says it: `a FIFO`, `a directory`… */
    readonly kind: string,
  ) {
    super(`it is ${kind}, not a regular file`)
  }
}

/** What `stats` describe when not a regular file, as a line says it; null for a regular file. */
function kindOf(stats: Stats): string | null {
  if (stats.isFile()) return null
  if (stats.isDirectory()) return 'a directory'
  if (stats.isFIFO()) return 'a FIFO'
  if (stats.isSocket()) return 'a socket'
  if (stats.isCharacterDevice()) return 'a character device'
  if (stats.isBlockDevice()) return 'a block device'
  return 'a special file'
}

/**
 * Why the file at `path` (a symbolic link followed) is not a regular file, as `it is a FIFO, not
 * a regular file`; null when it is one, or when nothing is there (or it cannot
 * be looked at: its opening says why). For the files SQLite opens itself; it never opens `path`.
 */
export function notRegularFile(path: string): string | null {
  try {
    refuseNotRegular(path)
    return null
  } catch (error) {
    return (error as NotRegularFileError).message
  }
}

/** Throws {@link NotRegularFileError} when the file at `path` is there and not a regular file; for the files SQLite opens itself. */
export function refuseNotRegular(path: string): void {
  let stats: Stats | undefined
  try {
    stats = statSync(path, { throwIfNoEntry: false })
  } catch {
    return // its opening says why
  }
  const kind = stats ? kindOf(stats) : null
  if (kind !== null) throw new NotRegularFileError(path, kind)
}

/**
 * The text of the file at `path`, read as readFileSync reads it, but opened without blocking and
 * refused with {@link NotRegularFileError} when it is not a regular file (a FIFO's opening would
 * wait for a writer forever). Throws as readFileSync does otherwise (ENOENT, EACCES…).
 */
export function readRegularFile(path: string): string {
  // O_NONBLOCK only for the opening (no such flag on Windows, which has no FIFOs in a folder).
  const fd = openSync(path, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0))
  try {
    const kind = kindOf(fstatSync(fd))
    if (kind !== null) throw new NotRegularFileError(path, kind)
    return readFileSync(fd, 'utf8')
  } finally {
    closeSync(fd)
  }
}

/**
 * Writes `data` to the file at `path` (a symbolic link followed) as writeFile does, or appends it
 * as appendFile does, creating a file that is not there; refused with {@link NotRegularFileError}
 * when the file there is not a regular file. A plain open of a FIFO for writing waits for a
 * reader, with no end and no signal that stops it: it holds one of libuv's few file-system
 * threads, and a handful of them stop every later file operation of the process. So the file is
 * opened without blocking (a FIFO with no reader, or a socket, fails at once with ENXIO, a FIFO
 * with one opens) and looked at before a byte is written or it is cut short. Throws as writeFile
 * does otherwise (ENOENT, EACCES, ENOSPC…).
 */
export async function writeRegularFile(path: string, data: string | Uint8Array, append: boolean): Promise<void> {
  const flags = constants.O_WRONLY | constants.O_CREAT | (append ? constants.O_APPEND : 0) | (constants.O_NONBLOCK ?? 0)
  let handle
  try {
    handle = await open(path, flags, 0o666)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENXIO') throw error
    const kind = kindOf(await stat(path).catch(() => Promise.reject(error)))
    throw kind === null ? error : new NotRegularFileError(path, kind)
  }
  try {
    const kind = kindOf(await handle.stat())
    if (kind !== null) throw new NotRegularFileError(path, kind)
    // Cut only once it is known to be a regular file (O_TRUNC at the opening would cut a device's).
    if (!append) await handle.truncate(0)
    await handle.writeFile(data)
  } finally {
    await handle.close()
  }
}
