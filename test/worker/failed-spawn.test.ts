/**
 * A local worker whose spawn fails (spawn EMFILE when the host is out of descriptors, ENOENT
 * here) is an exit like any other: logged with its reason, its slot restarted with the usual
 * backoff; and a stop waits on no process that does not exist.
 */
import { spawn } from 'node:child_process'
import { afterEach, expect, test } from 'vitest'
import { ClockWaiters } from '../../src-main/dispatch/clock-waiters'
import { Dispatch } from '../../src-main/dispatch/dispatch'
import { childWorker, type Spawner } from '../../src-main/pool/spawn'
import { WorkerPool } from '../../src-main/pool/supervisor'
import { WorkerDirectory } from '../../src-main/worker-roster/directory'
import { setup } from '../helpers/engine'
import { until } from '../helpers/until'

/** A child process that cannot start: its program does not exist. */
const failingSpawn = () => childWorker(spawn('/nonexistent/leasehold-node', [], { stdio: ['ignore', 'pipe', 'pipe', 'ipc'] }))

let pool: WorkerPool | null = null
afterEach(async () => {
  await pool?.stop(0)
  pool = null
})

function aPool(spawner: Spawner) {
  const { engine, clock } = setup()
  const lines: string[] = []
  const directory = new WorkerDirectory(() => clock.now())
  pool = new WorkerPool({
    engine,
    dispatch: new Dispatch(engine),
    clockWaiters: new ClockWaiters(clock),
    directory,
    size: 1,
    spawn: spawner,
    log: (line) => lines.push(line),
    workerEnv: {},
  })
  pool.start()
  return { lines, directory, engine }
}

test('a spawn that fails is reported as the exit of the worker, with its reason', async () => {
  const worker = failingSpawn()
  expect(worker.pid).toBeNull()
  const exit = await new Promise<[number | null, Error | undefined]>((resolve) => worker.onExit((code, failed) => resolve([code, failed])))
  expect(exit[0]).toBeNull()
  expect(exit[1]?.message).toMatch(/ENOENT/)
  worker.kill() // nothing to kill, and no throw
})

test('a local worker whose spawn fails is restarted with the usual backoff, and is not left "starting"', async () => {
  const spawned: string[] = []
  const { lines, directory, engine } = aPool((env) => {
    spawned.push(env.LEASEHOLD_WORKER_ID!)
    return failingSpawn()
  })
  await until(() => spawned.length >= 3, 5000, 'two restarts')
  expect(lines.slice(0, 2)).toEqual([
    'leasehold: local worker local-1.1 could not start (spawn /nonexistent/leasehold-node ENOENT); restarting in 1000 ms',
    'leasehold: local worker local-1.2 could not start (spawn /nonexistent/leasehold-node ENOENT); restarting in 2000 ms',
  ])
  expect(directory.list(engine).map((w) => w.worker_id)).not.toContain('local-1.1')
})

test('a stop does not wait on a worker whose spawn failed', async () => {
  aPool(failingSpawn)
  const stopped = pool!.stop(0).then(() => 'stopped')
  const late = new Promise((resolve) => setTimeout(() => resolve('still waiting'), 2000).unref())
  expect(await Promise.race([stopped, late])).toBe('stopped')
  pool = null
})
