import { afterEach, expect, test } from 'vitest'
import { get, type IncomingMessage } from 'node:http'
import { connect } from 'node:net'
import { startTestHost, type TestHost } from '../helpers/host'
import { createScopedToken, revokeScopedToken } from '../../src-main/data-dir/worker-tokens'
import { readEvents, SseReader, type SseMessage } from '../helpers/sse'
import { LAPSED_TICKET_REFUSAL } from '../../src-main/http/guard'

let host: TestHost
afterEach(async () => {
  await host?.dispose()
})

test('the event stream delivers events as they commit', async () => {
  host = await startTestHost()
  const res = await host.call('/api/events/stream')
  expect(res.status).toBe(200)
  expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/)
  const { job } = host.engine.submit({ job_type: 'watched', cost_units: 1 })
  const messages = await readEvents(res, (m) => m.some((e) => e.event === 'JOB_SUBMITTED'))
  const submitted = messages.find((e) => e.event === 'JOB_SUBMITTED')!
  expect(JSON.parse(submitted.data!)).toMatchObject({ type: 'JOB_SUBMITTED', entity_type: 'JOB', job_id: job.id })
  expect(Number(submitted.id)).toBeGreaterThan(0)
})

test('an event stream lasts as long as the token that opened it opens the API: revoking an admin token ends its streams, by the token or by its ticket, and its tickets open nothing', async () => {
  host = await startTestHost()
  const { id, token } = createScopedToken(host.dataDir, 'admin')
  const { ticket } = (await (await host.call('/api/events/ticket', { method: 'POST', token })).json()) as { ticket: string }
  const byTicket = new SseReader(await host.call(`/api/events/stream?ticket=${ticket}`, { token: null }))
  const byToken = new SseReader(await host.call('/api/events/stream', { token }))
  const byHostToken = new SseReader(await host.call('/api/events/stream'))
  const submitted = (n: number) => (m: SseMessage[]) => m.filter((e) => e.event === 'JOB_SUBMITTED').length >= n
  host.engine.submit({ job_type: 'before', cost_units: 1 })
  for (const reader of [byTicket, byToken, byHostToken]) expect(submitted(1)(await reader.until(submitted(1)))).toBe(true)

  revokeScopedToken(host.dataDir, id)
  // The host looks at the tokens every second: both streams end by then, with no event after.
  await byTicket.until(() => false, 3000)
  await byToken.until(() => false, 3000)
  expect([byTicket.endedByHost, byToken.endedByHost]).toEqual([true, true])
  expect((await host.call('/api/events/ticket', { method: 'POST', token })).status).toBe(401)
  expect((await host.call(`/api/events/stream?ticket=${ticket}`, { token: null })).status).toBe(401)

  // The host's own token is not revoked: its stream goes on.
  host.engine.submit({ job_type: 'after', cost_units: 1 })
  expect(submitted(2)(await byHostToken.until(submitted(2)))).toBe(true)
  expect(byHostToken.endedByHost).toBe(false)
  await byHostToken.close()
})

test('Last-Event-ID resumes with the events missed while away, in order', async () => {
  host = await startTestHost()
  const first = host.engine.submit({ job_type: 'a', cost_units: 1 })
  const seen = host.engine.jobEvents(first.job.id).at(-1)!.id
  const missed = [host.engine.submit({ job_type: 'b', cost_units: 1 }).job.id, host.engine.submit({ job_type: 'c', cost_units: 1 }).job.id]
  const res = await host.call('/api/events/stream', { headers: { 'last-event-id': String(seen) } })
  const messages = await readEvents(res, (m) => m.filter((e) => e.event === 'JOB_SUBMITTED').length >= 2)
  expect(messages.filter((e) => e.event === 'JOB_SUBMITTED').map((e) => JSON.parse(e.data!).job_id)).toEqual(missed)
})

test('a resume point that is not an event id is 400 naming where it was given: the Last-Event-ID header or ?last_event_id=', async () => {
  host = await startTestHost()
  const byHeader = await host.call('/api/events/stream', { headers: { 'last-event-id': 'abc' } })
  expect(byHeader.status).toBe(400)
  expect(await byHeader.json()).toEqual({ code: 'invalid_request', detail: 'Last-Event-ID: must be an event id' })
  const byQuery = await host.call('/api/events/stream?last_event_id=abc')
  expect(byQuery.status).toBe(400)
  expect(await byQuery.json()).toEqual({ code: 'invalid_request', detail: 'last_event_id: must be an event id' })
})

test('the stream takes its query as every route does: a resume point given twice, or a key it does not declare (a filter it does not have), is 400 naming it', async () => {
  host = await startTestHost()
  host.engine.submit({ job_type: 'a', cost_units: 1 })
  const twice = await host.call('/api/events/stream?last_event_id=0&last_event_id=0')
  expect(twice.status).toBe(400)
  expect(await twice.json()).toEqual({ code: 'invalid_request', detail: 'last_event_id: given more than once' })
  const filter = await host.call('/api/events/stream?job_id=nope&type=JOB_DONE')
  expect(filter.status).toBe(400)
  expect(await filter.json()).toEqual({ code: 'invalid_request', detail: '(query): Unrecognized keys: "job_id", "type"' })
  // Given once, it resumes.
  const once = await host.call('/api/events/stream?last_event_id=0')
  expect(once.status).toBe(200)
  expect((await readEvents(once, (m) => m.some((e) => e.event === 'JOB_SUBMITTED'))).some((e) => e.event === 'JOB_SUBMITTED')).toBe(true)
})

test('a replay counts the events missed, not the ids between: after host restarts (each begins a new block of ids) every stored event missed is sent, with no gap', async () => {
  host = await startTestHost()
  const dataDir = host.dataDir
  const first = host.engine.submit({ job_type: 'before', cost_units: 1 })
  const seen = host.engine.jobEvents(first.job.id).at(-1)!.id
  const missed: string[] = []
  for (let start = 0; start < 3; start++) {
    await host.stop()
    host = await startTestHost({ dataDir })
    missed.push(host.engine.submit({ job_type: `after-start-${start}`, cost_units: 1 }).job.id)
  }
  expect(host.engine.newestEventId() - seen).toBeGreaterThan(10_000)
  const res = await host.call('/api/events/stream', { headers: { 'last-event-id': String(seen) } })
  const messages = await readEvents(res, (m) => m.filter((e) => e.event === 'JOB_SUBMITTED').length >= 3)
  expect(messages.some((e) => e.event === 'gap')).toBe(false)
  expect(messages.filter((e) => e.event === 'JOB_SUBMITTED').map((e) => JSON.parse(e.data!).job_id)).toEqual(missed)
})

test('a replay starts after the newest events it may send: older missed ones are named by a gap from the first missed id', async () => {
  host = await startTestHost()
  host.engine.submit({ job_type: 'seen', cost_units: 1 })
  const seen = host.engine.newestEventId()
  const ids = [1, 2, 3, 4].map(() => host.engine.jobEvents(host.engine.submit({ job_type: 'missed', cost_units: 1 }).job.id).at(-1)!.id)
  const all = host.engine.replayAfter(seen, 100).events.map((event) => event.id)
  expect(host.engine.replayAfter(seen, all.length).gap).toBeNull()
  // At most 3: the replay starts after the fourth newest, and the gap names what is before it.
  expect(host.engine.replayAfter(seen, 3)).toMatchObject({ gap: { missed_from: seen + 1, missed_to: all.at(-4) }, events: all.slice(-3).map((id) => ({ id })) })
  expect(all.at(-1)).toBe(ids.at(-1))
})

test('a reader is told of a gap whenever events after its Last-Event-ID were deleted, few as those left are: the replay goes on after the largest id deleted', async () => {
  host = await startTestHost()
  host.engine.submit({ job_type: 'seen', cost_units: 1 })
  const seen = host.engine.newestEventId()
  const gone = [host.engine.submit({ job_type: 'gone', cost_units: 1 }).job.id, host.engine.submit({ job_type: 'gone', cost_units: 1 }).job.id]
  host.engine.submit({ job_type: 'left', cost_units: 1 }) // left, but among the ones deleted
  for (const id of gone) host.engine.cancel(id)
  const largestDeleted = host.engine.newestEventId()
  expect(host.engine.deleteFinishedJobs(gone).sort()).toEqual([...gone].sort())
  const after = host.engine.submit({ job_type: 'after', cost_units: 1 }).job.id

  const res = await host.call('/api/events/stream', { headers: { 'last-event-id': String(seen) } })
  const messages = await readEvents(res, (m) => submittedIds(m).length >= 1)
  const replay = messages.filter((m) => m.event !== 'redis' && m.event !== 'storage')
  // Its id is missed_to: a reader that drops before the next event resumes past the gap.
  expect(replay[0]).toMatchObject({ event: 'gap', id: String(largestDeleted) })
  expect(JSON.parse(replay[0]!.data!)).toEqual({ missed_from: seen + 1, missed_to: largestDeleted })
  expect(submittedIds(replay)).toEqual([after])

  // A reader that had seen every event deleted is told of no gap.
  const current = await host.call('/api/events/stream', { headers: { 'last-event-id': String(largestDeleted) } })
  const resumed = await readEvents(current, (m) => submittedIds(m).length >= 1)
  expect(resumed.some((m) => m.event === 'gap')).toBe(false)
  expect(submittedIds(resumed)).toEqual([after])
})

test('a Last-Event-ID past every id this log gave (one from a database since restored from an older backup, or another host\'s) is told of a gap over the whole log, the newest id as its place; live events follow', async () => {
  host = await startTestHost()
  host.engine.submit({ job_type: 'before', cost_units: 1 })
  const newest = host.engine.newestEventId()
  const res = await host.call('/api/events/stream', { headers: { 'last-event-id': String(newest + 100_000) } })
  const reader = new SseReader(res)
  const opened = await reader.until((m) => m.some((e) => e.event === 'gap'))
  const gap = opened.find((e) => e.event === 'gap')!
  expect(gap.id).toBe(String(newest))
  expect(JSON.parse(gap.data!)).toEqual({ missed_from: 1, missed_to: newest })
  const { job } = host.engine.submit({ job_type: 'live', cost_units: 1 })
  const messages = await reader.until((m) => submittedIds(m).length >= 1)
  expect(submittedIds(messages)).toEqual([job.id])
  await reader.close()
})

test('a ticket opens the stream without the token; a bad ticket or none is 401, a bad ticket told to take a new one', async () => {
  host = await startTestHost()
  const ticketRes = await host.call('/api/events/ticket', { method: 'POST' })
  expect(ticketRes.status).toBe(200)
  const { ticket, expires_at } = await ticketRes.json()
  expect(Date.parse(expires_at)).toBeGreaterThan(Date.now())
  const res = await host.call(`/api/events/stream?ticket=${ticket}`, { token: null })
  expect(res.status).toBe(200)
  await res.body!.cancel()
  const forged = await host.call('/api/events/stream?ticket=forged', { token: null })
  expect([forged.status, await forged.json()]).toEqual([401, { code: 'unauthorized', detail: LAPSED_TICKET_REFUSAL }])
  expect((await host.call('/api/events/stream', { token: null })).status).toBe(401)
  // A ticket opens nothing else.
  expect((await host.call(`/api/capacity?ticket=${ticket}`, { token: null })).status).toBe(401)
  expect((await host.call('/api/events/ticket', { method: 'POST', token: null })).status).toBe(401)
})

test('stopping the host ends open streams', async () => {
  host = await startTestHost()
  const res = await host.call('/api/events/stream')
  const done = readEvents(res, () => false, 10_000)
  await host.stop()
  await expect(done).resolves.toBeDefined()
})

/**
 * The raw chunks of an event stream's HTTP body (chunked transfer encoding: one chunk per write
 * the server makes), read off a plain socket until `until` says stop.
 */
async function readChunks(url: string, token: string, until: (chunks: string[]) => boolean): Promise<string[]> {
  const { hostname, port } = new URL(url)
  const socket = connect(Number(port), hostname)
  socket.write(`GET /api/events/stream HTTP/1.1\r\nHost: ${hostname}:${port}\r\nAuthorization: Bearer ${token}\r\n\r\n`)
  let raw = Buffer.alloc(0)
  let headersRead = false
  const chunks: string[] = []
  try {
    for await (const data of socket) {
      raw = Buffer.concat([raw, data as Buffer])
      if (!headersRead) {
        const end = raw.indexOf('\r\n\r\n')
        if (end < 0) continue
        headersRead = true
        raw = raw.subarray(end + 4)
      }
      // Whole chunks only: `<size in hex>\r\n<data>\r\n`.
      for (;;) {
        const line = raw.indexOf('\r\n')
        if (line < 0) break
        const size = parseInt(raw.subarray(0, line).toString(), 16)
        if (raw.length < line + 2 + size + 2) break
        chunks.push(raw.subarray(line + 2, line + 2 + size).toString())
        raw = raw.subarray(line + 2 + size + 2)
      }
      if (until(chunks)) break
    }
  } finally {
    socket.destroy()
  }
  return chunks
}

test("a commit's events reach a stream client in one write, in the order they were appended", async () => {
  host = await startTestHost()
  let submitted: (string | null)[] | null = null
  const chunks = await readChunks(host.url, host.token, (chunks) => {
    // The stream's first write comes in the step that subscribes it: from then on it hears every commit.
    submitted ??= host.engine
      .submitMany([
        { job_type: 'one', cost_units: 1 },
        { job_type: 'two', cost_units: 1 },
        { job_type: 'three', cost_units: 1 },
      ])
      .map((result) => (result.ok ? result.value.job.id : null))
    return chunks.some((chunk) => chunk.includes('JOB_SUBMITTED'))
  })
  const chunk = chunks.find((c) => c.includes('JOB_SUBMITTED'))!
  const ids = [...chunk.matchAll(/^data: (.*)$/gm)].map((m) => JSON.parse(m[1]!).job_id)
  expect(ids).toEqual(submitted)
})

/** Submits `count` jobs in one batch and waits for their commit; answers their ids. */
async function submitCommitted(count: number, jobType = 'many'): Promise<string[]> {
  const committed = new Promise<void>((resolve) => {
    const stop = host.engine.onCommit(() => {
      stop()
      resolve()
    })
  })
  const ids = host.engine.submitMany(Array.from({ length: count }, () => ({ job_type: jobType, cost_units: 1 }))).map((result) => (result.ok ? result.value.job.id : ''))
  await committed
  // A turn of the event loop: the host's sockets take what they can of the commit's frames.
  await new Promise((resolve) => setImmediate(resolve))
  return ids
}

const submittedIds = (messages: SseMessage[]) => messages.filter((m) => m.event === 'JOB_SUBMITTED').map((m) => JSON.parse(m.data!).job_id as string)

test('a reader the host holds more than MAX_UNSENT_BYTES of frames for is cut off, and resumes after its last whole frame with nothing lost', async () => {
  let cutOff = false
  host = await startTestHost({}, { log: (line) => (cutOff ||= line.includes('was cut off')) })
  // A reader that never reads: its response is paused from the start, and the host's frames pile up.
  const answer = await new Promise<IncomingMessage>((resolve) => get(`${host.url}/api/events/stream`, { headers: { authorization: `Bearer ${host.token}` } }, resolve))
  answer.pause()
  const submitted: string[] = []
  // A 500-job commit is ~200 KB of frames; the host, the kernel and this reader's buffers hold a few MB.
  for (let batch = 0; !cutOff && batch < 80; batch++) submitted.push(...(await submitCommitted(500)))
  expect(cutOff).toBe(true)

  // What reached the reader before the cut, up to its last whole frame (a frame cut in two is dropped, as a browser drops it).
  const received: Buffer[] = []
  answer.on('data', (chunk: Buffer) => received.push(chunk))
  await new Promise((resolve) => answer.once('close', resolve).resume())
  const before = await readEvents(new Response(Buffer.concat(received)), () => false)
  const lastId = before.filter((m) => m.id !== undefined).at(-1)!.id!
  expect(submittedIds(before).length).toBeLessThan(submitted.length)

  const res = await host.call('/api/events/stream', { headers: { 'last-event-id': lastId } })
  const after = await readEvents(res, (m) => submittedIds(before).length + submittedIds(m).length >= submitted.length, 20_000)
  expect(after.some((m) => m.event === 'gap')).toBe(false)
  expect([...submittedIds(before), ...submittedIds(after)]).toEqual(submitted)
})

test('every reader gets every frame alike: opened with the token, with a ticket, or resuming', async () => {
  host = await startTestHost()
  host.engine.submit({ job_type: 'before', cost_units: 1 })
  const seen = String(host.engine.newestEventId())
  const { ticket } = await (await host.call('/api/events/ticket', { method: 'POST' })).json()
  const readers = [
    await host.call('/api/events/stream'),
    await host.call('/api/events/stream'),
    await host.call(`/api/events/stream?ticket=${ticket}`, { token: null }),
    await host.call('/api/events/stream', { headers: { 'last-event-id': seen } }),
  ]
  const submitted = [...(await submitCommitted(3, 'first')), ...(await submitCommitted(200, 'second')), ...(await submitCommitted(1, 'third'))]
  const frames = await Promise.all(readers.map((res) => readEvents(res, (m) => submittedIds(m).length >= submitted.length)))
  expect(submittedIds(frames[0]!)).toEqual(submitted)
  for (const other of frames.slice(1)) expect(other).toEqual(frames[0])
})
