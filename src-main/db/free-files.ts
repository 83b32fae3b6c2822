import { statfsSync } from 'node:fs'

/**
 * Why no new file can be made in `folder` though its disk may have bytes free: its file system
 * counts its files (inodes) and has none left, as `no free files (inodes) left (all 12 in
 * use)`. SQLite then says only "unable to open database file" (SQLITE_CANTOPEN) as it fails to
 * create a `-wal`, `-shm` or lock file, which reads as a damaged or unreadable file. Null when
 * files are left, when the file system does not count them (it says 0 of 0), or cannot be asked.
 */
export function noFreeFiles(folder: string): string | null {
  try {
    const { files, ffree } = statfsSync(folder)
    return files > 0 && ffree === 0 ? `no free files (inodes) left (all ${files} in use)` : null
  } catch {
    return null
  }
}
