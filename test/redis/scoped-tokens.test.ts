import { describe, expect, test } from 'vitest'
import { checkRequest } from '../../src-main/http/guard'
import { REVOKED_TOKEN_REFUSAL } from '../../src-shared/error-codes'
import { createScopedToken, revokeScopedToken } from '../../src-main/data-dir/worker-tokens'
import { startTestHost } from '../helpers/host'
import { runCliAsync } from '../helpers/process'
import { until } from '../helpers/until'

const policy = { token: 'host-token-0123456789', port: 7878, allowedHosts: [], isWorkerToken: (t: string) => t === 'worker-token-0123456789' }
const request = (path: string, token: string) => ({ path, host: '127.0.0.1:7878', origin: undefined, authorization: `Bearer ${token}` })

describe('worker-scoped tokens', () => {
  test('a worker token opens the worker routes, the file-lease requests and the API\'s document only; elsewhere the refusal says it needs the host’s token', () => {
    expect(checkRequest(request('/internal/worker/batch', 'worker-token-0123456789'), policy)).toBeNull()
    // The API's document describes the worker routes and holds no data: a worker's author reads it with the worker's token.
    expect(checkRequest(request('/api/openapi.json', 'worker-token-0123456789'), policy)).toBeNull()
    for (const verb of ['acquire', 'wait', 'heartbeat', 'release']) {
      expect(checkRequest(request(`/api/files/leases/${verb}`, 'worker-token-0123456789'), policy)).toBeNull()
    }
    // The list of every file lease names other jobs' leases: it is the host's to read.
    for (const path of ['/api/scheduler/jobs/submit', '/api/capacity', '/api/scheduler/jobs', '/internal/other', '/api/workers', '/api/files/leases', '/api/blockers', '/internal/workerx', '/api/openapi.jsonx']) {
      expect(checkRequest(request(path, 'worker-token-0123456789'), policy)).toMatchObject({ code: 'unauthorized', detail: expect.stringContaining("this route needs the host's token or an admin token") })
    }
    // A token nobody made is only "not valid": the worker token's line is for a worker token.
    expect(checkRequest(request('/api/capacity', 'not-a-token-0123456789'), policy)).toEqual({ code: 'unauthorized', detail: 'A valid Authorization: Bearer token is required' })
    expect(checkRequest(request('/api/scheduler/jobs/submit', 'host-token-0123456789'), policy)).toBeNull()
  })

  test('a worker token refused on a route it does not open is told the route needs the host\'s token or an admin token (which opens it too)', () => {
    expect(checkRequest(request('/api/capacity', 'worker-token-0123456789'), policy)!.detail).toMatch(/this route needs the host's token or an admin token$/)
  })

  test('a revoked scoped token is told it was revoked (401 unauthorized), on the hot routes and the others; a token nobody made is only "not valid"', async () => {
    const host = await startTestHost()
    try {
      const worker = createScopedToken(host.dataDir, 'worker')
      const admin = createScopedToken(host.dataDir, 'admin')
      revokeScopedToken(host.dataDir, worker.id)
      revokeScopedToken(host.dataDir, admin.id)
      const revoked = { code: 'unauthorized', detail: REVOKED_TOKEN_REFUSAL }
      for (const token of [worker.token, admin.token]) {
        const claim = await host.call('/internal/worker/claim', { method: 'POST', token, json: { worker_id: 'w', streams: ['default'], max_wait_ms: 0 } })
        expect(claim.status).toBe(401)
        expect(await claim.json()).toEqual(revoked)
        const submit = await host.call('/api/scheduler/jobs/submit', { method: 'POST', token, json: { job_type: 't', cost_units: 1 } })
        expect(submit.status).toBe(401)
        expect(await submit.json()).toEqual(revoked)
        expect(await (await host.call('/api/capacity', { token })).json()).toEqual(revoked)
      }
      expect(await (await host.call('/api/capacity', { token: 'f'.repeat(64) })).json()).toEqual({ code: 'unauthorized', detail: 'A valid Authorization: Bearer token is required' })
    } finally {
      await host.dispose()
    }
  })

  test('leasehold token create --scope worker prints a token that can claim but not submit; list shows it; revoke ends it', async () => {
    const host = await startTestHost()
    try {
      const created = await runCliAsync(['token', 'create', '--scope', 'worker', '--data-dir', host.dataDir])
      expect(created.status).toBe(0)
      const token = created.stdout.trim()
      expect(token).toMatch(/^[0-9a-f]{64}$/)
      const id = /token (\w+) \(scope worker\)/.exec(created.stderr)![1]!
      const claim = () => host.call('/internal/worker/claim', { method: 'POST', token, json: { worker_id: 'w', streams: ['default'], max_wait_ms: 0 } })
      expect((await claim()).status).toBe(200)
      expect((await host.call('/api/scheduler/jobs/submit', { method: 'POST', token, json: { job_type: 't', cost_units: 1 } })).status).toBe(401)
      expect((await host.call('/api/capacity', { method: 'PUT', token, json: { total_units: 1 } })).status).toBe(401)
      const listed = await runCliAsync(['token', 'list', '--json', '--data-dir', host.dataDir])
      expect(JSON.parse(listed.stdout)).toEqual([expect.objectContaining({ id, scope: 'worker', revoked_at: null })])
      expect(listed.stdout).not.toContain(token)
      expect((await runCliAsync(['token', 'revoke', id, '--data-dir', host.dataDir])).status).toBe(0)
      await until(async () => (await claim()).status === 401, 5000, 'revoked token refused')
      expect((await runCliAsync(['token', 'revoke', 'nope', '--data-dir', host.dataDir])).stderr).toMatch(/^leasehold: there is no token nope/m)
      expect((await runCliAsync(['token', 'create', '--scope', 'root', '--data-dir', host.dataDir])).status).toBe(2)
    } finally {
      await host.dispose()
    }
  })

  test('leasehold token create --scope admin prints a token that does all the host’s own does, through the hot routes and the others, until it is revoked', async () => {
    const host = await startTestHost()
    try {
      const created = await runCliAsync(['token', 'create', '--scope', 'admin', '--data-dir', host.dataDir])
      expect(created.status).toBe(0)
      const token = created.stdout.trim()
      const id = /token (\w+) \(scope admin\)/.exec(created.stderr)![1]!
      const submit = () => host.call('/api/scheduler/jobs/submit', { method: 'POST', token, json: { job_type: 't', cost_units: 1 } })
      expect((await submit()).status).toBe(201)
      expect((await host.call('/api/capacity', { method: 'PUT', token, json: { total_units: 50 } })).status).toBe(200)
      expect((await host.call('/internal/worker/claim', { method: 'POST', token, json: { worker_id: 'w', streams: ['default'], max_wait_ms: 0 } })).status).toBe(200)
      const listed = await runCliAsync(['jobs', '--json', '--url', host.url, '--token', token])
      expect(listed.status).toBe(0)
      expect(JSON.parse(listed.stdout).jobs).toHaveLength(1)
      expect((await runCliAsync(['token', 'revoke', id, '--data-dir', host.dataDir])).status).toBe(0)
      await until(async () => (await submit()).status === 401, 5000, 'revoked admin token refused')
      expect(await (await host.call('/api/capacity', { token })).json()).toEqual({ code: 'unauthorized', detail: REVOKED_TOKEN_REFUSAL })
    } finally {
      await host.dispose()
    }
  })

  test('a worker token acts on file leases of its own jobs only: each acquire, heartbeat and release names its job lease and proves it with the lease’s token', async () => {
    const host = await startTestHost()
    try {
      const { token } = createScopedToken(host.dataDir, 'worker')
      const as = (path: string, json: unknown, by = token) => host.call(`/api/files/leases/${path}`, { method: 'POST', token: by, json })
      const claimed = async (workerId: string) => {
        host.engine.submit({ job_type: 't', cost_units: 1 })
        const answer = await host.call('/internal/worker/claim', { method: 'POST', token, json: { worker_id: workerId, streams: ['default'], max_wait_ms: 0 } })
        return (await answer.json()) as { job_id: string; lease_id: string; lease_token: string }
      }
      const [mine, theirs] = [await claimed('w-mine'), await claimed('w-theirs')]
      const file = '/data/shared.txt'
      const under = (job: typeof mine, lease_token: string | undefined = job.lease_token) => ({ file, owner_id: `job:${job.job_id}`, lease_id: job.lease_id, lease_token })

      expect((await as('acquire', under(theirs))).status).toBe(200)
      // Another job's file lease: named by its owner alone, by its job lease alone, or with a token not that lease's.
      for (const [body, status, code] of [
        [{ file, owner_id: `job:${theirs.job_id}` }, 400, 'invalid_request'],
        [{ file, owner_id: `job:${theirs.job_id}`, lease_id: theirs.lease_id }, 400, 'invalid_request'],
        [under(theirs, mine.lease_token), 409, 'lease_token_mismatch'],
        [{ ...under(theirs), lease_id: 'no-such-lease' }, 404, 'lease_not_found'],
      ] as const) {
        for (const verb of ['release', 'heartbeat', 'acquire']) {
          const answer = await as(verb, body)
          expect(answer.status, `${verb} ${JSON.stringify(body)}`).toBe(status)
          expect(await answer.json()).toMatchObject({ code })
        }
      }
      expect(host.engine.listFileLeases().file_leases).toEqual([expect.objectContaining({ file, job_id: theirs.job_id, state: 'ACTIVE' })])
      // Its own job's lease, proved: contended as any requester is, and its own file lease kept.
      expect(await (await as('acquire', under(mine))).json()).toMatchObject({ granted: false, code: 'file_lease_held' })
      expect((await as('heartbeat', under(theirs))).status).toBe(200)
      expect((await as('release', under(theirs))).status).toBe(200)
      // The host's token may act on any file lease, as the files contract has it.
      expect((await as('acquire', { file, owner_id: 'operator' }, host.token)).status).toBe(200)
      expect((await as('release', { file, owner_id: 'operator' }, host.token)).status).toBe(200)
    } finally {
      await host.dispose()
    }
  })

  test('a claim waiting when its token is revoked is answered with nothing within a second or two, and no job submitted after is handed to it', async () => {
    const host = await startTestHost()
    try {
      const { token, id } = createScopedToken(host.dataDir, 'worker')
      const asked = Date.now()
      const waiting = host.call('/internal/worker/claim', { method: 'POST', token, json: { worker_id: 'revoked-w', streams: ['revoked-q'], max_wait_ms: 20_000 } })
      await new Promise((resolve) => setTimeout(resolve, 300)) // the claim is waiting
      revokeScopedToken(host.dataDir, id)
      const answer = (await (await waiting).json()) as { claimed: boolean }
      expect(answer.claimed).toBe(false)
      expect(Date.now() - asked).toBeLessThan(10_000)
      const job = host.engine.submit({ job_type: 't', cost_units: 1, queue: 'revoked-q' }).job
      const again = await host.call('/internal/worker/claim', { method: 'POST', token, json: { worker_id: 'revoked-w', streams: ['revoked-q'], max_wait_ms: 0 } })
      expect(again.status).toBe(401)
      expect(host.engine.getJob(job.id)).toMatchObject({ state: 'QUEUED', attempts: 0 })
    } finally {
      await host.dispose()
    }
  })

  test('once leasehold token revoke has returned, its token is granted nothing: a claim waiting on it is answered with nothing, not the job submitted next, and its claims, batches and file acquires are refused', async () => {
    const host = await startTestHost()
    try {
      const created = await runCliAsync(['token', 'create', '--scope', 'worker', '--json', '--data-dir', host.dataDir])
      const { id, token } = JSON.parse(created.stdout) as { id: string; token: string }
      const claim = (workerId: string, max_wait_ms: number) =>
        host.call('/internal/worker/claim', { method: 'POST', token, json: { worker_id: workerId, streams: ['revoked-q'], max_wait_ms } })
      // A job it holds: the file acquire its handler would make under that lease is granted until the revoke.
      host.engine.submit({ job_type: 't', cost_units: 1, queue: 'revoked-q' })
      const held = (await (await claim('revoked-runner', 0)).json()) as { job_id: string; lease_id: string; lease_token: string }
      const acquire = () =>
        host.call('/api/files/leases/acquire', { method: 'POST', token, json: { file: '/data/out.txt', owner_id: `job:${held.job_id}`, lease_id: held.lease_id, lease_token: held.lease_token } })
      expect((await acquire()).status).toBe(200)
      let answered = false
      const waiting = claim('revoked-waiter', 20_000).then((res) => ((answered = true), res))
      await until(
        async () => ((await (await host.call('/api/workers')).json()) as { workers: { worker_id: string }[] }).workers.some((w) => w.worker_id === 'revoked-waiter'),
        5000,
        'the claim waits',
      )
      expect(answered).toBe(false)

      expect((await runCliAsync(['token', 'revoke', id, '--data-dir', host.dataDir])).status).toBe(0)
      // At once: no request on the token first, no periodic look at the file awaited.
      const submitted = await host.call('/api/scheduler/jobs/submit', { method: 'POST', json: { job_type: 't', cost_units: 1, queue: 'revoked-q' } })
      const { job } = (await submitted.json()) as { job: { job_id: string } }
      const answer = await waiting
      expect(answer.status).toBe(200)
      expect(await answer.json()).toMatchObject({ claimed: false })
      expect((await claim('revoked-waiter', 0)).status).toBe(401)
      const batch = await host.call('/internal/worker/batch', { method: 'POST', token, json: { worker_id: 'revoked-runner', claim: { streams: ['revoked-q'], max_jobs: 4, max_wait_ms: 0 } } })
      expect(batch.status).toBe(401)
      expect((await acquire()).status).toBe(401)
      expect(host.engine.getJob(job.job_id)).toMatchObject({ state: 'QUEUED', attempts: 0 })
    } finally {
      await host.dispose()
    }
  })
})
