import { EventSource, type ErrorEvent, type FetchLike } from 'eventsource'
import { readFileSync } from 'node:fs'
import type { components, paths } from '../../src-shared/api-types'
import { type ClientTarget, resolveClientTarget } from '../../src-shared/client-target'
import { MAX_BATCH_ITEMS } from '../../src-shared/limits'
import { ConfigError } from '../../src-shared/command-line'
import { parseFlags, TARGET_HELP, wholeNumber } from '../../src-shared/command-line'
import { answered, HostError, hostApi, hostError, type QueueJob, unreachable } from './http-client'

export const SUBMIT_HELP = `Usage: leasehold submit --type TYPE [flags]

Submits a job (POST /api/scheduler/jobs/submit) and prints its id.

Flags:
  --type TYPE          the job type, which picks the handler (required)
  --payload JSON       the job's input: JSON text, or @FILE to read it from a file (@- for stdin)
  --priority P         LOW, NORMAL, HIGH or URGENT [NORMAL]
  --units N            the capacity units the job needs while it runs [1]
  --queue Q            the stream (queue) workers take it from [default]
  --addon A            the add-on the job belongs to
  --max-attempts N     how many attempts a retryable failure or an expired lease may use [host default]
  --key KEY            an idempotency key: submitting the same key again is refused
                       (duplicate_request) and names the job that has it
  --at TIME            a delayed job: not run before TIME, an ISO-8601 time such as
                       2026-03-01T02:00:00Z (without a zone it is this machine's local time)
  --in DURATION        a delayed job: not run for DURATION, such as 90s, 10m, 2h, 1d or 1h30m
                       (--at and --in do not go together)
  --wait               follow the job until it ends: a live progress line on stderr (saying why
                       the job waits while it does); exit 0 if
                       it is DONE, 1 if it FAILED, was CANCELED or timed out (TIMEOUT). A BLOCKED
                       job is reported and waited on: an operator may requeue it
  --json               print the job as JSON instead of its id (with --wait: {job, result} at the end)
  --each FILE          one job per line of FILE (- for stdin), whose JSON is the job's payload;
                       the other flags apply to every job. The whole input is read first: a line
                       that is not JSON submits nothing (exit 2). Sent through
                       POST /api/scheduler/jobs/submit-batch, up to 1,000 jobs a request; prints
                       one id per job in the input's order (--json: one job per line). A job the
                       host refuses is one line on stderr naming its input line, the others are
                       submitted, and the exit is 1. Not with --payload, --key or --wait
${TARGET_HELP}
  -h, --help`

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
  json?: boolean
  each?: string
}

type SubmitBody = paths['/api/scheduler/jobs/submit']['post']['requestBody']['content']['application/json']
type Priority = components['schemas']['Priority']

const PRIORITIES: readonly Priority[] = ['LOW', 'NORMAL', 'HIGH', 'URGENT']
const TERMINAL = new Set(['DONE', 'FAILED', 'CANCELED', 'TIMEOUT'])

/** The text of the file `path` (`-`: stdin); one that cannot be read is a ConfigError naming `from`. */
function readInput(from: string, path: string): string {
  try {
    return readFileSync(path === '-' ? 0 : path, 'utf8')
  } catch (error) {
    const e = error as NodeJS.ErrnoException
    throw new ConfigError(`${from}: cannot read ${path === '-' ? 'stdin' : path} (${e.code ?? e.message})`)
  }
}

/** `text` as JSON; text that is not JSON is a ConfigError naming `from`. */
function parseJsonInput(from: string, text: string): unknown {
  try {
    return JSON.parse(text) as unknown
  } catch (error) {
    throw new ConfigError(`${from} is not valid JSON: ${(error as Error).message.split('\n')[0]}`)
  }
}

/** `--payload`: JSON text, `@file` or `@-`; anything unreadable or not JSON is a ConfigError (exit 2). */
export function readPayload(value: string): unknown {
  if (!value.startsWith('@')) return parseJsonInput('--payload', value)
  const path = value.slice(1)
  if (path === '') throw new ConfigError('--payload @FILE needs a file name (or @- for stdin)')
  return parseJsonInput(`--payload ${value}`, readInput(`--payload ${value}`, path))
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

/** `--at`: an ISO-8601 date and time (local without a zone), as the host's ISO UTC; anything else is a ConfigError. */
export function parseTime(flag: string, value: string): string {
  const date = /^(\d{4})-(\d\d)-(\d\d)T\d\d:\d\d(:\d\d(\.\d{1,3})?)?(Z|[+-]\d\d:\d\d)?$/.exec(value)
  // Date.parse takes 2026-02-30 for 2 March: the day must exist in its month.
  const real = date !== null && new Date(Date.UTC(Number(date[1]), Number(date[2]) - 1, Number(date[3]))).getUTCDate() === Number(date[3])
  const ms = real ? Date.parse(value) : NaN
  if (Number.isNaN(ms)) throw new ConfigError(`--${flag} must be an ISO-8601 time such as 2026-03-01T02:00:00Z (got "${value}")`)
  return new Date(ms).toISOString()
}

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }

/** `--in`: a duration such as 90s, 10m, 2h, 1d or 1h30m, in milliseconds; anything else is a ConfigError. */
export function parseDuration(flag: string, value: string): number {
  const parts = /^(\d+(ms|s|m|h|d))+$/.test(value) ? [...value.matchAll(/(\d+)(ms|s|m|h|d)/g)] : []
  const ms = parts.reduce((total, [, n, unit]) => total + Number(n) * DURATION_UNITS[unit!]!, 0)
  if (parts.length === 0 || !Number.isSafeInteger(ms)) {
    throw new ConfigError(`--${flag} must be a duration such as 90s, 10m, 2h, 1d or 1h30m (got "${value}")`)
  }
  return ms
}

/** `leasehold submit`: one job (with --each, one a line of the input); with --wait, follows it to its end. */
export async function submitCommand(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const flags = parseFlags<SubmitFlags>(argv, ['type', 'payload', 'priority', 'units', 'queue', 'addon', 'max-attempts', 'key', 'at', 'in', 'each'], ['wait', 'json'])
  const body = buildSubmit(flags)
  if (flags.each !== undefined) {
    if (flags.payload !== undefined) throw new ConfigError('--each and --payload: each line of --each is its job\'s payload')
    if (flags.key !== undefined) throw new ConfigError('--each and --key: an idempotency key names one job')
    if (flags.wait) throw new ConfigError('--each and --wait: --wait follows one job')
    const lines = readEachLines(flags.each)
    return submitEach(resolveClientTarget(flags, env), body, lines, flags.json === true)
  }
  const target = resolveClientTarget(flags, env)
  let job: components['schemas']['QueueJob']
  try {
    job = (await answered(target, hostApi(target).POST('/api/scheduler/jobs/submit', { body }))).job
  } catch (error) {
    const existing = (error as HostError).body?.job as components['schemas']['DuplicateRequest']['job'] | undefined
    if (error instanceof HostError && error.code === 'duplicate_request' && existing?.job_id) {
      throw new HostError(error.status, error.code, `${error.detail}: ${existing.job_id} (${existing.state})`, error.body)
    }
    throw error
  }
  if (!flags.wait) {
    console.log(flags.json ? JSON.stringify(job, null, 2) : job.job_id)
    return 0
  }
  if (!flags.json) console.log(job.job_id)
  const { code, answer } = await waitForJob(target, job.job_id, new ProgressLine(process.stderr))
  if (flags.json) console.log(JSON.stringify(answer, null, 2))
  return code
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
 * is then refused like any other. Prints each job created, in the input's order; a job refused
 * is one line on stderr. Exit 1 if any was refused; a request that fails stops the command, and
 * its line says from which input line on the jobs were not submitted.
 */
async function submitEach(target: ClientTarget, template: SubmitBody, lines: EachLine[], json: boolean): Promise<number> {
  const api = hostApi(target)
  let refused = 0
  let answeredOnce = false
  const send = async (request: EachLine[]): Promise<void> => {
    let answer: components['schemas']['SubmitBatchAnswer']
    try {
      answer = await answered(
        target,
        api.POST('/api/scheduler/jobs/submit-batch', {
          body: { jobs: request.map(({ payload }) => ({ ...template, payload })) },
          headers: json ? {} : { Prefer: 'return=minimal' },
        }),
      )
    } catch (error) {
      if (error instanceof HostError && error.status === 413 && request.length > 1) {
        const half = Math.ceil(request.length / 2)
        await send(request.slice(0, half))
        return send(request.slice(half))
      }
      if (error instanceof HostError && error.status === 413) {
        refused += 1
        console.error(`leasehold: line ${request[0]!.line}: ${error.message}`)
        return
      }
      throw answeredOnce ? stoppedAt(error, request[0]!.line) : error
    }
    answeredOnce = true
    let out = ''
    answer.results.forEach((result, i) => {
      if (!result.ok) {
        refused += 1
        console.error(`leasehold: line ${request[i]!.line}: ${result.detail} (${result.code})`)
      } else if (json) out += `${JSON.stringify('job' in result ? result.job : result)}\n`
      else out += `${'job_id' in result ? result.job_id : result.job.job_id}\n`
    })
    process.stdout.write(out)
  }
  for (const request of eachRequests(lines, Buffer.byteLength(JSON.stringify(template)))) await send(request)
  return refused > 0 ? 1 : 0
}

/** A failed request of `--each` after others went: its error, saying which input lines it leaves out. */
function stoppedAt(error: unknown, line: number): Error {
  const message = (error as Error).message
  // An answer refusing the request, or a connection refused, submitted none of it; a request cut off may have been.
  const refusedConnection = (error as { cause?: { code?: unknown } }).cause?.code === 'ECONNREFUSED'
  if (error instanceof HostError || refusedConnection) return new Error(`${message}; the jobs from line ${line} on were not submitted`)
  return new Error(`${message}; the jobs from line ${line} on may not have been submitted (leasehold jobs lists those that were)`)
}

// ---------------------------------------------------------------------------------------------
// --wait

/** GET /api/scheduler/jobs/{job_id}: the job as the reads show it, and its result once it ended. */
export type JobAnswer = components['schemas']['JobWithResult']

/** The live line: redrawn in place on a terminal, one line per change otherwise. */
export class ProgressLine {
  private last = ''
  private drawn = false

  constructor(private readonly out: NodeJS.WriteStream) {}

  private get tty(): boolean {
    return this.out.isTTY === true
  }

  /** Shows `line` if it changed; `keep` leaves it on screen (a terminal redraws below it). */
  show(line: string, keep = false): void {
    if (line === this.last) return
    this.last = line
    if (this.tty) {
      const width = this.out.columns ?? 0
      const fitted = width > 1 && line.length >= width ? `${line.slice(0, width - 2)}…` : line
      this.out.write(`\r\x1b[2K${fitted}${keep ? '\n' : ''}`)
      this.drawn = !keep
    } else {
      this.out.write(`${line}\n`)
    }
  }

  /** Ends the redrawn line so that what follows starts on its own line. */
  finish(): void {
    if (this.tty && this.drawn) this.out.write('\n')
    this.drawn = false
  }
}

function describe(job: QueueJob): string {
  // A finished job's progress and note are those of its last heartbeat: not worth repeating.
  if (TERMINAL.has(job.state)) return `job ${job.job_id} ${job.state}`
  const parts = [`job ${job.job_id} ${job.state}`]
  if (job.progress != null) parts.push(`${Math.round(job.progress * 100)}%`)
  if (job.attempts > 0) parts.push(`attempt ${job.attempts}/${job.max_attempts}`)
  let line = parts.join(' ')
  if (job.note) line += ` — ${job.note.replace(/\s+/g, ' ').trim()}`
  if (job.waiting_reason) line += ` — waiting: ${job.waiting_reason}${job.waiting_until ? ` until ${job.waiting_until}` : ''}`
  return line
}

/** The error of a finished job as one line. */
export function describeError(answer: JobAnswer): string {
  const error = answer.result?.error
  if (error == null) {
    if (answer.job.state === 'TIMEOUT') return 'its last lease expired with no attempts left'
    if (answer.job.state === 'CANCELED') return answer.job.note ? `canceled: ${answer.job.note}` : 'canceled'
    return 'no error given'
  }
  if (typeof error === 'string') return error
  if (typeof error === 'object') {
    const e = error as { message?: unknown; code?: unknown }
    if (typeof e.message === 'string') return typeof e.code === 'string' ? `${e.message} (${e.code})` : e.message
  }
  return JSON.stringify(error)
}

/** How long the stream may stay unreachable before --wait gives up. */
const GIVE_UP_MS = 60_000
/** Progress from heartbeats writes no event: the job is also read this often. */
const POLL_MS = 2_000
/** How long to wait before opening the stream again after the host answered it with a 5xx. */
const REOPEN_MS = 2_000

/**
 * The event stream as an EventSource (the `eventsource` package: it reconnects by itself and
 * resumes with Last-Event-ID). The host names each event by its type, and an EventSource hands
 * over only the names it listens to: this one hands every event to `onevent`, whatever its name.
 */
class EventLogSource extends EventSource {
  onevent: ((event: MessageEvent<string>) => void) | null = null

  override dispatchEvent(event: Event): boolean {
    if (event instanceof MessageEvent) this.onevent?.(event as MessageEvent<string>)
    return super.dispatchEvent(event)
  }
}

/** The job an event's data names, if it is an event of the log (StreamEvent) at all. */
function eventJobId(data: string): string | null {
  try {
    return (JSON.parse(data) as Partial<components['schemas']['StreamEvent']>).job_id ?? null
  } catch {
    return null
  }
}

/**
 * Follows a job to its end: the event stream (resumed with Last-Event-ID when it drops) says
 * when the job changed, a GET of the job after each (re)connect closes the race with events
 * that came before, and a slow poll picks up progress that heartbeats write without an event.
 */
export async function waitForJob(target: ClientTarget, jobId: string, line: ProgressLine): Promise<{ code: number; answer: JobAnswer }> {
  const api = hostApi(target)
  let settle!: (result: { code: number; answer: JobAnswer } | Error) => void
  const settled = new Promise<{ code: number; answer: JobAnswer } | Error>((resolve) => (settle = resolve))
  let done = false
  let blockedShown = false

  const end = (result: { code: number; answer: JobAnswer } | Error) => {
    if (done) return
    done = true
    settle(result)
  }

  const render = async (answer: JobAnswer) => {
    const job = answer.job
    if (job.state === 'BLOCKED') {
      if (!blockedShown) {
        blockedShown = true
        line.show(`${describe(job)}: ${await blockerLine(target, jobId)}; still waiting (an operator may requeue it)`, true)
      }
      return
    }
    blockedShown = false
    line.show(describe(job))
    if (TERMINAL.has(job.state)) {
      line.finish()
      if (job.state === 'DONE') return end({ code: 0, answer })
      console.error(`leasehold: job ${jobId} ${job.state}: ${describeError(answer)}`)
      end({ code: 1, answer })
    }
  }

  // Reads of the job run one at a time; a request made during one runs once it is done.
  let reading: Promise<void> | null = null
  let again = false
  const refresh = (): Promise<void> => {
    if (reading) {
      again = true
      return reading
    }
    reading = (async () => {
      do {
        again = false
        try {
          await render(await answered(target, api.GET('/api/scheduler/jobs/{job_id}', { params: { path: { job_id: jobId } } })))
        } catch (error) {
          // The host gone for a moment is the stream's business; a refusal (401, 404) ends the wait.
          if (error instanceof HostError && error.status < 500) end(error)
        }
      } while (again && !done)
      reading = null
    })()
    return reading
  }

  // The stream's requests carry the token; a refusal is kept as the host said it, and a failed
  // connection as the reason it failed, for the one line --wait ends with.
  let refusal: HostError | null = null
  let connectError: unknown = null
  const fetchWithToken: FetchLike = async (url, init) => {
    try {
      const response = await fetch(url, { ...init, headers: { ...init.headers, authorization: `Bearer ${target.token}` } })
      if (!response.ok) refusal = hostError(response.status, response.statusText, await response.clone().json().catch(() => null))
      return response
    } catch (error) {
      connectError = error
      throw error
    }
  }

  let source = null as EventLogSource | null
  let lastEventId: string | null = null
  let unreachableSince: number | null = null
  let reopenTimer: ReturnType<typeof setTimeout> | null = null
  const open = () => {
    // A stream opened again after the host refused it resumes where the last one stopped.
    const url = new URL('/api/events/stream', target.url)
    if (lastEventId !== null) url.searchParams.set('last_event_id', lastEventId)
    const stream = (source = new EventLogSource(url, { fetch: fetchWithToken }))
    stream.onopen = () => {
      unreachableSince = null
      // Subscribed: whatever happened before is in the job itself.
      void refresh()
    }
    stream.onevent = (event) => {
      if (event.lastEventId) lastEventId = event.lastEventId
      if (event.type === 'gap') void refresh()
      else if (event.data.includes(jobId) && eventJobId(event.data) === jobId) void refresh()
    }
    stream.onerror = (event: ErrorEvent) => {
      if (done) return
      if (stream.readyState !== EventSource.CLOSED) {
        // Dropped or unreachable: the EventSource tries again by itself, resuming with Last-Event-ID.
        unreachableSince ??= Date.now()
        if (Date.now() - unreachableSince > GIVE_UP_MS) {
          line.finish()
          end(unreachable(target.url, connectError ?? new Error(event.message ?? 'the event stream dropped')))
        }
        return
      }
      // Answered with another status than 200: a refusal ends the wait, a 5xx is tried again.
      const status = event.code ?? refusal?.status ?? 0
      if (status >= 400 && status < 500) {
        line.finish()
        end(refusal ?? new HostError(status, `http_${status}`, event.message ?? 'the event stream was refused', {}))
        return
      }
      reopenTimer = setTimeout(open, REOPEN_MS)
    }
  }

  const poll = setInterval(() => void refresh(), POLL_MS)
  open()
  try {
    const result = await settled
    await reading
    if (result instanceof Error) throw result
    return result
  } finally {
    clearInterval(poll)
    if (reopenTimer) clearTimeout(reopenTimer)
    source?.close()
  }
}

/** What a BLOCKED job waits on, from its open blocker. */
async function blockerLine(target: ClientTarget, jobId: string): Promise<string> {
  try {
    const { blockers } = await answered(target, hostApi(target).GET('/api/blockers', { params: { query: { state: 'OPEN' } } }))
    const blocker = blockers.find((b) => b.requester.job_id === jobId)
    if (blocker) return `halted on ${blocker.file}, held by ${blocker.holder.owner_id} (blocker ${blocker.blocker_id})`
  } catch {
    // the line without the details
  }
  return 'halted on a held file'
}
