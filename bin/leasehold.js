#!/usr/bin/env node
// The `leasehold` command under plain Node. It runs the prebuilt bundle out/cli/ while that was
// built from the sources as they are now (scripts/cli-bundle.js says how that is judged), and
// otherwise the TypeScript sources through tsx: it never needs a build step and never runs stale
// code, and the bundle starts faster and holds less memory. (The desktop app is built by
// electron-vite instead.)
//
// It also chooses the program: `leasehold worker` (and `leasehold help worker`) is the worker
// program's command line (src-worker/command.ts), every other command the host's
// (src-main/cli.ts). The programs share only src-shared/, so a worker never loads the host's code.
import { dirname, join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { CLI_ENTRIES, freshCliBundle } from '../scripts/cli-bundle.js'

const argv = process.argv.slice(2)
const entry = argv[0] === 'worker' || (argv[0] === 'help' && argv[1] === 'worker') ? 'leasehold-worker' : 'leasehold'
// The arguments may hold a secret (`--token`, a URL's `#token=`, a Redis URL's password), and on
// Linux every local user reads them in /proc/<pid>/cmdline for as long as the process runs. They
// are read by now (process.argv is Node's copy), so the title is written over them: libuv writes
// it into the memory the kernel shows, and zeroes the rest. What is left is the command's name.
// (Not on Windows, where the title is the console window's.)
if (process.platform !== 'win32') process.title = argv[0] && /^[a-z-]+$/.test(argv[0]) ? `leasehold ${argv[0]}` : 'leasehold'

/** The command line from the TypeScript sources, compiled by tsx as they load. */
async function fromSources() {
  const { register } = await import('tsx/esm/api')
  register()
  return import(new URL(`../${CLI_ENTRIES[entry]}`, import.meta.url).href)
}

const bundle = freshCliBundle()
const { main } = bundle ? await import(pathToFileURL(join(dirname(bundle), `${entry}.js`)).href) : await fromSources()
process.exitCode = await main(argv)
