/**
 * Handler threads that die before running a job (thread-crashes.ts): when such deaths count, how
 * long the next replacement waits, and which module an uncaught error's stack blames.
 */
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { expect, test } from 'vitest'
import { diedBeforeWork, moduleAtFault, nextThreadRestart, SETTLE_MS } from '../../src-worker/thread-crashes'

const SECOND = 1000

test('a thread that dies before running a job, as its modules load or within SETTLE_MS of that, died before work; one that ran a job or lived longer did not', () => {
  expect(diedBeforeWork({ cause: null, ranJobs: false, readyForMs: null })).toBe(true)
  expect(diedBeforeWork({ cause: null, ranJobs: false, readyForMs: SETTLE_MS - 1 })).toBe(true)
  expect(diedBeforeWork({ cause: null, ranJobs: false, readyForMs: SETTLE_MS })).toBe(false)
  expect(diedBeforeWork({ cause: null, ranJobs: true, readyForMs: 0 })).toBe(false)
})

test('threads that die before work in a row are replaced after 100 ms, 200 ms, 400 ms … up to 30 s', () => {
  let streak = 0
  const delays: number[] = []
  for (let i = 0; i < 11; i++) {
    const restart = nextThreadRestart(streak)
    streak = restart.failures
    delays.push(restart.delayMs)
  }
  expect(delays).toEqual([100, 200, 400, 800, 1600, 3200, 6400, 12_800, 25_600, 30 * SECOND, 30 * SECOND])
})

test('the module at fault is the first handler module of the folder an uncaught error’s stack names, as a file URL or a path', () => {
  const dir = '/data/handlers'
  const error = (frames: string[]) => Object.assign(new Error('late'), { stack: ['Error: late', ...frames.map((f) => `    at ${f}`)].join('\n') })
  const url = pathToFileURL(join(dir, 'late.mjs')).href
  expect(moduleAtFault(error([`Timeout._onTimeout (${url}:1:30)`, 'listOnTimeout (node:internal/timers:573:17)']), dir)).toBe(join(dir, 'late.mjs'))
  expect(moduleAtFault(error([`${join(dir, 'b.mjs')}:2:5`]), `${dir}/`)).toBe(join(dir, 'b.mjs'))
  expect(moduleAtFault(error([`Timeout._onTimeout (${url}?tsx-namespace=853de49e:1:26)`]), dir)).toBe(join(dir, 'late.mjs'))
  expect(moduleAtFault(error(['listOnTimeout (node:internal/timers:573:17)']), dir)).toBeNull()
  expect(moduleAtFault(error([`x (${pathToFileURL('/elsewhere/late.mjs').href}:1:1)`, `y (${pathToFileURL(join(dir, 'sub', 'a.mjs')).href}:1:1)`]), dir)).toBeNull()
  expect(moduleAtFault(error([`x (${url}:1:1)`]), null)).toBeNull()
})
