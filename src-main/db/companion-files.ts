import { existsSync, lstatSync, rmSync } from 'node:fs'

/**
 * Takes note of which of a database's `-wal` and `-shm` files exist, and returns the call that
 * removes again the ones a read-only look made. SQLite's read-only connection to a file in WAL mode
 * makes an empty `-wal` and a `-shm` beside it, and only a writer's close removes them: left there,
 * a start refused on the file, or a check of a stopped host's file, would leave the data dir with
 * files it did not have. A `-wal` that was there before, or that holds anything, is never removed.
 */
export function companionsAsFound(path: string): () => void {
  const had = { wal: existsSync(`${path}-wal`), shm: existsSync(`${path}-shm`) }
  return () => {
    if (!had.shm) rmSync(`${path}-shm`, { force: true })
    if (!had.wal && isEmptyFile(`${path}-wal`)) rmSync(`${path}-wal`)
  }
}

function isEmptyFile(path: string): boolean {
  const stat = lstatSync(path, { throwIfNoEntry: false })
  return stat !== undefined && stat.isFile() && stat.size === 0
}
