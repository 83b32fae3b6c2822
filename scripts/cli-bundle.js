// The `leasehold` command's prebuilt bundle, out/cli/: the command line, the host and the local
// worker compiled ahead of time with esbuild (tsx's own compiler, so it is there whenever tsx
// is), so that `leasehold serve` runs as plain JavaScript — without tsx's loader thread and its
// compiling at start: about 45 MB less resident memory and a start in under a second instead of
// two or three (docs/performance.md).
//
// A stale bundle must never run. bin/leasehold.js runs the bundle only while every file it was
// built from — each source file esbuild read, tsconfig.json, and this builder — still has the
// content it had then, compared by SHA-256 at every start (about 10 ms; mtimes are not
// trusted: a checkout or a copy can keep them while the content changes). Otherwise it runs the
// TypeScript sources through tsx, as it always did. The hashes are of the bytes esbuild itself
// compiled (read through the plugin below), so an edit made during a build cannot pass as built.
//
// Built by `npm install` (postinstall), `npm run build`, `npm start` and `npm run bench`;
// `node scripts/cli-bundle.js` builds it by hand.
import { createHash, randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, relative, resolve } from 'node:path'
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
const MANIFEST = 'manifest.json'
/** Raised when the manifest's shape changes: a bundle described the old way is stale. */
const MANIFEST_FORMAT = 1
const BUILDER = fileURLToPath(import.meta.url)
/** Read by esbuild besides the sources (it decides how TypeScript is compiled). */
const CONFIG_INPUTS = ['tsconfig.json']

const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex')

/** Whether every file named in `hashes` (paths relative to `dir`) still has its hash. */
function sameContent(dir, hashes) {
  try {
    return Object.entries(hashes).every(([path, hash]) => sha256(readFileSync(join(dir, path))) === hash)
  } catch {
    return false
  }
}

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
  if (manifest.builder !== sha256(readFileSync(BUILDER))) return null
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
  for (const path of CONFIG_INPUTS) if (existsSync(join(root, path))) inputs[path] = sha256(readFileSync(join(root, path)))
  const suffix = randomBytes(6).toString('hex')
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
      packages: 'external', // every package resolves from node_modules at run time, better-sqlite3 above all
      logLevel: 'silent',
      metafile: true,
      plugins: [
        {
          name: 'leasehold:hash-inputs',
          setup(build) {
            build.onLoad({ filter: /.*/, namespace: 'file' }, (args) => {
              const contents = readFileSync(args.path)
              inputs[relative(root, args.path).split('\\').join('/')] = sha256(contents)
              return { contents, loader: 'default' }
            })
          },
        },
      ],
    })
    const outputs = {}
    for (const path of Object.keys(metafile.outputs)) {
      const name = relative(staging, resolve(root, path)).split('\\').join('/')
      outputs[name] = sha256(readFileSync(join(staging, name)))
    }
    const manifest = { format: MANIFEST_FORMAT, builder: sha256(readFileSync(BUILDER)), inputs, outputs }
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
