/**
 * the worker API (worker) over real HTTP: claim (a lease + attempt + token, long-polling),
 * heartbeat, complete, fail. Every documented status and code, the exact answers, and the
 * long-poll timing rules.
 */
import { readFileSync } from 'node:fs'
import { describe, expect, test, vi } from 'vitest'
import { ManualClock } from '../../src-main/engine/rules/clock'
import { startTestHost } from '../helpers/host'
import { MAX_WAIT_MS_ACCEPTED } from '../../src-main/http/schemas'
import { MAX_BATCH_ITEMS, MAX_NOTE_CHARS } from '../../src-shared/limits'
import { MAX_LONG_POLL_MS } from '../../src-main/dispatch/long-poll'
import { FILE_IDLE_MS, heartbeatIntervalS } from '../../src-main/engine'
import type { TestHost } from '../helpers/host'
import { body, clockedHost, API_T0, expectError, expectInvalid, ISO_MS, keys, post, PULL, QUEUE, submit, UNKNOWN_ID, until, waitingPost, WORKER, WORKER_CLAIM_KEYS } from './support'

const T0 = API_T0
let host: TestHost
let clock: ManualClock
const startHost = clockedHost({ totalUnits: 10, leaseTtlS: 30, heartbeatGraceS: 5 })

async function start(overrides: Parameters<typeof startHost>[0] = {}) {
  ;({ host, clock } = await startHost(overrides))
  return host
}

/** Waits until the host has heard a claim from `workerId` (the workers list shows it). */
const arrived = (workerId: string) =>
  until(
    async () => ((await (await host.call('/api/workers')).json()) as { workers: { worker_id: string }[] }).workers.some((w) => w.worker_id === workerId),
    5000,
    `${workerId}'s claim arrived`,
  )

/** A claim (max_wait_ms 10000) the host has heard and not answered: it waits. Resolves with its answer (still to come). */
async function waitingClaim(workerId: string): Promise<{ answer: Promise<any> }> {
  let answered = false
  const answer = post(host, `${WORKER}/claim`, { worker_id: workerId, streams: ['default'], max_wait_ms: 10_000 }).then((res) => {
    answered = true
    return body(res)
  })
  await arrived(workerId)
  expect(answered, `${workerId}'s claim was answered at once`).toBe(false)
  return { answer }
}

async function claimNow(workerId = 'w1', streams = ['default']) {
  const res = await post(host, `${WORKER}/claim`, { worker_id: workerId, streams, max_wait_ms: 0 })
  expect(res.status).toBe(200)
  return body(res)
}

async function claimed(workerId = 'w1', submitExtra: Record<string, unknown> = {}) {
  const job = await submit(host, submitExtra)
  const c = await claimNow(workerId, [job.queue])
  expect(c).toMatchObject({ claimed: true, job_id: job.job_id })
  return c
}

const attemptOf = (c: any, workerId = 'w1') => ({
  worker_id: workerId,
  job_id: c.job_id,
  attempt_id: c.attempt_id,
  lease_token: c.lease_token,
  stream: c.stream,
  message_id: c.message_id,
})

describe('POST /internal/worker/claim', () => {
  test('a claim is a lease: {claimed:true, job_id, attempt_id, lease_token, stream, message_id, payload, lease_ttl_seconds, heartbeat_interval_seconds}', async () => {
    await start()
    const job = await submit(host, { queue: 'renders', payload: { p: [1, 2] }, cost_units: 3 })
    const res = await post(host, `${WORKER}/claim`, { worker_id: 'w1', streams: ['renders'], max_wait_ms: 0 })
    expect(res.status).toBe(200)
    const c = await body(res)
    expect(keys(c)).toEqual(WORKER_CLAIM_KEYS)
    expect(c).toMatchObject({
      claimed: true,
      job_id: job.job_id,
      attempt_id: expect.any(String),
      lease_token: expect.any(String),
      stream: 'renders',
      message_id: expect.any(String),
      payload: { p: [1, 2] },
      job_type: 'generic',
      lease_ttl_seconds: 30,
    })
    expect(c.heartbeat_interval_seconds).toBeGreaterThanOrEqual(1)
    expect(c.heartbeat_interval_seconds).toBeLessThan(c.lease_ttl_seconds)
    expect(host.engine.getJob(job.job_id)).toMatchObject({ state: 'RUNNING', attempts: 1 })
    expect(host.engine.getCapacity().leased).toBe(3)
    expect(host.engine.attempts(job.job_id)[0]!.id).toBe(c.attempt_id)
  })

  test('a claim says to heartbeat every third of the lease\'s TTL, and at least every 10 s: a worker that heartbeats a job\'s files after each of its beats keeps them inside the gate\'s 30 s', () => {
    expect([1, 3, 15, 30, 90, 120, 3600].map(heartbeatIntervalS)).toEqual([1, 1, 5, 10, 10, 10, 10])
    for (const ttl of [1, 30, 31, 89, 90, 3600]) expect(3 * heartbeatIntervalS(ttl)).toBeLessThanOrEqual(FILE_IDLE_MS / 1000)
  })

  test('no work with max_wait_ms 0 is {claimed:false} and nothing else', async () => {
    await start()
    const res = await post(host, `${WORKER}/claim`, { worker_id: 'w', streams: ['default'], max_wait_ms: 0 })
    expect(res.status).toBe(200)
    expect(await body(res)).toEqual({ claimed: false })
  })

  test('a claim without max_wait_ms waits for nothing: with no work it is {claimed:false} at once', async () => {
    await start()
    const answer = post(host, `${WORKER}/claim`, { worker_id: 'w', streams: ['default'] }).then(body)
    expect(await Promise.race([answer, new Promise((resolve) => setTimeout(() => resolve('still waiting after 5 s'), 5_000))])).toEqual({ claimed: false })
  })

  test('streams are tried in the order given; jobs on other streams are not taken', async () => {
    await start()
    const b = await submit(host, { queue: 'b', priority: 'URGENT' })
    const a = await submit(host, { queue: 'a', priority: 'LOW' })
    await submit(host, { queue: 'c', priority: 'URGENT' })
    expect((await claimNow('w', ['a', 'b'])).job_id).toBe(a.job_id)
    expect((await claimNow('w', ['a', 'b'])).job_id).toBe(b.job_id)
    expect(await claimNow('w', ['a', 'b'])).toEqual({ claimed: false })
  })

  test('a claim that names the job types its worker runs is granted only jobs of those types, in a claim and an exchange, at once or waiting; the others are left to other workers', async () => {
    await start()
    const other = await submit(host, { job_type: 'resize', priority: 'URGENT' })
    const mine = await submit(host, { job_type: 'thumbnail', priority: 'LOW' })
    const claim = (json: Record<string, unknown>) => post(host, `${WORKER}/claim`, { worker_id: 'w', streams: ['default'], max_wait_ms: 0, ...json }).then(body)
    expect(await claim({ job_types: ['thumbnail'] })).toMatchObject({ claimed: true, job_id: mine.job_id })
    expect(await claim({ job_types: ['thumbnail'] })).toEqual({ claimed: false })
    // A waiting exchange is not handed a job of another type as it is submitted; one of its own, it is.
    const waiting = post(host, `${WORKER}/batch`, { worker_id: 'w-batch', claim: { streams: ['default'], job_types: ['thumbnail'], max_jobs: 4, max_wait_ms: 10_000 } }).then(body)
    await arrived('w-batch')
    await submit(host, { job_type: 'resize' })
    const later = await submit(host, { job_type: 'thumbnail' })
    expect((await waiting).jobs).toEqual([expect.objectContaining({ job_id: later.job_id, job_type: 'thumbnail' })])
    // A claim that names no types takes any.
    expect(await claim({})).toMatchObject({ claimed: true, job_id: other.job_id })
  })

  test('a job with constraints.gpu_required is granted only to a claim or an exchange that says gpu_available; one that does not skips it for the jobs behind', async () => {
    await start()
    const gpu = await submit(host, { priority: 'URGENT', constraints: { gpu_required: true } })
    const plain = await submit(host, { priority: 'LOW' })
    const claim = (json: Record<string, unknown>) => post(host, `${WORKER}/claim`, { worker_id: 'w', streams: ['default'], max_wait_ms: 0, ...json }).then(body)
    expect(await claim({})).toMatchObject({ claimed: true, job_id: plain.job_id })
    expect(await claim({ gpu_available: false })).toEqual({ claimed: false })
    expect(host.engine.getJob(gpu.job_id).state).toBe('QUEUED')
    const exchange = (json: Record<string, unknown>) => post(host, `${WORKER}/batch`, { worker_id: 'w-batch', claim: { streams: ['default'], max_jobs: 4, max_wait_ms: 0, ...json } }).then(body)
    expect((await exchange({})).jobs).toEqual([])
    expect((await exchange({ gpu_available: true })).jobs).toEqual([expect.objectContaining({ job_id: gpu.job_id })])
    // A waiting claim with a GPU is handed one as it is submitted; a one-job claim too.
    const waiting = post(host, `${WORKER}/claim`, { worker_id: 'w-gpu', streams: ['default'], gpu_available: true, max_wait_ms: 10_000 }).then(body)
    await arrived('w-gpu')
    const later = await submit(host, { constraints: { gpu_required: true } })
    expect(await waiting).toMatchObject({ claimed: true, job_id: later.job_id })
    await expectInvalid(await post(host, `${WORKER}/claim`, { worker_id: 'w', streams: ['default'], gpu_available: 'yes' }), 'gpu_available')
    await expectInvalid(await post(host, `${WORKER}/batch`, { worker_id: 'w', claim: { streams: ['default'], max_jobs: 1, gpu_available: 1 } }), 'claim.gpu_available')
  })

  test('a job needing a GPU that no worker asking has says so as it waits, first in line or behind another', async () => {
    await start()
    const reason = async (jobId: string) => ((await body(await host.call(`${QUEUE}/jobs/${jobId}`))) as any).job.waiting_reason
    const first = await submit(host, { constraints: { gpu_required: true } })
    const second = await submit(host, { constraints: { gpu_required: true } })
    expect(await reason(first.job_id)).toBe('first in line; waiting for a worker to take it') // no worker at all yet
    expect(await post(host, `${WORKER}/claim`, { worker_id: 'w', streams: ['default'], max_wait_ms: 0 }).then(body)).toEqual({ claimed: false })
    expect(await reason(first.job_id)).toBe('first in line; needs a worker with a GPU, and none asking has one')
    expect(await reason(second.job_id)).toBe(`behind job …${first.job_id.slice(-8)}; needs a worker with a GPU, and none asking has one`)
    // A pull worker without one asks too: still none has one. One with a GPU asks: the job waits its turn.
    expect(await post(host, `${PULL}/request`, { worker_id: 'p' }).then(body)).toMatchObject({ denied: true })
    expect(await reason(first.job_id)).toBe('first in line; needs a worker with a GPU, and none asking has one')
    expect(await post(host, `${WORKER}/claim`, { worker_id: 'w', streams: ['default'], gpu_available: true, max_wait_ms: 0 }).then(body)).toMatchObject({ job_id: first.job_id })
    expect(await reason(second.job_id)).toBe('first in line; waiting for a worker to take it')
  })

  test('a job behind one needing a GPU is not said to wait behind it while the workers asking have none: they skip that job and take this one first', async () => {
    await start()
    const reason = async (jobId: string) => ((await body(await host.call(`${QUEUE}/jobs/${jobId}`))) as any).job.waiting_reason
    const gpu = await submit(host, { priority: 'URGENT', constraints: { gpu_required: true } })
    expect(await post(host, `${WORKER}/claim`, { worker_id: 'w', streams: ['default'], max_wait_ms: 0 }).then(body)).toEqual({ claimed: false })
    const plain = await submit(host)
    expect(await reason(gpu.job_id)).toBe('first in line; needs a worker with a GPU, and none asking has one')
    expect(await reason(plain.job_id)).toBe('first in line; waiting for a worker to take it')
    // The next claim of that worker takes it: it was first in line for the workers there are.
    expect(await post(host, `${WORKER}/claim`, { worker_id: 'w', streams: ['default'], max_wait_ms: 0 }).then(body)).toMatchObject({ job_id: plain.job_id })
  })

  test('a job behind jobs of a type the workers running its own do not run is not said to wait behind them: those workers skip them and take this one first', async () => {
    await start()
    const reason = async (jobId: string) => ((await body(await host.call(`${QUEUE}/jobs/${jobId}`))) as any).job.waiting_reason
    const encode = await submit(host, { priority: 'URGENT', job_type: 'encode' })
    const render = await submit(host, { job_type: 'render' })
    expect(await reason(render.job_id)).toBe(`waiting its turn behind job …${encode.job_id.slice(-8)}`) // no worker known: the whole line
    expect(await post(host, `${WORKER}/claim`, { worker_id: 'w-render', streams: ['default'], job_types: ['render'], max_wait_ms: 0 }).then(body)).toMatchObject({ job_id: render.job_id })
    const next = await submit(host, { job_type: 'render' })
    expect(await reason(next.job_id)).toBe('first in line; waiting for a worker to take it')
    expect(await reason(encode.job_id)).toBe('no worker connected runs job type encode; it waits for one that does')
  })

  test('a job that only a GPU keeps from the workers is placed in the line they would walk with one: not behind a job of a type they skip', async () => {
    await start()
    const reason = async (jobId: string) => ((await body(await host.call(`${QUEUE}/jobs/${jobId}`))) as any).job.waiting_reason
    expect(await post(host, `${WORKER}/claim`, { worker_id: 'w-render', streams: ['default'], job_types: ['render'], max_wait_ms: 0 }).then(body)).toEqual({ claimed: false })
    const encode = await submit(host, { job_type: 'encode' })
    const gpu = await submit(host, { job_type: 'render', constraints: { gpu_required: true } })
    expect(await reason(encode.job_id)).toBe('no worker connected runs job type encode; it waits for one that does')
    expect(await reason(gpu.job_id)).toBe('first in line; needs a worker with a GPU, and none asking has one')
    const later = await submit(host, { job_type: 'render', constraints: { gpu_required: true } })
    expect(await reason(later.job_id)).toBe(`behind job …${gpu.job_id.slice(-8)}; needs a worker with a GPU, and none asking has one`)
  })

  test('a job of a type or queue none of the connected workers takes stays queued and says so as it waits', async () => {
    await start()
    const reason = async (jobId: string) => ((await body(await host.call(`${QUEUE}/jobs/${jobId}`))) as any).job.waiting_reason
    const resize = await submit(host, { job_type: 'resize' })
    // No worker yet: it waits for one, as every job does.
    expect(await reason(resize.job_id)).toBe('first in line; waiting for a worker to take it')
    expect(await post(host, `${WORKER}/claim`, { worker_id: 'w', streams: ['default'], job_types: ['thumbnail'], max_wait_ms: 0 }).then(body)).toEqual({ claimed: false })
    expect(await reason(resize.job_id)).toBe('no worker connected runs job type resize; it waits for one that does')
    const listed = (await body(await host.call(`${QUEUE}/jobs?state=QUEUED`))) as any
    expect(listed.jobs.map((job: any) => job.waiting_reason)).toEqual(['no worker connected runs job type resize; it waits for one that does'])
    // One that takes other queues only: the job's queue is what nobody takes.
    expect(await post(host, `${WORKER}/claim`, { worker_id: 'w', streams: ['other'], job_types: ['resize'], max_wait_ms: 0 }).then(body)).toEqual({ claimed: false })
    expect(await reason(resize.job_id)).toBe('no worker connected takes queue default; it waits for one that does')
  })

  test('while a worker of the pull or queue API asks for work, no job is said to be of a queue nobody takes: those workers take every queue', async () => {
    await start()
    const reason = async (jobId: string) => ((await body(await host.call(`${QUEUE}/jobs/${jobId}`))) as any).job.waiting_reason
    const job = await submit(host, { queue: 'reports' })
    expect(await post(host, `${WORKER}/claim`, { worker_id: 'w', streams: ['default'], max_wait_ms: 0 }).then(body)).toEqual({ claimed: false })
    expect(await reason(job.job_id)).toBe('no worker connected takes queue reports; it waits for one that does')
    // A pull worker asks and is denied for capacity: the job waits for capacity, not for a worker.
    expect((await host.call('/api/capacity', { method: 'PUT', body: JSON.stringify({ busy_rating: 10 }), headers: { 'content-type': 'application/json' } })).status).toBe(200)
    expect(await post(host, `${PULL}/request`, { worker_id: 'p' }).then(body)).toMatchObject({ denied: true })
    expect(await reason(job.job_id)).not.toMatch(/no worker connected/)
    // Once none has asked for a minute, the connected workers' queues say it again.
    clock.advance(60_000)
    expect(await post(host, `${WORKER}/claim`, { worker_id: 'w', streams: ['default'], max_wait_ms: 0 }).then(body)).toEqual({ claimed: false })
    expect(await reason(job.job_id)).toBe('no worker connected takes queue reports; it waits for one that does')
  })

  test('capacity rules apply: a job that does not fit is not claimed', async () => {
    await start({ totalUnits: 10, busy: 5 }) // usable 5
    const job = await submit(host, { cost_units: 6 })
    expect(await claimNow('w')).toEqual({ claimed: false })
    expect(host.engine.getJob(job.job_id).state).toBe('QUEUED')
  })

  test('an invalid claim is 400 naming the fields', async () => {
    await start()
    await expectInvalid(await post(host, `${WORKER}/claim`, { streams: ['default'] }), 'worker_id')
    await expectInvalid(await post(host, `${WORKER}/claim`, { worker_id: 'w', streams: [] }), 'streams')
    await expectInvalid(await post(host, `${WORKER}/claim`, { worker_id: 'w', streams: 'default' }), 'streams')
    await expectInvalid(await post(host, `${WORKER}/claim`, { worker_id: 'w', streams: ['default'], max_wait_ms: -1 }), 'max_wait_ms')
    await expectInvalid(await post(host, `${WORKER}/claim`, { worker_id: 'w', streams: ['default'], max_wait_ms: '10' }), 'max_wait_ms')
    await expectInvalid(await post(host, `${WORKER}/claim`, { worker_id: 'w', streams: ['default'], max_wait_ms: 1.5 }), 'max_wait_ms')
    await expectInvalid(await post(host, `${WORKER}/claim`, { worker_id: 'w', streams: ['default'], max_wait_ms: MAX_WAIT_MS_ACCEPTED + 1 }), 'max_wait_ms')
  })

  test('no token is 401', async () => {
    await start()
    await expectError(await post(host, `${WORKER}/claim`, { worker_id: 'w', streams: ['default'] }, null), 401, 'unauthorized')
  })
})

describe('local worker ids are reserved', () => {
  test('a request over HTTP naming a local worker id (local-<slot>.<generation>) is 403 worker_mismatch on every dialect: it claims nothing and is not listed', async () => {
    await start()
    const job = await submit(host)
    const id = 'local-2.1'
    const requests: [string, Record<string, unknown>][] = [
      [`${WORKER}/claim`, { worker_id: id, streams: ['default'], max_wait_ms: 0 }],
      [`${WORKER}/batch`, { worker_id: id, claim: { streams: ['default'], max_jobs: 1 } }],
      [`${WORKER}/heartbeat`, { worker_id: id, job_id: job.job_id, lease_token: 'x' }],
      [`${WORKER}/report`, { worker_id: id, kind: 'handler_load_failed', detail: 'forged' }],
      [`${PULL}/request`, { worker_id: id }],
      [`${QUEUE}/jobs/claim`, { worker_id: id }],
    ]
    for (const [path, request] of requests) {
      // A report (the heartbeat) says ok: false, as every refused report does.
      const error = await expectError(await post(host, path, request), 403, 'worker_mismatch', path.endsWith('/heartbeat') ? ['ok'] : [])
      expect(error.detail, path).toContain('reserved to the host\'s own local workers')
    }
    const { workers } = (await (await host.call('/api/workers')).json()) as { workers: { worker_id: string }[] }
    expect(workers).toEqual([])
    // Ids that only look alike are any worker's own.
    expect(await claimNow('local-2', [job.queue])).toMatchObject({ claimed: true, job_id: job.job_id })
  })

  test('a worker id that reads as a local worker\'s (another case, a full-width digit: its NFKC form lower-cased) is reserved too, 403 worker_mismatch', async () => {
    await start()
    for (const id of ['LOCAL-2.1', 'Local-2.1', 'local-\uff12.1', 'local-2\uff0e1']) {
      await expectError(await post(host, `${WORKER}/claim`, { worker_id: id, streams: ['default'], max_wait_ms: 0 }), 403, 'worker_mismatch')
    }
  })
})

describe('worker ids', () => {
  test('a worker id that is blank, has whitespace around it, or holds a control or invisible character is 400 naming worker_id on every dialect, and is not listed', async () => {
    await start()
    const job = await submit(host)
    for (const id of [' ', '\t', ' local-2.1 ', 'w1 ', ' w1', 'w\n1', 'w\u200b1', 'w\u202e1', '\ufeffw1', 'w\u00851']) {
      const requests: [string, Record<string, unknown>][] = [
        [`${WORKER}/claim`, { worker_id: id, streams: ['default'], max_wait_ms: 0 }],
        [`${WORKER}/batch`, { worker_id: id, claim: { streams: ['default'], max_jobs: 1 } }],
        [`${WORKER}/report`, { worker_id: id, kind: 'handler_load_failed', detail: 'x' }],
        [`${PULL}/request`, { worker_id: id }],
        [`${QUEUE}/jobs/claim`, { worker_id: id }],
      ]
      for (const [path, request] of requests) {
        const error = await expectInvalid(await post(host, path, request), 'worker_id')
        expect(error.detail, `${path} ${JSON.stringify(id)}`).toMatch(/must not (be blank|begin or end with whitespace|contain control or invisible characters)/)
      }
    }
    expect(((await (await host.call('/api/workers')).json()) as { workers: unknown[] }).workers).toEqual([])
    expect(host.engine.getJob(job.job_id).state).toBe('QUEUED')
    // Spaces inside an id, and letters of any script, are fine.
    expect(await claimNow('build box 1', [job.queue])).toMatchObject({ claimed: true, job_id: job.job_id })
    await submit(host)
    expect(await claimNow('työasema-ü', ['default'])).toMatchObject({ claimed: true })
  })
})

describe('long-poll claims', () => {
  test('a waiting claim (max_wait_ms 10000) is answered by the submit that gives it work', async () => {
    await start()
    const { answer } = await waitingClaim('w') // there is no work yet
    const job = await submit(host)
    expect(await answer).toMatchObject({ claimed: true, job_id: job.job_id })
  })

  test('a waiting claim, answered from the commit that grants it, has the status, headers and body of a claim answered at once', async () => {
    await start()
    const headersOf = (res: Response) => ({
      type: res.headers.get('content-type'),
      cache: res.headers.get('cache-control'),
      sniff: res.headers.get('x-content-type-options'),
      chunked: res.headers.get('transfer-encoding'),
    })
    const first = await submit(host)
    const atOnce = await post(host, `${WORKER}/claim`, { worker_id: 'w', streams: ['default'], max_wait_ms: 0 })
    const atOnceText = await atOnce.text()
    expect(JSON.parse(atOnceText)).toMatchObject({ claimed: true, job_id: first.job_id })

    const pending = post(host, `${WORKER}/claim`, { worker_id: 'w', streams: ['default'], max_wait_ms: 10_000 })
    await arrived('w') // the claim waits
    const second = await submit(host)
    const waited = await pending
    const waitedText = await waited.text()
    expect(waited.status).toBe(atOnce.status)
    expect(headersOf(waited)).toEqual(headersOf(atOnce))
    expect(headersOf(waited)).toMatchObject({ type: 'application/json; charset=utf-8', cache: 'no-store', sniff: 'nosniff', chunked: null })
    expect(Number(waited.headers.get('content-length'))).toBe(Buffer.byteLength(waitedText))
    const answer = JSON.parse(waitedText)
    expect(answer).toMatchObject({ claimed: true, job_id: second.job_id })
    expect(keys(answer)).toEqual(keys(JSON.parse(atOnceText)))
  })

  test('a waiting claim answers as soon as capacity comes back', async () => {
    await start({ totalUnits: 2 })
    const first = await claimed('w1', { cost_units: 2 })
    const second = await submit(host, { cost_units: 2 })
    const { answer } = await waitingClaim('w2') // the capacity is all leased
    await post(host, `${WORKER}/complete`, attemptOf(first))
    expect(await answer).toMatchObject({ claimed: true, job_id: second.job_id })
  })

  test('a claim with no work answers {claimed:false} once max_wait_ms has passed, not before', async () => {
    await start()
    // The host runs in this process: its wait timer of max_wait_ms is held here, and fired by the test.
    const realSetTimeout = globalThis.setTimeout
    let expire: (() => void) | null = null
    const held: ReturnType<typeof setTimeout>[] = []
    const armed = vi.spyOn(globalThis, 'setTimeout').mockImplementation(((run: () => void, ms?: number) => {
      if (ms !== 700) return realSetTimeout(run, ms)
      expire = run
      const placeholder = realSetTimeout(() => {}, 60_000) // cleared below: only a handle for the host to clear
      held.push(placeholder)
      return placeholder
    }) as typeof setTimeout)
    try {
      let answered = false
      const answer = post(host, `${WORKER}/claim`, { worker_id: 'w', streams: ['default'], max_wait_ms: 700 }).then((res) => {
        answered = true
        return body(res)
      })
      await arrived('w')
      await until(() => expire, 2000, 'the wait armed for max_wait_ms')
      // A claim made after it is answered first: the waiting one was not answered before its time.
      expect(await claimNow('later')).toEqual({ claimed: false })
      expect(answered).toBe(false)
      expire!()
      expect(await answer).toEqual({ claimed: false })
    } finally {
      armed.mockRestore()
      for (const placeholder of held) clearTimeout(placeholder)
    }
  })

  test('a client that disconnects mid-wait is removed: a later submit is not leased to it', async () => {
    await start()
    // The host runs in this process: its wait timers show when a claim waits and when it stops.
    const armed = vi.spyOn(globalThis, 'setTimeout')
    const cleared = vi.spyOn(globalThis, 'clearTimeout')
    try {
      const stillWaiting = post(host, `${WORKER}/claim`, { worker_id: 'present', streams: ['default'], max_wait_ms: 10_000 })
      await arrived('present')
      const armedBefore = armed.mock.calls.length
      const gone = new AbortController()
      const abandonedWithSignal = host
        .call(`${WORKER}/claim`, { method: 'POST', json: { worker_id: 'ghost', streams: ['default'], max_wait_ms: 10_000 }, signal: gone.signal })
        .catch((error: Error) => error)
      const ghostWait = await until(
        () => armed.mock.results.find((result, i) => i >= armedBefore && armed.mock.calls[i]![1] === 10_000)?.value,
        2000,
        "the ghost's claim waits",
      )
      gone.abort()
      expect(await abandonedWithSignal).toBeInstanceOf(Error)
      await until(() => cleared.mock.calls.some(([handle]) => handle === ghostWait), 2000, "the host ends the ghost's wait")
      // The first (still connected) waiter takes the first job; the gone one must never take the second.
      const one = await submit(host)
      expect(await body(await stillWaiting)).toMatchObject({ claimed: true, job_id: one.job_id })
      // A waiting claim is granted inside the submit's commit, before the submit is answered: once
      // the second submit is answered, a ghost that still waited would hold the job already.
      const two = await submit(host)
      expect(host.engine.getJob(two.job_id).state).toBe('QUEUED')
      expect(host.engine.snapshot().leases.active).toBe(1)
      expect(await claimNow('w-next')).toMatchObject({ claimed: true, job_id: two.job_id })
    } finally {
      armed.mockRestore()
      cleared.mockRestore()
    }
  })

  test('max_wait_ms above 30000 (up to an hour) is accepted and capped: the wait is armed for 30 s, not for the asked time', async () => {
    await start()
    // The host runs in this process, so the claim's wait timer can be observed directly (no 30 s sleep).
    const armed = vi.spyOn(globalThis, 'setTimeout')
    try {
      for (const asked of [45_000, MAX_WAIT_MS_ACCEPTED]) {
        armed.mockClear()
        const gone = new AbortController()
        const pending = host
          .call(`${WORKER}/claim`, { method: 'POST', json: { worker_id: 'w', streams: ['default'], max_wait_ms: asked }, signal: gone.signal })
          .then((r) => r.status, (error: Error) => error.name)
        await until(() => armed.mock.calls.some(([, ms]) => ms === MAX_LONG_POLL_MS), 2000)
        expect(armed.mock.calls.some(([, ms]) => ms === asked)).toBe(false)
        gone.abort()
        expect(await pending).toBe('AbortError') // it was still waiting
      }
    } finally {
      armed.mockRestore()
    }
    expect(MAX_LONG_POLL_MS).toBe(30_000)
    expect(MAX_WAIT_MS_ACCEPTED).toBe(3_600_000)
  })
})

describe('POST /internal/worker/heartbeat', () => {
  test('200 {ok, lease_expires_at, cancel_requested}: extends to now + ttl + grace', async () => {
    await start()
    const c = await claimed()
    clock.advance(12_000)
    const res = await post(host, `${WORKER}/heartbeat`, { worker_id: 'w1', job_id: c.job_id, lease_token: c.lease_token })
    expect(res.status).toBe(200)
    const answer = await body(res)
    expect(keys(answer)).toEqual(['cancel_requested', 'lease_expires_at', 'ok'])
    expect(answer).toEqual({ ok: true, lease_expires_at: new Date(T0 + 12_000 + 35_000).toISOString(), cancel_requested: false })
    expect(answer.lease_expires_at).toMatch(ISO_MS)
    await post(host, `${QUEUE}/jobs/${c.job_id}/cancel`, {})
    expect((await body(await post(host, `${WORKER}/heartbeat`, { worker_id: 'w1', job_id: c.job_id, lease_token: c.lease_token }))).cancel_requested).toBe(true)
  })

  test('a token that is not this job’s lease is 409 {ok:false, code:lease_token_mismatch, detail}', async () => {
    await start()
    const c = await claimed()
    const other = await claimed('w1')
    const error = await expectError(
      await post(host, `${WORKER}/heartbeat`, { worker_id: 'w1', job_id: c.job_id, lease_token: other.lease_token }),
      409,
      'lease_token_mismatch',
      ['ok'],
    )
    expect(error.ok).toBe(false)
    await expectError(await post(host, `${WORKER}/heartbeat`, { worker_id: 'w1', job_id: c.job_id, lease_token: 'forged' }), 409, 'lease_token_mismatch', ['ok'])
  })

  test('409 lease_expired after expires_at, 409 lease_not_active after completion, both with ok:false', async () => {
    await start()
    const c = await claimed()
    await post(host, `${WORKER}/complete`, attemptOf(c))
    const released = await expectError(await post(host, `${WORKER}/heartbeat`, { worker_id: 'w1', job_id: c.job_id, lease_token: c.lease_token }), 409, 'lease_not_active', ['ok'])
    expect(released.ok).toBe(false)
    const d = await claimed()
    clock.advance(35_001)
    await expectError(await post(host, `${WORKER}/heartbeat`, { worker_id: 'w1', job_id: d.job_id, lease_token: d.lease_token }), 409, 'lease_expired', ['ok'])
  })

  test("a machine that slept takes no job from its worker: the heartbeat after the wake is 200, the lease lasts its TTL and grace from the wake, and the host says so once", async () => {
    const lines: string[] = []
    const clock = new ManualClock(T0)
    const slept = await startTestHost({ busy: 0, totalUnits: 10, leaseTtlS: 30, heartbeatGraceS: 5 }, { clock, log: (line) => lines.push(line) })
    try {
      host = slept
      const c = await claimed()
      clock.sleep(3_600_000)
      const woke = clock.now()
      const beat = await post(host, `${WORKER}/heartbeat`, { worker_id: 'w1', job_id: c.job_id, lease_token: c.lease_token })
      expect(beat.status).toBe(200)
      expect((await body(beat)).lease_expires_at).toBe(new Date(woke + 35_000).toISOString())
      expect(lines.filter((line) => line.includes('slept'))).toEqual([
        'leasehold: the machine slept, or its clock was set ahead, for 3,600 s: 1 lease, 0 claims, 0 file leases count their holders\' silence from now (nobody could be heard meanwhile)',
      ])
    } finally {
      await slept.dispose()
    }
  })

  test('an unknown job is 404 job_not_found; another worker is 403 worker_mismatch, both with ok:false as every refused report; a bad body 400', async () => {
    await start()
    const c = await claimed()
    expect(await expectError(await post(host, `${WORKER}/heartbeat`, { worker_id: 'w1', job_id: UNKNOWN_ID, lease_token: c.lease_token }), 404, 'job_not_found', ['ok'])).toMatchObject({ ok: false })
    expect(await expectError(await post(host, `${WORKER}/heartbeat`, { worker_id: 'w2', job_id: c.job_id, lease_token: c.lease_token }), 403, 'worker_mismatch', ['ok'])).toMatchObject({ ok: false })
    await expectInvalid(await post(host, `${WORKER}/heartbeat`, { worker_id: 'w1', job_id: c.job_id }), 'lease_token')
    await expectInvalid(await post(host, `${WORKER}/heartbeat`, { job_id: c.job_id, lease_token: c.lease_token }), 'worker_id')
  })

  test('a refused report lists no worker: a heartbeat for an unknown job, or with another worker\'s lease, adds none to GET /api/workers', async () => {
    await start()
    const c = await claimed()
    await expectError(await post(host, `${WORKER}/heartbeat`, { worker_id: 'ghost', job_id: UNKNOWN_ID, lease_token: c.lease_token }), 404, 'job_not_found', ['ok'])
    await expectError(await post(host, `${WORKER}/complete`, { worker_id: 'other', job_id: c.job_id, attempt_id: c.attempt_id, lease_token: c.lease_token, result: {} }), 403, 'worker_mismatch', ['ok', 'ack'])
    expect((await post(host, `${WORKER}/heartbeat`, { worker_id: 'w1', job_id: c.job_id, lease_token: c.lease_token })).status).toBe(200)
    const { workers } = (await (await host.call('/api/workers')).json()) as { workers: { worker_id: string }[] }
    expect(workers.map((w) => w.worker_id)).toEqual(['w1'])
  })
})

describe('POST /internal/worker/complete', () => {
  test('200 {ok:true, ack:true}: the job is DONE with its result, the lease released; a repeat answers the same', async () => {
    await start()
    const c = await claimed()
    const req = { ...attemptOf(c), result: { artifact: '/x', timings: { ms: 3 } } }
    const res = await post(host, `${WORKER}/complete`, req)
    expect(res.status).toBe(200)
    const answer = await body(res)
    expect(answer).toEqual({ ok: true, ack: true })
    const job = host.engine.getJob(c.job_id)
    expect(job.state).toBe('DONE')
    expect(job.result).toEqual({ artifact: '/x', timings: { ms: 3 } })
    expect(host.engine.getCapacity().leased).toBe(0)
    const events = host.engine.jobEvents(c.job_id).length
    const repeat = await post(host, `${WORKER}/complete`, req)
    expect(repeat.status).toBe(200)
    expect(await body(repeat)).toEqual(answer)
    expect(host.engine.jobEvents(c.job_id).length).toBe(events)
  })

  test('a second completion with another result is 409 lease_not_active with ack:true saying so; the first result stands', async () => {
    await start()
    const c = await claimed()
    expect(await body(await post(host, `${WORKER}/complete`, { ...attemptOf(c), result: { a: 1 } }))).toEqual({ ok: true, ack: true })
    const error = await expectError(await post(host, `${WORKER}/complete`, { ...attemptOf(c), result: { a: 2 } }), 409, 'lease_not_active', ['ok', 'ack'])
    expect(error).toMatchObject({ ok: false, ack: true, detail: expect.stringContaining('already reported SUCCEEDED with a different result') })
    expect(host.engine.getJob(c.job_id).result).toEqual({ a: 1 })
  })

  test('the one-job /complete takes no progress or note (only a batch completion does): 400 naming the field, and the job runs on', async () => {
    await start()
    const c = await claimed()
    await expectInvalid(await post(host, `${WORKER}/complete`, { ...attemptOf(c), progress: 1 }), 'progress')
    await expectInvalid(await post(host, `${WORKER}/complete`, { ...attemptOf(c), note: 'done' }), 'note')
    expect(host.engine.getJob(c.job_id).state).toBe('RUNNING')
  })

  test('a completion of a failed attempt is 409 lease_not_active with ok:false, ack:true', async () => {
    await start()
    const c = await claimed()
    await post(host, `${WORKER}/fail`, { ...attemptOf(c), error: { message: 'boom' } })
    const error = await expectError(await post(host, `${WORKER}/complete`, attemptOf(c)), 409, 'lease_not_active', ['ok', 'ack'])
    expect(error).toMatchObject({ ok: false, ack: true })
  })

  test('a worker whose lease expired for its silence is not handed the job again by the claim it left waiting: that claim ends with nothing, and a worker heard from takes the job', async () => {
    await start()
    const c = await claimed('silent')
    const silent = await waitingClaim('silent')
    const heard = await waitingClaim('heard')
    clock.advance(35_001)
    // The host's reaper finds the lease due within a second, and the job's backoff then ends.
    await until(() => host.engine.getJob(c.job_id).state === 'QUEUED', 5000, 'the lease expired')
    clock.advance(host.engine.getJob(c.job_id).next_retry_at! - clock.now())
    expect(await heard.answer).toMatchObject({ claimed: true, job_id: c.job_id })
    expect(await silent.answer).toEqual({ claimed: false })
  })

  test('a completion after the lease expired and the job was requeued is 409 lease_expired, ok:false, ack:true', async () => {
    await start()
    const c = await claimed()
    clock.advance(35_001)
    host.engine.reap()
    expect(host.engine.getJob(c.job_id).state).toBe('QUEUED')
    const error = await expectError(await post(host, `${WORKER}/complete`, attemptOf(c)), 409, 'lease_expired', ['ok', 'ack'])
    expect(error).toMatchObject({ ok: false, ack: true })
    expect(host.engine.getJob(c.job_id).state).toBe('QUEUED')
  })

  test('a wrong attempt_id is 409 with ok:false, ack:false; a wrong token 409 lease_token_mismatch; 404 unknown job with ack:true (nothing to deliver); 403 other worker with ack:false', async () => {
    await start()
    const c = await claimed()
    const error = await expectError(await post(host, `${WORKER}/complete`, { ...attemptOf(c), attempt_id: UNKNOWN_ID }), 409, 'attempt_mismatch', ['ok', 'ack'])
    expect(error).toMatchObject({ ok: false, ack: false })
    await expectError(await post(host, `${WORKER}/complete`, { ...attemptOf(c), lease_token: 'forged' }), 409, 'lease_token_mismatch', ['ok', 'ack'])
    expect(await expectError(await post(host, `${WORKER}/complete`, { ...attemptOf(c), job_id: UNKNOWN_ID }), 404, 'job_not_found', ['ok', 'ack'])).toMatchObject({ ok: false, ack: true })
    expect(await expectError(await post(host, `${WORKER}/complete`, { ...attemptOf(c), worker_id: 'w9' }), 403, 'worker_mismatch', ['ok', 'ack'])).toMatchObject({ ok: false, ack: false })
    expect(host.engine.getJob(c.job_id).state).toBe('RUNNING')
  })

  test('a bad body is 400 naming the fields', async () => {
    await start()
    const c = await claimed()
    const { attempt_id: _a, ...noAttempt } = attemptOf(c)
    await expectInvalid(await post(host, `${WORKER}/complete`, noAttempt), 'attempt_id')
    await expectInvalid(await post(host, `${WORKER}/complete`, { ...attemptOf(c), message_id: 5 }), 'message_id')
    await expectInvalid(await post(host, `${WORKER}/complete`, { ...attemptOf(c), extra: 1 }), 'extra')
  })
})

describe('POST /internal/worker/fail', () => {
  test('a retryable failure with attempts left requeues: {ok, ack, requeued:true, dlq:false}', async () => {
    await start()
    const c = await claimed('w1', { max_attempts: 2 })
    const res = await post(host, `${WORKER}/fail`, { ...attemptOf(c), error: { code: 'E', message: 'flaky', stack: 'trace', retryable: true } })
    expect(res.status).toBe(200)
    const answer = await body(res)
    expect(keys(answer)).toEqual(['ack', 'dlq', 'ok', 'requeued'])
    expect(answer).toEqual({ ok: true, ack: true, requeued: true, dlq: false })
    const job = host.engine.getJob(c.job_id)
    expect(job.state).toBe('QUEUED')
    expect(job.next_retry_at).toBeGreaterThan(clock.now())
    // Not eligible before its backoff; then the second attempt, which dead-letters.
    expect(await claimNow('w1')).toEqual({ claimed: false })
    clock.advance(job.next_retry_at! - clock.now())
    const again = await claimNow('w1')
    expect(again).toMatchObject({ claimed: true, job_id: c.job_id })
    expect(again.message_id).not.toBe(c.message_id) // the requeue wrote a new stream message
    const last = await body(await post(host, `${WORKER}/fail`, { ...attemptOf(again), error: { retryable: true } }))
    expect(last).toEqual({ ok: true, ack: true, requeued: false, dlq: true })
    expect(host.engine.getJob(c.job_id)).toMatchObject({ state: 'FAILED', dead_letter: true })
    const view = (await body(await host.call(`${QUEUE}/jobs/${c.job_id}`))).job
    expect(view.dead_letter).toBe(true)
  })

  test('a failure that is not retryable is final: requeued:false, dlq:false, job FAILED', async () => {
    await start()
    const c = await claimed('w1', { max_attempts: 5 })
    const answer = await body(await post(host, `${WORKER}/fail`, { ...attemptOf(c), error: { message: 'bad input' } }))
    expect(answer).toEqual({ ok: true, ack: true, requeued: false, dlq: false })
    expect(host.engine.getJob(c.job_id).state).toBe('FAILED')
  })

  test('a repeated failure answers as the first, one with another error is 409 lease_not_active (ack); errors: 409 lease_expired (ack), 400 naming error', async () => {
    await start()
    const c = await claimed('w1', { max_attempts: 3 })
    const req = { ...attemptOf(c), error: { retryable: true } }
    const first = await body(await post(host, `${WORKER}/fail`, req))
    expect(await body(await post(host, `${WORKER}/fail`, req))).toEqual(first)
    const other = await expectError(await post(host, `${WORKER}/fail`, { ...attemptOf(c), error: { retryable: false } }), 409, 'lease_not_active', ['ok', 'ack'])
    expect(other).toMatchObject({ ok: false, ack: true, detail: expect.stringContaining('already reported FAILED with a different error') })
    await expectInvalid(await post(host, `${WORKER}/fail`, attemptOf(c)), 'error')
    await expectInvalid(await post(host, `${WORKER}/fail`, { ...attemptOf(c), error: { retryable: 'yes' } }), 'error.retryable')
    clock.advance(60_000)
    const d = await claimed('w2', { queue: 'other' })
    clock.advance(35_001)
    const error = await expectError(await post(host, `${WORKER}/fail`, { ...attemptOf(d, 'w2'), error: {} }), 409, 'lease_expired', ['ok', 'ack'])
    expect(error).toMatchObject({ ok: false, ack: true })
  })
})

describe('POST /internal/worker/batch (not in the seed: reports and a claim in one round trip)', () => {
  const refOf = (c: any) => ({ job_id: c.job_id, attempt_id: c.attempt_id, lease_token: c.lease_token })

  test('completes, fails and heartbeats several jobs and claims the next ones in one request, each answered as its own route would', async () => {
    await start()
    const jobs = [await submit(host), await submit(host), await submit(host)]
    const first = await body(await post(host, `${WORKER}/batch`, { worker_id: 'w1', claim: { streams: ['default'], max_jobs: 2 } }))
    expect(first).toMatchObject({ heartbeats: [], completed: [], failed: [] })
    expect(first.jobs.map((j: any) => j.job_id)).toEqual([jobs[0].job_id, jobs[1].job_id])
    expect(keys(first.jobs[0])).toEqual(WORKER_CLAIM_KEYS)
    const [a, b] = first.jobs
    const answer = await body(
      await post(host, `${WORKER}/batch`, {
        worker_id: 'w1',
        heartbeat: [{ job_id: b.job_id, lease_token: b.lease_token, progress: 0.5 }],
        complete: [{ ...refOf(a), result: { ok: true } }],
        fail: [{ ...refOf(b), error: { message: 'boom' } }],
        claim: { streams: ['default'], max_jobs: 5 },
      }),
    )
    expect(answer.heartbeats).toEqual([{ job_id: b.job_id, ok: true, lease_expires_at: expect.stringMatching(ISO_MS), cancel_requested: false }])
    expect(answer.completed).toEqual([{ job_id: a.job_id, ok: true, ack: true }])
    expect(answer.failed).toEqual([{ job_id: b.job_id, ok: true, ack: true, requeued: false, dlq: false }])
    expect(answer.jobs.map((j: any) => j.job_id)).toEqual([jobs[2].job_id])
    expect(host.engine.getJob(a.job_id).state).toBe('DONE')
    expect(host.engine.getJob(b.job_id).state).toBe('FAILED')
  })

  test('a batch completion or failure repeated with another result or error is refused lease_not_active with ack:true; the same one answers as the first', async () => {
    await start()
    const [c, d] = [await claimed('w1'), await claimed('w1')]
    const report = { worker_id: 'w1', complete: [{ ...refOf(c), result: { a: 1 } }], fail: [{ ...refOf(d), error: { code: 'e', message: 'm' } }] }
    const first = await body(await post(host, `${WORKER}/batch`, report))
    expect(await body(await post(host, `${WORKER}/batch`, report))).toEqual(first)
    const changed = await body(
      await post(host, `${WORKER}/batch`, { worker_id: 'w1', complete: [{ ...refOf(c), result: { a: 2 } }], fail: [{ ...refOf(d), error: { code: 'e', message: 'other' } }] }),
    )
    expect(changed.completed).toEqual([{ job_id: c.job_id, ok: false, ack: true, code: 'lease_not_active', detail: expect.stringContaining('different result') }])
    expect(changed.failed).toEqual([{ job_id: d.job_id, ok: false, ack: true, code: 'lease_not_active', detail: expect.stringContaining('different error') }])
  })

  test('a completion repeated after its job was purged is refused job_not_found with ack:true: nothing is left to redeliver', async () => {
    await start()
    const c = await claimed('w1')
    const report = { worker_id: 'w1', complete: [refOf(c)], fail: [{ ...refOf(c), error: { message: 'late' } }] }
    expect((await body(await post(host, `${WORKER}/batch`, report))).completed).toEqual([{ job_id: c.job_id, ok: true, ack: true }])
    expect((await post(host, '/api/jobs/bulk/purge', { states: ['DONE'] })).status).toBe(200)
    const again = await body(await post(host, `${WORKER}/batch`, report))
    expect(again.completed).toEqual([{ job_id: c.job_id, ok: false, ack: true, code: 'job_not_found', detail: expect.any(String) }])
    expect(again.failed).toEqual([{ job_id: c.job_id, ok: false, ack: true, code: 'job_not_found', detail: expect.any(String) }])
    // The one-job routes say the same as the batch's slots.
    const complete = await expectError(await post(host, `${WORKER}/complete`, { ...attemptOf(c), result: {} }), 404, 'job_not_found', ['ok', 'ack'])
    const fail = await expectError(await post(host, `${WORKER}/fail`, { ...attemptOf(c), error: { message: 'late' } }), 404, 'job_not_found', ['ok', 'ack'])
    expect([complete, fail]).toMatchObject([{ ok: false, ack: true }, { ok: false, ack: true }])
  })

  test('a refused report carries its code (409 body: ok:false, ack) and does not fail the others', async () => {
    await start()
    const c = await claimed('w1')
    const answer = await body(
      await post(host, `${WORKER}/batch`, {
        worker_id: 'w1',
        complete: [{ ...refOf(c), lease_token: 'not-the-token' }, refOf(c)],
      }),
    )
    expect(answer.completed).toEqual([
      { job_id: c.job_id, ok: false, ack: false, code: 'lease_token_mismatch', detail: expect.any(String) },
      { job_id: c.job_id, ok: true, ack: true },
    ])
  })

  test('a batch claim that finds nothing long-polls, and a submit wakes it with up to max_jobs jobs', async () => {
    await start()
    const { answer: waiting } = await waitingPost(host, `${WORKER}/batch`, { worker_id: 'w1', claim: { streams: ['default'], max_jobs: 3, max_wait_ms: 10_000 } }, 10_000)
    // Two jobs in one commit (a batch submit): the waiting claim is granted both inside that commit.
    const submitted = await host.engine.run(() => host.engine.submitMany([1, 2].map(() => ({ job_type: 'generic', cost_units: 1 }))))
    const res = await waiting
    const text = await res.text()
    // Answered from that commit (replyNow): a whole JSON answer, as Koa would send it.
    expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8')
    expect(Number(res.headers.get('content-length'))).toBe(Buffer.byteLength(text))
    const answer = JSON.parse(text)
    expect(answer.jobs.map((j: any) => j.job_id)).toEqual(submitted.map((s) => (s.ok ? s.value.job.id : null)))
  })

  test('an exchange that carries a heartbeat is answered at once though its claim asks to wait, its lease extended from now', async () => {
    await start()
    const c = await claimed('w1')
    clock.advance(10_000)
    const exchange = post(host, `${WORKER}/batch`, {
      worker_id: 'w1',
      heartbeat: [{ job_id: c.job_id, lease_token: c.lease_token, progress: 0.5 }],
      claim: { streams: ['default'], max_jobs: 7, max_wait_ms: 20_000 },
    }).then(body)
    // Well before the 20 s its claim asked to wait (nothing is queued).
    const answer = await Promise.race([exchange, new Promise((resolve) => setTimeout(() => resolve('still waiting after 5 s'), 5_000))])
    expect(answer).toEqual({
      heartbeats: [{ job_id: c.job_id, ok: true, lease_expires_at: new Date(T0 + 10_000 + 35_000).toISOString(), cancel_requested: false }],
      completed: [],
      failed: [],
      jobs: [],
      claim_waited_ms: 0,
    })
  })

  test('a claim that got nothing says claim_waited_ms 0, though it waited out max_wait_ms', async () => {
    await start()
    const answer = await body(await post(host, `${WORKER}/batch`, { worker_id: 'cwm', claim: { streams: ['empty-q'], max_jobs: 2, max_wait_ms: 200 } }))
    expect(answer).toEqual({ heartbeats: [], completed: [], failed: [], jobs: [], claim_waited_ms: 0 })
  })

  test('max_jobs is 1 to 256: 400 naming the field, for the whole request', async () => {
    await start()
    await expectInvalid(await post(host, `${WORKER}/batch`, { worker_id: 'w1', claim: { streams: ['default'], max_jobs: 0 } }), 'claim.max_jobs')
    await expectInvalid(await post(host, `${WORKER}/batch`, { worker_id: 'w1', claim: { streams: ['default'], max_jobs: 257 } }), 'claim.max_jobs')
  })

  test('each report is atomic on its own: one that fails its schema or holds a value JSON cannot carry is refused in its slot (400 invalid_request), and the others are applied', async () => {
    await start()
    for (let i = 0; i < 4; i++) await submit(host)
    const [a, b, c, d] = (await body(await post(host, `${WORKER}/batch`, { worker_id: 'w1', claim: { streams: ['default'], max_jobs: 4 } }))).jobs
    const answer = await body(
      await post(host, `${WORKER}/batch`, {
        worker_id: 'w1',
        heartbeat: [
          { job_id: c.job_id, lease_token: c.lease_token, progress: 2 },
          { job_id: d.job_id, lease_token: d.lease_token, progress: 0.5 },
        ],
        complete: [
          { ...refOf(a), result: { ok: 1 } },
          { ...refOf(b), result: { s: '\ud800' } }, // a lone surrogate: no UTF-8 text holds it
          { ...refOf(c), note: 'n'.repeat(MAX_NOTE_CHARS + 1) },
          { attempt_id: d.attempt_id, lease_token: d.lease_token },
        ],
        claim: { streams: ['default'], max_jobs: 1, max_wait_ms: 10_000 },
      }),
    )
    expect(answer.heartbeats).toEqual([
      { job_id: c.job_id, ok: false, code: 'invalid_request', detail: expect.stringMatching(/^heartbeat\.0\.progress: /) },
      { job_id: d.job_id, ok: true, lease_expires_at: expect.stringMatching(ISO_MS), cancel_requested: false },
    ])
    expect(answer.completed).toEqual([
      { job_id: a.job_id, ok: true, ack: true },
      { job_id: b.job_id, ok: false, ack: false, code: 'invalid_request', detail: 'complete.1.result.s: must be well-formed Unicode (no lone surrogates: "\\ud800" alone has no UTF-8 form)' },
      { job_id: c.job_id, ok: false, ack: false, code: 'invalid_request', detail: expect.stringMatching(/^complete\.2\.note: /) },
      { job_id: '', ok: false, ack: false, code: 'invalid_request', detail: expect.stringMatching(/^complete\.3\.job_id: /) },
    ])
    expect(host.engine.getJob(a.job_id).state).toBe('DONE')
    for (const job of [b, c, d]) expect(host.engine.getJob(job.job_id).state).toBe('RUNNING')
    // Only the refused reports are left to send again, on their own.
    const again = await body(await post(host, `${WORKER}/batch`, { worker_id: 'w1', complete: [{ ...refOf(b), result: { s: 'fixed' } }] }))
    expect(again.completed).toEqual([{ job_id: b.job_id, ok: true, ack: true }])
  })

  test("a report refused by its schema carries in its slot the code and detail of its one-job route's 400 (the field named from the batch's body), plus ok: false and ack: false; the one-job route answers the plain {detail, code}", async () => {
    await start()
    const c = await claimed()
    const single = await expectError(await post(host, `${WORKER}/complete`, { ...attemptOf(c), result: { s: '\ud800' } }), 400, 'invalid_request')
    expect(single.detail).toMatch(/^result\.s: /)
    const answer = await body(await post(host, `${WORKER}/batch`, { worker_id: 'w1', complete: [{ ...refOf(c), result: { s: '\ud800' } }] }))
    expect(answer.completed).toEqual([{ job_id: c.job_id, ok: false, ack: false, code: single.code, detail: `complete.0.${single.detail}` }])
    expect(host.engine.getJob(c.job_id).state).toBe('RUNNING')
  })

  test('what makes the body itself unusable refuses the whole request, 400 naming the field, and nothing of it is applied', async () => {
    await start()
    const c = await claimed('w1')
    const good = { ...refOf(c), result: 1 }
    for (const [json, field] of [
      [[{ worker_id: 'w1', complete: [good] }], '(body)'],
      [{ complete: [good] }, 'worker_id'],
      [{ worker_id: '\ud800', complete: [good] }, 'worker_id'],
      [{ worker_id: 'w1', complete: good }, 'complete'],
      [{ worker_id: 'w1', complete: Array.from({ length: MAX_BATCH_ITEMS + 1 }, () => good) }, 'complete'],
      [{ worker_id: 'w1', complete: [good], claim: { streams: ['\ud800'], max_jobs: 1 } }, 'claim.streams.0'],
      [{ worker_id: 'w1', complete: [good], extra: true }, '(body)'],
    ] as const) {
      await expectInvalid(await post(host, `${WORKER}/batch`, json), field)
    }
    expect(host.engine.getJob(c.job_id).state).toBe('RUNNING')
  })

  test('docs/api.md\'s batch section says what the host answers: a body that is not JSON is 400 invalid_json, a claim without max_jobs is 400 naming claim.max_jobs', async () => {
    await start()
    const nan = await host.call(`${WORKER}/batch`, { method: 'POST', body: '{"worker_id":"w1","complete":[{"result":NaN}]}', headers: { 'content-type': 'application/json' } })
    await expectError(nan, 400, 'invalid_json')
    await expectInvalid(await post(host, `${WORKER}/batch`, { worker_id: 'w1', claim: { streams: ['default'] } }), 'claim.max_jobs')
    const doc = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8')
    const section = doc.slice(doc.indexOf('### Batches'), doc.indexOf('\n### ', doc.indexOf('### Batches') + 1))
    expect(section).toMatch(/not JSON is `400 invalid_json`/)
    expect(section).toMatch(/`streams` and `max_jobs` \(1–256\), both required/)
    expect(section).not.toMatch(/every part is optional/i)
  })
})
