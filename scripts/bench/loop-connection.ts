/**
 * The bench's client loops' connection: one keep-alive HTTP/1.1 connection that sends one POST
 * at a time and reads its answer, as wrk or autocannon do — the request written from bytes
 * built once, the answer framed by its Content-Length. A load generator shares the machine's two
 * cores with the server it measures, so it must cost as little as it can: a small JSON POST
 * costs this ~25–40 µs of CPU here, undici's Pool ~65–85 (src-shared/host-connection.ts, the
 * connections of `leasehold worker`), node:http's `request` ~150–200 and `fetch` ~700. The rows
 * measure what the host serves; a user's own client pays what it costs, on the user's side.
 *
 * It reads only the answers the bench's servers send (a status line, headers, a body of a
 * declared length); an answer in any other shape fails the request, and so the run.
 */
import { connect, type Socket } from 'node:net'

export interface LoopAnswer {
  status: number
  body: string
}

const HEAD_END = Buffer.from('\r\n\r\n')

/** How long a connection may idle and still be reused: under the servers' keep-alive timeout of 5 s. */
const IDLE_REUSE_MS = 4_000

export class LoopConnection {
  private socket: Socket | null = null
  private received: Buffer | null = null
  private waiting: { resolve: (answer: LoopAnswer) => void; reject: (error: Error) => void } | null = null
  /** When the last answer came (performance.now()). */
  private answeredAt = 0
  /** The bytes of each request sent so far, by path and body. */
  private readonly requests = new Map<string, Buffer>()
  private readonly host: string
  private readonly port: number

  constructor(
    url: string,
    private readonly token: string,
  ) {
    const { hostname, port } = new URL(url)
    this.host = hostname
    this.port = Number(port)
  }

  /** POSTs `body` (JSON text) to `path`; resolves with the answer's status and body. */
  post(path: string, body: string): Promise<LoopAnswer> {
    if (this.waiting) return Promise.reject(new Error('one request at a time on a LoopConnection'))
    const key = `${path}\n${body}`
    let request = this.requests.get(key)
    if (request === undefined) {
      const head = `POST ${path} HTTP/1.1\r\nHost: ${this.host}:${this.port}\r\nAuthorization: Bearer ${this.token}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`
      this.requests.set(key, (request = Buffer.from(head + body)))
    }
    // A server closes a keep-alive connection idle for its timeout (Node's and the host's: 5 s); a
    // request written as it does meets a reset. A connection idle nearly that long is not reused,
    // as undici and browsers do.
    if (this.socket && performance.now() - this.answeredAt > IDLE_REUSE_MS) this.close()
    return new Promise((resolve, reject) => {
      this.waiting = { resolve, reject }
      this.open().write(request)
    })
  }

  close(): void {
    this.socket?.end()
    this.socket = null
  }

  private open(): Socket {
    if (this.socket) return this.socket
    const socket = connect(this.port, this.host)
    socket.setNoDelay(true)
    // A socket this connection has let go of (closed after an answer) no longer speaks for it.
    socket.on('data', (data: Buffer) => this.socket === socket && this.read(data))
    socket.on('error', (error) => this.socket === socket && this.fail(error))
    socket.on('close', () => this.socket === socket && this.fail(new Error('the server closed the connection before its answer')))
    this.received = null
    return (this.socket = socket)
  }

  private read(data: Buffer): void {
    const received = (this.received = this.received ? Buffer.concat([this.received, data]) : data)
    const headEnd = received.indexOf(HEAD_END)
    if (headEnd < 0) return
    const head = received.toString('latin1', 0, headEnd)
    const length = /\r\ncontent-length: *(\d+)/i.exec(head)
    if (!head.startsWith('HTTP/1.1 ') || length === null) return this.fail(new Error(`an answer the bench cannot read: ${head.split('\r\n')[0]}`))
    const end = headEnd + HEAD_END.length + Number(length[1])
    if (received.length < end) return
    if (received.length > end) return this.fail(new Error('bytes after the answer to the one request sent'))
    this.received = null
    if (/\r\nconnection: *close/i.test(head)) this.close()
    const waiting = this.waiting
    this.waiting = null
    this.answeredAt = performance.now()
    waiting?.resolve({ status: Number(head.slice(9, 12)), body: received.toString('utf8', headEnd + HEAD_END.length, end) })
  }

  private fail(error: Error): void {
    const waiting = this.waiting
    this.waiting = null
    this.received = null
    this.socket?.destroy()
    this.socket = null
    waiting?.reject(error)
  }
}
