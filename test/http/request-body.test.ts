/**
 * Reading a JSON request body (src-main/http/body.ts readJson) over a real socket, however the
 * body arrives: with its headers in one packet (read at once), in pieces, chunked, pipelined
 * behind another request, or not at all. Each answer is what the route read, or the error.
 */
import Koa from 'koa'
import { createServer } from 'node:http'
import { connect } from 'node:net'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { prefersMinimal, readDeclaredJson, readJson } from '../../src-main/http/body'
import { errorMiddleware, errorReplies } from '../../src-main/http/errors'
import { HttpError } from '../../src-main/http/http-error'
import { LogLimiter } from '../../src-shared/log-limiter'

const LIMIT = 4096

let port: number
let close: () => Promise<void>

beforeAll(async () => {
  const app = new Koa()
  const log = () => {}
  app.use(errorMiddleware(errorReplies(log, new LogLimiter(log, Date.now), () => '/nowhere')))
  app.use(async (ctx) => {
    ctx.body = { read: await readJson(ctx, LIMIT) }
  })
  const server = app.listen(0, '127.0.0.1')
  await new Promise((resolve) => server.once('listening', resolve))
  port = (server.address() as AddressInfo).port
  close = () => new Promise((resolve) => server.close(() => resolve()))
})
afterAll(() => close())

interface Answer {
  status: number
  body: unknown
}

/** Sends `parts` on one connection, each after the server has had a moment to read the one before; resolves with the `count` answers. */
function exchange(parts: string[], count = 1): Promise<Answer[]> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1')
    let received = Buffer.alloc(0)
    const answers = (): Answer[] | null => {
      const out: Answer[] = []
      let rest = received
      while (out.length < count) {
        const end = rest.indexOf('\r\n\r\n')
        if (end === -1) return null
        const head = rest.subarray(0, end).toString('latin1')
        const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0)
        if (rest.length < end + 4 + length) return null
        out.push({ status: Number(head.split(' ')[1]), body: JSON.parse(rest.subarray(end + 4, end + 4 + length).toString('utf8')) })
        rest = rest.subarray(end + 4 + length)
      }
      return out
    }
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk])
      const done = answers()
      if (done) {
        socket.destroy()
        resolve(done)
      }
    })
    socket.on('error', reject)
    socket.on('close', () => reject(new Error(`the connection closed after ${JSON.stringify(received.toString('latin1'))}`)))
    void (async () => {
      for (const [i, part] of parts.entries()) {
        // A pause kept on purpose: nothing shows the server has read a part, and the pause only makes a
        // separate read likely (the answer must be the same either way).
        if (i > 0) await new Promise((r) => setTimeout(r, 20))
        socket.write(part, 'latin1')
      }
    })()
  })
}

const post = (body: string, headers: Record<string, string> = {}): string => {
  const all = { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), ...headers }
  return `POST / HTTP/1.1\r\nHost: x\r\n${Object.entries(all)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}\r\n${body}`
}

const chunked = (pieces: string[]): string =>
  `POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${pieces
    .map((p) => `${Buffer.byteLength(p).toString(16)}\r\n${p}\r\n`)
    .join('')}0\r\n\r\n`

describe('reading a JSON body', () => {
  test('a body sent with its headers is read', async () => {
    expect(await exchange([post('{"worker_id":"w1","streams":["default"]}')])).toEqual([{ status: 200, body: { read: { worker_id: 'w1', streams: ['default'] } } }])
  })

  test('a body that arrives in pieces after its headers is read whole', async () => {
    // Cut inside a two-byte character, too.
    const body = JSON.stringify({ job_type: 'x', payload: { text: 'é'.repeat(100) } })
    const bytes = Buffer.from(post(body), 'utf8').toString('latin1')
    const cut = bytes.indexOf('\r\n\r\n') + 4
    const pieces = [bytes.slice(0, cut), bytes.slice(cut, cut + 40), bytes.slice(cut + 40)]
    expect(Buffer.from(pieces[1]!, 'latin1').toString('utf8')).toContain('\uFFFD')
    expect(await exchange(pieces)).toEqual([{ status: 200, body: { read: JSON.parse(body) } }])
    // The headers with the start of the body, then the rest.
    expect(await exchange([bytes.slice(0, cut + 40), bytes.slice(cut + 40)])).toEqual([{ status: 200, body: { read: JSON.parse(body) } }])
  })

  test('a chunked body is read to its last chunk, in one packet or many', async () => {
    expect(await exchange([chunked(['{"a":', '[1,2,', '3]}'])])).toEqual([{ status: 200, body: { read: { a: [1, 2, 3] } } }])
    const whole = chunked(['{"b":', 'true}'])
    expect(await exchange([whole.slice(0, whole.indexOf('{')), whole.slice(whole.indexOf('{'))])).toEqual([{ status: 200, body: { read: { b: true } } }])
  })

  test('requests pipelined on one connection are each read with their own body', async () => {
    const answers = await exchange([post('{"n":1}') + post('{"n":2}') + post('', { 'content-length': '0' }) + post('{"n":4}')], 4)
    expect(answers).toEqual([
      { status: 200, body: { read: { n: 1 } } },
      { status: 200, body: { read: { n: 2 } } },
      { status: 200, body: { read: {} } },
      { status: 200, body: { read: { n: 4 } } },
    ])
  })

  test('an empty body, or one of white space only, reads as {}', async () => {
    expect(await exchange([post('')])).toEqual([{ status: 200, body: { read: {} } }])
    expect(await exchange([post(' \r\n ')])).toEqual([{ status: 200, body: { read: {} } }])
  })

  test('JSON is application/json in any case and with parameters; any other type is 415', async () => {
    for (const type of ['application/json', 'application/json; charset=utf-8', 'Application/JSON']) {
      expect(await exchange([post('{"ok":1}', { 'content-type': type })]), type).toEqual([{ status: 200, body: { read: { ok: 1 } } }])
    }
    for (const type of ['text/plain', 'application/jsonx', 'application/x-www-form-urlencoded']) {
      const [answer] = await exchange([post('{"ok":1}', { 'content-type': type })])
      expect(answer, type).toMatchObject({ status: 415, body: { code: 'unsupported_media_type' } })
    }
  })

  test('a compressed body (Content-Encoding other than identity) is 415, not read as JSON as it stands', async () => {
    for (const encoding of ['gzip', 'br', 'deflate']) {
      const [answer] = await exchange([post('{"ok":1}', { 'content-encoding': encoding })])
      expect(answer, encoding).toMatchObject({ status: 415, body: { code: 'unsupported_media_type', detail: expect.stringContaining(`Content-Encoding ${encoding}`) } })
    }
    expect(await exchange([post('{"ok":1}', { 'content-encoding': 'identity' })])).toEqual([{ status: 200, body: { read: { ok: 1 } } }])
  })

  test('a body over the limit is 413, declared or chunked', async () => {
    const big = JSON.stringify({ x: 'y'.repeat(LIMIT) })
    expect((await exchange([post(big)]))[0]).toMatchObject({ status: 413, body: { code: 'payload_too_large' } })
    expect((await exchange([chunked([big.slice(0, 600), big.slice(600)])]))[0]).toMatchObject({ status: 413, body: { code: 'payload_too_large' } })
  })

  test('malformed JSON is 400 invalid_json; JSON nested too deep is 400 invalid_request', async () => {
    expect((await exchange([post('{"a":')]))[0]).toMatchObject({ status: 400, body: { code: 'invalid_json' } })
    expect((await exchange([post(`${'['.repeat(513)}${']'.repeat(513)}`)]))[0]).toMatchObject({ status: 400, body: { code: 'invalid_request' } })
    expect(await exchange([post(`${'['.repeat(512)}${']'.repeat(512)}`)])).toHaveLength(1)
  })
})

/** Sends a request declaring a body of 100 bytes, writes 31 of them, and hangs up. */
function hangUpMidBody(serverPort: number): void {
  const socket = connect(serverPort, '127.0.0.1')
  socket.on('error', () => {})
  const part = '{"job_type":"mix","cost_units":'
  expect(part).toHaveLength(31)
  socket.write(`POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n${part}`, () => {
    setTimeout(() => socket.destroy(), 20)
  })
}

describe('a client that hangs up before its whole body came', () => {
  test('is no internal error: Koa logs nothing, and the route never runs', async () => {
    const lines: string[] = []
    const log = (line: string) => void lines.push(line)
    let ran = false
    let settle!: () => void
    const settled = new Promise<void>((resolve) => (settle = resolve))
    const app = new Koa()
    app.silent = true // as the host's: its errors are the error middleware's to log
    app.use(async (_ctx, next) => {
      try {
        await next()
      } finally {
        settle()
      }
    })
    app.use(errorMiddleware(errorReplies(log, new LogLimiter(log, Date.now), () => '/nowhere')))
    app.use(async (ctx) => {
      await readJson(ctx, LIMIT)
      ran = true
    })
    const server = app.listen(0, '127.0.0.1')
    await new Promise((resolve) => server.once('listening', resolve))
    try {
      hangUpMidBody((server.address() as AddressInfo).port)
      await settled
      expect(ran).toBe(false)
      expect(lines).toEqual([])
    } finally {
      await new Promise((resolve) => server.close(resolve))
    }
  })

  test("the lane's reader refuses it as 400 bad_request, not with a fault", async () => {
    let refusal!: (error: unknown) => void
    const refused = new Promise<unknown>((resolve) => (refusal = resolve))
    const server = createServer((req) => {
      readDeclaredJson(req, Number(req.headers['content-length'])).then(() => refusal(new Error('the body was read')), refusal)
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    try {
      hangUpMidBody((server.address() as AddressInfo).port)
      const error = await refused
      expect(error).toBeInstanceOf(HttpError)
      expect(error).toMatchObject({ code: 'bad_request', status: 400 })
    } finally {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    }
  })
})

describe("a request's Prefer header (RFC 7240), as prefersMinimal reads it", () => {
  test('return=minimal is found among other preferences, in any case, with parameters; anything else is not it', () => {
    for (const header of ['return=minimal', 'RETURN=Minimal', 'respond-async, return=minimal', ' return = "minimal" ; x=1', 'wait=5,return=minimal']) {
      expect(prefersMinimal(header), header).toBe(true)
    }
    for (const header of [undefined, '', 'return=representation', 'return=minimalist', 'x-return=minimal', 'handling=strict']) {
      expect(prefersMinimal(header), String(header)).toBe(false)
    }
  })
})
