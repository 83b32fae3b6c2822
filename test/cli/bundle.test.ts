/**
 * The command's bundle (scripts/cli-bundle.js) runs the host as the sources do: built from this
 * checkout into a project laid out as the real one, it finds the migrations, the dashboard and
 * the worker process it starts by their places beside it, not beside the sources.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { buildCliBundle, freshCliBundle, PROJECT_ROOT } from '../../scripts/cli-bundle.js'
import { until } from '../helpers/until'

const PAGE = '<!doctype html><title>the dashboard beside the bundle</title>\n'

let root: string
let child: ChildProcess
let url: string
let token: string

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'leasehold-bundle-host-'))
  writeFileSync(join(root, 'package.json'), '{ "type": "module" }\n')
  symlinkSync(join(PROJECT_ROOT, 'node_modules'), join(root, 'node_modules'))
  cpSync(join(PROJECT_ROOT, 'drizzle'), join(root, 'drizzle'), { recursive: true })
  mkdirSync(join(root, 'out', 'renderer'), { recursive: true })
  writeFileSync(join(root, 'out', 'renderer', 'index.html'), PAGE)
  const outDir = join(root, 'out', 'cli')
  await buildCliBundle({ outDir })
  const entry = freshCliBundle(outDir)
  expect(entry).toBe(join(outDir, 'leasehold.js'))

  const dataDir = join(root, 'data')
  const run = `const { main } = await import(${JSON.stringify(pathToFileURL(entry!).href)}); process.exitCode = await main(process.argv.slice(1))`
  child = spawn(process.execPath, ['--input-type=module', '-e', run, 'serve', '--data-dir', dataDir, '--port', '0', '--workers', '1', '--busy', '0'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stderr = ''
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  url = await new Promise<string>((resolve, reject) => {
    let stdout = ''
    child.stdout!.on('data', (chunk: Buffer) => {
      stdout += chunk.toString()
      const match = /leasehold listening on (http:\/\/\S+)/.exec(stdout)
      if (match) resolve(match[1]!)
    })
    child.once('exit', (code) => reject(new Error(`the bundled host exited with ${code}: ${stderr}`)))
  })
  token = readFileSync(join(dataDir, 'token'), 'utf8').trim()
})

afterAll(async () => {
  if (child && child.exitCode === null) {
    const exited = new Promise((resolve) => child.once('exit', resolve))
    child.kill('SIGTERM')
    await exited
  }
  rmSync(root, { recursive: true, force: true })
})

const api = (path: string, init: RequestInit = {}) =>
  fetch(`${url}${path}`, { ...init, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...init.headers } })

describe('the host run from the command bundle', () => {
  test('serves the dashboard built beside the bundle (out/renderer)', async () => {
    const page = await fetch(`${url}/`)
    expect(page.status).toBe(200)
    expect(await page.text()).toBe(PAGE)
  })

  test('migrated its database from drizzle/ and runs a job in the local worker it started from the bundle', async () => {
    const submitted = await api('/api/scheduler/jobs/submit', { method: 'POST', body: JSON.stringify({ job_type: 'noop', cost_units: 1 }) })
    expect(submitted.status).toBe(201)
    const { job } = (await submitted.json()) as { job: { job_id: string } }
    let state = ''
    await until(async () => {
      state = ((await (await api(`/api/scheduler/jobs/${job.job_id}`)).json()) as { job: { state: string } }).job.state
      return state === 'DONE'
    }, 30_000, 'the job DONE').catch(() => {}) // the expect below names the state it stayed in
    expect(state).toBe('DONE')
  })
})

/**
 * The modules a bundle file loads as it starts, packages and Node's own (`node:…`): its static
 * imports and theirs, through the bundle's chunks (an `import()` inside a function loads only
 * when it runs).
 */
function modulesLoadedBy(dir: string, file: string, seen = new Set<string>()): Set<string> {
  const modules = new Set<string>()
  if (seen.has(file)) return modules
  seen.add(file)
  for (const [, from] of readFileSync(join(dir, file), 'utf8').matchAll(/^import\s[^;]*?["']([^"']+)["']/gm)) {
    if (from!.startsWith('./')) for (const name of modulesLoadedBy(dir, from!.slice(2), seen)) modules.add(name)
    else modules.add(from!)
  }
  return modules
}

describe("the command bundle's start", () => {
  test("a client command loads the package of its HTTP client only as it starts: not the host (Koa, SQLite, drizzle), nor zod, nor the event stream's client (for --wait only); SQLite is imported only to ask whether the data dir's host holds its lock", () => {
    const packages = [...modulesLoadedBy(join(root, 'out', 'cli'), 'leasehold.js')].filter((name) => !name.startsWith('node:'))
    expect(packages.sort()).toEqual(['openapi-fetch'])
  })

  test('a client command loads no zod either from the chunks the bundle compiled it into (it takes ~120 ms to load)', () => {
    const files = new Set<string>()
    modulesLoadedBy(join(root, 'out', 'cli'), 'leasehold.js', files)
    for (const file of files) expect(readFileSync(join(root, 'out', 'cli', file), 'utf8'), file).not.toContain('$ZodError')
  })

  test("a worker's handler threads open none of zod's ~130 locales: zod is compiled into the bundle with its English messages only", () => {
    const dir = join(root, 'out', 'cli')
    for (const entry of ['handler-thread.js', 'worker.js', 'leasehold-worker.js', 'leasehold.js']) {
      expect([...modulesLoadedBy(dir, entry)].filter((name) => name.startsWith('zod')), entry).toEqual([])
    }
    const bundle = readdirSync(dir).filter((file) => file.endsWith('.js')).map((file) => readFileSync(join(dir, file), 'utf8')).join('\n')
    expect(bundle).toContain('Invalid input') // en
    expect(bundle).not.toContain('Ungültige Eingabe') // de, one of the others
  })

  test('a client command does not load node:crypto: its load is a few ms of the start, and the check that the bundle is fresh hashes nothing while no file changed', () => {
    expect([...modulesLoadedBy(join(root, 'out', 'cli'), 'leasehold.js')]).not.toContain('node:crypto')
    expect([...modulesLoadedBy(join(root, 'out', 'cli'), 'leasehold.js')]).toContain('node:http') // the reading sees Node's modules
  })

  test("a client command's requests never touch fetch, --wait's event stream included (undici would add ~0.1 s to its start)", async () => {
    // fetch and its classes throw here: a command that used them would fail.
    const noFetch = `for (const name of ['fetch', 'Request', 'Response', 'Headers']) Object.defineProperty(globalThis, name, { get() { throw new Error(name + ' was used') } })`
    const entry = join(root, 'out', 'cli', 'leasehold.js')
    const run = (args: string[]) =>
      new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
        const command = `${noFetch}; const { main } = await import(${JSON.stringify(pathToFileURL(entry).href)}); process.exitCode = await main(process.argv.slice(1))`
        const cli = spawn(process.execPath, ['--input-type=module', '-e', command, ...args, '--url', url, '--token', token], { stdio: ['ignore', 'pipe', 'pipe'] })
        let stdout = ''
        let stderr = ''
        cli.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()))
        cli.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
        cli.once('exit', (code) => resolve({ code, stdout, stderr }))
      })
    const submitted = await run(['submit', '--type', 'noop'])
    expect(submitted.stderr).toBe('')
    expect(submitted.code).toBe(0)
    const listed = await run(['jobs', '--json'])
    expect(listed.code).toBe(0)
    expect((JSON.parse(listed.stdout) as { jobs: { job_id: string }[] }).jobs.map((job) => job.job_id)).toContain(submitted.stdout.trim())
    const status = await run(['status'])
    expect(status.stderr).toBe('')
    expect(status.code).toBe(0)
    // --wait follows the job on the event stream, which is read over node:http too.
    const waited = await run(['submit', '--type', 'noop', '--wait'])
    expect(waited.code).toBe(0)
    expect(waited.stderr).toMatch(/DONE/)
  })
})
