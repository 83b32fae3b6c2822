/**
 * Out of file descriptors, a host refuses connections rather than drops them in silence: it
 * takes as many as its limit (`ulimit -n`) leaves room for beside its own and its workers', and
 * says once a minute, naming the limit, that it refuses the others.
 */
import { connect, type Socket } from 'node:net'
import { afterEach, expect, test } from 'vitest'
import { connectionLimit } from '../../src-main/http/connection-limit'
import { startTestHost, type TestHost } from '../helpers/host'
import { until } from '../helpers/until'

let host: TestHost | null = null
const sockets: Socket[] = []
afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy()
  await host?.dispose()
  host = null
})

/** A kept-alive connection that has had an answer (so the host has taken it), or null if the host closed it unanswered. */
function answered(url: URL): Promise<Socket | null> {
  return new Promise((resolve) => {
    const socket = connect(Number(url.port), url.hostname)
    sockets.push(socket)
    socket.on('error', () => {})
    socket.once('data', () => resolve(socket))
    socket.once('close', () => resolve(null))
    socket.write(`GET /api/health HTTP/1.1\r\nHost: ${url.host}\r\nConnection: keep-alive\r\n\r\n`)
  })
}

test('the connections a host takes leave room for its own descriptors and its workers\'', () => {
  expect(connectionLimit(256, 2)).toBe(192)
  expect(connectionLimit(20_000, 8)).toBe(19_888)
  expect(connectionLimit(64, 4)).toBe(16) // however low the limit, a few
  expect(connectionLimit(null, 2)).toBeNull()
})

test('past the connections its descriptors allow, a host refuses the next ones and says so once, naming ulimit -n', async () => {
  const lines: string[] = []
  host = await startTestHost({ workers: 0 }, { openFiles: 64, log: (line) => lines.push(line) })
  const url = new URL(host.url)
  const limit = connectionLimit(64, 0)!
  for (let i = 0; i < limit; i++) expect(await answered(url)).not.toBeNull()
  expect(await answered(url)).toBeNull()
  expect(await answered(url)).toBeNull()
  const said = lines.filter((line) => line.startsWith('leasehold: refusing connections'))
  expect(said).toEqual([`leasehold: refusing connections: ${limit} are open, as many as the file descriptor limit leaves room for (ulimit -n 64); raise it to serve more at once`])

  // One closes: the next is taken.
  sockets[0]!.destroy()
  await until(async () => (await answered(url)) !== null, 5000, 'a connection taken again')
})
