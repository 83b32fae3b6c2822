import { createHash, timingSafeEqual } from 'node:crypto'

export interface GuardPolicy {
  /** The API token every /api and /internal route needs, except /api/health. */
  token: string
  /** The port the server listens on: a Host header must name it. */
  port: number
  /** Extra host names (lowercase) to accept besides the loopback names. */
  allowedHosts: readonly string[]
  /** Whether a ticket from POST /api/events/ticket is valid (it opens only the event stream). */
  isValidTicket?: (ticket: string) => boolean
}

export interface GuardInput {
  path: string
  host: string | undefined
  origin: string | undefined
  authorization: string | undefined
  /** The `ticket` query parameter, if any. */
  ticket?: string
}

/** Why the guard refused a request; its status is the code's (src-main/http/statuses.ts). */
export interface Refusal {
  code: 'forbidden_host' | 'forbidden_origin' | 'unauthorized'
  detail: string
}

/** The one route a ticket opens (browsers' EventSource cannot send an Authorization header). */
const EVENT_STREAM_PATH = '/api/events/stream'

const LOOPBACK_NAMES = ['localhost', '127.0.0.1', '[::1]']

/** Host header value → lowercase name without the port ("[::1]:7878" → "[::1]"), and its port. */
function splitHost(host: string): { name: string; port: string | null } {
  const match = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(host.trim().toLowerCase())
  return match ? { name: match[1]!, port: match[2] ?? null } : { name: '', port: null }
}

function isOwnHost(host: string | undefined, policy: GuardPolicy): boolean {
  if (!host) return false
  const { name, port } = splitHost(host)
  const names = [...LOOPBACK_NAMES, ...policy.allowedHosts]
  return names.includes(name) && (port === null ? policy.port === 80 : Number(port) === policy.port)
}

const sha256 = (text: string): Buffer => createHash('sha256').update(text).digest()

/** The expected token's digest, computed once: the token is the same for every request. */
const expectedDigests = new Map<string, Buffer>()

/** Compares tokens in constant time (digests first, so different lengths leak nothing either). */
export function tokensMatch(given: string, expected: string): boolean {
  let digest = expectedDigests.get(expected)
  if (!digest) expectedDigests.set(expected, (digest = sha256(expected)))
  return timingSafeEqual(sha256(given), digest)
}

function decoded(path: string): string {
  try {
    return decodeURIComponent(path).toLowerCase()
  } catch {
    return path.toLowerCase()
  }
}

/** Every /api and /internal path needs the token except /api/health, however the path is spelled. */
function needsToken(path: string): boolean {
  const p = decoded(path)
  return /^\/+(api|internal)(\/|$)/.test(p) && p !== '/api/health'
}

/**
 * Decides whether a request may reach a route; null lets it through. The Host check defeats DNS
 * rebinding: a web page on evil.example that resolves its name to 127.0.0.1 still sends
 * `Host: evil.example`, so a browser can never be turned into a client of this server. A
 * cross-site `Origin` is refused for the same reason; no CORS header is ever sent.
 */
export function checkRequest(input: GuardInput, policy: GuardPolicy): Refusal | null {
  if (!isOwnHost(input.host, policy)) {
    return { code: 'forbidden_host', detail: 'The Host header does not name this server' }
  }
  if (input.origin !== undefined && input.origin !== 'null') {
    let originHost: string
    try {
      originHost = new URL(input.origin).host
    } catch {
      return { code: 'forbidden_origin', detail: 'The Origin header is not this server' }
    }
    if (!isOwnHost(originHost, policy)) {
      return { code: 'forbidden_origin', detail: 'The Origin header is not this server' }
    }
  } else if (input.origin === 'null') {
    return { code: 'forbidden_origin', detail: 'The Origin header is not this server' }
  }
  if (needsToken(input.path)) {
    const match = /^Bearer (.+)$/.exec(input.authorization ?? '')
    const bearerOk = match !== null && tokensMatch(match[1]!, policy.token)
    const ticketOk =
      !bearerOk && input.ticket !== undefined && decoded(input.path) === EVENT_STREAM_PATH && policy.isValidTicket?.(input.ticket) === true
    if (!bearerOk && !ticketOk) {
      return { code: 'unauthorized', detail: 'A valid Authorization: Bearer token is required' }
    }
  }
  return null
}
