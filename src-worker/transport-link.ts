import { connect } from 'node:net'
import { StringDecoder } from 'node:string_decoder'
import { lineReader } from '../src-shared/line-reader'
import { type LinkAddress, MAX_REQUEST_CHARS } from '../src-shared/thread-link'
import { type ExchangeAnswer, type ExchangeRequest, HostError, noAnswer, requestText } from './transport'

/** A link not up by then is given up on (a local socket connects at once, or fails at once). */
const LINK_CONNECT_TIMEOUT_MS = 2000

/** The buffer each read of a link fills (as large as a socket's own). */
const READ_BUFFER_BYTES = 64 * 1024

interface Pending {
  resolve(answer: ExchangeAnswer): void
  reject(error: Error): void
}

/**
 * A local worker's link to the host (src-shared/thread-link.ts), as the driving thread's
 * transport (driver.ts): each exchange one JSON line, in the IPC channel's `request` envelope,
 * and its answer one line back, matched by id. A link that closes fails the exchanges in flight
 * and calls `onClose` once: the driving thread then gives the runtime its jobs and reports.
 */
export class LinkTransport {
  private readonly pending = new Map<number, Pending>()
  private nextId = 1

  private constructor(private readonly socket: ReturnType<typeof connect>) {}

  /** Connects and says who the thread is; null if the link could not be opened. */
  static open(address: LinkAddress, workerId: string, onClose: () => void): Promise<LinkTransport | null> {
    // What the host writes is read into one buffer, reused, and handed straight to the line
    // reader (`onread`), not through the socket's stream, its chunks and its 'data' event: a
    // grant to a thread that waits reaches its handler sooner after an idle spell
    // (docs/performance.md, "The pickup's path"). A character cut between two reads waits in
    // the decoder for the rest of its bytes.
    const decoder = new StringDecoder('utf8')
    const read = lineReader((line) => link.answer(line))
    const socket = connect({
      path: address.path,
      onread: {
        buffer: Buffer.allocUnsafe(READ_BUFFER_BYTES),
        callback: (bytes, buffer) => {
          read.push(decoder.write(buffer.subarray(0, bytes)))
          return true // read on
        },
      },
    })
    const link = new LinkTransport(socket)
    let up = false
    socket.on('error', () => {}) // 'close' follows
    const giveUp = setTimeout(() => socket.destroy(), LINK_CONNECT_TIMEOUT_MS)
    return new Promise((resolve) => {
      socket.on('connect', () => {
        clearTimeout(giveUp)
        up = true
        socket.write(`${JSON.stringify({ worker_id: workerId, thread: address.thread, token: address.token })}\n`)
        resolve(link)
      })
      socket.on('close', () => {
        clearTimeout(giveUp)
        for (const call of link.pending.values()) call.reject(new Error('the link to the host closed'))
        link.pending.clear()
        if (up) onClose()
        resolve(null)
      })
    })
  }

  /** One exchange; an aborted one resolves at once with nothing, and its late answer is dropped. */
  exchange(request: ExchangeRequest, signal?: AbortSignal): Promise<ExchangeAnswer> {
    const id = this.nextId++
    // Written before it is sent: a request that cannot be, or that is longer than the host reads
    // from a link (which it would close), fails alone and leaves the link up (report-budget.ts).
    let line: string
    try {
      line = requestText({ type: 'request', id, method: 'exchange', params: request }, MAX_REQUEST_CHARS)
    } catch (error) {
      return Promise.reject(error as Error)
    }
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject })
      signal?.addEventListener('abort', () => this.pending.delete(id) && resolve(noAnswer()), { once: true })
      this.socket.write(`${line}\n`)
    })
  }

  /** A line the host wrote: the answer to one of the exchanges in flight. */
  private answer(line: string): void {
    let response: { id?: unknown; result?: ExchangeAnswer; error?: { status: number; code: string; detail: string } }
    try {
      response = JSON.parse(line)
    } catch {
      return // not an answer: the host writes nothing else
    }
    const call = this.pending.get(response.id as number)
    if (!call) return
    this.pending.delete(response.id as number)
    if (response.result) call.resolve(response.result)
    else call.reject(new HostError(response.error?.status ?? 500, response.error?.code ?? 'no_answer', response.error?.detail ?? 'the host sent no answer'))
  }

  close(): void {
    this.socket.destroy()
  }
}
