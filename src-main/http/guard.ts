import { timingSafeEqual } from 'node:crypto'
import type { IncomingHttpHeaders } from 'node:http'
import { isIPv6 } from 'node:net'
import { REVOKED_TOKEN_REFUSAL, WORKER_TOKEN_REFUSAL } from '../../src-shared/error-codes'

export interface GuardPolicy {
  /** The API token every /api and /internal route needs, except /api/health. */
  token: string
  /** The port the server listens on: a Host header must name it. */
  port: number
  /** Extra host names (lowercase) to accept besides the loopback names: --allowed-host's, and the server's own ({@link ownHostNames}). */
  allowedHosts: readonly string[]
  /** Whether a ticket from POST /api/events/ticket is valid (it opens only the event stream), the token that took it still opening the API. */
  isValidTicket?: (ticket: string) => boolean
  /** Whether a bearer token is a live worker-scoped token (`leasehold token create --scope worker`): it opens only {@link isWorkerPath}. */
  isWorkerToken?: (token: string) => boolean
  /** Whether a bearer token is a live admin-scoped token (`leasehold token create --scope admin`): it opens what the host's token does. */
  isAdminToken?: (token: string) => boolean
  /** Whether a bearer token is a scoped token that was revoked (`leasehold token revoke`): refused, saying so. */
  isRevokedToken?: (token: string) => boolean
}

export interface GuardInput {
  path: string
  host: string | undefined
  /** How many Host headers the request has (Node keeps only the first; RFC 9112 wants exactly one). */
  hostHeaders?: number
  /** The request-target as sent: an absolute form (`http://host/path`) names its server there. */
  target?: string
  origin: string | undefined
  authorization: string | undefined
  /** The `ticket` query parameter, if any. */
  ticket?: string
}

/** Why the guard refused a request; its status is the code's (src-shared/error-codes.ts). */
export interface Refusal {
  code: 'bad_request' | 'forbidden_host' | 'forbidden_origin' | 'unauthorized'
  detail: string
}

/** `Authorization: Bearer <token>`: the scheme's name in any case, as HTTP has it (RFC 9110 §11.1), then the token. */
const BEARER = /^bearer +(\S.*)$/i

/** The refusal of a ticket the host does not take (any more). */
export const LAPSED_TICKET_REFUSAL =
  'The ticket is not, or no longer, valid: a ticket opens the event stream for 60 s, until the host restarts, and while the token that took it opens the API; take a new one with POST /api/events/ticket'

/** The one route a ticket opens (browsers' EventSource cannot send an Authorization header). */
const EVENT_STREAM_PATH = '/api/events/stream'

const LOOPBACK_NAMES = ['localhost', '127.0.0.1', '[::1]']

/** Addresses that name no one machine: listening on one is listening on every interface. */
const WILDCARDS = ['0.0.0.0', '::', '[::]']

/**
 * The names a server is known by from its start, accepted in the Host header as the loopback
 * names are: the address (or name) it was told to listen on, and the one its URL names — the URL
 * it prints, the dashboard link, host.json, which the other commands and workers use. They do not
 * weaken the rebinding check: a page sends such a Host only when it was loaded from this very
 * address, that is from this server. A wildcard names no server and is not one of them (its URL
 * names loopback). `url` is the URL as published (dashboard-link.ts `localUrl`).
 */
export function ownHostNames(listenHost: string, url: string): string[] {
  const host = listenHost.trim().toLowerCase()
  const listened = isIPv6(host) ? `[${host}]` : host
  const names = [new URL(url).hostname.toLowerCase()]
  if (host !== '' && !WILDCARDS.includes(listened) && !names.includes(listened)) names.push(listened)
  return names.filter((name) => !LOOPBACK_NAMES.includes(name))
}

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

/** An expected token's bytes, and a buffer of their length to copy a given token into. */
interface ExpectedToken {
  bytes: Buffer
  given: Buffer
}

/** Made once per expected token: the token is the same for every request. */
const expectedTokens = new Map<string, ExpectedToken>()

/**
 * Compares tokens in constant time, whatever their lengths: the given token is copied into a
 * buffer of the expected token's length (cut short or padded with zeros) and compared with
 * `timingSafeEqual`, then the lengths are compared. The time taken depends on the given token's
 * length, never on the expected token. (No digest per request: hashing each token cost more
 * than the rest of the guard.)
 */
export function tokensMatch(given: string, expected: string): boolean {
  let token = expectedTokens.get(expected)
  if (!token) {
    const bytes = Buffer.from(expected, 'utf8')
    expectedTokens.set(expected, (token = { bytes, given: Buffer.alloc(bytes.length) }))
  }
  token.given.fill(0)
  token.given.write(given, 'utf8')
  const sameLength = Buffer.byteLength(given, 'utf8') === token.bytes.length
  return timingSafeEqual(token.given, token.bytes) && sameLength
}

function decoded(path: string): string {
  if (!path.includes('%')) return path.toLowerCase() // nothing to decode
  try {
    return decodeURIComponent(path).toLowerCase()
  } catch {
    return path.toLowerCase()
  }
}

/**
 * What a worker calls and nothing else: the worker routes and the file-lease requests its
 * handlers write through (acquire, wait, heartbeat, release: not the list of every file lease),
 * and the API's document, which describes them and holds no data (a worker's author reads it). A
 * worker-scoped token opens these only, so a machine that runs jobs cannot submit, cancel, change
 * capacity or read the host's data; and on the file leases it acts for its own jobs only (files-api.ts).
 */
export function isWorkerPath(path: string): boolean {
  return /^\/+(internal\/worker(\/|$)|api\/files\/leases\/|api\/openapi\.json$)/.test(decoded(path))
}

/** Every /api and /internal path needs the token except /api/health, however the path is spelled. */
function needsToken(path: string): boolean {
  const p = decoded(path)
  return /^\/+(api|internal)(\/|$)/.test(p) && p !== '/api/health'
}

/** The guard's input from a request as Node parsed it, given the path as its router reads it (and the ticket, if any). */
export function guardInput(req: { headers: IncomingHttpHeaders; rawHeaders: string[]; url?: string }, path: string, ticket?: string): GuardInput {
  const headers = req.headers
  return {
    path,
    host: headers.host || undefined,
    hostHeaders: hostHeaderCount(req.rawHeaders),
    target: req.url,
    origin: headers.origin || undefined,
    authorization: headers.authorization || undefined,
    ticket,
  }
}

function hostHeaderCount(rawHeaders: string[]): number {
  let count = 0
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!
    if (name.length === 4 && name.toLowerCase() === 'host') count += 1
  }
  return count
}

/** The authority of a request-target in absolute form (`http://127.0.0.1:7878/api/…` → `127.0.0.1:7878`), else null. */
function absoluteAuthority(target: string | undefined): string | null {
  if (target === undefined || !/^[a-z][a-z0-9+.-]*:\/\//i.test(target)) return null
  try {
    return new URL(target).host
  } catch {
    return ''
  }
}

/**
 * Whether a request comes with a worker token rather than the host's: such a caller acts on file
 * leases of its own jobs only, which the files routes check (files-api.ts).
 */
export function isWorkerCaller(authorization: string | undefined, policy: GuardPolicy): boolean {
  const match = BEARER.exec(authorization ?? '')
  return match !== null && !tokensMatch(match[1]!, policy.token) && policy.isWorkerToken?.(match[1]!) === true
}

/** The token of an `Authorization: Bearer <token>` header, else null. */
export function bearerToken(authorization: string | undefined): string | null {
  return BEARER.exec(authorization ?? '')?.[1] ?? null
}

/**
 * Whether `token` opens the whole API: the host's own, or a live admin token. A request is let in
 * by it, and an event stream it opened (by itself or by a ticket) stays open by it: a revoked
 * admin token ends its streams too (events-stream.ts).
 */
export function isApiToken(token: string, policy: GuardPolicy): boolean {
  // The admin tokens' digest is taken only when the host's token did not match.
  return tokensMatch(token, policy.token) || policy.isAdminToken?.(token) === true
}

/**
 * Decides whether a request may reach a route; null lets it through. The Host check defeats DNS
 * rebinding: a web page on evil.example that resolves its name to 127.0.0.1 still sends
 * `Host: evil.example`, so a browser can never be turned into a client of this server. A
 * cross-site `Origin` is refused for the same reason; no CORS header is ever sent. A request
 * with no Host header, or two, is malformed (RFC 9112: 400); one whose target is in absolute form names
 * its server there, in place of the Host header (RFC 9112), and must name this one too.
 */
export function checkRequest(input: GuardInput, policy: GuardPolicy): Refusal | null {
  if ((input.hostHeaders ?? 1) > 1) {
    return { code: 'bad_request', detail: 'The request has more than one Host header' }
  }
  if (input.hostHeaders === 0) return { code: 'bad_request', detail: 'The request has no Host header' }
  if (!isOwnHost(input.host, policy)) {
    return { code: 'forbidden_host', detail: 'The Host header does not name this server' }
  }
  const authority = absoluteAuthority(input.target)
  if (authority !== null && !isOwnHost(authority, policy)) {
    return { code: 'forbidden_host', detail: 'The request target does not name this server' }
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
    const match = BEARER.exec(input.authorization ?? '')
    const bearerOk = match !== null && isApiToken(match[1]!, policy)
    const ticketOk =
      !bearerOk && input.ticket !== undefined && decoded(input.path) === EVENT_STREAM_PATH && policy.isValidTicket?.(input.ticket) === true
    // Checked only when the host's token did not match: the digest it takes costs nothing on the common path.
    const workerOk = !bearerOk && !ticketOk && match !== null && isWorkerPath(input.path) && policy.isWorkerToken?.(match[1]!) === true
    if (!bearerOk && !ticketOk && !workerOk) {
      // A worker's token outside the worker routes is a real token used in the wrong place: said
      // so, or a user who gave it to `leasehold jobs` would look for a typo in it.
      if (match !== null && !isWorkerPath(input.path) && policy.isWorkerToken?.(match[1]!) === true) {
        return { code: 'unauthorized', detail: WORKER_TOKEN_REFUSAL }
      }
      // A revoked token is one its holder is to stop using, not one to look for a typo in.
      if (match !== null && policy.isRevokedToken?.(match[1]!) === true) return { code: 'unauthorized', detail: REVOKED_TOKEN_REFUSAL }
      // A ticket given alone is most likely one that lapsed, or that a host before a restart gave: said so, with what to do.
      if (match === null && input.ticket !== undefined && decoded(input.path) === EVENT_STREAM_PATH) return { code: 'unauthorized', detail: LAPSED_TICKET_REFUSAL }
      return { code: 'unauthorized', detail: 'A valid Authorization: Bearer token is required' }
    }
  }
  return null
}
