/**
 * Before the tests: builds the command's bundle (out/cli/) when it is not fresh, so that every
 * `leasehold` process a test starts (`leasehold worker`, `leasehold serve`, the CLI) loads the
 * bundle — what a user's `leasehold` runs — instead of compiling the TypeScript sources through
 * tsx as it starts, which takes seconds a process on a loaded 2-core machine. The bundle is
 * built from the sources as they are, and bin/leasehold.js checks that before it uses it.
 *
 * Likewise the SQLite extension of the `leasehold-wal` VFS (out/native/wal-vfs.so), compiled
 * again when native/wal-vfs.c is newer, so that the tests' hosts write through the VFS of the
 * sources under test, as `npm install` built it.
 */
import { existsSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { buildCliBundle, freshCliBundle } from '../scripts/cli-bundle.js'
import { APP_FILES } from '../scripts/app-files.js'
import { buildWalVfs } from '../scripts/wal-vfs.js'

const root = join(import.meta.dirname, '..')

export default async function setup(): Promise<void> {
  if (!freshCliBundle()) await buildCliBundle()
  const extension = join(root, APP_FILES.walVfs)
  const source = join(root, 'native', 'wal-vfs.c')
  if (process.platform !== 'win32' && (!existsSync(extension) || statSync(extension).mtimeMs < statSync(source).mtimeMs)) buildWalVfs()
}
