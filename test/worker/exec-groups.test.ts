/**
 * The exec handler's programs end with their job: a stop ends the program's whole process group,
 * and a local worker that dies, or whose host dies, leaves none of them running
 * (docs/workers.md, "Stopping a job's programs").
 */
import { spawn } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, expect, test } from 'vitest'
import { endGroups, processStarted } from '../../src-shared/process-groups'
import { tempDir } from '../helpers/host'
import { type ServeProcess, startServe } from '../helpers/process'
import { attempts, cancelUnfinished, cleanUp, poolReady, QUEUE, settled, startHost, submit, until, waitForEvent } from './support'

/** Whether a process still runs: there, and not a zombie. */
function runs(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z /s.test(readFileSync(`/proc/${pid}/stat`, 'utf8'))
  } catch {
    return false
  }
}

/** Every process a test started or found, killed after it if still running: no test leaves one behind, failed or not. */
const started = new Set<number>()
const dirs: string[] = []
let served: ServeProcess | null = null

/** The tests' programs sleep this long: 30 s, in a spelling no other process's command line has. */
const SLEEP = `30.${process.pid}`

/**
 * Kills what the tests started and is still running: the processes they know, and any whose
 * command line names {@link SLEEP} (a program an attempt started after its test failed).
 */
function killLeftovers(): void {
  for (const name of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      if (readFileSync(`/proc/${name}/cmdline`, 'utf8').includes(SLEEP)) started.add(Number(name))
    } catch {
      // gone meanwhile
    }
  }
  for (const pid of started) if (runs(pid)) process.kill(pid, 'SIGKILL')
  started.clear()
}

/**
 * A shell that starts a sleep in the background, writes its own pid and the sleep's to `marker`
 * and waits: the program and what it started, in one process group.
 */
const shellWithChild = (marker: string) => ({ program: '/bin/sh', args: ['-c', `sleep ${SLEEP} & echo $$ $! > ${marker}; wait`] })

/** The pids the shell wrote, once it has: each is killed after the test if still running. */
async function pidsIn(marker: string): Promise<number[]> {
  const text = await until(() => (existsSync(marker) && /\d+ \d+\n/.test(readFileSync(marker, 'utf8')) ? readFileSync(marker, 'utf8') : null), 10_000, `${marker} written`)
  const pids = text.trim().split(' ').map(Number)
  for (const pid of pids) started.add(pid)
  return pids
}

let host: Awaited<ReturnType<typeof startHost>>

beforeAll(async () => {
  host = await startHost({ workers: 1, leaseTtlS: 3, execAllow: ['/bin/sh'] })
  await poolReady(host, 1)
})

afterEach(async () => {
  if (served) {
    served.child.kill('SIGKILL')
    await served.exited
    served = null
  }
  if (host) cancelUnfinished(host)
  killLeftovers()
})

afterAll(async () => {
  await cleanUp(dirs)
  killLeftovers() // an attempt its host started as it stopped
})

test("exec's timeout ends the program's whole process group, and the job ends when its program has", async () => {
  const marker = join(tempDir(), 'pids')
  const id = await submit(host, { job_type: 'exec', max_attempts: 1, payload: { ...shellWithChild(marker), timeout_ms: 1000 } })
  const [shell, sleep] = await pidsIn(marker)
  // Not after the 30 s its background sleep would hold the output open.
  const { job, result } = await settled(host, id, 5000)
  expect(job.state).toBe('FAILED')
  expect(result!.error).toMatchObject({ code: 'exec_timeout' })
  expect(runs(shell!)).toBe(false)
  await until(() => !runs(sleep!), 3000, 'the background sleep ended')
})

test("exec: a cancel ends the program's whole process group", async () => {
  const marker = join(tempDir(), 'pids')
  const id = await submit(host, { job_type: 'exec', payload: shellWithChild(marker) })
  const [shell, sleep] = await pidsIn(marker)
  const res = await host.call(`${QUEUE}/jobs/${id}/cancel`, { method: 'POST', json: {} })
  expect(res.status).toBe(200)
  expect((await settled(host, id, 5000)).job.state).toBe('CANCELED')
  await until(() => !runs(shell!) && !runs(sleep!), 3000, 'the shell and its background sleep ended')
})

test("a local worker that dies has its exec programs ended by the host, before its job's next attempt starts them again", async () => {
  const marker = join(tempDir(), 'pids')
  const id = await submit(host, { job_type: 'exec', max_attempts: 2, payload: shellWithChild(marker) })
  const [shell, sleep] = await pidsIn(marker)
  const [worker] = host.pool!.pids()
  process.kill(worker!, 'SIGKILL')
  await waitForEvent(host, { job: id, type: 'JOB_REQUEUED' }, 5000)
  await until(() => !runs(shell!) && !runs(sleep!), 5000, "the dead worker's shell and its background sleep ended")
  // Its next attempt runs alone.
  await until(() => attempts(host, id).length === 2, 15_000, 'the second attempt')
  const [again] = await until(async () => {
    const pids = await pidsIn(marker) // the second attempt's shell writes it again
    return pids[0] !== shell ? pids : null
  }, 10_000, 'the second attempt started its shell')
  expect(runs(again!)).toBe(true)
  expect(runs(shell!) || runs(sleep!)).toBe(false)
  expect(host.lines.some((line) => line.includes('left 1 exec program(s) running; ending them'))).toBe(true)
})

test('a local worker whose host dies ends its exec programs before it exits', async () => {
  const dataDir = tempDir()
  dirs.push(dataDir)
  served = await startServe(['--data-dir', dataDir, '--port', '0', '--busy', '0', '--workers', '1', '--exec-allow', '/bin/sh'])
  const token = readFileSync(join(dataDir, 'token'), 'utf8').trim()
  const marker = join(tempDir(), 'pids')
  const res = await fetch(`${served.url}${QUEUE}/jobs/submit`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ job_type: 'exec', cost_units: 1, payload: shellWithChild(marker) }),
  })
  expect(res.status, await res.text()).toBe(201)
  const [shell, sleep] = await pidsIn(marker)
  const worker = Number(readFileSync(`/proc/${shell}/stat`, 'utf8').replace(/^.*\) /s, '').split(' ')[1])
  started.add(worker)
  served.child.kill('SIGKILL')
  await served.exited
  // The rule is what ends, not how soon: the group's grace is 2 s, and a loaded machine slows the worker's exit.
  await until(() => !runs(shell!) && !runs(sleep!) && !runs(worker), 15_000, 'the orphaned worker ended its programs and exited')
})

test('a process group is not signalled once the process under its id is not the one recorded (pid reuse)', async () => {
  const child = spawn('/usr/bin/sleep', [SLEEP], { detached: true, stdio: 'ignore' })
  started.add(child.pid!)
  const exited = new Promise((resolve) => child.once('exit', resolve))
  // As a pid given to another process would read: another start.
  await endGroups([{ pgid: child.pid!, started: `${processStarted(child.pid!)}0` }], 100)
  expect(runs(child.pid!)).toBe(true)
  await endGroups([{ pgid: child.pid!, started: processStarted(child.pid!) }], 100)
  await exited
})
