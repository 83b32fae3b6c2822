// The `leasehold` command's prebuilt bundle, out/cli/: the command line, the host and the local
// worker compiled ahead of time with esbuild (tsx's own compiler, so it is there whenever tsx
// is), so that `leasehold serve` runs as plain JavaScript — without tsx's loader thread and its
// compiling at start: about 45 MB less resident memory and a start in under a second instead of
// two or three (docs/performance.md).
//
// A stale bundle must never run. bin/leasehold.js runs the bundle only while every file it was
// built from — each source file esbuild read, tsconfig.json, and this builder — and every file
// built still has the content it had then. The build records each file's SHA-256 and, taken
// before it read the file, its status: device, inode, size, and modification and change times.
// At a start a file whose status is the same has the same content, because a write to it moves
// its change time, which no program can set back (a copy or a checkout that keeps modification
// times still makes new change times); a file whose status differs, or that was changed too near
// its reading for the file system's clock to tell a later write apart (`racyWindowMs`), is
// hashed again and compared. So a command checks ~340 files by their status (~10 ms) instead of
// reading and hashing ~4 MB (~20–30 ms, for 2 MB, with node:crypto's load, a tenth of a `leasehold
// submit`), and loads node:crypto only when some file must be hashed. The hashes are of the
// bytes esbuild itself compiled (read through the plugin below), so an edit made during a build
// cannot pass as built.
//
// Built by `npm install` (postinstall), `npm run build`, `npm start` and `npm run bench`;
// `node scripts/cli-bundle.js` builds it by hand.
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, isAbsolute, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

export const PROJECT_ROOT = fileURLToPath(new URL('..', import.meta.url))
export const CLI_BUNDLE_DIR = join(PROJECT_ROOT, 'out', 'cli')

/**
 * The bundle's entries, by name: the two programs' command lines (bin/leasehold.js chooses one:
 * `leasehold worker` is the worker program's), and the local worker process and its handler
 * threads, which the host starts from files beside its own code (src-main/pool/spawn.ts,
 * src-worker/handler-thread-client.ts). Chunks shared by them sit in the same directory.
 */
export const CLI_ENTRIES = {
  leasehold: 'src-main/cli.ts',
  'leasehold-worker': 'src-worker/command.ts',
  worker: 'src-worker/main.ts',
  'handler-thread': 'src-worker/handler-thread.ts',
}
/** The packages compiled into the bundle rather than loaded from node_modules (see the plugin in buildCliBundle). */
const BUNDLED_PACKAGES = /^(zod|zod-openapi)(\/|$)/
const MANIFEST = 'manifest.json'
/** Raised when the manifest's shape changes: a bundle described the old way is stale. */
const MANIFEST_FORMAT = 2
const BUILDER = fileURLToPath(import.meta.url)
/** Read by esbuild besides the sources (it decides how TypeScript is compiled). */
const CONFIG_INPUTS = ['tsconfig.json']
/**
 * How long after a file's change time a write could still leave its times as they are: one tick
 * of the file system's clock. Linux stamps files from a clock that moves every 1–10 ms, and
 * macOS and Windows in finer steps; a file system that keeps whole seconds (FAT keeps
 * modifications in two) shows it by times without a fraction of a second.
 */
const racyWindowMs = (changedMs) => (changedMs % 1 !== 0 ? 50 : 2000)

/** node:crypto, loaded only when a file is to be hashed: its load is a few ms of every command's start. */
const require = createRequire(import.meta.url)
const sha256 = (bytes) => require('node:crypto').createHash('sha256').update(bytes).digest('hex')

/**
 * A file's status as the manifest keeps it (what any write to the file changes), and its change
 * time in ms, to a fraction of a microsecond. (Not `bigint: true`: those stats build four Dates
 * each, a few ms of a command's start over ~200 files.)
 */
function statusOf(path) {
  const { dev, ino, size, mtimeMs, ctimeMs } = statSync(path)
  return { text: `${dev}:${ino}:${size}:${mtimeMs}:${ctimeMs}`, changedMs: ctimeMs }
}

/**
 * What the manifest keeps of one file: its status, taken before its bytes are read (`read`), and
 * the SHA-256 of those bytes. The file is `racy` when it was changed within a tick of the file
 * system's clock before its status was taken: a write right after could then leave the same
 * status, so it is always hashed.
 */
function record(path, read = () => readFileSync(path)) {
  const before = Date.now()
  const { text, changedMs } = statusOf(path)
  const contents = read()
  return { sha256: sha256(contents), status: text, racy: changedMs > before - racyWindowMs(changedMs) }
}

/**
 * Waits until none of `paths` was changed within a tick of the file system's clock, so that their
 * records are not racy. It asks the wall clock again after each wait: a timer counts on the event
 * loop's own clock, in whole milliseconds, and can end a millisecond or two before the wall clock
 * has passed the mark.
 */
async function settle(paths) {
  const settledAt = Math.max(...paths.map((path) => {
    const { changedMs } = statusOf(path)
    return changedMs + racyWindowMs(changedMs)
  }))
  while (Date.now() < settledAt) await new Promise((resolve) => setTimeout(resolve, settledAt - Date.now() + 1))
}

/** Whether the file at `path` still has the content `file` records (read from a manifest: any shape). */
function unchanged(path, file) {
  try {
    return (!file.racy && statusOf(path).text === file.status) || sha256(readFileSync(path)) === file.sha256
  } catch {
    return false // gone, unreadable, or a record that is not one
  }
}

/** Whether every file named in `files` (paths relative to `dir`) still has the content recorded for it. */
const sameContent = (dir, files) => Object.entries(files).every(([path, file]) => unchanged(join(dir, path), file))

/**
 * The bundle's entry (out/cli/leasehold.js) when it was built from the sources under `root` as
 * they are now, else null: no manifest, a manifest of another format or builder, a source file
 * changed or gone, or a built file changed or gone.
 */
export function freshCliBundle(outDir = CLI_BUNDLE_DIR, root = PROJECT_ROOT) {
  let manifest
  try {
    manifest = JSON.parse(readFileSync(join(outDir, MANIFEST), 'utf8'))
  } catch {
    return null
  }
  if (manifest?.format !== MANIFEST_FORMAT || typeof manifest.inputs !== 'object' || typeof manifest.outputs !== 'object') return null
  if (!unchanged(BUILDER, manifest.builder)) return null
  if (!sameContent(root, manifest.inputs) || !sameContent(outDir, manifest.outputs)) return null
  return join(outDir, 'leasehold.js')
}

/** The esbuild that tsx depends on (and compiles the sources with when there is no bundle). */
function loadEsbuild(root) {
  const fromRoot = createRequire(join(root, 'package.json'))
  return createRequire(fromRoot.resolve('tsx/package.json'))('esbuild')
}

/**
 * Builds the bundle of the sources under `root` into `outDir`, replacing the one there. It is
 * built in a directory beside `outDir` and moved into place whole, so a `leasehold` starting
 * meanwhile finds the old bundle, none (and runs the sources), or the new one — never half of one.
 * Resolves to the number of files built.
 */
export async function buildCliBundle({ root = PROJECT_ROOT, outDir = CLI_BUNDLE_DIR } = {}) {
  const esbuild = loadEsbuild(root)
  const inputs = {}
  for (const path of CONFIG_INPUTS) if (existsSync(join(root, path))) inputs[path] = record(join(root, path))
  const suffix = require('node:crypto').randomBytes(6).toString('hex')
  const staging = `${outDir}.building-${suffix}`
  const previous = `${outDir}.previous-${suffix}`
  try {
    const { metafile } = await esbuild.build({
      absWorkingDir: root,
      entryPoints: Object.fromEntries(Object.entries(CLI_ENTRIES).map(([name, path]) => [name, resolve(root, path)])),
      outdir: staging,
      bundle: true,
      splitting: true, // cli.ts imports the host lazily: `leasehold submit` loads neither Koa nor SQLite
      format: 'esm',
      platform: 'node',
      target: 'node20',
      logLevel: 'silent',
      metafile: true,
      plugins: [
        {
          // Every package resolves from node_modules at run time, better-sqlite3 above all, but
          // zod (and zod-openapi, which must see the same zod): its index imports each of its
          // ~130 locales, which every handler thread of every worker would open at once as it
          // starts (EMFILE under `ulimit -n 256`). Bundled, only the English one is kept.
          name: 'leasehold:external-packages',
          setup(build) {
            build.onResolve({ filter: /^[^./]/ }, (args) =>
              isAbsolute(args.path) || BUNDLED_PACKAGES.test(args.path) ? undefined : { path: args.path, external: true },
            )
          },
        },
        {
          name: 'leasehold:hash-inputs',
          setup(build) {
            build.onLoad({ filter: /.*/, namespace: 'file' }, (args) => {
              let contents
              inputs[relative(root, args.path).split('\\').join('/')] = record(args.path, () => (contents = readFileSync(args.path)))
              return { contents, loader: 'default' }
            })
          },
        },
      ],
    })
    // The files just written are recorded once a tick of the clock has passed (~50 ms), so that
    // a command checks them by their status, not their bytes.
    const names = Object.keys(metafile.outputs).map((path) => relative(staging, resolve(root, path)).split('\\').join('/'))
    await settle([...names.map((name) => join(staging, name)), BUILDER])
    const outputs = {}
    for (const name of names) outputs[name] = record(join(staging, name))
    const manifest = { format: MANIFEST_FORMAT, builder: record(BUILDER), inputs, outputs }
    writeFileSync(join(staging, MANIFEST), `${JSON.stringify(manifest, null, 1)}\n`)
    mkdirSync(dirname(outDir), { recursive: true })
    try {
      renameSync(outDir, previous)
    } catch (error) {
      if (error.code !== 'ENOENT') throw error // none yet, or another build moved it first
    }
    try {
      renameSync(staging, outDir)
    } catch (error) {
      // Another build moved its bundle in first: keep it if it is of these same sources.
      if (freshCliBundle(outDir, root) === null) throw error
    }
    return Object.keys(outputs).length
  } finally {
    rmSync(staging, { recursive: true, force: true })
    rmSync(previous, { recursive: true, force: true })
  }
}

// `node scripts/cli-bundle.js`: build out/cli.
if (process.argv[1] && resolve(process.argv[1]) === BUILDER) {
  const started = performance.now()
  try {
    const files = await buildCliBundle()
    console.error(`leasehold: built the command's bundle, out/cli/ (${files} files), in ${Math.round(performance.now() - started)} ms`)
  } catch (error) {
    console.error(`leasehold: cannot build the command's bundle (out/cli/): ${error.message}`)
    process.exitCode = 1
  }
}
