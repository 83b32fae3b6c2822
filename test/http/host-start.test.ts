/**
 * A host starts whole or not at all, and alone on its data dir: a start that fails after it
 * listened closes everything and rejects; a second host on a held data dir refuses, naming
 * the first, and leaves the first's host.json alone.
 */
import BetterSqlite3 from 'better-sqlite3'
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process'
import { chownSync, closeSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { HostStartError } from '../../src-main/data-dir/lock'
import { startHost } from '../../src-main/host'
import { createScopedToken } from '../../src-main/data-dir/worker-tokens'
import { startTestHost, testConfig, type TestHost } from '../helpers/host'
import { BIN, runCli } from '../helpers/process'
import { refuseWrites } from '../helpers/storage-faults'

/** The user and group another user's host runs as, in the tests that need one. */
const NOBODY = 65534

const hosts: TestHost[] = []
const children: ChildProcess[] = []
afterEach(async () => {
  for (const host of hosts.splice(0)) await host.dispose()
  for (const child of children.splice(0)) child.kill()
})

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })
}

/** The one-line refusal of a start on `dataDir`, which must refuse as a HostStartError. */
async function refusalOfStart(dataDir: string): Promise<string> {
  const refusal = await startHost(testConfig({ dataDir }), { log: () => {} }).then(
    () => null,
    (error: unknown) => error,
  )
  expect(refusal).toBeInstanceOf(HostStartError)
  return (refusal as HostStartError).message
}

describe('a second host on one data dir', () => {
  test('refuses with one line naming the first one\'s pid and address, and leaves its host.json alone', async () => {
    const first = await startTestHost()
    hosts.push(first)
    const hostFile = join(first.dataDir, 'host.json')
    const before = readFileSync(hostFile, 'utf8')

    const message = await refusalOfStart(first.dataDir)
    expect(message).toContain(`pid ${process.pid}`)
    expect(message).toContain(first.url)
    expect(message).toContain(first.dataDir)
    expect(message.split('\n')).toHaveLength(1)

    expect(readFileSync(hostFile, 'utf8')).toBe(before)
    expect((await first.call('/api/capacity')).status).toBe(200)
  })

  test('may start once the first has stopped', async () => {
    const first = await startTestHost()
    await first.stop()
    const second = await startTestHost({ dataDir: first.dataDir })
    hosts.push(second)
    expect((await second.call('/api/capacity')).status).toBe(200)
  })
})

/**
 * A host of an older release, as a start sees one: a process that holds the database open (as
 * those releases did, through SQLite's default VFS), named by a host.json, and no lock taken on
 * host.lock. `holdsDatabase: false` is a process that merely took the pid of a host that died.
 */
async function olderHost(dataDir: string, { holdsDatabase }: { holdsDatabase: boolean }): Promise<{ pid: number; url: string }> {
  const script = holdsDatabase
    ? `const db = new (require('better-sqlite3'))(${JSON.stringify(join(dataDir, 'leasehold.db'))}); db.prepare('SELECT COUNT(*) FROM jobs').get(); console.log('ready'); setInterval(() => {}, 1e6)`
    : `console.log('ready'); setInterval(() => {}, 1e6)`
  const child = spawn(process.execPath, ['-e', script], { cwd: process.cwd(), stdio: ['ignore', 'pipe', 'inherit'] })
  children.push(child)
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => chunk.toString().includes('ready') && resolve())
    child.once('exit', (code) => reject(new Error(`the older host's process ended (${code})`)))
  })
  const url = 'http://127.0.0.1:7521'
  writeFileSync(join(dataDir, 'host.json'), `${JSON.stringify({ url, pid: child.pid })}\n`)
  return { pid: child.pid!, url }
}

describe('a host of an older release, which takes no host.lock, on the data dir', () => {
  test('a start finds the database held, refuses with one line naming that host as it names one that holds the lock, and leaves its host.json alone', async () => {
    const first = await startTestHost()
    await first.stop()
    const older = await olderHost(first.dataDir, { holdsDatabase: true })
    const hostFile = join(first.dataDir, 'host.json')
    const before = readFileSync(hostFile, 'utf8')

    expect(await refusalOfStart(first.dataDir)).toBe(
      `another Leasehold host (pid ${older.pid}, ${older.url}) runs on the data dir ${first.dataDir}; stop it first, or give this one another --data-dir`,
    )
    expect(readFileSync(hostFile, 'utf8')).toBe(before)
    // Client commands take no host.json whose host holds no lock (its pid may be any process's
    // now): they reach such a host by --url only.
    expect(runCli(['status', '--data-dir', first.dataDir]).stderr).toMatch(/no host is running/)
    await first.dispose()
  })

  test('a host.json naming a live process that does not hold the database (a dead host\'s pid, taken since) is replaced by the start\'s own', async () => {
    const first = await startTestHost()
    await first.stop()
    await olderHost(first.dataDir, { holdsDatabase: false })
    const host = await startTestHost({ dataDir: first.dataDir })
    hosts.push(host)
    expect(JSON.parse(readFileSync(join(first.dataDir, 'host.json'), 'utf8'))).toEqual({ url: host.url, pid: process.pid })
  })
})

describe('a start that fails after listening', () => {
  test('closes the server and the database, unlocks the data dir and rejects: nothing is accepted', async () => {
    const port = await freePort()
    const config = testConfig({ port, workers: 1 })
    const failing = startHost(config, {
      log: () => {},
      spawn: () => {
        throw new Error('no worker for you')
      },
    })
    await expect(failing).rejects.toThrow('no worker for you')
    await expect(fetch(`http://127.0.0.1:${port}/api/health`)).rejects.toThrow()
    expect(() => readFileSync(join(config.dataDir, 'host.json'))).toThrow(/ENOENT/)

    // The database was closed and the data dir unlocked: the next host starts, and nothing
    // the failed one might have taken is there.
    const next = await startTestHost({ dataDir: config.dataDir })
    hosts.push(next)
    expect(next.engine.listJobs({ limit: 10 }).jobs).toEqual([])
  })
})

describe('host.json', () => {
  test('names the loopback address when the host listens on every interface, so that commands on this machine pass its Host check', async () => {
    const host = await startTestHost({ host: '0.0.0.0' })
    hosts.push(host)
    const { url } = JSON.parse(readFileSync(join(host.dataDir, 'host.json'), 'utf8')) as { url: string }
    expect(url).toBe(`http://127.0.0.1:${new URL(host.url).port}`)
    expect((await fetch(`${url}/api/capacity`, { headers: { authorization: `Bearer ${host.token}` } })).status).toBe(200)
  })
})

describe('a start on a damaged file', () => {
  test('says the file is damaged or its disk failing, names `leasehold check` for which, and asks for a copy first', async () => {
    const first = await startTestHost()
    const jobs = Array.from({ length: 300 }, () => ({ job_type: 'noop', cost_units: 1, payload: { text: 'x'.repeat(200) } }))
    expect((await first.call('/api/scheduler/jobs/submit-batch', { method: 'POST', json: { jobs } })).status).toBe(200)
    await first.stop()
    // Garbage over the jobs table's pages after its first: the schema and the start's first
    // reads are sound, the queued jobs the start reads into memory are not.
    const path = join(first.dataDir, 'leasehold.db')
    const db = new BetterSqlite3(path, { readonly: true })
    const pages = db.prepare("SELECT pageno FROM dbstat WHERE name = 'jobs' ORDER BY pageno").pluck().all() as number[]
    const pageSize = db.pragma('page_size', { simple: true }) as number
    db.close()
    expect(pages.length).toBeGreaterThan(3)
    const file = openSync(path, 'r+')
    for (const page of pages.slice(1)) writeSync(file, Buffer.alloc(pageSize, 0x5a), 0, pageSize, (page - 1) * pageSize)
    closeSync(file)

    const message = await refusalOfStart(first.dataDir)
    expect(message).toMatch(/the file is damaged or its disk is failing/)
    expect(message).toContain(`leasehold check --data-dir ${first.dataDir}`)
    expect(message).toMatch(/keep a copy of the file with its -wal/)
    await first.dispose()
  })
})

describe('a start on a data dir where a file of its own is a directory', () => {
  test.each([
    ['token', 'cannot read the token file {path} (it is a directory, not a regular file): remove it to have one made, or give --token'],
    ['host.lock', "{path} is a directory, not the data dir's lock file: remove it"],
  ])('%s: one line naming that file, not the data dir or a read', async (name, expected) => {
    const config = testConfig()
    const path = join(config.dataDir, name)
    mkdirSync(path, { recursive: true })
    await expect(startHost({ ...config, token: null }, { log: () => {} })).rejects.toThrow(expected.replace('{path}', path))
  })
})

/**
 * Opening a FIFO waits for a process at its other end: a start that opened one it found among the
 * data dir's files would hang with no word. Each is named as not a regular file, never opened.
 */
describe('a start on a data dir where a file of its own is a FIFO', () => {
  test.skipIf(process.platform === 'win32').each([
    ['token', 'cannot read the token file {path} (it is a FIFO, not a regular file): remove it to have one made, or give --token'],
    ['host.lock', "cannot open {path} for writing (it is a FIFO, not a regular file): it is the data dir's lock file"],
    ['leasehold.db', 'cannot open {path} for writing (it is a FIFO, not a regular file); it was left untouched'],
    ['leasehold.db-wal', 'cannot open {path} (it is a FIFO, not a regular file)'],
    ['leasehold.db-shm', 'cannot open {path} (it is a FIFO, not a regular file)'],
  ])('%s: one line naming that file as not a regular file, at once', async (name, expected) => {
    const config = testConfig()
    // The database is there (the -wal and -shm are its), the token too but for the FIFO of its name.
    await (await startHost({ ...config, token: null }, { log: () => {} })).stop()
    const path = join(config.dataDir, name)
    rmSync(path, { force: true })
    execFileSync('mkfifo', [path])
    // In a process of its own: a start that opened the FIFO would block this one for good.
    const result = runCli(['serve', '--data-dir', config.dataDir, '--port', '0', '--workers', '0'])
    expect(result.status, result.stderr).toBe(1)
    expect(result.stderr.trim().split('\n')).toHaveLength(1)
    expect(result.stderr).toContain(`leasehold: could not start: ${expected.replace('{path}', path)}`)
  })
})

describe('a start on a data dir whose lock file it cannot write', () => {
  test('names host.lock and why (a start with sudo once left it root\'s), not a failing disk', async (context) => {
    const config = testConfig()
    const path = join(config.dataDir, 'host.lock')
    writeFileSync(path, '')
    const refused = refuseWrites(path)
    if ('cannot' in refused) return context.skip(refused.cannot)
    try {
      await expect(startHost(config, { log: () => {} })).rejects.toThrow(new RegExp(`cannot open ${path} for writing \\((EROFS|EACCES)[^)]*\\): it is the data dir's lock file`))
    } finally {
      refused.undo()
    }
  })
})

describe('a start on a data dir whose worker-tokens.json it cannot read', () => {
  test("is refused in one line naming the file, why, and what to do (root's 0600 file, the host another user): every worker token would be refused", (context) => {
    if (process.platform !== 'linux' || process.getuid?.() !== 0) return context.skip('runs the host as another user, which needs root')
    const config = testConfig()
    const path = join(config.dataDir, 'worker-tokens.json')
    createScopedToken(config.dataDir, 'worker') // root's, mode 0600, as a `sudo leasehold token create` leaves it
    rmSync(join(config.dataDir, 'worker-tokens.lock'))
    chownSync(config.dataDir, NOBODY, NOBODY)
    const serve = ['--reuid', `${NOBODY}`, '--regid', `${NOBODY}`, '--clear-groups', process.execPath, BIN, 'serve', '--data-dir', config.dataDir, '--port', '0', '--workers', '0']
    const result = spawnSync('setpriv', serve, { encoding: 'utf8', timeout: 30_000 })
    expect(result.status, result.stderr).toBe(1)
    expect(result.stderr.trim().split('\n')).toEqual([
      `leasehold: could not start: cannot read ${path} (EACCES): it holds the scoped tokens of \`leasehold token\`, and a host that cannot read it would refuse every one; ` +
        'give it to the user the host runs as (chown), or start the host as its owner',
    ])
  })

  test('a directory in its place is refused so too, naming it; a file that is not JSON is refused naming the file', async () => {
    const config = testConfig()
    const path = join(config.dataDir, 'worker-tokens.json')
    mkdirSync(path)
    await expect(startHost(config, { log: () => {} })).rejects.toThrow(
      new HostStartError(
        `cannot read ${path} (it is a directory, not a regular file): it holds the scoped tokens of \`leasehold token\`, and a host that cannot read it would refuse every one; ` +
          'fix it, or move it away to start with no scoped tokens',
      ),
    )
    rmSync(path, { recursive: true })
    writeFileSync(path, 'garbage{')
    await expect(startHost(config, { log: () => {} })).rejects.toThrow(new HostStartError(`${path} is not JSON, so not a token file Leasehold wrote: fix it or move it away`))
    rmSync(path) // no file: no scoped tokens, and the host starts
    const host = await startHost(config, { log: () => {} })
    await host.stop()
  })
})

describe('the local workers a host starts', () => {
  /** The environment the host hands its first local worker (the start then fails: no process is made). */
  async function firstWorkerEnv(overrides: Parameters<typeof testConfig>[0]): Promise<Record<string, string>> {
    let env: Record<string, string> | undefined
    const started = startHost(testConfig(overrides), {
      log: () => {},
      spawn: (given) => {
        env = given
        throw new Error('env taken')
      },
    })
    await expect(started).rejects.toThrow('env taken')
    return env!
  }

  test("run the pool's share of the stored capacity each, unless --worker-concurrency says", async () => {
    expect((await firstWorkerEnv({ workers: 2, totalUnits: 300 })).LEASEHOLD_WORKER_CONCURRENCY).toBe('150')
    expect((await firstWorkerEnv({ workers: 2 })).LEASEHOLD_WORKER_CONCURRENCY).toBe('50') // the first capacity: 100 units
    expect((await firstWorkerEnv({ workers: 2, totalUnits: 300, workerConcurrency: 8 })).LEASEHOLD_WORKER_CONCURRENCY).toBe('8')
  })

  test('are told how far to yield the CPU: --worker-nice, 10 unless said', async () => {
    expect((await firstWorkerEnv({ workers: 1 })).LEASEHOLD_WORKER_NICE).toBe('10')
    expect((await firstWorkerEnv({ workers: 1, workerNice: 0 })).LEASEHOLD_WORKER_NICE).toBe('0')
  })

  test('take the queues --worker-streams names, the default queue unless said', async () => {
    expect((await firstWorkerEnv({ workers: 1 })).LEASEHOLD_WORKER_STREAMS).toBe('default')
    expect((await firstWorkerEnv({ workers: 1, workerStreams: ['reports', 'default'] })).LEASEHOLD_WORKER_STREAMS).toBe('reports,default')
  })

  test('have a GPU only when --worker-gpu says so', async () => {
    expect((await firstWorkerEnv({ workers: 1 })).LEASEHOLD_WORKER_GPU).toBe('false')
    expect((await firstWorkerEnv({ workers: 1, workerGpu: true })).LEASEHOLD_WORKER_GPU).toBe('true')
  })
})
