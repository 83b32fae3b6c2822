/**
 * An external worker in TypeScript: dialect 003 (claim → heartbeat → complete or fail) over
 * HTTP, through openapi-fetch and the types generated from Leasehold's OpenAPI document
 * (src-shared/api-types.ts). Every path, body and answer below is checked by the compiler
 * against the document, as the dashboard's and the CLI's calls are.
 *
 *   LEASEHOLD_TOKEN="$(cat <data-dir>/token)" npx tsx examples/external-worker.ts --url http://127.0.0.1:7878
 *
 * The token comes from LEASEHOLD_TOKEN, as `leasehold worker` takes it: a process's environment
 * is readable by its own user only, its command line by every user of the machine (`ps`).
 * `--token` works too, as it does for `leasehold`, and this process writes its title over its
 * arguments; but `npx` and `tsx` run it as their child, and their command lines keep the token
 * for as long as it runs.
 *
 * Flags: --url (or LEASEHOLD_URL), --streams a,b (the queues to take jobs from, in order; default `default`), --worker-id
 * ID, --until-idle (stop once a claim finds no job: drains what is queued, then exits 0).
 * It runs two job types: `echo` (the result is the payload) and `sleep` ({ms}: waits, with
 * heartbeats), and its claims name them (`job_types`): jobs of other types are left to the
 * workers that run them. Ctrl-C stops it after the job it runs.
 */
import { hostname } from 'node:os'
import { parseArgs } from 'node:util'
import createClient from 'openapi-fetch'
import type { components, paths } from '../src-shared/api-types'

type ClaimedJob = components['schemas']['WorkerClaimed']
type Failure = NonNullable<paths['/internal/worker/fail']['post']['requestBody']>['content']['application/json']['error']

const { values: flags } = parseArgs({
  options: {
    url: { type: 'string', default: process.env.LEASEHOLD_URL ?? 'http://127.0.0.1:7878' },
    token: { type: 'string', default: process.env.LEASEHOLD_TOKEN },
    streams: { type: 'string', default: 'default' },
    'worker-id': { type: 'string', default: `example-${hostname()}-${process.pid}` },
    'until-idle': { type: 'boolean', default: false },
  },
})
// The arguments are read (process.argv is Node's copy): the title is written over them, as
// bin/leasehold.js does, so that a --token is not left in /proc/<pid>/cmdline (not on Windows,
// where the title is the console window's).
if (process.platform !== 'win32') process.title = 'external-worker'
if (!flags.token) {
  console.error('external-worker: set LEASEHOLD_TOKEN to the token in <data-dir>/token')
  process.exit(2)
}

const api = createClient<paths>({ baseUrl: flags.url, headers: { authorization: `Bearer ${flags.token}` } })
const workerId = flags['worker-id']
const streams = flags.streams.split(',').filter(Boolean)

/** Thrown by a handler for a failure the job should not be retried for. */
class JobError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message)
  }
}

/** What each job type does: its result, or a throw. `beat` says the job still runs. */
const handlers: Record<string, (payload: unknown, beat: () => Promise<void>) => Promise<unknown>> = {
  echo: async (payload) => payload,
  sleep: async (payload, beat) => {
    const ms = (payload as { ms?: unknown } | null)?.ms
    if (typeof ms !== 'number' || ms < 0) throw new JobError('bad_payload', 'sleep needs {ms: a number ≥ 0}')
    const until = Date.now() + ms
    while (Date.now() < until) {
      await new Promise((resolve) => setTimeout(resolve, Math.min(250, until - Date.now())))
      await beat()
    }
    return { slept_ms: ms }
  },
}

/** The job's lease is gone (expired, or taken): stop, and report nothing more for it. */
class LeaseLost extends Error {}

/** Runs one claimed job under its lease: heartbeats every heartbeat_interval_seconds, then complete or fail. */
async function run(job: ClaimedJob): Promise<void> {
  const lease = { worker_id: workerId, job_id: job.job_id, lease_token: job.lease_token }
  let nextBeat = Date.now() + job.heartbeat_interval_seconds * 1000
  const beat = async () => {
    if (Date.now() < nextBeat) return
    nextBeat = Date.now() + job.heartbeat_interval_seconds * 1000
    const { data, error, response } = await api.POST('/internal/worker/heartbeat', { body: lease })
    if (response.status === 409) throw new LeaseLost(error && 'code' in error ? error.code : 'lease lost')
    if (!data) throw new Error(`heartbeat: HTTP ${response.status}`)
    if (data.cancel_requested) throw new JobError('canceled', 'the job was canceled')
  }
  const attempt = { ...lease, attempt_id: job.attempt_id, stream: job.stream, ...(job.message_id ? { message_id: job.message_id } : {}) }
  try {
    const handler = handlers[job.job_type]
    if (!handler) throw new JobError('unknown_job_type', `this worker does not run ${job.job_type}`)
    const result = await handler(job.payload, beat)
    const { data, error } = await api.POST('/internal/worker/complete', { body: { ...attempt, result } })
    console.log(data ? `${job.job_id} ${job.job_type} done` : `${job.job_id} not completed: ${error?.code}`)
  } catch (thrown) {
    if (thrown instanceof LeaseLost) return console.log(`${job.job_id} lost its lease (${thrown.message})`)
    const failure: Failure =
      thrown instanceof JobError
        ? { code: thrown.code, message: thrown.message, retryable: false }
        : { code: 'handler_error', message: String((thrown as Error)?.message ?? thrown), retryable: true }
    const { data } = await api.POST('/internal/worker/fail', { body: { ...attempt, error: failure } })
    console.log(`${job.job_id} ${job.job_type} failed: ${failure.message}${data?.requeued ? ' (requeued)' : data?.dlq ? ' (dead-lettered)' : ''}`)
  }
}

let stopping = false
process.once('SIGINT', () => (stopping = true))
process.once('SIGTERM', () => (stopping = true))

console.log(`external-worker ${workerId} taking ${Object.keys(handlers).join(', ')} from ${streams.join(', ')} at ${flags.url}`)
while (!stopping) {
  // A long poll: answers as soon as a job can be leased, or {claimed: false} after max_wait_ms.
  const { data, error, response } = await api.POST('/internal/worker/claim', {
    body: { worker_id: workerId, streams, job_types: Object.keys(handlers), max_wait_ms: flags['until-idle'] ? 0 : 10_000 },
  })
  if (!data) {
    console.error(`external-worker: claim refused: HTTP ${response.status} ${error?.code ?? ''} ${error?.detail ?? ''}`)
    process.exit(1)
  }
  if (data.claimed) await run(data)
  else if (flags['until-idle']) break
}
console.log('external-worker: stopped')
