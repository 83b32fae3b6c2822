/**
 * The exec handler's programs end with their job: a stop ends the program's whole process group,
 * and a local worker that dies, or whose host dies, leaves none of them running
 * (docs/workers.md, "Stopping a job's programs").
 */
import Database from 'better-sqlite3'
import { spawn } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, expect, test } from 'vitest'
import { endGroups, processStarted } from '../../src-shared/process-groups'
import { tempDir } from '../helpers/host'
import { type ServeProcess, startServe } from '../helpers/process'
import { attempts, cancelUnfinished, cleanUp, events, killChildren, poolReady, QUEUE, settled, spawnWorker, startHost, submit, until, waitForEvent, workerStarted } from './support'

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

/** The parent of a process, from /proc. */
const parentOf = (pid: number) => Number(readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /s, '').split(' ')[1])

/**
 * `leasehold serve` started as a shell with job control starts a command from a terminal: in a
 * process group of its own (which its local workers join), under a parent in another group of
 * the same session. `served.exited` is the shell's, which waits for the host and exits with its
 * status. An exec job is submitted, and once its program runs the host's pid, its worker's and
 * the program's (a shell with a sleep in the background) are answered.
 */
async function serveAsJobRunningExec(): Promise<{ dataDir: string; host: number; worker: number; shell: number; sleep: number }> {
  const dataDir = tempDir()
  dirs.push(dataDir)
  served = await startServe(['--data-dir', dataDir, '--port', '0', '--busy', '0', '--workers', '1', '--drain-grace-s', '1', '--exec-allow', '/bin/sh'], {}, ['bash', '-c', 'set -m; "$@" & wait $!', 'bash'])
  const token = readFileSync(join(dataDir, 'token'), 'utf8').trim()
  const marker = join(tempDir(), 'pids')
  const res = await fetch(`${served.url}${QUEUE}/jobs/submit`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ job_type: 'exec', cost_units: 1, payload: shellWithChild(marker) }),
  })
  expect(res.status, await res.text()).toBe(201)
  const [shell, sleep] = await pidsIn(marker)
  const worker = parentOf(shell!)
  const host = parentOf(worker)
  started.add(worker)
  started.add(host)
  return { dataDir, host, worker, shell: shell!, sleep: sleep! }
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
  await killChildren()
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

/** An exec job of two attempts, once its program runs on this test's host's local worker: the job, the worker's pid and the program's. */
async function poolWorkerRunningExec(marker: string): Promise<{ id: string; worker: number; shell: number; sleep: number }> {
  const id = await submit(host, { job_type: 'exec', max_attempts: 2, payload: shellWithChild(marker) })
  const [shell, sleep] = await pidsIn(marker)
  const [worker] = host.pool!.pids()
  return { id, worker: worker!, shell: shell!, sleep: sleep! }
}

test("a local worker that dies has its exec programs ended by the host, before its job's next attempt starts them again", async () => {
  const marker = join(tempDir(), 'pids')
  const { id, worker, shell, sleep } = await poolWorkerRunningExec(marker)
  process.kill(worker, 'SIGKILL')
  await waitForEvent(host, { job: id, type: 'JOB_REQUEUED' }, 5000)
  await until(() => !runs(shell) && !runs(sleep), 5000, "the dead worker's shell and its background sleep ended")
  // Its next attempt runs alone.
  await until(() => attempts(host, id).length === 2, 15_000, 'the second attempt')
  const [again] = await until(async () => {
    const pids = await pidsIn(marker) // the second attempt's shell writes it again
    return pids[0] !== shell ? pids : null
  }, 10_000, 'the second attempt started its shell')
  expect(runs(again!)).toBe(true)
  expect(runs(shell) || runs(sleep)).toBe(false)
  expect(host.lines.some((line) => line.includes('left 1 exec program(s) running; ending them'))).toBe(true)
})

test("a SIGTERM to a local worker alone (its host not stopping) ends it: its exec programs end and its job's attempt is charged as its exit (worker_exited)", async () => {
  await poolReady(host, 1) // a worker killed by the test before is running again
  const { id, worker, shell, sleep } = await poolWorkerRunningExec(join(tempDir(), 'pids'))
  process.kill(worker, 'SIGTERM')
  await waitForEvent(host, { job: id, type: 'JOB_REQUEUED' }, 5000)
  expect(events(host, { job: id, type: 'LEASE_EXPIRED' })).toMatchObject([{ data: { reason: 'worker_exited' } }])
  const [attempt] = attempts(host, id)
  expect(attempt).toMatchObject({ outcome: 'TIMEOUT', disposition: 'REQUEUED' })
  // It died of the signal, as SIGTERM's default has it, once no drain came.
  expect(runs(worker)).toBe(false)
  expect(host.lines).toContainEqual(expect.stringContaining(`local worker ${attempt!.worker_id} exited (signal)`))
  await until(() => !runs(shell) && !runs(sleep), 5000, "the worker's shell and its background sleep ended")
})

test('a local worker whose host dies ends its exec programs before it exits', async () => {
  const { host: hostPid, worker, shell, sleep } = await serveAsJobRunningExec()
  process.kill(hostPid, 'SIGKILL')
  await served!.exited
  // The rule is what ends, not how soon: the group's grace is 2 s, and a loaded machine slows the worker's exit.
  await until(() => !runs(shell) && !runs(sleep) && !runs(worker), 15_000, 'the orphaned worker ended its programs and exited')
})

test.each([
  ['SIGHUP', 'its terminal closing'],
  ['SIGINT', 'Ctrl-C in its terminal'],
  ['SIGTERM', "systemctl stop with systemd's default KillMode, kill -- -PGID, timeout"],
] as const)("%s to the host's whole process group (%s) stops the host cleanly: its local worker, signalled too, drains, its exec programs end, and the job's attempt ends in the drain, leaving none to be charged at the next start", async (signal, _how) => {
  const { dataDir, host: hostPid, worker, shell, sleep } = await serveAsJobRunningExec()
  process.kill(-hostPid, signal)
  await until(() => served!.stderr().includes(`leasehold: ${signal}: finishing requests in flight and closing the database`), 5000, 'the stop began')
  // A terminal that closes sends two: the kernel to its foreground group, and the shell to its jobs.
  if (signal === 'SIGHUP') process.kill(-hostPid, signal)
  expect(await served!.exited, served!.stderr()).toBe(0)
  if (signal === 'SIGHUP') expect(served!.stderr()).toContain('leasehold: SIGHUP again: already stopping')
  await until(() => !runs(shell) && !runs(sleep) && !runs(worker), 15_000, 'the worker drained, its programs ended, and it exited')
  // The drain released the lease (the attempt failed `shutdown` and was given back): none was
  // expired as its worker's death, and none is left active for the next start to expire.
  const db = new Database(join(dataDir, 'leasehold.db'), { readonly: true })
  try {
    expect(db.prepare('SELECT state FROM leases').all()).toEqual([{ state: 'RELEASED' }])
    expect(db.prepare('SELECT state FROM jobs').all()).toEqual([{ state: 'QUEUED' }])
  } finally {
    db.close()
  }
})

test('a stopped local worker whose host is killed is sent SIGHUP by the kernel (its process group orphaned) and still ends its exec programs before it exits', async () => {
  const { host: hostPid, worker, shell, sleep } = await serveAsJobRunningExec()
  process.kill(worker, 'SIGSTOP')
  // Stopped before its host dies: the kernel hangs up a group left orphaned with a stopped process in it.
  await until(() => /^\d+ \(.*\) T /s.test(readFileSync(`/proc/${worker}/stat`, 'utf8')), 5000, 'the worker stopped')
  process.kill(hostPid, 'SIGKILL')
  await served!.exited
  await until(() => !runs(shell) && !runs(sleep) && !runs(worker), 15_000, 'the orphaned worker ended its programs and exited')
})

/** A `leasehold worker` of this test's host running an exec job (of a queue the host's own worker does not take), with its program's pids. */
async function workerRunningExec(graceS: number): Promise<{ worker: ReturnType<typeof spawnWorker>; id: string; shell: number; sleep: number }> {
  const worker = spawnWorker(host, ['--exec-allow', '/bin/sh', '--streams', 'signals', '--grace-s', String(graceS)])
  await workerStarted(worker)
  const marker = join(tempDir(), 'pids')
  const id = await submit(host, { job_type: 'exec', queue: 'signals', payload: shellWithChild(marker) })
  const [shell, sleep] = await pidsIn(marker)
  return { worker, id, shell: shell!, sleep: sleep! }
}

test('leasehold worker takes SIGHUP (its terminal closing) as SIGTERM: it drains, ending its exec programs with their jobs, and a second SIGHUP does not kill it', async () => {
  const { worker, id, shell, sleep } = await workerRunningExec(2)
  worker.child.kill('SIGHUP')
  await until(() => worker.output().includes('stopping; running jobs have 2 s to finish'), 5000, 'the drain began')
  worker.child.kill('SIGHUP')
  expect(await worker.exited, worker.output()).toBe(0)
  expect(worker.output()).toContain('leasehold worker: SIGHUP again: already stopping')
  await until(() => !runs(shell) && !runs(sleep), 5000, 'the shell and its background sleep ended')
  // Failed as the drain fails a job (requeued), not left to its lease's expiry.
  expect(attempts(host, id)[0]).toMatchObject({ outcome: 'FAILED', disposition: 'REQUEUED' })
})

test("leasehold worker's second Ctrl-C ends the drain's grace: the running jobs stop now, their exec programs with them, before it exits", async () => {
  const { worker, shell, sleep } = await workerRunningExec(600)
  worker.child.kill('SIGINT')
  await until(() => worker.output().includes('stopping; running jobs have 600 s to finish'), 5000, 'the drain began')
  worker.child.kill('SIGINT')
  expect(await worker.exited, worker.output()).toBe(0)
  expect(worker.output()).toContain('leasehold worker: SIGINT again: stopping the running jobs now')
  expect(runs(shell) || runs(sleep)).toBe(false)
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
