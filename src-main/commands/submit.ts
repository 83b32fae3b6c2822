import { readFileSync } from 'node:fs'
import type { components, paths } from '../../src-shared/api-types'
import type { ClientTarget } from '../../src-shared/client-target'
import { findHost } from './host-target'
import { MAX_BATCH_ITEMS } from '../../src-shared/limits'
import { faultDetail, faultIn } from '../../src-shared/json-faults'
import { ConfigError, parseFlags, CLIENT_TARGET_HELP, sayWhenOutputFails, stopIfOutputFailed, utf8Text, wholeNumber } from '../../src-shared/command-line'
import { answered, HostError, hostApi, mayHaveArrived } from './http-client'
import { printable } from '../../src-shared/printable'
import type { EachJob } from './wait'
import { sameJson } from '../../src-shared/same-json'
import { misreadTzRule } from '../../src-shared/tz-rule'

export const SUBMIT_HELP = `Usage: leasehold submit --type TYPE [flags]

Submits a job (POST /api/scheduler/jobs/submit) and prints its id; with --each, one job per line
of a file.

Flags:
  --type TYPE          the job type, which picks the handler (required)
  --payload JSON       the job's input: JSON text, or @FILE to read it from a file (@- for stdin);
                       any JSON value but null (a leading byte-order mark in a file is dropped)
  --priority P         LOW, NORMAL, HIGH or URGENT [NORMAL]
  --units N            the capacity units the job needs while it runs [1]
  --queue Q            the stream (queue) workers take it from [default]
  --addon A            the add-on the job belongs to
  --max-attempts N     how many attempts a retryable failure or an expired lease may use [host default]
  --key KEY            an idempotency key, so that the submit is safe to run again (after a lost
                       answer, or a script run once more): when KEY is already a job's, nothing
                       is submitted and the command answers with that job as if it had just
                       submitted it (its id; --json: its JSON with "already_submitted": true;
                       --wait follows it, and a job that has ended answers at once by its
                       state), with a line on stderr naming the job and its state. A repeat that
                       asks for another job (its --type, --payload, --priority, --units, --queue,
                       --addon, --max-attempts, --at or --in differ from the job's; --in counts
                       from the job's creation, and a delay differs from a job submitted with
                       none) is refused on one line naming the job and what differs: exit 1
  --at TIME            a delayed job: not run before TIME, an ISO-8601 time such as
                       2026-03-01T02:00:00Z (without a zone it is this machine's local time:
                       a time its clocks skip for summer time is refused, one they pass twice
                       as summer time ends is the first of the two, and a TZ that is a POSIX
                       rule (TZ=CET-1CEST) refuses it, Node reading the rule as UTC; an offset as
                       +05:30 or +0530; a fraction of a second to the millisecond; not a date
                       alone, nor 24:00: the next day's 00:00)
  --in DURATION        a delayed job: not run for DURATION, such as 90s, 10m, 2h, 1d or 1h30m
                       (each unit once, the larger first), up to 100 years (--at and --in do
                       not go together)
  --wait               follow the job until it ends: a live progress line on stderr (saying why
                       the job waits while it does); exit 0 if
                       it is DONE, 1 if it FAILED, was CANCELED or timed out (TIMEOUT). A BLOCKED
                       job is reported and waited on: an operator may requeue it. If the
                       connection to the host is lost, a line says so at once and the wait goes
                       on, reconnecting, for up to 60 s (then exit 1); another line when it is
                       back. A job that runs long is waited on as long as it runs (or
                       --wait-timeout says): LEASEHOLD_TIMEOUT_S bounds each answer only. With --each:
                       follows every job submitted, on one line counting the jobs ended by
                       state; then one line per job that is not DONE, naming its input line
                       and why; exit 0 if all are DONE
  --wait-timeout DURATION
                       with --wait: stop waiting after DURATION (such as 30s, 10m or 1h30m) and
                       say how the job stands (with --each, each job not ended, on its line);
                       the job goes on, untouched. Exit 124, as timeout(1) exits; --json prints
                       the job as it was then
  --json               print the job as JSON instead of its id (with --wait: {job, result} at the end;
                       with --each: each job as it is submitted; with --each --wait: nothing as
                       they are submitted, then each job's {job, result, line} on a line of its
                       own, in the input's order, once all have ended)
  --each FILE          one job per line of FILE (- for stdin), whose JSON is the job's payload;
                       the other flags apply to every job. The whole input is read first: a line
                       that is not JSON (or not UTF-8) submits nothing (exit 2). Sent through
                       POST /api/scheduler/jobs/submit-batch, up to 1,000 jobs a request; prints
                       one id per job in the input's order (--json: one job per line). A line
                       that is null, or that the host could not store as sent (a lone surrogate,
                       a number past a double's range), submits nothing either (exit 2), as with
                       --payload. A value of a flag the host refuses (a --units over the total
                       capacity, a --queue too long) is every job's: one line naming the flag,
                       nothing more is sent (the first request's jobs are all refused: nothing
                       submitted), exit 2. A job the host refuses for its own line is one line on
                       stderr naming that line, the others are submitted, and the exit is 1. Not
                       with --payload or --key
${CLIENT_TARGET_HELP}
  -h, --help

A submit whose answer never comes (none within LEASEHOLD_TIMEOUT_S, or the connection cut after
the request went) exits 1 on one line saying that the job may have been submitted all the same
(leasehold jobs lists it if it was): a run again without --key may submit it twice, while the
same submit with its --key is safe to run again.

A reader that closes the output (… | head -1) ends the command, quietly, with exit status 141:
with --each no request goes after the output is found closed (by the write of the jobs just
submitted), so the jobs of the request then in flight (up to 1,000) may have been submitted, and
the rest are not. An output that cannot be written (> /dev/full, a full disk) ends it with one
line on stderr and exit 1, naming the job submitted, or with --each which lines were submitted
and from which line on none was (no request goes after the write that failed).

Ctrl-C (SIGINT) or SIGTERM while --each submits sends no more requests; the one in flight (up to
1,000 jobs, which the host may have stored) is waited for up to 10 s and the ids of its jobs
printed (with --wait --json, the ids of every job submitted so far), then a line on stderr says
from which input line on nothing was submitted: a run again from that line makes no duplicates.
A second signal, or no answer in 10 s, stops at once, naming the lines in flight, which may have
been submitted (leasehold jobs lists those that were). Exit 130 (SIGINT) or 143 (SIGTERM).

During --wait (after the submits, with --each), SIGINT or SIGTERM ends the wait as --wait-timeout
does: the jobs are read once more, each not ended is said as it stands ("still QUEUED when SIGINT
stopped the wait"; with --each on its input line), --json prints them as they were then, and the
jobs go on. Exit 130 (SIGINT) or 143 (SIGTERM), unless every job had ended by then; a second
signal stops at once.`

export interface SubmitFlags {
  url?: string
  token?: string
  'data-dir'?: string
  type?: string
  payload?: string
  priority?: string
  units?: string
  queue?: string
  addon?: string
  'max-attempts'?: string
  key?: string
  at?: string
  in?: string
  wait?: boolean
  'wait-timeout'?: string
  json?: boolean
  each?: string
}

type SubmitBody = paths['/api/scheduler/jobs/submit']['post']['requestBody']['content']['application/json']
type Priority = components['schemas']['Priority']

const PRIORITIES: readonly Priority[] = ['LOW', 'NORMAL', 'HIGH', 'URGENT']

/**
 * The text of the file `path` (`-`: stdin); one that cannot be read, or is not UTF-8, is a
 * ConfigError naming `from`. A leading byte-order mark is dropped: Notepad writes one, and
 * JSON.parse would refuse it as an unexpected character the user cannot see.
 */
function readInput(from: string, path: string): string {
  let bytes: Buffer
  try {
    bytes = readFileSync(path === '-' ? 0 : path)
  } catch (error) {
    const e = error as NodeJS.ErrnoException
    throw new ConfigError(`${from}: cannot read ${path === '-' ? 'stdin' : path} (${e.code ?? e.message})`)
  }
  return utf8Text(from, bytes).replace(/^\uFEFF/, '')
}

/**
 * `text` as a job's payload; text that is not JSON is a ConfigError naming `from`. So is `null`:
 * the host stores a null payload as {} (as if none were given), while every other JSON value is
 * kept as it is, so a null would not come back as it was sent; give {} or no payload instead.
 */
function parseJsonInput(from: string, text: string): unknown {
  let value: unknown
  try {
    value = JSON.parse(text) as unknown
  } catch (error) {
    throw new ConfigError(`${from} is not valid JSON: ${(error as Error).message.split('\n')[0]}`)
  }
  if (value === null) throw new ConfigError(`${from} is null: a payload cannot be null (the host would store {}); give {} or leave the payload out`)
  // What the host would refuse (a lone surrogate, 1e400, nesting past its limit) is refused here,
  // naming the input: in a batch of --each the host's 400 would refuse the request's other jobs too.
  const fault = faultIn(value, false)
  if (fault !== null) throw new ConfigError(`${from}: ${faultDetail(value, fault.kind, ['payload'])}`)
  return value
}

/** `--payload`: JSON text, `@file` or `@-`; anything unreadable or not JSON is a ConfigError (exit 2). */
export function readPayload(value: string): unknown {
  if (!value.startsWith('@')) return parseJsonInput('--payload', value)
  const path = value.slice(1)
  if (path === '') throw new ConfigError('--payload @FILE needs a file name (or @- for stdin)')
  const text = readInput(`--payload ${value}`, path)
  // JSON.parse would say "Unexpected end of JSON input": an input that gave nothing is said as such.
  if (text.trim() === '') throw new ConfigError(`--payload ${value} is empty: ${path === '-' ? 'stdin' : path} held no JSON (for an empty payload, give {})`)
  return parseJsonInput(`--payload ${value}`, text)
}

/** One job of `--each`: its payload and the line of the input it came from. */
export interface EachLine {
  line: number
  payload: unknown
  /** The line's length in bytes: what the payload adds to a request, near enough. */
  bytes: number
}

/**
 * `--each FILE`: every line of FILE (`-`: stdin) as one job's payload, in order. Blank lines
 * are skipped (line numbers still count them); anything unreadable, or a line that is not
 * JSON, is a ConfigError (exit 2) before anything is sent.
 */
export function readEachLines(path: string): EachLine[] {
  const lines: EachLine[] = []
  readInput(`--each ${path}`, path)
    .split('\n')
    .forEach((raw, i) => {
      const text = raw.endsWith('\r') ? raw.slice(0, -1) : raw
      if (text.trim() === '') return
      lines.push({ line: i + 1, payload: parseJsonInput(`--each ${path} line ${i + 1}`, text), bytes: Buffer.byteLength(text) })
    })
  return lines
}

export function buildSubmit(flags: SubmitFlags): SubmitBody {
  if (flags.type === undefined || flags.type.trim() === '') throw new ConfigError('--type is required (the job type, e.g. --type exec)')
  const body: SubmitBody = { job_type: flags.type, cost_units: wholeNumber('units', flags.units, 1, 1_000_000) ?? 1 }
  if (flags.payload !== undefined) body.payload = readPayload(flags.payload)
  if (flags.priority !== undefined) {
    const priority = flags.priority.toUpperCase() as Priority
    if (!PRIORITIES.includes(priority)) throw new ConfigError(`--priority must be one of ${PRIORITIES.join(', ')} (got "${flags.priority}")`)
    body.priority = priority
  }
  if (flags.queue !== undefined) body.queue = flags.queue
  if (flags.addon !== undefined) body.addon_id = flags.addon
  const maxAttempts = wholeNumber('max-attempts', flags['max-attempts'], 1, 1000)
  if (maxAttempts !== undefined) body.max_attempts = maxAttempts
  if (flags.key !== undefined) body.client_request_id = flags.key
  if (flags.at !== undefined && flags.in !== undefined) throw new ConfigError('--at and --in: give one or the other, not both')
  if (flags.at !== undefined) body.run_at = parseTime('at', flags.at)
  if (flags.in !== undefined) body.delay_ms = parseDuration('in', flags.in)
  return body
}

/**
 * `--at`: an ISO-8601 date and time (local without a zone), as the host's ISO UTC; anything else
 * is a ConfigError. Its extended form as Date and other tools write it: seconds and a fraction of
 * any length (kept to the millisecond, the rest cut), an offset as +05:30 or +0530.
 */
export function parseTime(flag: string, value: string): string {
  const date = /^(\d{4})-(\d\d)-(\d\d)T(\d\d):\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d)?$/.exec(value)
  // Date.parse takes 2026-02-30 for 2 March: the day must exist in its month. And 24:00, ISO's
  // end of a day, for the next day's 00:00, which says the same without the doubt: refused.
  const real = date !== null && Number(date[4]) < 24 && new Date(Date.UTC(Number(date[1]), Number(date[2]) - 1, Number(date[3]))).getUTCDate() === Number(date[3])
  const ms = real ? Date.parse(value.replace(/(\.\d{3})\d+/, '$1').replace(/([+-]\d\d)(\d\d)$/, '$1:$2')) : NaN
  if (Number.isNaN(ms)) throw new ConfigError(`--${flag} must be an ISO-8601 time such as 2026-03-01T02:00:00Z (got "${value}")`)
  // A local time is read on Node's clock, which takes a POSIX rule for UTC while the machine
  // follows it: the job would run hours away from the time typed. Only an offset says which time.
  const rule = date![7] === undefined ? misreadTzRule(process.env.TZ) : null
  if (rule !== null) {
    throw new ConfigError(`--${flag} ${value} has no offset, and this machine's time zone is a rule, not a zone's name (TZ=${JSON.stringify(rule)}), which Node reads as UTC: give the time with its offset (Z, +01:00), or a delay with --in`)
  }
  if (date![7] === undefined && !localTimeExists(value, ms)) {
    throw new ConfigError(`--${flag} ${value} is no time in this machine's time zone: its clocks skip it (a change to summer time); give a time outside the gap, or one with its offset (Z, +01:00)`)
  }
  return new Date(ms).toISOString()
}

/**
 * Whether a local time read as `ms` names the same wall-clock time it was written as. A time in
 * the hour a change to summer time skips (02:30 on the night clocks go from 02:00 to 03:00) is
 * moved by Date.parse to one that exists: the job would run an hour away from what was asked.
 */
function localTimeExists(written: string, ms: number): boolean {
  const read = new Date(ms)
  // YYYY-MM-DDTHH:MM…: the day, the hour and the minute as written.
  return read.getDate() === Number(written.slice(8, 10)) && read.getHours() === Number(written.slice(11, 13)) && read.getMinutes() === Number(written.slice(14, 16))
}

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }

/**
 * The longest delay the host takes (its MAX_DELAY_MS, 100 years of 365 days; test/cli holds the
 * two equal): a longer --in is the user's mistake, refused here as one, not sent to be refused
 * by the API's delay_ms. Not imported, so that the command does not load the engine.
 */
export const MAX_DELAY_MS = 100 * 365 * 24 * 3600 * 1000

/** `--in`: a duration such as 90s, 10m, 2h, 1d or 1h30m, up to 100 years, in milliseconds; anything else is a ConfigError. */
export function parseDuration(flag: string, value: string): number {
  // Each unit once, the larger first (1h30m): 1h1h or 30m1h is a slip, not a sum to take.
  const parts = /^(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?$/.test(value) ? [...value.matchAll(/(\d+)(ms|s|m|h|d)/g)] : []
  const ms = parts.reduce((total, [, n, unit]) => total + Number(n) * DURATION_UNITS[unit!]!, 0)
  if (parts.length === 0 || !Number.isSafeInteger(ms)) {
    throw new ConfigError(`--${flag} must be a duration such as 90s, 10m, 2h, 1d or 1h30m (got "${value}")`)
  }
  if (ms > MAX_DELAY_MS) throw new ConfigError(`--${flag} must be at most 100 years (36500d) (got "${value}")`)
  return ms
}

/** `leasehold submit`: one job (with --each, one a line of the input); with --wait, follows it to its end. */
export async function submitCommand(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const flags = parseFlags<SubmitFlags>(argv, ['type', 'payload', 'priority', 'units', 'queue', 'addon', 'max-attempts', 'key', 'at', 'in', 'each', 'wait-timeout'], ['wait', 'json'])
  const body = buildSubmit(flags)
  if (flags['wait-timeout'] !== undefined && !flags.wait) throw new ConfigError('--wait-timeout goes with --wait (how long to wait for the job)')
  const timeoutMs = flags['wait-timeout'] === undefined ? undefined : parseDuration('wait-timeout', flags['wait-timeout'])
  if (flags.each !== undefined) {
    if (flags.payload !== undefined) throw new ConfigError('--each and --payload: each line of --each is its job\'s payload')
    if (flags.key !== undefined) throw new ConfigError('--each and --key: an idempotency key names one job')
    const lines = readEachLines(flags.each)
    const target = await findHost(flags, env)
    if (!flags.wait) return (await submitEach(target, body, lines, flags.json ? 'job' : 'id')).code
    // The stream is open before the first job goes, so that no job's end can come before it.
    const { followJobs, ProgressLine } = await import('./wait')
    const follower = await followJobs(target)
    try {
      // With --json the jobs' ends are printed, once all have ended; without it their ids as they go.
      const { code, jobs } = await submitEach(target, body, lines, flags.json ? 'nothing' : 'id')
      return Math.max(code, await follower.wait(jobs, new ProgressLine(process.stderr), { json: flags.json === true, timeoutMs }))
    } finally {
      follower.close()
    }
  }
  const target = await findHost(flags, env)
  // The event stream's client, for --wait only: loaded before the submit, so that the wait takes
  // SIGINT and SIGTERM the moment the job is answered, with no load between.
  const waiting = flags.wait ? await import('./wait') : null
  const { job, repeat } = await submitOne(target, body)
  // The job is stored: an output that cannot be written must not leave it unnamed.
  sayWhenOutputFails(() => `job ${job.job_id} was submitted`)
  // A repeat of a key says so in its JSON; the rest of the answer is the one a fresh submit prints.
  const marked = <T extends object>(answer: T) => (repeat ? { ...answer, already_submitted: true } : answer)
  if (waiting === null) {
    console.log(flags.json ? JSON.stringify(marked(job), null, 2) : job.job_id)
    return 0
  }
  if (!flags.json) console.log(job.job_id)
  const { ProgressLine, waitForJob, WaitStopped } = waiting
  try {
    const { code, answer } = await waitForJob(target, job.job_id, new ProgressLine(process.stderr), { timeoutMs })
    if (flags.json) console.log(JSON.stringify(marked(answer), null, 2))
    return code
  } catch (error) {
    if (!(error instanceof WaitStopped)) throw error
    // Stopped before the job was read once: --json prints it as submitted, so that its id is said.
    console.error(`leasehold: ${error.message}`)
    if (flags.json) console.log(JSON.stringify(marked({ job, result: null }), null, 2))
    return SIGNAL_EXITS[error.signal]
  }
}

// ---------------------------------------------------------------------------------------------
// --key

type QueueJob = components['schemas']['QueueJob']

/**
 * Submits one job. A key (`client_request_id`) that is already a job's makes no new job: the
 * host answers 409 duplicate_request with that job, and it is the answer, as if just submitted
 * (`repeat`), with a line on stderr saying so. That is the point of a key: a script that lost
 * the answer, or is run again, submits the same way and gets the job. A repeat that asks for
 * another job than the key's is a mistake in the script: an Error naming the job and what differs.
 */
async function submitOne(target: ClientTarget, body: SubmitBody): Promise<{ job: QueueJob; repeat: boolean }> {
  try {
    return { job: (await answered(target, hostApi(target).POST('/api/scheduler/jobs/submit', { body }))).job, repeat: false }
  } catch (error) {
    if (mayHaveArrived(error)) throw unansweredSubmit(error as Error, body)
    if (error instanceof HostError && error.status === 413) throw tooLarge(error, '--payload')
    const existing = error instanceof HostError && error.code === 'duplicate_request' ? (error.body.job as QueueJob | undefined) : undefined
    if (existing?.job_id === undefined) throw error
    const key = printable(body.client_request_id ?? '')
    const asksTime = body.run_at != null || body.delay_ms != null
    const runAt = existing.run_at ?? (asksTime ? await submittedRunAt(target, existing.job_id) : null)
    const differences = differencesFrom(body, existing, runAt)
    if (differences.length > 0) {
      throw new Error(`--key ${key} is job ${existing.job_id}'s (${existing.state}), which this submit does not match: ${differences.join('; ')}; another job needs another key`)
    }
    console.error(`leasehold: --key ${key} is job ${printable(existing.job_id)}'s, submitted before (${printable(existing.state)}): not submitted again`)
    return { job: existing, repeat: true }
  }
}

/**
 * A submit the host may have stored though its answer never came (no answer in time, the
 * connection cut after the request went): the job may exist. A script that takes exit 1 as
 * "not submitted" and runs the submit again would make it twice; with a key (`--key`) the run
 * again is safe, answered with the job if it was stored.
 */
function unansweredSubmit(error: Error, body: SubmitBody): Error {
  const key = body.client_request_id
  const retry =
    key == null
      ? 'running it again may submit it twice: a submit with --key KEY is safe to run again (it answers with the job if it was stored)'
      : `running the same submit again is safe: its --key ${printable(key)} answers with the job if it was stored`
  return new Error(`${error.message}; the job may have been submitted all the same (leasehold jobs lists it if it was): ${retry}`, { cause: error.cause })
}

/**
 * The host's 413 of a job (`payload_too_large`): what is too large, and what sets the limit — the
 * host's --body-limit, which the command cannot see.
 */
function tooLarge(error: HostError, what: string): HostError {
  return new HostError(error.status, error.code, `${what} makes the job larger than the host takes (${error.detail}): the host's --body-limit (LEASEHOLD_BODY_LIMIT) sets the limit`, error.body)
}

/**
 * What a submit asks for that the job `job` does not have, one phrase a field, for the fields
 * the command sent and the job view shows. `max_attempts` grows with an operator's retry (to the
 * attempts so far plus the number submitted: docs/states.md), so the number submitted matches
 * anything from `max_attempts - attempts` to `max_attempts`.
 */
function differencesFrom(body: SubmitBody, job: QueueJob, runAt: string | null | 'unknown'): string[] {
  const differences: string[] = []
  const differ = (flag: string, asked: unknown, has: unknown) => differences.push(`${flag} ${printable(String(asked))}, the job's ${printable(String(has))}`)
  if (body.job_type !== job.job_type) differ('--type', body.job_type, job.job_type)
  // Compared as the host stores it: JSON text read back (-0 is 0).
  if (body.payload !== undefined && !sameJson(body.payload, job.payload)) differences.push('--payload is not the job\'s')
  if (body.priority !== undefined && body.priority !== job.priority) differ('--priority', body.priority, job.priority)
  if (body.cost_units !== job.cost_units) differ('--units', body.cost_units, job.cost_units)
  if (body.queue !== undefined && body.queue !== job.queue) differ('--queue', body.queue, job.queue)
  if (body.addon_id !== undefined && body.addon_id !== job.addon_id) differ('--addon', body.addon_id, job.addon_id ?? 'none')
  const attempts = body.max_attempts
  if (attempts !== undefined && (attempts > job.max_attempts || attempts < job.max_attempts - job.attempts)) differ('--max-attempts', attempts, job.max_attempts)
  // The host takes --in from the moment it creates the job: the job's delay is run_at - created_at.
  const createdAt = Date.parse(job.created_at)
  if (typeof runAt === 'string') {
    const delay = Date.parse(runAt) - createdAt
    if (body.run_at != null && Date.parse(body.run_at) !== Date.parse(runAt)) differ('--at', body.run_at, runAt)
    if (body.delay_ms != null && body.delay_ms !== delay) differ('--in', durationText(body.delay_ms), durationText(delay))
  } else if (runAt === null) {
    // Not delayed when submitted (or its time already past then): a time still to come then differs.
    if (body.run_at != null && Date.parse(body.run_at) > createdAt) differ('--at', body.run_at, 'none (not delayed)')
    if (body.delay_ms != null && body.delay_ms > 0) differ('--in', durationText(body.delay_ms), 'none (not delayed)')
  }
  return differences
}

/**
 * The time a job was delayed to when it was submitted (its JOB_SUBMITTED event's run_at; null
 * when it was not delayed), for a job whose run_at is gone: an operator's run-now or retry clears
 * it, and the job is the one submitted with the delay all the same. `unknown` when the event is
 * not on the job's newest page of events (a job with hundreds of them).
 */
async function submittedRunAt(target: ClientTarget, jobId: string): Promise<string | null | 'unknown'> {
  const page = await answered(target, hostApi(target).GET('/api/scheduler/jobs/{job_id}/events', { params: { path: { job_id: jobId } } }))
  const submitted = page.events.find((event) => event.type === 'JOB_SUBMITTED')
  if (submitted === undefined) return 'unknown'
  const runAt = (submitted.data as { run_at?: unknown }).run_at
  return typeof runAt === 'string' ? runAt : null
}

/** A duration in milliseconds as --in reads it: 1h30m, 90s, 1d2h, 250ms. */
export function durationText(ms: number): string {
  let rest = ms
  let text = ''
  for (const [unit, size] of Object.entries(DURATION_UNITS).reverse()) {
    const count = Math.floor(rest / size)
    if (count > 0) text += `${count}${unit}`
    rest -= count * size
  }
  return text || '0s'
}

// ---------------------------------------------------------------------------------------------
// --each

/**
 * What one request of `--each` carries at most, besides submit-batch's limit on jobs: a size
 * well under the host's default body limit (1 MiB, `--body-limit`).
 */
const EACH_MAX_BYTES = 256 * 1024

/** The lines of `--each` in requests: each at most {@link MAX_BATCH_ITEMS} jobs and about {@link EACH_MAX_BYTES}. */
function eachRequests(lines: EachLine[], templateBytes: number): EachLine[][] {
  const requests: EachLine[][] = []
  let request: EachLine[] = []
  let bytes = 0
  for (const line of lines) {
    const size = templateBytes + line.bytes
    if (request.length > 0 && (request.length === MAX_BATCH_ITEMS || bytes + size > EACH_MAX_BYTES)) {
      requests.push(request)
      request = []
      bytes = 0
    }
    request.push(line)
    bytes += size
  }
  if (request.length > 0) requests.push(request)
  return requests
}

/**
 * `leasehold submit --each`: the jobs of `lines`, each `template` with its line's payload, sent
 * in requests of submit-batch one after the other. A request the host finds too large (413: a
 * host started with a smaller `--body-limit`) goes again in halves, down to a job alone, which
 * is then refused like any other. Prints each job created (`print`: its id, its view as JSON, or
 * nothing), in the input's order; a job refused is one line on stderr. Exit 1 if any was
 * refused; a request that fails stops the command, and its line says from which input line on
 * the jobs were not submitted.
 */
async function submitEach(target: ClientTarget, template: SubmitBody, lines: EachLine[], print: 'id' | 'job' | 'nothing'): Promise<{ code: number; jobs: EachJob[] }> {
  const interruption = new EachInterruption()
  try {
    return await submitEachUntil(target, template, lines, print, interruption)
  } finally {
    interruption.close()
  }
}

async function submitEachUntil(target: ClientTarget, template: SubmitBody, lines: EachLine[], print: 'id' | 'job' | 'nothing', interruption: EachInterruption): Promise<{ code: number; jobs: EachJob[] }> {
  const api = hostApi(target)
  const jobs: EachJob[] = []
  if (print === 'nothing') interruption.unprinted = jobs
  let refused = 0
  let answeredOnce = false
  /** The first input line not sent yet (null: every line was sent). */
  let nextLine: number | null = lines[0]?.line ?? null
  // Output that cannot be written (a full disk) ends the command: it says what was submitted, and from where to go on.
  sayWhenOutputFails(() => `${submittedLines(jobs)}; ${nextLine === null ? 'every line was sent' : `the jobs from line ${nextLine} on were not submitted`}`)
  const send = async (request: EachLine[]): Promise<void> => {
    interruption.stopBefore(request[0]!.line)
    let answer: components['schemas']['SubmitBatchAnswer']
    interruption.inFlight = request
    try {
      answer = await answered(
        target,
        api.POST('/api/scheduler/jobs/submit-batch', {
          body: { jobs: request.map(({ payload }) => ({ ...template, payload })) },
          headers: print === 'job' ? {} : { Prefer: 'return=minimal' },
        }),
      )
    } catch (error) {
      if (error instanceof HostError && error.status === 400) throw requestRefusal(error, template, request, jobs.length > 0)
      if (error instanceof HostError && error.status === 413 && request.length > 1) {
        const half = Math.ceil(request.length / 2)
        await send(request.slice(0, half))
        return send(request.slice(half))
      }
      if (error instanceof HostError && error.status === 413) {
        refused += 1
        console.error(`leasehold: line ${request[0]!.line}: ${printable(tooLarge(error, 'the line').message)}`)
        return
      }
      throw answeredOnce ? stoppedAt(error, request[0]!.line) : error
    } finally {
      interruption.inFlight = null
    }
    answeredOnce = true
    // A refusal of a field the flags gave is every job's: said once, as the flag, and nothing more is sent.
    const flagged = answer.results.find((result) => !result.ok && templateField(result.detail, template) !== undefined)
    if (flagged !== undefined && !flagged.ok) {
      const detail = jobs.length > 0 ? `${flagged.detail}; the jobs from line ${request[0]!.line} on were not submitted` : flagged.detail
      throw new HostError(400, flagged.code, detail, {})
    }
    let out = ''
    answer.results.forEach((result, i) => {
      if (!result.ok) {
        refused += 1
        console.error(`leasehold: line ${request[i]!.line}: ${printable(`${result.detail} (${result.code})`)}`)
        return
      }
      const jobId = 'job_id' in result ? result.job_id : result.job.job_id
      jobs.push({ job_id: jobId, line: request[i]!.line })
      if (print === 'job') out += `${JSON.stringify('job' in result ? result.job : result)}\n`
      else if (print === 'id') out += `${jobId}\n`
    })
    nextLine = lines.find((line) => line.line > request.at(-1)!.line)?.line ?? null
    if (out) process.stdout.write(out)
  }
  for (const request of eachRequests(lines, Buffer.byteLength(JSON.stringify(template)))) {
    // A reader that closed the output (… | head -1) wants no more jobs, and an output that cannot
    // be written would lose their ids: none is sent after the write that failed.
    stopIfOutputFailed()
    await send(request)
  }
  stopIfOutputFailed()
  interruption.stopBefore(null)
  return { code: refused > 0 ? 1 : 0, jobs }
}

/** The jobs of `--each` submitted so far, as the line that ends the command names them: by their input lines. */
function submittedLines(jobs: readonly EachJob[]): string {
  if (jobs.length === 0) return 'no job was submitted'
  const count = jobs.length === 1 ? '1 job' : `${jobs.length.toLocaleString('en-US')} jobs`
  return `${count} of lines ${jobs[0]!.line} to ${jobs.at(-1)!.line} were submitted (leasehold jobs lists them)`
}

/**
 * How long a signal that stops `--each` waits for the answer to the request in flight: its jobs
 * may be stored, and `--each` takes no --key, so their ids are printed before the command ends
 * (a run again from the first line not submitted then makes no duplicates). A second signal
 * stops at once.
 */
const IN_FLIGHT_WAIT_S = 10

/** The exit status of a command a signal stopped, as the signal would have ended it (128 + its number). */
export const SIGNAL_EXITS = { SIGINT: 130, SIGTERM: 143 } as const
export type StopSignal = keyof typeof SIGNAL_EXITS

/**
 * SIGINT and SIGTERM while `--each` submits: no request goes after the signal; the one in flight
 * is waited for (up to {@link IN_FLIGHT_WAIT_S}) and its jobs printed, and a line on stderr says
 * from which input line on nothing was submitted. Exit 130 (SIGINT) or 143 (SIGTERM), as the
 * signal would have ended the command.
 */
class EachInterruption {
  /** The lines of the request sent and not yet answered. */
  inFlight: EachLine[] | null = null
  /** The jobs submitted whose ids are not printed as they go (--wait --json prints all at the end): printed on a stop, so that none goes unsaid. */
  unprinted: readonly EachJob[] = []
  private signal: StopSignal | null = null
  private readonly handlers = (Object.keys(SIGNAL_EXITS) as StopSignal[]).map((signal) => {
    const handler = () => this.caught(signal)
    process.on(signal, handler)
    return { signal, handler }
  })

  /** Ends the command if a signal came: before the request from `line` (null: after the last) is sent. */
  stopBefore(line: number | null): void {
    if (this.signal === null) return
    const rest = line === null ? 'every job was submitted' : `the jobs from line ${line} on were not submitted`
    this.printUnprinted()
    console.error(`leasehold: stopped by ${this.signal}; ${rest}`)
    process.exit(SIGNAL_EXITS[this.signal])
  }

  /** Stops listening: a --wait after the submits takes the signals on its own terms (wait.ts), and without one there is nothing left to stop. */
  close(): void {
    for (const { signal, handler } of this.handlers) process.off(signal, handler)
  }

  private caught(signal: StopSignal): void {
    const request = this.inFlight
    const again = this.signal !== null
    this.signal ??= signal
    if (request === null) return this.stopBefore(null)
    const lines = `lines ${request[0]!.line} to ${request.at(-1)!.line}`
    if (again) return this.stopNow(`${signal} again`, lines)
    console.error(`leasehold: ${signal}: waiting up to ${IN_FLIGHT_WAIT_S} s for the host's answer about the jobs of ${lines}, to print those submitted (${signal} again stops at once)`)
    setTimeout(() => this.stopNow(`no answer within ${IN_FLIGHT_WAIT_S} s`, lines), IN_FLIGHT_WAIT_S * 1000)
  }

  private printUnprinted(): void {
    if (this.unprinted.length > 0) process.stdout.write(this.unprinted.map(({ job_id }) => `${job_id}\n`).join(''))
  }

  private stopNow(why: string, lines: string): never {
    this.printUnprinted()
    console.error(`leasehold: stopped by ${this.signal} (${why}): the jobs of ${lines} may have been submitted (leasehold jobs lists those that were); those after were not`)
    process.exit(SIGNAL_EXITS[this.signal!])
  }
}

/**
 * The field of the job that a refusal's `detail` names first (`cost_units: …`, `addon_id: …`), if
 * the flags gave it: every job of `--each` has it as `template` has it, so each is refused alike.
 */
function templateField(detail: string, template: SubmitBody): string | undefined {
  const field = /^([a-z_]+)[.:]/.exec(detail)?.[1]
  return field !== undefined && field !== 'payload' && field in template ? field : undefined
}

/**
 * The host's 400 of a request of `--each` (its check of the jobs' fields): each `jobs.N.field: …`
 * of a field the flags gave said once as `field: …` (the command line names its flag), any other
 * by the input line of job N. A request refused submitted none of its jobs.
 */
function requestRefusal(error: HostError, template: SubmitBody, request: EachLine[], submittedBefore: boolean): HostError {
  const parts = error.detail.split('; ').map((part) => {
    const item = /^jobs\.(\d+)(?:\.|: )(.*)$/.exec(part)
    if (item === null) return part
    const rest = item[2]!
    const line = request[Number(item[1])]?.line
    return templateField(rest, template) !== undefined || line === undefined ? rest : `line ${line}: ${rest}`
  })
  const detail = [...new Set(parts)].join('; ')
  return new HostError(error.status, error.code, submittedBefore ? `${detail}; the jobs from line ${request[0]!.line} on were not submitted` : detail, error.body)
}

/** A failed request of `--each` after others went: its error, saying which input lines it leaves out. */
function stoppedAt(error: unknown, line: number): Error {
  const message = (error as Error).message
  // An answer refusing the request, or a connection refused, submitted none of it; a request cut off may have been.
  const refusedConnection = (error as { cause?: { code?: unknown } }).cause?.code === 'ECONNREFUSED'
  if (error instanceof HostError || refusedConnection) return new Error(`${message}; the jobs from line ${line} on were not submitted`)
  return new Error(`${message}; the jobs from line ${line} on may not have been submitted (leasehold jobs lists those that were)`)
}
