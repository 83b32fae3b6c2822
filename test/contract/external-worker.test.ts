/**
 * The example external worker (examples/external-worker.ts: openapi-fetch over the generated
 * types, the worker API) drains a real host and exits: each job type ends as its handler says,
 * and a job that runs longer than its lease lives on its heartbeats.
 */
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { afterAll, expect, test } from 'vitest'
import { startTestHost, type TestHost } from '../helpers/host'

const root = resolve(import.meta.dirname, '../..')
let host: TestHost | undefined
afterAll(async () => {
  await host?.dispose()
})

/** `npx tsx examples/external-worker.ts …`, as docs/api.md runs it (tsx loaded into node directly), with `env` added to the environment. */
function startExample(args: string[], env: Record<string, string> = {}) {
  return spawn(process.execPath, ['--import', 'tsx', 'examples/external-worker.ts', ...args], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } })
}

function runExample(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; output: string }> {
  const child = startExample(args, env)
  let output = ''
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()))
  const timer = setTimeout(() => child.kill('SIGKILL'), 45_000)
  return new Promise((done) =>
    child.once('close', (code) => {
      clearTimeout(timer)
      done({ code, output })
    }),
  )
}

test('the example worker claims, heartbeats and completes every queued job of the types it runs, leaves the others queued for their workers, then exits', async () => {
  // A lease lives 3 s past its last heartbeat (ttl 2 s + grace 1 s); the sleep job runs 4 s.
  host = await startTestHost({ leaseTtlS: 2, heartbeatGraceS: 1 })
  const submitted: Record<string, string> = {}
  for (const [name, job] of Object.entries({
    echo: { job_type: 'echo', payload: { hello: 'world' } },
    sleep: { job_type: 'sleep', payload: { ms: 4000 } },
    unknown: { job_type: 'paint', payload: {} },
  })) {
    const res = await host.call('/api/scheduler/jobs/submit', { method: 'POST', json: { cost_units: 1, ...job } })
    submitted[name] = ((await res.json()) as { job: { job_id: string } }).job.job_id
  }

  const { code, output } = await runExample(['--url', host.url, '--worker-id', 'example-1', '--until-idle'], { LEASEHOLD_TOKEN: host.token })
  expect(code, output).toBe(0)

  const read = async (id: string) => (await (await host!.call(`/api/scheduler/jobs/${id}`)).json()) as { job: { state: string }; result: { result_data: unknown; error: unknown } | null }
  expect(await read(submitted.echo!)).toMatchObject({ job: { state: 'DONE' }, result: { result_data: { hello: 'world' } } })
  expect(await read(submitted.sleep!)).toMatchObject({ job: { state: 'DONE' }, result: { result_data: { slept_ms: 4000 } } })
  // Its claims name its types: a job of another type is never granted to it, to fail there.
  expect(await read(submitted.unknown!)).toMatchObject({ job: { state: 'QUEUED' }, result: null })
  // One attempt each: the sleep job's lease never expired under it.
  const attempts = (await (await host.call(`/api/scheduler/jobs/${submitted.sleep}/attempts`)).json()) as { attempts: { worker_id: string }[] }
  expect(attempts.attempts).toEqual([expect.objectContaining({ worker_id: 'example-1', outcome: 'SUCCEEDED' })])
  expect(output).toMatch(/external-worker: stopped/)
})

test('every run of the example the docs show gives the token in LEASEHOLD_TOKEN, never on the command line that ps shows', () => {
  for (const file of ['docs/api.md', 'examples/external-worker.ts']) {
    const runs = readFileSync(resolve(root, file), 'utf8')
      .split('\n')
      .filter((line) => line.includes('npx tsx examples/external-worker.ts'))
    expect(runs.length, file).toBeGreaterThan(0)
    for (const run of runs) {
      expect(run, file).toMatch(/LEASEHOLD_TOKEN="\$\(cat <data-dir>\/token\)" npx tsx/)
      expect(run, file).not.toContain('--token')
    }
  }
})

test('without a token the example says where to give it and exits 2', async () => {
  const { code, output } = await runExample(['--url', 'http://127.0.0.1:9'], { LEASEHOLD_TOKEN: '' })
  expect(code).toBe(2)
  expect(output).toContain('external-worker: set LEASEHOLD_TOKEN to the token in <data-dir>/token')
})

test.skipIf(process.platform !== 'linux')('a --token given to the example is not left in its /proc/<pid>/cmdline', async () => {
  host ??= await startTestHost()
  const child = startExample(['--url', host.url, '--token', host.token, '--worker-id', 'example-cmdline'])
  try {
    await new Promise<void>((resolve, reject) => {
      let out = ''
      child.stdout!.on('data', (chunk: Buffer) => {
        out += chunk.toString()
        if (out.includes('example-cmdline taking')) resolve()
      })
      child.once('exit', (code) => reject(new Error(`the example exited with ${code}`)))
    })
    const cmdline = readFileSync(`/proc/${child.pid}/cmdline`, 'utf8')
    expect(cmdline).not.toContain(host.token)
    expect(cmdline.replace(/\0+$/, '')).toBe('external-worker')
  } finally {
    child.kill('SIGKILL')
  }
})
