import { closeSync, constants, fstatSync, openSync, readFileSync, type Stats, statSync } from 'node:fs'
import { type FileHandle, lstat, open, readdir, rename, rm, stat, unlink } from 'node:fs/promises'
import { basename, dirname, join, sep } from 'node:path'
import { linkedFile, ProtectedLinkError } from './linked-file'

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

/** O_NONBLOCK, for an opening that must not wait on a FIFO (no such flag on Windows, which has no FIFOs in a folder). */
const NONBLOCK = constants.O_NONBLOCK ?? 0

/**
 * O_NOFOLLOW, for the opening of a file whose links were followed already ({@link writtenFile}):
 * a link put in its place since then fails the opening (ELOOP) instead of being followed
 * unchecked. None on Windows, which has no shared folders ({@link ProtectedLinkError}).
 */
const NOFOLLOW = constants.O_NOFOLLOW ?? 0

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
 * wait for a writer forever). Throws as readFileSync does otherwise (ENOENT, EACCES…). `vet`
 * sees the opened file's stats before it is read, and may refuse it by throwing: they are the
 * file read, whatever replaces the path meanwhile.
 */
export function readRegularFile(path: string, vet?: (stats: Stats) => void): string {
  const fd = openSync(path, constants.O_RDONLY | NONBLOCK)
  try {
    const stats = fstatSync(fd)
    const kind = kindOf(stats)
    if (kind !== null) throw new NotRegularFileError(path, kind)
    vet?.(stats)
    return readFileSync(fd, 'utf8')
  } finally {
    closeSync(fd)
  }
}

/**
 * Writes `data` to the file at `path` (a symbolic link followed) as writeFile does, or appends it
 * as appendFile does, creating a file that is not there; refused with {@link NotRegularFileError}
 * when the file there is not a regular file, and with {@link ProtectedLinkError} (EACCES, not
 * retryable) when a link on the way is another user's in a shared folder such as /tmp: the links
 * are followed here, as the gate follows them (linked-file.ts), and the file they lead to is
 * opened with no link followed, so that the kernel's own rule for such links, which a machine may
 * have off, is not what keeps the write from another user's link. Throws as writeFile does
 * otherwise (ENOENT, EACCES, ENOSPC…), and a write that fails leaves the file as it was: a full
 * disk (or an I/O error, or a file size limit) met halfway must not cost the old content, nor
 * leave a part that a retry would write again. So a write puts the new content in a file of its
 * own beside the file and renames it over the file once it is whole and synced
 * ({@link replaceRegularFile}), and an append that fails cuts the file back to the length it had
 * ({@link appendRegularFile}).
 *
 * `leased`: the caller holds the file lease of the file written (the worker's gated `files.*`
 * writes do), so that no other write of it is under way but the caller's own. A write that
 * replaces the file then also removes what a write of it ended midway left beside it
 * ({@link removeStaleTemps}); without the lease another writer's file could be one of those.
 */
export async function writeRegularFile(path: string, data: string | Uint8Array, append: boolean, leased = false): Promise<void> {
  const target = await writtenFile(path)
  if (!append || !(await appendRegularFile(target, data))) await replaceRegularFile(target, data, leased)
}

/**
 * The regular file at `path` opened with `flags` (never O_CREAT) and what it is, or null when
 * nothing is there; refused with {@link NotRegularFileError} when it is not a regular file. A
 * plain open of a FIFO for writing waits for a reader, with no end and no signal that stops it: it
 * holds one of libuv's few file-system threads, and a handful of them stop every later file
 * operation of the process. So the file is opened without blocking (a FIFO with no reader, or a
 * socket, fails at once with ENXIO, a FIFO with one opens) and looked at before a byte is written.
 */
async function openRegular(path: string, flags: number): Promise<{ handle: FileHandle; stats: Stats } | null> {
  let handle
  try {
    handle = await open(path, flags | NONBLOCK)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOENT') return null
    if (code !== 'ENXIO') throw error
    const kind = kindOf(await stat(path).catch(() => Promise.reject(error)))
    throw kind === null ? error : new NotRegularFileError(path, kind)
  }
  try {
    const stats = await handle.stat()
    const kind = kindOf(stats)
    if (kind !== null) throw new NotRegularFileError(path, kind)
    return { handle, stats }
  } catch (error) {
    await handle.close()
    throw error
  }
}

/**
 * Appends `data` to the file at `path` (its links followed already: {@link writtenFile}) in place,
 * or answers false when no file is there (a new file is written whole instead).
 */
async function appendRegularFile(path: string, data: string | Uint8Array): Promise<boolean> {
  const opened = await openRegular(path, constants.O_WRONLY | constants.O_APPEND | NOFOLLOW)
  if (!opened) return false
  const { handle, stats } = opened
  try {
    await handle.writeFile(data)
  } catch (error) {
    // What was appended before the failure goes, so that a retry appends the data once. Cutting
    // a file short frees space, so it holds on a full disk; should it fail too, the write's own
    // error is still the one to say.
    await handle.truncate(stats.size).catch(() => {})
    throw error
  } finally {
    await handle.close()
  }
  return true
}

/**
 * Replaces the file at `target` (the file a symbolic link at the path asked for names, the link
 * kept: {@link writtenFile}) with one holding `data`, or makes it. The data goes to a new file in
 * the same folder, named as Leasehold's (`.<name>.leasehold-<random>.tmp`), synced, then renamed
 * over the file: the rename is atomic on one file system, so the file has its old content or the
 * new, never a part. The new file takes the old one's permission bits, and its owner and group
 * where the process may give them; it is removed whenever the write fails. Nothing is made for a
 * file that is not regular, or that the process may not write. Under the file's lease (`leased`)
 * the new files that writes of it ended midway left are removed first: each holds a whole content,
 * room the new one may need.
 */
async function replaceRegularFile(target: string, data: string | Uint8Array, leased: boolean): Promise<void> {
  // Opened (not cut) as a write in place would open it: refused as that opening would be refused
  // (EACCES, EROFS, ETXTBSY for a running program, EISDIR), and looked at first (openRegular).
  const opened = await openRegular(target, constants.O_WRONLY | NOFOLLOW)
  await opened?.handle.close()
  const old = opened?.stats
  if (!old && (target.endsWith('/') || target.endsWith(sep))) {
    // A name that ends in a separator names a folder: the kernel makes no file of it, nor may the rename.
    throw Object.assign(new Error(`EISDIR: illegal operation on a directory, open '${target}'`), { code: 'EISDIR', path: target })
  }
  if (leased) await removeStaleTemps(target)
  const temp = join(dirname(target), tempName(basename(target)))
  let handle
  try {
    // A new file is made as open would make it (0o666 less the umask); a replacement is private until it has the old one's bits.
    handle = await open(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, old ? 0o600 : 0o666)
  } catch (error) {
    // Said of the file asked for: the new one beside it is how it is written, not what was asked.
    const failure = error as NodeJS.ErrnoException
    failure.message = failure.message.replace(temp, target)
    failure.path = target
    throw failure
  }
  unfinished.add(basename(temp))
  try {
    try {
      if (old) await keepOwnership(handle, old)
      await handle.writeFile(data)
      await handle.sync()
    } finally {
      await handle.close()
    }
    await rename(temp, target).catch(async (error: NodeJS.ErrnoException) => {
      throw leased ? await renameFailure(error, temp, target) : error
    })
  } catch (error) {
    await rm(temp, { force: true }).catch(() => {})
    throw error
  } finally {
    unfinished.delete(basename(temp))
  }
}

/**
 * The new files of this thread's writes that are still under way, by name. A handler may write
 * one file twice at once, both writes under its job's lease: the one that clears the file's
 * stale new files must not take the other's. By name, not path: the other may spell the folder
 * another way (through a symlinked folder) and still write the same file.
 */
const unfinished = new Set<string>()

/**
 * Removes the new files that writes of `target` ended midway left beside it (a worker killed, a
 * power loss, between their making and their rename): entries named as {@link tempName} names
 * them for `target`, `.<name>.leasehold-<12 hex digits>.tmp` and nothing looser (a looser match
 * of `a` would take `.a.leasehold-<hex>.tmp.leasehold-<hex>.tmp`, the new file of another file),
 * that are regular files (a symlink or a folder of that name is left, and no link is followed),
 * and not one of {@link unfinished}. Only under `target`'s file lease: the lease makes the caller
 * its only writer, so any other such file is a dead write's. A name too long to be carried by the
 * new file's (`.leasehold-<random>.tmp`) leaves nothing to remove: such a file says not whose it
 * is, and another job may be writing another long-named file of the folder, under a lease of its
 * own. Nothing here fails the write: a file that cannot be removed is left as it was.
 */
async function removeStaleTemps(target: string): Promise<void> {
  const name = basename(target)
  if (Buffer.byteLength(name) > TEMP_NAME_BYTES) return
  const folder = dirname(target)
  let entries: string[]
  try {
    entries = await readdir(folder)
  } catch {
    return // the write's own opening says what is wrong with the folder
  }
  for (const entry of entries) {
    if (!isTempOf(entry, name) || unfinished.has(entry)) continue
    const stale = join(folder, entry)
    try {
      if ((await lstat(stale)).isFile()) await unlink(stale)
    } catch {
      // Gone already, or not the worker's to remove: the write goes on.
    }
  }
}

/**
 * Why a rename of a write made under the file's lease failed. The new file gone from a folder
 * that is there was removed by another write of the file, which holds the file's lease and clears
 * what dead writes left ({@link removeStaleTemps}): this write had lost the file (an operator took
 * it, or it went idle while the host was away), and says so as the worker says it of a job whose
 * file was taken, `file_lease_lost`, retryable (the next attempt asks the gate again), not as a
 * missing folder, which the next attempt would meet too. Any other failure as it is.
 */
async function renameFailure(error: NodeJS.ErrnoException, temp: string, target: string): Promise<Error> {
  if (error.code !== 'ENOENT' || (await there(temp)) || !(await there(dirname(target)))) return error
  return Object.assign(
    new Error(`${target} is not written: its new content, ${basename(temp)}, was removed before its rename, as a write of the file under its lease removes what dead writes left; this write no longer held the file`),
    { code: 'file_lease_lost', retryable: true, path: target },
  )
}

/** Whether anything is at `path` (a dangling link counts). */
async function there(path: string): Promise<boolean> {
  return lstat(path).then(
    () => true,
    () => false,
  )
}

/** The part of a new file's name after `.<name>.leasehold-` ({@link tempName}). */
const TEMP_TAIL = /^[0-9a-f]{12}\.tmp$/

/** Whether `entry` is a name {@link tempName} gives a new content of the file named `name`. */
function isTempOf(entry: string, name: string): boolean {
  const start = `.${name}.leasehold-`
  return entry.startsWith(start) && TEMP_TAIL.test(entry.slice(start.length))
}

/** The longest name (in bytes) a temporary file's name carries of the file's; most file systems allow 255. */
const TEMP_NAME_BYTES = 200

/** A name for the new content of the file named `name`, Leasehold's and unlikely to be any other file's. */
function tempName(name: string): string {
  // Made with O_EXCL, so a clash (or a link put there) fails rather than is written through; the
  // client commands that share this module load no node:crypto (test/cli/bundle.test.ts).
  const random = Math.floor(Math.random() * 2 ** 48).toString(16).padStart(12, '0')
  return Buffer.byteLength(name) <= TEMP_NAME_BYTES ? `.${name}.leasehold-${random}.tmp` : `.leasehold-${random}.tmp`
}

/** Gives the file of `handle` the permission bits of `old`, and its owner and group where the process may (else what it may of them). */
async function keepOwnership(handle: FileHandle, old: Stats): Promise<void> {
  await handle.chmod(old.mode & 0o777)
  const own = await handle.stat()
  if (own.uid === old.uid && own.gid === old.gid) return
  try {
    await handle.chown(old.uid, old.gid)
  } catch {
    // Only a privileged process gives a file away; its owner may still give it a group it is in.
    await handle.chown(-1, old.gid).catch(() => {})
  }
}

/**
 * The file a write to `path` changes, symbolic links followed as the gate follows them to key it
 * (linked-file.ts); a loop of links fails as the kernel's open would fail it (ELOOP), and another
 * user's link in a shared folder as the kernel's rule for such links fails it (EACCES,
 * {@link ProtectedLinkError}, naming `path` too).
 */
async function writtenFile(path: string): Promise<string> {
  const { path: file, loops } = await linkedFile(path).catch((error: unknown) => {
    throw error instanceof ProtectedLinkError ? error.onTheWayTo(path) : error
  })
  if (loops) throw Object.assign(new Error(`ELOOP: too many symbolic links encountered, open '${file}'`), { code: 'ELOOP', path: file })
  return file
}
