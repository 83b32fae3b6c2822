/**
 * A host killed (SIGKILL) and started again on the same data dir: its local workers died with it
 * (they exit when their IPC channel closes), so the leases they held expire as the new host
 * starts (`host_restarted`), not after their TTL + grace. A worker of another process may outlive
 * the host: its lease is left to run.
 */
import { readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { type ServeProcess, startServe } from '../helpers/process'
import { until } from '../helpers/until'
import { dataDirWith, HOLD } from '../worker/support'
import { QUEUE, WORKER } from './support'

/** Long enough that only the rule under test can end a lease while the test runs. */
const LEASE_TTL_S = 60

const dataDir = dataDirWith({ 'hold.mjs': HOLD })
let serve: ServeProcess | undefined

afterEach(async () => {
  if (serve && serve.child.exitCode === null && serve.child.signalCode === null) {
    serve.child.kill('SIGKILL')
    await serve.exited
  }
  rmSync(dataDir, { recursive: true, force: true })
})

async function start(): Promise<(path: string, json?: unknown) => Promise<any>> {
  serve = await startServe(['--data-dir', dataDir, '--port', '0', '--busy', '0', '--workers', '1', '--lease-ttl-s', String(LEASE_TTL_S)])
  const { url } = serve
  const token = readFileSync(join(dataDir, 'token'), 'utf8').trim()
  return async (path: string, json?: unknown) => {
    const res = await fetch(`${url}${path}`, {
      method: json === undefined ? 'GET' : 'POST',
      headers: { authorization: `Bearer ${token}`, ...(json === undefined ? {} : { 'content-type': 'application/json' }) },
      body: json === undefined ? undefined : JSON.stringify(json),
    })
    return res.json()
  }
}

describe('host restart after a crash', () => {
  test('the leases of the last host\'s local workers expire at the start (host_restarted); an external worker\'s lease is kept', async () => {
    let call = await start()
    const local = (await call(`${QUEUE}/jobs/submit`, { job_type: 'test.hold', cost_units: 1, payload: { ms: 120_000 }, max_attempts: 3 })).job
    // No local worker has a handler for `generic`: only the external worker takes it.
    const external = (await call(`${QUEUE}/jobs/submit`, { job_type: 'generic', cost_units: 1 })).job
    const claimed = await call(`${WORKER}/claim`, { worker_id: 'outside-1', streams: ['default'], job_types: ['generic'], max_wait_ms: 0 })
    expect(claimed).toMatchObject({ job_id: external.job_id })
    await until(async () => (await call(`${QUEUE}/jobs/${local.job_id}`)).job.state === 'RUNNING', 20_000, 'the local worker running its job')

    serve!.child.kill('SIGKILL')
    await serve!.exited
    call = await start()

    const [attempt] = (await call(`${QUEUE}/jobs/${local.job_id}/attempts`)).attempts
    expect(attempt).toMatchObject({ worker_id: 'local-1.1', outcome: 'TIMEOUT', disposition: 'REQUEUED', error: { code: 'lease_expired', reason: 'host_restarted' } })
    const leases = (await call('/api/leases')).leases as { worker_id: string; job_id: string }[]
    expect(leases.filter((lease) => lease.worker_id === 'outside-1').map((lease) => lease.job_id)).toEqual([external.job_id])
    const beat = await call(`${WORKER}/heartbeat`, { worker_id: 'outside-1', job_id: external.job_id, lease_token: claimed.lease_token })
    expect(beat).toMatchObject({ ok: true })
  }, 60_000)
})
