import { describe, expect, it, vi } from 'vitest'
import { MINUTE } from '../../src-main/engine/rules/clock'
import { setup, T0 } from '../helpers/engine'

/** croner's Cron, counting the expressions it reads and the upcoming firings it computes. */
const counted = vi.hoisted(() => ({ parses: 0, nextRuns: 0, previousRuns: 0 }))
vi.mock('croner', async (original) => {
  const { Cron } = await original<typeof import('croner')>()
  class CountedCron extends Cron {
    constructor(pattern: string, options?: object) {
      super(pattern, options)
      counted.parses += 1
    }

    override nextRuns(n: number, previous?: Date | string): Date[] {
      counted.nextRuns += 1
      return super.nextRuns(n, previous)
    }

    override previousRuns(n: number, reference?: Date | string): Date[] {
      counted.previousRuns += 1
      return super.previousRuns(n, reference)
    }
  }
  return { Cron: CountedCron }
})

const job = { job_type: 'report', cost_units: 1 }

describe('the cron work of schedules: each expression read once, each list of upcoming firings made once', () => {
  it('a list read parses each cron expression once: reads and firing passes parse none already read', () => {
    const { engine, clock } = setup()
    engine.createSchedule({ name: 'a', cron: '* * * * *', timezone: 'UTC', job })
    engine.createSchedule({ name: 'b', cron: '* * * * *', timezone: 'UTC', job })
    engine.createSchedule({ name: 'c', cron: '30 2 * * *', timezone: 'Europe/Berlin', job })
    const parsed = counted.parses
    expect(parsed).toBeLessThanOrEqual(2)
    engine.listSchedules()
    engine.listSchedules()
    clock.set(T0 + MINUTE)
    expect(engine.fireDueSchedules()).toHaveLength(2)
    engine.listSchedules()
    expect(counted.parses).toBe(parsed)
  })

  it("a list read computes a schedule's upcoming firings once until its next firing moves, and lists the same times", () => {
    const { engine, clock } = setup()
    engine.createSchedule({ name: 'often', cron: '*/5 * * * *', timezone: 'UTC', job })
    const first = engine.listSchedules()
    const computed = counted.nextRuns
    expect(engine.listSchedules()).toEqual(first)
    expect(engine.getSchedule('often')).toEqual(first[0])
    expect(counted.nextRuns).toBe(computed)
    clock.set(T0 + 5 * MINUTE)
    engine.fireDueSchedules()
    const [after] = engine.listSchedules()
    expect(counted.nextRuns).toBe(computed + 1)
    expect(after!.next_fire_times).toEqual([T0 + 10 * MINUTE, T0 + 15 * MINUTE, T0 + 20 * MINUTE])
  })

  it("a firing pass reckons an expression's firings once, however many due schedules share it", () => {
    const { engine, clock } = setup()
    for (const name of ['x', 'y', 'z']) engine.createSchedule({ name, cron: '*/2 * * * *', timezone: 'UTC', job })
    clock.set(T0 + 3 * MINUTE)
    const before = counted.previousRuns
    const firings = engine.fireDueSchedules()
    expect(firings.map((firing) => firing.fire_at)).toEqual([T0 + 2 * MINUTE, T0 + 2 * MINUTE, T0 + 2 * MINUTE])
    expect(counted.previousRuns).toBe(before + 1)
    expect(engine.listSchedules().map((schedule) => schedule.next_fire_at)).toEqual([T0 + 4 * MINUTE, T0 + 4 * MINUTE, T0 + 4 * MINUTE])
  })
})
