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
