// Compiles native/wal-vfs.c, the SQLite extension that registers the `leasehold-wal` VFS (one
// write call for each commit to the write-ahead log: docs/performance.md, "One write for each
// commit"), into out/native/wal-vfs.so. `npm install` runs it after better-sqlite3 is in place;
// run by hand: node scripts/wal-vfs.js.
//
// The extension is a single C file that includes only SQLite's extension header, shipped with
// better-sqlite3 (deps/sqlite3/sqlite3ext.h), and reaches SQLite through the table of functions
// SQLite hands it as it loads, so the same file loads into Node's and Electron's better-sqlite3.
// It needs the C compiler better-sqlite3's own build uses where no prebuilt addon can be
// downloaded (`cc`, or CC); it takes well under a second. Where it cannot be built (no compiler;
// Windows, which has no `unix-excl` VFS for it to stack on) the host opens its database through
// `unix-excl` itself: the same behaviour, with SQLite's two writes per frame.
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { APP_FILES } from './app-files.js'

const require = createRequire(import.meta.url)
const projectRoot = join(dirname(fileURLToPath(import.meta.url)), '..')

/**
 * The compiler command line that builds `source` into `output` against the headers in `include`.
 * @param {{ source: string, output: string, include: string, cc?: string, platform?: string }} options
 * @returns {string[]}
 */
export function walVfsCompileCommand({ source, output, include, cc = process.env.CC || 'cc', platform = process.platform }) {
  const shared = platform === 'darwin' ? ['-dynamiclib'] : ['-shared']
  return [...cc.split(' ').filter(Boolean), '-O2', '-fPIC', ...shared, '-I', include, source, '-o', output]
}

/**
 * Builds the extension. Returns the file it wrote; throws an Error whose message is one line
 * when it cannot (the compiler's first line of complaint, or why it was not tried).
 * @param {{ root?: string, output?: string, cc?: string, platform?: string }} options
 * @returns {string}
 */
export function buildWalVfs({ root = projectRoot, output = join(root, APP_FILES.walVfs), cc, platform = process.platform } = {}) {
  if (platform === 'win32') throw new Error('Windows has no unix-excl VFS for leasehold-wal to stack on')
  const include = join(dirname(require.resolve('better-sqlite3/package.json')), 'deps', 'sqlite3')
  if (!existsSync(join(include, 'sqlite3ext.h'))) throw new Error(`SQLite's extension header is not in ${include}`)
  mkdirSync(dirname(output), { recursive: true })
  // Written beside its place and moved there, so that a process loading it never meets half a file.
  const partial = `${output}.${process.pid}.tmp`
  const [command, ...args] = walVfsCompileCommand({ source: join(root, 'native', 'wal-vfs.c'), output: partial, include, cc, platform })
  const result = spawnSync(command, args, { encoding: 'utf8' })
  if (result.status !== 0) {
    rmSync(partial, { force: true })
    const why = result.error?.message ?? (result.stderr.split('\n').find((line) => /error/i.test(line)) ?? result.stderr.trim().split('\n')[0] ?? 'no output')
    throw new Error(`${command} could not compile native/wal-vfs.c (${why.trim().slice(0, 200)})`)
  }
  renameSync(partial, output)
  return output
}

const runAsScript = process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]

if (runAsScript) {
  try {
    console.log(`leasehold: built ${buildWalVfs()}`)
  } catch (error) {
    console.error(`leasehold: ${error.message}`)
    process.exit(1)
  }
}
