/**
 * The command line under the mistakes and faults a user meets: a value that only looks like a
 * number, a URL without its scheme, a reader that closes the output, a host that goes away while
 * a command waits on it, a folder of handlers that is not there. Each is one clear line and the
 * right exit status (2: the user's mistake; 1: a fault; 141: the output was closed), never a
 * stack trace and never silence.
 */
import BetterSqlite3 from 'better-sqlite3'
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process'
import { chmodSync, closeSync, copyFileSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer as createHttpServer, type Server, type ServerResponse } from 'node:http'
import { type AddressInfo, createServer } from 'node:net'
import { userInfo } from 'node:os'
import { join, relative } from 'node:path'
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest'
import { MAX_DELAY_MS } from '../../src-main/engine/verbs/jobs'
import { MAX_DELAY_MS as COMMAND_MAX_DELAY_MS, parseTime } from '../../src-main/commands/submit'
import { ProgressLine, waitForJob } from '../../src-main/commands/wait'
import { defaultDataDir } from '../../src-shared/client-target'
import { limitRetryLines } from '../../src-shared/log-limiter'
import { startTestHost, tempDir, type TestHost } from '../helpers/host'
import { BIN, runCli, runCliAsync } from '../helpers/process'

/** The runner's own LEASEHOLD_* settings must not pick the host. */
const CLEAN_ENV: NodeJS.ProcessEnv = { LEASEHOLD_URL: undefined, LEASEHOLD_TOKEN: undefined, LEASEHOLD_DATA_DIR: undefined }

let host: TestHost
const children: ChildProcess[] = []

beforeAll(async () => {
  host = await startTestHost({ workers: 0 })
})
afterAll(async () => {
  await host.dispose()
})
afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
})

function run(args: string[], env: NodeJS.ProcessEnv = {}, input?: string) {
  return runCliAsync(args, { ...CLEAN_ENV, ...env }, (child) => children.push(child), input)
}

const lines = (text: string) => text.trim().split('\n').filter(Boolean)

/** Two good lines, then one whose JSON the host could not store (a lone surrogate): nothing is submitted. */
const EACH_WITH_LONE_SURROGATE = join(tempDir('each-'), 'jobs.txt')
writeFileSync(EACH_WITH_LONE_SURROGATE, '{"a":2}\n{"a":3}\n{"a":"\\ud800"}\n')

/** A loopback port nothing listens on. */
const freePort = () =>
  new Promise<number>((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo
      server.close(() => resolve(port))
    })
  })

describe('a usage mistake is one line and exit 2', () => {
  test.each([
    ['a count that is empty', ['jobs', '--limit', ''], '--limit needs a value'],
    ['a count in hexadecimal', ['jobs', '--limit', '0x5'], '--limit must be a whole number from 1 to 500 (got "0x5")'],
    ['a count in exponent form', ['submit', '--type', 't', '--units', '1e1'], '--units must be a whole number'],
    ['a state no listed job has', ['jobs', '--state', 'LEASED'], '--state LEASED finds nothing: a LEASED job is listed as RUNNING (use --state RUNNING)'],
    ['a queue with an empty name', ['queue', 'pause', ''], 'queue pause needs the name of a queue'],
    ['two queues at once', ['queue', 'pause', 'a', 'b'], 'queue pause takes one QUEUE (got also "b")'],
    ['a queue named as a dot segment', ['queue', 'resume', '..'], 'queue resume: ".." is not a queue name: cannot be "." or ".."'],
    ['a schedule named as a dot segment, as a queue is refused', ['schedule', 'rm', '..'], 'schedule rm: ".." is not a schedule name: cannot be "." or ".."'],
    ['a schedule named as the other dot segment', ['schedule', 'pause', '.'], 'schedule pause: "." is not a schedule name: cannot be "." or ".."'],
    ['a blocker named as a dot segment, as a queue is refused', ['blockers', 'resolve', '..', 'retry'], 'blockers resolve: ".." is not a blocker id: cannot be "." or ".."'],
    ['a queue name longer than a queue may have, said of QUEUE (not as a --queue flag)', ['queue', 'pause', 'q'.repeat(201)], 'leasehold: queue pause: a queue name is at most 200 characters (got 201)'],
    ['a delay past the host’s longest', ['submit', '--type', 't', '--in', '99999d'], '--in must be at most 100 years (36500d) (got "99999d")'],
    ['a null payload', ['submit', '--type', 't', '--payload', 'null'], '--payload is null: a payload cannot be null'],
    ['a payload the host could not store as sent', ['submit', '--type', 't', '--payload', '{"a":"\\ud800"}'], '--payload: payload.a: must be well-formed Unicode'],
    ['a line of --each the host could not store as sent', ['submit', '--type', 't', '--each', EACH_WITH_LONE_SURROGATE], `--each ${EACH_WITH_LONE_SURROGATE} line 3: payload.a: must be well-formed Unicode`],
    ['a URL without its scheme', ['status', '--url', '127.0.0.1:7878', '--token', 'x'], '--url must be an http:// or https:// URL'],
    ['an unknown flag', ['schedule', 'list', '--bogus'], "Unknown option '--bogus'"],
    ['the version asked after a command, where it is no flag of the command', ['status', '-v'], "Unknown option '-v': the version is `leasehold --version`, given before any command"],
    ['the version asked of the worker program', ['worker', '--version'], "Unknown option '--version': the version is `leasehold --version`, given before any command"],
    ['a value only the host refuses, named by its flag', ['submit', '--type', 't', '--key', 'k'.repeat(201)], '--key: Too big: expected string to have <=200 characters'],
    ['a value only the host refuses, its field the flag\'s name', ['submit', '--type', 't', '--queue', 'q'.repeat(201)], '--queue: Too big: expected string to have <=200 characters'],
    ['a schedule\'s job value only the host refuses, named by its flag', ['schedule', 'add', 'n', '--cron', '* * * * *', '--type', 't', '--queue', 'q'.repeat(201)], 'leasehold: --queue: Too big'],
    ['a cost over the whole capacity, named by its flag as schedule add names it', ['submit', '--type', 't', '--units', '101'], 'leasehold: --units: 101 exceeds the total capacity'],
    ['a schedule\'s cost over the whole capacity', ['schedule', 'add', 'n', '--cron', '* * * * *', '--type', 't', '--units', '101'], 'leasehold: --units: 101 exceeds the total capacity'],
    ['a cursor the host never gave out', ['jobs', '--cursor', 'garbage'], 'cursor: not a cursor this server gave out'],
    ['a wait timeout with nothing to wait for', ['submit', '--type', 't', '--wait-timeout', '5s'], '--wait-timeout goes with --wait (how long to wait for the job)'],
    ['a wait timeout that is not a duration', ['submit', '--type', 't', '--wait', '--wait-timeout', '5'], '--wait-timeout must be a duration such as 90s, 10m, 2h, 1d or 1h30m (got "5")'],
    ['a flag named as the API names it', ['submit', '--type', 't', '--cost', '3'], "Unknown option '--cost' (did you mean --units?)"],
    ['a flag named as the API field, written as there', ['submit', '--type', 't', '--cost_units', '3'], "Unknown option '--cost_units' (did you mean --units?)"],
    ['a flag named as the API field, with dashes', ['submit', '--type', 't', '--run-at', '2026-01-01T00:00:00Z'], "Unknown option '--run-at' (did you mean --at?)"],
    ['the job type named as the API names it', ['submit', '--type', 't', '--job-type', 't'], "Unknown option '--job-type' (did you mean --type?)"],
    ['an idempotency key named as the API names it', ['submit', '--type', 't', '--client-request-id', 'k'], "Unknown option '--client-request-id' (did you mean --key?)"],
    ['a schedule’s time zone named as the API names it', ['schedule', 'add', 'n', '--cron', '* * * * *', '--type', 't', '--timezone', 'UTC'], "Unknown option '--timezone' (did you mean --tz?)"],
    ['a misspelt flag', ['submit', '--type', 't', '--priorty', '3'], "Unknown option '--priorty' (did you mean --priority?)"],
    ['the start of one flag', ['jobs', '--lim', '3'], "Unknown option '--lim' (did you mean --limit?)"],
    ['a typo between two flags', ['submit', '--type', 't', '--ky', 'k'], "Unknown option '--ky' (did you mean --key?)"],
    ['help on no command', ['help', 'bogus'], 'no help for "bogus": it is not a command'],
    ['a bulk retry flag given with one job', ['jobs', 'retry', '01a24afb-3796-8000-8000-0000018ea6f8', '--dry-run'], '--dry-run goes with jobs retry --dead-letter only; jobs retry JOB retries one job, without it'],
    ['a job id with the retry of every dead letter', ['jobs', 'retry', '01a24afb-3796-8000-8000-0000018ea6f8', '--dead-letter'], 'jobs retry --dead-letter retries every dead-lettered job: it takes no job id'],
    ['an empty job id', ['jobs', 'show', ''], 'jobs show needs one job id (got an empty one)'],
    ['an empty job id to an action', ['jobs', 'cancel', ' '], 'jobs cancel needs one job id (got an empty one)'],
    ['an end of an id too short to tell jobs apart', ['jobs', 'show', '3235d8'], '"3235d8" is too short to name a job: give its whole id, or its end with 8 characters or more'],
    ['a flag of another jobs subcommand', ['jobs', 'list', '--dry-run'], '--dry-run belongs to jobs retry --dead-letter'],
    ['a flag of the jobs actions given to the list', ['jobs', '--by', 'x'], '--by belongs to jobs cancel, retry and run-now'],
    ['a flag of the list given to an action', ['jobs', 'show', 'abcdef12', '--limit', '3'], '--limit belongs to jobs list'],
    ['a flag of blockers resolve given to the list', ['blockers', 'list', '--note', 'x'], '--note belongs to blockers resolve'],
    ['a flag of queue pause given to the list', ['queue', 'list', '--by', 'me'], '--by belongs to queue pause and resume'],
    ['a typo of another subcommand’s flag', ['jobs', '--reasn', 'x'], "Unknown option '--reasn' (did you mean --reason? it belongs to jobs cancel)"],
  ])('%s', async (_what, args, message) => {
    const result = await run([...args, '--data-dir', host.dataDir])
    expect(result.status, result.stderr).toBe(2)
    expect(lines(result.stderr)).toEqual([expect.stringContaining(message)])
    expect(result.stderr).not.toContain('To specify a positional argument')
  })

  test.each([
    ['a worker’s concurrency that is not a number', ['worker', '--concurrency', 'abc'], '--concurrency must be a whole number from 1 to 256 (got "abc")'],
    ['a worker’s negative grace', ['worker', '--grace-s', '-1'], '--grace-s must be a whole number from 0 to 3600 (got "-1")'],
    ['a worker id the host would refuse', ['worker', '--worker-id', 'w'.repeat(201)], '--worker-id must be 1 to 200 characters (got 201)'],
    ['a worker id reserved to the host’s local workers', ['worker', '--worker-id', 'local-2.1'], "--worker-id: Worker id local-2.1 is reserved to the host's own local workers (local-<slot>.<generation>): give this worker another id"],
    ['a worker id that reads as a local worker’s (another case)', ['worker', '--worker-id', 'LOCAL-2.1'], "--worker-id: Worker id LOCAL-2.1 is reserved to the host's own local workers (local-<slot>.<generation>): give this worker another id"],
    ['a worker id that reads as a local worker’s (a full-width digit)', ['worker', '--worker-id', 'local-\uff12.1'], "--worker-id: Worker id local-\uff12.1 is reserved to the host's own local workers (local-<slot>.<generation>): give this worker another id"],
    ['a blank worker id', ['worker', '--worker-id', ' '], '--worker-id must not be blank (got " ")'],
    ['a worker id with whitespace around it', ['worker', '--worker-id', ' local-2.1 '], '--worker-id must not begin or end with whitespace (got " local-2.1 ")'],
    ['a worker id with an invisible character', ['worker', '--worker-id', 'w\u200b1'], '--worker-id must not contain control or invisible characters (a newline, a bidi mark, a zero-width space) (got "w\\u200b1")'],
    ['more queues than a claim may name', ['worker', '--streams', Array.from({ length: 51 }, (_, i) => `q${i}`).join(',')], '--streams names at most 50 queues (got 51)'],
    ['a queue name the host would refuse', ['worker', '--streams', `a,${'q'.repeat(201)}`], `--streams: "${'q'.repeat(40)}…" is not a queue name: Too big: expected string to have <=200 characters`],
    ['a worker’s queue named as a dot segment', ['worker', '--streams', 'a,.'], '--streams: "." is not a queue name: cannot be "." or ".." (a URL path drops such a segment)'],
    ['a worker’s empty list of queues', ['worker', '--streams', ' , '], '--streams needs at least one queue name (leave it out for the default queue)'],
    ['a worker’s Redis URL whose database is no number', ['worker', '--redis', 'redis://127.0.0.1:7969/abc'], '--redis names the database "abc": the path after the port is a database number from 0 to 9999 (0 when left out) (got "redis://127.0.0.1:7969/abc")'],
    ['a worker’s Redis URL whose port is no number', ['worker', '--redis', 'redis://127.0.0.1:notaport'], '--redis must be a URL of the form redis://[user:password@]host[:port][/db], or rediss:// for TLS: this one cannot be read (a port that is no number from 1 to 65535, an unclosed [, no host) (got "redis://127.0.0.1:notaport")'],
    ['a worker’s list of programs that names none', ['worker', '--exec-allow', ' , '], '--exec-allow names no program: it holds only commas and blanks (leave it out for none) (got " , ")'],
    ['a worker’s grace of -0', ['worker', '--grace-s', '-0'], '--grace-s must be a whole number from 0 to 3600 (got "-0")'],
    ['a token revoked with no id', ['token', 'revoke'], 'usage: leasehold token create --scope worker|admin | list | revoke ID'],
    ['a token created with no scope', ['token', 'create'], '--scope must be one of: worker, admin'],
    ['a token command’s misspelt flag', ['token', 'create', '--scop', 'worker'], "Unknown option '--scop' (did you mean --scope?)"],
    ['a scope given to the list, which it would seem to filter', ['token', 'list', '--scope', 'worker'], '--scope belongs to token create'],
    ['a scope given to a revoke, which it would seem to check', ['token', 'revoke', 'abc', '--scope', 'worker'], '--scope belongs to token create'],
    ['a worker’s misspelt flag', ['worker', '--concurency', '2'], "Unknown option '--concurency' (did you mean --concurrency?)"],
    ['a flag given twice', ['submit', '--type', 'sleep', '--type', 'noop'], '--type is given twice ("sleep", then "noop"): give it once'],
    ['a flag given twice, once with =', ['jobs', '--limit=3', '--state', 'QUEUED', '--limit', '5'], '--limit is given twice ("3", then "5"): give it once'],
    ['a worker’s flag given twice', ['worker', '--streams', 'a', '--streams', 'b'], '--streams is given twice ("a", then "b"): give it once'],
    ['a token command’s flag given twice', ['token', 'create', '--scope', 'worker', '--scope', 'admin'], '--scope is given twice ("worker", then "admin"): give it once'],
    ['a duration with a unit twice', ['submit', '--type', 't', '--in', '1h1h'], '--in must be a duration such as 90s, 10m, 2h, 1d or 1h30m (got "1h1h")'],
    ['a duration with its units out of order', ['submit', '--type', 't', '--wait', '--wait-timeout', '30m1h'], '--wait-timeout must be a duration such as 90s, 10m, 2h, 1d or 1h30m (got "30m1h")'],
  ])('%s is said before the host or its data dir is looked for', async (_what, args, message) => {
    const result = await run([...args, '--data-dir', join(tempDir('no-host-'), 'missing')])
    expect(result.status, result.stderr).toBe(2)
    expect(lines(result.stderr)).toEqual([`leasehold: ${message}`])
  })

  test.each([
    ['the token', ['status', '--token', '']],
    ['the token, written with =', ['status', '--token=']],
    ['the URL', ['status', '--url', '']],
    ['the data dir of a client command', ['status', '--data-dir', '']],
    ['the data dir of check', ['check', '--data-dir', '']],
    ['the data dir of token', ['token', 'list', '--data-dir', '']],
    ['the URL of a worker', ['worker', '--url', '']],
  ])('an empty flag value is a usage error naming the flag, not taken as no flag: %s', async (_what, args) => {
    const flag = /--[a-z-]+/.exec(args.find((arg) => arg.startsWith('--'))!)![0]
    const result = await run(args, { LEASEHOLD_DATA_DIR: host.dataDir })
    expect(result.status, result.stderr).toBe(2)
    expect(lines(result.stderr)).toEqual([`leasehold: ${flag} needs a value`])
  })

  test.each([
    ['--data-dir', ['status', '--data-dir', `${tempDir('lead-')} `], {}],
    ['--data-dir', ['worker', '--data-dir', ' '], {}],
    ['LEASEHOLD_DATA_DIR', ['status'], { LEASEHOLD_DATA_DIR: ` ${tempDir('lead-')}` }],
  ])('a data dir that begins or ends with whitespace is refused by the client commands too, naming %s', async (source, args, env) => {
    const result = await run(args, env)
    expect(result.status, result.stderr).toBe(2)
    expect(lines(result.stderr)).toEqual([expect.stringMatching(new RegExp(`^leasehold: ${source} begins or ends with whitespace, which would name another folder than the one meant: remove it \\(got ".*"\\)$`))])
  })

  test('a token is made only in a data dir a host has started in: a folder with no leasehold.db is refused, and nothing is written there', async () => {
    const folder = tempDir('not-a-data-dir-')
    mkdirSync(folder, { recursive: true })
    const result = await run(['token', 'create', '--scope', 'worker', '--data-dir', folder])
    expect(result.status, result.stderr).toBe(2)
    expect(lines(result.stderr)).toEqual([`leasehold: ${folder} is not a Leasehold data directory (it holds no leasehold.db): give the host's --data-dir, which its first start makes`])
    expect(readdirSync(folder)).toEqual([])
    expect((await run(['token', 'create', '--scope', 'worker', '--data-dir', host.dataDir])).status).toBe(0)
  })

  test('bytes that are not UTF-8 are refused alike in a flag, a line of --each and a payload file, naming where they are; nothing is submitted', async () => {
    const dir = tempDir('utf8-')
    mkdirSync(dir, { recursive: true })
    writeFileSync(join(dir, 'jobs.txt'), Buffer.concat([Buffer.from('{"a":1}\n{"a":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}\n')]))
    writeFileSync(join(dir, 'payload.json'), Buffer.concat([Buffer.from('{"a":"'), Buffer.from([0xff]), Buffer.from('"}')]))
    // A flag's bytes go through a shell: a JavaScript string cannot hold them as an argument. (Not
    // spawnSync: a command that went on to submit would wait on the host this process runs.)
    const shell = spawn('/bin/sh', ['-c', `exec "$0" "$1" submit --type "$(printf '\\377\\376')" --queue utf8-refused --data-dir "$2"`, process.execPath, BIN, host.dataDir], {
      env: { ...process.env, ...CLEAN_ENV },
      stdio: ['ignore', 'ignore', 'pipe'],
    })
    children.push(shell)
    let flagStderr = ''
    shell.stderr!.on('data', (chunk: Buffer) => (flagStderr += chunk.toString()))
    const flag = { status: await new Promise<number | null>((resolve) => shell.once('close', resolve)), stderr: flagStderr }
    const each = await run(['submit', '--type', 't', '--queue', 'utf8-refused', '--each', join(dir, 'jobs.txt'), '--data-dir', host.dataDir])
    const payload = await run(['submit', '--type', 't', '--queue', 'utf8-refused', '--payload', `@${join(dir, 'payload.json')}`, '--data-dir', host.dataDir])
    expect([flag.status, lines(flag.stderr)]).toEqual([2, ['leasehold: --type is not valid UTF-8 text']])
    expect([each.status, lines(each.stderr)]).toEqual([2, [`leasehold: --each ${join(dir, 'jobs.txt')} line 2 is not valid UTF-8 text`]])
    expect([payload.status, lines(payload.stderr)]).toEqual([2, [`leasehold: --payload @${join(dir, 'payload.json')} line 1 is not valid UTF-8 text`]])
    expect(host.engine.listJobs({ limit: 10 }).jobs.filter((job) => job.queue === 'utf8-refused')).toEqual([])
  })

  test('a flag missing its value, followed by another flag, needs a value (not "ambiguous")', async () => {
    const cases: [string[], string][] = [
      [['status', '--data-dir', '--json'], '--data-dir'],
      [['status', '--json', '--data-dir'], '--data-dir'],
      [['jobs', '--state', '--json'], '--state'],
    ]
    for (const [args, flag] of cases) {
      const result = await run(args)
      expect(result.status, result.stderr).toBe(2)
      expect(lines(result.stderr)).toEqual([`leasehold: ${flag} needs a value`])
    }
  })

  test('a value that begins with a dash is taken by the flag before it: a token some releases made (-cwC…) follows --token, and goes to the host', async () => {
    const result = await run(['status', '--url', host.url, '--token', '-cwCgHT-Bp2LQ'])
    expect(result.status, result.stderr).toBe(1)
    expect(result.stderr).not.toContain('needs a value')
    expect(result.stderr).toMatch(/^leasehold: the host at \S+ refused the token/m)
  })

  test('a token with a character an Authorization header cannot carry is refused as not a token, exit 2', async () => {
    const result = await run(['status', '--url', host.url, '--token', `${host.token}\n`])
    expect(result.status, result.stderr).toBe(2)
    expect(lines(result.stderr)).toEqual(['leasehold: --token is not a token: a token is visible ASCII characters only (no spaces, newlines or control characters)'])
  })

  test('an environment variable whose bytes are not UTF-8 is refused as a flag is, naming the variable; serve makes no data dir of it', async () => {
    const parent = tempDir('env-utf8-')
    // The bytes go through a shell: a JavaScript string cannot hold them in an environment.
    const withBytes = (variable: string, value: string, args: string) =>
      new Promise<{ status: number | null; stderr: string }>((resolve) => {
        const shell = spawn('/bin/sh', ['-c', `${variable}="$2$(printf '\\351')" exec "$0" "$1" ${args}`, process.execPath, BIN, value], {
          env: { ...process.env, ...CLEAN_ENV },
          stdio: ['ignore', 'ignore', 'pipe'],
        })
        children.push(shell)
        let stderr = ''
        shell.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
        shell.once('close', (status) => resolve({ status, stderr }))
      })
    const serve = await withBytes('LEASEHOLD_DATA_DIR', join(parent, 'lat'), 'serve --port 0 --workers 0')
    expect([serve.status, lines(serve.stderr)]).toEqual([2, ['leasehold: LEASEHOLD_DATA_DIR is not valid UTF-8 text']])
    expect(readdirSync(parent)).toEqual([])
    const client = await withBytes('LEASEHOLD_URL', `${host.url}/`, 'status')
    expect([client.status, lines(client.stderr)]).toEqual([2, ['leasehold: LEASEHOLD_URL is not valid UTF-8 text']])
  })

  test('a URL with a path of the API (copied from a request) is refused up front, naming what a URL must name, exit 2', async () => {
    const result = await run(['status', '--url', `${host.url}/api/#token=${host.token}`])
    expect(result.status).toBe(2)
    expect(lines(result.stderr)).toEqual([expect.stringContaining('leasehold: --url must name the host only — its scheme, address and port')])
    expect(result.stderr).not.toContain(host.token)
  })

  test('a URL with a path the host serves nothing under is said as such, not as an older release', async () => {
    const result = await run(['status', '--url', `${host.url}/elsewhere`, '--token', host.token])
    expect(result.status).toBe(1)
    expect(lines(result.stderr)).toEqual([expect.stringContaining(`serves no Leasehold API under the path /elsewhere`)])
    expect(result.stderr).not.toContain('older release')
  })

  test('a bad LEASEHOLD_URL is named as the variable, not as --url', async () => {
    const result = await run(['status'], { LEASEHOLD_URL: 'localhost:7878', LEASEHOLD_TOKEN: 'x' })
    expect(result.status).toBe(2)
    expect(lines(result.stderr)).toEqual([expect.stringContaining('LEASEHOLD_URL must be an http:// or https:// URL')])
  })

  test('leasehold with no command prints the help on stderr, exit 2', async () => {
    const result = await run([])
    expect(result.status).toBe(2)
    expect(result.stdout).toBe('')
    expect(result.stderr).toContain('Usage: leasehold')
  })

  test('--at takes ISO 8601 as Date and other tools write it: a fraction of any length (to the millisecond), an offset without its colon', () => {
    expect(parseTime('at', '2027-01-01T00:00:00.123456Z')).toBe('2027-01-01T00:00:00.123Z')
    expect(parseTime('at', '2027-01-01T00:00:00.9999Z')).toBe('2027-01-01T00:00:00.999Z')
    expect(parseTime('at', '2027-01-01T05:30:00+0530')).toBe('2027-01-01T00:00:00.000Z')
    expect(parseTime('at', '2027-01-01T05:30:00+05:30')).toBe('2027-01-01T00:00:00.000Z')
    // A date alone, and 24:00 (which Date.parse would take as the next day's 00:00), stay refused.
    for (const value of ['2027-01-01', '2027-01-01T24:00:00Z', '2027-01-01T00:00:00+5:30', '2027-01-01T00:00:00.Z']) {
      expect(() => parseTime('at', value)).toThrow('--at must be an ISO-8601 time')
    }
  })

  test('--at without a zone names a time of the machine\'s clock: one its clocks skip as summer time begins is refused, not moved an hour', async () => {
    // Europe/Berlin skips 02:00-03:00 on 2027-03-28; 02:30 that night is no time there.
    const berlin = { TZ: 'Europe/Berlin' }
    const skipped = await run(['submit', '--type', 'gap', '--at', '2027-03-28T02:30'], berlin)
    expect(skipped.status).toBe(2)
    expect(lines(skipped.stderr)).toEqual(["leasehold: --at 2027-03-28T02:30 is no time in this machine's time zone: its clocks skip it (a change to summer time); give a time outside the gap, or one with its offset (Z, +01:00)"])
    // The hour after the gap, an offset in the gap's hour, and the hour that repeats in autumn are taken.
    const after = await run(['submit', '--type', 'gap', '--at', '2027-03-28T03:30', '--url', 'http://127.0.0.1:9', '--token', 't'], berlin)
    expect(after.stderr).not.toContain('is no time')
    const offset = await run(['submit', '--type', 'gap', '--at', '2027-03-28T02:30+01:00', '--url', 'http://127.0.0.1:9', '--token', 't'], berlin)
    expect(offset.stderr).not.toContain('is no time')
    const autumn = await run(['submit', '--type', 'gap', '--at', '2027-10-31T02:30', '--url', 'http://127.0.0.1:9', '--token', 't'], berlin)
    expect(autumn.stderr).not.toContain('is no time')
  })

  test('--at without an offset is refused on one line when TZ is a POSIX rule, which Node reads as UTC while the machine\'s clock follows it; with an offset it is taken', async () => {
    const offline = ['--url', 'http://127.0.0.1:9', '--token', 't']
    for (const tz of ['EST5EDT,M3.2.0,M11.1.0', 'CET-1CEST', '<+0545>-5:45']) {
      const local = await run(['submit', '--type', 'rule', '--at', '2027-01-01T10:00:00', ...offline], { TZ: tz })
      expect(local.status).toBe(2)
      expect(lines(local.stderr)).toEqual([
        `leasehold: --at 2027-01-01T10:00:00 has no offset, and this machine's time zone is a rule, not a zone's name (TZ=${JSON.stringify(tz)}), which Node reads as UTC: give the time with its offset (Z, +01:00), or a delay with --in`,
      ])
      const offset = await run(['submit', '--type', 'rule', '--at', '2027-01-01T10:00:00+01:00', ...offline], { TZ: tz })
      expect(offset.stderr).not.toContain('has no offset')
    }
    // UTC's own rule, and a zone whose name has a rule's form (EST5EDT), mean what the clock does.
    for (const tz of ['UTC0', 'EST5EDT']) {
      const local = await run(['submit', '--type', 'rule', '--at', '2027-01-01T10:00:00', ...offline], { TZ: tz })
      expect(local.stderr).not.toContain('has no offset')
    }
  })

  test('--at a local time the clocks pass twice as summer time ends is its first occurrence, as the docs say', () => {
    const tz = process.env.TZ
    process.env.TZ = 'America/New_York'
    try {
      // 01:30 on 7 November 2027 is 01:30 EDT (05:30Z), then 01:30 EST (06:30Z): the first is taken.
      expect(parseTime('at', '2027-11-07T01:30:00')).toBe('2027-11-07T05:30:00.000Z')
      expect(parseTime('at', '2027-11-07T01:30:00-05:00')).toBe('2027-11-07T06:30:00.000Z')
    } finally {
      if (tz === undefined) delete process.env.TZ
      else process.env.TZ = tz
    }
  })

  test('-h COMMAND prints the command\'s help, as COMMAND -h does', async () => {
    const [before, after] = await Promise.all([run(['-h', 'serve']), run(['serve', '-h'])])
    expect([before.status, before.stdout]).toEqual([0, after.stdout])
    expect(before.stdout).toContain('Usage: leasehold serve')
  })

  test('--payload @- with nothing on stdin says stdin is empty, exit 2', async () => {
    const result = await run(['submit', '--type', 't', '--payload', '@-', '--data-dir', host.dataDir], {}, '')
    expect([result.status, lines(result.stderr)]).toEqual([2, ['leasehold: --payload @- is empty: stdin held no JSON (for an empty payload, give {})']])
  })

  test('a payload larger than the host takes names --payload and the host\'s --body-limit, exit 1', async () => {
    const file = join(tempDir('big-payload-'), 'big.json')
    writeFileSync(file, JSON.stringify({ blob: 'x'.repeat(1_100_000) }))
    const result = await run(['submit', '--type', 't', '--payload', `@${file}`, '--data-dir', host.dataDir])
    expect(result.status).toBe(1)
    expect(lines(result.stderr)).toEqual([expect.stringMatching(/^leasehold: --payload makes the job larger than the host takes \(.*\): the host's --body-limit \(LEASEHOLD_BODY_LIMIT\) sets the limit \(payload_too_large\)$/)])
  })

  test('an empty HOME gives way to the home the system names: the default data dir is never relative', () => {
    const saved = process.env.HOME
    process.env.HOME = ''
    try {
      expect(defaultDataDir({}, 'linux')).toBe(join(userInfo().homedir, '.config', 'leasehold'))
    } finally {
      process.env.HOME = saved
    }
  })

  test('the command refuses a delay exactly where the host would', () => {
    expect(COMMAND_MAX_DELAY_MS).toBe(MAX_DELAY_MS)
  })
})

describe('an empty environment variable counts as unset', () => {
  test('LEASEHOLD_TOKEN= leaves the data dir\'s token file to be read', async () => {
    const result = await run(['status', '--json', '--data-dir', host.dataDir], { LEASEHOLD_TOKEN: '' })
    expect(result.status, result.stderr).toBe(0)
  })

  test('LEASEHOLD_URL= leaves the data dir\'s host.json to be read', async () => {
    const result = await run(['status', '--json', '--data-dir', host.dataDir], { LEASEHOLD_URL: '' })
    expect(result.status, result.stderr).toBe(0)
  })

  test('LEASEHOLD_DATA_DIR= is the default data dir, not a data dir named ""', async () => {
    const config = tempDir()
    const result = await run(['status'], { LEASEHOLD_DATA_DIR: '', XDG_CONFIG_HOME: config })
    expect(result.status).toBe(1)
    expect(lines(result.stderr)).toEqual([expect.stringContaining(`no host is running on ${join(config, 'leasehold')}:`)])
  })
})

/** A data dir as a host's first start leaves it, as far as `leasehold token` looks: its database's file. */
function tokenDataDir(): string {
  const dir = tempDir()
  writeFileSync(join(dir, 'leasehold.db'), '')
  return dir
}

describe('leasehold token', () => {
  test('create --json prints {id, scope, token}; list with no tokens says so, and lists the one made', async () => {
    const dir = tokenDataDir()
    const empty = await run(['token', 'list', '--data-dir', dir])
    expect(empty.status).toBe(0)
    expect(lines(empty.stdout)).toEqual(['no scoped tokens (leasehold token create --scope worker makes one)'])
    const created = await run(['token', 'create', '--scope', 'worker', '--json', '--data-dir', dir])
    expect(created.status, created.stderr).toBe(0)
    const made = JSON.parse(created.stdout) as { id: string; scope: string; token: string }
    expect(made).toEqual({ id: expect.any(String), scope: 'worker', token: expect.stringMatching(/^[0-9a-f]{64}$/) })
    expect((await run(['token', 'list', '--data-dir', dir])).stdout).toContain(`${made.id}  worker  `)
  })

  test('list is a table: its columns line up whatever the scopes (worker and admin)', async () => {
    const dir = tokenDataDir()
    for (const scope of ['worker', 'admin', 'worker']) expect((await run(['token', 'create', '--scope', scope, '--data-dir', dir])).status).toBe(0)
    const listed = lines((await run(['token', 'list', '--data-dir', dir])).stdout)
    expect(listed[0]).toMatch(/^ID\s+SCOPE\s+CREATED\s+REVOKED$/)
    const created = listed[0]!.indexOf('CREATED')
    expect(listed).toHaveLength(4)
    for (const row of listed.slice(1)) expect(row.slice(created)).toMatch(/^\d{4}-\d\d-\d\dT/)
  })

  test('a revoke of a token revoked before says it was, exit 0, and keeps its first time; list marks a token not revoked -, as other tables mark an empty cell', async () => {
    const dir = tokenDataDir()
    const made = JSON.parse((await run(['token', 'create', '--scope', 'worker', '--json', '--data-dir', dir])).stdout) as { id: string }
    expect(lines((await run(['token', 'list', '--data-dir', dir])).stdout)[1]).toMatch(/  -$/)
    const first = await run(['token', 'revoke', made.id, '--data-dir', dir])
    expect([first.status, lines(first.stderr)]).toEqual([0, [`leasehold: token ${made.id} revoked`]])
    const listed = lines((await run(['token', 'list', '--data-dir', dir])).stdout)[1]
    const again = await run(['token', 'revoke', made.id, '--data-dir', dir])
    expect([again.status, lines(again.stderr)]).toEqual([0, [`leasehold: token ${made.id} was already revoked; nothing changed`]])
    expect(lines((await run(['token', 'list', '--data-dir', dir])).stdout)[1]).toBe(listed)
  })

  test('token commands run at once keep each other’s changes: every token printed is stored, and a revoke among creates stays', async () => {
    const dir = tokenDataDir()
    const doomed = JSON.parse((await run(['token', 'create', '--scope', 'admin', '--json', '--data-dir', dir])).stdout) as { id: string }
    const create = () => run(['token', 'create', '--scope', 'worker', '--json', '--data-dir', dir])
    const results = await Promise.all([create(), create(), create(), run(['token', 'revoke', doomed.id, '--data-dir', dir]), create(), create(), create()])
    for (const result of results) expect(result.status, result.stderr).toBe(0)
    const printed = results.filter((_, i) => i !== 3).map((r) => (JSON.parse(r.stdout) as { id: string }).id)
    const listed = JSON.parse((await run(['token', 'list', '--json', '--data-dir', dir])).stdout) as { id: string; revoked_at: string | null }[]
    expect(listed.map((t) => t.id).sort()).toEqual([doomed.id, ...printed].sort())
    expect(listed.find((t) => t.id === doomed.id)!.revoked_at).not.toBeNull()
  })
})

describe('a thing the host or the data dir does not have is a failure, exit 1, in every command', () => {
  test.each([
    ['a token', ['token', 'revoke', 'nosuch'], 'there is no token nosuch'],
    ['a schedule', ['schedule', 'rm', 'nosuch'], 'No schedule nosuch'],
    ['a blocker', ['blockers', 'resolve', 'nosuch', 'retry'], 'nosuch'],
    ['a job', ['jobs', 'show', '00000000-0000-4000-8000-000000000000'], '00000000-0000-4000-8000-000000000000'],
  ])('%s', async (_what, args, message) => {
    const result = await run([...args, '--data-dir', host.dataDir])
    expect(result.status, result.stderr).toBe(1)
    expect(lines(result.stderr)).toEqual([expect.stringContaining(message)])
  })
})

describe('input files', () => {
  test('a payload file that starts with a byte-order mark is read as the JSON after it', async () => {
    const dir = tempDir()
    mkdirSync(dir, { recursive: true })
    const file = join(dir, 'payload.json')
    writeFileSync(file, '\uFEFF{"from":"notepad"}')
    const result = await run(['submit', '--type', 'bom', '--payload', `@${file}`, '--json', '--data-dir', host.dataDir])
    expect(result.status, result.stderr).toBe(0)
    expect(JSON.parse(result.stdout).payload).toEqual({ from: 'notepad' })
  })
})

/**
 * Runs `leasehold <args>` with its stdout or its stderr on /dev/full, where every write fails with
 * ENOSPC (as on a full disk); the other stream is read. `input`, if given, is its stdin.
 */
async function runOnFullDevice(full: 'stdout' | 'stderr', args: string[], input?: string) {
  const device = openSync('/dev/full', 'w')
  try {
    const child = spawn(process.execPath, [BIN, ...args], {
      env: { ...process.env, ...CLEAN_ENV },
      stdio: [input === undefined ? 'ignore' : 'pipe', full === 'stdout' ? device : 'pipe', full === 'stderr' ? device : 'pipe'],
    })
    children.push(child)
    if (input !== undefined) child.stdin!.end(input)
    let text = ''
    ;(full === 'stdout' ? child.stderr : child.stdout)!.on('data', (chunk: Buffer) => (text += chunk.toString()))
    const started = Date.now()
    const status = await new Promise<number | null>((resolve) => child.once('close', resolve))
    return { status, text, ms: Date.now() - started }
  } finally {
    closeSync(device)
  }
}

describe('stderr is for information: a command whose stderr cannot be written has the result and exit status its help gives', () => {
  test('an unknown command still exits 2', async () => {
    expect((await runOnFullDevice('stderr', ['bogus'])).status).toBe(2)
  })

  test('jobs prints its table and exits 0, though the line saying there are more jobs cannot be written', async () => {
    for (let i = 0; i < 2; i++) host.engine.submit({ job_type: 'stderr-full', cost_units: 1, queue: 'stderr-full' })
    const result = await runOnFullDevice('stderr', ['jobs', '--type', 'stderr-full', '--limit', '1', '--data-dir', host.dataDir])
    expect(result.status).toBe(0)
    expect(lines(result.text)).toHaveLength(2)
  })

  test('submit --wait follows the job for as long as it runs, and prints its id', async () => {
    const result = await runOnFullDevice('stderr', ['submit', '--type', 'stderr-wait', '--queue', 'stderr-full', '--wait', '--wait-timeout', '1500ms', '--data-dir', host.dataDir])
    // Nobody takes the job: the wait ends at its timeout (124), not at the first line it could not write.
    expect(result.status).toBe(124)
    expect(result.ms).toBeGreaterThanOrEqual(1500)
    expect(host.engine.getJob(result.text.trim()).job_type).toBe('stderr-wait')
  })

  test('a repeat of --key answers with the job, exit 0', async () => {
    const first = await run(['submit', '--type', 'stderr-key', '--queue', 'stderr-full', '--key', 'stderr-full-1', '--data-dir', host.dataDir])
    const again = await runOnFullDevice('stderr', ['submit', '--type', 'stderr-key', '--queue', 'stderr-full', '--key', 'stderr-full-1', '--data-dir', host.dataDir])
    expect([again.status, again.text]).toEqual([0, first.stdout])
  })
})

describe('an output that cannot be written is one line on stderr, exit 1, naming what was done', () => {
  test('jobs says it once, and not the line that follows the table', async () => {
    for (let i = 0; i < 2; i++) host.engine.submit({ job_type: 'stdout-full', cost_units: 1, queue: 'stdout-full' })
    const result = await runOnFullDevice('stdout', ['jobs', '--type', 'stdout-full', '--limit', '1', '--data-dir', host.dataDir])
    expect([result.status, lines(result.text)]).toEqual([1, ['leasehold: cannot write the output (ENOSPC)']])
  })

  test('submit names the job it stored, whose id it could not print', async () => {
    const result = await runOnFullDevice('stdout', ['submit', '--type', 'stdout-one', '--queue', 'stdout-full', '--data-dir', host.dataDir])
    const [job] = host.engine.listJobs({ job_type: 'stdout-one' }).jobs
    expect([result.status, lines(result.text)]).toEqual([1, [`leasehold: cannot write the output (ENOSPC); job ${job!.id} was submitted`]])
  })

  test('submit --each sends no more requests, and says which lines were submitted and from which line to go on', async () => {
    const result = await runOnFullDevice('stdout', ['submit', '--type', 'stdout-each', '--queue', 'stdout-each', '--each', '-', '--data-dir', host.dataDir], '{}\n'.repeat(2500))
    expect(result.status).toBe(1)
    expect(lines(result.text)).toEqual([
      'leasehold: cannot write the output (ENOSPC); 1,000 jobs of lines 1 to 1000 were submitted (leasehold jobs lists them); the jobs from line 1001 on were not submitted',
    ])
    const { queues } = (await (await host.call('/api/queues')).json()) as { queues: { queue: string; counts: Record<string, number> }[] }
    expect(queues.find((q) => q.queue === 'stdout-each')?.counts.QUEUED).toBe(1000)
  })
})

describe('a reader that closes the output', () => {
  test('ends submit --each quietly with exit 141, and sends no more jobs: only the request in flight then may land', async () => {
    const child = spawn(process.execPath, [BIN, 'submit', '--type', 'piped', '--queue', 'piped', '--each', '-', '--data-dir', host.dataDir], {
      env: { ...process.env, ...CLEAN_ENV },
      stdio: ['pipe', 'pipe', 'pipe'],
    })
    children.push(child)
    let stderr = ''
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    // A reader that closed before anything came (`| true`): whenever the reader closes, the first
    // write after it fails, and then no request is sent. Closed at once, the count does not hang on
    // how soon this process would read a first chunk and close, which under load may be after the
    // command wrote a second request's ids into the pipe.
    child.stdout!.destroy()
    child.stdin!.end('{}\n'.repeat(5000))
    const status = await new Promise<number | null>((resolve) => child.once('close', resolve))
    expect(status).toBe(141)
    expect(stderr).toBe('')
    const { queues } = (await (await host.call('/api/queues')).json()) as { queues: { queue: string; counts: Record<string, number> }[] }
    const submitted = queues.find((q) => q.queue === 'piped')?.counts.QUEUED ?? 0
    // The first request, whose ids could not be written, and at most the one sent while they were: no third.
    expect(submitted).toBeGreaterThanOrEqual(1000)
    expect(submitted).toBeLessThanOrEqual(2000)
  })
})

describe('leasehold check', () => {
  test('with --url and --token, and no database in the data dir, the host at that URL checks its own file', async () => {
    const empty = tempDir()
    mkdirSync(empty, { recursive: true })
    const result = await run(['check', '--quick', '--url', host.url, '--token', host.token, '--data-dir', empty])
    expect(result.status, result.stderr).toBe(0)
    expect(lines(result.stdout)).toEqual([expect.stringContaining(`${join(host.dataDir, 'leasehold.db')} passed the integrity check`)])
  })

  test('a host named by LEASEHOLD_URL and LEASEHOLD_TOKEN checks its own file, as one named by the flags does', async () => {
    const empty = tempDir()
    const result = await run(['check', '--quick', '--data-dir', empty], { LEASEHOLD_URL: host.url, LEASEHOLD_TOKEN: host.token })
    expect(result.status, result.stderr).toBe(0)
    expect(lines(result.stdout)).toEqual([expect.stringContaining(`${join(host.dataDir, 'leasehold.db')} passed the integrity check`)])
  })

  test('a host named by --url, with no data dir named, checks its own file, not the default data dir\'s (which may be any other host\'s)', async () => {
    const config = tempDir()
    mkdirSync(join(config, 'leasehold'), { recursive: true })
    writeFileSync(join(config, 'leasehold', 'leasehold.db'), 'not a database at all, but long enough to be read as one\n'.repeat(100))
    const result = await run(['check', '--quick', '--url', host.url, '--token', host.token], { XDG_CONFIG_HOME: config })
    expect(result.status, result.stderr).toBe(0)
    expect(lines(result.stdout)).toEqual([expect.stringContaining(`${join(host.dataDir, 'leasehold.db')} passed the integrity check`)])
    const json = await run(['check', '--quick', '--json'], { XDG_CONFIG_HOME: config, LEASEHOLD_URL: host.url, LEASEHOLD_TOKEN: 'wrong' })
    expect(json.status).toBe(1)
    expect(JSON.parse(json.stdout)).toMatchObject({ path: null, ok: false, problems: [] })
  })

  test('without --url, no database in the data dir is one line naming the file and both ways to name it, exit 1', async () => {
    const empty = tempDir()
    mkdirSync(empty, { recursive: true })
    const result = await run(['check', '--data-dir', empty])
    expect(result.status).toBe(1)
    expect(lines(result.stderr)).toEqual([`leasehold: there is no database at ${join(empty, 'leasehold.db')} (give the data directory with --data-dir, or a host with --url and --token)`])
  })

  test('with --json a file that cannot be checked is said on stdout too, as {path, ok: false, problems, error}', async () => {
    const damaged = tempDir()
    writeFileSync(join(damaged, 'leasehold.db'), 'not a database at all, but long enough to be read as one\n'.repeat(100))
    const missing = tempDir()
    for (const dir of [damaged, missing]) {
      const result = await run(['check', '--json', '--data-dir', dir])
      expect(result.status).toBe(1)
      const answer = JSON.parse(result.stdout) as { path: string; ok: boolean; problems: string[]; error: string }
      expect(answer).toEqual({ path: join(dir, 'leasehold.db'), ok: false, problems: [], error: expect.any(String) })
      expect(lines(result.stderr)).toEqual([`leasehold: ${answer.error}`])
    }
  })

  test('a directory where the database file should be is named as such, not as a failing disk, exit 1', async () => {
    const dir = tempDir()
    mkdirSync(join(dir, 'leasehold.db'), { recursive: true })
    const result = await run(['check', '--data-dir', dir])
    expect(result.status).toBe(1)
    expect(lines(result.stderr)).toEqual([`leasehold: ${join(dir, 'leasehold.db')} is a directory, not a database file; it was not checked`])
  })

  // Run with spawnSync's timeout: a command that opened a FIFO would wait for its other end for good.
  test.skipIf(process.platform === 'win32').each([
    ['leasehold.db', '{path} is a FIFO, not a database file; it was not checked'],
    ['leasehold.db-wal', 'cannot open {path} (it is a FIFO, not a regular file); {db} was left untouched'],
    ['leasehold.db-shm', 'cannot open {path} (it is a FIFO, not a regular file); {db} was left untouched'],
  ])('a FIFO at %s is named as not a regular file, never opened, exit 1', async (name, expected) => {
    const dir = tempDir()
    const db = join(dir, 'leasehold.db')
    if (name !== 'leasehold.db') new BetterSqlite3(db).close()
    execFileSync('mkfifo', [join(dir, name)])
    const result = runCli(['check', '--data-dir', dir])
    expect(result.status, result.stderr).toBe(1)
    expect(lines(result.stderr)).toEqual([`leasehold: ${expected.replace('{path}', join(dir, name)).replace('{db}', db)}`])
  })

  test.skipIf(process.platform === 'win32').each([
    ['host.json', ['status'], 'cannot read {path} (it is a FIFO, not a regular file): remove it, or give --url and --token'],
    ['worker-tokens.json', ['token', 'list'], 'cannot read {path} (it is a FIFO, not a regular file)'],
  ])('a FIFO at the data dir\'s %s is named by the command that reads it, never opened, exit 1', async (name, args, expected) => {
    const dir = tokenDataDir()
    execFileSync('mkfifo', [join(dir, name)])
    const result = runCli([...args, '--data-dir', dir])
    expect(result.status, result.stderr).toBe(1)
    expect(lines(result.stderr)).toEqual([`leasehold: ${expected.replace('{path}', join(dir, name))}`])
  })

  test('another program’s SQLite file is not passed as sound: it is named as not a Leasehold database, as serve names it, exit 1', async () => {
    const dir = tempDir()
    mkdirSync(dir, { recursive: true })
    const other = new BetterSqlite3(join(dir, 'leasehold.db'))
    other.exec('CREATE TABLE photos (id INTEGER PRIMARY KEY, path TEXT)')
    other.close()
    const result = await run(['check', '--data-dir', dir])
    expect(result.status).toBe(1)
    expect(lines(result.stderr)).toEqual([`leasehold: ${join(dir, 'leasehold.db')} is not a Leasehold database (serve refuses it); it was not checked`])
  })

  test('a stopped host’s data dir is left as it was: no -wal or -shm of the check’s own, and a killed host’s -wal kept', async () => {
    const stopped = await startTestHost({ workers: 0 })
    await stopped.call('/api/scheduler/jobs/submit', { method: 'POST', json: { job_type: 'kept', cost_units: 1 } })
    await stopped.stop()
    const before = readdirSync(stopped.dataDir).sort()
    expect(before).not.toContain('leasehold.db-wal')
    const result = await run(['check', '--quick', '--data-dir', stopped.dataDir])
    expect(result.status, result.stderr).toBe(0)
    expect(readdirSync(stopped.dataDir).sort()).toEqual(before)

    // A killed host's log holds committed jobs: the check reads it and leaves it for the next start.
    const killed = tempDir()
    mkdirSync(killed, { recursive: true })
    for (const file of readdirSync(stopped.dataDir)) copyFileSync(join(stopped.dataDir, file), join(killed, file))
    const log = new BetterSqlite3(join(killed, 'leasehold.db'))
    log.pragma('wal_autocheckpoint = 0')
    log.exec('CREATE TABLE IF NOT EXISTS scratch (n INTEGER)')
    log.exec('INSERT INTO scratch VALUES (1)')
    const frames = readFileSync(join(killed, 'leasehold.db-wal'))
    log.close()
    writeFileSync(join(killed, 'leasehold.db-wal'), frames)
    rmSync(join(killed, 'leasehold.db-shm'), { force: true })
    const again = await run(['check', '--quick', '--data-dir', killed])
    expect(again.status, again.stderr).toBe(0)
    expect(readFileSync(join(killed, 'leasehold.db-wal'))).toEqual(frames)
    rmSync(stopped.dataDir, { recursive: true, force: true })
  })

  test('a folder holding only leasehold.db (a copied file, a restored backup) is left so: no -wal, -shm or host.lock of the check’s, and the file byte for byte', async () => {
    const stopped = await startTestHost({ workers: 0 })
    await stopped.call('/api/scheduler/jobs/submit', { method: 'POST', json: { job_type: 'kept', cost_units: 1 } })
    await stopped.stop()
    const copied = tempDir()
    copyFileSync(join(stopped.dataDir, 'leasehold.db'), join(copied, 'leasehold.db'))
    rmSync(stopped.dataDir, { recursive: true, force: true })
    const file = readFileSync(join(copied, 'leasehold.db'))
    for (const depth of [['--quick'], []]) {
      const result = await run(['check', ...depth, '--data-dir', copied])
      expect(result.status, result.stderr).toBe(0)
      expect(readdirSync(copied)).toEqual(['leasehold.db'])
    }
    expect(readFileSync(join(copied, 'leasehold.db')).equals(file)).toBe(true)
  })

  test('a data dir this user may read but not write (another user\'s) is checked through a copy too, not called a failing disk', async (context) => {
    if (process.platform !== 'linux' || process.getuid?.() !== 0) return context.skip('it needs root on Linux to run the check as another user')
    const stopped = await startTestHost({ workers: 0 })
    await stopped.stop()
    chmodSync(stopped.dataDir, 0o755)
    chmodSync(join(stopped.dataDir, 'leasehold.db'), 0o644)
    const temp = tempDir('leasehold-check-tmp-')
    chmodSync(temp, 0o777)
    const result = spawnSync('runuser', ['-u', 'nobody', '--', process.execPath, BIN, 'check', '--quick', '--data-dir', stopped.dataDir], {
      env: { ...process.env, ...CLEAN_ENV, TMPDIR: temp },
      encoding: 'utf8',
    })
    if (result.error) return context.skip(`runuser is not here (${result.error.message})`)
    expect(result.status, result.stderr).toBe(0)
    expect(lines(result.stdout)).toEqual([expect.stringContaining(`${join(stopped.dataDir, 'leasehold.db')} passed the integrity check`)])
    expect(lines(result.stderr)).toEqual([`leasehold: ${stopped.dataDir} cannot be written by this user (EACCES), so a copy of the file in ${temp} is checked`])
    rmSync(stopped.dataDir, { recursive: true, force: true })
  })

  test('a data dir on a read-only mount is checked through a copy in the temporary directory, which is removed after', async (context) => {
    if (process.platform !== 'linux' || process.getuid?.() !== 0) return context.skip('it needs root on Linux to mount a tmpfs')
    const mountPoint = tempDir('leasehold-ro-')
    mkdirSync(mountPoint, { recursive: true })
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=16m', 'tmpfs', mountPoint], { stdio: 'pipe' })
    } catch (error) {
      return context.skip(`mount -t tmpfs is not permitted here (${(error as Error).message.split('\n')[0]})`)
    }
    try {
      // The host's file and its -wal as they are while it runs (SQLite recovers the -wal when the copy opens).
      const source = await startTestHost({ workers: 0 })
      await source.call('/api/scheduler/jobs/submit', { method: 'POST', json: { job_type: 'kept', cost_units: 1 } })
      const dataDir = join(mountPoint, 'data')
      mkdirSync(dataDir)
      for (const file of ['leasehold.db', 'leasehold.db-wal']) copyFileSync(join(source.dataDir, file), join(dataDir, file))
      await source.dispose()
      execFileSync('mount', ['-o', 'remount,ro', mountPoint], { stdio: 'pipe' })
      const temp = tempDir('leasehold-check-tmp-')
      mkdirSync(temp, { recursive: true })
      const result = await run(['check', '--data-dir', dataDir], { TMPDIR: temp })
      expect(result.status, result.stderr).toBe(0)
      expect(lines(result.stdout)).toEqual([expect.stringContaining(`${join(dataDir, 'leasehold.db')} passed the integrity check`)])
      expect(lines(result.stderr)).toEqual([`leasehold: ${dataDir} is read-only, so a copy of the file in ${temp} is checked`])
      expect(readdirSync(temp)).toEqual([])
    } finally {
      execFileSync('umount', [mountPoint], { stdio: 'ignore' })
    }
  })
})

describe('a host that was killed', () => {
  test('leaves a host.json naming a process that has ended: taken as no host, and whatever listens on its port now is never sent the token', async () => {
    const stranger: string[] = []
    const listener = createHttpServer((req, res) => {
      stranger.push(`${req.method} ${req.url} ${req.headers.authorization ?? ''}`)
      res.end('{}')
    })
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve))
    try {
      const dead = spawn(process.execPath, ['-e', '0'])
      await new Promise((resolve) => dead.once('exit', resolve))
      const dir = tempDir()
      writeFileSync(join(dir, 'token'), 'a'.repeat(64))
      writeFileSync(join(dir, 'host.json'), JSON.stringify({ url: `http://127.0.0.1:${(listener.address() as AddressInfo).port}`, pid: dead.pid }))
      const result = await runCliAsync(['status', '--data-dir', dir], CLEAN_ENV)
      expect(result.status).toBe(1)
      expect(lines(result.stderr)).toEqual([expect.stringContaining(`no host is running on ${dir}`)])
      expect(stranger).toEqual([])
    } finally {
      listener.close()
    }
  })
})

describe('a data dir the user may not read', () => {
  test('is named as a permission problem, not as "no host is running"', async (context) => {
    if (process.platform !== 'linux' || process.getuid?.() !== 0) return context.skip('runs the command as another user, which needs root')
    const dir = tempDir()
    mkdirSync(dir, { recursive: true })
    writeFileSync(join(dir, 'host.json'), JSON.stringify({ url: host.url, pid: process.pid }))
    chmodSync(dir, 0o700)
    const asNobody = ['--reuid=65534', '--regid=65534', '--clear-groups', process.execPath, BIN, 'status', '--data-dir', dir]
    const result = await new Promise<{ status: number | null; stderr: string }>((resolve) => {
      const child = spawn('setpriv', asNobody, { env: { ...process.env, ...CLEAN_ENV }, stdio: ['ignore', 'ignore', 'pipe'] })
      let stderr = ''
      child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
      child.once('close', (status) => resolve({ status, stderr }))
    })
    expect(result.status).toBe(1)
    expect(lines(result.stderr)).toEqual([expect.stringContaining(`cannot read ${join(dir, 'host.json')} (EACCES`)])
  })
})

describe('a host that does not answer', () => {
  /** A port that accepts connections and never answers, as a host stopped with SIGSTOP does. */
  async function silentPort(): Promise<{ url: string; close(): void }> {
    const sockets = new Set<import('node:net').Socket>()
    const server = createServer((socket) => sockets.add(socket))
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const close = () => {
      for (const socket of sockets) socket.destroy()
      server.close()
    }
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close }
  }

  test.each([
    ['status', ['status']],
    ['jobs show', ['jobs', 'show', '01a24afb-3796-8000-8000-0000018ea6f8']],
  ])('%s waits LEASEHOLD_TIMEOUT_S for an answer, then says which host did not answer: one line, exit 1', async (_what, args) => {
    const silent = await silentPort()
    try {
      const result = await run([...args, '--url', silent.url, '--token', host.token], { LEASEHOLD_TIMEOUT_S: '1' })
      expect(result.status, result.stderr).toBe(1)
      expect(lines(result.stderr)).toEqual([`leasehold: the host at ${silent.url} did not answer within 1 s (LEASEHOLD_TIMEOUT_S sets how long to wait)`])
    } finally {
      silent.close()
    }
  })

  /** What a submit whose answer never came says after the line of the fault: the job may exist, and how a run again makes none twice. */
  const MAY_HAVE_BEEN_SUBMITTED = 'the job may have been submitted all the same (leasehold jobs lists it if it was): running it again may submit it twice: a submit with --key KEY is safe to run again (it answers with the job if it was stored)'

  test.each([
    ['submit', ['submit', '--type', 't']],
    ['submit --wait --json', ['submit', '--type', 't', '--wait', '--json']],
  ])('%s that gets no answer in time says the job may have been submitted, and that --key makes a run again safe: one line, exit 1', async (_what, args) => {
    const silent = await silentPort()
    try {
      const result = await run([...args, '--url', silent.url, '--token', host.token], { LEASEHOLD_TIMEOUT_S: '1' })
      expect(result.status, result.stderr).toBe(1)
      expect(result.stdout).toBe('')
      expect(lines(result.stderr)).toEqual([`leasehold: the host at ${silent.url} did not answer within 1 s (LEASEHOLD_TIMEOUT_S sets how long to wait); ${MAY_HAVE_BEEN_SUBMITTED}`])
    } finally {
      silent.close()
    }
  })

  test('a submit whose connection is cut after the request went says the job may have been submitted; with --key, that the same submit is safe to run again', async () => {
    // The request is read whole, then the connection dropped without an answer, as a host killed mid-request leaves it.
    const server = createHttpServer((req) => req.on('end', () => req.socket.destroy()).resume())
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    try {
      const bare = await run(['submit', '--type', 't', '--url', url, '--token', host.token])
      expect(bare.status, bare.stderr).toBe(1)
      expect(lines(bare.stderr)).toEqual([`leasehold: cannot reach the host at ${url}: ECONNRESET; ${MAY_HAVE_BEEN_SUBMITTED}`])
      const keyed = await run(['submit', '--type', 't', '--key', 'nightly-7', '--url', url, '--token', host.token])
      expect(keyed.status, keyed.stderr).toBe(1)
      expect(lines(keyed.stderr)).toEqual([
        `leasehold: cannot reach the host at ${url}: ECONNRESET; the job may have been submitted all the same (leasehold jobs lists it if it was): running the same submit again is safe: its --key nightly-7 answers with the job if it was stored`,
      ])
    } finally {
      server.closeAllConnections()
      server.close()
    }
  })

  test('a LEASEHOLD_TIMEOUT_S that is not a whole number of seconds is a usage error', async () => {
    const result = await run(['status', '--url', host.url, '--token', host.token], { LEASEHOLD_TIMEOUT_S: '1.5' })
    expect(result.status).toBe(2)
    expect(lines(result.stderr)).toEqual(['leasehold: LEASEHOLD_TIMEOUT_S must be a whole number from 1 to 3600 (got "1.5")'])
  })

  test('submit --wait follows a silent event stream for as long as --wait-timeout says: only each answer is bounded', async () => {
    const job = { job_id: 'job-on-a-quiet-host', job_type: 't', state: 'RUNNING', attempts: 1, max_attempts: 3, progress: null, note: null, waiting_reason: null, waiting_until: null }
    const server = createHttpServer((req, res) => {
      if (req.url?.startsWith('/api/events/stream')) {
        // The head, then nothing: the job runs long.
        res.writeHead(200, { 'content-type': 'text/event-stream' })
        res.flushHeaders()
        return
      }
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify(req.method === 'POST' ? { job } : { job, result: null }))
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
      const result = await run(['submit', '--type', 't', '--wait', '--wait-timeout', '3s', '--url', url, '--token', host.token], { LEASEHOLD_TIMEOUT_S: '1' })
      expect(result.status, result.stderr).toBe(124)
    } finally {
      server.closeAllConnections()
      server.close()
    }
  })
})

/**
 * Follows a running job on a stand-in host whose event stream `stream` answers (the job's reads
 * answer that it runs) until the wait says it lost the connection; resolves with the host's URL
 * and the lines the wait printed. The wait itself gives up only after 60 s: it is left to do so.
 */
async function waitUntilLost(stream: (res: ServerResponse, server: Server) => void, timeoutMs?: number): Promise<{ url: string; printed: string[] }> {
  const jobId = 'job-of-a-host-that-went-away'
  const server = createHttpServer((req, res) => {
    if (req.url?.startsWith('/api/events/stream')) return stream(res, server)
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end(JSON.stringify({ job: { job_id: jobId, state: 'RUNNING', attempts: 1, max_attempts: 3, progress: null, note: null, waiting_reason: null }, result: null }))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  let printed = ''
  const out = { isTTY: false, write: (text: string) => ((printed += text), true) } as unknown as NodeJS.WriteStream
  waitForJob({ url, token: 't', timeoutMs }, jobId, new ProgressLine(out)).catch(() => {})
  try {
    const deadline = Date.now() + 5_000
    while (!printed.includes('lost the connection') && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 25))
  } finally {
    server.closeAllConnections()
    server.close()
  }
  return { url, printed: lines(printed) }
}

describe('submit --wait when the host goes away', () => {
  test('says at once that the connection was lost, instead of nothing until it gives up', async () => {
    const { url, printed } = await waitUntilLost((res, server) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      // The host stops: the stream ends, and nothing listens any more.
      res.end('retry: 50\n\n')
      server.close()
    })
    expect(printed).toContainEqual(`leasehold: lost the connection to the host at ${url} (ECONNREFUSED); trying again for up to 60 s`)
  })

  test('says the connection was lost for want of an answer when the stream\'s head does not come in time, and goes on trying', async () => {
    // The head never comes, as from a host stopped with SIGSTOP.
    const { url, printed } = await waitUntilLost(() => {}, 500)
    expect(printed).toContainEqual(`leasehold: lost the connection to the host at ${url} (no answer within 0.5 s); trying again for up to 60 s`)
  })
})

describe('leasehold worker', () => {
  /** Starts `leasehold worker …` and resolves with what it printed (stdout and stderr) once `what` shows in it. */
  async function workerSays(args: string[], what: string, env: NodeJS.ProcessEnv = {}): Promise<string> {
    const child = spawn(process.execPath, [BIN, 'worker', ...args], { env: { ...process.env, ...CLEAN_ENV, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
    children.push(child)
    let stderr = ''
    for (const stream of [child.stdout!, child.stderr!]) stream.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    const deadline = Date.now() + 15_000
    while (!stderr.includes(what) && child.exitCode === null && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 25))
    child.kill('SIGTERM')
    return stderr
  }

  test('a --handlers folder that is not there is said, as a handler that did not load', async () => {
    const stderr = await workerSays(['--handlers', '/nonexistent-handlers', '--data-dir', host.dataDir], 'did not load')
    expect(stderr).toContain('leasehold worker: handler /nonexistent-handlers did not load: ENOENT: no such folder, /nonexistent-handlers')
  })

  test('a handler with a syntax error is said with its line, the --handlers folder given relative to where the worker runs as well as absolute', async () => {
    const dir = tempDir()
    writeFileSync(join(dir, 'bad.mjs'), "export const type = 'bad'\nexport function run(job) { return resize( }\n")
    for (const handlers of [dir, relative(process.cwd(), dir)]) {
      const stderr = await workerSays(['--url', host.url, '--token', host.token, '--handlers', handlers], 'did not load')
      expect(stderr).toContain(`did not load: Unexpected token '}' (bad.mjs line 2: export function run(job) { return resize( })`)
    }
  })

  test('a worker whose handler threads cannot start exits 1 with the one-line error, leaving nothing running', async () => {
    // As a thread that hits EMFILE loading its modules does: it ends on an uncaught error before
    // it is ready, one that names no handler module (which would be skipped), in every replacement.
    const dir = tempDir()
    const module = "const error = new Error('EMFILE: too many open files')\nerror.stack = error.message\nsetTimeout(() => { throw error })\nawait new Promise((resolve) => setTimeout(resolve, 500))\nexport const type = 'never'\nexport function run() {}\n"
    writeFileSync(join(dir, 'ends-thread.mjs'), module)
    const result = await run(['worker', '--url', host.url, '--token', host.token, '--handlers', dir])
    expect(result.status).toBe(1)
    expect(lines(result.stderr).filter((line) => line.startsWith('leasehold: '))).toEqual(['leasehold: EMFILE: too many open files'])
    expect(result.stdout).not.toContain('taking')
  }, 20_000)

  /** A server at `url` that answers every request with `status`, its body `body` of `type`: not Leasehold's. */
  async function answering(status: number, type: string, body: string): Promise<{ url: string; close(): void }> {
    const server = createHttpServer((req, res) => req.resume().on('end', () => res.writeHead(status, { 'content-type': type }).end(body)))
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    return {
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      close: () => {
        server.closeAllConnections()
        server.close()
      },
    }
  }

  test('a server that is not Leasehold (a page; JSON without Leasehold\'s {detail, code} to a 405 or 501) stops the worker with the line the client commands say it with, exit 1; a proxy\'s 502 page, or a Leasehold host\'s 503, is asked again', async () => {
    const notLeasehold = [
      [501, 'text/html', '<html><body><h1>Error response</h1><p>Unsupported method (\'POST\')</p></body></html>', 'HTTP 501 Not Implemented without Leasehold\'s JSON ("Error response Unsupported method (\'POST\')")'],
      [405, 'application/json', '{"error":"method not allowed"}', 'HTTP 405 Method Not Allowed without Leasehold\'s JSON ("{"error":"method not allowed"}")'],
    ] as const
    for (const [status, type, body, said] of notLeasehold) {
      const server = await answering(status, type, body)
      try {
        const result = await run(['worker', '--url', server.url, '--token', host.token])
        expect(result.status, result.stderr).toBe(1)
        expect(lines(result.stderr)).toContainEqual(`leasehold worker: the server at ${server.url} answered ${said}: it is not a Leasehold host, or a proxy stands between (another program may listen on a port a host left); stopping`)
        expect(result.stderr).not.toContain('retrying')
      } finally {
        server.close()
      }
    }
    const away = [
      [503, 'application/json', '{"detail":"The host is stopping","code":"shutting_down"}'],
      [502, 'text/html', '<h1>502 Bad Gateway</h1>'],
    ] as const
    for (const [status, type, body] of away) {
      const server = await answering(status, type, body)
      try {
        const said = await workerSays(['--url', server.url, '--token', host.token], 'retrying')
        expect(said).toContain(`the host answered ${status}`)
        expect(said).not.toContain('not a Leasehold host')
      } finally {
        server.close()
      }
    }
  })

  test('a Redis nobody listens for is said, as down or not listening there, not waited on in silence', async () => {
    const port = await freePort()
    const stderr = await workerSays(['--redis', `redis://127.0.0.1:${port}`, '--token', 'x'], 'refuses connections')
    expect(lines(stderr)).toContainEqual(expect.stringMatching(new RegExp(`^leasehold worker: Redis at redis://127\\.0\\.0\\.1:${port} refuses connections \\(connect ECONNREFUSED [^)]*: Redis is down, or does not listen there\\)`)))
  })

  test('a --url flag beats LEASEHOLD_REDIS: the worker takes jobs from the host the flag names, over HTTP', async () => {
    const port = await freePort()
    const said = await workerSays(['--url', host.url, '--token', host.token], 'taking', { LEASEHOLD_REDIS: `redis://127.0.0.1:${port}` })
    expect(lines(said)).toContainEqual(expect.stringMatching(new RegExp(`^leasehold worker \\S+ taking .* from ${host.url}$`)))
  })

  test('LEASEHOLD_REDIS_PREFIX is the prefix of a worker over Redis, as for serve; --redis-prefix beats it', async () => {
    const redis = `redis://127.0.0.1:${await freePort()}`
    const fromEnv = await workerSays(['--redis', redis, '--token', host.token], 'taking', { LEASEHOLD_REDIS_PREFIX: 'other:' })
    expect(fromEnv).toMatch(new RegExp(`taking .* from ${redis} \\(prefix other:\\)`))
    const fromFlag = await workerSays(['--redis', redis, '--token', host.token, '--redis-prefix', 'mine:'], 'taking', { LEASEHOLD_REDIS_PREFIX: 'other:' })
    expect(fromFlag).toMatch(new RegExp(`taking .* from ${redis} \\(prefix mine:\\)`))
  })

  test('--redis and --url together are a usage error: one names the host through Redis only', async () => {
    const result = await run(['worker', '--redis', 'redis://127.0.0.1:1', '--url', host.url, '--token', host.token])
    expect(result.status).toBe(2)
    expect(lines(result.stderr)).toEqual(['leasehold: --redis and --url: give one (--redis reaches the host through Redis only)'])
  })

  test('a --redis-prefix with a glob character (* ? [ ] \\) is a usage error for serve and worker, flag or variable: Redis would read it as a pattern and match other hosts\' keys', async () => {
    const rule = 'must not contain * ? [ ] or \\: Redis reads them as a pattern when the host looks for its keys, which would then take other keys for its own'
    const dataDir = join(tempDir('glob-prefix-'), 'never-made')
    for (const prefix of ['l*', 'a?:', 'x[ab]:', 'back\\slash:']) {
      const serve = await run(['serve', '--data-dir', dataDir, '--port', '0', '--redis', 'redis://127.0.0.1:1/0', '--redis-prefix', prefix])
      expect(serve.status).toBe(2)
      expect(lines(serve.stderr)).toEqual([`leasehold: --redis-prefix ${rule} (got ${JSON.stringify(prefix)})`])
      const worker = await run(['worker', '--redis', 'redis://127.0.0.1:1/0', '--token', host.token, '--redis-prefix', prefix])
      expect(worker.status).toBe(2)
      expect(lines(worker.stderr)).toEqual([`leasehold: --redis-prefix ${rule} (got ${JSON.stringify(prefix)})`])
    }
    const fromEnv = await run(['worker', '--redis', 'redis://127.0.0.1:1/0', '--token', host.token], { LEASEHOLD_REDIS_PREFIX: 'l*' })
    expect(fromEnv.status).toBe(2)
    expect(lines(fromEnv.stderr)).toEqual([`leasehold: LEASEHOLD_REDIS_PREFIX ${rule} (got "l*")`])
    expect(existsSync(dataDir)).toBe(false)
  })

  test('a retry line repeats at most once a minute for each kind of fault, with the count held back; other lines pass', () => {
    const printed: string[] = []
    let now = 0
    const log = limitRetryLines((line) => printed.push(line), () => now)
    for (let i = 0; i < 5; i++) log(`leasehold worker: the host answered 507 storage_full (attempt ${i}); retrying in 1 s`)
    log('leasehold worker: the host did not answer (ECONNREFUSED); retrying in 300 ms')
    log('leasehold worker: started')
    now = 60_000
    log('leasehold worker: the host answered 507 storage_full (attempt 5); retrying in 1 s')
    expect(printed).toEqual([
      'leasehold worker: the host answered 507 storage_full (attempt 0); retrying in 1 s',
      'leasehold worker: the host did not answer (ECONNREFUSED); retrying in 300 ms',
      'leasehold worker: started',
      'leasehold worker: the host answered 507 storage_full (attempt 5); retrying in 1 s (4 more like it since the last such line)',
    ])
  })

  test('leasehold worker says when it reaches the host again after it lost it, and logs a later outage again', () => {
    const printed: string[] = []
    let now = 0
    const log = limitRetryLines((line) => printed.push(line), () => now)
    const retry = 'leasehold worker: the host did not answer (connect ECONNREFUSED 127.0.0.1:9); retrying in 1 s'
    const again = 'leasehold worker w1: connected to the host at http://127.0.0.1:9 again'
    // An answer with no outage before it says nothing.
    log(again)
    // Both talkers (the runtime and the driving thread) lose the host: one retry line printed,
    // the other held back; each says it reached the host again, and the log says it once.
    log(retry)
    log(retry)
    now += 1000
    log(again)
    log(again)
    // A later outage, within the minute: its retry line is printed at once, and its end too.
    now += 5000
    log(retry)
    log(again)
    expect(printed).toEqual([retry, again, retry, again])
  })
})
