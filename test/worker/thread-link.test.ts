/**
 * The handler threads' own links to the host (src-shared/thread-link.ts): the host's end
 * (ThreadLinks) with plain sockets standing in for the threads, and the line reader both ends use.
 */
import { statSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import { dirname } from 'node:path'
import { afterEach, expect, test } from 'vitest'
import { ThreadLinks } from '../../src-main/pool/thread-links'
import { lineReader } from '../../src-shared/line-reader'
import { LINK_PATH_ENV, LINK_TOKEN_ENV } from '../../src-shared/thread-link'
import { Mailbox } from '../../src-worker/mailbox'
import { until } from './support'

const opened: { links: ThreadLinks[]; sockets: Socket[] } = { links: [], sockets: [] }
afterEach(() => {
  for (const socket of opened.sockets.splice(0)) socket.destroy()
  for (const links of opened.links.splice(0)) links.close()
})

function aServer(helloTimeoutMs?: number): ThreadLinks {
  const links = new ThreadLinks(() => {}, helloTimeoutMs)
  opened.links.push(links)
  return links
}

/** A stand-in for a handler thread: connects, says `hello`, and keeps the lines it reads. */
async function aThread(path: string, hello: string) {
  const socket = connect(path)
  opened.sockets.push(socket)
  const lines: string[] = []
  let closed = false
  socket.setEncoding('utf8')
  const read = lineReader((line) => lines.push(line))
  socket.on('data', (chunk: string) => read.push(chunk))
  socket.on('error', () => {})
  socket.on('close', () => (closed = true))
  await new Promise((resolve) => socket.once('connect', resolve))
  socket.write(hello)
  return { lines, socket, closed: () => closed }
}

const helloOf = (worker_id: string, thread: number, token: string) => `${JSON.stringify({ worker_id, thread, token })}\n`

test('a thread that shows its worker’s token is linked: answers for it go to it, one JSON line each, until its worker is forgotten', async () => {
  const links = aServer()
  const env = links.envFor('local-1.1')
  const path = env[LINK_PATH_ENV]!
  expect(links.deliver('local-1.1', 0, { id: 1 })).toBe(false) // nothing linked yet
  const thread = await aThread(path, helloOf('local-1.1', 0, env[LINK_TOKEN_ENV]!))
  await until(() => links.deliver('local-1.1', 0, { id: 2, result: { jobs: [{ job_id: 'j' }] } }), 2000, 'the thread linked')
  expect(links.deliver('local-1.1', 1, { id: 3 })).toBe(false) // another thread of the worker is not linked
  expect(links.deliver('local-2.1', 0, { id: 4 })).toBe(false) // nor is another worker's
  await until(() => thread.lines.length >= 1, 2000, 'the answer read')
  expect(thread.lines.map((l) => JSON.parse(l))).toEqual([{ id: 2, result: { jobs: [{ job_id: 'j' }] } }])
  expect(links.delivered).toBe(1)

  links.forget('local-1.1')
  await until(() => thread.closed(), 2000, 'the link closed')
  expect(links.deliver('local-1.1', 0, { id: 5 })).toBe(false)
})

test('a connection that does not show its own worker’s token, or sends more than its hello, is closed and never written to', async () => {
  const links = aServer()
  const mine = links.envFor('local-1.1')
  const theirs = links.envFor('local-2.1')
  const path = mine[LINK_PATH_ENV]!
  const refused = [
    helloOf('local-1.1', 0, theirs[LINK_TOKEN_ENV]!), // another worker's token
    helloOf('local-1.1', 0, mine[LINK_TOKEN_ENV]!.replace(/.$/, (c) => (c === '0' ? '1' : '0'))),
    helloOf('local-3.1', 0, mine[LINK_TOKEN_ENV]!), // a worker the host never started
    helloOf('local-1.1', -1, mine[LINK_TOKEN_ENV]!),
    'not json\n',
    `{"worker_id":"local-1.1","thread":0,"token":"${'0'.repeat(2000)}`, // a hello that never ends
  ]
  for (const hello of refused) {
    const thread = await aThread(path, hello)
    await until(() => thread.closed(), 2000, `closed after ${hello.slice(0, 60)}`)
    expect(links.deliver('local-1.1', 0, { id: 1 })).toBe(false)
  }

  const chatty = await aThread(path, helloOf('local-1.1', 0, mine[LINK_TOKEN_ENV]!) + '{"more":true}\n')
  await until(() => chatty.closed(), 2000, 'closed after saying more than its hello')
  expect(links.deliver('local-1.1', 0, { id: 2 })).toBe(false)
  expect(links.delivered).toBe(0)
})

test('a connection that says nothing is closed once the hello’s time is up', async () => {
  const links = aServer(100)
  const silent = await aThread(links.envFor('local-1.1')[LINK_PATH_ENV]!, '')
  await until(() => silent.closed(), 2000, 'closed after 100 ms of silence')
})

test.skipIf(process.platform === 'win32')('the links listen in a folder only the host’s user can open, removed when they close', async () => {
  const links = aServer()
  const folder = dirname(links.envFor('local-1.1')[LINK_PATH_ENV]!)
  expect(statSync(folder).mode & 0o777).toBe(0o700)
  links.close()
  expect(() => statSync(folder)).toThrow(/ENOENT/)
  expect(links.envFor('local-1.1')).toEqual({}) // closed: a worker started now gets no link
})

test('a mailbox hands each answer left in it to the other side once, whole, with its run; one too long for it is refused', () => {
  const thread = new Mailbox(new SharedArrayBuffer(12 + 64))
  const runtime = new Mailbox(thread.buffer) // the other thread's view of the same memory
  expect(runtime.take()).toBeNull()
  const answer = JSON.stringify({ type: 'response', id: 7, result: { jobs: [{ job_id: 'é' }] } })
  expect(thread.put(answer, -1)).toBe(true)
  expect(runtime.take()).toEqual({ text: answer, run: -1 })
  expect(runtime.take()).toBeNull()
  expect(thread.put('{"id":8}', -2)).toBe(true)
  expect(runtime.take()).toEqual({ text: '{"id":8}', run: -2 })
  expect(thread.put(`{"payload":"${'x'.repeat(64)}"}`, -3)).toBe(false)
  expect(runtime.take()).toBeNull()
})

test('the line reader gives whole lines however the text is cut, the last one at the end, and stops at a line longer than its limit', () => {
  const lines: string[] = []
  const read = lineReader((line) => lines.push(line), 10)
  expect(read.push('{"a"')).toBe(true)
  expect(read.push(':1}\n{"b":2}\n{"c"')).toBe(true)
  expect(read.push(':3}\n')).toBe(true)
  expect(lines).toEqual(['{"a":1}', '{"b":2}', '{"c":3}'])
  read.push('last')
  read.end()
  expect(lines).toEqual(['{"a":1}', '{"b":2}', '{"c":3}', 'last'])
  expect(read.push('0123456789ab')).toBe(false)
  expect(read.push('\n')).toBe(false)
  read.end()
  expect(lines).toHaveLength(4)
})
