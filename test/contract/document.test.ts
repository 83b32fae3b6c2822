/**
 * The OpenAPI document covers the server: every route the routers serve is in it with an
 * operationId, a schema for each answer with a body, and its limits; and the server keeps the
 * limits the document states (a path id over 200 characters is 400 naming the parameter).
 */
import { afterAll, describe, expect, test } from 'vitest'
import { ManualClock, SECOND } from '../../src-main/engine/rules/clock'
import { FILE_RETRY_MS } from '../../src-main/engine/verbs/files'
import { openApiDocument } from '../../src-main/http/openapi'
import { startTestHost, type TestHost } from '../helpers/host'
import { allRoutes, BODY_ROUTES } from '../http/routes'

interface Operation {
  operationId?: string
  parameters?: { in: string; name: string; schema: { maxLength?: number; pattern?: string; maximum?: number } }[]
  requestBody?: { required?: boolean; content: Record<string, { schema: unknown }> }
  responses: Record<string, { $ref?: string; content?: Record<string, { schema?: unknown }> }>
}
const doc = openApiDocument('test') as unknown as { paths: Record<string, Record<string, Operation>>; servers: unknown[] }
const operation = (method: string, path: string): Operation | undefined => doc.paths[path.replace(/:([a-z_]+)/g, '{$1}')]?.[method.toLowerCase()]

describe('every route the server serves is in the document', () => {
  test.each(allRoutes().map((r) => [`${r.method} ${r.path}`, r] as const))('%s', (_, route) => {
    const op = operation(route.method, route.path)
    expect(op, 'not in the document').toBeDefined()
    expect(op!.operationId).toMatch(/^[a-z][A-Za-z]+$/)
    const successes = Object.entries(op!.responses).filter(([status]) => status.startsWith('2'))
    expect(successes.length).toBeGreaterThan(0)
    for (const [status, response] of successes) {
      if (status !== '204') expect(Object.values(response.content ?? {})[0]?.schema, `${status} has no schema`).toBeDefined()
    }
    for (const [status, response] of Object.entries(op!.responses).filter(([s]) => !s.startsWith('2'))) {
      expect(response.$ref ?? Object.values(response.content ?? {})[0]?.schema, `${status} has no schema`).toBeDefined()
    }
    for (const param of op!.parameters?.filter((p) => p.in === 'path') ?? []) expect(param.schema.maxLength).toBe(200)
  })

  test('operationIds are unique, and the document names its server', () => {
    const ids = Object.values(doc.paths).flatMap((item) => Object.values(item).map((op) => op.operationId))
    expect(new Set(ids).size).toBe(ids.length)
    expect(doc.servers).toEqual([expect.objectContaining({ url: 'http://127.0.0.1:{port}' })])
  })

  test('a body with required fields is a required body; one whose fields are all optional is not', () => {
    for (const route of BODY_ROUTES) {
      const op = operation(route.method, route.path)!
      expect(op.requestBody?.required, `${route.method} ${route.path}`).toBe(!route.schema.safeParse({}).success)
    }
  })

  test('the limits a client needs: file paths absolute, event ids digits, waits bounded', () => {
    const body = (path: string) => (operation('POST', path)!.requestBody!.content['application/json']!.schema as { properties: Record<string, { pattern?: string; maximum?: number }> }).properties
    expect(new RegExp(body('/api/files/leases/acquire').file!.pattern!).test('/home/me/a.pdf')).toBe(true)
    expect(new RegExp(body('/api/files/leases/acquire').file!.pattern!).test('a.pdf')).toBe(false)
    expect(body('/internal/worker/claim').max_wait_ms!.maximum).toBe(3_600_000)
    expect(body('/api/files/leases/wait').max_wait_ms!.maximum).toBe(3_600_000)
    const stream = operation('GET', '/api/events/stream')!.parameters!
    for (const name of ['last_event_id', 'Last-Event-ID']) expect(stream.find((p) => p.name === name)!.schema.pattern).toBe('^\\d{1,15}$')
  })
})

test('the fail answer\'s dlq is described as the host decides it: only a retryable failure with no attempts left is dead-lettered, a non-retryable one is final', () => {
  const schemas = (doc as unknown as { components: { schemas: Record<string, { properties: Record<string, { description?: string }> }> } }).components.schemas
  const dlq = schemas.WorkerFailAnswer!.properties.dlq!.description!
  expect(dlq).toMatch(/retryable failure with no attempts left/i)
  expect(dlq).toMatch(/not retryable is final \(FAILED\), not dead-lettered/i)
})

describe('the server answers as the document says', () => {
  let host: TestHost
  afterAll(async () => {
    await host?.dispose()
  })

  test('a path id over 200 characters is 400 naming the parameter, not "(body)"', async () => {
    host = await startTestHost()
    for (const [path, name] of [
      [`/api/scheduler/jobs/${'j'.repeat(201)}`, 'job_id'],
      [`/api/scheduler/lease/${'l'.repeat(201)}`, 'lease_id'],
      [`/api/blockers/${'b'.repeat(201)}`, 'blocker_id'],
    ] as const) {
      const res = await host.call(path)
      const error = (await res.json()) as { code: string; detail: string }
      expect(res.status).toBe(400)
      expect(error).toMatchObject({ code: 'invalid_request', detail: expect.stringMatching(new RegExp(`^${name}: `)) })
    }
    const res = await host.call(`/api/scheduler/jobs/${'j'.repeat(200)}`)
    expect(res.status).toBe(404)
  })
})

test('a success refused because an operator took a file is the plain {detail, code} in the pull and queue APIs (ok and ack are the worker API’s words)', async () => {
  const clock = new ManualClock(Date.UTC(2026, 0, 1))
  const host = await startTestHost({ busy: 0 }, { clock })
  try {
    const { engine } = host
    const lease = (worker: string, type: string) => {
      engine.submit({ job_type: type, cost_units: 1 })
      const decision = engine.claimAndLease({ worker_id: worker, accept_job_types: [type] })
      if (!decision.granted) throw new Error(decision.reason)
      return decision.lease
    }
    // The holder keeps the file past the requester's one retry; the operator takes it from the holder.
    const holder = lease('holder', 'hold')
    const requester = lease('requester', 'want')
    const file = '/tmp/leasehold-contract/taken.txt'
    expect(engine.acquireFile({ file, owner_id: 'holder', lease_id: holder.id })).toMatchObject({ granted: true })
    expect(engine.acquireFile({ file, owner_id: 'requester', lease_id: requester.id })).toMatchObject({ granted: false })
    for (let t = 0; t < FILE_RETRY_MS; t += 10 * SECOND) {
      clock.advance(10 * SECOND)
      engine.heartbeat({ lease_id: holder.id })
      engine.heartbeat({ lease_id: requester.id })
      engine.heartbeatFile({ file, owner_id: 'holder' })
    }
    const halted = engine.acquireFile({ file, owner_id: 'requester', lease_id: requester.id })
    if (halted.granted || halted.code !== 'blocked') throw new Error('expected a halt')
    engine.resolveBlocker(halted.blocker.id, { action: 'force_release' })

    for (const [path, json] of [
      [`/api/scheduler/lease/${holder.id}/release`, { job_id: holder.job_id, worker_id: 'holder', status: 'SUCCEEDED' }],
      [`/api/system/scheduler/leases/${holder.id}/complete`, { worker_id: 'holder', status: 'completed' }],
    ] as const) {
      const res = await host.call(path, { method: 'POST', json })
      expect(res.status).toBe(409)
      expect(await res.json()).toEqual({ detail: expect.any(String), code: 'file_lease_lost' })
    }
  } finally {
    await host.dispose()
  }
})
