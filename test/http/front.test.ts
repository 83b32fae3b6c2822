/**
 * The front (src-main/http/front.ts): the first reader of every connection. A request of the
 * lane's one shape, all of it read, is served by the front; anything else, and everything
 * after it on that connection, goes to Node's HTTP server with its bytes. First the front before
 * a Node server whose own answers are marked, with a stub route; then a real host, where the
 * front's answers must be Node's to the byte (the Date and the ids aside).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { connect, type AddressInfo, type Socket } from 'node:net'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from 'vitest'
import { ManualClock } from '../../src-main/engine/rules/clock'
import { attachFront, type Front, MAX_HEADERS } from '../../src-main/http/front'
import { HttpError } from '../../src-main/http/http-error'
import { WORKER_PREFIX } from '../../src-main/http/worker-api'
import type { Lane } from '../../src-main/http/lane'
import { startTestHost, type TestHost } from '../helpers/host'
import { ECHO_PATH, echoLane } from './echo-lane'
import { API_T0, QUEUE } from './support'

const TOKEN = 't'.repeat(32)
const LIMIT = 1024
const PATH = ECHO_PATH

/** The bytes of a POST to `path` with `headers` (beyond Host) and `body`, as one write. */
function post(port: number, body: string, headers: Record<string, string> = {}, path = PATH, start = `POST ${path} HTTP/1.1`): string {
  const all: Record<string, string> = {
    Host: `127.0.0.1:${port}`,
    Authorization: `Bearer ${TOKEN}`,
    'Content-Type': 'application/json',
    'Content-Length': String(Buffer.byteLength(body)),
    ...headers,
  }
  const lines = Object.entries(all)
    .filter(([, value]) => value !== '')
    .map(([name, value]) => `${name}: ${value}`)
  return `${start}\r\n${lines.join('\r\n')}\r\n\r\n${body}`
}

/** An answer as read off the wire: its status, header lines in order, and body. */
interface Wire {
  status: number
  lines: string[]
  body: string
}

/** Reads answers off a socket as they come, framed by Content-Length. */
class Reader {
  private text = ''
  private closed = false
  private wake: (() => void) | null = null

  constructor(readonly socket: Socket) {
    socket.setEncoding('latin1')
    socket.on('data', (chunk: string) => {
      this.text += chunk
      this.wake?.()
    })
    socket.on('close', () => {
      this.closed = true
      this.wake?.()
    })
    socket.on('error', () => {})
  }

  /** The next answer, or null once the connection has closed without one. */
  async next(): Promise<Wire | null> {
    for (;;) {
      const headEnd = this.text.indexOf('\r\n\r\n')
      if (headEnd >= 0) {
        const [statusLine, ...lines] = this.text.slice(0, headEnd).split('\r\n')
        const length = Number(lines.find((line) => /^content-length:/i.test(line))?.split(':')[1] ?? 0)
        const end = headEnd + 4 + length
        if (this.text.length >= end) {
          const body = Buffer.from(this.text.slice(headEnd + 4, end), 'latin1').toString('utf8')
          this.text = this.text.slice(end)
          return { status: Number(statusLine!.split(' ')[1]), lines, body }
        }
      }
      if (this.closed) return null
      await new Promise<void>((resolve) => (this.wake = resolve))
      this.wake = null
    }
  }

  /** Resolves once the connection has closed. */
  async closedSoon(): Promise<boolean> {
    while (!this.closed) await new Promise<void>((resolve) => (this.wake = resolve))
    return true
  }
}

async function open(port: number): Promise<Reader> {
  const socket = connect(port, '127.0.0.1')
  await new Promise((resolve) => socket.once('connect', resolve))
  return new Reader(socket)
}

describe('the front before a Node server', () => {
  let server: Server
  let front: Front
  let port = 0
  let serving = true
  const echo = echoLane(TOKEN, LIMIT, () => port)
  const behave = echo.behave
  /** The requests the front handed the lane, and those Node's server got. */
  let byFront = 0
  let byNode = 0
  /** The host's side of each connection, as accepted, and the most bytes of answers unread when the front began a request. */
  const accepted: Socket[] = []
  let unreadAtServe = 0
  const readers: Reader[] = []
  const connectTo = async () => {
    const reader = await open(port)
    readers.push(reader)
    return reader
  }

  beforeAll(async () => {
    const lane = echo.lane
    const counted: Lane = Object.assign((req: IncomingMessage, res: ServerResponse) => lane(req, res), {
      paths: lane.paths,
      serve: (path: string, exchange: Parameters<Lane['serve']>[1]) => {
        byFront += 1
        unreadAtServe = Math.max(unreadAtServe, accepted.at(-1)?.writableLength ?? 0)
        return lane.serve(path, exchange)
      },
    })
    server = createServer({ keepAliveTimeout: 5_000 }, (req, res) => {
      byNode += 1
      if (lane(req, res)) return
      req.resume()
      res.writeHead(404, { 'content-type': 'text/plain', 'content-length': '4' }).end('node')
    })
    front = attachFront(server, { lane: counted, bodyLimitBytes: LIMIT, serving: () => serving, keepAliveTimeoutMs: 1_000 })
    server.on('connection', (socket: Socket) => void accepted.push(socket))
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    port = (server.address() as AddressInfo).port
  })
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())))
  beforeEach(() => {
    echo.reset()
    byFront = 0
    byNode = 0
    unreadAtServe = 0
    serving = true
  })
  afterEach(() => {
    for (const reader of readers.splice(0)) reader.socket.destroy()
  })

  test("a request of the lane's shape is served by the front, on a connection kept alive", async () => {
    const reader = await connectTo()
    reader.socket.write(post(port, JSON.stringify({ say: 'one' })))
    expect(await reader.next()).toMatchObject({ status: 200, body: '{"heard":"one"}' })
    reader.socket.write(post(port, JSON.stringify({ say: 'two' })))
    const second = await reader.next()
    expect(second).toMatchObject({ status: 200, body: '{"heard":"two"}' })
    expect(second!.lines).toEqual([
      'Cache-Control: no-store',
      'X-Content-Type-Options: nosniff',
      'Content-Type: application/json; charset=utf-8',
      'Content-Length: 15',
      expect.stringMatching(/^Date: \w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT$/),
      'Connection: keep-alive',
      'Keep-Alive: timeout=1',
    ])
    expect([byFront, byNode]).toEqual([2, 0])
  })

  test("an answer with headers of its own, and answers of several statuses, come from the front as from Node, header lines in Node's order", async () => {
    behave(async (input, call) => {
      if (input.say === 'extra') call.setHeader('X-Extra', 'yes')
      if (input.say === 'bad') throw new HttpError('retry_too_early', 'Not yet', { retry_after_s: 3 })
      return { heard: input.say ?? null }
    })
    const answers: { front: Wire[]; node: Wire[] } = { front: [], node: [] }
    for (const say of ['extra', 'plain', 'bad', 'extra', 'plain', 'bad']) {
      for (const split of [false, true]) {
        const reader = await connectTo()
        const bytes = post(port, JSON.stringify({ say }))
        // Sent whole, the front serves it; with its last byte a moment later, Node's server does.
        reader.socket.write(split ? bytes.slice(0, -1) : bytes)
        if (split) setTimeout(() => reader.socket.write(bytes.slice(-1)), 30)
        const answer = (await reader.next())!
        // The Date moves, and this harness gives the front a keep-alive timeout of its own.
        answers[split ? 'node' : 'front'].push({ ...answer, lines: answer.lines.filter((line) => !line.startsWith('Date: ') && !line.startsWith('Keep-Alive: ')) })
      }
    }
    expect(answers.front.map((answer) => answer.status)).toEqual([200, 200, 429, 200, 200, 429])
    expect(answers.front[0]!.lines).toContain('X-Extra: yes')
    expect(answers.front[2]!.lines).toContain('Retry-After: 3')
    expect(answers.front[1]!.lines).not.toContain('X-Extra: yes')
    expect(answers.front).toEqual(answers.node)
    expect([byFront, byNode]).toEqual([6, 6])
  })

  test('a header value with a line break is never written: from the front as from Node, the connection closes unanswered', async () => {
    behave(async (_input, call) => {
      call.setHeader('X-Bad', 'a\r\nInjected: yes')
      return { heard: 'x' }
    })
    for (const split of [false, true]) {
      const reader = await connectTo()
      const bytes = post(port, '{"say":"x"}')
      // Sent whole, the front serves it; with its last byte a moment later, Node's server does.
      reader.socket.write(split ? bytes.slice(0, -1) : bytes)
      if (split) setTimeout(() => reader.socket.write(bytes.slice(-1)), 30)
      expect(await reader.next()).toBeNull()
    }
    expect([byFront, byNode]).toEqual([1, 1])
  })

  test.each([
    ['a chunked body', (p: number) => post(p, '{"say":"x"}', { 'Content-Length': '', 'Transfer-Encoding': 'chunked' }).replace('{"say":"x"}', 'b\r\n{"say":"x"}\r\n0\r\n\r\n')],
    ['Content-Length and Transfer-Encoding both', (p: number) => post(p, '{"say":"x"}', { 'Transfer-Encoding': 'chunked' })],
    ['a header sent twice', (p: number) => post(p, '{"say":"x"}', { 'X-Twice': 'a' }).replace('X-Twice: a', 'X-Twice: a\r\nx-twice: b')],
    ['a header value with a byte past ASCII', (p: number) => post(p, '{"say":"x"}', { 'X-Name': 'caf\u00e9' })],
    ['a header folded onto a second line', (p: number) => post(p, '{"say":"x"}', { 'X-Long': 'a' }).replace('X-Long: a', 'X-Long: a\r\n b')],
    ['a line ending in a bare LF', (p: number) => post(p, '{"say":"x"}', { 'X-Lf': 'a' }).replace('X-Lf: a\r\n', 'X-Lf: a\n')],
    [`more than ${MAX_HEADERS} header lines`, (p: number) => post(p, '{"say":"x"}', Object.fromEntries(Array.from({ length: MAX_HEADERS }, (_, i) => [`X-${i}`, 'v'])))],
    ['an Expect header', (p: number) => post(p, '{"say":"x"}', { Expect: '100-continue' })],
    ['an Upgrade header', (p: number) => post(p, '{"say":"x"}', { Connection: 'upgrade', Upgrade: 'websocket' })],
    ['another Connection option', (p: number) => post(p, '{"say":"x"}', { Connection: 'keep-alive, x-other' })],
    ['HTTP/1.0', (p: number) => post(p, '{"say":"x"}', {}, PATH, `POST ${PATH} HTTP/1.0`)],
    ['another method', (p: number) => post(p, '{"say":"x"}', {}, PATH, `PUT ${PATH} HTTP/1.1`)],
    ['a query string', (p: number) => post(p, '{"say":"x"}', {}, `${PATH}?a=1`)],
    ['an absolute target', (p: number) => post(p, '{"say":"x"}', {}, PATH, `POST http://127.0.0.1:${p}${PATH} HTTP/1.1`)],
    ['a JSON type with a charset', (p: number) => post(p, '{"say":"x"}', { 'Content-Type': 'application/json; charset=utf-8' })],
    ['a body over the limit', (p: number) => post(p, JSON.stringify({ say: 'x'.repeat(LIMIT) }))],
    ['a Content-Length with a sign', (p: number) => post(p, '{"say":"x"}', { 'Content-Length': '+11' })],
    ['no Host header (Node refuses it)', (p: number) => post(p, '{"say":"x"}', { Host: '' })],
    ['a tab after the Content-Length (Node refuses it)', (p: number) => post(p, '{"say":"x"}', { 'Content-Length': '11\t' })],
    ['a tab around a value', (p: number) => post(p, '{"say":"x"}', { 'X-Tabbed': '\tv' })],
  ])('a request with %s goes to Node, with every byte of it', async (_, bytes) => {
    const reader = await connectTo()
    reader.socket.write(bytes(port))
    const answer = await reader.next()
    expect(byFront).toBe(0)
    // Node read what was sent: its parser refused it (no request), or its listener had it.
    expect(answer === null || answer.status >= 400 || byNode === 1).toBe(true)
    if (byNode === 1 && answer?.status === 200) expect(answer.body).toBe('{"heard":"x"}')
  })

  test('a request not yet all read goes to Node, which reads the rest; the connection stays with Node', async () => {
    const reader = await connectTo()
    const bytes = post(port, '{"say":"x"}')
    reader.socket.write(bytes.slice(0, -3))
    await new Promise((resolve) => setTimeout(resolve, 50))
    reader.socket.write(bytes.slice(-3))
    expect(await reader.next()).toMatchObject({ status: 200, body: '{"heard":"x"}' })
    reader.socket.write(bytes)
    expect(await reader.next()).toMatchObject({ status: 200, body: '{"heard":"x"}' })
    expect([byFront, byNode]).toEqual([0, 2])
  })

  test("a head of the last request's bytes is that request's head; a head other by one byte is read afresh", async () => {
    const reader = await connectTo()
    const served: { status: number; body: string }[] = []
    const send = async (bytes: string) => {
      reader.socket.write(bytes)
      const answer = (await reader.next())!
      served.push({ status: answer.status, body: answer.body })
    }
    await send(post(port, '{"say":"one"}'))
    await send(post(port, '{"say":"two"}')) // the same head: only the body differs
    await send(post(port, '{"say":"two"}', { Authorization: `Bearer ${'u'.repeat(32)}` })) // a token of the same length
    await send(post(port, '{"say":"six"}'))
    await send(post(port, '{"say":"longer"}')) // another Content-Length
    await send(post(port, '{"say":"bye"}', { Connection: 'close' }))
    expect(served).toEqual([
      { status: 200, body: '{"heard":"one"}' },
      { status: 200, body: '{"heard":"two"}' },
      { status: 401, body: '{"detail":"A valid Authorization: Bearer token is required","code":"unauthorized"}' },
      { status: 200, body: '{"heard":"six"}' },
      { status: 200, body: '{"heard":"longer"}' },
      { status: 200, body: '{"heard":"bye"}' },
    ])
    expect(await reader.closedSoon()).toBe(true)
    expect([byFront, byNode]).toEqual([6, 0])
  })

  test("a request with the last request's head but not all its body yet goes to Node, which reads the rest", async () => {
    const reader = await connectTo()
    const bytes = post(port, '{"say":"x"}')
    reader.socket.write(bytes)
    expect(await reader.next()).toMatchObject({ status: 200, body: '{"heard":"x"}' })
    reader.socket.write(bytes.slice(0, -3))
    await new Promise((resolve) => setTimeout(resolve, 50))
    reader.socket.write(bytes.slice(-3))
    expect(await reader.next()).toMatchObject({ status: 200, body: '{"heard":"x"}' })
    expect([byFront, byNode]).toEqual([1, 1])
  })

  test("requests sent ahead on one connection are answered in order, the front's and then, once one is not of its shape, Node's", async () => {
    const reader = await connectTo()
    const other = `GET /elsewhere HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`
    reader.socket.write(post(port, '{"say":"a"}') + other + post(port, '{"say":"b"}'))
    expect(await reader.next()).toMatchObject({ status: 200, body: '{"heard":"a"}' })
    expect(await reader.next()).toMatchObject({ status: 404, body: 'node' })
    expect(await reader.next()).toMatchObject({ status: 200, body: '{"heard":"b"}' })
    expect([byFront, byNode]).toEqual([1, 2])
  })

  test.each([
    ['nothing more', ''],
    ['a request not all sent', (p: number) => post(p, '{"say":"d"}').slice(0, -2)],
    ["a whole request not of the front's shape", (p: number) => `GET /elsewhere HTTP/1.1\r\nHost: 127.0.0.1:${p}\r\n\r\n`],
  ])('a client that half-closes after pipelined requests gets every answer, in order, then the connection ends (after them %s, which no one serves)', async (_, after) => {
    // The first answers once the client's end has reached the host (its call's clientGone signal).
    behave(async (input, call) => {
      if (input.say === 'a') await new Promise((resolve) => call.clientGone().addEventListener('abort', resolve))
      return { heard: input.say ?? null }
    })
    const reader = await connectTo()
    const tail = typeof after === 'string' ? after : after(port)
    reader.socket.end(['a', 'b', 'c'].map((say) => post(port, JSON.stringify({ say }))).join('') + tail)
    for (const say of ['a', 'b', 'c']) expect(await reader.next()).toMatchObject({ status: 200, body: `{"heard":"${say}"}` })
    expect(await reader.next()).toBeNull()
    const host = accepted.at(-1)!
    if (!host.closed) await new Promise((resolve) => host.once('close', resolve))
    expect([byFront, byNode, front.inFlight]).toEqual([3, 0, 0])
  })

  test('a client that sends requests ahead and reads no answer is not read until it reads them, as Node stops reading it, nor cut off; then every answer comes, in order', async () => {
    // Answered after a turn of the event loop, as a host's routes are (a commit's), so that the
    // front is serving as more arrives: it keeps the connection rather than hand it to Node.
    behave(async (input) => {
      await new Promise((resolve) => setImmediate(resolve))
      return { heard: input.say ?? null }
    })
    const socket = connect(port, '127.0.0.1')
    await new Promise((resolve) => socket.once('connect', resolve))
    socket.pause() // reads nothing
    const say = 'x'.repeat(LIMIT - 20)
    const one = post(port, JSON.stringify({ say }))
    let sent = 0
    // Sends until the host stops reading (no 'drain' for a while) or 32 MB have gone.
    while (sent * one.length < 32 * 1024 * 1024) {
      sent += 100
      if (socket.write(one.repeat(100))) continue
      const drained = await new Promise<boolean>((resolve) => {
        const quiet = setTimeout(() => resolve(false), 300)
        socket.once('drain', () => resolve(clearTimeout(quiet) === undefined))
      })
      if (!drained) break
    }
    const host = accepted.at(-1)!
    // No request began while the answers before it waited to be read past the socket's mark,
    expect(unreadAtServe).toBeLessThan(host.writableHighWaterMark)
    // and of what the host read it holds unserved no more than a request and the reads in hand
    // (it held every byte sent, megabytes, when each answer read on).
    expect(host.bytesRead - byFront * one.length).toBeLessThan(256 * 1024)
    // Answers waiting to be read keep the connection past the keep-alive timeout, as Node's do.
    await new Promise((resolve) => host.once('timeout', resolve))
    expect(host.destroyed).toBe(false)
    const reader = new Reader(socket)
    readers.push(reader)
    socket.resume()
    for (let i = 0; i < sent; i++) expect((await reader.next())?.body).toBe(JSON.stringify({ heard: say }))
    expect(byFront + byNode).toBe(sent)
  }, 60_000)

  test("a request with Connection: close is answered with Connection: close, and the connection closes", async () => {
    const reader = await connectTo()
    reader.socket.write(post(port, '{"say":"bye"}', { Connection: 'close' }))
    const answer = await reader.next()
    expect(answer).toMatchObject({ status: 200, body: '{"heard":"bye"}' })
    expect(answer!.lines).toContain('Connection: close')
    expect(await reader.closedSoon()).toBe(true)
    expect(byFront).toBe(1)
  })

  test("the lane's refusals come from the front as from Node: a wrong token 401, a body not JSON 400", async () => {
    const reader = await connectTo()
    reader.socket.write(post(port, '{"say":"x"}', { Authorization: 'Bearer wrong' }))
    expect(await reader.next()).toMatchObject({ status: 401, body: '{"detail":"A valid Authorization: Bearer token is required","code":"unauthorized"}' })
    reader.socket.write(post(port, '{"say":'))
    expect(await reader.next()).toMatchObject({ status: 400, body: '{"detail":"The body is not well-formed JSON","code":"invalid_json"}' })
    expect([byFront, byNode]).toEqual([2, 0])
  })

  test('while the host may not serve from the front (read-only), every request goes to Node', async () => {
    serving = false
    const reader = await connectTo()
    reader.socket.write(post(port, '{"say":"x"}'))
    expect(await reader.next()).toMatchObject({ status: 200, body: '{"heard":"x"}' })
    expect([byFront, byNode]).toEqual([0, 1])
  })

  test('a client that hangs up while its call waits aborts the call, whose answer a half-closed client still reads; an idle connection closes after the keep-alive timeout', async () => {
    const { waiting, aborted } = echo.waitForHangUp()
    const leaving = await connectTo()
    leaving.socket.write(post(port, '{}'))
    await waiting
    expect(front.inFlight).toBe(1)
    leaving.socket.end()
    expect(await aborted).toBe(true)
    expect(await leaving.next()).toMatchObject({ status: 200, body: '{"gone":true}' })
    expect(await leaving.closedSoon()).toBe(true)
    expect(front.inFlight).toBe(0)

    echo.reset()
    const idle = await connectTo()
    idle.socket.write(post(port, '{"say":"x"}'))
    expect(await idle.next()).toMatchObject({ status: 200 })
    const answeredAt = Date.now()
    expect(await idle.closedSoon()).toBe(true)
    expect(Date.now() - answeredAt).toBeGreaterThanOrEqual(900)
  })

  test('closeIdle closes the connections with no request in flight; closeAll closes the rest', async () => {
    let release!: () => void
    behave(() => new Promise((resolve) => (release = () => resolve({ late: true }))))
    const busy = await connectTo()
    busy.socket.write(post(port, '{}'))
    while (front.inFlight === 0) await new Promise((resolve) => setTimeout(resolve, 5))
    behave(async () => ({}))
    const idle = await connectTo()
    idle.socket.write(post(port, '{}'))
    await idle.next()
    front.closeIdle()
    expect(await idle.closedSoon()).toBe(true)
    release()
    expect(await busy.next()).toMatchObject({ status: 200, body: '{"late":true}' })
    front.closeAll()
    expect(await busy.closedSoon()).toBe(true)
  })
})

describe("a real host's front answers as its Node server does", () => {
  let host: TestHost
  beforeAll(async () => {
    host = await startTestHost({ busy: 0, totalUnits: 10 }, { clock: new ManualClock(API_T0) })
  })
  afterAll(() => host.dispose())

  test('a one-job submit and a claim: the same status line and header lines, in order, and the same bodies (the Date and ids aside)', async () => {
    const port = Number(new URL(host.url).port)
    const ask = async (path: string, body: unknown, split: boolean): Promise<Wire> => {
      const reader = await open(port)
      const bytes = post(port, JSON.stringify(body), { Authorization: `Bearer ${host.token}` }, path)
      // Sent whole, the front serves it; with its last byte a moment later, Node's server does.
      reader.socket.write(split ? bytes.slice(0, -1) : bytes)
      if (split) setTimeout(() => reader.socket.write(bytes.slice(-1)), 50)
      const answer = (await reader.next())!
      reader.socket.destroy()
      return {
        ...answer,
        lines: answer.lines.filter((line) => !/^(date|content-length):/i.test(line)),
        body: answer.body.replace(/"[0-9a-f]{8}-[0-9a-f-]{27}"/g, '"ID"').replace(/"(job_id|lease_token|attempt_id|message_id)":"[^"]*"/g, '"$1":"X"'),
      }
    }
    for (const split of [false, true]) {
      const submit = { job_type: 'generic', cost_units: 1, queue: `front-${split}` }
      const submitted = await ask(`${QUEUE}/jobs/submit`, submit, split)
      const claimed = await ask(`${WORKER_PREFIX}/claim`, { worker_id: 'w', streams: [`front-${split}`], max_wait_ms: 0 }, split)
      const refused = await ask(`${QUEUE}/jobs/submit`, { job_type: 'generic', cost_units: 0 }, split)
      const answers = [submitted, claimed, refused].map((answer) => ({ ...answer, body: answer.body.replaceAll(`front-${split}`, 'Q') }))
      expect(answers.map((answer) => answer.status)).toEqual([201, 200, 400])
      if (split) expect(answers).toEqual(viaFront)
      else viaFront = answers
    }
  })
  let viaFront: unknown
})
