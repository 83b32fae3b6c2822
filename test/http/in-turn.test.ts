/**
 * Requests sent ahead on a connection (pipelined) are served in turn (src-main/http/in-turn.ts):
 * each runs once the answers before it have gone, and while one waits its connection is not
 * read, so a client that reads none of its answers makes the host hold neither its answers nor
 * more of its requests than a read's.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { connect, type AddressInfo } from 'node:net'
import { afterEach, describe, expect, test } from 'vitest'
import { servedInTurn } from '../../src-main/http/in-turn'
import { startTestHost } from '../helpers/host'
import { until } from '../helpers/until'

const cleanups: (() => Promise<unknown>)[] = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup()
})

/** A server whose requests wait in `held` until the test answers them; `parsed` counts the requests Node read. */
async function heldServer() {
  const held: [IncomingMessage, ServerResponse][] = []
  const server = createServer(servedInTurn((req, res) => void held.push([req, res])))
  let parsed = 0
  server.on('request', () => (parsed += 1))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  cleanups.push(() => {
    server.closeAllConnections()
    return new Promise((resolve) => server.close(resolve))
  })
  return { held, parsed: () => parsed, port: (server.address() as AddressInfo).port }
}

describe('requests sent ahead are served in turn', () => {
  test('each runs only once the answer before it has gone, and the connection is not read while one waits', async () => {
    const { held, parsed, port } = await heldServer()
    const socket = connect(port, '127.0.0.1')
    let received = ''
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')))
    socket.write(Array.from({ length: 100 }, (_, i) => `GET /${i} HTTP/1.1\r\nHost: x\r\n\r\n`).join(''))
    await until(() => parsed() > 1, 3000, 'requests sent ahead, parsed')
    expect(held).toHaveLength(1)
    expect(held[0]![1].socket!.isPaused()).toBe(true)
    for (let i = 0; i < 100; i++) {
      // (Exactly i + 1: never the one behind it before this one is answered.)
      await until(() => held.length === i + 1, 3000, `request ${i} run`)
      const [req, res] = held[i]!
      res.end(req.url)
    }
    await until(() => (received.match(/HTTP\/1\.1 200/g) ?? []).length === 100, 3000, 'every answer')
    expect([...received.matchAll(/\r\n\r\n(\/\d+)/g)].map(([, url]) => url)).toEqual(Array.from({ length: 100 }, (_, i) => `/${i}`))
    socket.destroy()
  })

  test('a client that sends ahead and reads no answer has one request run and no more of its sending read than the read in hand', async () => {
    const { held, parsed, port } = await heldServer()
    const socket = connect(port, '127.0.0.1')
    const request = `GET /asset HTTP/1.1\r\nHost: x\r\n\r\n`.repeat(500)
    const flood = setInterval(() => socket.write(request), 5)
    cleanups.push(async () => clearInterval(flood))
    await until(() => parsed() > 1, 3000, 'requests sent ahead, parsed')
    // A large answer the client never reads: Node would resume the connection as each answer ended.
    held[0]![1].end(Buffer.alloc(64 * 1024 * 1024))
    const afterFirst = parsed()
    await until(() => socket.writableLength > 1024 * 1024, 5000, "the client's own sending to back up")
    expect(held).toHaveLength(1)
    expect(parsed()).toBe(afterFirst)
    clearInterval(flood)
    socket.destroy()
  })
})

test("the host serves requests sent ahead in turn: every answer comes, in order", async () => {
  const host = await startTestHost({ workers: 0 })
  cleanups.push(() => host.dispose())
  const { port } = new URL(host.url)
  const socket = connect(Number(port), '127.0.0.1')
  let received = ''
  socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')))
  const paths = ['/api/health', '/api/nowhere', '/api/health', '/api/jobs']
  socket.write(paths.map((path) => `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`).join(''))
  await until(() => (received.match(/HTTP\/1\.1 \d+/g) ?? []).length === paths.length, 5000, 'every answer')
  expect(received.match(/HTTP\/1\.1 \d+/g)).toEqual(['HTTP/1.1 200', 'HTTP/1.1 401', 'HTTP/1.1 200', 'HTTP/1.1 401'])
  socket.destroy()
})
