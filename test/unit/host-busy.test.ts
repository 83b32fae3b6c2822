import { expect, test } from 'vitest'
import { autoBusyRating, busyFromCpu, smoothedRating } from '../../src-main/busy/measure'

test('busy rating is 0 when the cores sat idle and 10 when none did', () => {
  expect(busyFromCpu({ idle: 0, total: 0, own: 0 }, { idle: 1000, total: 1000, own: 0 })).toBe(0)
  expect(busyFromCpu({ idle: 0, total: 0, own: 0 }, { idle: 0, total: 1000, own: 0 })).toBe(10)
  expect(busyFromCpu({ idle: 0, total: 0, own: 0 }, { idle: 250, total: 1000, own: 0 })).toBe(7.5)
})

test("the host's own CPU time does not count as the machine being busy", () => {
  expect(busyFromCpu({ idle: 0, total: 0, own: 0 }, { idle: 500, total: 1000, own: 500 })).toBe(0)
  expect(busyFromCpu({ idle: 0, total: 0, own: 0 }, { idle: 200, total: 1000, own: 300 })).toBe(5)
})

test('no elapsed time reads as idle rather than dividing by zero', () => {
  const same = { idle: 5, total: 10, own: 1 }
  expect(busyFromCpu(same, same)).toBe(0)
})

test('someone at the keyboard makes the machine busier; an away user adds nothing', () => {
  expect(autoBusyRating(1, 3)).toBe(6)
  expect(autoBusyRating(1, 30)).toBe(4)
  expect(autoBusyRating(1, 120)).toBe(2)
  expect(autoBusyRating(1, 3600)).toBe(1)
  expect(autoBusyRating(8, 3)).toBe(8) // the larger, not the sum
  expect(autoBusyRating(3.5, null)).toBe(3.5) // no user signal outside the desktop app
})

test('each sample moves the rating halfway to what it measured, to a tenth, and a machine that stays as it is is reached: idle reads 0 in the end, not 0.1 for ever', () => {
  const settle = (from: number, measured: number) => {
    const seen = [from]
    for (let i = 0; i < 12; i++) seen.push(smoothedRating(seen.at(-1)!, measured))
    return seen
  }
  expect(settle(6, 0).slice(0, 8)).toEqual([6, 3, 1.5, 0.7, 0.3, 0.1, 0, 0])
  expect(settle(4, 10).at(-1)).toBe(10)
  expect(settle(0.1, 0)[1]).toBe(0)
  expect(settle(9.9, 10)[1]).toBe(10)
  expect(smoothedRating(7.5, 7.5)).toBe(7.5)
  expect(smoothedRating(2, 5)).toBe(3.5)
})
