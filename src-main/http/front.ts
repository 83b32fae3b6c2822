import { STATUS_CODES, type Server } from 'node:http'
import type { Socket } from 'node:net'
import { API_HEADERS, parseJson } from './body'
import type { GuardInput } from './guard'
import type { Lane, LaneExchange } from './lane'

/**
 * The front: the first reader of every connection to the host's HTTP server. The requests that
 * come at the rate of jobs (a worker's claim, heartbeat, complete, a one-job submit) are small
 * POSTs of one shape on keep-alive connections; Node's HTTP server spends ~40 µs of CPU on each
 * before any route runs (its parser's callbacks, an IncomingMessage, a ServerResponse), about
 * as much as the bare request costs read and answered over the socket itself. The front reads
 * that one shape straight from the socket and hands it to the lane (lane.ts), which answers it
 * as it answers the same request from Node; anything else goes to Node's HTTP server, which
 * then keeps the connection.
 *
 * The shape, all of it in hand in the bytes read so far (HTTP/1.1 as RFC 9112 spells it, and
 * no more of it): the request line `POST <a lane route's path> HTTP/1.1`; header lines of
 * token names and values of visible ASCII and spaces (no tabs), none of them twice, at most {@link MAX_HEADERS}, the
 * head within Node's 16 KiB; a `Host`; `Content-Type: application/json` exactly; a
 * `Content-Length` of digits within the body limit, and the whole body; no `Transfer-Encoding`,
 * `Content-Encoding`, `Expect` or `Upgrade`; `Connection` absent, `keep-alive` or `close`. At the first request not of that
 * shape — or a request not yet all read, or a host that is read-only — the connection goes to
 * Node with every byte from that request's first, and Node's parser and Koa's app serve it
 * from there, so only requests the front has read whole are ever parsed by it: a request is
 * framed by one parser, never by two that might disagree (request smuggling). Node would serve
 * every request of the shape alike; the front only serves it with less work.
 *
 * The answers are Node's: the status line, the lane's headers, then `Date`, `Connection` and
 * `Keep-Alive` as Node adds them. Requests sent ahead on a connection (pipelined) are answered
 * in order; a client that does not read its answers is not read either until it does, as Node
 * pauses one, so the front holds no more of a connection than a request and the reads in hand.
 * An idle connection closes after the server's keep-alive timeout, as Node's do. When the
 * client ends its side (a half-close, or gone), every request it sent whole is still answered,
 * in order, and then the connection ends; what cannot be served then is dropped
 * ({@link FrontConnection.dropAfterEnd}).
 * test/http/front-differential.test.ts sends the same bytes, bent every way, to Node with and
 * without the front and compares what comes back. The one difference is Node's own: when Node
 * reads several requests in one read and one of them ends the connection (its parser refuses
 * it, or it asks to close), how many answers leave before the close depends on how the read
 * reached its parser (natively, or — after a hand-off — through the socket's stream). Clients
 * that send requests ahead like this are rare; none of Leasehold's does.
 */
export interface Front {
  /** Requests the front has read and not yet answered. */
  readonly inFlight: number
  /** Closes the connections the front holds that have no request in flight. */
  closeIdle(): void
  /** Closes every connection the front holds. */
  closeAll(): void
  /**
   * From now on each answer closes its connection (`Connection: close`), the server stopping:
   * a client that sends its next request at once on a kept connection (a worker's claim after
   * claim) would otherwise keep it busy, and the stop waiting, for as long as it goes on.
   */
  closeAfterAnswers(): void
}

export interface FrontOptions {
  lane: Lane
  bodyLimitBytes: number
  /** Whether the front may serve requests now; while it may not (a read-only host), each connection goes to Node at its next request. */
  serving(): boolean
  /** The server's keep-alive timeout: an idle connection closes after it. */
  keepAliveTimeoutMs: number
}

/** Node's limit on a request's line and headers: a larger head is Node's to refuse (431). */
const MAX_HEAD_BYTES = 16 * 1024
/** More header lines than this go to Node (the lane's clients send about six). */
export const MAX_HEADERS = 64
const HEAD_END = Buffer.from('\r\n\r\n')
/**
 * A header line: a token name, a colon, a value of visible ASCII and spaces, spaces around it.
 * No tabs: Node takes them around most values but refuses one after a Content-Length's digits,
 * so a line with a tab is left to Node.
 */
const HEADER_LINE = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+): *((?:[\x21-\x7e][\x20-\x7e]*)?)$/

/**
 * Puts the front before `server`'s own connection listener: every new connection is read by the
 * front first. (A socket given to Node with the bytes already read unshifted back is parsed by
 * Node from the first of them: Node's documented way to give its HTTP server a connection is
 * to emit `connection` with it.)
 */
export function attachFront(server: Server, options: FrontOptions): Front {
  const toNode = server.listeners('connection') as ((socket: Socket) => void)[]
  if (toNode.length !== 1) throw new Error("the front goes before the HTTP server's own connection listener only")
  const nodeListener = toNode[0]!
  server.removeListener('connection', nodeListener)
  const paths = new Set(options.lane.paths)
  const connections = new Set<FrontConnection>()
  let inFlight = 0
  const context: FrontContext = {
    options,
    paths,
    keepAlive: `keep-alive\r\nKeep-Alive: timeout=${Math.floor(options.keepAliveTimeoutMs / 1000)}`,
    closing: false,
    started: () => void (inFlight += 1),
    ended: () => void (inFlight -= 1),
    handOff: (connection, socket) => {
      connections.delete(connection)
      nodeListener.call(server, socket)
    },
    closed: (connection) => void connections.delete(connection),
  }
  server.on('connection', (socket: Socket) => {
    connections.add(new FrontConnection(socket, context))
  })
  return {
    get inFlight() {
      return inFlight
    },
    closeIdle: () => {
      for (const connection of connections) if (!connection.busy) connection.destroy()
    },
    closeAll: () => {
      for (const connection of connections) connection.destroy()
    },
    closeAfterAnswers: () => void (context.closing = true),
  }
}

interface FrontContext {
  options: FrontOptions
  paths: ReadonlySet<string>
  /** The `Connection` header's value and the `Keep-Alive` line of a kept connection's answer. */
  keepAlive: string
  /** Each answer closes its connection ({@link Front.closeAfterAnswers}). */
  closing: boolean
  started(): void
  ended(): void
  handOff(connection: FrontConnection, socket: Socket): void
  closed(connection: FrontConnection): void
}

/** What the front reads of a request's head: its path, headers (lower-case names), body length, and whether it asks to close. */
interface Head {
  path: string
  headers: Readonly<Record<string, string>>
  /** The body's length, as its `Content-Length` declares it. */
  length: number
  close: boolean
}

/** A request the front reads whole: its head, where the head's lines end, its body, and the bytes it took. */
interface Parsed {
  head: Head
  headEnd: number
  body: Buffer
  size: number
}

/**
 * The head of the last request read on a connection: its bytes, and what the front read of them.
 * A client sends the same head request after request (only a body of another length changes it),
 * and what the front reads of a head depends on its bytes alone, so a head of the same bytes is
 * not read again. Reading one makes a string, an array and a match for each line, whose garbage
 * costs the host's main thread more than the reading itself (docs/performance.md, "Jobs
 * submitted one request each").
 */
interface LastHead {
  bytes: Buffer
  head: Head
}

/**
 * Reads the request at the start of `data`, if it has the front's shape and is all there;
 * null leaves it to Node. A head of the same bytes as `last`'s is `last`'s.
 */
function parse(data: Buffer, paths: ReadonlySet<string>, limit: number, last: LastHead | null): Parsed | null {
  const headEnd = data.indexOf(HEAD_END)
  if (headEnd < 0 || headEnd > MAX_HEAD_BYTES) return null
  const same = last !== null && last.bytes.length === headEnd && data.compare(last.bytes, 0, headEnd, 0, headEnd) === 0
  const head = same ? last.head : parseHead(data.toString('latin1', 0, headEnd), paths)
  if (head === null) return null
  const bodyStart = headEnd + HEAD_END.length
  if (!(head.length > 0 && head.length <= limit) || data.length < bodyStart + head.length) return null
  return { head, headEnd, body: data.subarray(bodyStart, bodyStart + head.length), size: bodyStart + head.length }
}

/** Reads a request's head (its bytes up to the blank line, as latin1), if it has the front's shape. */
function parseHead(text: string, paths: ReadonlySet<string>): Head | null {
  const lines = text.split('\r\n')
  const requestLine = lines[0]!
  if (!requestLine.startsWith('POST ') || !requestLine.endsWith(' HTTP/1.1')) return null
  const path = requestLine.slice(5, -9)
  if (!paths.has(path) || lines.length > MAX_HEADERS + 1) return null
  const headers: Record<string, string> = Object.create(null)
  for (let i = 1; i < lines.length; i++) {
    const line = HEADER_LINE.exec(lines[i]!)
    if (line === null) return null
    const name = line[1]!.toLowerCase()
    if (headers[name] !== undefined) return null
    headers[name] = line[2]!.trimEnd()
  }
  // A request without a Host goes to Node, and there to the guard, which refuses it (400).
  if (headers.host === undefined || headers['content-type'] !== 'application/json') return null
  if (headers['transfer-encoding'] !== undefined || headers['content-encoding'] !== undefined || headers.expect !== undefined || headers.upgrade !== undefined) return null
  const connection = headers.connection?.toLowerCase()
  if (connection !== undefined && connection !== 'keep-alive' && connection !== 'close') return null
  const declared = headers['content-length']
  if (declared === undefined || !/^[0-9]{1,10}$/.test(declared)) return null
  return { path, headers, length: Number(declared), close: connection === 'close' }
}

/** The head of an answer with no headers of its own, per status, on each side of its length. */
const plainHeads = new Map<number, readonly [string, string]>()

/**
 * An answer's status line and headers as writeJson (body.ts) orders them — {@link API_HEADERS},
 * the route's `extra`, `Content-Type`, `Content-Length` — in two parts, before and after the
 * length's value. Those of an answer with no headers of its own are made once a status.
 */
function headAround(status: number, extra: Record<string, string>): readonly [string, string] {
  for (const _ in extra) return headLines(status, extra)
  let head = plainHeads.get(status)
  if (head === undefined) plainHeads.set(status, (head = headLines(status, extra)))
  return head
}

/** {@link headAround}'s two parts, made. */
function headLines(status: number, extra: Record<string, string>): [string, string] {
  // The length's key where writeJson's object would have it: its value is written in later.
  const headers: Record<string, string> = { ...API_HEADERS, ...extra, 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': '' }
  const parts: [string, string] = [`HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'unknown'}\r\n`, '']
  let part = 0
  for (const name in headers) {
    if (name === 'Content-Length') {
      parts[0] += 'Content-Length: '
      parts[1] = '\r\n'
      part = 1
      continue
    }
    const value = String(headers[name])
    // As Node's writeHead refuses it: the caller's error, before anything is sent.
    if (/[\r\n]/.test(value)) throw new TypeError(`Invalid character in header content ["${name}"]`)
    parts[part] += `${name}: ${value}\r\n`
  }
  return parts
}

let dateSecond = -1
let dateText = ''
/** The `Date` header's value, as Node's cached one: made at most once a second. */
function httpDate(): string {
  const now = Date.now()
  const second = Math.floor(now / 1000)
  if (second !== dateSecond) {
    dateSecond = second
    dateText = new Date(now).toUTCString()
  }
  return dateText
}

/** One connection while the front reads it. */
class FrontConnection {
  /** Bytes read and not yet served: the start of the next request (sent ahead of its turn). */
  private pending: Buffer | null = null
  /** The head of the last request read here. */
  private lastHead: LastHead | null = null
  /** The request being served, while it is. */
  private current: { answered: boolean; gone: AbortController | null } | null = null
  /** The client has ended its side (its `end`): no byte more will come, and none can go to Node. */
  private clientEnded = false
  private readonly onData = (data: Buffer): void => {
    this.pending = this.pending === null ? data : Buffer.concat([this.pending, data])
    if (this.current !== null) {
      // A client that sends far ahead waits for its answers before more is read.
      if (this.farAhead()) this.socket.pause()
      return
    }
    this.next()
  }
  /**
   * The client has ended its side, having gone or only half-closed (TCP tells the two apart only
   * once an answer is written): a call waiting for it stops waiting, as Node's server has it, and
   * every request already read is still served and answered, in order, before the connection ends.
   */
  private readonly onEnd = (): void => {
    this.clientEnded = true
    this.current?.gone?.abort()
    // Serving or waiting for the client to read its answers, the answer or the 'drain' goes on.
    if (this.current === null && !this.socket.writableNeedDrain) this.next()
  }
  /** The client has read the answers written: reading and serving go on. */
  private readonly onDrain = (): void => {
    if (!this.farAhead()) this.socket.resume()
    if (this.current === null) this.next()
  }
  private readonly onClose = (): void => {
    this.context.closed(this)
    const current = this.current
    if (current !== null && !current.answered) {
      current.answered = true
      this.context.ended()
      current.gone?.abort()
    }
    this.current = null
  }
  private readonly onTimeout = (): void => {
    // Idle for the keep-alive timeout. A request in flight (a long-poll) keeps its connection,
    // and so do answers its client has yet to read, as Node's keep-alive timer starts only once
    // the last answer has gone to the kernel.
    if (this.current === null && this.socket.writableLength === 0) this.socket.destroy()
  }
  private readonly onError = (): void => {
    this.socket.destroy() // `close` follows
  }

  constructor(
    private readonly socket: Socket,
    private readonly context: FrontContext,
  ) {
    socket.setNoDelay(true)
    socket.setTimeout(context.options.keepAliveTimeoutMs)
    socket.on('data', this.onData).on('end', this.onEnd).on('close', this.onClose).on('timeout', this.onTimeout).on('error', this.onError)
  }

  /** More is pending than a request the front serves can be: nothing more is read until it is served. */
  private farAhead(): boolean {
    return this.pending !== null && this.pending.length > MAX_HEAD_BYTES + this.context.options.bodyLimitBytes
  }

  get busy(): boolean {
    return this.current !== null
  }

  destroy(): void {
    this.socket.destroy()
  }

  /**
   * Serves the request at the start of what is pending, or gives the connection to Node; once
   * the client has ended its side, with nothing left to serve, ends the connection.
   */
  private next(): void {
    const data = this.pending
    if (data === null) return void (this.clientEnded && this.socket.end())
    const { options, paths } = this.context
    const request = options.serving() ? parse(data, paths, options.bodyLimitBytes, this.lastHead) : null
    if (request === null) return this.clientEnded ? this.dropAfterEnd() : this.handOff()
    if (this.lastHead?.head !== request.head) this.lastHead = { bytes: Buffer.from(data.subarray(0, request.headEnd)), head: request.head }
    this.pending = data.length === request.size ? null : data.subarray(request.size)
    const current = (this.current = { answered: false, gone: null as AbortController | null })
    this.context.started()
    options.lane.serve(request.head.path, this.exchange(request, current))
  }

  private exchange(request: Parsed, current: NonNullable<FrontConnection['current']>): LaneExchange {
    const { headers, path, close } = request.head
    const guard: GuardInput = {
      path,
      host: headers.host || undefined,
      hostHeaders: 1,
      target: path,
      origin: headers.origin || undefined,
      authorization: headers.authorization || undefined,
    }
    return {
      guard,
      header: (name) => headers[name],
      body: () => parseJson(request.body),
      clientGone: () => {
        const gone = (current.gone ??= new AbortController())
        // A request read before the client's end and served after it: its client may be gone.
        if (this.clientEnded) gone.abort()
        return gone.signal
      },
      answer: (status, body, extra) => this.answer(current, close, status, body, extra),
      abandon: () => this.socket.destroy(),
    }
  }

  /** Writes the request's answer as Node's ServerResponse would (writeJson, body.ts), then goes on to the next request. */
  private answer(current: NonNullable<FrontConnection['current']>, asked: boolean, status: number, body: unknown, extra: Record<string, string>): void {
    if (current.answered) return
    const close = asked || this.context.closing
    const text = JSON.stringify(body)
    const [before, after] = headAround(status, extra)
    const head = `${before}${Buffer.byteLength(text)}${after}Date: ${httpDate()}\r\nConnection: ${close ? 'close' : this.context.keepAlive}\r\n\r\n`
    current.answered = true
    this.current = null
    this.context.ended()
    if (!this.socket.writable) return void this.socket.destroy()
    const taken = this.socket.write(head + text)
    if (close) {
      this.pending = null
      this.socket.end()
      return
    }
    // A client that does not read its answers is not read either, as Node's server pauses it:
    // answers waiting to be read would otherwise pile up without bound (requests sent ahead and
    // never read). The write's own result says so; the common answer costs no more.
    if (!taken) {
      this.socket.pause()
      this.socket.once('drain', this.onDrain)
      return
    }
    if (this.socket.isPaused() && !this.farAhead()) this.socket.resume()
    // A request sent ahead (or the end after the client's) comes once this answer's caller has
    // returned (it may be a commit's).
    if (this.pending !== null || this.clientEnded) queueMicrotask(() => this.current === null && this.next())
  }

  /**
   * Drops the bytes the front cannot serve once the client has ended its side, and ends the
   * connection after the answers already written. They cannot go to Node: a stream that has
   * emitted `end` takes no bytes back (`unshift` throws). A request cut short can never complete
   * (Node's parser would refuse it at the end); a whole request of another shape, or any while
   * the host is read-only, is neither carried out nor answered, which is what a connection
   * closed before an answer may always mean to a client, free to send it again. (Node's own
   * server ends a connection at its client's end, dropping every answer not yet written.)
   */
  private dropAfterEnd(): void {
    this.pending = null
    this.socket.end()
  }

  /** Gives the connection to Node's HTTP server, with the bytes of the request it could not serve. */
  private handOff(): void {
    const socket = this.socket
    socket.off('data', this.onData).off('end', this.onEnd).off('close', this.onClose).off('timeout', this.onTimeout).off('error', this.onError)
    socket.setTimeout(0)
    socket.pause()
    if (this.pending !== null) socket.unshift(this.pending)
    this.pending = null
    this.context.handOff(this, socket)
    socket.resume()
  }
}
