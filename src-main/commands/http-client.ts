import { parseArgs } from 'node:util'
import type { ClientTarget } from '../client-config'
import { ConfigError } from '../config'

/** Shared by the client commands (submit, jobs, status): flags, whole numbers, calls to the host. */

/** The flags every client command takes to find the host. */
export const TARGET_FLAGS = ['url', 'token', 'data-dir'] as const

export const TARGET_HELP = `  --url URL            the host (env LEASEHOLD_URL; default: the host running on this data dir)
  --token TOKEN        the API token (env LEASEHOLD_TOKEN; default: <data-dir>/token)
  --data-dir PATH      where to find a local host's URL and token (env LEASEHOLD_DATA_DIR)`

/** Parses flags strictly: an unknown flag, a missing value or a stray argument is a ConfigError (exit 2). */
export function parseFlags<T>(argv: string[], strings: readonly string[], booleans: readonly string[] = []): T {
  return parseCommandLine<T>(argv, strings, booleans, false).values
}

/** {@link parseFlags} for a command that also takes words (`leasehold schedule pause NAME`). */
export function parseCommandLine<T>(
  argv: string[],
  strings: readonly string[],
  booleans: readonly string[],
  allowPositionals = true,
): { values: T; positionals: string[] } {
  try {
    const { values, positionals } = parseArgs({
      args: argv,
      options: {
        ...Object.fromEntries([...TARGET_FLAGS, ...strings].map((name) => [name, { type: 'string' as const }])),
        ...Object.fromEntries(booleans.map((name) => [name, { type: 'boolean' as const }])),
      },
      strict: true,
      allowPositionals,
    })
    return { values: values as T, positionals }
  } catch (error) {
    throw new ConfigError((error as Error).message.split('\n')[0]!)
  }
}

export function wholeNumber(flag: string, value: string | undefined, min: number, max: number): number | undefined {
  if (value === undefined) return undefined
  const n = Number(value)
  if (value.trim() === '' || !Number.isSafeInteger(n) || n < min || n > max) {
    throw new ConfigError(`--${flag} must be a whole number from ${min} to ${max} (got "${value}")`)
  }
  return n
}

/** An answer from the host that is not a success: its `{detail, code}` as one line (exit 1). */
export class HostError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly detail: string,
    readonly body: Record<string, unknown>,
  ) {
    super(`${detail} (${code})`)
    this.name = 'HostError'
  }
}

const oneLine = (text: string) => text.replace(/\s+/g, ' ').trim()

/** Turns a failed fetch into one line; the cause stays attached (the CLI recognises ECONNREFUSED). */
export function unreachable(url: string, error: unknown): Error {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause
  if ((error as Error).name === 'AbortError') return error as Error
  const why = cause?.code ?? cause?.message ?? (error as Error).message
  return new Error(`cannot reach the host at ${url}: ${why}`, { cause })
}

/** Reads an error answer as a HostError, whatever its shape. */
export async function hostError(response: Response): Promise<HostError> {
  const text = await response.text().catch(() => '')
  let body: Record<string, unknown> = {}
  try {
    const parsed = JSON.parse(text) as unknown
    if (parsed && typeof parsed === 'object') body = parsed as Record<string, unknown>
  } catch {
    // not JSON: keep the text as the detail
  }
  const detail = typeof body.detail === 'string' ? body.detail : oneLine(text).slice(0, 200) || response.statusText || 'no detail'
  const code = typeof body.code === 'string' ? body.code : `http_${response.status}`
  return new HostError(response.status, code, oneLine(detail), body)
}

/** A JSON call to the host with the bearer token; a non-2xx answer throws a HostError. */
export async function callHost<T>(target: ClientTarget, method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { authorization: `Bearer ${target.token}`, accept: 'application/json' }
  if (body !== undefined) headers['content-type'] = 'application/json'
  let response: Response
  try {
    response = await fetch(`${target.url}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) })
  } catch (error) {
    throw unreachable(target.url, error)
  }
  if (!response.ok) throw await hostError(response)
  if (response.status === 204) return undefined as T
  return (await response.json()) as T
}

/** The dialect-002 view of a job, as the client commands read it. */
export interface QueueJob {
  job_id: string
  addon_id: string | null
  job_type: string
  priority: string
  cost_units: number
  state: string
  created_at: string
  updated_at: string
  attempts: number
  max_attempts: number
  queue: string
  client_request_id: string | null
  progress: number | null
  note: string | null
  dead_letter: boolean
  /** Why it is not running yet; only the reads (GET /jobs/{id}, GET /jobs) carry it. */
  waiting_reason?: string | null
  [field: string]: unknown
}

export interface QueueResult {
  status: string | null
  result_data: unknown
  error: unknown
  [field: string]: unknown
}

/** Pads columns to their widest cell; the last column is not padded. */
export function table(header: string[], rows: string[][]): string {
  const all = [header, ...rows]
  const widths = header.map((_, i) => Math.max(...all.map((row) => (row[i] ?? '').length)))
  return all.map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  ')).join('\n')
}
