import { join } from 'node:path'
import { HOST_FILE, processAlive } from '../../src-shared/client-target'
import { readRegularFile } from '../../src-shared/regular-file'

/** A host that owns a data dir now: what `<dataDir>/host.json` names, checked against the process table. */
export interface RunningHost {
  url: string
  pid: number
}

/**
 * The host `host.json` names, if its process is alive. A host writes the file once it listens
 * and removes it when it stops; a host killed with SIGKILL leaves it behind, so a file whose pid
 * is gone means nothing runs. `ownPid` is never "another" host (a pid reused by this very
 * process). Malformed content counts as no host: the file is advice, not a lock — the lock that
 * keeps a second host off the database is the host's own.
 */
export function runningHostFrom(text: string | null, isAlive: (pid: number) => boolean, ownPid: number): RunningHost | null {
  if (text === null) return null
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return null
  }
  const { url, pid } = (parsed ?? {}) as { url?: unknown; pid?: unknown }
  if (typeof url !== 'string' || !/^https?:\/\//.test(url)) return null
  if (typeof pid !== 'number' || !Number.isInteger(pid) || pid <= 0 || pid === ownPid) return null
  return isAlive(pid) ? { url: url.replace(/\/+$/, ''), pid } : null
}

/** The host running on `dataDir` by its host.json and the process table, without asking it. */
export function readRunningHost(dataDir: string): RunningHost | null {
  let text: string | null
  try {
    text = readRegularFile(join(dataDir, HOST_FILE)) // a FIFO there is no host's: read as none, never waited on
  } catch {
    text = null
  }
  return runningHostFrom(text, processAlive, process.pid)
}

/**
 * Whether a Leasehold host answers at `url` (`GET /api/health`, the one route without a token).
 * Guards against a pid the system reused for another program after a host was killed.
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
