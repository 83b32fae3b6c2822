import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { setTimeout } from 'node:timers/promises'
import { type ClientTarget, LOCK_FILE, NoHostError, readHostFile, resolveClientTarget } from '../../src-shared/client-target'
import { lockHeld, lockPid } from '../../src-shared/host-lock'

/**
 * How long a client command waits for a host that holds its data dir to say where it listens: a
 * host writes host.json once it listens, after it has opened (and perhaps migrated or checked)
 * the database, which takes a moment on a restart.
 */
export const HOST_START_WAIT_S = 5

/**
 * How long a client command that finds no host on its data dir (no host.json, and host.lock not
 * held) looks again before it says "no host is running", in milliseconds. A `leasehold serve`
 * leaves no sign in its data dir until it holds host.lock, which it takes once its modules have
 * loaded: about 0.6 s after it was launched on a 2-core machine, while a client command launched
 * with it (`leasehold serve & leasehold submit …`) looks about 0.25 s after its own launch. A
 * second covers that gap with room to spare, and is all a data dir where no host runs costs:
 * once a host holds the lock, {@link HOST_START_WAIT_S} bounds the whole wait.
 */
export const HOST_APPEAR_WAIT_MS = 1000

/** How often a command looks again for a host that is starting. */
const LOOK_AGAIN_MS = 50

/**
 * The host a client command of the host's talks to ({@link resolveClientTarget}). Where the data
 * dir names none but a host holds it (its host.json missing, empty, or naming another process),
 * the host is starting, or could not write the file (a full disk): the command waits up to
 * {@link HOST_START_WAIT_S} for it, and
 * then says so, with what to give, rather than "no host is running", which would send the user
 * to start a second one. Where no host holds it, one launched just now may not have taken its
 * lock yet: the command looks again for {@link HOST_APPEAR_WAIT_MS} before it says none runs.
 */
export async function findHost(flags: { url?: string; token?: string; 'data-dir'?: string }, env: NodeJS.ProcessEnv): Promise<ClientTarget> {
  const started = Date.now()
  const deadline = started + HOST_START_WAIT_S * 1000
  for (;;) {
    try {
      return await resolveClientTarget(flags, env)
    } catch (error) {
      if (!(error instanceof NoHostError)) throw error
      if (!(await heldByHost(error.dataDir))) {
        if (Date.now() - started >= HOST_APPEAR_WAIT_MS) throw error
      } else if (Date.now() >= deadline) throw unsaidError(error)
      await setTimeout(LOOK_AGAIN_MS)
    }
  }
}

/**
 * What a command says of a data dir that a process holds and that named no host to talk to in
 * {@link HOST_START_WAIT_S}: its host.json is empty, missing, or names another process than the
 * one that holds the lock (a host that is starting keeps one naming a live process until it has
 * opened its database; or the holder is no Leasehold host).
 */
function unsaidError(error: NoHostError): NoHostError {
  if (error.reason === 'blank') return new NoHostError(error.dataDir, 'blank', HOST_START_WAIT_S)
  const named = readHostFile(error.dataDir)
  const holder = lockPid(join(error.dataDir, LOCK_FILE)) || null // 0: the lock names no process
  if (named === null || named.pid === holder) return new NoHostError(error.dataDir, 'unsaid', HOST_START_WAIT_S)
  return new NoHostError(error.dataDir, 'stale', HOST_START_WAIT_S, { named: named.pid, holder })
}

/**
 * Whether a running host holds the data dir: its lock on `host.lock` (data-dir/lock.ts), held for
 * the host's lifetime. The lock file, not the database: a read-only look at a database in WAL mode
 * would leave its `-wal` and `-shm` behind when no host runs. SQLite is loaded for the look (a few
 * ms), as it is for the host.json a command trusts only while its host holds this lock
 * ({@link resolveClientTarget}); a command given --url loads none.
 */
export async function heldByHost(dataDir: string): Promise<boolean> {
  const path = join(dataDir, LOCK_FILE)
  return existsSync(path) && (await lockHeld(path))
}
