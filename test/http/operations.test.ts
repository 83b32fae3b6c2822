/**
 * The operator's routes over real HTTP (docs/operations.md): delayed submits and run-now, retry,
 * pausing queues, and bulk retry/cancel/purge. Every answer is checked against the zod schema
 * the OpenAPI document publishes for it.
 */
import { describe, expect, test } from 'vitest'
import { MINUTE, SECOND } from '../../src-main/engine/rules/clock'
import { BulkAnswer, QueueAnswer, QueueList } from '../../src-main/http/operations'
import { JobAnswer } from '../../src-main/http/views/queue'
import type { TestHost } from '../helpers/host'
import { body, clockedHost, API_T0, expectError, expectInvalid, post, PULL, QUEUE, submit, UNKNOWN_ID, waitingPost, WORKER } from './support'

const T0 = API_T0
const startHost = clockedHost({ totalUnits: 100 })

async function ok<T>(res: Response, schema: { parse(value: unknown): T }): Promise<T> {
  const answer = await body(res)
  expect(res.status, JSON.stringify(answer)).toBe(200)
  return schema.parse(answer)
}

/** A job that ended FAILED through the worker API (not retryable, unless `retryable` says so: then with max_attempts 1 it is dead-lettered). */
async function failedJob(host: TestHost, { retryable, ...fields }: Record<string, unknown> = {}): Promise<string> {
  const job = await submit(host, { priority: 'URGENT', ...fields })
  const claim = await body(await post(host, `${WORKER}/claim`, { worker_id: 'w', streams: [job.queue] }))
  expect(claim.job_id).toBe(job.job_id)
  const fail = await post(host, `${WORKER}/fail`, { worker_id: 'w', job_id: claim.job_id, attempt_id: claim.attempt_id, lease_token: claim.lease_token, error: { message: 'no', ...(retryable === undefined ? {} : { retryable }) } })
  expect(fail.status).toBe(200)
  return job.job_id
}

const jobOf = async (host: TestHost, id: string) => (await body(await host.call(`${QUEUE}/jobs/${id}`))).job

describe('delayed jobs over HTTP', () => {
  test('run_at or delay_ms on a submit delays the job; its views show run_at and why it waits', async () => {
    const { host } = await startHost()
    const at = new Date(T0 + 10 * MINUTE).toISOString()
    const job = await submit(host, { run_at: at })
    expect(job.run_at).toBe(at)
    expect(await jobOf(host, job.job_id)).toMatchObject({ run_at: at, waiting_reason: 'scheduled', waiting_until: at })
    const plain = await submit(host)
    expect(plain.run_at).toBeNull()
    const batch = await body(await post(host, `${QUEUE}/jobs/submit-batch`, { jobs: [{ job_type: 't', cost_units: 1, delay_ms: 90_000 }] }))
    expect(batch.results[0].job.run_at).toBe(new Date(T0 + 90 * SECOND).toISOString())
    // Not claimable before then, through any API.
    const claimed = await body(await post(host, `${QUEUE}/jobs/claim`, { worker_id: 'q', limit: 5 }))
    expect(claimed.jobs.map((j: { job_id: string }) => j.job_id)).toEqual([plain.job_id])
    expect(await body(await post(host, `${PULL}/request`, { worker_id: 'p' }))).toMatchObject({ denied: true })
    expect(await body(await post(host, `${WORKER}/claim`, { worker_id: 'x', streams: ['default'] }))).toEqual({ claimed: false })
  })

  test('a job delayed past the longest timer Node sets (~24.8 days) leaves a waiting claim asleep, not woken in a loop', async () => {
    const { host } = await startHost()
    const warnings: string[] = []
    const onWarning = (warning: Error) => warnings.push(`${warning.name}: ${warning.message}`)
    process.on('warning', onWarning)
    try {
      await submit(host, { delay_ms: 30 * 24 * 60 * MINUTE })
      const claim = await post(host, `${WORKER}/claim`, { worker_id: 'x', streams: ['default'], max_wait_ms: 300 })
      expect(await body(claim)).toEqual({ claimed: false })
      await new Promise((resolve) => setTimeout(resolve, 50)) // a warning is emitted on a later tick
    } finally {
      process.off('warning', onWarning)
    }
    expect(warnings).toEqual([])
  })

  test('run_at with delay_ms is 400 naming both; a run_at that is not an ISO time is 400', async () => {
    const { host } = await startHost()
    await expectInvalid(await post(host, `${QUEUE}/jobs/submit`, { job_type: 't', cost_units: 1, run_at: new Date(T0).toISOString(), delay_ms: 5 }), 'run_at', 'delay_ms')
    await expectInvalid(await post(host, `${QUEUE}/jobs/submit`, { job_type: 't', cost_units: 1, run_at: 'tomorrow' }), 'run_at')
    // ISO-8601 all the same, but without an offset or seconds: the answer says what is missing, not that it is no ISO time.
    for (const run_at of ['2027-01-01T00:00:00', '2027-01-01T00:00Z']) {
      const res = await post(host, `${QUEUE}/jobs/submit`, { job_type: 't', cost_units: 1, run_at })
      expect(await body(res)).toEqual({ code: 'invalid_request', detail: 'run_at: must be an ISO-8601 time with seconds and an offset, such as 2027-01-01T09:00:00Z or 2027-01-01T09:00:00+01:00' })
    }
    await expectInvalid(await post(host, `${QUEUE}/jobs/submit`, { job_type: 't', cost_units: 1, delay_ms: -1 }), 'delay_ms')
  })

  test('a long-poll claim (worker API) is answered when a delayed job becomes due on the host clock', async () => {
    const { host, clock } = await startHost()
    const job = await submit(host, { delay_ms: 5 * MINUTE })
    const claim = await waitingPost(host, `${WORKER}/claim`, { worker_id: 'x', streams: ['default'], max_wait_ms: 20_000 }, 20_000)
    clock.advance(5 * MINUTE) // the host's reaper tick notices within 250 ms
    const answer = await body(await claim.answer)
    expect(answer).toMatchObject({ claimed: true, job_id: job.job_id })
  })

  test('run-now makes a delayed job claimable at once; 409 not_scheduled otherwise; 404 for an unknown job', async () => {
    const { host } = await startHost()
    const job = await submit(host, { delay_ms: 60 * MINUTE })
    const ran = await ok(await post(host, `/api/jobs/${job.job_id}/run-now`, { requested_by: 'ops' }), JobAnswer)
    expect(ran.job).toMatchObject({ job_id: job.job_id, state: 'QUEUED', run_at: null })
    expect(await body(await post(host, `${WORKER}/claim`, { worker_id: 'x', streams: ['default'] }))).toMatchObject({ claimed: true, job_id: job.job_id })
    await expectError(await post(host, `/api/jobs/${job.job_id}/run-now`, {}), 409, 'not_scheduled')
    await expectError(await post(host, `/api/jobs/${UNKNOWN_ID}/run-now`, {}), 404, 'job_not_found')
    const events = (await body(await host.call(`${QUEUE}/jobs/${job.job_id}/events`))).events
    expect(events.find((e: { type: string }) => e.type === 'JOB_RUN_NOW').data).toMatchObject({ requested_by: 'ops' })
  })
})

describe('retry over HTTP', () => {
  test('a FAILED job comes back QUEUED with a fresh budget; the timeline shows who asked and when', async () => {
    const { host, clock } = await startHost()
    const id = await failedJob(host, { max_attempts: 3 })
    clock.advance(SECOND)
    const { job } = await ok(await post(host, `/api/jobs/${id}/retry`, { requested_by: 'alice' }), JobAnswer)
    expect(job).toMatchObject({ state: 'QUEUED', attempts: 1, max_attempts: 4, dead_letter: false })
    const events = (await body(await host.call(`${QUEUE}/jobs/${id}/events`))).events as { type: string; ts: string; data: Record<string, unknown> }[]
    expect(events.map((e) => e.type)).toEqual(['JOB_SUBMITTED', 'LEASE_GRANTED', 'JOB_FAILED', 'JOB_RETRIED'])
    expect(events.at(-1)).toMatchObject({ ts: new Date(T0 + SECOND).toISOString(), data: { from: 'FAILED', requested_by: 'alice' } })
    const attempts = (await body(await host.call(`${QUEUE}/jobs/${id}/attempts`))).attempts
    expect(attempts).toHaveLength(1)
  })

  test('409 for a job that has not finished and for a DONE one; 404 for an unknown job; the body is optional', async () => {
    const { host } = await startHost()
    const queued = await submit(host)
    await expectError(await post(host, `/api/jobs/${queued.job_id}/retry`, {}), 409, 'illegal_transition')
    await expectError(await host.call(`/api/jobs/${UNKNOWN_ID}/retry`, { method: 'POST' }), 404, 'job_not_found')
    await expectInvalid(await post(host, `/api/jobs/${queued.job_id}/retry`, { by: 'x' }), 'by')
    const canceled = await submit(host)
    await post(host, `${QUEUE}/jobs/${canceled.job_id}/cancel`, {})
    expect((await host.call(`/api/jobs/${canceled.job_id}/retry`, { method: 'POST' })).status).toBe(200)
  })
})

describe('refusals over HTTP', () => {
  test("a refusal's detail names a leased job's state as the queue API shows it: RUNNING on a retry and a run-now, never LEASED", async () => {
    const { host } = await startHost()
    const job = await submit(host)
    expect(await body(await post(host, `${PULL}/request`, { worker_id: 'puller' }))).toMatchObject({ denied: false, job: { job_id: job.job_id, state: 'leased' } })
    expect((await jobOf(host, job.job_id)).state).toBe('RUNNING')
    const retry = await expectError(await post(host, `/api/jobs/${job.job_id}/retry`, {}), 409, 'illegal_transition')
    expect(retry.detail).toBe(`Job ${job.job_id} is RUNNING; only a FAILED, TIMEOUT or CANCELED job is retried`)
    const runNow = await expectError(await post(host, `/api/jobs/${job.job_id}/run-now`, {}), 409, 'not_scheduled')
    expect(runNow.detail).toBe(`Job ${job.job_id} is RUNNING; only a QUEUED job waiting for its run_at can be run now`)
  })
})

describe('who asks for an operator action', () => {
  test('requested_by is a name as a worker id is: blank, NUL-holding or space-wrapped is 400 invalid_request on every operator route, and nothing changes', async () => {
    const { host } = await startHost()
    const delayed = await submit(host, { delay_ms: 60 * MINUTE })
    const failed = await failedJob(host)
    const requests: [string, Record<string, unknown>][] = [
      [`/api/jobs/${delayed.job_id}/run-now`, {}],
      [`/api/jobs/${failed}/retry`, {}],
      ['/api/queues/reports/pause', {}],
      ['/api/jobs/bulk/retry', { job_type: 'render' }],
      [`${QUEUE}/jobs/${delayed.job_id}/cancel`, {}],
    ]
    for (const [path, rest] of requests) {
      for (const [by, why] of [['   ', 'must not be blank'], ['a\u0000b', 'must not contain control or invisible characters'], [' ops', 'must not begin or end with whitespace']]) {
        await expectInvalid(await post(host, path, { ...rest, requested_by: by }), `requested_by: ${why}`)
      }
    }
    expect(await jobOf(host, delayed.job_id)).toMatchObject({ state: 'QUEUED' })
    expect(await jobOf(host, failed)).toMatchObject({ state: 'FAILED' })
  })
})

describe('pausing queues over HTTP', () => {
  test('a paused queue hands out nothing through the pull, queue and worker APIs; resume releases it and wakes a waiting claim', async () => {
    const { host } = await startHost()
    const paused = await ok(await post(host, '/api/queues/reports/pause', { requested_by: 'ops' }), QueueAnswer)
    expect(paused.queue).toMatchObject({ queue: 'reports', paused: true, paused_by: 'ops', paused_at: new Date(T0).toISOString() })
    const job = await submit(host, { queue: 'reports' })
    expect((await post(host, `${QUEUE}/jobs/claim`, { worker_id: 'q' })).status).toBe(204)
    expect(await body(await post(host, `${PULL}/request`, { worker_id: 'p' }))).toMatchObject({ denied: true })
    expect(await body(await post(host, `${WORKER}/claim`, { worker_id: 'x', streams: ['reports'] }))).toEqual({ claimed: false })
    const batch = await body(await post(host, `${WORKER}/batch`, { worker_id: 'x', claim: { streams: ['reports'], max_jobs: 4 } }))
    expect(batch.jobs).toEqual([])
    expect(await jobOf(host, job.job_id)).toMatchObject({ state: 'QUEUED', waiting_reason: expect.stringContaining('queue reports is paused') })
    const list = await ok(await host.call('/api/queues'), QueueList)
    expect(list.queues).toEqual([{ queue: 'reports', paused: true, paused_at: new Date(T0).toISOString(), paused_by: 'ops', counts: { QUEUED: 1 } }])

    const waiting = await waitingPost(host, `${WORKER}/claim`, { worker_id: 'x', streams: ['reports'], max_wait_ms: 20_000 }, 20_000)
    const resumed = await ok(await post(host, '/api/queues/reports/resume', {}), QueueAnswer)
    expect(resumed.queue).toEqual({ queue: 'reports', paused: false, paused_at: null, paused_by: null })
    expect(await body(await waiting.answer)).toMatchObject({ claimed: true, job_id: job.job_id })
  })

  test('a queue name longer than 200 characters is 400', async () => {
    const { host } = await startHost()
    await expectInvalid(await post(host, `/api/queues/${'q'.repeat(201)}/pause`, {}))
  })
})

describe('bulk operations over HTTP', () => {
  test('bulk retry counts on a dry run, then retries exactly the matching jobs', async () => {
    const { host } = await startHost()
    const matching = [await failedJob(host, { job_type: 'render' }), await failedJob(host, { job_type: 'render' })]
    const other = await failedJob(host, { job_type: 'encode' })
    const dry = await ok(await post(host, '/api/jobs/bulk/retry', { job_type: 'render', dry_run: true }), BulkAnswer)
    expect(dry).toEqual({ action: 'retry', matched: 2, changed: 0, dry_run: true, over_capacity: [], over_capacity_count: 0, counted_at: new Date(T0).toISOString(), counted_through: host.engine.newestEventId() })
    const done = await ok(await post(host, '/api/jobs/bulk/retry', { job_type: 'render', states: ['FAILED'], requested_by: 'ops' }), BulkAnswer)
    expect(done).toEqual({ action: 'retry', matched: 2, changed: 2, dry_run: false, over_capacity: [], over_capacity_count: 0, counted_at: null, counted_through: null })
    expect(await Promise.all([...matching, other].map(async (id) => (await jobOf(host, id)).state))).toEqual(['QUEUED', 'QUEUED', 'FAILED'])
  })

  test('a bulk retry names the jobs it refused because each costs more than the total capacity: the first 100 in over_capacity, all in over_capacity_count; its dry run names the same', async () => {
    const { host } = await startHost()
    const fits = await failedJob(host, { job_type: 'render', cost_units: 10 })
    const big = await failedJob(host, { job_type: 'render', cost_units: 80 })
    const more = Array.from({ length: 100 }, () => {
      const { job } = host.engine.submit({ job_type: 'render', cost_units: 80, queue: 'big-q' })
      host.engine.cancel(job.id)
      return job.id
    })
    const refused = [big, ...more]
    host.engine.setCapacity({ total_units: 50 })
    const dry = await ok(await post(host, '/api/jobs/bulk/retry', { job_type: 'render', dry_run: true }), BulkAnswer)
    expect(dry).toMatchObject({ matched: 102, changed: 0, over_capacity_count: 101 })
    expect(dry.over_capacity.every((id) => refused.includes(id))).toBe(true)
    expect(new Set(dry.over_capacity).size).toBe(100)
    const done = await ok(await post(host, '/api/jobs/bulk/retry', { job_type: 'render' }), BulkAnswer)
    expect(done).toMatchObject({ matched: 102, changed: 1, over_capacity_count: 101 })
    expect(done.over_capacity).toHaveLength(100)
    expect(done.over_capacity.every((id) => refused.includes(id))).toBe(true)
    expect(new Set(done.over_capacity).size).toBe(100)
    expect((await jobOf(host, fits)).state).toBe('QUEUED')
    expect((await jobOf(host, big)).state).toBe('FAILED')
    const purge = await ok(await post(host, '/api/jobs/bulk/purge', { job_type: 'render', states: ['CANCELED'] }), BulkAnswer)
    expect(purge).toMatchObject({ matched: 100, changed: 100, over_capacity: [], over_capacity_count: 0 })
  })

  test("a purge given its dry run's counted_at purges exactly the jobs counted, none that finished after", async () => {
    const { host, clock } = await startHost()
    const counted = [await failedJob(host, { job_type: 'render' }), await failedJob(host, { job_type: 'render' })]
    const dry = await ok(await post(host, '/api/jobs/bulk/purge', { job_type: 'render', dry_run: true }), BulkAnswer)
    expect(dry).toMatchObject({ matched: 2, counted_at: new Date(T0).toISOString() })
    // Between the count and the operator's yes, another job of the filter finishes.
    clock.advance(5 * SECOND)
    const later = await failedJob(host, { job_type: 'render' })
    await submit(host, { queue: 'elsewhere' }) // the newest event is another job's (docs/retention.md)
    // The same time with an offset, as every other time the API takes may be written.
    const inParis = new Date(Date.parse(dry.counted_at!) + 3_600_000).toISOString().replace('Z', '+01:00')
    expect(await ok(await post(host, '/api/jobs/bulk/purge', { job_type: 'render', finished_by: inParis, dry_run: true }), BulkAnswer)).toMatchObject({ matched: 2 })
    const done = await ok(await post(host, '/api/jobs/bulk/purge', { job_type: 'render', finished_by: dry.counted_at }), BulkAnswer)
    expect(done).toMatchObject({ matched: 2, changed: 2 })
    for (const id of counted) await expectError(await host.call(`${QUEUE}/jobs/${id}`), 404, 'job_not_found')
    expect((await jobOf(host, later)).state).toBe('FAILED')
    await expectInvalid(await post(host, '/api/jobs/bulk/cancel', { all: true, finished_by: dry.counted_at }), 'finished_by')
    await expectInvalid(await post(host, '/api/jobs/bulk/purge', { all: true, finished_by: 'yesterday' }), 'finished_by')
  })

  test("a purge given its dry run's counted_through purges exactly the jobs counted: not one that finished after, in the count's own millisecond", async () => {
    // The host's clock stands still: the later job finishes at the very time of the count.
    const { host } = await startHost()
    const counted = [await failedJob(host, { job_type: 'render' }), await failedJob(host, { job_type: 'render' })]
    const dry = await ok(await post(host, '/api/jobs/bulk/purge', { job_type: 'render', dry_run: true }), BulkAnswer)
    expect(dry).toMatchObject({ matched: 2, counted_at: new Date(T0).toISOString(), counted_through: expect.any(Number) })
    const later = await failedJob(host, { job_type: 'render' })
    expect(host.engine.getJob(later).finished_at).toBe(T0)
    const done = await ok(await post(host, '/api/jobs/bulk/purge', { job_type: 'render', counted_through: dry.counted_through }), BulkAnswer)
    expect(done).toMatchObject({ matched: 2, changed: 2 })
    for (const id of counted) await expectError(await host.call(`${QUEUE}/jobs/${id}`), 404, 'job_not_found')
    expect((await jobOf(host, later)).state).toBe('FAILED')
    await expectInvalid(await post(host, '/api/jobs/bulk/cancel', { all: true, counted_through: dry.counted_through }), 'counted_through')
    await expectInvalid(await post(host, '/api/jobs/bulk/purge', { all: true, counted_through: -1 }), 'counted_through')
  })

  test('dead_letter: true retries only the jobs that ran out of attempts; a cancel of dead letters is 400 naming the field', async () => {
    const { host } = await startHost()
    const dead = await failedJob(host, { max_attempts: 1, retryable: true })
    const failed = await failedJob(host)
    expect(await jobOf(host, dead)).toMatchObject({ state: 'FAILED', dead_letter: true })
    const dry = await ok(await post(host, '/api/jobs/bulk/retry', { dead_letter: true, dry_run: true }), BulkAnswer)
    expect(dry).toMatchObject({ matched: 1, changed: 0 })
    const done = await ok(await post(host, '/api/jobs/bulk/retry', { dead_letter: true, counted_through: dry.counted_through }), BulkAnswer)
    expect(done).toMatchObject({ matched: 1, changed: 1 })
    expect([(await jobOf(host, dead)).state, (await jobOf(host, failed)).state]).toEqual(['QUEUED', 'FAILED'])
    await expectInvalid(await post(host, '/api/jobs/bulk/cancel', { dead_letter: true }), 'dead_letter')
    await expectInvalid(await post(host, '/api/jobs/bulk/retry', { dead_letter: 'yes' }), 'dead_letter')
  })

  test('retry, cancel and purge refuse an empty filter unless all: true; states outside the action are 400', async () => {
    const { host } = await startHost()
    await expectInvalid(await post(host, '/api/jobs/bulk/purge', {}), 'all: true')
    await expectInvalid(await post(host, '/api/jobs/bulk/cancel', {}), 'all: true')
    await expectInvalid(await post(host, '/api/jobs/bulk/retry', {}), 'all: true')
    await expectInvalid(await post(host, '/api/jobs/bulk/purge', { states: ['RUNNING'] }), 'states')
    await expectInvalid(await post(host, '/api/jobs/bulk/retry', { states: ['NOPE'] }), 'states')
  })

  test('a bulk cancel of RUNNING jobs takes those leased and not yet started (LEASED) too, as the queue API shows them; LEASED alone names only those', async () => {
    const { host } = await startHost()
    const leased = await submit(host, { priority: 'URGENT' })
    expect((await body(await post(host, `${PULL}/request`, { worker_id: 'puller' }))).job.job_id).toBe(leased.job_id) // LEASED until its first heartbeat
    const started = await submit(host, { priority: 'URGENT' })
    expect((await body(await post(host, `${WORKER}/claim`, { worker_id: 'w', streams: ['default'] }))).job_id).toBe(started.job_id) // RUNNING
    expect(await ok(await post(host, '/api/jobs/bulk/cancel', { states: ['LEASED'], dry_run: true }), BulkAnswer)).toMatchObject({ matched: 1 })
    expect(await ok(await post(host, '/api/jobs/bulk/cancel', { states: ['RUNNING'] }), BulkAnswer)).toMatchObject({ matched: 2, changed: 2 })
    for (const job of [leased, started]) expect((await jobOf(host, job.job_id)).cancel_requested).toBe(true)
  })

  test('bulk cancel then purge: the purged jobs are gone, the others stay', async () => {
    const { host } = await startHost()
    const inQueue = [await submit(host, { queue: 'old' }), await submit(host, { queue: 'old' })]
    const keep = await submit(host, { queue: 'new' })
    expect(await ok(await post(host, '/api/jobs/bulk/cancel', { queue: 'old' }), BulkAnswer)).toMatchObject({ matched: 2, changed: 2 })
    expect(await ok(await post(host, '/api/jobs/bulk/purge', { all: true, dry_run: true }), BulkAnswer)).toMatchObject({ matched: 2, changed: 0 })
    // The newest event is a purged job's: the purge does what its dry run counted all the same.
    expect(await ok(await post(host, '/api/jobs/bulk/purge', { queue: 'old' }), BulkAnswer)).toMatchObject({ matched: 2, changed: 2 })
    for (const job of inQueue) await expectError(await host.call(`${QUEUE}/jobs/${job.job_id}`), 404, 'job_not_found')
    expect((await jobOf(host, keep.job_id)).state).toBe('QUEUED')
  })
})
