import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { homedir } from 'node:os'
import { describe, expect, test } from 'vitest'
import { dashboardLink } from '../../src-main/data-dir/dashboard-link'
import { ConfigError, DEFAULT_WORKER_CONCURRENCY, defaultDataDir, localWorkerSlots, parseServeArgs, serveVariableWarnings } from '../../src-main/config'

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

describe('serve refuses a mistyped value in one line, never a crash or a silent substitute', () => {
  test('a Redis URL is checked whole: scheme, host, a port from 1 to 65535, a database number from 0 to 9999 and nothing after it; a user and password may be given', () => {
    for (const url of ['redis://127.0.0.1:6379', 'redis://127.0.0.1:6379/0', 'rediss://u:p@redis.example:6380/15', 'redis://[::1]:6379/2', 'redis://:secret@h/9999'])
      expect(parseServeArgs(['--redis', url], {}).redisUrl).toBe(url)
    const refused: [string, RegExp][] = [
      ['redis://127.0.0.1:6379/abc', /^--redis names the database "abc": the path after the port is a database number from 0 to 9999 \(0 when left out\) \(got "redis:\/\/127\.0\.0\.1:6379\/abc"\)$/],
      ['redis://127.0.0.1:6379/-1', /^--redis names the database "-1"/],
      ['redis://127.0.0.1:6379/10000', /^--redis names the database "10000"/],
      ['redis://127.0.0.1:6379/1/2', /^--redis names the database "1\/2"/],
      ['redis://127.0.0.1:notaport', /^--redis must be a URL of the form redis:\/\/\[user:password@\]host\[:port\]\[\/db\], or rediss:\/\/ for TLS: this one cannot be read/],
      ['redis://127.0.0.1:99999', /^--redis must be a URL of the form .*cannot be read/],
      ['redis://127.0.0.1:0', /^--redis names port 0/],
      ['redis://[::1', /^--redis must be a URL of the form .*cannot be read/],
      ['redis://:@', /^--redis must be a URL of the form .*cannot be read/],
      ['redis://127.0.0.1:6379/1?db=2', /^--redis must end with its database number: it takes no \?options/],
      ['http://127.0.0.1:6379', /^--redis must be a URL of the form/],
    ]
    for (const [url, message] of refused) {
      expect(() => parseServeArgs(['--redis', url], {})).toThrow(message)
      expect(() => parseServeArgs([], { LEASEHOLD_REDIS: url })).toThrow(new RegExp(`^LEASEHOLD_REDIS ${message.source.slice('^--redis '.length)}`))
    }
  })

  test('-0 is no whole number: a setting whose minimum is 0 refuses it as one whose minimum is 1 does', () => {
    for (const flag of ['port', 'workers', 'retain-days', 'drain-grace-s', 'heartbeat-grace-s', 'worker-nice', 'total-units']) {
      expect(() => parseServeArgs([`--${flag}`, '-0'], {})).toThrow(new RegExp(`^--${flag} must be a whole number from \\d+ to \\d+ \\(got "-0"\\)$`))
      expect(() => parseServeArgs([`--${flag}`, '-00'], {})).toThrow(/\(got "-00"\)$/)
    }
    expect(parseServeArgs(['--port', '0'], {}).port).toBe(0)
  })

  test('a data dir that begins or ends with whitespace is refused, not made new and empty', () => {
    for (const [args, env, source] of [
      [['--data-dir', ' '], {}, '--data-dir'],
      [['--data-dir', '/srv/lh '], {}, '--data-dir'],
      [[], { LEASEHOLD_DATA_DIR: '/srv/lh ' }, 'LEASEHOLD_DATA_DIR'],
      [[], { LEASEHOLD_DATA_DIR: '\t/srv/lh' }, 'LEASEHOLD_DATA_DIR'],
    ] as const) {
      expect(() => parseServeArgs([...args], { ...env })).toThrow(new RegExp(`^${source} begins or ends with whitespace, which would name another folder than the one meant: remove it \\(got ".*"\\)$`))
    }
  })

  test('a list that names nothing but commas and blanks is refused: --exec-allow and --allowed-host as --write-allow and --worker-streams are', () => {
    expect(() => parseServeArgs(['--exec-allow', ','], {})).toThrow(/^--exec-allow names no program: it holds only commas and blanks \(leave it out for none\) \(got ","\)$/)
    expect(() => parseServeArgs(['--exec-allow', ' '], {})).toThrow(/^--exec-allow names no program/)
    expect(() => parseServeArgs(['--allowed-host', ','], {})).toThrow(/^--allowed-host names no host: it holds only commas and blanks/)
    expect(() => parseServeArgs([], { LEASEHOLD_ALLOWED_HOSTS: ' , ' })).toThrow(/^LEASEHOLD_ALLOWED_HOSTS names no host/)
    expect(parseServeArgs([], {}).execAllow).toEqual([])
    expect(parseServeArgs([], {}).allowedHosts).toEqual([])
    expect(parseServeArgs(['--allowed-host', 'a.example, B.example'], {}).allowedHosts).toEqual(['a.example', 'b.example'])
  })

  test("an API field's name given to serve names the flag that sets it: busy_rating, capacity, ttl_sec", () => {
    expect(() => parseServeArgs(['--busy-rating', '8'], {})).toThrow(/^Unknown option '--busy-rating' \(did you mean --busy\?\)$/)
    expect(() => parseServeArgs(['--busy_rating', '8'], {})).toThrow(/^Unknown option '--busy_rating' \(did you mean --busy\?\)$/)
    expect(() => parseServeArgs(['--capacity', '5'], {})).toThrow(/^Unknown option '--capacity' \(did you mean --total-units\?\)$/)
    expect(() => parseServeArgs(['--ttl_sec', '5'], {})).toThrow(/^Unknown option '--ttl_sec' \(did you mean --lease-ttl-s\?\)$/)
  })

  test('a Redis prefix over 100 characters says the limit in words', () => {
    expect(() => parseServeArgs([], { LEASEHOLD_REDIS_PREFIX: 'p'.repeat(101) })).toThrow(/^LEASEHOLD_REDIS_PREFIX must be at most 100 characters \(got "p+"\)$/)
    expect(parseServeArgs([], { LEASEHOLD_REDIS_PREFIX: 'p'.repeat(100) }).redisPrefix).toBe('p'.repeat(100))
  })

  test('--host [::1], the URL form of an IPv6 address, is taken as the address ::1', () => {
    expect(parseServeArgs(['--host', '[::1]'], {}).host).toBe('::1')
    expect(parseServeArgs(['--host', '::1'], {}).host).toBe('::1')
  })

  test('LEASEHOLD_WAL_VFS takes on or off (1/0, true/false, yes/no); another value is refused, not read as on', () => {
    for (const value of ['off', 'OFF', '0', 'no', 'on', '1', 'true', 'yes']) expect(() => parseServeArgs([], { LEASEHOLD_WAL_VFS: value })).not.toThrow()
    expect(() => parseServeArgs([], { LEASEHOLD_WAL_VFS: 'disable' })).toThrow(/^LEASEHOLD_WAL_VFS must be on or off \(also 1\/0, true\/false, yes\/no\) \(got "disable"\)$/)
  })

  test('a LEASEHOLD_* variable no command reads is a warning naming it, and the one likely meant', () => {
    expect(serveVariableWarnings({ LEASEHOLD_ALLOWED_HOST: 'x', LEASEHOLD_WORKER: '0', LEASEHOLD_ZZZ: '1', LEASEHOLD_PORT: '1', LEASEHOLD_TOKEN: 't', LEASEHOLD_WAL_VFS: 'off', PATH: '/bin' })).toEqual([
      'leasehold: warning: LEASEHOLD_ALLOWED_HOST is no variable Leasehold reads, and is ignored (did you mean LEASEHOLD_ALLOWED_HOSTS?)',
      'leasehold: warning: LEASEHOLD_WORKER is no variable Leasehold reads, and is ignored (did you mean LEASEHOLD_WORKERS?)',
      'leasehold: warning: LEASEHOLD_ZZZ is no variable Leasehold reads, and is ignored',
    ])
    expect(serveVariableWarnings({ LEASEHOLD_URL: 'u', LEASEHOLD_TIMEOUT_S: '3', LEASEHOLD_WORKER_LINK: 'x' })).toEqual([])
  })

  test('every LEASEHOLD_* variable the programs read is one serve knows: none is warned of', () => {
    // Each name spelt out in the host's, the worker's or the shared code; not an error code, and not the doc's example of a typo.
    const notVariables = new Set(['LEASEHOLD_DAMAGED_VALUE', 'LEASEHOLD_ALLOWED_HOST'])
    const named = new Set<string>()
    for (const dir of ['src-main', 'src-worker', 'src-shared']) {
      for (const file of readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((name) => name.endsWith('.ts'))) {
        for (const [name] of readFileSync(join(dir, file), 'utf8').matchAll(/\bLEASEHOLD_[A-Z][A-Z_]*[A-Z]\b/g)) if (!notVariables.has(name)) named.add(name)
      }
    }
    expect(named.size).toBeGreaterThan(20)
    expect(serveVariableWarnings(Object.fromEntries([...named].map((name) => [name, 'x'])))).toEqual([])
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
