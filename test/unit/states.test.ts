import { describe, expect, it } from 'vitest'
import {
  assertMove,
  canMove,
  CANCEL_AT_ONCE_STATES,
  JOB_STATES,
  JOB_TRANSITIONS,
  LEASE_REQUEST_STATES,
  priorityName,
  priorityRank,
  RETRYABLE_STATES,
  SHOWN_STATES,
  shownState,
  TERMINAL_STATES,
  type JobState,
} from '../../src-main/engine/rules/states'
import { DEFAULT_ENGINE_CONFIG } from '../../src-main/engine'
import { iso } from '../../src-main/engine/rules/clock'
import { T0 } from '../helpers/engine'
import { expectEngineError } from './support'

/** The moves docs/states.md names, and only those. */
const CONTRACT_MOVES: [JobState, JobState][] = [
  // the queue API path, status updates, claim expiry, and the lease request (approval or denial)
  ['QUEUED', 'CLAIMED'],
  ['CLAIMED', 'PREPARING'],
  ['CLAIMED', 'LEASE_PENDING'],
  ['CLAIMED', 'RUNNING'],
  ['PREPARING', 'LEASE_PENDING'],
  ['PREPARING', 'RUNNING'],
  ['LEASE_PENDING', 'RUNNING'],
  ['LEASE_PENDING', 'PREPARING'],
  ['CLAIMED', 'QUEUED'],
  ['PREPARING', 'QUEUED'],
  ['LEASE_PENDING', 'QUEUED'],
  // the pull API and 003
  ['QUEUED', 'LEASED'],
  ['LEASED', 'RUNNING'],
  ['QUEUED', 'RUNNING'],
  // requeue after expiry or retryable failure, blocking by a file lease
  ['LEASED', 'QUEUED'],
  ['RUNNING', 'QUEUED'],
  ['LEASED', 'BLOCKED'],
  ['RUNNING', 'BLOCKED'],
  ['BLOCKED', 'QUEUED'],
  // cancellation
  ['QUEUED', 'CANCELED'],
  ['CLAIMED', 'CANCELED'],
  ['PREPARING', 'CANCELED'],
  ['LEASE_PENDING', 'CANCELED'],
  ['BLOCKED', 'CANCELED'],
]

describe('canonical job states', () => {
  it('the states are exactly the contract\'s eleven', () => {
    expect([...JOB_STATES].sort()).toEqual(
      ['QUEUED', 'CLAIMED', 'PREPARING', 'LEASE_PENDING', 'LEASED', 'RUNNING', 'BLOCKED', 'DONE', 'FAILED', 'CANCELED', 'TIMEOUT'].sort(),
    )
  })

  it('terminal states are DONE, FAILED, CANCELED, TIMEOUT; the only way out is an operator\'s retry of a FAILED, CANCELED or TIMEOUT job', () => {
    expect([...TERMINAL_STATES].sort()).toEqual(['CANCELED', 'DONE', 'FAILED', 'TIMEOUT'])
    expect([...RETRYABLE_STATES].sort()).toEqual(['CANCELED', 'FAILED', 'TIMEOUT'])
    expect(JOB_TRANSITIONS.DONE).toEqual([])
    for (const s of TERMINAL_STATES) {
      for (const to of JOB_STATES) {
        if (RETRYABLE_STATES.has(s) && to === 'QUEUED') expect(canMove(s, to)).toBe(true)
        else expectEngineError(() => assertMove('j', s, to), 409, 'illegal_transition')
      }
    }
  })

  it.each(CONTRACT_MOVES)('the contract move %s → %s is legal', (from, to) => {
    expect(canMove(from, to)).toBe(true)
    expect(() => assertMove('j', from, to)).not.toThrow()
  })

  it('LEASED and RUNNING may end in every terminal state', () => {
    for (const from of ['LEASED', 'RUNNING'] as const) for (const to of TERMINAL_STATES) expect(canMove(from, to)).toBe(true)
  })

  it('every other move is illegal and answers 409 illegal_transition', () => {
    const extra: [JobState, JobState][] = [
      ['PREPARING', 'PREPARING'], // repeated status updates
      ['LEASE_PENDING', 'LEASE_PENDING'], // repeated denials
    ]
    const legal = new Set([...CONTRACT_MOVES, ...extra].map(([a, b]) => `${a}>${b}`))
    for (const from of ['LEASED', 'RUNNING'] as const) for (const to of TERMINAL_STATES) legal.add(`${from}>${to}`)
    for (const from of RETRYABLE_STATES) legal.add(`${from}>QUEUED`)
    for (const from of JOB_STATES) {
      for (const to of JOB_STATES) {
        if (legal.has(`${from}>${to}`)) continue
        expect(canMove(from, to), `${from} → ${to}`).toBe(false)
        const error = expectEngineError(() => assertMove('job-1', from, to), 409, 'illegal_transition')
        expect(error.detail).toContain(from)
      }
    }
  })

  it('a job holding capacity (LEASED, RUNNING) cannot be canceled at once; QUEUED, CLAIMED, PREPARING, LEASE_PENDING, BLOCKED can', () => {
    expect([...CANCEL_AT_ONCE_STATES].sort()).toEqual(['BLOCKED', 'CLAIMED', 'LEASE_PENDING', 'PREPARING', 'QUEUED'])
  })

  it('a lease may be requested from CLAIMED, PREPARING or LEASE_PENDING only', () => {
    expect([...LEASE_REQUEST_STATES].sort()).toEqual(['CLAIMED', 'LEASE_PENDING', 'PREPARING'])
  })

  it('a state shows as the queue API shows it, in every refusal that names it too: LEASED as RUNNING, every other as it is', () => {
    expect(JOB_STATES.filter((s) => shownState(s) !== s)).toEqual(['LEASED'])
    expect(shownState('LEASED')).toBe('RUNNING')
    expect(SHOWN_STATES).toEqual(JOB_STATES.filter((s) => s !== 'LEASED'))
  })

  it('priority ranks order URGENT > HIGH > NORMAL > LOW and round-trip', () => {
    expect(priorityRank('URGENT')).toBeGreaterThan(priorityRank('HIGH'))
    expect(priorityRank('HIGH')).toBeGreaterThan(priorityRank('NORMAL'))
    expect(priorityRank('NORMAL')).toBeGreaterThan(priorityRank('LOW'))
    for (const p of ['LOW', 'NORMAL', 'HIGH', 'URGENT'] as const) expect(priorityName(priorityRank(p))).toBe(p)
  })
})

describe('defaults and time', () => {
  it('defaults: ttl 30 s, grace 5 s, claim ttl 60 s, max_attempts 3', () => {
    expect(DEFAULT_ENGINE_CONFIG).toMatchObject({ leaseTtlS: 30, heartbeatGraceS: 5, claimTtlS: 60, maxAttempts: 3 })
  })

  it('times are ISO-8601 UTC with milliseconds', () => {
    expect(iso(T0)).toBe('2026-01-01T00:00:00.000Z')
    expect(iso(Date.UTC(2026, 1, 6, 20, 15, 30, 123))).toBe('2026-02-06T20:15:30.123Z')
    expect(iso(null)).toBeNull()
  })
})
