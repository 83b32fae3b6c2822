/**
 * The contract check that every HTTP test's answers go through (test/helpers/contract.ts): an
 * answer the OpenAPI document does not describe — an undocumented route, status, header or
 * body — is a violation, and a described one is not.
 */
import { describe, expect, test } from 'vitest'
import { contractViolation, type SeenResponse } from '../helpers/contract'

const T = '2026-02-06T20:10:00.000Z'
const CAPACITY = { total_units: 10, busy_rating: 0, busy_mode: 'manual', usable: 10, leased: 0, available: 10 }

function seen(method: string, target: string, status: number, body: unknown, headers: Record<string, string> = {}): SeenResponse {
  const all: Record<string, string> = { 'content-type': 'application/json; charset=utf-8', ...headers }
  return {
    method,
    target,
    status,
    header: (name) => all[name.toLowerCase()] ?? null,
    body: body === undefined ? '' : typeof body === 'string' ? body : JSON.stringify(body),
  }
}

describe('an answer the document describes conforms', () => {
  test('a success body of the documented schema', () => {
    expect(contractViolation(seen('GET', '/api/capacity', 200, CAPACITY))).toBeNull()
    expect(contractViolation(seen('GET', '/api/health?x=1', 200, { ok: true, version: '1', storage: 'read_write' }))).toBeNull()
  })

  test('a documented error with its own schema (a duplicate submit carries the job)', () => {
    const res = seen('POST', '/api/scheduler/jobs/submit', 409, { detail: 'd', code: 'duplicate_request', job: { job_id: 'x' } })
    expect(contractViolation(res)).toMatch(/does not match/) // a job with one field is not a QueueJob
    expect(contractViolation(seen('POST', '/api/scheduler/jobs/submit', 400, { detail: 'job_type: required', code: 'invalid_request' }))).toBeNull()
  })

  test('the answers every path may give: 404 on an unknown path, 405 with Allow, 501, OPTIONS', () => {
    expect(contractViolation(seen('GET', '/api/nope', 404, { detail: 'No route', code: 'not_found' }))).toBeNull()
    expect(contractViolation(seen('DELETE', '/api/capacity', 405, { detail: 'd', code: 'method_not_allowed' }, { allow: 'GET, HEAD, PUT' }))).toBeNull()
    expect(contractViolation(seen('PROPFIND', '/api/capacity', 501, { detail: 'd', code: 'not_implemented' }))).toBeNull()
    expect(contractViolation(seen('OPTIONS', '/api/capacity', 200, undefined, { allow: 'GET, HEAD, PUT' }))).toBeNull()
    expect(contractViolation(seen('OPTIONS', '/api/capacity', 200, undefined))).toMatch(/header Allow/)
  })

  test('HEAD of a documented GET answers without a body', () => {
    expect(contractViolation(seen('HEAD', '/api/capacity', 200, undefined))).toBeNull()
    expect(contractViolation(seen('HEAD', '/api/capacity', 200, CAPACITY))).toMatch(/without a body/)
  })
})

describe('an answer the document does not describe is a violation', () => {
  test('a status the route does not document', () => {
    expect(contractViolation(seen('GET', '/api/capacity', 409, { detail: 'd', code: 'c' }))).toMatch(/status not documented/)
    expect(contractViolation(seen('GET', '/api/health', 401, { detail: 'd', code: 'unauthorized' }))).toMatch(/status not documented/)
  })

  test('a route the document does not have, answered as if it existed', () => {
    expect(contractViolation(seen('GET', '/api/secret', 200, { ok: true }))).toMatch(/status not documented/)
  })

  test('a body with a field the schema does not have, or without one it requires', () => {
    expect(contractViolation(seen('GET', '/api/capacity', 200, { ...CAPACITY, extra: 1 }))).toMatch(/additional properties \(extra\)/)
    const { available: _, ...missing } = CAPACITY
    expect(contractViolation(seen('GET', '/api/capacity', 200, missing))).toMatch(/available/)
    expect(contractViolation(seen('GET', '/api/capacity', 401, { detail: 'd', code: 'unauthorized', job: {} }))).toMatch(/does not match/)
  })

  test('a value of the wrong type or format', () => {
    expect(contractViolation(seen('GET', '/api/capacity', 200, { ...CAPACITY, busy_mode: 'sometimes' }))).toMatch(/busy_mode/)
    expect(contractViolation(seen('POST', '/api/events/ticket', 200, { ticket: 't', expires_at: 'tomorrow' }))).toMatch(/expires_at/)
    expect(contractViolation(seen('POST', '/api/events/ticket', 200, { ticket: 't', expires_at: T }))).toBeNull()
  })

  test('a documented header that is missing: Allow on 405, Retry-After on 429', () => {
    expect(contractViolation(seen('DELETE', '/api/capacity', 405, { detail: 'd', code: 'method_not_allowed' }))).toMatch(/header Allow/)
    const early = { detail: 'd', code: 'retry_too_early', retry_at: T, retry_after_s: 3 }
    expect(contractViolation(seen('POST', '/api/files/leases/acquire', 429, early))).toMatch(/header Retry-After/)
    expect(contractViolation(seen('POST', '/api/files/leases/acquire', 429, early, { 'retry-after': '3' }))).toBeNull()
  })

  test('a body where none is documented, another media type, or text that is not JSON', () => {
    expect(contractViolation(seen('POST', '/api/scheduler/jobs/claim', 204, { job: null }))).toMatch(/without a body/)
    expect(contractViolation(seen('GET', '/api/capacity', 200, 'ok', { 'content-type': 'text/plain' }))).toMatch(/content-type text\/plain/)
    expect(contractViolation(seen('GET', '/api/capacity', 200, '{'))).toMatch(/not JSON/)
  })
})

test('a path a literal route spells is that route, its other methods a 405, though a parameter route matches it too (GET /jobs/claim is not GET /jobs/{job_id})', () => {
  expect(contractViolation(seen('GET', '/api/scheduler/jobs/claim', 405, { detail: 'd', code: 'method_not_allowed' }, { allow: 'POST' }))).toBeNull()
  expect(contractViolation(seen('GET', '/api/scheduler/jobs/claim', 404, { detail: 'No job claim', code: 'job_not_found' }))).toMatch(/status not documented/)
  expect(contractViolation(seen('DELETE', '/api/scheduler/jobs/claim', 405, { detail: 'd', code: 'method_not_allowed' }, { allow: 'POST' }))).toBeNull()
  // A value of the parameter is the parameter's route.
  expect(contractViolation(seen('GET', '/api/scheduler/jobs/0192', 404, { detail: 'No job 0192', code: 'job_not_found' }))).toBeNull()
})
