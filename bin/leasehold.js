#!/usr/bin/env node
// The `leasehold` command under plain Node. It runs the prebuilt bundle out/cli/ while that was
// built from the sources as they are now (scripts/cli-bundle.js says how that is judged), and
// otherwise the TypeScript sources through tsx: it never needs a build step and never runs stale
// code, and the bundle starts faster and holds less memory. (The desktop app is built by
// electron-vite instead.)
import { pathToFileURL } from 'node:url'
import { freshCliBundle } from '../scripts/cli-bundle.js'

/** The command line from the TypeScript sources, compiled by tsx as they load. */
async function fromSources() {
  const { register } = await import('tsx/esm/api')
  register()
  return import('../src-main/cli.ts')
}

const bundle = freshCliBundle()
const { main } = bundle ? await import(pathToFileURL(bundle).href) : await fromSources()
process.exitCode = await main(process.argv.slice(2))
