import { join } from 'node:path'
import { homedir } from 'node:os'
import { describe, expect, test } from 'vitest'
import { dashboardLink } from '../../src-main/data-dir/dashboard-link'
import { ConfigError, DEFAULT_WORKER_CONCURRENCY, defaultDataDir, localWorkerSlots, parseServeArgs } from '../../src-main/config'

describe('serve configuration', () => {
  test('defaults: loopback, port 7878, two local workers, normal durability, stored capacity kept', () => {
    const config = parseServeArgs([], {}, { dataDir: '/tmp/x' })
    expect(config).toMatchObject({
      dataDir: '/tmp/x',
      host: '127.0.0.1',
      port: 7878,
      workers: 2,
      execAllow: [],
      drainGraceS: 10,
      token: null,
      totalUnits: null,
      busy: null,
      leaseTtlS: 30,
      heartbeatGraceS: 5,
      claimTtlS: 60,
      maxAttempts: 3,
      durability: 'normal',
      allowedHosts: [],
      bodyLimitBytes: 1024 * 1024,
      retainDays: 7,
    })
  })

  test('a lease must outlive the heartbeat due a second after its grant: --lease-ttl-s 1 with --heartbeat-grace-s 0 is refused, and a claim TTL under 2 s', () => {
    expect(() => parseServeArgs(['--lease-ttl-s', '1', '--heartbeat-grace-s', '0'], {})).toThrow(
      '--lease-ttl-s 1 with --heartbeat-grace-s 0 would let a lease expire 1 s after its last heartbeat, and a worker heartbeats every second at most: the two must add up to at least 2',
    )
    expect(parseServeArgs(['--lease-ttl-s', '2', '--heartbeat-grace-s', '0'], {})).toMatchObject({ leaseTtlS: 2, heartbeatGraceS: 0 })
    expect(parseServeArgs(['--lease-ttl-s', '1'], {})).toMatchObject({ leaseTtlS: 1, heartbeatGraceS: 5 })
    expect(() => parseServeArgs(['--claim-ttl-s', '1'], {})).toThrow('--claim-ttl-s must be a whole number from 2 to 86400 (got "1")')
  })

  test('--retain-days takes 0 (keep every job) and whole days; anything else names the flag', () => {
    expect(parseServeArgs(['--retain-days', '0'], {}).retainDays).toBe(0)
    expect(parseServeArgs([], { LEASEHOLD_RETAIN_DAYS: '30' }).retainDays).toBe(30)
    expect(() => parseServeArgs(['--retain-days', '-1'], {})).toThrow(/--retain-days/)
    // A negative value after the flag is its value, as with `=`: the range message, not "ambiguous".
    const message = (argv: string[]) => {
      try {
        parseServeArgs(argv, {})
      } catch (error) {
        return (error as Error).message
      }
      return null
    }
    expect(message(['--retain-days', '-1'])).toBe(message(['--retain-days=-1']))
    expect(message(['--retain-days', '-1'])).not.toContain('ambiguous')
    expect(() => parseServeArgs(['--retain-days', '1.5'], {})).toThrow(/--retain-days/)
    expect(() => parseServeArgs([], { LEASEHOLD_RETAIN_DAYS: 'week' })).toThrow(/LEASEHOLD_RETAIN_DAYS/)
  })

  test('a flag wins over its LEASEHOLD_* variable, which wins over the default', () => {
    expect(parseServeArgs(['--port', '9000'], { LEASEHOLD_PORT: '9001' }).port).toBe(9000)
    expect(parseServeArgs([], { LEASEHOLD_PORT: '9001' }).port).toBe(9001)
    expect(parseServeArgs([], { LEASEHOLD_BUSY: 'auto' }).busy).toBe('auto')
    expect(parseServeArgs(['--busy', '7.5'], {}).busy).toBe(7.5)
    expect(parseServeArgs(['--allowed-host', 'A.lan, b.lan'], {}).allowedHosts).toEqual(['a.lan', 'b.lan'])
  })

  test('a LEASEHOLD_* variable set to the empty string counts as unset: the default applies, as in every command', () => {
    const empty = Object.fromEntries(['TOKEN', 'PORT', 'WORKERS', 'TOTAL_UNITS', 'BUSY', 'HOST', 'DURABILITY', 'WORKER_STREAMS', 'REDIS', 'RETAIN_DAYS', 'DATA_DIR'].map((name) => [`LEASEHOLD_${name}`, '']))
    expect(parseServeArgs([], empty, { dataDir: '/tmp/x' })).toEqual(parseServeArgs([], {}, { dataDir: '/tmp/x' }))
  })

  test('a bad value throws a ConfigError naming the flag or the variable', () => {
    expect(() => parseServeArgs(['--port', '-1'], {})).toThrow(/--port/)
    expect(() => parseServeArgs([], { LEASEHOLD_DURABILITY: 'maybe' })).toThrow(/LEASEHOLD_DURABILITY/)
    expect(() => parseServeArgs(['--token', 'short'], {})).toThrow(ConfigError)
  })

  test('a number is plain decimal: "", " 3", "0x5", "1e1" and "+3" are refused, never read as 0, 3, 5, 10 or 3', () => {
    for (const value of ['', ' 3', '0x5', '1e1', '+3', '3.0']) {
      expect(() => parseServeArgs(['--total-units', value], {})).toThrow(value === '' ? '--total-units needs a value' : `--total-units must be a whole number from`)
      // An empty variable is no value at all (unset), where an empty flag is a mistake.
      if (value !== '') expect(() => parseServeArgs([], { LEASEHOLD_TOTAL_UNITS: value })).toThrow(/LEASEHOLD_TOTAL_UNITS must be a whole number/)
    }
    expect(parseServeArgs(['--total-units', '5'], {}).totalUnits).toBe(5)
  })

  test('--busy takes auto or 0 to 10 in plain decimal, and says so for anything else', () => {
    for (const value of ['high', '11', '-1', '0x5', '1e1']) {
      expect(() => parseServeArgs(['--busy', value], {})).toThrow('must be a number from 0 to 10, or auto')
    }
    expect(parseServeArgs(['--busy', '0'], {}).busy).toBe(0)
    expect(parseServeArgs(['--busy', '10'], {}).busy).toBe(10)
  })

  test('an unknown flag is named in one line, without parseArgs\'s hint about positional arguments', () => {
    expect(() => parseServeArgs(['--bogus'], {})).toThrow(/^Unknown option '--bogus'$/)
  })

  test('serve keeps the command line\'s rules: a flag given twice, empty, or not UTF-8 is a usage error, never the last one taken', () => {
    expect(() => parseServeArgs(['--port', '7000', '--port', '7001'], {})).toThrow(/^--port is given twice \("7000", then "7001"\): give it once$/)
    expect(() => parseServeArgs(['--data-dir='], {})).toThrow(/^--data-dir needs a value$/)
    expect(() => parseServeArgs(['--data-dir', 'd\uFFFD'], {})).toThrow(/^--data-dir is not valid UTF-8 text$/)
  })

  test('an unknown flag near one of serve\'s names that flag, and only one that is near', () => {
    expect(() => parseServeArgs(['--prot', '7000'], {})).toThrow(/^Unknown option '--prot' \(did you mean --port\?\)$/)
    expect(() => parseServeArgs(['--worker', '2'], {})).toThrow(/^Unknown option '--worker' \(did you mean --workers\?\)$/)
    expect(() => parseServeArgs(['--datadir', 'd'], {})).toThrow(/^Unknown option '--datadir' \(did you mean --data-dir\?\)$/)
  })

  test('the data dir is made absolute, so that every line naming a file in it names the same place', () => {
    expect(parseServeArgs(['--data-dir', 'relative/dir'], {}).dataDir).toBe(join(process.cwd(), 'relative/dir'))
    expect(parseServeArgs([], { LEASEHOLD_DATA_DIR: './here' }).dataDir).toBe(join(process.cwd(), 'here'))
  })

  test('--workers takes 0 (external workers only) to 64', () => {
    expect(parseServeArgs(['--workers', '0'], {}).workers).toBe(0)
    expect(() => parseServeArgs(['--workers', '65'], {})).toThrow(/--workers/)
    expect(parseServeArgs(['--exec-allow', '/bin/echo, git'], {}).execAllow).toEqual(['/bin/echo', 'git'])
  })

  test('a local worker runs its share of the capacity unless --worker-concurrency says: never fewer than 32, never more than 256', () => {
    expect(parseServeArgs([], {}).workerConcurrency).toBeNull()
    expect(parseServeArgs(['--worker-concurrency', '8'], {}).workerConcurrency).toBe(8)
    expect(() => parseServeArgs(['--worker-concurrency', '257'], {})).toThrow(/--worker-concurrency/)
    // The default pool (2 workers) fills the default capacity (100 units) with one-unit jobs.
    expect(localWorkerSlots(100, 2)).toBe(50)
    expect(localWorkerSlots(101, 2)).toBe(51)
    expect(localWorkerSlots(10, 2)).toBe(DEFAULT_WORKER_CONCURRENCY)
    expect(localWorkerSlots(0, 2)).toBe(DEFAULT_WORKER_CONCURRENCY)
    expect(localWorkerSlots(100_000, 4)).toBe(256)
    expect(localWorkerSlots(100, 0)).toBe(DEFAULT_WORKER_CONCURRENCY)
  })

  test('local workers yield the CPU at niceness 10 unless --worker-nice says: 0 (not at all) to 19, never below 0', () => {
    expect(parseServeArgs([], {}).workerNice).toBe(10)
    expect(parseServeArgs(['--worker-nice', '0'], {}).workerNice).toBe(0)
    expect(parseServeArgs([], { LEASEHOLD_WORKER_NICE: '19' }).workerNice).toBe(19)
    expect(() => parseServeArgs(['--worker-nice', '20'], {})).toThrow('--worker-nice must be a whole number from 0 to 19 (got "20")')
    expect(() => parseServeArgs(['--worker-nice', '-5'], {})).toThrow(/--worker-nice/)
  })

  test('local workers take the default queue unless --worker-streams names others, each a queue name', () => {
    expect(parseServeArgs([], {}).workerStreams).toEqual(['default'])
    expect(parseServeArgs(['--worker-streams', 'reports, default'], {}).workerStreams).toEqual(['reports', 'default'])
    expect(parseServeArgs([], { LEASEHOLD_WORKER_STREAMS: 'thumbs' }).workerStreams).toEqual(['thumbs'])
    expect(() => parseServeArgs(['--worker-streams', ' , '], {})).toThrow(/--worker-streams .*needs at least one queue name/)
    expect(() => parseServeArgs(['--worker-streams', 'a,..'], {})).toThrow(/--worker-streams .*"\.\." is not a queue name/)
  })

  test('local workers have no GPU unless --worker-gpu true (or LEASEHOLD_WORKER_GPU=true) says they have', () => {
    expect(parseServeArgs([], {}).workerGpu).toBe(false)
    expect(parseServeArgs(['--worker-gpu', 'true'], {}).workerGpu).toBe(true)
    expect(parseServeArgs([], { LEASEHOLD_WORKER_GPU: 'true' }).workerGpu).toBe(true)
    expect(parseServeArgs(['--worker-gpu', 'false'], { LEASEHOLD_WORKER_GPU: 'true' }).workerGpu).toBe(false)
    expect(() => parseServeArgs(['--worker-gpu', 'yes'], {})).toThrow('--worker-gpu must be true or false (got "yes")')
  })

  test("the default data dir is the platform's app-data folder, shared with the desktop app", () => {
    expect(defaultDataDir({ XDG_CONFIG_HOME: '/home/u/.config' }, 'linux')).toBe('/home/u/.config/leasehold')
    expect(defaultDataDir({ APPDATA: 'C:\\Users\\u\\AppData\\Roaming' }, 'win32')).toMatch(/Roaming.leasehold$/)
    expect(defaultDataDir({}, 'darwin')).toMatch(/Library\/Application Support\/leasehold$/)
  })

  test('a token is visible ASCII, as an Authorization header carries it; an allowed host is a name without a port or a wildcard: anything else is one line naming the flag', () => {
    expect(() => parseServeArgs(['--token', 'abcdefghijklmnop\r\nX-Evil: 1'], {})).toThrow('--token must be visible ASCII characters only (no spaces or control characters): it is sent in an Authorization header (got "abcdefghijklmnop\\r\\nX-Evil: 1")')
    expect(() => parseServeArgs([], { LEASEHOLD_TOKEN: 'a token with spaces' })).toThrow(/^LEASEHOLD_TOKEN must be visible ASCII/)
    expect(() => parseServeArgs(['--allowed-host', 'evil.com:99,*'], {})).toThrow('--allowed-host each name is a host name without a port or a wildcard (the port is the server\'s own): "evil.com:99" is not one')
    expect(() => parseServeArgs(['--allowed-host', '*'], {})).toThrow('"*" is not one')
    expect(parseServeArgs(['--allowed-host', 'My-Host.local, 192.168.1.2,[::1]'], {}).allowedHosts).toEqual(['my-host.local', '192.168.1.2', '[::1]'])
  })

  test('an empty or relative XDG_CONFIG_HOME is ignored, as the XDG spec says, not taken as the folder a command runs from', () => {
    const home = defaultDataDir({}, 'linux')
    expect(home).toBe(join(homedir(), '.config', 'leasehold'))
    for (const XDG_CONFIG_HOME of ['', 'config', './config']) expect(defaultDataDir({ XDG_CONFIG_HOME }, 'linux')).toBe(home)
  })
})

describe('the dashboard link serve prints', () => {
  test('carries the token in the fragment, escaped, and opens a host bound to every interface on loopback', () => {
    expect(dashboardLink('http://127.0.0.1:7878', 'abc_DEF-123')).toBe('http://127.0.0.1:7878/#token=abc_DEF-123')
    expect(dashboardLink('http://127.0.0.1:7878', 'a+b/c=d e')).toBe('http://127.0.0.1:7878/#token=a%2Bb%2Fc%3Dd%20e')
    expect(new URLSearchParams(new URL(dashboardLink('http://127.0.0.1:1', 'a+b/c=d e')).hash.slice(1)).get('token')).toBe('a+b/c=d e')
    expect(dashboardLink('http://0.0.0.0:7878', 't')).toBe('http://127.0.0.1:7878/#token=t')
    expect(dashboardLink('http://[::]:7878', 't')).toBe('http://[::1]:7878/#token=t')
    expect(dashboardLink('http://192.168.1.5:7878', 't')).toBe('http://192.168.1.5:7878/#token=t')
  })
})
