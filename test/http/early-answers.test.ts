/**
 * An answer given before the request's body has been read (a body over the limit) must reach a
 * client that writes its whole body before it reads anything, as Node's own client does: the
 * host reads and throws away the rest of the body (within bounds), answers, then closes.
 */
import { connect } from 'node:net'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { startTestHost, type TestHost } from '../helpers/host'

const LIMIT = 64 * 1024
const HUGE = 20 * 1024 * 1024

let host: TestHost
beforeAll(async () => {
  host = await startTestHost({ workers: 0, bodyLimitBytes: LIMIT })
})
afterAll(() => host.dispose())

/** Writes `head` and `body` on a fresh connection, all of it, and only then reads the answer to its end. */
function writeAllThenRead(head: string, body: Buffer): Promise<{ head: string; body: string }> {
  const { port } = new URL(host.url)
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1')
    socket.pause()
    socket.on('error', reject)
    socket.write(head, 'latin1')
    socket.write(body, (error) => {
      if (error) return reject(error)
      const chunks: Buffer[] = []
      socket.on('data', (chunk: Buffer) => chunks.push(chunk))
      socket.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8')
        const split = text.indexOf('\r\n\r\n')
        resolve({ head: text.slice(0, split), body: text.slice(split + 4) })
      })
      socket.resume()
    })
  })
}

const headers = (extra: string) =>
  `POST /api/scheduler/jobs/submit HTTP/1.1\r\nHost: ${new URL(host.url).host}\r\nAuthorization: Bearer ${host.token}\r\nContent-Type: application/json\r\n${extra}\r\n`

test('a body over the limit, written whole before the client reads: the client reads the 413, then the connection closes', async () => {
  const body = Buffer.alloc(HUGE, 0x20)
  const answer = await writeAllThenRead(headers(`Content-Length: ${body.length}\r\n`), body)
  expect(answer.head).toMatch(/^HTTP\/1\.1 413 /)
  expect(answer.head).toMatch(/\r\nConnection: close\r\n/i)
  expect(JSON.parse(answer.body)).toMatchObject({ code: 'payload_too_large' })
})

test('a chunked body that runs over the limit, written whole before the client reads: the client reads the 413', async () => {
  const chunk = Buffer.alloc(1024 * 1024, 0x20)
  const parts: Buffer[] = []
  for (let i = 0; i < 20; i++) parts.push(Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n'))
  parts.push(Buffer.from('0\r\n\r\n'))
  const answer = await writeAllThenRead(headers('Transfer-Encoding: chunked\r\n'), Buffer.concat(parts))
  expect(answer.head).toMatch(/^HTTP\/1\.1 413 /)
  expect(JSON.parse(answer.body)).toMatchObject({ code: 'payload_too_large' })
})
