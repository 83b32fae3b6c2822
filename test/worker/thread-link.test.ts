/**
 * The local workers' links to the host (src-shared/thread-link.ts): the host's end (ThreadLinks)
 * with plain sockets standing in for the driving threads; the thread's end (LinkTransport) with a
 * plain socket server standing in for the host; the job table the driving thread and
 * the runtime share (src-worker/job-table.ts); and the line reader both ends of a link use.
 */
import { statSync } from 'node:fs'
import { mkdtempSync } from 'node:fs'
import { connect, createServer, type Server, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { afterEach, expect, test } from 'vitest'
import { ThreadLinks } from '../../src-main/pool/thread-links'
import { lineReader } from '../../src-shared/line-reader'
import { LINK_PATH_ENV, LINK_TOKEN_ENV } from '../../src-shared/thread-link'
import { JobTable } from '../../src-worker/job-table'
import { LinkTransport } from '../../src-worker/transport-link'
import type { Claim } from '../../src-worker/transport'
import { aClaimOf, until } from './support'

const opened: { links: ThreadLinks[]; sockets: Socket[]; servers: Server[] } = { links: [], sockets: [], servers: [] }
afterEach(() => {
  for (const socket of opened.sockets.splice(0)) socket.destroy()
  for (const server of opened.servers.splice(0)) server.close()
  for (const links of opened.links.splice(0)) links.close()
})

/** A host's end whose answer to each request echoes it, and keeps each request's worker and gone signal. */
function aServer(helloTimeoutMs?: number) {
  const requests: { workerId: string; request: unknown; gone: AbortSignal }[] = []
  const links = new ThreadLinks(
    () => {},
    (workerId, request, gone, reply) => {
      requests.push({ workerId, request, gone })
      reply({ type: 'response', id: (request as { id: number }).id, result: { echo: request } })
    },
    helloTimeoutMs,
  )
  opened.links.push(links)
  return Object.assign(links, { seen: requests })
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

test('a thread that shows its worker’s token is linked: each request it sends is answered over its link, one JSON line each, until its worker is forgotten', async () => {
  const links = aServer()
  const env = links.envFor('local-1.1')
  const thread = await aThread(env[LINK_PATH_ENV]!, helloOf('local-1.1', 0, env[LINK_TOKEN_ENV]!) + '{"id":1,"a":"é"}\n')
  thread.socket.write('{"id":2}\n{"id":')
  thread.socket.write('3}\n')
  await until(() => thread.lines.length >= 3, 2000, 'three answers')
  expect(thread.lines.map((l) => JSON.parse(l))).toEqual([1, 2, 3].map((id) => ({ type: 'response', id, result: { echo: id === 1 ? { id, a: 'é' } : { id } } })))
  expect(links.seen.map((r) => r.workerId)).toEqual(['local-1.1', 'local-1.1', 'local-1.1'])
  expect(links.requests).toBe(3)
  expect(links.seen[0]!.gone.aborted).toBe(false)

  links.forget('local-1.1') // the worker has exited
  await until(() => thread.closed(), 2000, 'the link closed')
  expect(links.seen.every((r) => r.gone.aborted)).toBe(true) // what its requests still wait for ends
})

test('a connection that does not show its own worker’s token, or sends a line that is not JSON, is closed and none of its requests is answered', async () => {
  const links = aServer()
  const mine = links.envFor('local-1.1')
  const theirs = links.envFor('local-2.1')
  const path = mine[LINK_PATH_ENV]!
  const request = '{"id":1}\n'
  const refused = [
    helloOf('local-1.1', 0, theirs[LINK_TOKEN_ENV]!), // another worker's token
    helloOf('local-1.1', 0, mine[LINK_TOKEN_ENV]!.replace(/.$/, (c) => (c === '0' ? '1' : '0'))),
    helloOf('local-3.1', 0, mine[LINK_TOKEN_ENV]!), // a worker the host never started
    helloOf('local-1.1', -1, mine[LINK_TOKEN_ENV]!),
    'not json\n',
    request, // a request where the hello should be
    `{"worker_id":"local-1.1","thread":0,"token":"${'0'.repeat(2000)}`, // a hello that never ends
  ]
  for (const hello of refused) {
    const thread = await aThread(path, hello + request)
    await until(() => thread.closed(), 2000, `closed after ${hello.slice(0, 60)}`)
  }
  const garbled = await aThread(path, helloOf('local-1.1', 0, mine[LINK_TOKEN_ENV]!) + '{"id":\n' + request)
  await until(() => garbled.closed(), 2000, 'closed after a line that is not JSON')
  expect(links.requests).toBe(0)
  expect(garbled.lines).toEqual([])
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

function aClaim(id: string, job_type = 'noop'): Claim {
  // The payload stays with the thread; the runtime reads the rest from the table.
  return aClaimOf(id, { job_type, payload: { big: 'x'.repeat(5000) }, max_runtime_s: 30, lease_ttl_seconds: 30, heartbeat_interval_seconds: 10 })
}

test('a thread reads the host’s answers however their bytes are cut: a character split between two reads, an answer in many pieces, two answers in one', async () => {
  const path = join(mkdtempSync(join(tmpdir(), 'leasehold-link-test-')), 'host.sock')
  const host = { lines: [] as string[], socket: null as Socket | null }
  const server = createServer((socket) => {
    host.socket = socket
    socket.setEncoding('utf8')
    const read = lineReader((line) => host.lines.push(line))
    socket.on('data', (chunk: string) => read.push(chunk))
  })
  opened.servers.push(server)
  await new Promise<void>((resolve) => server.listen(path, resolve))
  const link = await LinkTransport.open({ path, token: 'ab', thread: 0 }, 'local-1.1', () => {})
  expect(link).not.toBeNull()
  const answers = [1, 2, 3].map((i) => link!.exchange({ worker_id: `w-${i}` }))
  await until(() => host.lines.length >= 4, 2000, 'the hello and three requests')
  expect(JSON.parse(host.lines[0]!)).toEqual({ worker_id: 'local-1.1', thread: 0, token: 'ab' })

  const answer = (id: number, note: string) => `${JSON.stringify({ type: 'response', id, result: { heartbeats: [], completed: [], failed: [], jobs: [], claim_waited_ms: 0, note } })}\n`
  const pause = () => new Promise((resolve) => setTimeout(resolve, 20)) // each write its own read
  const first = Buffer.from(answer(1, 'naïve — ✓'))
  const cut = first.indexOf(Buffer.from('✓')) + 1 // inside the three bytes of ✓
  host.socket!.write(first.subarray(0, cut))
  await pause()
  host.socket!.write(first.subarray(cut))
  const second = answer(2, 'x'.repeat(100_000)) // longer than one read
  for (let at = 0; at < second.length; at += 30_000) {
    await pause()
    host.socket!.write(second.slice(at, at + 30_000))
  }
  await pause()
  host.socket!.write(answer(3, 'é') + answer(99, 'an answer to no request'))

  const [one, two, three] = (await Promise.all(answers)) as (Awaited<(typeof answers)[number]> & { note: string })[]
  expect(one!.note).toBe('naïve — ✓')
  expect(two!.note).toBe('x'.repeat(100_000))
  expect(three!.note).toBe('é')
  link!.close()
})

test('a job in the table ends through exactly one side: the thread reports it if it ends before the runtime takes it over, the runtime if after', () => {
  const runtime = new JobTable(3)
  const thread = new JobTable(runtime.buffer as SharedArrayBuffer) // the other thread's view of the same memory
  expect(thread.freeCount()).toBe(3)
  const early = thread.take(aClaim('early'), -1, 1, true)
  const late = thread.take(aClaim('late'), -2, 1, true)
  expect([early, late]).toEqual([
    { entry: 0, kept: true, look: true }, // the first interval seen
    { entry: 1, kept: true, look: false },
  ])
  expect(thread.release(early.entry)).toBe(true) // ended before the runtime looked: the thread reports it
  const taken = runtime.takeOver(1)
  expect(taken).toEqual([{ entry: 1, run: -2, startedAt: expect.any(Number), claim: { ...aClaim('late'), payload: null } }])
  expect(runtime.shortestBeatMs()).toBe(10_000)
  expect(thread.threadHolds(late.entry)).toBe(false)
  expect(thread.release(late.entry)).toBe(false) // ended after: the runtime reports it…
  expect(thread.freeCount()).toBe(2)
  runtime.free(late.entry) // …and frees its entry once it has
  expect(thread.freeCount()).toBe(3)
  expect(runtime.takeOver(1)).toEqual([])
})

test('a runtime whose watch slowed down is told to look by the next job taken, once; a job taken as it slows down keeps its pace', () => {
  const runtime = new JobTable(4)
  const thread = new JobTable(runtime.buffer as SharedArrayBuffer)
  thread.release(thread.take(aClaim('first'), -1, 1, true).entry) // its interval seen: later ones no shorter
  expect(runtime.takes()).toBe(1)
  expect(runtime.slowWatch(0)).toBe(false) // a take it had not seen: its pace kept
  expect(runtime.slowWatch(1)).toBe(true)
  expect(thread.take(aClaim('wakes'), -2, 1, true).look).toBe(true)
  expect(thread.take(aClaim('after'), -3, 1, true).look).toBe(false)
  expect(runtime.takes()).toBe(3)
})

test('a job the thread gives the runtime is the runtime’s from then on; a claim too long for an entry goes to the runtime at once, and a full table takes nothing', () => {
  const runtime = new JobTable(2)
  const thread = new JobTable(runtime.buffer as SharedArrayBuffer)
  const gated = thread.take(aClaim('gated'), -1, 7, true)
  expect(thread.heldBy(7)).toEqual([gated.entry])
  expect(thread.heldBy(8)).toEqual([]) // another driving thread's
  expect(thread.handOver(gated.entry)).toBe(true)
  expect(runtime.takeOver()).toEqual([]) // not the thread's any more
  expect(runtime.read(gated.entry).claim.job_id).toBe('gated')
  expect(thread.release(gated.entry)).toBe(false)
  const long = thread.take(aClaim('long', 't'.repeat(2000)), -2, 7, true)
  expect(long.kept).toBe(false)
  expect(thread.take(aClaim('none'), -3, 7, true)).toEqual({ entry: -1, kept: false, look: false })
  runtime.free(long.entry)
  expect(thread.take(aClaim('runs-elsewhere'), -4, 7, false)).toMatchObject({ entry: long.entry, kept: false })
  expect(thread.heldBy(7)).toEqual([])
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
