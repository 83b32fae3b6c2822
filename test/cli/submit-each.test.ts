/**
 * `leasehold submit --each`: a script's many jobs, one a line of its input, submitted in
 * requests of submit-batch instead of one command (a Node start and a request) each. The real
 * command (bin/leasehold.js) against an in-process host, found through `--data-dir`.
 */
import type { ChildProcess } from 'node:child_process'
import { rmSync, writeFileSync } from 'node:fs'
import { createServer, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import { startTestHost, tempDir, type TestHost } from '../helpers/host'
import { runCliAsync, startCli as startCliProcess } from '../helpers/process'

/** The runner's own LEASEHOLD_* settings must not pick the host. */
const CLEAN_ENV: NodeJS.ProcessEnv = { LEASEHOLD_URL: undefined, LEASEHOLD_TOKEN: undefined, LEASEHOLD_DATA_DIR: undefined }

let host: TestHost
const dirs: string[] = []
const children: ChildProcess[] = []
const servers: Server[] = []

beforeAll(async () => {
  host = await startTestHost({ workers: 0 })
})
afterAll(async () => {
  await host.dispose()
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})
afterEach(async () => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
  for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve))
})

const lines = (text: string) => text.trim().split('\n').filter(Boolean)

/** Starts `leasehold <args> --data-dir <the host's>` and lets the test act while it runs. */
function startCli(args: string[]) {
  const run = startCliProcess([...args, '--data-dir', host.dataDir], CLEAN_ENV)
  children.push(run.child)
  return run
}

/** A file holding `text` in a temp dir of its own. */
function inputFile(text: string): string {
  const dir = tempDir()
  dirs.push(dir)
  const file = join(dir, 'jobs.ndjson')
  writeFileSync(file, text)
  return file
}

/** Runs `leasehold submit <args>` against `on` (the test's host by default), with `stdin` as its input. */
function submit(args: string[], { on = host, stdin }: { on?: TestHost; stdin?: string } = {}) {
  return runCliAsync(['submit', ...args, '--data-dir', on.dataDir], CLEAN_ENV, (child) => children.push(child), stdin)
}

/** The jobs of `queue` on the test's host. */
const jobsOf = (queue: string) => host.engine.listJobs({ limit: 500 }).jobs.filter((job) => job.queue === queue)

/** The ids of every job of `type` on the test's host. */
function jobsOfType(type: string): string[] {
  const ids: string[] = []
  let cursor: string | undefined
  do {
    const page = host.engine.listJobs({ limit: 500, job_type: type, ...(cursor ? { cursor } : {}) })
    ids.push(...page.jobs.map((job) => job.id))
    cursor = page.next_cursor ?? undefined
  } while (cursor)
  return ids
}

/** Leases the oldest queued job of `type` on `on`, as a test-driven worker would: the report that ends it. */
function take(type: string, on: TestHost = host) {
  const decision = on.engine.claimAndLease({ worker_id: 'each-worker', accept_job_types: [type] })
  if (!decision.granted) throw new Error(`no grant: ${decision.reason}`)
  return { job_id: decision.job.id, attempt_id: decision.lease.attempt_id!, worker_id: 'each-worker', lease_token: decision.lease.token! }
}

async function until(what: string, ready: () => boolean): Promise<void> {
  const deadline = Date.now() + 20_000
  while (!ready()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

describe('leasehold submit --each', () => {
  test("one job per line, the other flags given to each; their ids printed in the input's order", async () => {
    const file = inputFile('{"n": 1}\n\n{"n": 2}\r\n[3]\n"four"\n')
    const result = await submit(['--type', 'thumb', '--priority', 'high', '--units', '2', '--queue', 'each-order', '--each', file])
    expect(result.stderr).toBe('')
    expect(result.status).toBe(0)
    const ids = lines(result.stdout)
    expect(ids).toHaveLength(4)
    expect(ids.map((id) => host.engine.getJob(id).payload)).toEqual([{ n: 1 }, { n: 2 }, [3], 'four'])
    for (const id of ids) expect(host.engine.getJob(id)).toMatchObject({ job_type: 'thumb', priority: 'HIGH', cost_units: 2, queue: 'each-order', state: 'QUEUED' })
  })

  test('--each - reads stdin; --json prints each job created as one line of JSON', async () => {
    const result = await submit(['--type', 'piped', '--queue', 'each-stdin', '--json', '--each', '-'], { stdin: '{"file": "a.png"}\n{"file": "b.png"}\n' })
    expect(result.status).toBe(0)
    const jobs = lines(result.stdout).map((line) => JSON.parse(line) as { job_id: string; payload: unknown; job_type: string })
    expect(jobs.map((job) => job.payload)).toEqual([{ file: 'a.png' }, { file: 'b.png' }])
    expect(jobs.map((job) => host.engine.getJob(job.job_id).job_type)).toEqual(['piped', 'piped'])
  })

  test('more jobs than one request holds go in several requests, every job once and in order', async () => {
    const count = 2_345
    const file = inputFile(Array.from({ length: count }, (_, i) => JSON.stringify({ i })).join('\n'))
    const result = await submit(['--type', 'many', '--queue', 'each-many', '--each', file])
    expect(result.status).toBe(0)
    const ids = lines(result.stdout)
    expect(ids).toHaveLength(count)
    expect(new Set(ids).size).toBe(count)
    ids.forEach((id, i) => expect(host.engine.getJob(id).payload).toEqual({ i }))
  })

  test('a line that is not JSON submits nothing: one line naming it, exit 2', async () => {
    const file = inputFile('{"ok": 1}\n{"ok": 2}\n{not json\n')
    const result = await submit(['--type', 'broken', '--queue', 'each-broken', '--each', file])
    expect(result.status).toBe(2)
    expect(lines(result.stderr)).toEqual([expect.stringContaining(`--each ${file} line 3 is not valid JSON`)])
    expect(result.stdout).toBe('')
    expect(jobsOf('each-broken')).toEqual([])
  })

  test.each([
    [['--payload', '{}'], '--each and --payload'],
    [['--key', 'k-1'], '--each and --key'],
  ])('--each with %j is one line and exit 2, and submits nothing', async (args, text) => {
    const file = inputFile('{}\n')
    const result = await submit(['--type', 'conflict', '--queue', 'each-conflict', ...args, '--each', file])
    expect(result.status).toBe(2)
    expect(lines(result.stderr)).toEqual([expect.stringContaining(text)])
    expect(jobsOf('each-conflict')).toEqual([])
  })

  test('an input that cannot be read is one line and exit 2', async () => {
    const result = await submit(['--type', 't', '--each', '/no/such/jobs.ndjson'])
    expect(result.status).toBe(2)
    expect(lines(result.stderr)).toEqual([expect.stringContaining('--each /no/such/jobs.ndjson: cannot read /no/such/jobs.ndjson (ENOENT)')])
  })

  test("a refusal of a value a flag gave is every job's: one line naming the flag, exit 2, and nothing submitted", async () => {
    const file = inputFile('{}\n'.repeat(2000))
    const units = await submit(['--type', 'too-big', '--units', '500', '--queue', 'each-refused', '--each', file])
    expect(units.status).toBe(2)
    expect(lines(units.stderr)).toEqual([expect.stringMatching(/^leasehold: --units: 500 exceeds the total capacity.*\(cost_exceeds_capacity\)$/)])
    expect(units.stdout).toBe('')
    expect(jobsOf('each-refused')).toEqual([])
    const long = 'a'.repeat(300)
    for (const [flag, args] of [['--addon', ['--addon', long, '--queue', 'each-refused']], ['--queue', ['--queue', long]]] as const) {
      const result = await submit(['--type', 'too-long', ...args, '--each', file])
      expect(result.status).toBe(2)
      expect(lines(result.stderr)).toEqual([`leasehold: ${flag}: Too big: expected string to have <=200 characters (invalid_request)`])
      expect(result.stdout).toBe('')
    }
    expect(host.engine.listJobs({ limit: 500 }).jobs.filter((job) => job.job_type === 'too-long')).toEqual([])
  })
})

describe('leasehold submit --each against a host with a small body limit', () => {
  let small: TestHost
  beforeAll(async () => {
    small = await startTestHost({ workers: 0, bodyLimitBytes: 4096 })
  })
  afterAll(async () => {
    await small.dispose()
  })

  test('requests too large for the host go again in halves; a job too large alone is refused by its line, the others submitted', async () => {
    const pad = 'x'.repeat(300)
    const input = Array.from({ length: 30 }, (_, i) => JSON.stringify(i === 10 ? { i, pad: 'y'.repeat(5000) } : { i, pad }))
    const result = await submit(['--type', 'padded', '--each', inputFile(input.join('\n'))], { on: small })
    expect(result.status).toBe(1)
    expect(lines(result.stderr)).toEqual([expect.stringMatching(/^leasehold: line 11: .*\(payload_too_large\)$/)])
    const ids = lines(result.stdout)
    expect(ids.map((id) => (small.engine.getJob(id).payload as { i: number }).i)).toEqual([...Array(30).keys()].filter((i) => i !== 10))
  })

  test('with --wait, a line the host refuses is its line on stderr; the jobs submitted are waited for all the same, and the exit is 1', async () => {
    const input = [{ n: 1 }, { n: 2, pad: 'y'.repeat(5000) }, { n: 3 }].map((line) => JSON.stringify(line)).join('\n')
    const running = submit(['--type', 'each-wait-small', '--wait', '--each', inputFile(input)], { on: small })
    await until('the two jobs', () => small.engine.listJobs({ limit: 10 }).jobs.filter((job) => job.job_type === 'each-wait-small').length === 2)
    small.engine.complete({ ...take('each-wait-small', small), result: null })
    small.engine.complete({ ...take('each-wait-small', small), result: null })
    const result = await running
    expect(result.status).toBe(1)
    expect(lines(result.stdout)).toHaveLength(2)
    const said = lines(result.stderr)
    expect(said[0]).toMatch(/^leasehold: line 2: .*\(payload_too_large\)$/)
    expect(said.at(-1)).toBe('2 of 2 jobs ended (2 DONE)')
  })
})

describe('leasehold submit --each when a request fails after others went', () => {
  test('the line says from which input line on the jobs were not submitted; those before are printed, exit 1', async () => {
    let requests = 0
    const fake = createServer((req, res) => {
      req.resume()
      req.on('end', () => {
        requests += 1
        res.setHeader('content-type', 'application/json')
        if (requests === 1) res.end(JSON.stringify({ results: [{ ok: true, job_id: 'first-job', state: 'QUEUED' }] }))
        else res.writeHead(503).end(JSON.stringify({ detail: 'The host is stopping', code: 'shutting_down' }))
      })
    })
    servers.push(fake)
    await new Promise<void>((resolve) => fake.listen(0, '127.0.0.1', resolve))
    const url = `http://127.0.0.1:${(fake.address() as AddressInfo).port}`
    // Two lines of 200 KB each: too much for one request.
    const big = JSON.stringify({ blob: 'z'.repeat(200_000) })
    const result = await runCliAsync(['submit', '--type', 't', '--url', url, '--token', 'x', '--each', inputFile(`${big}\n${big}\n`)], CLEAN_ENV, (child) => children.push(child))
    expect(requests).toBe(2)
    expect(result.status).toBe(1)
    expect(result.stdout).toBe('first-job\n')
    expect(lines(result.stderr)).toEqual(['leasehold: The host is stopping (shutting_down); the jobs from line 2 on were not submitted'])
  })
})

describe('leasehold submit --each stopped by a signal', () => {
  test.each([
    ['', [], 'interrupted'],
    [' (with --wait --json, which prints no id as it submits: every id then)', ['--wait', '--json'], 'interrupted-json'],
  ])('SIGINT with a request in flight waits for its answer and prints its ids: every job stored is printed, a line says from where none was; exit 130%s', async (_what, flags, type) => {
    const run = startCli(['submit', '--type', type, ...flags, '--queue', 'each-interrupted', '--each', inputFile('{}\n'.repeat(20_000))])
    // The first request's ids are written just as the next request goes: the signal finds it in
    // flight. (--wait --json writes none: the signal goes once the first jobs are stored.)
    if (flags.length === 0) run.child.stdout!.once('data', () => run.child.kill('SIGINT'))
    else await run.until('the first jobs', () => host.engine.listJobs({ limit: 1, job_type: type }).jobs.length > 0).then(() => run.child.kill('SIGINT'))
    expect(await run.exited).toBe(130)
    const printed = lines(run.stdout())
    expect(printed.length).toBeLessThan(20_000)
    expect(new Set(jobsOfType(type))).toEqual(new Set(printed))
    expect(lines(run.stderr())).toEqual([
      expect.stringMatching(/^leasehold: SIGINT: waiting up to 10 s for the host's answer about the jobs of lines \d+ to \d+, to print those submitted \(SIGINT again stops at once\)$/),
      `leasehold: stopped by SIGINT; the jobs from line ${printed.length + 1} on were not submitted`,
    ])
  })
})

describe('leasehold submit --each --wait', () => {
  test('exit 1 once every job has ended, with one line per job that is not DONE naming its input line and why, in the input\'s order', async () => {
    const running = submit(['--type', 'each-wait', '--queue', 'each-wait', '--wait', '--each', inputFile('{"n": 1}\n{"n": 2}\n\n{"n": 3}\n{"n": 4}\n')])
    await until('the four jobs', () => jobsOf('each-wait').length === 4)
    const [first, second, third] = [take('each-wait'), take('each-wait'), take('each-wait')]
    host.engine.fail({ ...second, error: { code: 'E_DISK', message: 'disk on fire', retryable: false } })
    host.engine.complete({ ...first, result: null })
    host.engine.complete({ ...third, result: null })
    const fourth = jobsOf('each-wait').find((job) => job.state === 'QUEUED')!
    host.engine.cancel(fourth.id, 'not needed')
    const result = await running
    expect(result.status).toBe(1)
    expect(lines(result.stdout)).toEqual([first.job_id, second.job_id, third.job_id, fourth.id])
    const said = lines(result.stderr)
    expect(said.at(-3)).toBe('4 of 4 jobs ended (2 DONE, 1 FAILED, 1 CANCELED)')
    expect(said.slice(-2)).toEqual([`leasehold: line 2: job ${second.job_id} FAILED: disk on fire (E_DISK)`, `leasehold: line 5: job ${fourth.id} CANCELED: canceled: not needed`])
  })

  test("--json prints each job's end as {job, result, line}, one line a job in the input's order, once all have ended; nothing as they are submitted", async () => {
    const running = submit(['--type', 'each-json', '--queue', 'each-json', '--wait', '--json', '--each', inputFile('{"n": 1}\n{"n": 2}\n{"n": 3}\n')])
    let stdout = ''
    children.at(-1)!.stdout!.on('data', (chunk: Buffer) => void (stdout += chunk.toString()))
    await until('the three jobs', () => jobsOf('each-json').length === 3)
    const [first, second, third] = [take('each-json'), take('each-json'), take('each-json')]
    // Ended out of the input's order: the lines still follow it.
    host.engine.complete({ ...third, result: { n: 3 } })
    host.engine.fail({ ...second, error: { code: 'E_DISK', message: 'disk on fire', retryable: false } })
    await until('the two ends', () => [second, third].every(({ job_id }) => ['DONE', 'FAILED'].includes(host.engine.getJob(job_id).state)))
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(stdout).toBe('')
    host.engine.complete({ ...first, result: { n: 1 } })
    const result = await running
    expect(result.status).toBe(1)
    const ends = lines(result.stdout).map((text) => JSON.parse(text) as { job: { job_id: string; state: string }; result: { result_data?: unknown; error?: unknown } | null; line: number })
    expect(ends.map((end) => [end.line, end.job.job_id, end.job.state])).toEqual([
      [1, first.job_id, 'DONE'],
      [2, second.job_id, 'FAILED'],
      [3, third.job_id, 'DONE'],
    ])
    expect(ends[0]!.result?.result_data).toEqual({ n: 1 })
    expect(ends[1]!.result?.error).toMatchObject({ code: 'E_DISK' })
    expect(lines(result.stderr).at(-1)).toBe(`leasehold: line 2: job ${second.job_id} FAILED: disk on fire (E_DISK)`)
  })

  test('--wait-timeout: the jobs not ended by then are each said on their line as they stand, and left so; exit 124', async () => {
    const running = submit(['--type', 'each-late', '--queue', 'each-late', '--wait', '--wait-timeout', '3s', '--each', inputFile('{"n": 1}\n{"n": 2}\n{"n": 3}\n')])
    await until('the three jobs', () => jobsOf('each-late').length === 3)
    const [first, second] = [take('each-late'), take('each-late')]
    host.engine.complete({ ...first, result: null })
    host.engine.fail({ ...second, error: { code: 'E_DISK', message: 'disk on fire', retryable: false } })
    const third = jobsOf('each-late').find((job) => job.state === 'QUEUED')!
    const result = await running
    expect(result.status).toBe(124)
    expect(lines(result.stderr).slice(-4)).toEqual([
      '2 of 3 jobs ended (1 DONE, 1 FAILED)',
      `leasehold: line 2: job ${second.job_id} FAILED: disk on fire (E_DISK)`,
      expect.stringMatching(new RegExp(`^leasehold: line 3: job ${third.id} still QUEUED after 3s — waiting: `)),
      'leasehold: 1 job had not ended after 3s (--wait-timeout); left as it is',
    ])
    expect(host.engine.getJob(third.id).state).toBe('QUEUED')
  })
})

describe('leasehold submit --each --wait stopped by a signal while it waits', () => {
  test.each([
    ['SIGINT', 130, []],
    ['SIGTERM', 143, ['--json']],
  ] as const)('%s: the jobs not ended are each said on their line as they stand (and with --json printed), as --wait-timeout says them; exit %i, the jobs left so', async (signal, exit, flags) => {
    const type = `each-stopped-${signal}`
    const run = startCli(['submit', '--type', type, '--queue', type, '--wait', ...flags, '--each', inputFile('{"n": 1}\n{"n": 2}\n')])
    await run.until('the wait', () => run.stderr().includes('0 of 2 jobs ended'))
    const [first] = [take(type)]
    host.engine.complete({ ...first, result: null })
    await run.until('the first job\'s end', () => run.stderr().includes('1 of 2 jobs ended'))
    const second = jobsOf(type).find((job) => job.state === 'QUEUED')!
    run.child.kill(signal)
    expect(await run.exited, run.stderr()).toBe(exit)
    const stdout = run.stdout()
    expect(lines(run.stderr()).slice(-2)).toEqual([
      expect.stringMatching(new RegExp(`^leasehold: line 2: job ${second.id} still QUEUED when ${signal} stopped the wait — waiting: `)),
      `leasehold: 1 job had not ended when ${signal} stopped the wait; left as it is`,
    ])
    if (flags.length === 0) expect(lines(stdout)).toEqual([first.job_id, second.id])
    else expect(lines(stdout).map((line) => JSON.parse(line) as { job: { job_id: string; state: string }; line: number })).toEqual([
      expect.objectContaining({ job: expect.objectContaining({ job_id: first.job_id, state: 'DONE' }), line: 1 }),
      expect.objectContaining({ job: expect.objectContaining({ job_id: second.id, state: 'QUEUED' }), line: 2 }),
    ])
    expect(host.engine.getJob(second.id).state).toBe('QUEUED')
    host.engine.cancel(second.id)
  })
})

describe('leasehold submit --each --wait against a host with a local worker', () => {
  let pooled: TestHost
  beforeAll(async () => {
    pooled = await startTestHost({ workers: 1 })
  })
  afterAll(async () => {
    await pooled.dispose()
  })

  test('follows every job a worker runs to its end: exit 0 once all 300 are DONE', async () => {
    const input = Array.from({ length: 300 }, (_, i) => JSON.stringify({ i })).join('\n')
    const result = await submit(['--type', 'noop', '--wait', '--each', inputFile(input)], { on: pooled })
    expect(result.status).toBe(0)
    const ids = lines(result.stdout)
    expect(ids).toHaveLength(300)
    expect(lines(result.stderr).at(-1)).toBe('300 of 300 jobs ended (300 DONE)')
    expect(ids.every((id) => pooled.engine.getJob(id).state === 'DONE')).toBe(true)
  })
})

describe('leasehold submit --each --wait and the event stream', () => {
  /**
   * A host of the API's shape for --each --wait: an event stream, a submit-batch that names its
   * jobs `job-1`, `job-2`, … and calls `beforeAnswer` with the stream first, and reads of jobs
   * that find each DONE (counted).
   */
  async function fakeHost(
    beforeAnswer: (stream: ServerResponse, ids: string[]) => Promise<void>,
    afterAnswer: (stream: ServerResponse) => void = () => {},
    afterMs = 100,
  ) {
    let stream: ServerResponse | null = null
    let reads = 0
    const fake = createServer((req, res) => {
      if (req.url!.startsWith('/api/events/stream')) {
        stream = res.writeHead(200, { 'content-type': 'text/event-stream' })
        res.write('retry: 2000\n\n')
        return
      }
      const chunks: Buffer[] = []
      req.on('data', (chunk: Buffer) => chunks.push(chunk))
      req.on('end', async () => {
        res.setHeader('content-type', 'application/json')
        if (req.url === '/api/scheduler/jobs/submit-batch') {
          const { jobs } = JSON.parse(Buffer.concat(chunks).toString()) as { jobs: unknown[] }
          const ids = jobs.map((_, i) => `job-${i + 1}`)
          await beforeAnswer(stream!, ids)
          res.end(JSON.stringify({ results: ids.map((job_id) => ({ ok: true, job_id, state: 'QUEUED' })) }))
          setTimeout(() => afterAnswer(stream!), afterMs)
          return
        }
        reads += 1
        res.end(JSON.stringify({ job: { job_id: req.url!.split('/').at(-1), state: 'DONE' }, result: null }))
      })
    })
    servers.push(fake)
    await new Promise<void>((resolve) => fake.listen(0, '127.0.0.1', resolve))
    const url = `http://127.0.0.1:${(fake.address() as AddressInfo).port}`
    const run = () => runCliAsync(['submit', '--type', 't', '--url', url, '--token', 'x', '--wait', '--each', inputFile('{}\n{}\n')], CLEAN_ENV, (child) => children.push(child))
    return { run, reads: () => reads, close: () => stream?.end() }
  }

  const jobEvent = (type: string, state: string, id: string, n: number) =>
    `id: ${n}\nevent: ${type}\ndata: ${JSON.stringify({ id: n, type, entity_type: 'JOB', entity_id: id, job_id: id, data: { state } })}\n\n`
  const doneEvent = (id: string, n: number) => jobEvent('JOB_DONE', 'DONE', id, n)

  test('a job whose end the stream tells before its submit is answered counts as ended', async () => {
    const host = await fakeHost(async (stream, ids) => {
      stream.write(ids.map((id, i) => doneEvent(id, i + 1)).join(''))
      await new Promise((resolve) => setTimeout(resolve, 100))
    })
    const result = await host.run()
    host.close()
    expect(result.status).toBe(0)
    expect(lines(result.stderr).at(-1)).toBe('2 of 2 jobs ended (2 DONE)')
    expect(host.reads()).toBe(0)
  })

  test('after a gap in the stream the jobs not ended are read one by one', async () => {
    const host = await fakeHost(
      async () => {},
      (stream) => stream.write(`event: gap\ndata: ${JSON.stringify({ missed_from: 1, missed_to: 9 })}\n\n`),
    )
    const result = await host.run()
    host.close()
    expect(result.status).toBe(0)
    expect(lines(result.stderr).at(-1)).toBe('2 of 2 jobs ended (2 DONE)')
    expect(host.reads()).toBe(2)
  })

  test('a BLOCKED job is counted on the line as waiting for an operator, and waited for', async () => {
    // Not on a terminal, the line is drawn again at most every 5 s: the blocked job ends after that.
    const host = await fakeHost(
      async (stream, ids) => void stream.write(jobEvent('JOB_BLOCKED', 'BLOCKED', ids[0]!, 1) + doneEvent(ids[1]!, 2)),
      (stream) => stream.write(jobEvent('JOB_REQUEUED', 'QUEUED', 'job-1', 3) + doneEvent('job-1', 4)),
      6_000,
    )
    const result = await host.run()
    host.close()
    expect(result.status).toBe(0)
    expect(lines(result.stderr)).toContain('1 of 2 jobs ended (1 DONE); 1 BLOCKED, waiting for an operator')
    expect(lines(result.stderr).at(-1)).toBe('2 of 2 jobs ended (2 DONE)')
  }, 15_000)
})
