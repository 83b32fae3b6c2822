#!/usr/bin/env node
// The `leasehold` command under plain Node: runs the TypeScript sources through tsx, so the
// headless host needs no build step. (The desktop app is built by electron-vite instead.)
import { register } from 'tsx/esm/api'

register()
const { main } = await import('../src-main/cli.ts')
process.exitCode = await main(process.argv.slice(2))
