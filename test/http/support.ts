/**
 * Shared pieces of the HTTP tests: the field lists the views must show (seeds + the extras
 * src-main/http/views/ documents), error assertions, and a digest of the database for "nothing changed".
 */
import { afterEach, expect, vi } from 'vitest'
import type { HostConfig } from '../../src-main/config'
import { ManualClock } from '../../src-main/engine/rules/clock'
import { startTestHost, type TestHost } from '../helpers/host'
import { database } from '../helpers/database'
import { until } from '../helpers/until'

export const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/

export const PULL = '/api/system/scheduler/leases'
export const QUEUE = '/api/scheduler'
export const WORKER = '/internal/worker'

const sorted = (keys: readonly string[]) => [...keys].sort()

/** the pull contract's lease, exactly. */
export const PULL_LEASE_KEYS = sorted(['lease_id', 'job_id', 'worker_id', 'capacity_units', 'issued_at', 'expires_at', 'last_heartbeat'])
/** the pull contract's job, exactly. */
export const PULL_JOB_KEYS = sorted([
  'job_id',
  'type',
  'priority',
  'requested_units',
  'unique',
  'state',
  'payload',
  'idempotency_key',
  'tags',
  'max_runtime_s',
  'lease_id',
  'created_at',
  'updated_at',
])
/** the queue contract's JobIntent plus the model's extra fields (views/queue.ts queueJob). */
export const QUEUE_JOB_KEYS = sorted([
  // the queue contract
  'job_id',
  'addon_id',
  'job_type',
  'priority',
  'cost_units',
  'constraints',
  'payload',
  'state',
  'created_at',
  'updated_at',
  'claimed_by',
  'claim_expires_at',
  'lease_id',
  'attempts',
  'next_retry_at',
  // documented extras
  'run_at',
  'unique',
  'tags',
  'max_runtime_s',
  'queue',
  'max_attempts',
  'client_request_id',
  'cancel_requested',
  'progress',
  'note',
  'dead_letter',
])
/** The job as the reads show it (GET /jobs/{id}, GET /jobs): plus why it waits and the schedule that made it (views/queue.ts queueJobRead). */
export const QUEUE_JOB_READ_KEYS = sorted([...QUEUE_JOB_KEYS, 'waiting_reason', 'waiting_until', 'schedule'])
/** the queue contract's Lease plus who holds it and how it ended (views/queue.ts queueLease); never the token. */
export const QUEUE_LEASE_KEYS = sorted([
  'lease_id',
  'job_id',
  'addon_id',
  'cost_units',
  'ttl_sec',
  'state',
  'granted_at',
  'last_heartbeat_at',
  'expires_at',
  // documented extras
  'worker_id',
  'released_at',
  'release_status',
  'fence',
])
/** the queue contract's JobResult, exactly. */
export const QUEUE_RESULT_KEYS = sorted(['job_id', 'status', 'result_data', 'error', 'started_at', 'finished_at', 'attempts'])
/** the worker contract's claim answer plus the extras worker-api.ts documents (job type, lease id, max runtime). */
export const WORKER_CLAIM_KEYS = sorted([
  'claimed',
  'job_id',
  'attempt_id',
  'lease_token',
  'stream',
  'message_id',
  'payload',
  'lease_ttl_seconds',
  'heartbeat_interval_seconds',
  // documented extras
  'job_type',
  'lease_id',
  'max_runtime_s',
])

export const keys = (value: unknown): string[] => Object.keys(value as object).sort()

export async function body(res: Response): Promise<any> {
  const text = await res.text()
  return text === '' ? undefined : JSON.parse(text)
}

/** The answer is the documented error: status, code, `{detail, code}` (+ extra keys), no stack. */
export async function expectError(res: Response, status: number, code: string, extraKeys: string[] = []): Promise<any> {
  const text = await res.text()
  expect(res.status, text).toBe(status)
  expect(res.headers.get('content-type')).toMatch(/application\/json/)
  const error = JSON.parse(text)
  expect(error.code).toBe(code)
  expect(typeof error.detail).toBe('string')
  expect(keys(error)).toEqual(sorted(['detail', 'code', ...extraKeys]))
  expect(text).not.toMatch(/\bat .*\.(ts|js):\d+/) // no stack trace
  return error
}

/** 400 invalid_request whose detail names every given field. */
export async function expectInvalid(res: Response, ...fields: string[]): Promise<any> {
  const error = await expectError(res, 400, 'invalid_request')
  for (const field of fields) expect(error.detail).toContain(field)
  return error
}

/** Row counts of every table plus the last event id: equal digests mean nothing was written. */
export function dbDigest(host: TestHost): string {
  const db = database(host.engine)
  const tables = db
    .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '__drizzle%' ORDER BY name")
    .all() as { name: string }[]
  const parts = tables.map(({ name }) => `${name}=${(db.prepare(`SELECT COUNT(*) AS n FROM "${name}"`).get() as { n: number }).n}`)
  const maxEvent = (db.prepare('SELECT COALESCE(MAX(id), 0) AS m FROM events').get() as { m: number }).m
  const states = db.prepare('SELECT state, COUNT(*) AS n FROM jobs GROUP BY state ORDER BY state').all()
  const leaseStates = db.prepare('SELECT state, COUNT(*) AS n FROM leases GROUP BY state ORDER BY state').all()
  return JSON.stringify({ parts, maxEvent, states, leaseStates })
}

/** Submits through the queue API and returns the job view. */
export async function submit(host: TestHost, json: Record<string, unknown> = {}): Promise<any> {
  const res = await host.call(`${QUEUE}/jobs/submit`, { method: 'POST', json: { job_type: 'generic', cost_units: 1, ...json } })
  const answer = await body(res)
  expect(res.status, JSON.stringify(answer)).toBe(201)
  return answer.job
}

export const post = (host: TestHost, path: string, json: unknown, token?: string | null) =>
  host.call(path, { method: 'POST', json, ...(token === undefined ? {} : { token }) })

export { until } from '../helpers/until'

/**
 * Posts a claim that is to wait `waitMs` (its `max_wait_ms`) and resolves once the host has begun
 * that wait, without answering it: the host runs in this process, so the wait's timer being armed
 * is seen directly. A test then makes the work the claim waits for, with no sleep; `answer` is the
 * response still to come.
 */
export async function waitingPost(host: TestHost, path: string, json: unknown, waitMs: number): Promise<{ answer: Promise<Response> }> {
  const armed = vi.spyOn(globalThis, 'setTimeout')
  let answered = false
  try {
    const answer = post(host, path, json).then((res) => {
      answered = true
      return res
    })
    await until(() => armed.mock.calls.some(([, ms]) => ms === waitMs) || answered, 5000, `a claim waiting ${waitMs} ms`)
    expect(answered, 'the claim was answered at once').toBe(false)
    return { answer }
  } finally {
    armed.mockRestore()
  }
}

export const UNKNOWN_ID = '00000000-0000-4000-8000-000000000000'

/** The instant the API tests start from: the contracts' own example time. */
export const API_T0 = Date.parse('2026-02-06T20:10:00.000Z')

/**
 * A real host on a ManualClock at API_T0 for each test that calls `start()`, disposed after
 * each test. `host()` and `clock()` read the current ones.
 */
export function clockedHost(defaults: Partial<HostConfig>) {
  let current: { host: TestHost; clock: ManualClock } | undefined
  afterEach(async () => {
    await current?.host.dispose()
    current = undefined
  })
  return async (overrides: Partial<HostConfig> = {}): Promise<{ host: TestHost; clock: ManualClock }> => {
    const clock = new ManualClock(API_T0)
    current = { host: await startTestHost({ busy: 0, ...defaults, ...overrides }, { clock }), clock }
    return current
  }
}
