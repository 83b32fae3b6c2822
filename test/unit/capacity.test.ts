import { describe, expect, it } from 'vitest'
import { aJob, setup } from '../helpers/engine'
import { capacityDenial, capacityFigures, usableUnits } from '../../src-main/engine/rules/capacity'
import { SECOND } from '../../src-main/engine/rules/clock'
import { expectEngineError, leaseOrFail, openFileEngine, tempDir } from './support'
import { join } from 'node:path'

describe('capacity arithmetic', () => {
  it.each([
    [100, 0, 100],
    [100, 10, 0],
    [50, 8, 10],
    [7, 5, 3], // floor(3.5)
    [10, 2.5, 7], // floor(7.5)
    [0, 0, 0],
  ])('usable = floor(total × (10 − busy) / 10): total=%i busy=%d → %i', (total, busy, usable) => {
    expect(usableUnits(total, busy)).toBe(usable)
  })

  it('usable is exact for every rating in tenths: floating point never costs a unit (100 × 9.7 / 10 is 97, not 96)', () => {
    expect(usableUnits(100, 0.3)).toBe(97)
    expect(usableUnits(100, 6.9)).toBe(31)
    expect(usableUnits(100, 5.4)).toBe(46)
    expect(usableUnits(100, 9.9)).toBe(1)
    for (let total = 0; total <= 1_000_000; total += total < 1000 ? 7 : 9_973) {
      for (let tenths = 0; tenths <= 100; tenths += 1) {
        // The same formula in whole numbers: floor(total × (100 − tenths) / 100).
        expect(usableUnits(total, tenths / 10)).toBe(Math.floor((total * (100 - tenths)) / 100))
      }
    }
  })

  it('usable is exact for a rating with many decimals: rounding never lifts a share across a unit', () => {
    // 1,000,000 × 0.000049999996 / 10 = 4.9999996: floor 4, where rounding to a millionth gave 5.
    expect(usableUnits(1_000_000, 9.999950000004)).toBe(4)
    expect(usableUnits(1_000_000, 9.99995)).toBe(5)
    expect(usableUnits(1_000_000, 9.9999999)).toBe(0)
    expect(usableUnits(1_000_000, 1e-7)).toBe(999_999)
    expect(usableUnits(100, 9.95)).toBe(0)
    expect(usableUnits(350, 9.8)).toBe(7)
  })

  it('available = usable − leased, negative when the rating rose under running work', () => {
    expect(capacityFigures(100, 5, 'manual', 30)).toEqual({
      total_units: 100,
      busy_rating: 5,
      busy_mode: 'manual',
      usable: 50,
      leased: 30,
      available: 20,
    })
    expect(capacityFigures(100, 9, 'auto', 30).available).toBe(-20)
  })

  it('a denial names the numbers: "No capacity" when nothing is available, "Capacity exceeded" when the job is too big', () => {
    expect(capacityDenial(capacityFigures(50, 8, 'manual', 10), 1)).toBe('No capacity (busy=8, usable=10, leased=10)')
    expect(capacityDenial(capacityFigures(70, 0, 'manual', 60), 30)).toBe('Capacity exceeded: used=60, requested=30, capacity=70')
    expect(capacityDenial(capacityFigures(70, 0, 'manual', 60), 10)).toBeNull()
    expect(capacityDenial(capacityFigures(100, 9.95, 'manual', 0), 1)).toBe('No capacity (busy=9.95, usable=0, leased=0)') // the rating as stored, not rounded to 10
  })
})

describe('capacity in the engine', () => {
  it('busy=8 on 50 total units leaves usable=10 and denies with the numbers', () => {
    const { engine } = setup({ total_units: 50, busy_rating: 8 })
    expect(engine.getCapacity()).toMatchObject({ usable: 10, leased: 0, available: 10, busy_mode: 'manual' })
    engine.submit(aJob({ cost_units: 10 }))
    engine.submit(aJob({ cost_units: 1 }))
    leaseOrFail(engine, 'w1')
    expect(engine.getCapacity()).toMatchObject({ usable: 10, leased: 10, available: 0 })
    const denied = engine.requestLease({ worker_id: 'w2' })
    expect(denied).toEqual({ granted: false, reason: 'No capacity (busy=8, usable=10, leased=10)', retry_after_ms: 1500 })
  })

  it('a job whose cost exceeds what is available is denied with used/requested/capacity', () => {
    const { engine } = setup({ total_units: 70 })
    engine.submit(aJob({ cost_units: 60 }))
    engine.submit(aJob({ cost_units: 30 }))
    leaseOrFail(engine, 'w1')
    expect(engine.requestLease({ worker_id: 'w2' })).toMatchObject({
      granted: false,
      reason: 'Capacity exceeded: used=60, requested=30, capacity=70',
    })
  })

  it('a job costing exactly what is available is granted', () => {
    const { engine } = setup({ total_units: 10 })
    engine.submit(aJob({ cost_units: 4 }))
    engine.submit(aJob({ cost_units: 6 }))
    leaseOrFail(engine, 'w1')
    leaseOrFail(engine, 'w2')
    expect(engine.getCapacity()).toMatchObject({ leased: 10, available: 0 })
  })

  it('leased counts only ACTIVE leases: release and expiry free the units at once', () => {
    const { engine, clock } = setup({ total_units: 10 })
    engine.submit(aJob({ cost_units: 3 }))
    engine.submit(aJob({ cost_units: 5 }))
    const a = leaseOrFail(engine, 'w1')
    leaseOrFail(engine, 'w2', 60)
    expect(engine.getCapacity().leased).toBe(8)
    engine.release({ lease_id: a.lease.id, status: 'SUCCEEDED' })
    expect(engine.getCapacity().leased).toBe(5)
    clock.advance(65 * SECOND)
    engine.reap()
    expect(engine.getCapacity().leased).toBe(0)
  })

  it('raising the busy rating under running work leaves available negative and denies new leases', () => {
    const { engine } = setup({ total_units: 10 })
    engine.submit(aJob({ cost_units: 8 }))
    engine.submit(aJob({ cost_units: 1 }))
    leaseOrFail(engine, 'w1')
    engine.setCapacity({ busy_rating: 5 })
    expect(engine.getCapacity()).toMatchObject({ usable: 5, leased: 8, available: -3 })
    expect(engine.requestLease({ worker_id: 'w2' })).toMatchObject({ granted: false, reason: 'No capacity (busy=5, usable=5, leased=8)' })
  })

  it('the queue API lease request obeys the same capacity rule', () => {
    const { engine } = setup({ total_units: 50, busy_rating: 8 })
    const job = engine.submit(aJob({ cost_units: 11 })).job
    engine.claim({ worker_id: 'w' })
    const decision = engine.requestLeaseForJob({ job_id: job.id })
    expect(decision).toMatchObject({ approved: false, reason: 'Capacity exceeded: used=0, requested=11, capacity=10' })
  })

  it('a busy rating of 10 leaves nothing usable', () => {
    const { engine } = setup({ total_units: 100, busy_rating: 10 })
    engine.submit(aJob())
    expect(engine.requestLease({ worker_id: 'w' })).toMatchObject({ granted: false, reason: 'No capacity (busy=10, usable=0, leased=0)' })
  })
})

describe('capacity settings', () => {
  it('setCapacity changes total units and the manual busy rating and logs a CAPACITY event', () => {
    const { engine } = setup({ total_units: 100 })
    const seen: string[] = []
    engine.onEvent((e) => seen.push(`${e.entity_type}:${e.event_type}`))
    expect(engine.setCapacity({ total_units: 40, busy_rating: 5 })).toMatchObject({ total_units: 40, busy_rating: 5, busy_mode: 'manual', usable: 20 })
    expect(engine.setCapacity({ total_units: 60 })).toMatchObject({ total_units: 60, busy_rating: 5, usable: 30 })
    expect(seen).toEqual(['CAPACITY:CAPACITY_CHANGED', 'CAPACITY:CAPACITY_CHANGED'])
  })

  it('a change that names no field is 400 invalid_request naming the fields it takes, and logs nothing', () => {
    const { engine } = setup({ total_units: 100, busy_rating: 0 })
    const seen: string[] = []
    engine.onEvent((e) => seen.push(e.event_type))
    const error = expectEngineError(() => engine.setCapacity({}), 400, 'invalid_request')
    expect(error.detail).toBe('(body): give at least one of total_units, busy_rating')
    expect(seen).toEqual([])
  })

  it('a change to the values in force answers the figures and logs no CAPACITY_CHANGED: only a change is one', () => {
    const { engine } = setup({ total_units: 40, busy_rating: 5 })
    const seen: string[] = []
    engine.onEvent((e) => seen.push(e.event_type))
    expect(engine.setCapacity({ total_units: 40, busy_rating: 5 })).toMatchObject({ total_units: 40, busy_rating: 5, busy_mode: 'manual', usable: 20 })
    expect(engine.setCapacity({ busy_rating: 5 })).toMatchObject({ busy_rating: 5, usable: 20 })
    expect(seen).toEqual([])
    // auto is a value too: null when auto is in force changes nothing, and one field that differs is a change.
    engine.setCapacity({ busy_rating: null })
    engine.setCapacity({ busy_rating: null })
    engine.setCapacity({ total_units: 40, busy_rating: 3 })
    expect(seen).toEqual(['CAPACITY_CHANGED', 'CAPACITY_CHANGED'])
  })

  it('busy_rating null switches to auto, where the measured rating counts; manual ignores it', () => {
    const { engine } = setup({ total_units: 100, busy_rating: 2 })
    engine.reportMeasuredBusy(7)
    expect(engine.getCapacity()).toMatchObject({ busy_mode: 'manual', busy_rating: 2, usable: 80 })
    engine.setCapacity({ busy_rating: null })
    expect(engine.getCapacity()).toMatchObject({ busy_mode: 'auto', busy_rating: 7, usable: 30 })
    engine.reportMeasuredBusy(42) // clamped to 10
    expect(engine.getCapacity()).toMatchObject({ busy_rating: 10, usable: 0 })
  })

  it('on auto a measured rating is logged as BUSY_MEASURED when it moved a whole point from the last one logged, or reached 0 or 10, and the first of a start; never every sample', () => {
    const { engine } = setup({ total_units: 100, busy_rating: null })
    const logged: number[] = []
    engine.onEvent((e) => e.event_type === 'BUSY_MEASURED' && logged.push((e.data as { busy_rating: number }).busy_rating))
    for (const rating of [9.6, 9.8, 9.9, 10, 9.9, 10, 9.2, 8.6, 8.7, 7.7, 7.6, 5, 0.3, 0.1, 0, 0.4]) engine.reportMeasuredBusy(rating)
    expect(logged).toEqual([9.6, 10, 8.6, 7.6, 5, 0.3, 0])
    expect(engine.getCapacity()).toMatchObject({ busy_rating: 0.4, usable: 96 })
  })

  it('a measured rating that lets more units be used without an event says so, for the host to offer the waiting claims the queue again', () => {
    const { engine } = setup({ total_units: 100, busy_rating: null })
    expect(engine.reportMeasuredBusy(9.5)).toBe(false) // logged: its commit offers the queue
    expect(engine.reportMeasuredBusy(9.7)).toBe(false) // fewer units
    expect(engine.reportMeasuredBusy(9.1)).toBe(true) // more units, no event
    expect(engine.reportMeasuredBusy(9.1)).toBe(false)
    engine.setCapacity({ busy_rating: 2 })
    expect(engine.reportMeasuredBusy(1)).toBe(false) // manual: the measure changes nothing
  })

  it.each([
    [{ busy_rating: 11 }, 'busy_rating'],
    [{ busy_rating: -1 }, 'busy_rating'],
    [{ busy_rating: Number.NaN }, 'busy_rating'],
    [{ total_units: -1 }, 'total_units'],
    [{ total_units: 1.5 }, 'total_units'],
  ])('an invalid change %j is 400 invalid_request and changes nothing', (change, field) => {
    const { engine } = setup({ total_units: 100, busy_rating: 0 })
    const error = expectEngineError(() => engine.setCapacity(change), 400, 'invalid_request')
    expect(error.detail).toContain(field)
    expect(engine.getCapacity()).toMatchObject({ total_units: 100, busy_rating: 0 })
  })

  it('capacity settings survive reopening the database file', () => {
    const { dir, cleanup } = tempDir()
    try {
      const path = join(dir, 'leasehold.db')
      const first = openFileEngine(path, { total_units: 100, busy_rating: 0 })
      first.engine.setCapacity({ total_units: 24, busy_rating: 5 })
      first.sqlite.close()
      // The host passes its defaults again; the stored settings win.
      const second = openFileEngine(path, { total_units: 100, busy_rating: 0 })
      expect(second.engine.getCapacity()).toMatchObject({ total_units: 24, busy_rating: 5, busy_mode: 'manual', usable: 12 })
      second.engine.setCapacity({ busy_rating: null })
      second.sqlite.close()
      const third = openFileEngine(path, { total_units: 100, busy_rating: 3 })
      expect(third.engine.getCapacity()).toMatchObject({ total_units: 24, busy_mode: 'auto' })
      third.sqlite.close()
    } finally {
      cleanup()
    }
  })
})
