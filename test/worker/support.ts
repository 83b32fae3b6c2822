/**
 * Shared pieces of the worker tests: real worker processes (the host's pool, and `leasehold
 * worker` children), the host's event log, user handler modules written into temp folders, and
 * cleanup that leaves no process behind.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { expect } from 'vitest'
import type { HostConfig } from '../../src-main/config'
import type { HostOptions } from '../../src-main/host'
import { startTestHost, tempDir, type TestHost } from '../helpers/host'
import { BIN } from '../helpers/process'
import { until } from '../helpers/until'
import { database } from '../helpers/database'
import type { Claim } from '../../src-worker/transport'

export const QUEUE = '/api/scheduler'
/** The tests' one wait (helpers/until.ts), here for the worker tests that import it with the rest. */
export { until }

// ---------------------------------------------------------------------------------------------
// The host's records

export interface StoredEvent {
  id: number
  ts: number
  entity_type: string
  entity_id: string
  job_id: string | null
  event_type: string
  data: Record<string, any>
}

/** The event log as stored (oldest first), optionally of one job and/or of some types. */
export function events(host: TestHost, filter: { job?: string; type?: string | string[] } = {}): StoredEvent[] {
  const rows = database(host.engine).prepare('SELECT * FROM events ORDER BY id').all() as (Omit<StoredEvent, 'data'> & { data: string })[]
  const types = filter.type === undefined ? null : ([] as string[]).concat(filter.type)
  return rows
    .map((row) => ({ ...row, data: JSON.parse(row.data) as Record<string, any> }))
    .filter((e) => (filter.job === undefined || e.job_id === filter.job) && (types === null || types.includes(e.event_type)))
}

/** Waits for an event (already logged or still to come) and returns the first match. */
export function waitForEvent(host: TestHost, filter: { job?: string; type: string | string[]; where?: (e: StoredEvent) => boolean }, ms: number): Promise<StoredEvent> {
  return until(() => events(host, filter).find(filter.where ?? (() => true)), ms, `event ${String(filter.type)}${filter.job ? ` of ${filter.job}` : ''}`)
}

export interface Attempt {
  id: string
  job_id: string
  worker_id: string
  number: number
  outcome: string | null
  disposition: string | null
  error: string | null
}

export function attempts(host: TestHost, jobId: string): Attempt[] {
  return host.engine.attempts(jobId) as Attempt[]
}

// ---------------------------------------------------------------------------------------------
// Jobs over HTTP (the queue API)

export async function submit(host: TestHost, json: Record<string, unknown>): Promise<string> {
  const res = await host.call(`${QUEUE}/jobs/submit`, { method: 'POST', json: { cost_units: 1, ...json } })
  const text = await res.text()
  expect(res.status, text).toBe(201)
  return (JSON.parse(text) as { job: { job_id: string } }).job.job_id
}

export async function jobView(host: TestHost, jobId: string): Promise<{ job: Record<string, any>; result: Record<string, any> | null }> {
  const res = await host.call(`${QUEUE}/jobs/${jobId}`)
  const text = await res.text()
  expect(res.status, text).toBe(200)
  return JSON.parse(text)
}

const TERMINAL = ['DONE', 'FAILED', 'CANCELED', 'TIMEOUT']

/** Waits until the job is in a terminal state (or in one of `states`) and returns its view. */
export async function settled(host: TestHost, jobId: string, ms: number, states = TERMINAL): Promise<{ job: Record<string, any>; result: Record<string, any> | null }> {
  const seen: { state?: string } = {}
  try {
    return await until(async () => {
      const view = await jobView(host, jobId)
      seen.state = view.job.state
      return states.includes(view.job.state) ? view : null
    }, ms, `job ${jobId} in ${states.join('|')}`)
  } catch (error) {
    throw new Error(`${(error as Error).message}; last seen ${seen.state}; events ${events(host, { job: jobId }).map((e) => e.event_type).join(', ')}`)
  }
}

// ---------------------------------------------------------------------------------------------
// Hosts and their data dirs

/** A data dir for a host, with user handler modules (file name → source) in `<data-dir>/handlers`. */
export function dataDirWith(handlers: Record<string, string>): string {
  const dataDir = tempDir('leasehold-worker-test-')
  writeHandlers(join(dataDir, 'handlers'), handlers)
  return dataDir
}

/** Writes handler modules (file name → source) into `dir`, made writable by this user alone whatever the umask: a worker loads no other (workers.md). */
export function writeHandlers(dir: string, handlers: Record<string, string>): string {
  mkdirSync(dir, { recursive: true, mode: 0o755 })
  for (const [name, source] of Object.entries(handlers)) writeFileSync(join(dir, name), source, { mode: 0o644 })
  return dir
}

/** An in-process host whose log lines are kept (local workers' output arrives here as `[local-N.G] …`). */
export async function startHost(overrides: Partial<HostConfig>, options: Pick<HostOptions, 'clock' | 'machineCpu'> = {}): Promise<TestHost & { lines: string[] }> {
  const lines: string[] = []
  const host = await startTestHost({ drainGraceS: 1, ...overrides }, { ...options, log: (line) => lines.push(line) })
  const kept = Object.assign(host, { lines })
  hosts.add(kept)
  return kept
}

const hosts = new Set<TestHost & { lines: string[] }>()

/** Waits until every slot of the pool has a worker that said it is ready. */
export async function poolReady(host: TestHost, size: number, ms = 20_000): Promise<void> {
  await until(async () => {
    const res = await host.call('/api/workers')
    const { workers } = (await res.json()) as { workers: { kind: string; state: string }[] }
    return workers.filter((w) => w.kind === 'local' && w.state === 'ready').length === size
  }, ms, `${size} local workers ready`)
}

// ---------------------------------------------------------------------------------------------
// External workers: `leasehold worker` processes

export interface WorkerChild {
  child: ChildProcess
  pid: number
  /** Everything the process wrote to stdout and stderr so far. */
  output(): string
  exited: Promise<number | null>
}

const children = new Set<ChildProcess>()
/** What each `leasehold worker` of the test printed, read by {@link cleanUp}. */
const outputs = new Set<() => string>()

/** Starts `leasehold worker --url … --token …` plus `args`; it is killed after the test. */
export function spawnWorker(host: TestHost, args: string[] = [], env: NodeJS.ProcessEnv = {}): WorkerChild {
  const child = spawn(process.execPath, [BIN, 'worker', '--url', host.url, '--token', host.token, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  children.add(child)
  let output = ''
  outputs.add(() => output)
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()))
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()))
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  void exited.then(() => children.delete(child))
  return { child, pid: child.pid!, output: () => output, exited }
}

/** Waits for `leasehold worker` to say it is taking jobs. */
export function workerStarted(worker: WorkerChild, ms = 20_000): Promise<unknown> {
  return until(() => /taking .* from http/.test(worker.output()), ms, `worker ${worker.pid} started (output: ${worker.output()})`)
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/**
 * For afterEach: kills every `leasehold worker` child, stops every host (its pool drains), kills
 * any local worker still alive, and removes the given temp folders (hosts remove their data dirs).
 * Then fails if any of those processes printed a MaxListenersExceededWarning.
 */
export async function cleanUp(extraDirs: string[] = []): Promise<void> {
  await killChildren()
  // The worker processes' own warnings (printed, never seen by this process's hook in
  // test/setup-warnings.ts): a listener leak there fails the test too.
  const printed = [...[...outputs].map((output) => output()), ...[...hosts].flatMap((host) => host.lines)].join('\n')
  outputs.clear()
  for (const host of [...hosts]) {
    hosts.delete(host)
    const pids = host.pool?.pids() ?? []
    await host.dispose().catch(() => {})
    for (const pid of pids) if (alive(pid)) process.kill(pid, 'SIGKILL')
  }
  for (const dir of extraDirs.splice(0)) rmSync(dir, { recursive: true, force: true })
  const leak = /^.*MaxListenersExceededWarning.*$/m.exec(printed)
  if (leak) throw new Error(`a worker process warned of a listener leak: ${leak[0]}`)
}

/** Kills every `leasehold worker` child still running (resumed first, in case a test stopped it). */
export async function killChildren(): Promise<void> {
  const exits = [...children].map((child) => {
    const exited = new Promise<void>((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once('exit', () => resolve())))
    child.kill('SIGCONT')
    child.kill('SIGKILL')
    return exited
  })
  await Promise.all(exits)
  children.clear()
}

/** Cancels every job of the host not yet ended, so a failed test leaves no work to the next. */
export function cancelUnfinished(host: TestHost): void {
  const open = database(host.engine).prepare("SELECT id FROM jobs WHERE state NOT IN ('DONE', 'FAILED', 'CANCELED', 'TIMEOUT')").all() as { id: string }[]
  for (const { id } of open) host.engine.cancel(id, 'left over by a test')
}

/** A claim as the host grants it, for the tests that script the host: `more` overrides what it says. */
export function aClaimOf(id: string, more: Partial<Claim> = {}): Claim {
  return {
    claimed: true,
    job_id: id,
    attempt_id: `${id}-a`,
    lease_id: `${id}-l`,
    lease_token: `${id}-t`,
    stream: 'default',
    message_id: null,
    job_type: 'noop',
    payload: {},
    max_runtime_s: null,
    lease_ttl_seconds: 1,
    heartbeat_interval_seconds: 0.05, // scripted: beat every ~50 ms
    ...more,
  }
}

// ---------------------------------------------------------------------------------------------
// User handler modules (written into temp folders; never checked in, so a broken one cannot
// break the type check)

/**
 * `test.hold {ms, marker?}`: waits `ms` (or LEASEHOLD_TEST_HOLD_MS from the worker's
 * environment, so one worker can be made slow) while honouring the abort signal. It appends
 * `started <pid> <attempt>` and, if aborted, `aborted <reason> <pid>` to `marker`.
 */
export const HOLD = `
import { appendFileSync } from 'node:fs'
export default {
  type: 'test.hold',
  async run({ payload, signal, job }) {
    const ms = Number(process.env.LEASEHOLD_TEST_HOLD_MS ?? payload.ms)
    const note = (line) => payload.marker && appendFileSync(payload.marker, line + '\\n')
    note('started ' + process.pid + ' ' + job.attempt_id)
    try {
      await new Promise((resolve, reject) => {
        const timer = setTimeout(resolve, ms)
        signal.addEventListener('abort', () => { clearTimeout(timer); reject(signal.reason) }, { once: true })
      })
    } catch (error) {
      note('aborted ' + (signal.reason?.message ?? String(signal.reason)) + ' ' + process.pid + ' ' + signal.reason?.name)
      throw error
    }
    return { pid: process.pid, held_ms: ms }
  },
}
`

/** \`test.spin {ms}\`: blocks its thread with a synchronous busy loop for \`ms\`. */
export const SPIN = `
export default {
  type: 'test.spin',
  run({ payload }) {
    const started = Date.now()
    let turns = 0
    while (Date.now() - started < payload.ms) turns++
    return { spun_ms: Date.now() - started, turns }
  },
}
`

/**
 * `test.hold-write {path, first, second, hold_ms}`: writes \`first\` through the gate (taking the
 * file), keeps the file \`hold_ms\`, then appends \`second\`.
 */
export const HOLD_WRITE = `
export default {
  type: 'test.hold-write',
  async run({ payload, files }) {
    await files.writeFile(payload.path, payload.first)
    await new Promise((resolve) => setTimeout(resolve, payload.hold_ms))
    await files.appendFile(payload.path, payload.second)
    return { wrote: payload.path }
  },
}
`

/** `test.echo`: answers with its payload. */
export const ECHO = `export const type = 'test.echo'
export function run({ payload }) { return { echo: payload, pid: process.pid } }
`

/** A module that throws while it loads. */
export const THROWS_ON_LOAD = `export default { type: 'test.never', run() {} }
throw new Error('this handler is broken on purpose')
`

/** A module that loads but is no handler. */
/** A handler file with a syntax error on its third line. */
export const DOES_NOT_PARSE = `export default {
  type: 'test.typo',
  run(job) { return resize( }
}
`

export const NOT_A_HANDLER = `export const name = 'not a handler'\n`
