import BetterSqlite3 from 'better-sqlite3'
import { resolve } from 'node:path'

/**
 * How the host's process names its database file to SQLite: on Linux and macOS, through SQLite's
 * `unix-excl` VFS. The process takes one OS lock on the file as its first connection opens it
 * and keeps it until the last one closes, and keeps the write-ahead log's index in its own
 * memory instead of a `-shm` file. Every transaction then takes its locks in memory: with the
 * default VFS each one made ~6 `fcntl` calls on the `-shm` file (a read mark, the write lock,
 * each taken and given back), which on this kind of VM cost the host's main thread more than
 * the statements of a one-job submit (docs/performance.md, "The database file is the host's
 * own").
 *
 * The connections of the host's own process (the writer, the checkpointer's thread, the
 * integrity check's thread) share the lock and the index, as they would a `-shm` file. Another
 * process cannot read the file while a host has it open: SQLite answers it `SQLITE_BUSY`
 * (`leasehold check` asks the running host instead). When the host exits in any way, the OS
 * drops the lock; a log left behind is recovered by the next open, as always.
 *
 * Windows has no such VFS: there, as for `:memory:`, the file is named by its path (the default
 * VFS, with its `-shm` file).
 */
const VFS = 'unix-excl'

// better-sqlite3 reads SQLITE_USE_URI once, as its addon loads with the process's first
// connection: with it set, a name that starts with `file:` is a URI, whose `vfs` parameter picks
// the VFS. Every opener of the database imports this module, so it is set before that.
process.env.SQLITE_USE_URI ??= '1'

const urisByAddon = new Map<string, boolean>()

/**
 * Whether this process's SQLite reads file names as URIs: false when the addon loaded before
 * SQLITE_USE_URI was set, or with it set to 0. The probe is a URI that, read as a plain name,
 * names no file that exists, and `fileMustExist` keeps SQLite from creating one.
 */
function urisAccepted(nativeBinding?: string): boolean {
  const key = nativeBinding ?? ''
  let accepted = urisByAddon.get(key)
  if (accepted === undefined) {
    try {
      new BetterSqlite3(`file:leasehold-uri-probe?mode=memory&vfs=${VFS}`, { fileMustExist: true, ...(nativeBinding ? { nativeBinding } : {}) }).close()
      accepted = true
    } catch {
      accepted = false
    }
    urisByAddon.set(key, accepted)
  }
  return accepted
}

/**
 * The name to open the database at `path` by, in the host's process: a `file:` URI naming the
 * VFS above where this platform and this process's SQLite allow it, else the path itself.
 */
export function connectionName(path: string, nativeBinding?: string): string {
  if (path === ':memory:' || path === '' || process.platform === 'win32' || !urisAccepted(nativeBinding)) return path
  return `file:${resolve(path).replace(/[%?#]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)}?vfs=${VFS}`
}

/** The file a connection opened by {@link connectionName} reads: its path, for messages and the data dir. */
export function connectionPath(name: string): string {
  if (!name.startsWith('file:')) return name
  return decodeURIComponent(name.slice('file:'.length, name.lastIndexOf('?')))
}
