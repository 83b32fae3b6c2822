import { join } from 'node:path'
import { HOST_FILE, type HostFile, hostHolds, parseHostFile, processAlive, untrustedHostFile } from '../../src-shared/client-target'
import { readRegularFile } from '../../src-shared/regular-file'

/**
 * The host `host.json` names ({@link parseHostFile}), if its process is alive. A host writes the
 * file once it listens and removes it when it stops; a host killed with SIGKILL leaves it behind,
 * so a file whose pid is gone means nothing runs. `ownPid` is never "another" host (a pid reused
 * by this very process). Malformed content counts as no host: the file is advice, not a lock —
 * the lock that keeps a second host off the database is the host's own.
 */
export function runningHostFrom(text: string | null, isAlive: (pid: number) => boolean, ownPid: number): HostFile | null {
  const host = text === null ? null : parseHostFile(text)
  return host !== null && host.pid !== ownPid && isAlive(host.pid) ? host : null
}

/**
 * What `dataDir`'s host.json names, if its process is alive (the process table only, not the
 * lock: for a host that has just taken the lock itself, src-main/data-dir/lock.ts). Anything that
 * talks to the host asks {@link runningHost}.
 */
export function readRunningHost(dataDir: string): HostFile | null {
  let text: string | null
  try {
    text = readRegularFile(join(dataDir, HOST_FILE)) // a FIFO there is no host's: read as none, never waited on
  } catch {
    text = null
  }
  return runningHostFrom(text, processAlive, process.pid)
}

/**
 * The host running on `dataDir`, for a window to show (the desktop app's, `npm start`'s): its
 * host.json names it, it holds the data dir's lock ({@link hostHolds}), and it answers at the URL
 * named. A host.json whose process lives on under a reused pid is a dead host's: the window would
 * load whatever listens on that port now and send it the token. One another user may have written
 * ({@link untrustedHostFile}) is none either: the host the app then starts refuses the data dir,
 * saying why. `nativeBinding`: better-sqlite3's
 * addon built for Electron, in the desktop app.
 */
export async function runningHost(dataDir: string, nativeBinding?: string): Promise<HostFile | null> {
  const named = readRunningHost(dataDir)
  return named !== null && untrustedHostFile(dataDir) === null && (await hostHolds(dataDir, named.pid, nativeBinding)) && (await answersHealth(named.url)) ? named : null
}

/**
 * Whether a Leasehold host answers at `url` (`GET /api/health`, the one route without a token,
 * and sent without it).
 */
export async function answersHealth(url: string, timeoutMs = 2000): Promise<boolean> {
  try {
    const response = await fetch(`${url}/api/health`, { signal: AbortSignal.timeout(timeoutMs) })
    const body = (await response.json()) as { ok?: unknown }
    return response.ok && body.ok === true
  } catch {
    return false
  }
}
