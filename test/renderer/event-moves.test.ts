// @vitest-environment happy-dom
/**
 * Which events make each part of the dashboard read again comes from one table beside the list
 * of event types (src-shared/event-types.ts's EVENT_MOVES), not from patterns over their names:
 * a new type must say what it moves before it compiles.
 */
import { describe, expect, test } from 'vitest'
import { EVENT_MOVES, EVENT_TYPES, eventMoves, type EventType } from '../../src-shared/event-types'
import type { LogEvent } from '../../src-renderer/lib/api'
import { BlockersState } from '../../src-renderer/lib/blockers.svelte'
import { CapacityState } from '../../src-renderer/lib/capacity.svelte'
import { movesLeases } from '../../src-renderer/lib/lease-events'
import { QueuesState } from '../../src-renderer/lib/queues.svelte'
import { WorkersState } from '../../src-renderer/lib/workers.svelte'
import { event } from './support'

const JOB_EVENTS = EVENT_TYPES.filter((type) => type.startsWith('JOB_'))
const LEASE_ENDS: EventType[] = ['JOB_DONE', 'JOB_FAILED', 'JOB_CANCELED', 'JOB_TIMEOUT', 'JOB_REQUEUED', 'JOB_BLOCKED']

/** The types of event after which `moves` asks for a fresh read. */
const movingTypes = (moves: (event: LogEvent) => boolean): EventType[] => EVENT_TYPES.filter((type) => moves(event(type)))

describe('each store reads again on the events the table says move what it shows', () => {
  test('capacity: a lease taken or given back, the pool resized, the busy rating measured', () => {
    expect(new Set(movingTypes(CapacityState.moves))).toEqual(new Set(['LEASE_GRANTED', 'LEASE_EXPIRED', ...LEASE_ENDS, 'CAPACITY_CHANGED', 'BUSY_MEASURED']))
  })

  test('workers: a lease taken or given back, a problem a worker reported', () => {
    expect(new Set(movingTypes(WorkersState.moves))).toEqual(new Set(['LEASE_GRANTED', 'LEASE_EXPIRED', ...LEASE_ENDS, 'WORKER_PROBLEM']))
  })

  test('leases: a grant, an expiry, the end of the job that held one', () => {
    expect(new Set(movingTypes(movesLeases))).toEqual(new Set(['LEASE_GRANTED', 'LEASE_EXPIRED', ...LEASE_ENDS]))
  })

  test("queues: a queue paused or resumed, and every move of a job (the queues' counts)", () => {
    expect(new Set(movingTypes(QueuesState.moves))).toEqual(new Set(['QUEUE_PAUSED', 'QUEUE_RESUMED', ...JOB_EVENTS, 'LEASE_GRANTED']))
  })

  test('blockers: a blocker opened or resolved', () => {
    expect(movingTypes(BlockersState.moves)).toEqual(['BLOCKER_OPENED', 'BLOCKER_RESOLVED'])
  })
})

test('every event type has its entry, and a type the table does not know (a newer host\'s) moves nothing', () => {
  expect(Object.keys(EVENT_MOVES).sort()).toEqual([...EVENT_TYPES].sort())
  const unknown = 'JOB_FROM_A_NEWER_HOST' as EventType
  expect(eventMoves(unknown, 'job-state', 'job-list', 'leases', 'capacity', 'workers', 'blockers', 'queues', 'schedules')).toBe(false)
  expect(CapacityState.moves(event(unknown))).toBe(false)
})
