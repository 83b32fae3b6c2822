import { randomBytes, randomUUID, timingSafeEqual } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, type Server, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { lineReader } from '../../src-shared/line-reader'
import { LINK_PATH_ENV, LINK_TOKEN_ENV, LinkHello, MAX_HELLO_CHARS, MAX_REQUEST_CHARS } from '../../src-shared/thread-link'

/** A connection that has not said who it is by then is closed (by default). */
const HELLO_TIMEOUT_MS = 5_000

/** Where the links listen: a socket in a fresh folder only this user can open (a named pipe on Windows). */
function linkPath(): string {
  if (process.platform === 'win32') return `\\\\.\\pipe\\leasehold-${randomUUID()}`
  return join(mkdtempSync(join(tmpdir(), 'leasehold-')), 'workers.sock')
}

/**
 * Answers one request a linked thread sent (a JSON value, not checked yet): `gone` aborts when
 * the link closes, and `reply` writes to the link while it is open.
 */
export type LinkRequestHandler = (workerId: string, request: unknown, gone: AbortSignal, reply: (message: unknown) => void) => void

/**
 * The host's end of the local workers' links (src-shared/thread-link.ts): a socket server that
 * accepts a thread once it shows its worker's token, then passes each line it sends to
 * `answer`, and writes the answers back. Every way a link can fail — the server could not
 * listen, the thread never connected, the link closed — only means the worker claims over IPC.
 */
export class ThreadLinks {
  private readonly server: Server | null = null
  private readonly path: string | null = null
  private listening = false
  /** Each worker's token, given at spawn; a worker not here has no links. */
  private readonly tokens = new Map<string, Buffer>()
  /** Each worker's linked threads, by index. */
  private readonly links = new Map<string, Map<number, Socket>>()
  /** Requests read from linked threads so far (the tests read it). */
  requests = 0

  constructor(
    log: (line: string) => void,
    private readonly answer: LinkRequestHandler,
    private readonly helloTimeoutMs = HELLO_TIMEOUT_MS,
  ) {
    try {
      this.path = linkPath()
      this.server = createServer((socket) => this.accept(socket))
      this.server.on('error', (error) => {
        this.listening = false
        log(`leasehold: the workers' thread links are off (${error.message}); jobs reach them over IPC`)
      })
      this.server.listen(this.path)
      this.server.unref() // the host's own server keeps it up; this one never should
      this.listening = true
    } catch (error) {
      log(`leasehold: the workers' thread links are off (${(error as Error).message}); jobs reach them over IPC`)
    }
  }

  /** The environment a worker process needs to link its threads (none while the links are off). */
  envFor(workerId: string): Record<string, string> {
    if (!this.listening || !this.path) return {}
    const token = randomBytes(24)
    this.tokens.set(workerId, token)
    return { [LINK_PATH_ENV]: this.path, [LINK_TOKEN_ENV]: token.toString('hex') }
  }

  /** The worker has exited: its threads' links close and its token stops opening any. */
  forget(workerId: string): void {
    this.tokens.delete(workerId)
    for (const socket of this.links.get(workerId)?.values() ?? []) socket.destroy()
    this.links.delete(workerId)
  }

  /** Closes every link and the server, and removes the socket's folder. */
  close(): void {
    for (const workerId of [...this.links.keys()]) this.forget(workerId)
    this.tokens.clear()
    this.server?.close()
    this.listening = false
    if (this.path && process.platform !== 'win32') rmSync(dirname(this.path), { recursive: true, force: true })
  }

  private accept(socket: Socket): void {
    socket.setEncoding('utf8')
    socket.on('error', () => {}) // a link that breaks only closes; 'close' follows
    const timer = setTimeout(() => socket.destroy(), this.helloTimeoutMs)
    const gone = new AbortController()
    const reply = (message: unknown) => {
      if (socket.writable) socket.write(`${JSON.stringify(message)}\n`)
    }
    let hello: LinkHello | null = null
    /** Characters read before the hello's end, while there is none: a connection that sends more is closed. */
    let beforeHello = 0
    const read = lineReader((line) => {
      if (socket.destroyed) return
      if (hello) return this.request(hello.worker_id, line, socket, gone.signal, reply)
      hello = line.length <= MAX_HELLO_CHARS ? this.check(line) : null
      if (!hello) return void socket.destroy()
      clearTimeout(timer)
      const threads = this.links.get(hello.worker_id) ?? new Map<number, Socket>()
      this.links.set(hello.worker_id, threads)
      threads.get(hello.thread)?.destroy() // a thread replaced: its new self takes the index
      threads.set(hello.thread, socket)
    }, MAX_REQUEST_CHARS)
    socket.on('data', (chunk: string) => {
      if (!hello && !chunk.includes('\n') && (beforeHello += chunk.length) > MAX_HELLO_CHARS) return void socket.destroy()
      if (!read.push(chunk)) socket.destroy()
    })
    socket.on('close', () => {
      clearTimeout(timer)
      gone.abort()
      if (hello && this.links.get(hello.worker_id)?.get(hello.thread) === socket) this.links.get(hello.worker_id)!.delete(hello.thread)
    })
  }

  /** A request from a linked thread of `workerId`, one JSON line, to be answered over its link. */
  private request(workerId: string, line: string, socket: Socket, gone: AbortSignal, reply: (message: unknown) => void): void {
    let request: unknown
    try {
      request = JSON.parse(line)
    } catch {
      return void socket.destroy() // the worker's own code writes only JSON
    }
    this.requests++
    this.answer(workerId, request, gone, reply)
  }

  /** The hello, if it is one and shows the token its worker was given. */
  private check(line: string): LinkHello | null {
    let parsed: ReturnType<typeof LinkHello.safeParse>
    try {
      parsed = LinkHello.safeParse(JSON.parse(line))
    } catch {
      return null
    }
    if (!parsed.success) return null
    const expected = this.tokens.get(parsed.data.worker_id)
    const shown = Buffer.from(parsed.data.token, 'hex')
    return expected && shown.length === expected.length && timingSafeEqual(shown, expected) ? parsed.data : null
  }
}
