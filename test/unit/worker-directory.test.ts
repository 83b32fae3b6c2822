/**
 * The workers the host lists (GET /api/workers, leasehold status, the dashboard's Workers view):
 * a worker of another process or machine that is no longer heard from is shown silent, then
 * forgotten; one holding a lease, and the host's own local workers, are not.
 */
import { expect, test } from 'vitest'
import { FORGOTTEN_AFTER_MS, SILENT_AFTER_MS, WorkerDirectory } from '../../src-main/worker-roster/directory'
import { aJob, setup } from '../helpers/engine'
import { claimOrFail } from './support'

test('an external or remote worker not heard from for twice the longest claim wait is silent, and after an hour of silence it is forgotten', () => {
  const { engine, clock } = setup()
  const directory = new WorkerDirectory(() => clock.now())
  directory.seen('http-1')
  directory.update('redis-1', { kind: 'redis', state: 'active' })
  directory.update('local-1', { kind: 'local', state: 'ready', pid: 42 })
  const states = () => Object.fromEntries(directory.list(engine).map((w) => [w.worker_id, w.state]))
  expect(states()).toEqual({ 'http-1': 'active', 'redis-1': 'active', 'local-1': 'ready' })

  clock.advance(SILENT_AFTER_MS - 1)
  expect(states()).toEqual({ 'http-1': 'active', 'redis-1': 'active', 'local-1': 'ready' })
  directory.seen('http-1') // its next claim
  clock.advance(1)
  expect(states()).toEqual({ 'http-1': 'active', 'redis-1': 'silent', 'local-1': 'ready' })

  clock.advance(FORGOTTEN_AFTER_MS)
  expect(states()).toEqual({ 'local-1': 'ready' })
})

test('a quiet worker that still holds a lease is listed busy, not silent: its lease says whether it is alive', () => {
  const { engine, clock } = setup({ config: { leaseTtlS: 3600 } })
  const directory = new WorkerDirectory(() => clock.now())
  engine.submit(aJob())
  claimOrFail(engine, 'http-1')
  directory.seen('http-1')
  clock.advance(FORGOTTEN_AFTER_MS)
  expect(directory.list(engine)).toEqual([expect.objectContaining({ worker_id: 'http-1', state: 'busy' })])
})

test('a job type nobody runs: workers are at hand and each that still works named its types in a claim, this one not among them', () => {
  const { clock } = setup()
  const directory = new WorkerDirectory(() => clock.now())
  expect(directory.nobodyRuns('resize')).toBe(false) // no worker at all: the job waits for any
  directory.update('local-1', { kind: 'local', state: 'ready', pid: 42 })
  expect(directory.nobodyRuns('resize')).toBe(false) // it has claimed nothing yet: it may run anything
  directory.claims('local-1', ['thumbnail'])
  directory.seen('http-1')
  directory.claims('http-1', ['thumbnail', 'upload'])
  expect(directory.nobodyRuns('resize')).toBe(true)
  expect(directory.nobodyRuns('upload')).toBe(false)
  // The only worker that runs it goes silent: nobody at hand does.
  directory.seen('http-2')
  directory.claims('http-2', ['resize'])
  expect(directory.nobodyRuns('resize')).toBe(false)
  clock.advance(SILENT_AFTER_MS)
  directory.seen('http-1')
  expect(directory.nobodyRuns('resize')).toBe(true)
  // A claim that names no types: that worker takes any.
  directory.claims('http-1', null)
  expect(directory.nobodyRuns('resize')).toBe(false)
  directory.forget('http-1')
  expect(directory.nobodyRuns('resize')).toBe(true)
})
