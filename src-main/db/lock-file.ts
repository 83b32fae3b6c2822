import BetterSqlite3 from 'better-sqlite3'
import { refuseNotRegular } from '../../src-shared/regular-file'

/**
 * An exclusive lock held through SQLite on a small file of its own (the data dir's host.lock): in
 * exclusive locking mode, after one write, SQLite keeps its OS lock (fcntl on Unix, LockFileEx on
 * Windows) until the connection closes, and the OS drops it when the process ends in any way —
 * so a process killed with SIGKILL leaves nothing to go stale. (Two connections of one process
 * conflict too: SQLite tracks its locks per file.) What the lock means, and what a refusal
 * says, is the host's (src-main/data-dir/lock.ts); whether another process holds it, and which, is
 * read without taking it by src-shared/host-lock.ts (for the host's commands and the worker
 * program, which share no code of the host's).
 */
export class LockFile {
  private constructor(private readonly db: BetterSqlite3.Database) {}

  /** Opens (creating) the lock file; throws as the file system refuses. Waits for no one. */
  static open(path: string, nativeBinding?: string): LockFile {
    refuseNotRegular(path) // SQLite's opening of a FIFO waits forever
    return new LockFile(new BetterSqlite3(path, { timeout: 0, ...(nativeBinding ? { nativeBinding } : {}) }))
  }

  /**
   * Takes the lock for as long as this file stays open, writing `pid` into it (the write that
   * makes the lock last). On failure the file is closed and SQLite's error thrown: `SQLITE_BUSY`
   * when another connection holds the lock.
   */
  hold(pid: number): void {
    try {
      // The undo of that write is kept in memory, not in a journal file: a file to create is
      // a write a full disk refuses, and the host must start on a full disk (read-only until
      // space returns). The file holds nothing a torn write could lose.
      this.db.pragma('journal_mode = MEMORY')
      this.db.pragma('locking_mode = EXCLUSIVE')
      this.db.exec('BEGIN EXCLUSIVE')
      this.db.pragma(`user_version = ${pid}`)
      this.db.exec('COMMIT')
    } catch (error) {
      this.db.close()
      throw error
    }
  }

  /**
   * Runs `work` while this process holds the lock on the file at `path` (created if need be),
   * waiting up to `waitMs` for another process that holds it: for a read, change and write of a
   * file that several processes may change at once. SQLite's lock is the OS's, so a holder that
   * dies lets go. Throws SQLite's `SQLITE_BUSY` when the wait runs out.
   */
  static exclusively<T>(path: string, waitMs: number, work: () => T): T {
    refuseNotRegular(path)
    const db = new BetterSqlite3(path, { timeout: waitMs })
    try {
      db.pragma('journal_mode = MEMORY') // no journal file to create: the lock is all this file is for
      db.exec('BEGIN EXCLUSIVE')
      try {
        return work()
      } finally {
        db.exec('ROLLBACK')
      }
    } finally {
      db.close()
    }
  }

  /** Gives the lock up. */
  release(): void {
    this.db.close()
  }
}
