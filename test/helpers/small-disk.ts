import { execFileSync } from 'node:child_process'
import { mkdirSync, statSync, truncateSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { TestContext } from 'vitest'

/** A small tmpfs mounted for a test, and how to take it away. */
export interface SmallDisk {
  path: string
  unmount(): void
}

/**
 * A tmpfs of `size` (`1m`, say) mounted at `<parent>/disk`, or null with the test skipped where
 * one cannot be mounted (it needs root on Linux). The test unmounts it when it ends.
 */
export function mountSmallDisk(context: TestContext, parent: string, size: string): SmallDisk | null {
  if (process.platform !== 'linux' || process.getuid?.() !== 0) {
    context.skip('it needs root on Linux to mount a small tmpfs')
    return null
  }
  const path = join(parent, 'disk')
  mkdirSync(path)
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', path], { stdio: 'pipe' })
  } catch (error) {
    context.skip(`mount -t tmpfs is not permitted here (${(error as Error).message.split('\n')[0]})`)
    return null
  }
  return { path, unmount: () => execFileSync('umount', [path], { stdio: 'ignore' }) }
}

/** Fills the disk at `path` with a file `filler` (up to 64 MiB), then frees `room` bytes of it. */
export function fillDisk(path: string, room: number): void {
  const filler = join(path, 'filler')
  try {
    writeFileSync(filler, Buffer.alloc(64 * 1024 * 1024))
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error
  }
  truncateSync(filler, Math.max(0, statSync(filler).size - room))
}
