/**
 * The auto busy rating leaves out the CPU of the host's whole process tree (docs/capacity.md):
 * a program a local worker runs, burning a core, is the host's background work, not the load of
 * the person at the desk. The machine is a stand-in whose only load is that tree, so the test
 * reads the same on a busy test machine as on an idle one.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { afterAll, expect, test } from 'vitest'
import type { MachineCpu } from '../../src-main/busy/measure'
import { cleanUp, poolReady, settled, startHost, submit } from './support'

/**
 * The ticks each process of this process's tree has run itself (utime + stime), as last seen:
 * its own book of the tree, kept apart from the host's reading, remembering processes that ended.
 */
const ledger = new Map<number, number>()

function noteTree(): number {
  const parents = new Map<number, number>()
  const ticks = new Map<number, number>()
  for (const name of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      const fields = readFileSync(`/proc/${name}/stat`, 'utf8').replace(/^.*\) /s, '').split(' ')
      parents.set(Number(name), Number(fields[1]))
      ticks.set(Number(name), Number(fields[11]) + Number(fields[12]))
    } catch {
      // gone meanwhile
    }
  }
  const inTree = (pid: number): boolean => pid === process.pid || (parents.has(pid) && pid > 1 && inTree(parents.get(pid)!))
  for (const [pid, t] of ticks) if (inTree(pid)) ledger.set(pid, t)
  return [...ledger.values()].reduce((a, b) => a + b, 0) * 10
}

/** One core whose every busy millisecond is the tree's: idle is what the tree left of the wall time. */
const started = performance.now()
const base = noteTree()
const ratings: number[] = []
let host: Awaited<ReturnType<typeof startHost>> | null = null

function idleMachine(): MachineCpu {
  if (host) ratings.push(host.engine.getCapacity().busy_rating) // the rating the last sample left
  const total = performance.now() - started
  return { total, idle: Math.max(0, total - (noteTree() - base)) }
}

afterAll(() => cleanUp())

test("a local worker's program burning a core on an otherwise idle machine leaves the auto busy rating at 0", async () => {
  host = await startHost({ workers: 1, busy: 'auto', execAllow: [process.execPath] }, { machineCpu: idleMachine })
  await poolReady(host, 1)
  const burn = 'const end = Date.now() + 7000; while (Date.now() < end);'
  const id = await submit(host, { job_type: 'exec', max_attempts: 1, payload: { program: process.execPath, args: ['-e', burn] } })
  const { job } = await settled(host, id, 30_000)
  expect(job.state).toBe('DONE')
  expect(ratings.length).toBeGreaterThanOrEqual(3) // samples over the burn, every 2 s
  expect(Math.max(...ratings)).toBeLessThanOrEqual(1)
  expect(host.engine.getCapacity().busy_rating).toBeLessThanOrEqual(1)
}, 40_000)
