/**
 * The client commands — `leasehold submit`, `jobs`, `status` — as a user runs them: the real
 * command (bin/leasehold.js) against an in-process host on a free port, found through
 * `--data-dir` (the host's host.json and token). The host's clock is manual so that a test can
 * halt a job on a held file (the one retry comes 180 s after the denial) without waiting.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { chmodSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { createServer as createHttpServer, request as httpRequest } from 'node:http'
import { createServer as createHttpsServer } from 'node:https'
import { type AddressInfo, createServer } from 'node:net'
import { networkInterfaces } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import { ProgressLine, waitForJob } from '../../src-main/commands/wait'
import { LockFile } from '../../src-main/db/lock-file'
import { ManualClock, SECOND } from '../../src-main/engine/rules/clock'
import { FILE_RETRY_MS } from '../../src-main/engine/verbs/files'
import { cuttingProxy } from '../helpers/cutting-proxy'
import { startTestHost, tempDir, type TestHost } from '../helpers/host'
import { runCli, runCliAsync, startCli as startCliProcess, startServe } from '../helpers/process'

/** The runner's own LEASEHOLD_* settings must not pick the host. */
const CLEAN_ENV: NodeJS.ProcessEnv = { LEASEHOLD_URL: undefined, LEASEHOLD_TOKEN: undefined, LEASEHOLD_DATA_DIR: undefined }

let host: TestHost
let clock: ManualClock
const dirs: string[] = []
const children: ChildProcess[] = []

beforeAll(async () => {
  clock = new ManualClock(Date.now())
  host = await startTestHost({ workers: 0, leaseTtlS: 30, heartbeatGraceS: 5 }, { clock })
})
afterAll(async () => {
  await host.dispose()
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})
afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
})

/** Runs `leasehold …` to completion without blocking this process (and the host in it). */
function runAsync(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return runCliAsync(args, { ...CLEAN_ENV, ...env }, (child) => children.push(child))
}

/** Runs `leasehold <args> --data-dir <the host's>` to completion. */
function cli(args: string[], env: NodeJS.ProcessEnv = {}) {
  return runAsync([...args, '--data-dir', host.dataDir], env)
}

const lines = (text: string) => text.trim().split('\n').filter(Boolean)

/** Starts `leasehold <args> --data-dir <the host's>` and lets the test act while it runs. */
function startCli(args: string[]) {
  const run = startCliProcess([...args, '--data-dir', host.dataDir], CLEAN_ENV)
  children.push(run.child)
  return run
}

/** Leases the queued job of `type` as a test-driven worker (the worker API: lease + attempt + token). */
function take(type: string, workerId = 'test-worker') {
  const decision = host.engine.claimAndLease({ worker_id: workerId, accept_job_types: [type] })
  if (!decision.granted) throw new Error(`no grant: ${decision.reason}`)
  const report = { job_id: decision.job.id, attempt_id: decision.lease.attempt_id!, worker_id: workerId, lease_token: decision.lease.token! }
  return { ...decision, report }
}

/** A job of `type` with one attempt, taken and failed: dead-lettered when the failure is retryable, a final failure when not. */
function failWith(type: string, retryable: boolean): string {
  host.engine.submit({ job_type: type, cost_units: 1, max_attempts: 1 })
  const taken = take(type)
  host.engine.fail({ ...taken.report, error: { message: 'boom', retryable } })
  return taken.job.id
}

/**
 * Halts the leased job `requester` on `file` (or, given an owner id alone, that owner acquiring
 * under no job lease): a holder job takes the file, the requester is denied, both stay alive
 * through the 180 s until its one retry, and the retry finds the file still held. Returns the
 * open blocker and the holder (the caller finishes it).
 */
function halt(requester: ReturnType<typeof take> | string, file: string, ownerOf: (holderJobId: string) => string = () => 'holder-worker') {
  host.engine.submit({ job_type: 'holder', cost_units: 1 })
  const holder = take('holder', 'holder-worker')
  const owner = ownerOf(holder.job.id)
  const asks = typeof requester === 'string' ? { file, owner_id: requester } : { file, owner_id: requester.report.worker_id, lease_id: requester.lease.id }
  expect(host.engine.acquireFile({ file, owner_id: owner, lease_id: holder.lease.id })).toMatchObject({ granted: true })
  expect(host.engine.acquireFile(asks)).toMatchObject({ granted: false, code: 'file_lease_held' })
  const retryAt = clock.now() + FILE_RETRY_MS
  while (clock.now() < retryAt) {
    clock.advance(Math.min(10 * SECOND, retryAt - clock.now()))
    host.engine.heartbeat({ lease_id: holder.lease.id })
    if (typeof requester !== 'string') host.engine.heartbeat({ lease_id: requester.lease.id })
    host.engine.heartbeatFile({ file, owner_id: owner })
  }
  const result = host.engine.acquireFile(asks)
  if (result.granted || result.code !== 'blocked') throw new Error(`expected a halt, got ${JSON.stringify(result)}`)
  return { blocker: result.blocker, holder: { ...holder, owner } }
}

/** A job of `type` submitted, leased to blockers-worker and halted on `file` ({@link halt}): the requester, its blocker and the holder. */
function halted(type: string, file: string, ownerOf?: (holderJobId: string) => string) {
  host.engine.submit({ job_type: type, cost_units: 1 })
  const requester = take(type, 'blockers-worker')
  return { requester, ...halt(requester, file, ownerOf) }
}

function finishHolder(holder: ReturnType<typeof halt>['holder'], file: string) {
  host.engine.releaseFile({ file, owner_id: holder.owner })
  host.engine.complete(holder.report)
}

describe('leasehold submit', async () => {
  test('prints the id of a job that exists with the flags as given', async () => {
    const result = await cli(['submit', '--type', 'render', '--payload', '{"frame": 7}', '--priority', 'high', '--units', '3', '--queue', 'gpu', '--addon', 'visuals', '--max-attempts', '5'])
    expect(result.stderr).toBe('')
    expect(result.status).toBe(0)
    const id = result.stdout.trim()
    expect(id).toMatch(/^[0-9a-f-]{36}$/)
    const job = host.engine.getJob(id)
    expect(job).toMatchObject({ job_type: 'render', cost_units: 3, queue: 'gpu', addon_id: 'visuals', max_attempts: 5, state: 'QUEUED' })
    expect(job.payload).toEqual({ frame: 7 })
    host.engine.cancel(id)
  })

  test('--payload @file reads the payload from a file; --json prints the job', async () => {
    const dir = tempDir()
    dirs.push(dir)
    const file = join(dir, 'payload.json')
    writeFileSync(file, JSON.stringify({ prompt: 'a lighthouse', steps: [1, 2] }))
    const result = await cli(['submit', '--type', 'from-file', '--payload', `@${file}`, '--json'])
    expect(result.status).toBe(0)
    const job = JSON.parse(result.stdout) as { job_id: string; payload: unknown; job_type: string; cost_units: number }
    expect(job).toMatchObject({ job_type: 'from-file', cost_units: 1, payload: { prompt: 'a lighthouse', steps: [1, 2] } })
    expect(host.engine.getJob(job.job_id).payload).toEqual({ prompt: 'a lighthouse', steps: [1, 2] })
    host.engine.cancel(job.job_id)
  })

  test.each([
    [['--type', 't', '--payload', '{not json'], '--payload is not valid JSON'],
    [['--type', 't', '--payload', '@/no/such/payload.json'], '/no/such/payload.json'],
    [['--payload', '{}'], '--type is required'],
    [['--type', 't', '--frobnicate'], 'frobnicate'],
    [['--type', 't', '--units', '0'], '--units'],
    [['--type', 't', '--units', '-3'], '--units must be a whole number from 1 to 1000000 (got "-3")'],
    [['--type', 't', '--units=-3'], '--units must be a whole number from 1 to 1000000 (got "-3")'],
    [['--type', 't', '--priority', 'whenever'], '--priority'],
    [['--type', 't', 'stray'], 'stray'],
    [['--type', 't', '--in', '10 minutes'], '--in must be a duration'],
    [['--type', 't', '--in', '5'], '--in must be a duration'],
    [['--type', 't', '--at', 'next tuesday'], '--at must be an ISO-8601 time'],
    [['--type', 't', '--at', '2026-02-30T00:00:00Z'], '--at must be an ISO-8601 time'],
    [['--type', 't', '--in', '1m', '--at', '2030-01-01T00:00:00Z'], '--at and --in'],
  ])('bad input (%j) is one line and exit 2, and submits nothing', async (args, text) => {
    const before = host.engine.listJobs({ limit: 500 }).jobs.length
    const result = await cli(['submit', ...args])
    expect(result.status).toBe(2)
    expect(lines(result.stderr)).toHaveLength(1)
    expect(result.stderr).toContain(text)
    expect(result.stdout).toBe('')
    expect(host.engine.listJobs({ limit: 500 }).jobs.length).toBe(before)
  })

  test('--in delays the job from now on the host, --at until the given time; the job waits scheduled', async () => {
    const delayed = await cli(['submit', '--type', 'later', '--in', '1h30m'])
    expect(delayed.status).toBe(0)
    const id = delayed.stdout.trim()
    expect(host.engine.getJob(id)).toMatchObject({ state: 'QUEUED', run_at: expect.any(Number) })
    const runAt = host.engine.getJob(id).run_at!
    expect(runAt - host.engine.getJob(id).created_at).toBe(90 * 60 * SECOND)
    const at = new Date(clock.now() + 3_600_000).toISOString()
    const timed = await cli(['submit', '--type', 'later', '--at', at, '--json'])
    expect(JSON.parse(timed.stdout)).toMatchObject({ run_at: at, state: 'QUEUED' })
    const listed = await cli(['jobs', '--state', 'QUEUED'])
    const row = listed.stdout.split('\n').find((line) => line.startsWith(JSON.parse(timed.stdout).job_id))
    expect(row).toMatch(new RegExp(`${at.replace(/\./g, '\\.')} +scheduled$`)) // UNTIL, then WAITING
    host.engine.cancel(id)
    host.engine.cancel(JSON.parse(timed.stdout).job_id)
  })

  test('a repeat of a key answers with the job that has it as if just submitted: its id, exit 0, a line naming the job and its state; nothing submitted', async () => {
    const first = await cli(['submit', '--type', 'once', '--key', 'render-42', '--priority', 'high', '--payload', '{"a": 1, "b": [2]}'])
    expect(first.status).toBe(0)
    const id = first.stdout.trim()
    // The same submit, its payload's keys in another order: the same job.
    const again = await cli(['submit', '--type', 'once', '--key', 'render-42', '--priority', 'HIGH', '--payload', '{"b": [2], "a": 1}'])
    expect([again.status, again.stdout.trim()]).toEqual([0, id])
    expect(lines(again.stderr)).toEqual([`leasehold: --key render-42 is job ${id}'s, submitted before (QUEUED): not submitted again`])
    expect(host.engine.listJobs({ job_type: 'once' }).jobs.map((job) => job.id)).toEqual([id])
    host.engine.cancel(id)
  })

  test('a repeat of a key that asks for a delay the job does not have is refused, exit 1: a job not delayed is not the one --in or --at asks for', async () => {
    const id = (await cli(['submit', '--type', 'key-delay', '--key', 'delay-1'])).stdout.trim()
    const later = await cli(['submit', '--type', 'key-delay', '--key', 'delay-1', '--in', '1h'])
    expect([later.status, lines(later.stderr)]).toEqual([1, [expect.stringContaining(`--key delay-1 is job ${id}'s (QUEUED), which this submit does not match: --in 1h, the job's none (not delayed)`)]])
    const at = new Date(Date.now() + 3_600_000).toISOString()
    const atLater = await cli(['submit', '--type', 'key-delay', '--key', 'delay-1', '--at', at])
    expect([atLater.status, lines(atLater.stderr)]).toEqual([1, [expect.stringContaining(`--at ${at}, the job's none (not delayed)`)]])
    expect(host.engine.listJobs({ job_type: 'key-delay' }).jobs.map((job) => job.id)).toEqual([id])
    host.engine.cancel(id)
  })

  test('--json of a repeat of a key is the job as a fresh submit prints it, with "already_submitted": true', async () => {
    const fresh = JSON.parse((await cli(['submit', '--type', 'once-json', '--key', 'json-1', '--json'])).stdout) as Record<string, unknown>
    expect(fresh).not.toHaveProperty('already_submitted')
    host.engine.cancel(fresh.job_id as string)
    const again = await cli(['submit', '--type', 'once-json', '--key', 'json-1', '--json'])
    expect(again.status).toBe(0)
    const repeat = JSON.parse(again.stdout) as Record<string, unknown>
    expect(Object.keys(repeat)).toEqual([...Object.keys(fresh), 'already_submitted'])
    expect(repeat).toMatchObject({ job_id: fresh.job_id, state: 'CANCELED', already_submitted: true })
  })

  test('a repeat of a key with --wait follows the job like a new one; a job that has ended answers at once by its state', async () => {
    // Running: followed to its end.
    const first = await cli(['submit', '--type', 'key-wait', '--key', 'wait-1'])
    const id = first.stdout.trim()
    const run = startCli(['submit', '--type', 'key-wait', '--key', 'wait-1', '--wait'])
    await run.until('the QUEUED line', () => run.stderr().includes(`job ${id} QUEUED`))
    expect(run.stdout().trim()).toBe(id)
    expect(run.stderr()).toContain(`--key wait-1 is job ${id}'s, submitted before (QUEUED): not submitted again`)
    host.engine.complete(take('key-wait').report)
    expect(await run.exited).toBe(0)
    // DONE: exit 0 at once.
    const done = await cli(['submit', '--type', 'key-wait', '--key', 'wait-1', '--wait'])
    expect([done.status, done.stdout.trim(), lines(done.stderr).at(-1)]).toEqual([0, id, `job ${id} DONE`])
    // FAILED: exit 1 at once, saying why; --json is {job, result} as for a new job, marked.
    const failed = (await cli(['submit', '--type', 'key-fail', '--key', 'fail-1'])).stdout.trim()
    host.engine.fail({ ...take('key-fail').report, error: { code: 'E_DISK', message: 'disk on fire', retryable: false } })
    const repeat = await cli(['submit', '--type', 'key-fail', '--key', 'fail-1', '--wait', '--json'])
    expect(repeat.status).toBe(1)
    expect(repeat.stderr).toContain(`--key fail-1 is job ${failed}'s, submitted before (FAILED): not submitted again`)
    expect(repeat.stderr).toContain(`leasehold: job ${failed} FAILED: disk on fire (E_DISK)`)
    const answer = JSON.parse(repeat.stdout) as { job: { job_id: string; state: string }; result: { error: unknown }; already_submitted: boolean }
    expect(Object.keys(answer)).toEqual(['job', 'result', 'already_submitted'])
    expect(answer).toMatchObject({ job: { job_id: failed, state: 'FAILED' }, result: { error: { message: 'disk on fire' } }, already_submitted: true })
  })

  test('a repeat of a key that asks for another job is refused: one line naming the job and what differs, exit 1, nothing submitted', async () => {
    const asked = ['--type', 'keyed', '--key', 'differs-1', '--priority', 'high', '--units', '2', '--queue', 'q-keyed', '--addon', 'ad', '--payload', '{"a": 1}', '--max-attempts', '4']
    const id = (await cli(['submit', ...asked])).stdout.trim()
    const change = (flag: string, value: string) => asked.map((word, i) => (asked[i - 1] === flag ? value : word))
    const cases: Array<[string[], string]> = [
      [change('--type', 'other'), "--type other, the job's keyed"],
      [change('--payload', '{"a": 2}'), "--payload is not the job's"],
      [change('--priority', 'low'), "--priority LOW, the job's HIGH"],
      [change('--units', '3'), "--units 3, the job's 2"],
      [change('--queue', 'q-other'), "--queue q-other, the job's q-keyed"],
      [change('--addon', 'other'), "--addon other, the job's ad"],
      [change('--max-attempts', '5'), "--max-attempts 5, the job's 4"],
    ]
    for (const [args, difference] of cases) {
      const result = await cli(['submit', ...args])
      expect(result.status, difference).toBe(1)
      expect(result.stdout).toBe('')
      expect(lines(result.stderr)).toEqual([`leasehold: --key differs-1 is job ${id}'s (QUEUED), which this submit does not match: ${difference}; another job needs another key`])
    }
    const two = await cli(['submit', ...change('--type', 'other').map((word, i, all) => (all[i - 1] === '--units' ? '3' : word))])
    expect(two.stderr).toContain("--type other, the job's keyed; --units 3, the job's 2;")
    expect(host.engine.listJobs({ job_type: 'keyed' }).jobs.map((job) => job.id)).toEqual([id])
    expect(host.engine.listJobs({ job_type: 'other' }).jobs).toEqual([])
    host.engine.cancel(id)
  })

  test('a repeat of a key compares a delayed job\'s time: another --at, or another --in than the job was delayed by, is refused', async () => {
    const at = new Date(Date.now() + 3_600_000).toISOString()
    const atJob = (await cli(['submit', '--type', 'key-at', '--key', 'at-1', '--at', at])).stdout.trim()
    expect((await cli(['submit', '--type', 'key-at', '--key', 'at-1', '--at', at])).stdout.trim()).toBe(atJob)
    const later = new Date(Date.parse(at) + 60_000).toISOString()
    const movedAt = await cli(['submit', '--type', 'key-at', '--key', 'at-1', '--at', later])
    expect([movedAt.status, lines(movedAt.stderr)]).toEqual([1, [`leasehold: --key at-1 is job ${atJob}'s (QUEUED), which this submit does not match: --at ${later}, the job's ${at}; another job needs another key`]])

    const inJob = (await cli(['submit', '--type', 'key-in', '--key', 'in-1', '--in', '1h30m'])).stdout.trim()
    // Run again later, the same --in is the same job: its delay counts from its creation.
    await new Promise((resolve) => setTimeout(resolve, 20))
    expect((await cli(['submit', '--type', 'key-in', '--key', 'in-1', '--in', '90m'])).stdout.trim()).toBe(inJob)
    const longer = await cli(['submit', '--type', 'key-in', '--key', 'in-1', '--in', '2h'])
    expect([longer.status, lines(longer.stderr)]).toEqual([1, [`leasehold: --key in-1 is job ${inJob}'s (QUEUED), which this submit does not match: --in 2h, the job's 1h30m; another job needs another key`]])

    // Run at once by an operator, the job has no run_at left: it is compared with the delay it was submitted with.
    host.engine.runNow(inJob)
    expect((await cli(['submit', '--type', 'key-in', '--key', 'in-1', '--in', '90m'])).stdout.trim()).toBe(inJob)
    const afterRunNow = await cli(['submit', '--type', 'key-in', '--key', 'in-1', '--in', '2h'])
    expect([afterRunNow.status, lines(afterRunNow.stderr)]).toEqual([1, [expect.stringContaining("--in 2h, the job's 1h30m")]])
    expect(host.engine.listJobs({ job_type: 'key-at' }).jobs.map((job) => job.id)).toEqual([atJob])
    expect(host.engine.listJobs({ job_type: 'key-in' }).jobs.map((job) => job.id)).toEqual([inJob])
    host.engine.cancel(atJob)
    host.engine.cancel(inJob)
  })

  test('after an operator retried the job, a repeat of its key with the --max-attempts it was submitted with still matches', async () => {
    const id = (await cli(['submit', '--type', 'key-retried', '--key', 'retried-1', '--max-attempts', '2'])).stdout.trim()
    host.engine.fail({ ...take('key-retried').report, error: { message: 'no', retryable: false } })
    expect(host.engine.retry(id)).toMatchObject({ attempts: 1, max_attempts: 3 })
    const again = await cli(['submit', '--type', 'key-retried', '--key', 'retried-1', '--max-attempts', '2'])
    expect([again.status, again.stdout.trim()]).toEqual([0, id])
    const fewer = await cli(['submit', '--type', 'key-retried', '--key', 'retried-1', '--max-attempts', '1'])
    expect([fewer.status, fewer.stderr]).toEqual([1, expect.stringContaining("--max-attempts 1, the job's 3")])
    host.engine.cancel(id)
  })

  test('a job costing more than the total capacity is a value the host refuses: one line naming --units, exit 2 as for schedule add, no job', async () => {
    const before = host.engine.listJobs({}).jobs.length
    const result = await cli(['submit', '--type', 'too-big', '--units', '500'])
    expect(result.status).toBe(2)
    expect(lines(result.stderr)).toEqual([expect.stringMatching(/^leasehold: --units: 500 exceeds the total capacity of 100 units.*\(cost_exceeds_capacity\)$/)])
    expect(host.engine.listJobs({}).jobs.length).toBe(before)
  })

  test('a 401 names the host and where the token it refused came from: --token, LEASEHOLD_TOKEN, the URL\'s #token=, the data dir\'s token file', async () => {
    const wrong = 'not-the-hosts-token'
    const refused = (source: string) => [`leasehold: the host at ${host.url} refused the token from ${source}: A valid Authorization: Bearer token is required (unauthorized)`]
    const flag = await runAsync(['status', '--url', host.url, '--token', wrong])
    expect(flag.status).toBe(1)
    expect(lines(flag.stderr)).toEqual(refused('--token'))
    expect(lines((await runAsync(['status', '--url', host.url], { LEASEHOLD_TOKEN: wrong })).stderr)).toEqual(refused('LEASEHOLD_TOKEN'))
    expect(lines((await runAsync(['status', '--url', `${host.url}/#token=${wrong}`])).stderr)).toEqual(refused('the #token= of --url'))
    // A data dir whose host.json names the host (this process, holding the dir's lock), and whose token is not the host's.
    const dir = tempDir()
    const lock = LockFile.open(join(dir, 'host.lock'))
    lock.hold(process.pid)
    try {
      writeFileSync(join(dir, 'host.json'), JSON.stringify({ url: host.url, pid: process.pid }))
      writeFileSync(join(dir, 'token'), `${wrong}\n`)
      expect(lines((await runAsync(['submit', '--type', 't', '--data-dir', dir])).stderr)).toEqual(refused(join(dir, 'token')))
    } finally {
      lock.release()
    }
  })

  test('a host error is its {detail, code} as one line, exit 1', async () => {
    const result = await cli(['submit', '--type', 't', '--token', 'not-the-token'])
    expect(result.status).toBe(1)
    expect(lines(result.stderr)).toEqual([expect.stringContaining('(unauthorized)')])
  })
})

describe('leasehold submit --wait', async () => {
  test('follows the job with a line per change and exits 0 when it is DONE', async () => {
    const run = startCli(['submit', '--type', 'wait-ok', '--wait'])
    await run.until('the job id', () => run.stdout().includes('\n'))
    const id = run.stdout().trim()
    await run.until('the QUEUED line', () => run.stderr().includes(`job ${id} QUEUED`))
    const taken = take('wait-ok')
    expect(taken.job.id).toBe(id)
    await run.until('the RUNNING line', () => run.stderr().includes(`job ${id} RUNNING`))
    // Progress from a heartbeat writes no event: the command reads the job now and then.
    host.engine.heartbeatByToken({ ...taken.report, progress: 0.5, note: 'halfway there' })
    await run.until('the progress', () => run.stderr().includes('50%'))
    expect(run.stderr()).toContain('halfway there')
    host.engine.complete({ ...taken.report, result: { frames: 24 } })
    expect(await run.exited).toBe(0)
    expect(lines(run.stderr()).at(-1)).toBe(`job ${id} DONE`)
    expect(run.stdout().trim()).toBe(id)
  })

  test("a worker's note and error reach the terminal escaped, as jobs show writes them: an escape sequence is shown as \\u001b, never sent", async () => {
    const run = startCli(['submit', '--type', 'wait-escape', '--wait'])
    await run.until('the QUEUED line', () => run.stderr().includes('QUEUED'))
    const taken = take('wait-escape')
    host.engine.heartbeatByToken({ ...taken.report, progress: 0.5, note: 'half\x1b]0;owned\x07way \x1b[2J' })
    await run.until('the progress', () => run.stderr().includes('50%'))
    host.engine.fail({ ...taken.report, error: { code: 'E\x1b[31m', message: 'boom\x1b[1A\x9b', retryable: false } })
    expect(await run.exited).toBe(1)
    expect(run.stderr()).toContain('half\\u001b]0;owned\\u0007way \\u001b[2J')
    expect(run.stderr()).toContain(`leasehold: job ${taken.job.id} FAILED: boom\\u001b[1A\\u009b (E\\u001b[31m)`)
    expect(run.stderr()).not.toMatch(/[\x1b\x07\x9b]/)
  })

  test('exits 1 and prints the error when the job fails; --json prints {job, result} at the end', async () => {
    const run = startCli(['submit', '--type', 'wait-fail', '--wait', '--json'])
    // With --json nothing is printed until the end: wait for the job to exist.
    await run.until('the QUEUED line', () => run.stderr().includes('QUEUED'))
    const taken = take('wait-fail')
    host.engine.fail({ ...taken.report, error: { code: 'E_DISK', message: 'disk on fire', retryable: false } })
    expect(await run.exited).toBe(1)
    expect(run.stderr()).toContain(`leasehold: job ${taken.job.id} FAILED: disk on fire (E_DISK)`)
    const answer = JSON.parse(run.stdout()) as { job: { job_id: string; state: string }; result: { error: unknown } }
    expect(answer.job).toMatchObject({ job_id: taken.job.id, state: 'FAILED' })
    expect(answer.result.error).toMatchObject({ message: 'disk on fire' })
  })

  test('the progress line says why a waiting job waits', async () => {
    host.engine.setCapacity({ busy_rating: 8 })
    try {
      const run = startCli(['submit', '--type', 'wait-why', '--units', '50', '--wait'])
      await run.until('the job id', () => run.stdout().includes('\n'))
      const id = run.stdout().trim()
      await run.until('the reason', () => run.stderr().includes('waiting: first in line'))
      expect(run.stderr()).toContain(`job ${id} QUEUED — waiting: first in line; needs 50 units; 20 available (busy rating 8 leaves 20 of 100 units, 0 leased)`)
      host.engine.cancel(id)
      expect(await run.exited).toBe(1)
    } finally {
      host.engine.setCapacity({ busy_rating: 0 })
    }
  })

  test('the progress line gives the time a wait ends by itself after the reason', async () => {
    const run = startCli(['submit', '--type', 'wait-until', '--in', '10m', '--wait'])
    await run.until('the job id', () => run.stdout().includes('\n'))
    const id = run.stdout().trim()
    const until = new Date(host.engine.getJob(id).run_at!).toISOString()
    await run.until('the reason', () => run.stderr().includes('waiting: scheduled'))
    expect(run.stderr()).toContain(`job ${id} QUEUED — waiting: scheduled until ${until}`)
    host.engine.cancel(id)
    expect(await run.exited).toBe(1)
  })

  test('--wait-timeout: a job not ended by then is said as it stands and left so; exit 124, --json prints it as it was', async () => {
    const result = await cli(['submit', '--type', 'wait-late', '--wait', '--wait-timeout', '1s', '--json'])
    expect(result.status, result.stderr).toBe(124)
    const answer = JSON.parse(result.stdout) as { job: { job_id: string; state: string }; result: unknown }
    const id = answer.job.job_id
    expect(answer).toMatchObject({ job: { state: 'QUEUED' }, result: null })
    expect(lines(result.stderr).at(-1)).toMatch(
      new RegExp(`^leasehold: job ${id} still QUEUED after 1s — waiting: .+; it is left as it is \\(leasehold jobs cancel ${id} stops it\\)$`),
    )
    expect(host.engine.getJob(id).state).toBe('QUEUED')
    host.engine.cancel(id)
  })

  test.each([
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ] as const)('%s while --wait --json waits ends the wait as --wait-timeout does: the job said as it stands, printed as JSON, left so; exit %i', async (signal, exit) => {
    const run = startCli(['submit', '--type', 'wait-interrupted', '--wait', '--json'])
    const closed = new Promise((resolve) => run.child.once('close', resolve))
    await run.until('the wait', () => /job \S+ QUEUED/.test(run.stderr()))
    run.child.kill(signal)
    expect(await run.exited).toBe(exit)
    await closed
    const answer = JSON.parse(run.stdout()) as { job: { job_id: string; state: string }; result: unknown }
    const id = answer.job.job_id
    expect(answer).toMatchObject({ job: { state: 'QUEUED' }, result: null })
    expect(lines(run.stderr()).at(-1)).toMatch(
      new RegExp(`^leasehold: job ${id} still QUEUED when ${signal} stopped the wait — waiting: .+; it is left as it is \\(leasehold jobs cancel ${id} stops it\\)$`),
    )
    expect(host.engine.getJob(id).state).toBe('QUEUED')
    host.engine.cancel(id)
  })

  test('a job canceled while it waits exits 1 with CANCELED', async () => {
    const run = startCli(['submit', '--type', 'wait-race', '--wait'])
    await run.until('the job id', () => run.stdout().includes('\n'))
    host.engine.cancel(run.stdout().trim(), 'changed my mind')
    expect(await run.exited).toBe(1)
    expect(run.stderr()).toContain('CANCELED')
  })

  test('a BLOCKED job is reported and waited on; after the operator requeues it, DONE exits 0', async () => {
    const file = '/repo/src/shared.ts'
    const run = startCli(['submit', '--type', 'wait-blocked', '--wait'])
    await run.until('the job id', () => run.stdout().includes('\n'))
    const id = run.stdout().trim()
    const first = take('wait-blocked', 'blocked-worker')
    const { blocker, holder } = halt(first, file)
    await run.until('the BLOCKED line', () => run.stderr().includes(`job ${id} BLOCKED`))
    expect(run.stderr()).toContain(`halted on ${file}, held by holder-worker`)
    expect(run.child.exitCode).toBeNull()
    host.engine.resolveBlocker(blocker.id, { action: 'retry', note: 'go again' })
    const blockedAt = run.stderr().indexOf('BLOCKED')
    await run.until('the requeue', () => run.stderr().indexOf('QUEUED', blockedAt) !== -1)
    finishHolder(holder, file)
    const second = take('wait-blocked', 'blocked-worker')
    host.engine.complete(second.report)
    expect(await run.exited).toBe(0)
    expect(lines(run.stderr()).at(-1)).toBe(`job ${id} DONE`)
  })
})

describe('leasehold jobs', async () => {
  test('lists jobs as a table, filters by state, and --json parses', async () => {
    const a = host.engine.submit({ job_type: 'listed-a', cost_units: 2 }).job
    const b = host.engine.submit({ job_type: 'listed-b', cost_units: 1, priority: 'URGENT' }).job
    host.engine.cancel(b.id)

    const table = await cli(['jobs'])
    expect(table.status).toBe(0)
    const rows = lines(table.stdout)
    expect(rows[0]).toMatch(/^ID\s+TYPE\s+STATE\s+PRIORITY\s+UNITS\s+ATTEMPTS\s+CREATED\s+UNTIL\s+WAITING$/)
    expect(rows.find((row) => row.startsWith(a.id))).toMatch(new RegExp(`^${a.id}\\s+listed-a\\s+QUEUED\\s+NORMAL\\s+2\\s+0/3\\s+\\d{4}-\\S+\\s+-\\s+first in line; waiting for a worker to take it$`))
    expect(rows.find((row) => row.startsWith(b.id))).toMatch(/listed-b\s+CANCELED\s+URGENT.*\s-$/)

    const canceled = await cli(['jobs', '--state', 'canceled', '--limit', '500'])
    expect(canceled.status).toBe(0)
    expect(canceled.stdout).toContain(b.id)
    expect(canceled.stdout).not.toContain(a.id)
    for (const row of lines(canceled.stdout).slice(1)) expect(row).toMatch(/\sCANCELED\s/)

    const json = await cli(['jobs', '--state', 'QUEUED', '--json'])
    expect(json.status).toBe(0)
    const page = JSON.parse(json.stdout) as { jobs: Array<{ job_id: string; state: string }>; next_cursor: string | null }
    expect(page.jobs.map((j) => j.job_id)).toContain(a.id)
    expect(page.jobs.every((j) => j.state === 'QUEUED')).toBe(true)

    const limited = JSON.parse((await cli(['jobs', '--limit', '1', '--json'])).stdout) as { jobs: { job_id: string }[]; next_cursor: string | null }
    expect(limited.jobs).toHaveLength(1)
    expect(limited.next_cursor).not.toBeNull()
    // The next page: the table's closing line names its cursor, and --cursor reads it.
    const first = await cli(['jobs', '--limit', '1'])
    expect(lines(first.stderr)).toEqual([`(more jobs than shown; raise --limit (up to 500), or see the next page with --cursor ${limited.next_cursor})`])
    const next = JSON.parse((await cli(['jobs', '--limit', '1', '--cursor', limited.next_cursor!, '--json'])).stdout) as { jobs: { job_id: string }[] }
    expect(next.jobs).toHaveLength(1)
    expect(next.jobs[0]!.job_id).not.toBe(limited.jobs[0]!.job_id)
    host.engine.cancel(a.id)
  })

  test('the jobs table asks the host for no payloads (payload=false), as does finding a job by its id\'s end; --json asks for them and prints each', async () => {
    const big = host.engine.submit({ job_type: 'listed-payload', cost_units: 1, payload: { blob: 'x'.repeat(1000) } }).job
    const proxy = await cuttingProxy(host.url, { cut: false })
    try {
      const asked = async (args: string[]) => {
        const before = proxy.requests().length
        const result = await runAsync([...args, '--url', proxy.url, '--token', host.token])
        expect(result.status, args.join(' ')).toBe(0)
        const lists = proxy.requests().slice(before).map((request) => new URL(request.path, 'http://host')).filter((url) => url.pathname === '/api/scheduler/jobs')
        expect(lists.length, args.join(' ')).toBe(1)
        return { payload: lists[0]!.searchParams.get('payload'), stdout: result.stdout }
      }
      expect((await asked(['jobs', '--type', 'listed-payload'])).payload).toBe('false')
      expect((await asked(['jobs', 'show', big.id.slice(-8)])).payload).toBe('false')
      const json = await asked(['jobs', '--type', 'listed-payload', '--json'])
      expect(json.payload).toBeNull()
      expect((JSON.parse(json.stdout) as { jobs: { job_id: string; payload: unknown }[] }).jobs).toMatchObject([{ job_id: big.id, payload: { blob: 'x'.repeat(1000) } }])
    } finally {
      await proxy.close()
      host.engine.cancel(big.id)
    }
  })

  test('--dead-letter lists only the jobs that ran out of attempts, and every table marks them apart from final failures', async () => {
    const dead = failWith('dl-dead', true)
    const final = failWith('dl-final', false)
    expect(host.engine.getJob(dead)).toMatchObject({ state: 'FAILED', dead_letter: true })

    const listed = await cli(['jobs', '--dead-letter', '--limit', '500'])
    expect(listed.status).toBe(0)
    expect(listed.stdout).not.toContain(final)
    expect(lines(listed.stdout).find((row) => row.startsWith(dead))).toMatch(/dl-dead\s+FAILED \(dead letter\)\s+NORMAL\s+1\s+1\/1\s/)
    for (const row of lines(listed.stdout).slice(1)) expect(row).toMatch(/\s(FAILED|TIMEOUT) \(dead letter\)\s/)

    const failed = lines((await cli(['jobs', '--state', 'FAILED', '--limit', '500'])).stdout)
    expect(failed.find((row) => row.startsWith(dead))).toContain('FAILED (dead letter)')
    expect(failed.find((row) => row.startsWith(final))).toMatch(/dl-final\s+FAILED\s+NORMAL/)

    const json = JSON.parse((await cli(['jobs', '--dead-letter', '--state', 'failed', '--json', '--limit', '500'])).stdout) as { jobs: Array<{ job_id: string; dead_letter: boolean }> }
    expect(json.jobs.map((j) => j.job_id)).toContain(dead)
    expect(json.jobs.every((j) => j.dead_letter)).toBe(true)
  })

  test('a job type with control characters (an escape sequence, a newline, a tab) is written escaped: the terminal is not told anything, the row stays one line', async () => {
    const job = host.engine.submit({ job_type: 'evil\u001b[31mRED\u001b[0m\nline\tx', addon_id: 'ad\u001b]0;title\u0007', cost_units: 1 }).job
    try {
      const result = await cli(['jobs', '--state', 'QUEUED'])
      expect(result.status).toBe(0)
      expect(result.stdout).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f]/)
      expect(lines(result.stdout).find((row) => row.startsWith(job.id))).toContain('evil\\u001b[31mRED\\u001b[0m\\u000aline\\u0009x')
    } finally {
      host.engine.cancel(job.id)
    }
  })

  test('a job type or add-on with a bidi override, an isolate or a zero-width space is written escaped, as the dashboard draws it: a terminal never draws the text around it reversed or hidden', async () => {
    const job = host.engine.submit({ job_type: 'report\u202Etxt.exe\u202C', addon_id: 'ad\u2066d\u2069\u200bon\ufeff', cost_units: 1 }).job
    try {
      const result = await cli(['jobs', '--state', 'QUEUED'])
      expect(result.status).toBe(0)
      expect(result.stdout).not.toMatch(/[\u061c\u200b\u200e\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]/)
      expect(lines(result.stdout).find((line) => line.startsWith(job.id))).toContain('report\\u202etxt.exe\\u202c')
      const shown = await cli(['jobs', 'show', job.id])
      expect(shown.stdout).not.toMatch(/[\u061c\u200b\u200e\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]/)
      expect(shown.stdout).toContain('ad\\u2066d\\u2069\\u200bon\\ufeff')
    } finally {
      host.engine.cancel(job.id)
    }
  })

  test.each([
    [['--state', 'sleeping'], '--state'],
    [['--dead-letter', '--state', 'QUEUED'], '--dead-letter with --state QUEUED finds nothing: a dead-lettered job is FAILED or TIMEOUT'],
    [['--limit', '501'], '--limit'],
    [['--verbose'], 'verbose'],
    [['retry', '--state', 'FAILED'], 'jobs retry needs a job id, or --dead-letter to retry every dead-lettered job'],
    [['retry', '--dead-letter', '--state', 'CANCELED'], '--dead-letter with --state CANCELED finds nothing'],
    [['cancel', 'j-1', '--by', ' ops'], '--by must not begin or end with whitespace (got " ops")'],
    [['retry', '--dead-letter', '--by', 'a\u0007b'], '--by must not contain control or invisible characters'],
    [['run-now', 'j-1', '--by', 'o'.repeat(201)], '--by must be 1 to 200 characters (got 201)'],
  ])('bad input (%j) is one line and exit 2', async (args, text) => {
    const result = await cli(['jobs', ...args])
    expect(result.status).toBe(2)
    expect(lines(result.stderr)).toHaveLength(1)
    expect(result.stderr).toContain(text)
  })
})

describe('leasehold jobs cancel, retry and run-now', async () => {
  test('act on one job as the dashboard does, print it as it now is, and name who asked in its events', async () => {
    const delayed = host.engine.submit({ job_type: 'acted', cost_units: 1, delay_ms: 3_600_000, queue: 'acted-q' }).job
    const ran = await cli(['jobs', 'run-now', delayed.id, '--by', 'ops'])
    expect([ran.status, lines(ran.stdout)]).toEqual([0, [`job ${delayed.id} QUEUED`]])
    expect(host.engine.jobEvents(delayed.id).find((e) => e.event_type === 'JOB_RUN_NOW')!.data).toMatchObject({ requested_by: 'ops' })

    const canceled = await cli(['jobs', 'cancel', delayed.id, '--reason', 'not needed'])
    expect([canceled.status, lines(canceled.stdout)]).toEqual([0, [`job ${delayed.id} CANCELED`]])
    expect(host.engine.getJob(delayed.id).note).toBe('not needed')

    const retried = await cli(['jobs', 'retry', delayed.id, '--json'])
    expect(retried.status).toBe(0)
    expect(JSON.parse(retried.stdout)).toMatchObject({ job: { job_id: delayed.id, state: 'QUEUED' } })
    host.engine.cancel(delayed.id)
  })

  test('retry --dead-letter retries every dead-lettered job of the type, not the final failures; --dry-run only counts them', async () => {
    const dead = [failWith('dlr-bulk', true), failWith('dlr-bulk', true)]
    const final = failWith('dlr-bulk', false)
    const otherType = failWith('dlr-other', true)

    const dry = await cli(['jobs', 'retry', '--dead-letter', '--type', 'dlr-bulk', '--dry-run'])
    expect([dry.status, lines(dry.stdout)]).toEqual([0, ['2 dead-lettered jobs of type dlr-bulk to retry (--dry-run: none retried)']])
    expect(dead.map((id) => host.engine.getJob(id).state)).toEqual(['FAILED', 'FAILED'])

    const retried = await cli(['jobs', 'retry', '--dead-letter', '--type', 'dlr-bulk', '--by', 'ops'])
    expect([retried.status, lines(retried.stdout)]).toEqual([0, ['retried 2 of 2 dead-lettered jobs of type dlr-bulk']])
    expect(dead.map((id) => host.engine.getJob(id).state)).toEqual(['QUEUED', 'QUEUED'])
    expect(host.engine.jobEvents(dead[0]!).at(-1)!.data).toMatchObject({ requested_by: 'ops' })
    expect([host.engine.getJob(final), host.engine.getJob(otherType)]).toEqual([
      expect.objectContaining({ state: 'FAILED', dead_letter: false }),
      expect.objectContaining({ state: 'FAILED', dead_letter: true }),
    ])

    const ofType = JSON.parse((await cli(['jobs', '--type', 'dlr-bulk', '--json', '--limit', '500'])).stdout) as { jobs: Array<{ job_id: string; job_type: string }> }
    expect(ofType.jobs.map((j) => j.job_id).sort()).toEqual([...dead, final].sort())

    const again = await cli(['jobs', 'retry', '--dead-letter', '--type', 'dlr-bulk', '--state', 'timeout', '--json'])
    expect(again.status).toBe(0)
    expect(JSON.parse(again.stdout)).toMatchObject({ action: 'retry', matched: 0, changed: 0 })
    for (const id of dead) host.engine.cancel(id)
  })

  /** The bulk routes' answers held back 2 s, past the command's wait (LEASEHOLD_TIMEOUT_S=1), as a host working through many jobs answers late. */
  const slowBulkAnswer = (_method: string, path: string) => (path.startsWith('/api/jobs/bulk/') ? new Promise<void>((resolve) => setTimeout(resolve, 2000)) : undefined)

  test('a bulk retry whose answer does not come in time is said as maybe made, with how to see where it stands; exit 124', async () => {
    const dead = [failWith('dlr-slow', true), failWith('dlr-slow', true)]
    const proxy = await cuttingProxy(host.url, { cut: false, beforeAnswer: slowBulkAnswer })
    try {
      const result = await runAsync(['jobs', 'retry', '--dead-letter', '--type', 'dlr-slow', '--url', proxy.url, '--token', host.token], { LEASEHOLD_TIMEOUT_S: '1' })
      expect([result.status, result.stdout, lines(result.stderr)]).toEqual([
        124,
        '',
        [
          `leasehold: the host at ${proxy.url} did not answer within 1 s (LEASEHOLD_TIMEOUT_S sets how long to wait); the retry may have been made all the same, in whole or in part, or still be under way on the host (a bulk retry goes on to its end without waiting for its answer): leasehold jobs retry --dead-letter --type dlr-slow --dry-run counts the dead-lettered jobs not retried yet, and leasehold jobs --dead-letter --type dlr-slow lists them`,
        ],
      ])
      expect(dead.map((id) => host.engine.getJob(id).state)).toEqual(['QUEUED', 'QUEUED'])
      for (const id of dead) host.engine.cancel(id)
    } finally {
      await proxy.close()
    }
  })

  test('a bulk retry --dry-run whose answer does not come in time is a plain failure, exit 1: it changes nothing', async () => {
    const proxy = await cuttingProxy(host.url, { cut: false, beforeAnswer: slowBulkAnswer })
    try {
      const result = await runAsync(['jobs', 'retry', '--dead-letter', '--dry-run', '--url', proxy.url, '--token', host.token], { LEASEHOLD_TIMEOUT_S: '1' })
      expect([result.status, lines(result.stderr)]).toEqual([1, [`leasehold: the host at ${proxy.url} did not answer within 1 s (LEASEHOLD_TIMEOUT_S sets how long to wait)`]])
    } finally {
      await proxy.close()
    }
  })

  test("a retry of a job whose cost exceeds the total is refused naming the job's cost, not a flag retry has not got: exit 1, not a usage mistake", async () => {
    const big = host.engine.submit({ job_type: 'retry-too-big', cost_units: 80, queue: 'retry-too-big-q' }).job
    host.engine.cancel(big.id)
    host.engine.setCapacity({ total_units: 50 })
    try {
      const result = await cli(['jobs', 'retry', big.id])
      expect([result.status, lines(result.stderr)]).toEqual([1, [expect.stringMatching(/^leasehold: the job's cost of 80 units exceeds the total capacity of 50 units.*\(cost_exceeds_capacity\)$/)]])
      expect(result.stderr).not.toContain('--units')
      expect(host.engine.getJob(big.id).state).toBe('CANCELED')
    } finally {
      host.engine.setCapacity({ total_units: 100 })
    }
  })

  test('retry --dead-letter names the jobs it refused for their cost, and exits 1; its --dry-run names them too, and exits 0', async () => {
    const fits = failWith('dlr-cost', true)
    const big = host.engine.submit({ job_type: 'dlr-cost-big', cost_units: 80, max_attempts: 1 }).job
    host.engine.fail({ ...take('dlr-cost-big').report, error: { message: 'boom', retryable: true } })
    expect(host.engine.getJob(big.id)).toMatchObject({ state: 'FAILED', dead_letter: true })
    host.engine.setCapacity({ total_units: 50 })
    try {
      const dry = await cli(['jobs', 'retry', '--dead-letter', '--type', 'dlr-cost-big', '--dry-run'])
      expect([dry.status, dry.stderr]).toEqual([0, ''])
      expect(lines(dry.stdout)).toEqual([
        '1 dead-lettered job of type dlr-cost-big to retry (--dry-run: none retried)',
        expect.stringMatching(new RegExp(`^would not be retried, as its cost exceeds the total capacity: ${big.id} \\(raise total_units`)),
      ])
      expect((await cli(['jobs', 'retry', '--dead-letter', '--type', 'dlr-cost'])).status).toBe(0)
      const result = await cli(['jobs', 'retry', '--dead-letter', '--type', 'dlr-cost-big'])
      expect(result.status).toBe(1)
      expect(lines(result.stdout)).toEqual(['retried 0 of 1 dead-lettered job of type dlr-cost-big; not retried: 1 refused for its cost'])
      expect(lines(result.stderr)).toEqual([expect.stringMatching(new RegExp(`^leasehold: not retried, as its cost exceeds the total capacity: ${big.id} \\(raise total_units`))])
      expect([host.engine.getJob(fits).state, host.engine.getJob(big.id).state]).toEqual(['QUEUED', 'FAILED'])
    } finally {
      host.engine.setCapacity({ total_units: 100 })
      host.engine.cancel(fits)
    }
  })

  test('a cancel of a running job says it is asked to stop, and that it ends DONE if it finishes first', async () => {
    const job = host.engine.submit({ job_type: 'long', cost_units: 1, queue: 'cancel-running-q' }).job
    const claimed = host.engine.claimBatch({ worker_id: 'w-cancel', queues: ['cancel-running-q'], accept_job_types: null }, 1)
    expect(claimed.granted.map((g) => g.job_id)).toEqual([job.id])
    const canceled = await cli(['jobs', 'cancel', job.id])
    expect([canceled.status, lines(canceled.stdout)]).toEqual([0, [`job ${job.id} RUNNING: asked to stop; it ends CANCELED once its worker stops it (DONE if it finishes first)`]])
    host.engine.handBackLeases('w-cancel', [claimed.granted[0]!.lease_id])
  })

  test("a refusal's detail names a leased job's state as the command line shows it: RUNNING on retry and run-now, never LEASED", async () => {
    const job = host.engine.submit({ job_type: 'pull-leased', cost_units: 1, priority: 'URGENT', queue: 'pull-leased-q' }).job
    const decision = host.engine.requestLease({ worker_id: 'puller', max_units: null, gpu_available: false })
    if (!decision.granted) throw new Error(`no grant: ${decision.reason}`)
    expect([decision.job.id, decision.job.state]).toEqual([job.id, 'LEASED'])
    try {
      const shown = await cli(['jobs', 'show', job.id, '--json'])
      expect(JSON.parse(shown.stdout).job.state).toBe('RUNNING')
      const retried = await cli(['jobs', 'retry', job.id])
      expect([retried.status, lines(retried.stderr)]).toEqual([1, [`leasehold: Job ${job.id} is RUNNING; only a FAILED, TIMEOUT or CANCELED job is retried (illegal_transition)`]])
      const ran = await cli(['jobs', 'run-now', job.id])
      expect([ran.status, lines(ran.stderr)]).toEqual([1, [`leasehold: Job ${job.id} is RUNNING; only a QUEUED job waiting for its run_at can be run now (not_scheduled)`]])
    } finally {
      host.engine.cancel(job.id)
      host.engine.release({ lease_id: decision.lease.id, worker_id: 'puller', status: 'CANCELED' })
    }
  })

  test("the host's refusal is one line, exit 1; a missing id or an unknown command is a usage error, exit 2", async () => {
    const done = await cli(['jobs', 'run-now', 'no-such-job'])
    expect(done.status).toBe(1)
    expect(lines(done.stderr)).toEqual([expect.stringMatching(/^leasehold: .*no-such-job/)])
    expect((await cli(['jobs', 'cancel'])).status).toBe(2)
    const unknown = await cli(['jobs', 'delete', 'x'])
    expect([unknown.status, lines(unknown.stderr)]).toEqual([2, ['leasehold: jobs needs list, show, cancel, retry, run-now (got "delete"); see leasehold jobs --help']])
  })
})

describe('leasehold jobs show', async () => {
  /** `jobs show` of `id`: its lines by their label (the attempts' table rows under "attempts"). */
  async function show(id: string): Promise<{ field: (label: string) => string | undefined; attempts: string[] }> {
    const result = await cli(['jobs', 'show', id])
    expect([result.status, result.stderr]).toEqual([0, ''])
    const all = lines(result.stdout)
    const field = (label: string) => all.find((line) => line.startsWith(`${label.padEnd(9)} `))?.slice(10)
    return { field, attempts: all.slice(all.indexOf('attempts') + 2) }
  }

  test("shows a failed job's error and each attempt with its worker, outcome and error", async () => {
    const id = host.engine.submit({ job_type: 'show-failing', cost_units: 2, max_attempts: 2, queue: 'show-q', payload: { input: 'a.png' } }).job.id
    const first = take('show-failing', 'show-worker-1')
    host.engine.fail({ ...first.report, error: { code: 'E_IO', message: 'disk unplugged', retryable: true } })
    clock.advance(host.engine.getJob(id)!.eligible_at - clock.now())
    const second = take('show-failing', 'show-worker-2')
    host.engine.fail({ ...second.report, error: { code: 'E_PAPER', message: 'out of paper', retryable: false } })

    const { field, attempts } = await show(id)
    expect(field('job')).toBe(id)
    expect(field('type')).toBe('show-failing')
    expect(field('state')).toBe('FAILED, 2 of 2 attempts')
    expect(field('queue')).toBe('show-q, priority NORMAL, 2 units')
    expect(field('error')).toBe('out of paper (E_PAPER)')
    expect(field('payload')).toBe('{"input":"a.png"}')
    expect(attempts).toEqual([
      expect.stringMatching(/^ {2}1 {2}show-worker-1 {2}\S+ {2}\S+ {2}FAILED, requeued {2}disk unplugged \(E_IO\)$/),
      expect.stringMatching(/^ {2}2 {2}show-worker-2 {2}\S+ {2}\S+ {2}FAILED +out of paper \(E_PAPER\)$/),
    ])

    const json = JSON.parse((await cli(['jobs', 'show', id, '--json'])).stdout) as { job: { job_id: string }; result: { status: string }; attempts: { worker_id: string }[] }
    expect([json.job.job_id, json.result.status, json.attempts.map((a) => a.worker_id)]).toEqual([id, 'FAILED', ['show-worker-1', 'show-worker-2']])
  })

  test("shows a finished job's result (not its last heartbeat's note), and a waiting job's reason with no attempts yet", async () => {
    const done = host.engine.submit({ job_type: 'show-done', cost_units: 1 }).job.id
    const taken = take('show-done')
    host.engine.heartbeat({ lease_id: taken.lease.id, worker_id: taken.report.worker_id, progress: 0.5, note: 'halfway' })
    expect((await show(done)).field('note')).toBe('halfway')
    host.engine.complete({ ...taken.report, result: { pages: 3 } })
    const finished = await show(done)
    expect([finished.field('state'), finished.field('result'), finished.field('error'), finished.field('note')]).toEqual(['DONE, 1 of 3 attempts', '{"pages":3}', undefined, undefined])
    expect(finished.attempts).toEqual([expect.stringMatching(/ {2}SUCCEEDED {2}-$/)])

    const waiting = host.engine.submit({ job_type: 'show-waiting', cost_units: 1, queue: 'show-nobody', payload: { text: 'x'.repeat(500) } }).job.id
    try {
      const queued = await show(waiting)
      expect(queued.field('state')).toBe('QUEUED, 0 of 3 attempts')
      expect(queued.field('waiting')).toBe('first in line; waiting for a worker to take it')
      expect(queued.field('attempts')).toBe('none yet')
      // A payload longer than a line is cut, saying how long it is.
      expect(queued.field('payload')).toBe(`{"text":"${'x'.repeat(191)}… (511 characters; --json has all)`)
    } finally {
      host.engine.cancel(waiting)
    }
    // Canceled before it ran, it never will: no attempts, and none to come.
    expect((await show(waiting)).field('attempts')).toBe('none')
    const again = await cli(['jobs', 'cancel', waiting])
    expect([again.status, lines(again.stderr)]).toEqual([1, [`leasehold: Job ${waiting} has already ended (CANCELED): there is nothing to cancel (illegal_transition)`]])
  })

  test('a job is found by the end of its id as the tables print it (with or without the ellipsis), by show and by the actions', async () => {
    const id = host.engine.submit({ job_type: 'show-by-end', cost_units: 1 }).job.id
    const end = id.slice(-8)
    expect((await show(`…${end}`)).field('job')).toBe(id)
    expect((await show(end)).field('job')).toBe(id)
    expect((await show(id.slice(-17))).field('job')).toBe(id)
    const canceled = await cli(['jobs', 'cancel', `…${end}`])
    expect([canceled.status, canceled.stdout.trim()]).toEqual([0, `job ${id} CANCELED`])
    const none = await cli(['jobs', 'show', '…ffffffff'])
    expect([none.status, lines(none.stderr)]).toEqual([1, ["leasehold: No job's id ends with ffffffff (job_not_found)"]])
  })

  test("an end that ends several jobs' ids is a usage error naming them, exit 2", async () => {
    // Two ids whose last 8 characters are the same: a host with both answers the search with both.
    const ids = ['01a24941-a54a-8000-8000-00000778931b', '01a24942-0000-8000-8000-00010778931b']
    const server = createHttpServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ jobs: ids.map((job_id) => ({ job_id })), next_cursor: null }))
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    try {
      const { port } = server.address() as AddressInfo
      const result = await runAsync(['jobs', 'show', '…0778931b', '--url', `http://127.0.0.1:${port}`, '--token', 'x'])
      expect([result.status, lines(result.stderr)]).toEqual([2, [`leasehold: 0778931b ends the ids of 2 jobs (${ids.join(', ')}): give more of the id`]])
    } finally {
      await new Promise((resolve) => server.close(resolve))
    }
  })

  test('a job the host does not know is one line and exit 1; no job id is a usage error, exit 2', async () => {
    const unknown = await cli(['jobs', 'show', 'no-such-job'])
    expect([unknown.status, lines(unknown.stderr)]).toEqual([1, ['leasehold: No job no-such-job (job_not_found)']])
    const missing = await cli(['jobs', 'show'])
    expect([missing.status, lines(missing.stderr)]).toEqual([2, ['leasehold: jobs show needs one job id (got 0)']])
  })
})

describe('leasehold status', async () => {
  test('status sends no Authorization on GET /api/health, the route that needs none; its other reads carry the token', async () => {
    const proxy = await cuttingProxy(host.url, { cut: false })
    try {
      const result = await runAsync(['status', '--url', proxy.url, '--token', host.token])
      expect(result.status).toBe(0)
      const requests = proxy.requests()
      expect(requests.filter((request) => request.path === '/api/health')).toEqual([{ path: '/api/health' }])
      const others = requests.filter((request) => request.path !== '/api/health')
      expect(others.length).toBeGreaterThan(3)
      for (const request of others) expect(request.authorization, request.path).toBe(`Bearer ${host.token}`)
    } finally {
      await proxy.close()
    }
  })

  test('shows capacity with the busy rating and its mode, active leases, workers and open blockers', async () => {
    host.engine.setCapacity({ total_units: 40, busy_rating: 5 })
    try {
      const quiet = await cli(['status'])
      expect(quiet.status).toBe(0)
      expect(quiet.stdout).toContain('capacity  total 40, busy 5 (manual), usable 20, leased 0, available 20')
      expect(quiet.stdout).toMatch(/leases {4}0 active/)
      expect(quiet.stdout).toMatch(/workers {3}0/)
      expect(quiet.stdout).toMatch(/blockers {2}0 open/)
      expect(quiet.stdout).toMatch(/\nstorage {3}database \d+\.\d MB \(file \d+\.\d MB \+ WAL \d+\.\d MB\); finished jobs kept 7 days/)

      const file = '/repo/status/held.ts'
      host.engine.submit({ job_type: 'status-halted', cost_units: 1 })
      const { blocker, holder } = halt(take('status-halted', 'status-worker'), file)
      const busy = await cli(['status'])
      expect(busy.status).toBe(0)
      expect(busy.stdout).toContain('leased 1, available 19')
      expect(busy.stdout).toMatch(/leases {4}1 active/)
      expect(busy.stdout).toMatch(/blockers {2}1 open/)
      expect(busy.stdout).toMatch(new RegExp(`${blocker.id}\\s+${file}\\s+holder-worker \\(job …${holder.job.id.slice(-8)}\\) for`))

      const json = JSON.parse((await cli(['status', '--json'])).stdout) as {
        capacity: Record<string, unknown>
        leases: { active: number }
        workers: unknown[]
        blockers: Array<{ blocker_id: string; file: string; state: string }>
        storage: { database_bytes: number; file_bytes: number; wal_bytes: number; retain_days: number; auto_vacuum: string }
      }
      expect(json.capacity).toEqual({ total_units: 40, busy_rating: 5, busy_mode: 'manual', usable: 20, leased: 1, available: 19 })
      expect(json.leases.active).toBe(1)
      expect(json.workers).toEqual([])
      expect(json.blockers).toEqual([expect.objectContaining({ blocker_id: blocker.id, file, state: 'OPEN' })])
      expect(json.storage).toMatchObject({ retain_days: 7, auto_vacuum: 'incremental' })
      expect(json.storage.database_bytes).toBe(json.storage.file_bytes + json.storage.wal_bytes)
      expect(json.storage.file_bytes).toBeGreaterThan(0)

      host.engine.resolveBlocker(blocker.id, { action: 'cancel' })
      finishHolder(holder, file)
      expect((await cli(['status'])).stdout).toMatch(/blockers {2}0 open/)
    } finally {
      host.engine.setCapacity({ total_units: 100, busy_rating: 0 })
    }
  })

  test("a worker running many jobs shows three of them and how many more; --json has every id", async () => {
    const ids = Array.from({ length: 5 }, () => host.engine.submit({ job_type: 'status-many', cost_units: 1, queue: 'status-many-q' }).job.id)
    const claim = await host.call('/internal/worker/batch', { method: 'POST', json: { worker_id: 'status-many-worker', claim: { streams: ['status-many-q'], max_jobs: 5, max_wait_ms: 0 } } })
    const { jobs } = (await claim.json()) as { jobs: { job_id: string; attempt_id: string; lease_token: string }[] }
    expect(jobs.map((job) => job.job_id).sort()).toEqual([...ids].sort())
    try {
      const row = lines((await cli(['status'])).stdout).find((line) => line.includes('status-many-worker'))
      const cell = /(…\w{8}),(…\w{8}),(…\w{8}) \+2 more/.exec(row ?? '')
      expect(cell, row).not.toBeNull()
      expect(ids.map((id) => `…${id.slice(-8)}`)).toEqual(expect.arrayContaining(cell!.slice(1)))
      const json = JSON.parse((await cli(['status', '--json'])).stdout) as { workers: { worker_id: string; current_job_ids: string[] }[] }
      expect(json.workers.find((w) => w.worker_id === 'status-many-worker')?.current_job_ids.sort()).toEqual([...ids].sort())
    } finally {
      const complete = jobs.map(({ job_id, attempt_id, lease_token }) => ({ job_id, attempt_id, lease_token, result: null }))
      expect((await host.call('/internal/worker/batch', { method: 'POST', json: { worker_id: 'status-many-worker', complete } })).status).toBe(200)
    }
  })

  test('status --json prints the fields its --help lists, and no other', async () => {
    const [help, json] = await Promise.all([runAsync(['status', '--help']), cli(['status', '--json'])])
    // "print {url, capacity, …, jobs: {over_capacity}, …, redis?} as JSON": the top-level names; redis? only with --redis.
    const shape = /print \{(.*)\} as JSON/.exec(help.stdout)?.[1] ?? ''
    const names = shape.replace(/\{[^}]*\}/g, '').split(', ').map((field) => field.replace(/[:?\s]/g, ''))
    const always = names.filter((name) => !shape.includes(`${name}?`))
    expect(Object.keys(JSON.parse(json.stdout) as object)).toEqual(always)
    expect(names.filter((name) => !always.includes(name))).toEqual(['redis'])
  })

  test('reports the waiting jobs a lowered total leaves unable to run', async () => {
    const big = host.engine.submit({ job_type: 'status-big', cost_units: 80 }).job
    host.engine.setCapacity({ total_units: 50 })
    try {
      const result = await cli(['status'])
      expect(result.status).toBe(0)
      expect(result.stdout).toContain(
        'warning   1 waiting job costs more than the total capacity (50 units) and cannot run: raise total_units or cancel it (leasehold jobs shows which)',
      )
      expect((JSON.parse((await cli(['status', '--json'])).stdout) as { jobs: unknown }).jobs).toEqual({ over_capacity: 1 })
      const jobs = await cli(['jobs', '--state', 'QUEUED'])
      expect(lines(jobs.stdout).find((row) => row.startsWith(big.id))).toMatch(/cost 80 exceeds total capacity 50; raise total_units or cancel the job$/)
    } finally {
      host.engine.cancel(big.id)
      host.engine.setCapacity({ total_units: 100 })
    }
    expect((await cli(['status'])).stdout).not.toContain('warning')
  })
})

describe('leasehold status names jobs by the end of their ids', async () => {
  test("a busy worker's jobs show as the last 8 characters of their ids, the part that tells jobs of one minute apart", async () => {
    const claim = async () => {
      const res = await host.call('/internal/worker/claim', { method: 'POST', json: { worker_id: 'ext-status', streams: ['status-ids'], max_wait_ms: 0 } })
      return (await res.json()) as { job_id: string; attempt_id: string; lease_token: string }
    }
    host.engine.submit({ job_type: 'status-ids', cost_units: 1, queue: 'status-ids' })
    host.engine.submit({ job_type: 'status-ids', cost_units: 1, queue: 'status-ids' })
    const claims = [await claim(), await claim()]
    try {
      const result = await cli(['status'])
      expect(result.status).toBe(0)
      const row = lines(result.stdout).find((line) => line.includes('ext-status'))!
      expect(row).toMatch(/ext-status\s+external\s+busy\s+…[0-9a-f]{8},…[0-9a-f]{8}\s/)
      for (const { job_id } of claims) {
        expect(row).toContain(`…${job_id.slice(-8)}`)
        expect(row).not.toContain(job_id)
      }
    } finally {
      for (const c of claims) host.engine.complete({ worker_id: 'ext-status', job_id: c.job_id, attempt_id: c.attempt_id, lease_token: c.lease_token })
    }
  })
})

describe('leasehold blockers', async () => {
  test('list shows the open reports; resolve answers one, with a note and who answered; list --state resolved shows the answer', async () => {
    const file = '/repo/blockers/held.ts'
    const { requester, blocker, holder } = halted('blockers-halted', file)
    const open = await cli(['blockers'])
    expect(open.status).toBe(0)
    expect(open.stdout).toMatch(/^ID\s+FILE\s+HELD BY\s+HALTED$/m)
    expect(open.stdout).toMatch(new RegExp(`^${blocker.id}\\s+${file}\\s+holder-worker \\(job …${holder.job.id.slice(-8)}\\) for \\S+ s at the halt; holds it still \\(\\S+ s\\)\\s+…${requester.job.id.slice(-8)}$`, 'm'))

    const resolved = await cli(['blockers', 'resolve', blocker.id, 'cancel', '--note', 'not needed', '--by', 'ops'])
    expect(resolved).toMatchObject({ status: 0, stdout: `blocker ${blocker.id} resolved: cancel; job CANCELED\n` })
    expect(host.engine.getJob(requester.job.id).state).toBe('CANCELED')
    expect(host.engine.getBlocker(blocker.id)).toMatchObject({ state: 'RESOLVED', resolution: 'cancel', note: 'not needed', resolved_by: 'ops' })
    expect((await cli(['blockers', 'list'])).stdout.trim()).toBe('no open blockers: no job waits for an answer')
    expect((await cli(['blockers', 'list', '--state', 'resolved'])).stdout).toMatch(new RegExp(`^${blocker.id}\\s.*cancel by ops$`, 'm'))
    const again = await cli(['blockers', 'resolve', blocker.id, 'retry'])
    expect(again.status).toBe(1)
    expect(again.stderr).toMatch(/blocker_resolved|already resolved/)
    finishHolder(holder, file)
  })

  test('resolve takes a blocker by the end of its id, as the waiting reasons print it; an end too short, or one no report has, is said so', async () => {
    const file = '/repo/blockers/by-end.ts'
    const { requester, blocker, holder } = halted('blockers-end', file)
    const end = blocker.id.slice(-8)
    expect(await cli(['blockers', 'resolve', 'abc', 'retry'])).toMatchObject({ status: 2, stderr: expect.stringContaining('"abc" is too short to name a blocker') })
    expect(await cli(['blockers', 'resolve', '…00000000', 'retry'])).toMatchObject({ status: 1, stderr: expect.stringContaining("No blocker's id ends with 00000000") })
    const resolved = await cli(['blockers', 'resolve', `…${end}`, 'retry'])
    expect(resolved).toMatchObject({ status: 0, stdout: `blocker ${blocker.id} resolved: retry; job QUEUED\n` })
    finishHolder(holder, file)
  })

  test('resolve writes a file name with control characters (a newline, an escape sequence) escaped, as the list does', async () => {
    const file = '/repo/blockers/evil\n\u001b[31mred.ts'
    const { requester, blocker, holder } = halted('blockers-evil', file)
    const resolved = await cli(['blockers', 'resolve', blocker.id, 'force_release'])
    expect(resolved.status).toBe(0)
    expect(resolved.stdout).not.toMatch(/[\u0000-\u0009\u000b-\u001f]/)
    expect(lines(resolved.stdout)).toHaveLength(1)
    expect(resolved.stdout).toContain('/repo/blockers/evil\\u000a\\u001b[31mred.ts was taken from holder-worker')
    host.engine.cancel(holder.job.id)
    host.engine.cancel(requester.job.id)
  })

  test("a holder's job that took the file again under a new attempt is said to hold it again, and force_release takes it from that attempt", async () => {
    const file = '/repo/blockers/again.ts'
    const { requester, blocker, holder } = halted('blockers-again', file, (holderJobId) => `job:${holderJobId}`)
    // Its attempt ends (its worker gone), and the job's next attempt takes the file again.
    host.engine.fail({ ...holder.report, error: { message: 'worker killed', retryable: true } })
    clock.set(host.engine.getJob(holder.job.id).next_retry_at ?? clock.now())
    const again = take('holder', 'holder-worker')
    expect(again.job.id).toBe(holder.job.id)
    expect(host.engine.acquireFile({ file, owner_id: holder.owner, lease_id: again.lease.id })).toMatchObject({ granted: true })
    expect((await cli(['blockers'])).stdout).toMatch(new RegExp(`^${blocker.id}\\s+${file}\\s+job …${holder.job.id.slice(-8)} for \\S+ s at the halt; its job holds it again under a new attempt \\(0 s\\)`, 'm'))
    const resolved = await cli(['blockers', 'resolve', blocker.id, 'force_release'])
    expect(resolved.stdout).toContain(`; ${file} was taken from job …${holder.job.id.slice(-8)}, whose writes to it are refused from now on`)
    host.engine.fail({ ...again.report, error: { message: 'file taken' } })
    host.engine.cancel(requester.job.id)
  })

  test("a file a worker's gate took under its job's name is held by that job, named once", async () => {
    const file = '/repo/blockers/gated.ts'
    const { requester, blocker, holder } = halted('blockers-gated', file, (holderJobId) => `job:${holderJobId}`)
    expect((await cli(['blockers'])).stdout).toMatch(new RegExp(`^${blocker.id}\\s+${file}\\s+job …${holder.job.id.slice(-8)} for \\S+ s at the halt; holds it still`, 'm'))
    // The halted job's reason names the holder so too; its halted attempt reads BLOCKED once
    // (its outcome, and what became of the job: the same).
    const shown = lines((await cli(['jobs', 'show', requester.job.id])).stdout)
    expect(shown.find((line) => line.startsWith('waiting '))).toContain(`halted on ${file}, held by job …${holder.job.id.slice(-8)} (blocker`)
    expect(shown.at(-1)).toMatch(/ {2}BLOCKED {2}Halted by a file-lease blocker \(blocked\)$/)
    finishHolder(holder, file)
    host.engine.cancel(requester.job.id)
  })

  test('a force_release that took the file says from whom, that its writes are refused from now on, and for whom the file is kept', async () => {
    const file = '/repo/blockers/taken.ts'
    const { requester, blocker, holder } = halted('blockers-taken', file)
    const resolved = await cli(['blockers', 'resolve', blocker.id, 'force_release'])
    expect(resolved).toMatchObject({
      status: 0,
      stdout: `blocker ${blocker.id} resolved: force_release; ${file} was taken from holder-worker, whose writes to it are refused from now on, and ${file} is kept for job …${requester.job.id.slice(-8)} for 180 s or until it takes it; job QUEUED\n`,
    })
    host.engine.cancel(holder.job.id)
    host.engine.cancel(requester.job.id)
  })

  test('an answer to a report that names no job says there was no job to requeue or cancel', async () => {
    const file = '/repo/blockers/no-job.ts'
    const taken = halt('nj3', file)
    const forced = await cli(['blockers', 'resolve', taken.blocker.id, 'force_release'])
    expect(forced).toMatchObject({
      status: 0,
      stdout: `blocker ${taken.blocker.id} resolved: force_release; ${file} was taken from holder-worker, whose writes to it are refused from now on, and ${file} is kept for nj3 for 180 s or until it takes it; the report names no job, so none was requeued\n`,
    })
    host.engine.cancel(taken.holder.job.id)
    const file2 = '/repo/blockers/no-job-2.ts'
    const canceled = halt('nj4', file2)
    expect(await cli(['blockers', 'resolve', canceled.blocker.id, 'cancel'])).toMatchObject({
      status: 0,
      stdout: `blocker ${canceled.blocker.id} resolved: cancel; the report names no job, so none was canceled\n`,
    })
    finishHolder(canceled.holder, file2)
  })

  test('a holder that let go after the halt is listed so, and a force_release then says that nothing was taken', async () => {
    const file = '/repo/blockers/let-go.ts'
    const { requester, blocker, holder } = halted('blockers-let-go', file)
    finishHolder(holder, file)
    expect((await cli(['blockers'])).stdout).toMatch(new RegExp(`^${blocker.id}\\s.* at the halt; no longer holds it\\s`, 'm'))
    const resolved = await cli(['blockers', 'resolve', blocker.id, 'force_release'])
    expect(resolved).toMatchObject({
      status: 0,
      stdout: `blocker ${blocker.id} resolved: force_release; the holder had already let go of ${file}, nothing was taken; job QUEUED\n`,
    })
    // Read later, the report still says so.
    expect((await cli(['blockers', 'list', '--state', 'resolved'])).stdout).toMatch(new RegExp(`^${blocker.id}\\s.*force_release by operator \\(nothing taken: the holder had let go\\)$`, 'm'))
    host.engine.cancel(requester.job.id)
  })

  test.each([
    [['resolve'], 'blockers resolve needs a blocker id and an action'],
    [['resolve', 'b-1', 'skip'], 'the action must be retry, force_release or cancel (got "skip")'],
    [['list', '--state', 'closed'], '--state must be open, resolved or all (got "closed")'],
    [['resolve', 'b-1', 'retry', '--by', ' '], '--by must not be blank (got " ")'],
    [['resolve', 'b-1', 'retry', '--by', 'ops\u200b'], '--by must not contain control or invisible characters (a newline, a bidi mark, a zero-width space) (got "ops\\u200b")'],
    [['forget'], 'blockers needs list or resolve (got "forget")'],
  ])('bad input (%j) is one line and exit 2', async (args, text) => {
    const result = await cli(['blockers', ...args])
    expect(result.status).toBe(2)
    expect(result.stderr).toContain(text)
    expect(result.stderr.trim().split('\n')).toHaveLength(1)
  })
})

describe('leasehold queue', async () => {
  test('pause holds a queue, list shows it paused with its jobs, resume lets them go', async () => {
    const id = host.engine.submit({ job_type: 'q', cost_units: 1, queue: 'cli-q' }).job.id
    const paused = await cli(['queue', 'pause', 'cli-q', '--by', 'ops'])
    expect(paused.status).toBe(0)
    expect(paused.stdout).toMatch(/^queue cli-q paused since \S+ by ops$/m)
    expect(host.engine.claimAndLease({ worker_id: 'w', queues: ['cli-q'] })).toMatchObject({ granted: false })
    const listed = await cli(['queue', 'list'])
    expect(listed.status).toBe(0)
    expect(listed.stdout).toMatch(/^QUEUE\s+STATE\s+WAITING\s+RUNNING/m)
    expect(listed.stdout).toMatch(/^cli-q\s+paused since \S+ by ops\s+1\s+0/m)
    const json = JSON.parse((await cli(['queue', 'list', '--json'])).stdout)
    expect(json.queues.find((q: { queue: string }) => q.queue === 'cli-q')).toMatchObject({ paused: true, counts: { QUEUED: 1 } })
    const resumed = await cli(['queue', 'resume', 'cli-q'])
    expect(resumed.stdout.trim()).toBe('queue cli-q active')
    host.engine.cancel(id)
  })

  test('pause and resume show the queue name escaped, as list does; a --by holding control characters is refused, shown escaped', async () => {
    const refused = await cli(['queue', 'pause', 'q\x1b[31m', '--by', 'ops\x1b]0;x\x07'])
    expect([refused.status, refused.stderr.trim()]).toEqual([2, 'leasehold: --by must not contain control or invisible characters (a newline, a bidi mark, a zero-width space) (got "ops\\u001b]0;x\\u0007")'])
    const paused = await cli(['queue', 'pause', 'q\x1b[31m', '--by', 'ops'])
    expect(paused.stdout).toMatch(/^queue q\\u001b\[31m paused since \S+ by ops$/m)
    const resumed = await cli(['queue', 'resume', 'q\x1b[31m'])
    expect(resumed.stdout.trim()).toBe('queue q\\u001b[31m active')
  })

  test('list lines up a queue named in wide characters (キュー) by the columns it takes on screen, not by its UTF-16 length', async () => {
    const id = host.engine.submit({ job_type: 'wide', cost_units: 1, queue: 'キュー' }).job.id
    const listed = await cli(['queue', 'list'])
    expect(listed.status).toBe(0)
    const [header, ...rows] = lines(listed.stdout)
    const stateColumn = header!.indexOf('STATE')
    const wide = rows.find((row) => row.startsWith('キュー'))!
    // キュー takes 6 columns, and is 3 code units long: 3 more spaces than its length alone would give.
    expect(wide).toMatch(new RegExp(`^キュー {${stateColumn - 6}}active`))
    host.engine.cancel(id)
  })

  test.each([
    [[], 'queue needs one of list, pause, resume'],
    [['stop', 'q'], 'queue needs one of list, pause, resume'],
    [['pause'], 'queue pause needs the name of a queue'],
    [['list', 'extra'], 'extra'],
    [['pause', 'q', '--by', 'ops '], '--by must not begin or end with whitespace (got "ops ")'],
  ])('bad input (%j) is one line and exit 2', async (args, text) => {
    const result = await cli(['queue', ...args])
    expect(result.status).toBe(2)
    expect(lines(result.stderr)).toEqual([expect.stringContaining(text)])
  })
})

describe('finding the host', async () => {
  test("a data dir whose path a shell would split is quoted in the command a line suggests, so that it can be pasted as it is", async () => {
    const spaced = join(tempDir(), "Ann's data dir")
    dirs.push(spaced)
    const result = runCli(['status', '--data-dir', spaced], CLEAN_ENV)
    expect(result.status).toBe(1)
    expect(lines(result.stderr)).toEqual([`leasehold: no host is running on ${spaced}: start one with "leasehold serve --data-dir '${spaced.replace("'", "'\\''")}'" (or "npm start" in the repository), or give --url and --token for a host elsewhere`])
  })

  test('a data dir where no host runs says so and how to start one: one line, exit 1', async () => {
    const empty = tempDir()
    dirs.push(empty)
    for (const command of [['status'], ['jobs'], ['submit', '--type', 't']]) {
      const result = runCli([...command, '--data-dir', empty], CLEAN_ENV)
      expect(result.status).toBe(1)
      expect(lines(result.stderr)).toEqual([`leasehold: no host is running on ${empty}: start one with "leasehold serve --data-dir ${empty}" (or "npm start" in the repository), or give --url and --token for a host elsewhere`])
    }
    // A usage mistake is one whether a host runs or not: exit 2, before any host is looked for.
    for (const command of [['blockers', 'resolve'], ['blockers', 'resolve', 'abc-def-0123', 'bogus'], ['blockers', '--state', 'bogus'], ['jobs', 'cancel']]) {
      expect(runCli([...command, '--data-dir', empty], CLEAN_ENV).status, command.join(' ')).toBe(2)
    }
    // A host that ran there and stopped left its token, not its host.json: the same line.
    mkdirSync(empty, { recursive: true })
    writeFileSync(join(empty, 'token'), 'old-token\n')
    expect(lines(runCli(['status', '--data-dir', empty], CLEAN_ENV).stderr)).toEqual([expect.stringContaining(`no host is running on ${empty}`)])
    // An empty host.json is a host that could not say where it listens (a start on a full disk): not "start one".
    writeFileSync(join(empty, 'host.json'), '')
    const blank = runCli(['status', '--data-dir', empty], CLEAN_ENV)
    expect(blank.status).toBe(1)
    expect(lines(blank.stderr)).toEqual([
      `leasehold: the host on ${empty} has not said where it listens (its host.json is empty: it may still be starting, or its disk may be full): try again in a moment, or give --url and --token (its log names its URL)`,
    ])
  })

  test('a token without a URL names no host: a data dir where none runs says so as it does without a token', async () => {
    const empty = tempDir()
    dirs.push(empty)
    const result = runCli(['status', '--data-dir', empty, '--token', '0123456789abcdef0123'], CLEAN_ENV)
    expect(result.status).toBe(1)
    expect(lines(result.stderr)).toEqual([expect.stringContaining(`leasehold: no host is running on ${empty}: start one`)])
  })

  test('a command on the data dir of a host that stopped says no host runs, and leaves no file beside the database', async () => {
    const stopped = await startTestHost()
    await stopped.stop()
    dirs.push(stopped.dataDir)
    const before = readdirSync(stopped.dataDir).sort()
    const result = runCli(['status', '--data-dir', stopped.dataDir], CLEAN_ENV)
    expect(result.status).toBe(1)
    expect(lines(result.stderr)).toEqual([expect.stringContaining(`leasehold: no host is running on ${stopped.dataDir}: start one`)])
    expect(readdirSync(stopped.dataDir).sort()).toEqual(before)
  })

  test("a host.json left by a killed host, whose pid is now another live process of the user, is no host: the command says none runs, and what listens on the host's port is sent nothing; a host started there again is found", async () => {
    const dataDir = tempDir()
    dirs.push(dataDir)
    const killed = await startServe(['--data-dir', dataDir, '--port', '0'])
    killed.child.kill('SIGKILL')
    await killed.exited
    const port = Number(new URL(killed.url).port)
    // Its pid taken by another process of the user's: named by host.json and by the lock file
    // alike, as after a reuse of the very pid (the lock is the OS's, and was dropped at the kill).
    const other = spawn(process.execPath, ['-e', 'setInterval(() => {}, 60_000)'], { stdio: 'ignore' })
    children.push(other)
    const hostFile = join(dataDir, 'host.json')
    writeFileSync(hostFile, JSON.stringify({ ...JSON.parse(readFileSync(hostFile, 'utf8')), pid: other.pid }))
    const lockFile = readFileSync(join(dataDir, 'host.lock'))
    lockFile.writeUInt32BE(other.pid!, 60) // SQLite's user_version, where the host wrote its pid
    writeFileSync(join(dataDir, 'host.lock'), lockFile)
    // Whatever listens on the port now: it answers every request as a healthy host would.
    const heard: { path: string; authorization?: string }[] = []
    const listener = createHttpServer((req, res) => {
      heard.push({ path: req.url ?? '', ...(req.headers.authorization === undefined ? {} : { authorization: req.headers.authorization }) })
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}')
    })
    await new Promise<void>((resolve) => listener.listen(port, '127.0.0.1', resolve))
    try {
      for (const command of [['jobs'], ['status'], ['worker']]) {
        const result = await runAsync([...command, '--data-dir', dataDir])
        expect([result.status, lines(result.stderr)], command[0]).toEqual([1, [expect.stringContaining(`no host is running on ${dataDir}: start one`)]])
      }
      expect(heard).toEqual([])
      // A host started there again takes the lock, removes the file left behind, and is found.
      const again = await startServe(['--data-dir', dataDir, '--port', '0'])
      try {
        const result = await runAsync(['jobs', '--data-dir', dataDir, '--json'])
        expect([result.status, result.stderr]).toEqual([0, ''])
        expect(JSON.parse(readFileSync(hostFile, 'utf8'))).toEqual({ url: again.url, pid: expect.any(Number) })
      } finally {
        again.child.kill('SIGTERM')
        await again.exited
      }
      expect(heard).toEqual([])
    } finally {
      await new Promise((resolve) => listener.close(resolve))
    }
  })

  test('a host that holds the data dir but whose host.json stays missing is waited for 5 s, then said to be starting or out of disk, asking for --url and --token', async () => {
    const hostFile = join(host.dataDir, 'host.json')
    const kept = readFileSync(hostFile)
    rmSync(hostFile)
    try {
      for (const args of [['status'], ['status', '--token', host.token]]) {
        const started = Date.now()
        const result = await cli(args)
        expect(Date.now() - started).toBeGreaterThanOrEqual(5000)
        expect(result.status).toBe(1)
        expect(lines(result.stderr)).toEqual([
          `leasehold: a host holds the data dir ${host.dataDir} but has not said where it listens in 5 s (its host.json is missing: it may still be starting, or its disk may be full): try again in a moment, or give --url and --token (its log names its URL)`,
        ])
      }
    } finally {
      writeFileSync(hostFile, kept)
    }
  })

  test('a host.json naming a live process other than the one that holds the data dir is waited for 5 s, then said to name a process that no longer holds it, and which process does, not to be missing', async () => {
    const hostFile = join(host.dataDir, 'host.json')
    const kept = readFileSync(hostFile)
    // A live process of the user's that holds nothing: as a dead host's pid taken since, while a host (this test's) holds the lock.
    const other = spawn(process.execPath, ['-e', 'setInterval(() => {}, 60_000)'], { stdio: 'ignore' })
    children.push(other)
    writeFileSync(hostFile, JSON.stringify({ ...JSON.parse(kept.toString('utf8')), pid: other.pid }))
    try {
      const started = Date.now()
      const result = await cli(['status'])
      expect(Date.now() - started).toBeGreaterThanOrEqual(5000)
      expect(result.status).toBe(1)
      expect(lines(result.stderr)).toEqual([
        `leasehold: the host.json of the data dir ${host.dataDir} names pid ${other.pid}, which no longer holds the data dir; pid ${process.pid} holds it and has not said where it listens in 5 s (it may still be starting, or its disk may be full): try again in a moment, or give --url and --token (its log names its URL)`,
      ])
    } finally {
      writeFileSync(hostFile, kept)
    }
  })

  test.skipIf(process.platform === 'win32')('a host.json another user may have written (its data dir or the file writable by others) is refused in one line naming the fix, and nothing is sent to the URL it names', async () => {
    const hostFile = join(host.dataDir, 'host.json')
    const heard: string[] = []
    const listener = createHttpServer((req, res) => {
      heard.push(req.headers.authorization ?? '')
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}')
    })
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve))
    const kept = readFileSync(hostFile)
    // A process holding the lock, named by a host.json that points elsewhere: what another user could plant in a loose data dir.
    writeFileSync(hostFile, JSON.stringify({ url: `http://127.0.0.1:${(listener.address() as AddressInfo).port}`, pid: process.pid }))
    try {
      for (const [path, mode] of [
        [host.dataDir, 0o777],
        [hostFile, 0o666],
      ] as const) {
        const before = statSync(path).mode & 0o777
        chmodSync(path, mode)
        try {
          const result = await cli(['status'])
          expect(result.status).toBe(1)
          expect(lines(result.stderr)).toHaveLength(1)
          expect(result.stderr).toContain(`leasehold: ${path} is writable by its group and others (mode 0${mode.toString(8)}): another user could name a host there, and this command would send it the token; check that the data dir is yours, then run \`chmod ${path === hostFile ? 600 : 700} ${path}\``)
        } finally {
          chmodSync(path, before)
        }
      }
      expect(heard).toEqual([])
    } finally {
      writeFileSync(hostFile, kept)
      await new Promise((resolve) => listener.close(resolve))
    }
  })

  test('a host that holds the data dir and writes its host.json a moment after the command starts (a host starting) is waited for and answers', async () => {
    const hostFile = join(host.dataDir, 'host.json')
    const kept = readFileSync(hostFile)
    rmSync(hostFile)
    try {
      const running = cli(['status', '--json'])
      await new Promise((resolve) => setTimeout(resolve, 1000))
      writeFileSync(hostFile, kept)
      const result = await running
      expect(result.stderr).toBe('')
      expect(result.status).toBe(0)
      expect(JSON.parse(result.stdout).url).toBe(host.url)
    } finally {
      writeFileSync(hostFile, kept)
    }
  })

  test("the dashboard's link names the host: its origin (and path) is the URL, its #token= the token when none is given", async () => {
    const empty = tempDir()
    dirs.push(empty)
    const link = `${host.url}/#token=${host.token}`
    const status = await runAsync(['status', '--json', '--url', link, '--data-dir', empty])
    expect(status.stderr).toBe('')
    expect(JSON.parse(status.stdout).url).toBe(host.url)
    const submitted = await runAsync(['submit', '--type', 'linked', '--url', `${host.url}/?from=dashboard#token=${host.token}`, '--data-dir', empty])
    expect(submitted.stderr).toBe('')
    expect(host.engine.getJob(submitted.stdout.trim())?.job_type).toBe('linked')
    host.engine.cancel(submitted.stdout.trim())
    // A token given otherwise wins over the link's.
    const other = await runAsync(['status', '--url', `${host.url}/#token=${host.token}`, '--token', 'not-the-hosts-token', '--data-dir', empty])
    expect(other.status).toBe(1)
    expect(other.stderr).toContain('unauthorized')
  })

  test('a host named by --url with no token anywhere is one line and exit 2', async () => {
    const empty = tempDir()
    dirs.push(empty)
    const result = runCli(['status', '--url', host.url, '--data-dir', empty], CLEAN_ENV)
    expect(result.status).toBe(2)
    expect(lines(result.stderr)).toEqual([expect.stringContaining('no token')])
  })

  test('LEASEHOLD_URL and LEASEHOLD_TOKEN are used when no flag or data dir names the host', async () => {
    const empty = tempDir()
    dirs.push(empty)
    const result = await runAsync(['jobs', '--limit', '1'], { LEASEHOLD_URL: host.url, LEASEHOLD_TOKEN: host.token, LEASEHOLD_DATA_DIR: empty })
    expect(result.status).toBe(0)
    expect(result.stdout).toMatch(/^ID\s+TYPE/)
  })

  /** A port on `address` that nothing listens on: its connections are refused. */
  const closedPort = (address: string) =>
    new Promise<number>((resolve) => {
      const server = createServer().listen(0, address, () => {
        const { port } = server.address() as { port: number }
        server.close(() => resolve(port))
      })
    })

  test('a host of this machine that refuses the connection (a loopback URL, or named by the data dir) is one line naming its URL, with leasehold serve to start it, exit 1', async () => {
    const empty = tempDir()
    dirs.push(empty)
    mkdirSync(empty, { recursive: true })
    for (const name of ['127.0.0.1', 'localhost']) {
      const url = `http://${name}:${await closedPort('127.0.0.1')}`
      const result = runCli(['submit', '--type', 't', '--url', url, '--token', 'x', '--data-dir', empty], CLEAN_ENV)
      expect(result.status).toBe(1)
      expect(lines(result.stderr)).toEqual([
        `leasehold: the host at ${url} is not running (connection refused), or is still starting or stopping: try again in a moment, or start it with leasehold serve`,
      ])
    }
    // A data dir whose host.json names a host holding its lock (this process) at a port nothing listens on: one stopping.
    const dir = tempDir()
    dirs.push(dir)
    const lock = LockFile.open(join(dir, 'host.lock'))
    lock.hold(process.pid)
    try {
      const url = `http://127.0.0.1:${await closedPort('127.0.0.1')}`
      writeFileSync(join(dir, 'host.json'), JSON.stringify({ url, pid: process.pid }))
      writeFileSync(join(dir, 'token'), `${host.token}\n`)
      const result = await runAsync(['status', '--data-dir', dir])
      expect(result.status).toBe(1)
      expect(lines(result.stderr)).toEqual([
        `leasehold: the host at ${url} is not running (connection refused), or is still starting or stopping: try again in a moment, or start it with leasehold serve --data-dir ${dir}`,
      ])
    } finally {
      lock.release()
    }
  })

  // This machine's own address on its network: not a loopback one, so named as another machine's would be.
  const networkAddress = Object.values(networkInterfaces())
    .flat()
    .find((a) => a !== undefined && a.family === 'IPv4' && !a.internal)?.address
  test.skipIf(networkAddress === undefined)(
    "a host at another machine's address that refuses the connection is one line naming its URL, asking to check that it runs and the address is right (not to start one here), exit 1",
    async () => {
      const url = `http://${networkAddress}:${await closedPort(networkAddress!)}`
      const result = await runAsync(['status', '--url', url, '--token', 'x'])
      expect(result.status).toBe(1)
      expect(lines(result.stderr)).toEqual([
        `leasehold: the host at ${url} is not running or cannot be reached (connection refused): check that it runs, and that the address and port are right`,
      ])
    },
  )

  test('a host behind TLS (--url https://…) is reached over https, its certificate checked', async () => {
    // A TLS front for the test host, with a certificate made for 127.0.0.1 that the command is told to trust.
    const dir = tempDir()
    dirs.push(dir)
    const key = join(dir, 'key.pem')
    const cert = join(dir, 'cert.pem')
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' })
    const front = createHttpsServer({ key: readFileSync(key), cert: readFileSync(cert) }, (req, res) => {
      const back = httpRequest(`${host.url}${req.url}`, { method: req.method, headers: { ...req.headers, host: new URL(host.url).host } }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers)
        answer.pipe(res)
      })
      req.pipe(back)
    })
    await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve))
    try {
      const url = `https://127.0.0.1:${(front.address() as AddressInfo).port}`
      const submitted = await runAsync(['submit', '--type', 'tls', '--url', url, '--token', host.token], { NODE_EXTRA_CA_CERTS: cert })
      expect(submitted.stderr).toBe('')
      expect(submitted.status).toBe(0)
      expect(host.engine.getJob(submitted.stdout.trim())?.job_type).toBe('tls')
      // Without the certificate trusted, the command refuses the host: one line, exit 1.
      const untrusted = await runAsync(['jobs', '--url', url, '--token', host.token])
      expect(untrusted.status).toBe(1)
      expect(lines(untrusted.stderr)).toEqual([expect.stringMatching(/cannot reach the host at https:.*(SELF_SIGNED|certificate)/i)])
    } finally {
      await new Promise((resolve) => front.close(resolve))
    }
  })

  test('another server on the port, answering a page that is not JSON, is one line naming the server, its status and its text without markup, exit 1', async () => {
    const server = createHttpServer((_req, res) => {
      res.writeHead(502, { 'content-type': 'text/html' })
      res.end('<html><body>\n  Bad gateway\n</body></html>')
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    try {
      const { port } = server.address() as AddressInfo
      const result = await runAsync(['jobs', '--url', `http://127.0.0.1:${port}`, '--token', 'x'])
      expect(result.status).toBe(1)
      expect(lines(result.stderr)).toEqual([
        `leasehold: the server at http://127.0.0.1:${port} answered HTTP 502 Bad Gateway without Leasehold's JSON ("Bad gateway"): it is not a Leasehold host, or a proxy stands between (another program may listen on a port a host left) (http_502)`,
      ])
    } finally {
      await new Promise((resolve) => server.close(resolve))
    }
  })
  test('a host of an older release, which has no route a command calls, is named as such, with the way out, exit 1', async () => {
    const server = createHttpServer((req, res) => {
      res.writeHead(404, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ detail: `No route ${req.method} ${req.url?.split('?')[0]}`, code: 'not_found' }))
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
      const result = await runAsync(['jobs', '--url', url, '--token', 'x'])
      expect(result.status).toBe(1)
      expect(lines(result.stderr)).toEqual([
        `leasehold: the host at ${url} runs an older release of Leasehold than this command (it answered "No route GET /api/scheduler/jobs"): start this release's host in its place, or use the release's own command (not_found)`,
      ])
    } finally {
      await new Promise((resolve) => server.close(resolve))
    }
  })

  test('a host of an older release, which does not know a field a command sends, is named as such, with the way out, exit 1 (not a usage error)', async () => {
    // What an older release answered `leasehold jobs --dead-letter`: its list took no dead_letter.
    const server = createHttpServer((_req, res) => {
      res.writeHead(400, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ detail: '(query): Unrecognized key: "dead_letter"', code: 'invalid_request' }))
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
      const result = await runAsync(['jobs', '--dead-letter', '--url', url, '--token', 'x'])
      expect(result.status).toBe(1)
      expect(lines(result.stderr)).toEqual([
        `leasehold: the host at ${url} runs an older release of Leasehold than this command (it answered "(query): Unrecognized key: \"dead_letter\""): start this release's host in its place, or use the release's own command (older_release)`,
      ])
    } finally {
      await new Promise((resolve) => server.close(resolve))
    }
  })
})

describe('help', async () => {
  test("README's list of commands is the one leasehold --help gives, in its order", () => {
    const usage = runCli(['--help']).stdout
    const section = usage.slice(usage.indexOf('Commands:\n'), usage.indexOf('\n\n', usage.indexOf('Commands:\n')))
    const listed = [...section.matchAll(/^ {2}([a-z]+) /gm)].map((m) => m[1])
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8')
    const line = /\*\*Command line\*\*: `leasehold ([^`]+)`/.exec(readme)
    expect(line?.[1]?.split(' | ')).toEqual(listed)
  })

  test('leasehold --help lists every command; help CMD and CMD --help show its flags', async () => {
    const top = runCli(['--help'])
    expect(top.status).toBe(0)
    for (const command of ['serve', 'worker', 'submit', 'jobs', 'queue', 'status', 'help']) expect(top.stdout).toMatch(new RegExp(`^  ${command}\\s`, 'm'))
    for (const args of [['help'], ['help', '--help'], ['help', '-h'], ['help', 'help']]) expect(runCli(args)).toMatchObject({ status: 0, stdout: top.stdout })
    const flags: Record<string, string[]> = {
      submit: ['--type', '--payload', '--priority', '--units', '--queue', '--addon', '--max-attempts', '--key', '--at', '--in', '--wait', '--json', '--url', '--token', '--data-dir'],
      queue: ['list', 'pause QUEUE', 'resume QUEUE', '--by', '--json', '--url', '--token', '--data-dir'],
      jobs: ['--state', '--dead-letter', '--type', '--dry-run', 'retry --dead-letter', '--limit', '--json', '--url', '--token', '--data-dir'],
      status: ['--json', '--url', '--token', '--data-dir'],
    }
    const runs = Object.entries(flags).flatMap(([command, expected]) =>
      [['help', command], [command, '--help']].map(async (args) => ({ command, expected, result: await runAsync(args) })),
    )
    for (const { command, expected, result } of await Promise.all(runs)) {
      expect(result.status).toBe(0)
      expect(result.stdout).toContain(`Usage: leasehold ${command}`)
      for (const flag of expected) expect(result.stdout).toContain(flag)
    }
  })
})

describe('submit --wait follows the event stream', async () => {
  test('after the stream drops it resumes with Last-Event-ID and sees the job end', async () => {
    // A host that drops the first stream after one event, then answers the resume with the rest.
    const jobId = 'job-that-drops'
    const resumedWith: (string | undefined)[] = []
    let state = 'RUNNING'
    const server = createHttpServer((req, res) => {
      if (req.url?.startsWith('/api/events/stream')) {
        resumedWith.push(req.headers['last-event-id'] as string | undefined)
        res.writeHead(200, { 'content-type': 'text/event-stream' })
        if (resumedWith.length === 1) {
          res.end(`retry: 50\n\nid: 41\nevent: JOB_RUNNING\ndata: ${JSON.stringify({ id: 41, job_id: jobId })}\n\n`)
        } else {
          state = 'DONE'
          res.write(`id: 42\nevent: JOB_DONE\ndata: ${JSON.stringify({ id: 42, job_id: jobId })}\n\n`)
        }
        return
      }
      const job = { job_id: jobId, state, attempts: 1, max_attempts: 3, progress: null, note: null, waiting_reason: null }
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ job, result: null }))
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    let printed = ''
    const out = { isTTY: false, write: (text: string) => ((printed += text), true) } as unknown as NodeJS.WriteStream
    try {
      const { code } = await waitForJob({ url, token: 't' }, jobId, new ProgressLine(out))
      expect(code).toBe(0)
      expect(resumedWith).toEqual([undefined, '41'])
      expect(lines(printed)).toEqual([`job ${jobId} RUNNING attempt 1/3`, `job ${jobId} DONE`])
    } finally {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    }
  })

  test('a stream the host refuses ends the wait with the refusal as the host said it', async () => {
    const server = createHttpServer((req, res) => {
      if (req.url?.startsWith('/api/events/stream')) {
        res.writeHead(403, { 'content-type': 'application/json' })
        res.end(JSON.stringify({ detail: 'Cross-site requests are refused', code: 'forbidden_origin' }))
        return
      }
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ job: { job_id: 'j', state: 'RUNNING', attempts: 1, max_attempts: 3, progress: null, note: null, waiting_reason: null }, result: null }))
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    const out = { isTTY: false, write: () => true } as unknown as NodeJS.WriteStream
    try {
      await expect(waitForJob({ url, token: 't' }, 'j', new ProgressLine(out))).rejects.toThrow('Cross-site requests are refused (forbidden_origin)')
    } finally {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    }
  })
})
