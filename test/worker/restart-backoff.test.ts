/**
 * A local worker that exits is started again after 1 s, 2 s, 4 s … up to the cap for failures
 * in a row; one that stayed up a minute starts the series over, at 1 s (docs/workers.md).
 */
import { expect, test } from 'vitest'
import { nextRestart } from '../../src-shared/restart-backoff'

test('failures in a row wait 1 s, 2 s, 4 s … up to the cap', () => {
  let failures = 0
  const delays: number[] = []
  for (let i = 0; i < 7; i++) {
    const restart = nextRestart(failures, false, 30_000)
    failures = restart.failures
    delays.push(restart.delayMs)
  }
  expect(delays).toEqual([1000, 2000, 4000, 8000, 16_000, 30_000, 30_000])
})

test('a worker that stayed up starts the series over at 1 s, however many failures came before', () => {
  expect(nextRestart(5, true, 30_000)).toEqual({ failures: 1, delayMs: 1000 })
  expect(nextRestart(0, true, 30_000)).toEqual({ failures: 1, delayMs: 1000 })
  expect(nextRestart(1, false, 30_000)).toEqual({ failures: 2, delayMs: 2000 })
})
