/**
 * The external worker's transport (HttpTransport: the worker API and /api/files over HTTP) against
 * a real host whose clock the test moves: each answer the runtime acts on, read from the host's
 * real bodies — the file gate's grant, contention and halt, the retry wait, lost and refused calls.
 */
import { describe, expect, test } from 'vitest'
import { createScopedToken } from '../../src-main/data-dir/worker-tokens'
import { SECOND } from '../../src-main/engine/rules/clock'
import { LeaseLostError, type Claim } from '../../src-worker/transport'
import { HostError } from '../../src-worker/transport'
import { HttpTransport } from '../../src-worker/transport-http'
import { clockedHost, API_T0, submit } from '../http/support'

const FILE = '/work/repo/src/app.ts'
const start = clockedHost({ totalUnits: 10, leaseTtlS: 30, heartbeatGraceS: 5 })
const never = new AbortController().signal
/** A gate request for FILE by `owner_id`, under a claimed job's lease. */
const onFile = (owner_id: string, job: Claim) => ({ file: FILE, owner_id, lease_id: job.lease_id, lease_token: job.lease_token })

async function claim(transport: HttpTransport, workerId: string): Promise<Claim> {
  const { jobs } = await transport.exchange({ worker_id: workerId, claim: { streams: ['default'], max_jobs: 1, max_wait_ms: 0 } })
  expect(jobs).toHaveLength(1)
  return jobs[0]!
}

describe('HttpTransport against a real host', () => {
  test('the file gate: granted; held, with the one retry and the holder; ready at the retry; then blocked, with the report', async () => {
    const { host, clock } = await start()
    // A worker token, as a machine lent work has: the gate's requests prove their job's lease.
    const transport = new HttpTransport(host.url, createScopedToken(host.dataDir, 'worker').token)
    await submit(host, { cost_units: 2 })
    await submit(host, { cost_units: 2 })
    const [one, two] = [await claim(transport, 'w1'), await claim(transport, 'w2')]

    expect(await transport.acquireFile(onFile('w1', one))).toEqual({ granted: true })
    clock.advance(5 * SECOND)
    const retryAt = API_T0 + 5 * SECOND + 180 * SECOND
    expect(await transport.acquireFile(onFile('w2', two))).toEqual({
      granted: false,
      code: 'file_lease_held',
      retry_at: new Date(retryAt).toISOString(),
      holder: expect.objectContaining({ owner_id: 'w1', job_id: one.job_id }),
    })
    expect(await transport.waitFileRetry({ file: FILE, owner_id: 'w2', max_wait_ms: 0 }, never)).toBe(false)

    // Both jobs and the holder's file stay alive until the retry is due.
    while (clock.now() < retryAt) {
      clock.advance(Math.min(10 * SECOND, retryAt - clock.now()))
      for (const [workerId, { job_id, lease_token }] of [['w1', one], ['w2', two]] as const) {
        const { heartbeats } = await transport.exchange({ worker_id: workerId, heartbeat: [{ job_id, lease_token }] })
        expect(heartbeats).toEqual([expect.objectContaining({ job_id, ok: true })])
      }
      await transport.heartbeatFile(onFile('w1', one))
    }
    expect(await transport.waitFileRetry({ file: FILE, owner_id: 'w2', max_wait_ms: 0 }, never)).toBe(true)
    expect(await transport.acquireFile(onFile('w2', two))).toEqual({
      granted: false,
      code: 'blocked',
      blocker: expect.objectContaining({ file: FILE, requester: expect.objectContaining({ job_id: two.job_id }) }),
    })
  })

  test('a 409 is a lost lease (LeaseLostError with its code); any other refusal is a HostError with status and code', async () => {
    const { host } = await start()
    const transport = new HttpTransport(host.url, host.token)
    await submit(host, { cost_units: 2 })
    const job = await claim(transport, 'w1')
    await transport.acquireFile(onFile('w1', job))

    // The job's lease ends (completed): the file lease it held goes with it.
    const { completed } = await transport.exchange({ worker_id: 'w1', complete: [{ job_id: job.job_id, attempt_id: job.attempt_id, lease_token: job.lease_token, result: null }] })
    expect(completed).toEqual([expect.objectContaining({ job_id: job.job_id, ok: true })])
    const lost = await transport.heartbeatFile(onFile('w1', job)).catch((error: unknown) => error)
    expect(lost).toBeInstanceOf(LeaseLostError)
    expect(lost).toMatchObject({ code: expect.stringMatching(/^file_lease_/) })

    const refused = await new HttpTransport(host.url, 'not-the-token').report({ worker_id: 'w1', kind: 'handler_load_failed', detail: 'x' }).catch((error: unknown) => error)
    expect(refused).toBeInstanceOf(HostError)
    expect(refused).toMatchObject({ status: 401, code: 'unauthorized' })
    await expect(transport.report({ worker_id: 'w1', kind: 'handler_load_failed', detail: 'x' })).resolves.toBeUndefined()
  })
})
