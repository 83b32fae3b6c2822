/**
 * Every time on the wire is an ISO-8601 string: each field of the OpenAPI document named as a
 * time is a date-time string, never a number; the event union's numeric fields are either times
 * (which the edge formats) or quantities named here; and the events a real run writes reach the
 * wire with no epoch milliseconds left in them, whatever their field's name.
 */
import { describe, expect, expectTypeOf, test } from 'vitest'
import { HOUR, MINUTE, SECOND } from '../../src-main/engine/rules/clock'
import type { EventData, EventType } from '../../src-main/engine/rules/events'
import { FILE_RETRY_MS } from '../../src-main/engine/verbs/files'
import { openApiDocument } from '../../src-main/http/openapi'
import { type TimeKey, type WireData, wireEventData } from '../../src-main/http/views/event-data'
import { queueEvent } from '../../src-main/http/views/queue'
import { streamEvent } from '../../src-main/http/views/system'
import { aJob, setup, T0 } from '../helpers/engine'

type Schema = {
  $ref?: string
  type?: string | string[]
  format?: string
  properties?: Record<string, Schema>
  items?: Schema
  anyOf?: Schema[]
  oneOf?: Schema[]
  allOf?: Schema[]
  additionalProperties?: Schema | boolean
}
const doc = openApiDocument('test') as unknown as { paths: Record<string, unknown>; components: { schemas: Record<string, Schema> } }

/** A field whose name says it holds a time. */
const TIME_NAME = /(^|_)(at|until)$|^ts$|^missed_from$/

/** The plain types a schema allows, through $refs and unions. */
function typesOf(schema: Schema, seen = new Set<string>()): { type: string; format?: string }[] {
  if (schema.$ref) {
    const name = schema.$ref.split('/').at(-1)!
    if (seen.has(name)) return []
    return typesOf(doc.components.schemas[name]!, new Set(seen).add(name))
  }
  const branches = [...(schema.anyOf ?? []), ...(schema.oneOf ?? []), ...(schema.allOf ?? [])]
  if (branches.length > 0) return branches.flatMap((b) => typesOf(b, seen))
  const types = Array.isArray(schema.type) ? schema.type : schema.type ? [schema.type] : []
  return types.map((type) => ({ type, format: schema.format }))
}

/** Every named property of every schema in the document (paths and components), with where it is. */
function properties(node: unknown, at: string, out: [string, string, Schema][] = []): [string, string, Schema][] {
  if (node === null || typeof node !== 'object') return out
  const schema = node as Schema
  if (schema.properties && typeof schema.properties === 'object' && !Array.isArray(schema.properties)) {
    for (const [name, property] of Object.entries(schema.properties)) out.push([`${at}.${name}`, name, property])
  }
  for (const [key, child] of Object.entries(node)) properties(child, `${at}/${key}`, out)
  return out
}

describe('the OpenAPI document', () => {
  const timeFields = properties(doc, '#').filter(([, name]) => TIME_NAME.test(name))

  test('names some times (the walk reaches the schemas)', () => {
    expect(timeFields.length).toBeGreaterThan(40)
  })

  test('has no time field that is a number: each is an ISO-8601 date-time string (or null)', () => {
    const wrong = timeFields
      .filter(([where]) => !where.includes('StreamGap')) // missed_from/missed_to there are event ids, documented as such
      .filter(([, , schema]) => {
        const types = typesOf(schema).filter((t) => t.type !== 'null')
        return types.length === 0 || types.some((t) => t.type !== 'string' || t.format !== 'date-time')
      })
      .map(([where]) => where)
    expect(wrong).toEqual([])
  })
})

// ---------------------------------------------------------------------------------------------
// The event union, at the type level

/** The names of the numeric fields of an event's data, at any depth. */
type NumericKeys<D> = D extends readonly (infer I)[]
  ? NumericKeys<I>
  : D extends object
    ? { [K in keyof D & string]: ([Extract<D[K], number>] extends [never] ? never : K) | NumericKeys<NonNullable<D[K]>> }[keyof D & string]
    : never

/** Every event type's data as the engine writes it. */
type AnyData = { [T in EventType]: EventData<T> }[EventType]

/**
 * The numeric fields of events that are not times: counts, sizes, durations (named with their
 * unit), ids. A new numeric field must be a time named `…_at` (and so formatted at the edge) or
 * be added here, by a person who decided it is not a time.
 */
type Quantity =
  | 'cost_units'
  | 'total_units'
  | 'message_id'
  | 'attempt'
  | 'attempts'
  | 'max_attempts'
  | 'fence'
  | 'age_s'
  | 'retry_s'
  | 'idle_ms'
  | 'busy_rating'

describe('the event union', () => {
  test('every numeric field of every event is a time (named at, …_at or missed_from) or a named quantity', () => {
    expectTypeOf<Exclude<NumericKeys<AnyData>, TimeKey>>().toEqualTypeOf<Quantity>()
  })

  test('on the wire no event data has a number in a time field', () => {
    expectTypeOf<Extract<NumericKeys<WireData<AnyData>>, TimeKey>>().toEqualTypeOf<never>()
  })
})

// ---------------------------------------------------------------------------------------------
// The events of a real run, as the wire shows them

/** Epoch milliseconds of any time from 2001 on: a number this large in event data is a time that escaped. */
const EPOCH_MS = 1e12

function escapedTimes(value: unknown, at: string, out: string[] = []): string[] {
  if (typeof value === 'number' && value >= EPOCH_MS) out.push(at)
  else if (value !== null && typeof value === 'object') for (const [key, child] of Object.entries(value)) escapedTimes(child, `${at}.${key}`, out)
  return out
}

describe('the events a run writes', () => {
  test('reach the wire (a job timeline, the stream) with every time ISO-8601 and no epoch milliseconds left', () => {
    const { engine, clock } = setup({ config: { leaseTtlS: 600, heartbeatGraceS: 0 } })
    // A delayed job, run now; a lease that expires and is requeued with a backoff.
    const delayed = engine.submit(aJob({ delay_ms: HOUR })).job
    engine.runNow(delayed.id)
    const expiring = engine.requestLease({ worker_id: 'gone' }, 5)
    if (!expiring.granted) throw new Error('no lease')
    clock.advance(10 * SECOND)
    engine.reap()
    // A file held, refused to a second job, still held at its one retry: a blocker.
    engine.submit(aJob())
    engine.submit(aJob())
    const holder = engine.requestLease({ worker_id: 'w1' })
    const requester = engine.requestLease({ worker_id: 'w2' })
    if (!holder.granted || !requester.granted) throw new Error('no lease')
    engine.acquireFile({ file: '/repo/a.ts', owner_id: 'w1', lease_id: holder.lease.id })
    engine.acquireFile({ file: '/repo/a.ts', owner_id: 'w2', lease_id: requester.lease.id })
    for (let waited = 0; waited < FILE_RETRY_MS; waited += 10 * SECOND) {
      clock.advance(10 * SECOND)
      engine.heartbeat({ lease_id: holder.lease.id })
      engine.heartbeat({ lease_id: requester.lease.id })
      engine.heartbeatFile({ file: '/repo/a.ts', owner_id: 'w1' })
    }
    const halted = engine.acquireFile({ file: '/repo/a.ts', owner_id: 'w2', lease_id: requester.lease.id })
    if (halted.granted || halted.code !== 'blocked') throw new Error('not halted')
    engine.resolveBlocker(halted.blocker.id, { action: 'force_release' })
    // A schedule that fires late: caught up, with the firing it missed.
    engine.createSchedule({ name: 'hourly', cron: '0 * * * *', timezone: 'UTC', job: { job_type: 'tick', cost_units: 1 } })
    clock.set(T0 + 3 * HOUR + MINUTE)
    engine.fireDueSchedules()

    const events = engine.replayAfter(0, 10_000).events
    const types = new Set(events.map((e) => e.event_type))
    for (const type of ['JOB_SUBMITTED', 'JOB_RUN_NOW', 'LEASE_GRANTED', 'LEASE_EXPIRED', 'JOB_REQUEUED', 'FILE_LEASE_CONTENDED', 'BLOCKER_OPENED', 'FILE_LEASE_REVOKED', 'SCHEDULE_CREATED', 'SCHEDULE_FIRED'] as const) {
      expect(types, type).toContain(type)
    }
    const wire = events.flatMap((event) => [queueEvent(event), streamEvent(event)])
    expect(wire.flatMap((event) => escapedTimes(event, `${event.type}#${event.id}`))).toEqual([])
    const contended = wire.find((event) => event.type === 'FILE_LEASE_CONTENDED')!
    expect(contended.data).toMatchObject({ denied_at: expect.stringMatching(/Z$/), retry_at: expect.stringMatching(/Z$/), holder: { acquired_at: expect.stringMatching(/Z$/) } })
    expect(wire.find((event) => event.type === 'SCHEDULE_FIRED')!.data).toMatchObject({ caught_up: true, missed_from: new Date(T0 + HOUR).toISOString() })
  })

  test('an event stored with epoch milliseconds reads back on the wire as ISO-8601: the log is not rewritten', () => {
    const data = { denied_at: T0, retry_at: T0 + FILE_RETRY_MS, holder: { owner_id: 'w1', acquired_at: T0 - SECOND, age_s: 1 }, owner_lease: [{ expires_at: T0 }] }
    expect(wireEventData(data)).toEqual({
      denied_at: '2026-01-01T00:00:00.000Z',
      retry_at: '2026-01-01T00:03:00.000Z',
      holder: { owner_id: 'w1', acquired_at: '2025-12-31T23:59:59.000Z', age_s: 1 },
      owner_lease: [{ expires_at: '2026-01-01T00:00:00.000Z' }],
    })
  })
})
