import { basename, dirname, join, resolve } from 'node:path'
import { linkedFile, ProtectedLinkError, realPath } from '../src-shared/linked-file'
import { MAX_PATH_CHARS } from '../src-shared/worker-exchange'

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
 *
 * The gate keys paths as text: a name that is not valid UTF-8 (a folder `nu\xff` on Linux,
 * reached through a symlink, say) has no faithful text, and decoded lossily two such folders
 * would share a key. Such a path is refused ({@link UnnamablePath}), as is a path given with a
 * lone surrogate (it reaches the file system as U+FFFD, another file than it names), and a path
 * longer than the gate keys ({@link MAX_PATH_CHARS}).
 *
 * Every symbolic link it follows to find the key, at the end or in a folder, is followed by the
 * write's rule for links in shared folders (src-shared/linked-file.ts): another user's link in a
 * folder that is sticky and writable by anyone (/tmp) is refused, EACCES, not retryable
 * ({@link ProtectedLinkError}), before the gate is asked for a file such a link could aim anywhere.
 */
export async function gatePath(path: string, followLast: boolean): Promise<string> {
  if (LONE_SURROGATE.test(path)) throw new UnnamablePath(Buffer.from(path), 'contains a lone UTF-16 surrogate')
  let key: string
  try {
    key = await realTarget(path, followLast)
  } catch (error) {
    // The name it cannot carry is a folder on the way, or a link's target: the message names the path asked for too.
    if (error instanceof UnnamablePath) error.message += ` (on the way to ${shownPath(resolve(path))})`
    if (error instanceof ProtectedLinkError) error.onTheWayTo(shownPath(resolve(path)))
    throw error
  }
  if (key.length > MAX_PATH_CHARS) {
    throw new GateRefusal('ENAMETOOLONG', `The file gate cannot take ${shownPath(key)}: the path is longer than the ${MAX_PATH_CHARS} characters it keys`)
  }
  return key
}

async function realTarget(path: string, followLast: boolean): Promise<string> {
  if (!followLast) return join(await realFolder(dirname(path)), basename(path))
  try {
    return await realName(path)
  } catch (error) {
    if (error instanceof UnnamablePath || error instanceof ProtectedLinkError) throw error
    // Not there yet (or not a path that resolves): a dangling link's target, else its folder, below.
  }
  // A symlink whose target is not there yet (a dangling link) is followed too, by the rule the
  // write follows (src-shared/linked-file.ts): the write creates the file the link names, so that
  // file is the key, as it will be once it exists. A loop of links is keyed as written.
  const { path: file, loops } = await linkedFile(path, nameOf)
  return loops ? file : join(await realFolder(dirname(file)), basename(file))
}

/**
 * A path the gate refuses as such: every attempt would meet the same refusal, so the change (and,
 * unless its handler catches it, the attempt) fails at once, not retryable, with a file system's
 * code for it and a message naming the path.
 */
export class GateRefusal extends Error {
  readonly retryable = false
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message)
    this.name = 'GateRefusal'
  }
}

/** A path the file gate cannot name faithfully (`EILSEQ`, an illegal byte sequence): the write, rm or rename that asked for it fails with this. */
export class UnnamablePath extends GateRefusal {
  constructor(bytes: Buffer, why = 'is not valid UTF-8') {
    super('EILSEQ', `The file gate cannot name ${shownPath(shownBytes(bytes))}: it ${why}, and the gate keys files by their names as text (a lossy name could be another file's); rename it to take it through the gate`)
    this.name = 'UnnamablePath'
  }
}

/** The most of a path a message shows: its start and its end, which say where it is and what it is. */
const SHOWN_PATH_CHARS = 240

/** A path for a message: whole, or its start and end around a mark saying how long it is. */
export function shownPath(path: string): string {
  if (path.length <= SHOWN_PATH_CHARS) return path
  const end = SHOWN_PATH_CHARS / 2
  return `${path.slice(0, end)}…(${path.length} characters)…${path.slice(-end)}`
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/
const strictUtf8 = new TextDecoder('utf-8', { fatal: true })

/** Bytes as text, strictly: a name that is not valid UTF-8 is refused, never decoded with U+FFFD. */
function nameOf(bytes: Buffer): string {
  try {
    return strictUtf8.decode(bytes)
  } catch {
    throw new UnnamablePath(bytes)
  }
}

/** A path's bytes for an error message: printable ASCII as it is, every other byte as `\xff`. */
function shownBytes(bytes: Buffer): string {
  return [...bytes].map((b) => (b >= 0x20 && b < 0x7f && b !== 0x5c ? String.fromCharCode(b) : `\\x${b.toString(16).padStart(2, '0')}`)).join('')
}

/** The real path, its names decoded strictly (see {@link nameOf}), its links followed by the write's rule ({@link realPath}). */
async function realName(path: string): Promise<string> {
  return realPath(path, nameOf)
}

/** A folder's real path, or — where it does not exist — its nearest existing ancestor's, with the rest as written. */
async function realFolder(folder: string): Promise<string> {
  try {
    return await realName(folder)
  } catch (error) {
    if (error instanceof UnnamablePath || error instanceof ProtectedLinkError) throw error
    const parent = dirname(folder)
    return parent === folder ? folder : join(await realFolder(parent), basename(folder))
  }
}
