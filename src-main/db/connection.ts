import BetterSqlite3 from 'better-sqlite3'
import { existsSync } from 'node:fs'
import { resolve, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import { WAL_VFS_VARIABLE, walVfsOff } from './wal-vfs-setting'

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
 * Stacked on it, where it was built at install, is Leasehold's own `leasehold-wal` VFS
 * (native/wal-vfs.c): it writes each commit's frames to the log in one system call where SQLite
 * makes two a frame, and forwards everything else (docs/performance.md, "One write for each
 * commit"). Where it is not built, or LEASEHOLD_WAL_VFS=off, the file is opened through
 * `unix-excl` itself.
 *
 * Windows has neither VFS: there, as for `:memory:`, the file is named by its path (the default
 * VFS, with its `-shm` file).
 */
const BASE_VFS = 'unix-excl'
const WAL_VFS = 'leasehold-wal'

/**
 * The extension that registers {@link WAL_VFS}, built into out/native by scripts/wal-vfs.js;
 * from the packaged app, its copy outside the asar.
 */
export const WAL_VFS_FILE = fileURLToPath(new URL(import.meta.url.endsWith('.ts') ? '../../out/native/wal-vfs.so' : '../native/wal-vfs.so', import.meta.url)).replace(
  `app.asar${sep}`,
  `app.asar.unpacked${sep}`,
)

// better-sqlite3 reads SQLITE_USE_URI once, as its addon loads with the process's first
// connection: with it set, a name that starts with `file:` is a URI, whose `vfs` parameter picks
// the VFS. Every opener of the database imports this module, so it is set before that.
process.env.SQLITE_USE_URI ??= '1'

const vfsByAddon = new Map<string, string | null>()
/** Why the extension, though built, did not load into an addon's SQLite; by addon, as above. */
const walVfsFailures = new Map<string, string>()

/**
 * The VFS this process's SQLite (the addon at `nativeBinding`, or better-sqlite3's own) opens
 * the database through, found once per addon: {@link WAL_VFS} when its extension loads, else
 * {@link BASE_VFS}; null when SQLite does not read file names as URIs (the addon loaded before
 * SQLITE_USE_URI was set, or it is 0). The URI probe names, read as a plain name, no file that
 * exists, and `fileMustExist` keeps SQLite from creating one.
 */
function processVfs(nativeBinding?: string): string | null {
  const key = nativeBinding ?? ''
  let vfs = vfsByAddon.get(key)
  if (vfs === undefined) {
    const options = nativeBinding ? { nativeBinding } : {}
    try {
      new BetterSqlite3(`file:leasehold-uri-probe?mode=memory&vfs=${BASE_VFS}`, { fileMustExist: true, ...options }).close()
      const failure = loadWalVfs(WAL_VFS_FILE, options)
      if (failure !== null && existsSync(WAL_VFS_FILE)) walVfsFailures.set(key, failure)
      vfs = failure === null ? WAL_VFS : BASE_VFS
    } catch {
      vfs = null
    }
    vfsByAddon.set(key, vfs)
  }
  return vfs
}

/**
 * Loads the extension at `file` into the addon's SQLite, where it registers {@link WAL_VFS} for
 * the whole process. Returns null when it did, else why not: LEASEHOLD_WAL_VFS=off, or SQLite's
 * own words (the file is missing, was built for another platform, is not the extension).
 */
export function loadWalVfs(file: string, options: BetterSqlite3.Options = {}): string | null {
  if (walVfsOff(process.env[WAL_VFS_VARIABLE])) return 'LEASEHOLD_WAL_VFS=off'
  const probe = new BetterSqlite3(':memory:', options)
  try {
    probe.loadExtension(file) // its entry point, sqlite3_walvfs_init, is named after the file
    return null
  } catch (error) {
    const message = (error as Error).message.split('\n')[0]!
    // SQLite tries the name as given, then with the platform's suffix, and reports the last try.
    return message.includes(`${file}.`) ? 'not a library this process can load' : message
  } finally {
    probe.close()
  }
}

/**
 * Why the `leasehold-wal` extension, built at install, did not load into this process's SQLite
 * (the addon at `nativeBinding`): a line for the host to log at its start, or null when it
 * loaded, was turned off, or was never built (the install said so).
 */
export function walVfsLoadFailure(nativeBinding?: string): string | null {
  if (process.platform === 'win32') return null
  processVfs(nativeBinding)
  const failure = walVfsFailures.get(nativeBinding ?? '')
  if (failure === undefined || failure === 'LEASEHOLD_WAL_VFS=off') return null
  return `the SQLite extension ${WAL_VFS_FILE} did not load (${failure}); the database is written through SQLite's unix-excl VFS instead (two write calls a page where one would do); \`node scripts/wal-vfs.js\` builds it again`
}

/**
 * The name to open the database at `path` by, in the host's process: a `file:` URI naming the
 * VFS above where this platform and this process's SQLite allow it, else the path itself.
 */
export function connectionName(path: string, nativeBinding?: string): string {
  if (path === ':memory:' || path === '' || process.platform === 'win32') return path
  const vfs = processVfs(nativeBinding)
  if (vfs === null) return path
  return `file:${resolve(path).replace(/[%?#]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)}?vfs=${vfs}`
}

/** The file a connection opened by {@link connectionName} reads: its path, for messages and the data dir. */
export function connectionPath(name: string): string {
  if (!name.startsWith('file:')) return name
  return decodeURIComponent(name.slice('file:'.length, name.lastIndexOf('?')))
}
