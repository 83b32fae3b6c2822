import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { type ClientTarget, LOCK_FILE, NoHostError, resolveClientTarget } from '../../src-shared/client-target'

/**
 * The host a client command of the host's talks to ({@link resolveClientTarget}). Where the data
 * dir names none, a host may hold it all the same, its host.json missing (a start on a full
 * disk): that is said, with what to give, rather than "no host is running", which would send the
 * user to start a second one.
 */
export async function findHost(flags: { url?: string; token?: string; 'data-dir'?: string }, env: NodeJS.ProcessEnv): Promise<ClientTarget> {
  try {
    return resolveClientTarget(flags, env)
  } catch (error) {
    if (error instanceof NoHostError && error.reason === 'none' && (await heldByHost(error.dataDir))) throw new NoHostError(error.dataDir, 'unsaid')
    throw error
  }
}

/**
 * Whether a running host holds the data dir: its lock on `host.lock` (data-dir/lock.ts), held for
 * the host's lifetime. The lock file, not the database: a read-only look at a database in WAL mode
 * would leave its `-wal` and `-shm` behind when no host runs. SQLite is loaded on this path only:
 * a client command that finds its host loads none.
 */
export async function heldByHost(dataDir: string): Promise<boolean> {
  const path = join(dataDir, LOCK_FILE)
  return existsSync(path) && (await import('../db/lock-file')).LockFile.isHeld(path)
}
