import { EventEmitter } from 'node:events'
import type { UtilityProcess } from 'electron'
import { describe, expect, test } from 'vitest'
import { type UtilityFork, utilitySpawner } from '../../src-main/pool/spawn-electron'

/** A utility process as Electron hands it back from fork: no pid until it has started. */
class FakeUtilityProcess extends EventEmitter {
  pid: number | undefined = undefined
  stdout = null
  stderr = null
  posted: unknown[] = []
  postMessage(message: unknown) {
    this.posted.push(message)
  }
  kill() {
    return true
  }
}

function spawnOne() {
  const child = new FakeUtilityProcess()
  const calls: Parameters<UtilityFork>[] = []
  const fork = ((...args: Parameters<UtilityFork>) => {
    calls.push(args)
    return child as unknown as UtilityProcess
  }) as UtilityFork
  const worker = utilitySpawner(fork, () => '/app/out/main/worker.js')({ LEASEHOLD_WORKER_ID: 'local-1.1' })
  return { child, worker, calls }
}

describe('utilitySpawner', () => {
  test('the pid is unknown until the process has spawned, then known, then gone with it', () => {
    const { child, worker } = spawnOne()
    expect(worker.pid).toBeNull()
    child.pid = 31337
    child.emit('spawn')
    expect(worker.pid).toBe(31337)
    child.pid = undefined
    child.emit('exit', 0)
    expect(worker.pid).toBeNull()
  })

  test('forks the worker entry with the pool’s environment, and relays messages and exits', () => {
    const { child, worker, calls } = spawnOne()
    expect(calls[0]?.[0]).toBe('/app/out/main/worker.js')
    expect((calls[0]?.[2]?.env as Record<string, string> | undefined)?.['LEASEHOLD_WORKER_ID']).toBe('local-1.1')
    const seen: unknown[] = []
    const exits: (number | null)[] = []
    worker.onMessage((message) => seen.push(message))
    worker.onExit((code) => exits.push(code))
    worker.send({ type: 'drain' })
    child.emit('message', { type: 'ready' })
    child.emit('exit', 3)
    expect(child.posted).toEqual([{ type: 'drain' }])
    expect(seen).toEqual([{ type: 'ready' }])
    expect(exits).toEqual([3])
  })
})
