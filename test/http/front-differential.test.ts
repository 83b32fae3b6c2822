/**
 * The front against Node alone, differentially: the same bytes, in the same pieces at the same
 * moments, sent to a Node server with the front (src-main/http/front.ts) before it and to the
 * same Node server without it, must draw the same answers — the same status lines, header
 * lines and bodies, in the same order, and the connection closed or kept alike. The requests
 * are the lane's shape, mutated the ways a client, a proxy or an attacker might send them
 * (another casing, a header twice, lengths that lie, both framings, line endings, folded
 * headers, requests sent ahead, pieces split anywhere): where the front serves a request it must
 * answer exactly what Node and the lane would, and where it does not it must leave every byte
 * to Node. Bounded in count (FUZZ_RUNS, default 60).
 */
import fc from 'fast-check'
import { createServer, type Server } from 'node:http'
import { type AddressInfo, connect } from 'node:net'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { attachFront } from '../../src-main/http/front'
import { ECHO_PATH, echoLane } from './echo-lane'

const RUNS = Math.min(Number(process.env.FUZZ_RUNS ?? 60), 300)
const SEED = Number(process.env.FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31))
const TOKEN = 'k'.repeat(32)
const LIMIT = 256
const KEEP_ALIVE_MS = 2_000

let withFront: Server
let nodeAlone: Server
const ports = { front: 0, node: 0 }

/** A Node server answering through the echo lane, and 404 `node` for anything else. */
function server(portOf: () => number): Server {
  const { lane } = echoLane(TOKEN, LIMIT, portOf)
  return createServer({ keepAliveTimeout: KEEP_ALIVE_MS }, (req, res) => {
    if (lane(req, res)) return
    req.resume()
    res.writeHead(404, { 'content-type': 'text/plain', 'content-length': '4' }).end('node')
  })
}

beforeAll(async () => {
  // Both servers take requests for the same Host: the bytes sent to each are the same.
  withFront = server(() => ports.front)
  nodeAlone = server(() => ports.front)
  attachFront(withFront, { lane: echoLane(TOKEN, LIMIT, () => ports.front).lane, bodyLimitBytes: LIMIT, serving: () => true, keepAliveTimeoutMs: KEEP_ALIVE_MS })
  for (const [name, s] of [['front', withFront], ['node', nodeAlone]] as const) {
    await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve))
    ports[name] = (s.address() as AddressInfo).port
  }
})
afterAll(async () => {
  for (const s of [withFront, nodeAlone]) {
    s.closeAllConnections()
    await new Promise<void>((resolve) => s.close(() => resolve()))
  }
})

/** Sends `pieces` (with `gapMs` between them) and reads until the connection closes or stays quiet for `quietMs`. */
function exchange(port: number, pieces: string[], gapMs: number, quietMs = 400): Promise<{ bytes: string; closed: boolean }> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
    let bytes = ''
    let quiet: NodeJS.Timeout | undefined
    const done = (closed: boolean) => {
      clearTimeout(quiet)
      socket.destroy()
      resolve({ bytes, closed })
    }
    const wait = () => {
      clearTimeout(quiet)
      quiet = setTimeout(() => done(false), quietMs)
    }
    socket.setEncoding('latin1')
    socket.on('data', (chunk: string) => {
      bytes += chunk
      wait()
    })
    socket.on('error', () => {})
    socket.on('close', () => done(true))
    socket.on('connect', async () => {
      for (const [i, piece] of pieces.entries()) {
        if (i > 0) await new Promise((r) => setTimeout(r, gapMs))
        if (!socket.destroyed) socket.write(Buffer.from(piece, 'latin1'))
      }
      wait()
    })
  })
}

/** What must match: the bytes with each Date header's value blanked. */
const comparable = (bytes: string) => bytes.replace(/\r\nDate: [^\r]*/g, '\r\nDate: *')

/** Node's answer to bytes its parser refuses, after which it closes the connection. */
const REFUSED = 'HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n'

/**
 * The two servers' bytes alike. One exception is Node's own: when Node reads several requests
 * in one read and one of them ends the connection (its parser refuses it, or it asks to close),
 * how many answers leave before the connection closes depends on how the read reached its
 * parser: natively, where Node runs the promise jobs between requests, or — after the front's
 * hand-off — through the socket's stream, where it does not. Then, both sides closed, one
 * side's answers (before a parser's 400) begin the other's.
 */
function expectAlike(front: { bytes: string; closed: boolean }, node: { bytes: string; closed: boolean }): void {
  const [a, b] = [comparable(front.bytes), comparable(node.bytes)]
  if (front.closed && node.closed && a !== b) {
    const [x, y] = [a.replace(new RegExp(`${REFUSED}$`), ''), b.replace(new RegExp(`${REFUSED}$`), '')]
    expect(x.startsWith(y) || y.startsWith(x), `${JSON.stringify(a)} against ${JSON.stringify(b)}`).toBe(true)
  } else {
    expect(a).toBe(b)
    expect(front.closed).toBe(node.closed)
  }
}

/** A request's parts; {@link request} writes them out. */
interface Parts {
  method: string
  path: string
  version: string
  body: string
  lengthOff: number | 'missing' | 'signed' | 'twice' | 'twice-different'
  casing: 'as-is' | 'lower' | 'upper'
  spaces: string
  type: string
  token: string
  host: 'ours' | 'evil.example' | 'missing' | 'twice'
  extra: [string, string][]
  lineEnd: string
  fold: boolean
}

/** One way to bend a request of the lane's shape: the parts it changes. */
const bend: fc.Arbitrary<Partial<Parts>> = fc.oneof(
  fc.constantFrom('post', 'PUT', 'GET').map((method) => ({ method })),
  fc.constantFrom(`${ECHO_PATH}?a=1`, `${ECHO_PATH}/`, ECHO_PATH.toUpperCase(), '/elsewhere').map((path) => ({ path })),
  fc.constantFrom('HTTP/1.0', 'HTTP/2.0').map((version) => ({ version })),
  fc.constantFrom('{"say":', '{"say":7}', `{"say":"${'x'.repeat(LIMIT)}"}`, '', '{}').map((body) => ({ body })),
  { weight: 3, arbitrary: fc.constantFrom<Parts['lengthOff']>(-1, 1, 'missing', 'signed', 'twice', 'twice-different').map((lengthOff) => ({ lengthOff })) },
  fc.constantFrom<Parts['casing']>('lower', 'upper').map((casing) => ({ casing })),
  fc.constantFrom(' ', '\t', '  ').map((spaces) => ({ spaces })),
  fc.constantFrom('application/json; charset=utf-8', 'text/plain', 'APPLICATION/JSON').map((type) => ({ type })),
  fc.constant({ token: 'wrong' }),
  fc.constantFrom<Parts['host']>('evil.example', 'missing', 'twice').map((host) => ({ host })),
  {
    weight: 6,
    arbitrary: fc
      .constantFrom<[string, string][]>(
      [['Connection', 'close']],
      [['Connection', 'keep-alive']],
      [['Connection', 'Keep-Alive']],
      [['Connection', 'keep-alive, x-other']],
      [
        ['Connection', 'upgrade'],
        ['Upgrade', 'websocket'],
      ],
      [['Transfer-Encoding', 'chunked']],
      [['Transfer-Encoding', 'identity']],
      [['Expect', '100-continue']],
      [['X-Name', 'caf\u00e9']],
      [['X-Nul', 'a\u0000b']],
      [['Origin', 'http://evil.example']],
        [['X-Empty', '']],
      )
      .map((extra) => ({ extra })),
  },
  fc.constant({ lineEnd: '\n' }),
  fc.constant({ fold: true }),
)

/** One request: the lane's shape, bent at most twice. */
const request = fc.tuple(fc.string({ maxLength: 20 }), fc.array(bend, { maxLength: 2 })).map(([say, bends]) => {
  const r: Parts = {
    method: 'POST',
    path: ECHO_PATH,
    version: 'HTTP/1.1',
    body: JSON.stringify({ say }),
    lengthOff: 0,
    casing: 'as-is',
    spaces: '',
    type: 'application/json',
    token: TOKEN,
    host: 'ours',
    extra: [],
    lineEnd: '\r\n',
    fold: false,
    ...Object.assign({}, ...bends),
  }
  const name = (n: string) => (r.casing === 'lower' ? n.toLowerCase() : r.casing === 'upper' ? n.toUpperCase() : n)
  const length = Buffer.byteLength(r.body, 'latin1')
  const host = '127.0.0.1:PORT'
  const lines: [string, string][] = []
  if (r.host !== 'missing') lines.push(['Host', r.host === 'evil.example' ? 'evil.example' : host])
  if (r.host === 'twice') lines.push(['Host', host])
  lines.push(['Authorization', `Bearer ${r.token}`], ['Content-Type', r.type])
  if (r.lengthOff === 'signed') lines.push(['Content-Length', `+${length}`])
  else if (r.lengthOff === 'twice') lines.push(['Content-Length', String(length)], ['Content-Length', String(length)])
  else if (r.lengthOff === 'twice-different') lines.push(['Content-Length', String(length)], ['Content-Length', String(length + 1)])
  else if (r.lengthOff !== 'missing') lines.push(['Content-Length', String(Math.max(0, length + r.lengthOff))])
  lines.push(...r.extra)
  const head = lines.map(([n, v], i) => `${name(n)}:${r.spaces}${v}${r.spaces}${r.fold && i === 2 ? '\r\n folded' : ''}`).join(r.lineEnd)
  return `${r.method} ${r.path} ${r.version}\r\n${head}\r\n\r\n${r.body}`
})

test('the same bytes draw the same answers from a Node server with the front and without it', async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(request, { minLength: 1, maxLength: 3 }), fc.array(fc.nat(), { maxLength: 2 }), fc.constantFrom(0, 5, 20), async (requests, cuts, gapMs) => {
      const bytes = requests.join('').replaceAll('127.0.0.1:PORT', `127.0.0.1:${ports.front}`)
      const at = [...new Set(cuts.map((cut) => cut % bytes.length))].filter((cut) => cut > 0).sort((a, b) => a - b)
      const pieces = [0, ...at].map((start, i) => bytes.slice(start, at[i] ?? bytes.length))
      const [front, node] = await Promise.all([exchange(ports.front, pieces, gapMs), exchange(ports.node, pieces, gapMs)])
      expectAlike(front, node)
    }),
    { numRuns: RUNS, seed: SEED },
  )
}, RUNS * 1_000 + 30_000) // a run takes under half a second
