import Database from 'better-sqlite3'
import { execFileSync, spawn } from 'node:child_process'
import { chmodSync, chownSync, copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { join } from 'node:path'
import { afterEach, describe, expect, test } from 'vitest'
import { defaultDataDir, SERVE_FLAGS } from '../../src-main/config'
import { tempDir } from '../helpers/host'
import { BIN, runCli, runCliAsync, startServe } from '../helpers/process'

const dirs: string[] = []
function dataDir(): string {
  const dir = tempDir()
  dirs.push(dir)
  return dir
}
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

describe('leasehold command line', () => {
  test('--help lists the commands and serve --help lists every flag with its env variable', () => {
    const top = runCli(['--help'])
    expect(top.status).toBe(0)
    expect(top.stdout).toMatch(/serve/)
    const serve = runCli(['serve', '--help'])
    expect(serve.status).toBe(0)
    for (const flag of SERVE_FLAGS) {
      expect(serve.stdout).toContain(`--${flag.name}`)
      expect(serve.stdout).toContain(flag.env)
    }
  })

  test.each([
    [['--port', 'abc'], '--port'],
    [['--busy', '11'], '--busy'],
    [['--durability', 'sometimes'], '--durability'],
    [['--workers', '-1'], '--workers'],
    [['--lease-ttl-s', '0'], '--lease-ttl-s'],
    [['--no-such-flag'], 'no-such-flag'],
  ])('a bad value (%j) prints one line naming the flag and exits 2', (args, name) => {
    const result = runCli(['serve', '--data-dir', dataDir(), ...args])
    expect(result.status).toBe(2)
    expect(result.stderr.trim().split('\n')).toHaveLength(1)
    expect(result.stderr).toContain(name)
  })

  test('serve --help shows where the data dir is by default on this machine', () => {
    const env = { XDG_CONFIG_HOME: '/somewhere/config' }
    const serve = runCli(['serve', '--help'], env)
    expect(serve.stdout).toMatch(/--data-dir PATH +where the database and token live \[(.+)\]\n/)
    expect(/--data-dir .*\[(.+)\]\n/.exec(serve.stdout)![1]).toBe(defaultDataDir({ ...process.env, ...env }))
  })

  test.each(['redis://127.0.0.1:7969/abc', 'redis://127.0.0.1:notaport', 'redis://127.0.0.1:99999', 'redis://[::1', 'redis://:@', 'redis://127.0.0.1:7969/-1'])(
    'a Redis URL that cannot be used (%s) is one line naming --redis and exit 2, before the data dir is opened',
    (url) => {
      const dir = dataDir()
      const result = runCli(['serve', '--data-dir', dir, '--redis', url])
      expect(result.status, result.stderr).toBe(2)
      expect(result.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^leasehold: --redis (must be a URL of the form|names the database)/)])
      expect(existsSync(join(dir, 'leasehold.db'))).toBe(false)
    },
  )

  test('a LEASEHOLD_* variable no command reads is a warning line at start naming the one likely meant, and the host starts', async () => {
    const serve = await startServe(['--data-dir', dataDir(), '--port', '0'], { LEASEHOLD_ALLOWED_HOST: 'box.example' })
    try {
      expect(serve.stderr()).toContain('leasehold: warning: LEASEHOLD_ALLOWED_HOST is no variable Leasehold reads, and is ignored (did you mean LEASEHOLD_ALLOWED_HOSTS?)\n')
    } finally {
      serve.child.kill('SIGTERM')
      await serve.exited
    }
  })

  test('a bad LEASEHOLD_* variable is named the same way', () => {
    const result = runCli(['serve', '--data-dir', dataDir()], { LEASEHOLD_PORT: '99999' })
    expect(result.status).toBe(2)
    expect(result.stderr).toContain('LEASEHOLD_PORT')
  })

  test('an unknown command is one line and exit 2', () => {
    const result = runCli(['frobnicate'])
    expect(result.status).toBe(2)
    expect(result.stderr.trim().split('\n')).toHaveLength(1)
  })
})

describe('leasehold serve', () => {
  // A command launched with serve (`serve & leasehold status`) may look before serve has taken its
  // lock. Here the host runs already, hidden (its host.lock and host.json moved aside, an unheld
  // copy of the lock in its place) until the command has looked once and found no host: the rule
  // is checked whatever the machine's speed, and fails if the command does not look again.
  test.skipIf(process.platform !== 'linux')('a client command that finds no host looks again, so that one launched with serve (serve & leasehold status) finds the host once it holds its lock, rather than saying none runs', async () => {
    const dir = dataDir()
    const serve = await startServe(['--data-dir', dir, '--port', '0', '--workers', '0'])
    try {
      const [lock, hostFile] = [join(dir, 'host.lock'), join(dir, 'host.json')]
      await expect.poll(() => existsSync(hostFile)).toBe(true)
      renameSync(lock, `${lock}.aside`)
      renameSync(hostFile, `${hostFile}.aside`)
      copyFileSync(`${lock}.aside`, lock) // a lock file no process holds, as a host that stopped leaves
      let pid = 0
      const status = runCliAsync(['status', '--data-dir', dir], { LEASEHOLD_URL: undefined, LEASEHOLD_TOKEN: undefined, LEASEHOLD_DATA_DIR: undefined }, (child) => (pid = child.pid!))
      // Its look at an unheld lock file loads SQLite (host-lock.ts lockHeld): its addon in the
      // command's memory says the command has looked, and found none.
      await expect.poll(() => readFileSync(`/proc/${pid}/maps`, 'utf8').includes('better_sqlite3'), { timeout: 30_000, interval: 10 }).toBe(true)
      renameSync(`${lock}.aside`, lock)
      renameSync(`${hostFile}.aside`, hostFile)
      const result = await status
      expect(result.status, result.stderr).toBe(0)
      expect(result.stdout).toContain(serve.url)
    } finally {
      serve.child.kill('SIGTERM')
      await serve.exited
    }
  })

  test('prints its listening line, serves health, and exits 0 on SIGTERM with the database closed cleanly', async () => {
    const dir = dataDir()
    const serve = await startServe(['--data-dir', dir, '--port', '0', '--busy', '0'])
    expect(serve.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
    // Then where its data lives and the dashboard's link with the token, as Jupyter prints its own.
    const token = readFileSync(join(dir, 'token'), 'utf8').trim()
    await expect.poll(() => serve.stdout()).toContain('dashboard')
    expect(serve.stdout()).toBe(`leasehold listening on ${serve.url}\n  data dir   ${dir}\n  dashboard  ${serve.url}/#token=${token}\n`)
    const health = await fetch(`${serve.url}/api/health`)
    expect(health.status).toBe(200)
    serve.child.kill('SIGTERM')
    expect(await serve.exited).toBe(0)
    // A clean close checkpoints the write-ahead log away.
    const wal = join(dir, 'leasehold.db-wal')
    expect(!existsSync(wal) || statSync(wal).size === 0).toBe(true)
  })

  test.skipIf(process.platform !== 'linux')('a token given on the command line is not left in /proc/<pid>/cmdline: serve --token and worker --token show only the command', async () => {
    const token = `cmdline-${'t'.repeat(40)}`
    const serve = await startServe(['--data-dir', dataDir(), '--port', '0', '--token', token])
    const worker = spawn(process.execPath, [BIN, 'worker', '--url', serve.url, '--token', token, '--worker-id', 'cmdline-w'], { stdio: ['ignore', 'pipe', 'pipe'] })
    try {
      // The worker says it takes jobs once it has read its arguments and reached the host.
      let out = ''
      await new Promise<void>((resolve, reject) => {
        worker.stdout!.on('data', (chunk: Buffer) => {
          out += chunk.toString()
          if (out.includes('cmdline-w taking')) resolve()
        })
        worker.once('exit', (code) => reject(new Error(`worker exited with ${code}`)))
      })
      for (const [pid, command] of [[serve.child.pid!, 'leasehold serve'], [worker.pid!, 'leasehold worker']] as const) {
        const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8')
        expect(cmdline).not.toContain(token)
        expect(cmdline.replace(/\0+$/, '')).toBe(command)
      }
    } finally {
      worker.kill('SIGKILL')
      serve.child.kill('SIGTERM')
      await serve.exited
    }
  })

  test('SIGTERM the instant the listening line appears still stops cleanly: the handlers are in before the line', async () => {
    const child = spawn(process.execPath, [BIN, 'serve', '--data-dir', dataDir(), '--port', '0', '--workers', '0'], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stderr = ''
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    child.stdout!.once('data', () => child.kill('SIGTERM'))
    const [code, signal] = await new Promise<[number | null, string | null]>((resolve) => child.once('exit', (c, s) => resolve([c, s])))
    expect({ code, signal }).toEqual({ code: 0, signal: null })
    expect(stderr).toContain('SIGTERM: finishing requests in flight')
  })

  test('a second SIGTERM while it stops (timeout and process managers may send two) is ignored: the stop still ends clean, its host.json removed', async () => {
    const dir = dataDir()
    const serve = await startServe(['--data-dir', dir, '--port', '0', '--busy', '0'])
    serve.child.kill('SIGTERM')
    serve.child.kill('SIGTERM')
    expect(await serve.exited).toBe(0)
    expect(existsSync(join(dir, 'host.json'))).toBe(false)
    const wal = join(dir, 'leasehold.db-wal')
    expect(!existsSync(wal) || statSync(wal).size === 0).toBe(true)
  })

  test('SIGTERM lets a request in flight finish before exiting', async () => {
    const dir = dataDir()
    const serve = await startServe(['--data-dir', dir, '--port', '0', '--busy', '0'])
    const token = readFileSync(join(dir, 'token'), 'utf8').trim()
    const body = JSON.stringify({ total_units: 7 })
    const answer = new Promise<number>((resolve, reject) => {
      const req = request(
        `${serve.url}/api/capacity`,
        { method: 'PUT', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': body.length } },
        (res) => {
          res.resume()
          resolve(res.statusCode ?? 0)
        },
      )
      req.on('error', reject)
      req.write(body.slice(0, 5)) // the request is now in flight
      setTimeout(() => {
        serve.child.kill('SIGTERM')
        setTimeout(() => req.end(body.slice(5)), 300)
      }, 300)
    })
    expect(await answer).toBe(200)
    expect(await serve.exited).toBe(0)
  })

  test('a database written by a newer version stops the start with one line and is left untouched', async () => {
    const dir = dataDir()
    const first = await startServe(['--data-dir', dir, '--port', '0'])
    first.child.kill('SIGTERM')
    await first.exited
    const path = join(dir, 'leasehold.db')
    const db = new Database(path)
    db.prepare('INSERT INTO __drizzle_migrations (hash, created_at) VALUES (?, ?)').run('from-the-future', Date.UTC(2100, 0, 1))
    db.close()
    const before = readFileSync(path)
    const result = runCli(['serve', '--data-dir', dir, '--port', '0'])
    expect(result.status).toBe(1)
    expect(result.stderr.trim().split('\n')).toHaveLength(1)
    expect(result.stderr).toMatch(/newer version/)
    expect(readFileSync(path).equals(before)).toBe(true)
  })

  test('a database log with no database beside it stops the start with one line (exit 1) naming the log, and is kept byte for byte; no database is made', () => {
    // A log with commits in it: the file and its -wal as a killed host leaves them, and then the file moved away.
    const elsewhere = join(dataDir(), 'leasehold.db')
    const writer = new Database(elsewhere)
    writer.pragma('journal_mode = WAL')
    writer.pragma('wal_autocheckpoint = 0')
    writer.exec("CREATE TABLE kept (body TEXT); INSERT INTO kept VALUES ('a commit only the log holds')")
    const dir = dataDir()
    const path = join(dir, 'leasehold.db')
    writeFileSync(`${path}-wal`, readFileSync(`${elsewhere}-wal`))
    writer.close()
    const log = readFileSync(`${path}-wal`)
    expect(log.length).toBeGreaterThan(0)

    const result = runCli(['serve', '--data-dir', dir, '--port', '0', '--workers', '0'])
    expect(result.status).toBe(1)
    expect(result.stderr.trim().split('\n')).toEqual([
      `leasehold: could not start: ${path}-wal is a database's log, and its database ${path} is not there: put the database back beside it, or move the log away to start with a new database (the log was left untouched)`,
    ])
    expect(readFileSync(`${path}-wal`).equals(log)).toBe(true)
    expect(existsSync(path)).toBe(false)
    expect(existsSync(join(dir, 'token'))).toBe(false)
  })

  test('a database log that holds commits beside an empty (0-byte) database file stops the start and `leasehold check` with one line naming the log; neither removes it', () => {
    // A killed host's file and its -wal, and then the file truncated: SQLite removes such a log as it opens the empty file.
    const dir = dataDir()
    const path = join(dir, 'leasehold.db')
    const writer = new Database(path)
    writer.pragma('journal_mode = WAL')
    writer.pragma('wal_autocheckpoint = 0')
    writer.exec("CREATE TABLE kept (body TEXT); INSERT INTO kept VALUES ('a commit only the log holds')")
    const log = readFileSync(`${path}-wal`)
    writer.close() // checkpoints and removes the log: put back as the kill left it
    writeFileSync(`${path}-wal`, log)
    writeFileSync(path, '')
    expect(log.length).toBeGreaterThan(0)

    const line = `${path}-wal is a database's log, and its database ${path} is empty (0 bytes): put the database back beside it, or move the log away to start with a new database (the log was left untouched)`
    const served = runCli(['serve', '--data-dir', dir, '--port', '0', '--workers', '0'])
    expect(served.status).toBe(1)
    expect(served.stderr.trim().split('\n')).toEqual([`leasehold: could not start: ${line}`])
    const checked = runCli(['check', '--data-dir', dir])
    expect(checked.status).toBe(1)
    expect(checked.stderr.trim().split('\n')).toEqual([`leasehold: ${line}`])
    expect(readFileSync(`${path}-wal`).equals(log)).toBe(true)
    expect(statSync(path).size).toBe(0)
  })

  test('an empty database log with no database beside it holds nothing: the start makes the database and uses it', async () => {
    const dir = dataDir()
    writeFileSync(join(dir, 'leasehold.db-wal'), '')
    const served = await startServe(['--data-dir', dir, '--port', '0', '--workers', '0'])
    served.child.kill('SIGTERM')
    expect(await served.exited).toBe(0)
    expect(existsSync(join(dir, 'leasehold.db'))).toBe(true)
  })

  test('a corrupt database file stops the start with one line and is left untouched, and no token is made for it', () => {
    const dir = dataDir()
    const path = join(dir, 'leasehold.db')
    writeFileSync(path, Buffer.from('this is not a database, but it is somebody’s file'.repeat(200)))
    const before = readFileSync(path)
    const result = runCli(['serve', '--data-dir', dir, '--port', '0'])
    expect(result.status).toBe(1)
    expect(result.stderr.trim().split('\n')).toHaveLength(1)
    expect(result.stderr).toMatch(/not a readable SQLite database|damaged/)
    expect(readFileSync(path).equals(before)).toBe(true)
    expect(existsSync(join(dir, 'token'))).toBe(false)
  })

  test('a port already in use is one line, exit 1', async () => {
    const dir = dataDir()
    const first = await startServe(['--data-dir', dir, '--port', '0'])
    const port = new URL(first.url).port
    const second = runCli(['serve', '--data-dir', dataDir(), '--port', port])
    first.child.kill('SIGTERM')
    await first.exited
    expect(second.status).toBe(1)
    expect(second.stderr).toMatch(/^leasehold: could not start: the port is already in use/)
  })

  test('a host listening on one address of this machine accepts that address as its name: the dashboard link it prints and the client commands that read host.json work, and a foreign Host is still refused', async () => {
    // 127.0.0.2 is an address of this machine other than the loopback names the guard always takes.
    const dir = dataDir()
    const serve = await startServe(['--data-dir', dir, '--port', '0', '--host', '127.0.0.2'])
    try {
      expect(serve.url).toMatch(/^http:\/\/127\.0\.0\.2:\d+$/)
      await expect.poll(() => serve.stdout()).toContain('dashboard')
      const link = new URL(/dashboard +(\S+)/.exec(serve.stdout())![1]!)
      expect(link.origin).toBe(serve.url)
      expect(JSON.parse(readFileSync(join(dir, 'host.json'), 'utf8')).url).toBe(serve.url)
      const token = decodeURIComponent(link.hash.slice('#token='.length))
      expect((await fetch(link)).status).toBe(200)
      expect((await fetch(`${serve.url}/api/capacity`, { headers: { authorization: `Bearer ${token}`, origin: serve.url } })).status).toBe(200)
      const status = await runCliAsync(['status', '--data-dir', dir])
      expect(status.stderr).toBe('')
      expect(status.stdout).toContain(`host      ${serve.url}`)
      const foreign = await new Promise<number>((resolve, reject) => {
        const req = request(`${serve.url}/api/capacity`, { headers: { host: `evil.example:${link.port}`, authorization: `Bearer ${token}` } }, (res) => resolve(res.statusCode!))
        req.on('error', reject).end()
      })
      expect(foreign).toBe(403)
    } finally {
      serve.child.kill('SIGTERM')
      await serve.exited
    }
  })

  test('a --host that names no address is a bad value: one line naming the flag, exit 2', () => {
    const result = runCli(['serve', '--data-dir', dataDir(), '--port', '0', '--host', 'localhost:80'])
    expect(result.status).toBe(2)
    expect(result.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^leasehold: --host \(LEASEHOLD_HOST\) "localhost:80" is no address or name of this machine \((ENOTFOUND|EAI_AGAIN)\)/)])
  })
})

describe('leasehold serve on a data dir it cannot use', () => {
  test('a host.json that cannot be written (a directory in its place) is one line "could not start", exit 1, and nothing listens', async () => {
    const dir = dataDir()
    mkdirSync(join(dir, 'host.json'))
    const result = runCli(['serve', '--data-dir', dir, '--port', '0', '--workers', '0'])
    expect(result.status).toBe(1)
    expect(result.stderr.trim().split('\n')).toHaveLength(1)
    expect(result.stderr).toMatch(/could not start: cannot write .*host\.json/)
    expect(result.stdout).not.toMatch(/listening/)
  })

  test('a second host on the same data dir refuses with one line naming the first; after the first is SIGKILLed a new one starts at once', async () => {
    const dir = dataDir()
    const first = await startServe(['--data-dir', dir, '--port', '0'])
    const hostFile = readFileSync(join(dir, 'host.json'), 'utf8')
    const second = runCli(['serve', '--data-dir', dir, '--port', '0', '--workers', '0'])
    expect(second.status).toBe(1)
    expect(second.stderr.trim().split('\n')).toHaveLength(1)
    expect(second.stderr).toContain(`pid ${first.child.pid}`)
    expect(second.stderr).toContain(first.url)
    // The refused host touched nothing of the first's.
    expect(readFileSync(join(dir, 'host.json'), 'utf8')).toBe(hostFile)
    expect((await fetch(`${first.url}/api/health`)).status).toBe(200)

    first.child.kill('SIGKILL')
    await first.exited
    const third = await startServe(['--data-dir', dir, '--port', '0'])
    expect((await fetch(`${third.url}/api/health`)).status).toBe(200)
    expect(JSON.parse(readFileSync(join(dir, 'host.json'), 'utf8'))).toEqual({ url: third.url, pid: third.child.pid })
    third.child.kill('SIGTERM')
    expect(await third.exited).toBe(0)
  })

  test('a data dir that is a symbolic link to a path that does not exist is named so, with where it points', () => {
    const link = join(dataDir(), 'data')
    const target = join(dataDir(), 'gone', 'data')
    symlinkSync(target, link)
    const result = runCli(['serve', '--data-dir', link, '--port', '0'])
    expect(result.status).toBe(1)
    expect(result.stderr.trim().split('\n')).toHaveLength(1)
    expect(result.stderr).toContain(`cannot create the data dir ${link}: ${link} is a symbolic link to ${target}, which does not exist`)
    expect(result.stderr).not.toMatch(/EEXIST/)
  })

  test('a data dir under a regular file says the data dir cannot be created, with the OS reason', () => {
    const file = join(dataDir(), 'a-file')
    writeFileSync(file, 'not a folder')
    const result = runCli(['serve', '--data-dir', join(file, 'leasehold'), '--port', '0'])
    expect(result.status).toBe(1)
    expect(result.stderr.trim().split('\n')).toHaveLength(1)
    expect(result.stderr).toMatch(/cannot create the data dir .*a-file\/leasehold \(ENOTDIR/)
    expect(result.stderr).not.toMatch(/listen/)
  })

  test('a data dir under a folder that cannot be written says the data dir cannot be created, with the OS reason', (context) => {
    const parent = join(dataDir(), 'locked')
    mkdirSync(parent)
    let unmount = () => {}
    if (process.getuid?.() === 0) {
      // Root writes through permissions: a read-only tmpfs refuses it instead.
      try {
        execFileSync('mount', ['-t', 'tmpfs', '-o', 'ro,size=64k', 'tmpfs', parent], { stdio: 'pipe' })
        unmount = () => execFileSync('umount', [parent], { stdio: 'ignore' })
      } catch (error) {
        return context.skip(`as root only a read-only mount refuses a write, and mount -t tmpfs is not permitted here (${(error as Error).message.split('\n')[0]})`)
      }
    } else {
      chmodSync(parent, 0o500)
    }
    try {
      const result = runCli(['serve', '--data-dir', join(parent, 'leasehold'), '--port', '0'])
      expect(result.status).toBe(1)
      expect(result.stderr.trim().split('\n')).toHaveLength(1)
      expect(result.stderr).toMatch(/cannot create the data dir .*locked\/leasehold \((EACCES|EROFS)/)
      expect(result.stderr).not.toMatch(/listen/)
    } finally {
      unmount()
      chmodSync(parent, 0o700)
    }
  })

  /** Runs `serve` on `dir`, which must refuse to start with one line (exit 1, nothing listening); returns the line. */
  function refusedStart(dir: string): string {
    const result = runCli(['serve', '--data-dir', dir, '--port', '0'])
    expect(result.status).toBe(1)
    expect(result.stdout).not.toMatch(/listening/)
    const lines = result.stderr.trim().split('\n')
    expect(lines).toHaveLength(1)
    return lines[0]!
  }
  const asRoot = process.platform !== 'win32' && process.getuid?.() === 0

  test('a data dir writable by its group or others (mkdir -m 777) stops the start with one line naming its mode and `chmod 700`: its token and handlers are neither served with nor loaded', () => {
    const dir = join(dataDir(), 'shared')
    mkdirSync(dir)
    chmodSync(dir, 0o777)
    writeFileSync(join(dir, 'token'), 'attacker-known-token-0123456789\n')
    mkdirSync(join(dir, 'handlers'))
    writeFileSync(join(dir, 'handlers', 'evil.mjs'), `import { writeFileSync } from 'node:fs'\nwriteFileSync(${JSON.stringify(join(dir, 'ran'))}, 'ran')\n`)
    expect(refusedStart(dir)).toBe(
      `leasehold: could not start: the data dir ${dir} is writable by its group and others (mode 0777): another user could put a token or handlers in it, which this host would serve with or run as this user; check that what it holds is yours, then run \`chmod 700 ${dir}\`, or give another --data-dir`,
    )
    expect(readdirSync(dir).sort()).toEqual(['handlers', 'token'])
    chmodSync(dir, 0o770)
    expect(refusedStart(dir)).toContain(`the data dir ${dir} is writable by its group (mode 0770)`)
  })

  test.skipIf(!asRoot)('a data dir another user owns stops the start with one line naming its owner and `chown`: a host run as root takes only root\'s', () => {
    const dir = join(dataDir(), 'theirs')
    mkdirSync(dir, { mode: 0o700 })
    chownSync(dir, 65534, 65534)
    const line = refusedStart(dir)
    expect(line).toContain(`could not start: the data dir ${dir} is owned by uid 65534 (mode 0700), not by this user (uid 0): `)
    expect(line).toContain(`run \`chown 0 ${dir}\``)
    expect(readdirSync(dir)).toEqual([])
  })

  test('a token file others may write is refused with one line, not served with', () => {
    const dir = dataDir()
    writeFileSync(join(dir, 'token'), 'attacker-known-token-0123456789\n')
    chmodSync(join(dir, 'token'), 0o646)
    expect(refusedStart(dir)).toBe(
      `leasehold: could not start: the token file ${join(dir, 'token')} is writable by others (mode 0646): another user may have written the token, and know it; remove the file to have a new token made, or, if you wrote the token, run \`chmod 600 ${join(dir, 'token')}\``,
    )
  })

  test.skipIf(!asRoot)('a token file another user owns is refused with one line, not served with, and left theirs', () => {
    const dir = dataDir()
    writeFileSync(join(dir, 'token'), 'attacker-known-token-0123456789\n')
    chownSync(join(dir, 'token'), 65534, 65534)
    expect(refusedStart(dir)).toContain(`could not start: the token file ${join(dir, 'token')} is owned by uid 65534 (mode 0644), not by this user (uid 0): `)
    expect(statSync(join(dir, 'token')).uid).toBe(65534)
    expect(readFileSync(join(dir, 'token'), 'utf8')).toBe('attacker-known-token-0123456789\n')
  })

  test('a worker-tokens.json another user owns or others may write is refused with one line: a token they added would be taken', () => {
    const dir = dataDir()
    const path = join(dir, 'worker-tokens.json')
    writeFileSync(path, '{"tokens":[]}\n')
    chmodSync(path, 0o666)
    expect(refusedStart(dir)).toBe(
      `leasehold: could not start: ${path} is writable by its group and others (mode 0666): another user may have added tokens to it; run \`chmod 600 ${path}\`, then \`leasehold token list\` and revoke any you did not make, or move it away to start with no scoped tokens`,
    )
    if (!asRoot) return // giving a file to another user needs root
    chmodSync(path, 0o600)
    chownSync(path, 65534, 65534)
    expect(refusedStart(dir)).toContain(`could not start: ${path} is owned by uid 65534 (mode 0600), not by this user (uid 0): `)
  })

  test.skipIf(process.platform !== 'linux')('a data dir under /proc is refused with one line at once (no endless mkdir)', () => {
    const started = Date.now()
    const result = runCli(['serve', '--data-dir', '/proc/nope', '--port', '0'])
    expect(result.status).toBe(1)
    expect(result.stderr.trim().split('\n')).toHaveLength(1)
    expect(result.stderr).toMatch(/cannot create the data dir \/proc\/nope \(ENOENT/)
    expect(Date.now() - started).toBeLessThan(15_000)
  })
})
