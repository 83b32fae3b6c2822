/**
 * The example external worker (examples/external-worker.ts: openapi-fetch over the generated
 * types, the worker API) drains a real host and exits: each job type ends as its handler says,
 * and a job that runs longer than its lease lives on its heartbeats.
 */
import { spawn } from 'node:child_process'
import { resolve } from 'node:path'
import { afterAll, expect, test } from 'vitest'
import { startTestHost, type TestHost } from '../helpers/host'

const root = resolve(import.meta.dirname, '../..')
let host: TestHost | undefined
afterAll(async () => {
  await host?.dispose()
})

/** `npx tsx examples/external-worker.ts …`, as docs/api.md runs it (tsx loaded into node directly). */
function runExample(args: string[]): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'examples/external-worker.ts', ...args], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] })
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

test('the example worker claims, heartbeats and completes or fails every queued job, then exits', async () => {
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

  const { code, output } = await runExample(['--url', host.url, '--token', host.token, '--worker-id', 'example-1', '--until-idle'])
  expect(code, output).toBe(0)

  const read = async (id: string) => (await (await host!.call(`/api/scheduler/jobs/${id}`)).json()) as { job: { state: string }; result: { result_data: unknown; error: unknown } | null }
  expect(await read(submitted.echo!)).toMatchObject({ job: { state: 'DONE' }, result: { result_data: { hello: 'world' } } })
  expect(await read(submitted.sleep!)).toMatchObject({ job: { state: 'DONE' }, result: { result_data: { slept_ms: 4000 } } })
  expect(await read(submitted.unknown!)).toMatchObject({ job: { state: 'FAILED' }, result: { error: { code: 'unknown_job_type' } } })
  // One attempt each: the sleep job's lease never expired under it.
  const attempts = (await (await host.call(`/api/scheduler/jobs/${submitted.sleep}/attempts`)).json()) as { attempts: { worker_id: string }[] }
  expect(attempts.attempts).toEqual([expect.objectContaining({ worker_id: 'example-1', outcome: 'SUCCEEDED' })])
  expect(output).toMatch(/external-worker: stopped/)
})
