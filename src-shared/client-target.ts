import { readFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { ConfigError } from './command-line'

/**
 * How a command finds the host: its data dir, and there the host.json a running host writes and
 * the API token — the host's own files, read by the host's client commands and by the worker
 * program's `leasehold worker` alike.
 */

/** The folder Electron calls `userData` for an app named leasehold, so the CLI and the app share it. */
export function defaultDataDir(env: NodeJS.ProcessEnv = process.env, platform = process.platform): string {
  if (platform === 'win32') return join(env.APPDATA ?? join(homedir(), 'AppData', 'Roaming'), 'leasehold')
  if (platform === 'darwin') return join(homedir(), 'Library', 'Application Support', 'leasehold')
  return join(env.XDG_CONFIG_HOME ?? join(homedir(), '.config'), 'leasehold')
}

/** Where a client command finds the host: flags, then LEASEHOLD_URL / LEASEHOLD_TOKEN, then the data dir. */
export interface ClientTarget {
  url: string
  token: string
}

/** Written by a running host so that local commands find it; removed when it stops. */
export const HOST_FILE = 'host.json'

/** What host.json says: where the host listens, and its process. */
export interface HostFile {
  url: string
  pid: number
}

function readOptional(path: string): string | null {
  try {
    return readFileSync(path, 'utf8').trim()
  } catch {
    return null
  }
}

/** The data dir's host.json, or null when there is none (no host runs there) or it cannot be read. */
export function readHostFile(dataDir: string): HostFile | null {
  const text = readOptional(join(dataDir, HOST_FILE))
  if (!text) return null
  try {
    const host = JSON.parse(text) as Partial<HostFile>
    return typeof host.url === 'string' && typeof host.pid === 'number' ? { url: host.url, pid: host.pid } : null
  } catch {
    return null
  }
}

/**
 * A client command aimed at a data dir where no host runs (a running host keeps host.json
 * there) and given no host of its own: not a mistake in its flags, so it says what to start
 * rather than what is missing.
 */
export class NoHostError extends Error {
  constructor(readonly dataDir: string) {
    super(
      `no host is running on ${dataDir}: start one with "leasehold serve --data-dir ${dataDir}" ` +
        '(or "npm start" in the repository), or give --url and --token for a host elsewhere',
    )
    this.name = 'NoHostError'
  }
}

/** The host a client command talks to: its flags, then LEASEHOLD_URL / LEASEHOLD_TOKEN, then the host.json and token of the data dir. */
export function resolveClientTarget(
  flags: { url?: string; token?: string; 'data-dir'?: string },
  env: NodeJS.ProcessEnv,
): ClientTarget {
  const dataDir = flags['data-dir'] ?? env.LEASEHOLD_DATA_DIR ?? defaultDataDir(env)
  const given = flags.url ?? env.LEASEHOLD_URL
  const hostFile = given ? null : readHostFile(dataDir)
  const url = given || (hostFile?.url ?? 'http://127.0.0.1:7878')
  try {
    new URL(url)
  } catch {
    throw new ConfigError(`--url is not a URL (got "${url}")`)
  }
  const givenToken = flags.token ?? env.LEASEHOLD_TOKEN
  if (!given && !givenToken && hostFile === null) throw new NoHostError(dataDir)
  const token = givenToken ?? readOptional(join(dataDir, 'token'))
  if (!token) throw new ConfigError(`no token: give --token, set LEASEHOLD_TOKEN, or run where ${join(dataDir, 'token')} exists`)
  return { url: url.replace(/\/+$/, ''), token }
}
