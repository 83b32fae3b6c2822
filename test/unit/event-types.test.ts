import { describe, expect, test } from 'vitest'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { DEFAULT_MIGRATIONS_FOLDER } from '../../src-main/db/open'
import { COUNTED_EVENTS_CLAUSE } from '../../src-main/db/schema'
import { EVENT_TYPES, WAKE_EVENTS } from '../../src-main/engine'
import { COUNTED_EVENTS, EVENT_ROLES } from '../../src-main/engine/rules/events'
import { COUNT_METRICS } from '../../src-main/engine/reads/stats'
import { openApiDocument } from '../../src-main/http/openapi'
import { EVENT_TYPES as SHARED_EVENT_TYPES } from '../../src-shared/event-types'

/**
 * One list of event types (src-shared/event-types.ts), typed by one union in the engine
 * (engine/rules/events.ts): the sets the host uses, the events the statistics count and the stream's
 * documented names all come from it.
 */
describe('the one list of event types', () => {
  test('the engine exports the shared list itself, not a copy', () => {
    expect(EVENT_TYPES).toBe(SHARED_EVENT_TYPES)
    expect(new Set(EVENT_TYPES).size).toBe(EVENT_TYPES.length)
  })

  test('the counted events are the ends of jobs and expired leases, the types migration 0013 stored the counts of', () => {
    expect(COUNTED_EVENTS).toEqual(['JOB_DONE', 'JOB_FAILED', 'JOB_TIMEOUT', 'JOB_CANCELED', 'LEASE_EXPIRED'])
    const migration = readFileSync(join(DEFAULT_MIGRATIONS_FOLDER, '0013_lean_indexes.sql'), 'utf8')
    expect(migration).toContain(`WHERE ${COUNTED_EVENTS_CLAUSE} GROUP BY 1, 2`)
  })

  test('the time series count only counted events, and every counted end of a job wakes waiting claims', () => {
    for (const types of Object.values(COUNT_METRICS)) for (const type of types) expect(COUNTED_EVENTS).toContain(type)
    for (const type of COUNTED_EVENTS) expect(WAKE_EVENTS.has(type)).toBe(true)
    expect([...WAKE_EVENTS]).toEqual(EVENT_TYPES.filter((type) => EVENT_ROLES[type].wakes))
  })

  test("the event stream documents the list as its event names (the API's EventType)", () => {
    const doc = openApiDocument('test') as unknown as { components: { schemas: Record<string, { enum?: readonly string[] }> } }
    expect(doc.components.schemas['EventType']?.enum).toEqual([...EVENT_TYPES])
  })
})
