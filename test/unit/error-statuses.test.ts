import { readdirSync, readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { describe, expect, test } from 'vitest'
import { ENGINE_ERROR_CODES } from '../../src-main/engine'
import { ACQUIRE_REFUSAL_CODES, ERROR_STATUS, HTTP_ERROR_CODES, statusOf } from '../../src-shared/error-codes'

/**
 * The engine raises domain errors by code and knows no HTTP status; the HTTP layer maps every
 * code to its status in one table (src-shared/error-codes.ts), which the IPC host reports too.
 */

const ENGINE = resolve(import.meta.dirname, '../../src-main/engine')
/** The engine's sources, but the list itself. */
const engineSources = readdirSync(ENGINE, { recursive: true, encoding: 'utf8' })
  .filter((name) => name.endsWith('.ts') && name !== join('rules', 'errors.ts'))
  .map((name) => readFileSync(join(ENGINE, name), 'utf8'))
  .join('\n')

describe('one table of statuses', () => {
  test('every code the engine can raise answers a 4xx status over HTTP', () => {
    for (const code of ENGINE_ERROR_CODES) {
      const status = statusOf(code)
      expect(status >= 400 && status < 500, `${code} → ${status}`).toBe(true)
    }
  })

  test('the list of engine codes is the codes the engine raises: each is raised by some engine module', () => {
    // `invalid(…)`, `jobNotFound(…)`, … are errors.ts's own helpers for three of them.
    const helpers = { invalid_request: 'invalid(', job_not_found: 'jobNotFound(', lease_not_found: 'leaseNotFound(', worker_mismatch: 'workerMismatch(' }
    const unraised = ENGINE_ERROR_CODES.filter((code) => !engineSources.includes(`'${code}'`) && !(code in helpers && engineSources.includes(helpers[code as keyof typeof helpers])))
    expect(unraised).toEqual([])
  })

  test('the HTTP layer and the host answer their own codes from the same table: client errors 4xx, storage faults and bugs 5xx', () => {
    const serverSide = ['internal_error', 'not_implemented', 'storage_error', 'storage_uncertain', 'storage_full']
    for (const code of HTTP_ERROR_CODES) {
      const status = statusOf(code)
      expect(serverSide.includes(code) ? status >= 500 : status >= 400 && status < 500, `${code} → ${status}`).toBe(true)
    }
  })

  test('the table holds no code that nothing answers with', () => {
    const known = new Set<string>([...ENGINE_ERROR_CODES, ...HTTP_ERROR_CODES, ...ACQUIRE_REFUSAL_CODES])
    expect(Object.keys(ERROR_STATUS).filter((code) => !known.has(code))).toEqual([])
  })
})
