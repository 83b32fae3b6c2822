/**
 * The reaper's timer (src-main/reaper/timer.ts): it sleeps until the next moment due, at most a
 * second, instead of polling; on a clock that may move at any moment it keeps the poll's pace.
 */
import { afterEach, describe, expect, it } from 'vitest'
import { ClockWaiters } from '../../src-main/dispatch/clock-waiters'
import { ManualClock, SECOND } from '../../src-main/engine/rules/clock'
import { MAX_SLEEP_MS, POLL_MS, ReaperTimer, sleepAfterPass } from '../../src-main/reaper/timer'
import { T0 } from '../helpers/engine'
import { FakeTimers } from './support'

describe('the reaper sleeps until the next moment due', () => {
  it('with nothing due, a second at most: a wall clock that jumps (a laptop waking) is seen within it', () => {
    expect(sleepAfterPass(T0, null)).toBe(MAX_SLEEP_MS)
    expect(sleepAfterPass(T0, T0 + 30 * SECOND)).toBe(MAX_SLEEP_MS)
  })

  it('until the moment itself when it is sooner', () => {
    expect(sleepAfterPass(T0, T0 + 300)).toBe(300)
    expect(sleepAfterPass(T0, T0 + 1)).toBe(1)
  })

  it('a moment still due after a pass (a batch left over, a pass that failed) is looked at again at the poll\'s pace, never in a busy loop', () => {
    expect(sleepAfterPass(T0, T0)).toBe(POLL_MS)
    expect(sleepAfterPass(T0, T0 - 5 * SECOND)).toBe(POLL_MS)
  })
})

describe('the reaper timer', () => {
  const started: ReaperTimer[] = []
  afterEach(() => {
    for (const timer of started.splice(0)) timer.stop()
  })

  function timerWith(options: { polled?: boolean; due?: () => number | null }) {
    const clock = new ManualClock(T0)
    const fake = new FakeTimers()
    let passes = 0
    const timer = new ReaperTimer({
      clock,
      timers: fake,
      polled: options.polled ?? false,
      pass: () => void passes++,
      nextDueAt: options.due ?? (() => null),
    })
    started.push(timer)
    timer.start()
    return { clock, fake, timer, passes: () => passes }
  }

  it('an idle host passes once a second, not every 250 ms', () => {
    const { fake, passes } = timerWith({})
    expect(fake.armed.map((t) => t.ms)).toEqual([MAX_SLEEP_MS])
    fake.runOut()
    expect(passes()).toBe(1)
    expect(fake.armed.map((t) => t.ms)).toEqual([MAX_SLEEP_MS])
  })

  it('wakes at the moment a lease expires, not up to a poll later', () => {
    let due: number | null = T0 + 400
    const { clock, fake, passes } = timerWith({ due: () => due })
    expect(fake.armed.map((t) => t.ms)).toEqual([400])
    clock.advance(400)
    due = null // the pass expired it
    fake.runOut()
    expect(passes()).toBe(1)
    expect(fake.armed.map((t) => t.ms)).toEqual([MAX_SLEEP_MS])
  })

  it('on a clock that may move at any moment (an injected one) it keeps the poll\'s pace, whatever is due', () => {
    const { fake } = timerWith({ polled: true, due: () => T0 + 30 * SECOND })
    expect(fake.armed.map((t) => t.ms)).toEqual([POLL_MS])
    fake.runOut()
    expect(fake.armed.map((t) => t.ms)).toEqual([POLL_MS])
  })

  it('a moment that cannot be read (the database closing) is looked for again at the poll\'s pace', () => {
    const { fake } = timerWith({
      due: () => {
        throw new Error('The database connection is not open')
      },
    })
    expect(fake.armed.map((t) => t.ms)).toEqual([POLL_MS])
  })

  it('a wait that begins sooner than the sleep brings the timer forward; a later one leaves it', () => {
    const { clock, fake, timer } = timerWith({})
    clock.advance(100)
    timer.dueBy(T0 + 5 * SECOND)
    expect(fake.armed.map((t) => t.ms)).toEqual([MAX_SLEEP_MS])
    timer.dueBy(T0 + 300)
    expect(fake.armed.map((t) => t.ms)).toEqual([200])
    timer.dueBy(T0) // already come: at once
    expect(fake.armed.map((t) => t.ms)).toEqual([0])
  })

  it('a pass that throws is still followed by the next, as an interval would be', () => {
    const clock = new ManualClock(T0)
    const fake = new FakeTimers()
    const timer = new ReaperTimer({
      clock,
      timers: fake,
      polled: false,
      pass: () => {
        throw new Error('disk I/O error')
      },
      nextDueAt: () => null,
    })
    started.push(timer)
    timer.start()
    expect(() => fake.runOut()).toThrow('disk I/O error')
    expect(fake.armed.map((t) => t.ms)).toEqual([MAX_SLEEP_MS])
  })

  it('stopped, it arms nothing more', () => {
    const { fake, timer } = timerWith({})
    timer.stop()
    expect(fake.armed).toEqual([])
    timer.dueBy(T0)
    expect(fake.armed).toEqual([])
  })
})

describe('a clock waiter and the reaper, as the host wires them', () => {
  it('a wait for a moment sooner than the sleep wakes the reaper by then, and its pass releases the waiter', async () => {
    const clock = new ManualClock(T0)
    const fake = new FakeTimers()
    let reaper: ReaperTimer | null = null
    const waiters = new ClockWaiters(clock, (at) => reaper?.dueBy(at))
    reaper = new ReaperTimer({ clock, timers: fake, polled: false, pass: () => waiters.check(), nextDueAt: () => waiters.nextAt() })
    reaper.start()
    expect(fake.armed.map((t) => t.ms)).toEqual([MAX_SLEEP_MS])

    const later = waiters.waitUntil(T0 + 5 * SECOND, 60 * SECOND)
    const sooner = waiters.waitUntil(T0 + 300, 60 * SECOND)
    expect(waiters.nextAt()).toBe(T0 + 300)
    expect(fake.armed.map((t) => t.ms)).toEqual([300])
    clock.advance(300)
    fake.runOut()
    await expect(sooner).resolves.toBe(true)
    expect(waiters.nextAt()).toBe(T0 + 5 * SECOND)
    expect(fake.armed.map((t) => t.ms)).toEqual([MAX_SLEEP_MS])
    waiters.close()
    await expect(later).resolves.toBe(false)
    expect(waiters.nextAt()).toBeNull()
    reaper.stop()
  })
})
