import { readFileSync } from 'node:fs'
import { type ClientTarget, resolveClientTarget } from '../client-config'
import { ConfigError } from '../config'
import { callHost, HostError, hostError, parseFlags, type QueueJob, type QueueResult, TARGET_HELP, unreachable, wholeNumber } from './http-client'

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
}

const PRIORITIES = ['LOW', 'NORMAL', 'HIGH', 'URGENT']
const TERMINAL = new Set(['DONE', 'FAILED', 'CANCELED', 'TIMEOUT'])

/** `--payload`: JSON text, `@file` or `@-`; anything unreadable or not JSON is a ConfigError (exit 2). */
export function readPayload(value: string): unknown {
  let text = value
  let from = '--payload'
  if (value.startsWith('@')) {
    const path = value.slice(1)
    if (path === '') throw new ConfigError('--payload @FILE needs a file name (or @- for stdin)')
    from = `--payload ${value}`
    try {
      text = readFileSync(path === '-' ? 0 : path, 'utf8')
    } catch (error) {
      const e = error as NodeJS.ErrnoException
      throw new ConfigError(`${from}: cannot read ${path === '-' ? 'stdin' : path} (${e.code ?? e.message})`)
    }
  }
  try {
    return JSON.parse(text) as unknown
  } catch (error) {
    throw new ConfigError(`${from} is not valid JSON: ${(error as Error).message.split('\n')[0]}`)
  }
}

export function buildSubmit(flags: SubmitFlags): Record<string, unknown> {
  if (flags.type === undefined || flags.type.trim() === '') throw new ConfigError('--type is required (the job type, e.g. --type exec)')
  const body: Record<string, unknown> = { job_type: flags.type, cost_units: wholeNumber('units', flags.units, 1, 1_000_000) ?? 1 }
  if (flags.payload !== undefined) body.payload = readPayload(flags.payload)
  if (flags.priority !== undefined) {
    const priority = flags.priority.toUpperCase()
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

/** `leasehold submit`: one job; with --wait, follows it to its end. */
export async function submitCommand(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const flags = parseFlags<SubmitFlags>(argv, ['type', 'payload', 'priority', 'units', 'queue', 'addon', 'max-attempts', 'key', 'at', 'in'], ['wait', 'json'])
  const body = buildSubmit(flags)
  const target = resolveClientTarget(flags, env)
  let job: QueueJob
  try {
    job = (await callHost<{ job: QueueJob }>(target, 'POST', '/api/scheduler/jobs/submit', body)).job
  } catch (error) {
    const existing = (error as HostError).body?.job as QueueJob | undefined
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
// --wait

export interface JobAnswer {
  job: QueueJob
  result: QueueResult | null
}

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
  if (job.waiting_reason) line += ` — waiting: ${job.waiting_reason}`
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

interface SseFrame {
  id?: string
  event: string
  data: string
  retry?: number
}

/** Splits server-sent events off a text buffer; returns the frames and what is left over. */
export function parseSse(buffer: string): { frames: SseFrame[]; rest: string } {
  const text = buffer.replace(/\r\n?/g, '\n')
  const frames: SseFrame[] = []
  let start = 0
  for (let end = text.indexOf('\n\n', start); end !== -1; end = text.indexOf('\n\n', start)) {
    const frame: SseFrame = { event: 'message', data: '' }
    const data: string[] = []
    for (const line of text.slice(start, end).split('\n')) {
      if (line === '' || line.startsWith(':')) continue
      const colon = line.indexOf(':')
      const field = colon === -1 ? line : line.slice(0, colon)
      const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '')
      if (field === 'id') frame.id = value
      else if (field === 'event') frame.event = value
      else if (field === 'data') data.push(value)
      else if (field === 'retry' && /^\d+$/.test(value)) frame.retry = Number(value)
    }
    frame.data = data.join('\n')
    frames.push(frame)
    start = end + 2
  }
  return { frames, rest: text.slice(start) }
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal.aborted) return resolve()
    const timer = setTimeout(resolve, ms)
    signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true })
  })

/**
 * Follows a job to its end: the event stream (resumed with Last-Event-ID when it drops) says
 * when the job changed, a GET of the job after each (re)connect closes the race with events
 * that came before, and a slow poll picks up progress that heartbeats write without an event.
 */
export async function waitForJob(target: ClientTarget, jobId: string, line: ProgressLine): Promise<{ code: number; answer: JobAnswer }> {
  const stop = new AbortController()
  let outcome: { code: number; answer: JobAnswer } | null = null
  let failure: unknown = null
  let blockedShown = false

  const end = (result: { code: number; answer: JobAnswer } | null, error?: unknown) => {
    if (stop.signal.aborted) return
    outcome = result
    failure = error ?? null
    stop.abort()
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
          await render(await callHost<JobAnswer>(target, 'GET', `/api/scheduler/jobs/${encodeURIComponent(jobId)}`))
        } catch (error) {
          // The host gone for a moment is the stream's business; a refusal (401, 404) ends the wait.
          if (error instanceof HostError && error.status < 500) end(null, error)
        }
      } while (again && !stop.signal.aborted)
      reading = null
    })()
    return reading
  }

  const poll = setInterval(() => void refresh(), POLL_MS)
  try {
    let lastEventId: string | null = null
    let retryMs = 2_000
    let unreachableSince: number | null = null
    while (!stop.signal.aborted) {
      let response: Response | null = null
      try {
        const headers: Record<string, string> = { authorization: `Bearer ${target.token}`, accept: 'text/event-stream' }
        if (lastEventId !== null) headers['last-event-id'] = lastEventId
        response = await fetch(`${target.url}/api/events/stream`, { headers, signal: stop.signal })
      } catch (error) {
        if (stop.signal.aborted) break
        unreachableSince ??= Date.now()
        if (Date.now() - unreachableSince > GIVE_UP_MS) {
          line.finish()
          end(null, unreachable(target.url, error))
          break
        }
        await sleep(retryMs, stop.signal)
        continue
      }
      if (!response.ok) {
        const error = await hostError(response)
        if (response.status < 500) {
          line.finish()
          end(null, error)
          break
        }
        await sleep(retryMs, stop.signal)
        continue
      }
      unreachableSince = null
      // Subscribed: whatever happened before is in the job itself.
      void refresh()
      try {
        const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader()
        let buffer = ''
        for (;;) {
          const { value, done } = await reader.read()
          if (done) break
          const { frames, rest } = parseSse(buffer + value)
          buffer = rest
          for (const frame of frames) {
            if (frame.retry !== undefined) retryMs = Math.min(Math.max(frame.retry, 250), 30_000)
            if (frame.id !== undefined && frame.id !== '') lastEventId = frame.id
            if (frame.event === 'gap') void refresh()
            else if (frame.data.includes(jobId)) {
              try {
                if ((JSON.parse(frame.data) as { job_id?: string }).job_id === jobId) void refresh()
              } catch {
                // not an event of ours
              }
            }
          }
        }
      } catch {
        // the stream dropped (or we stopped it): resume below with Last-Event-ID
      }
      if (!stop.signal.aborted) await sleep(retryMs, stop.signal)
    }
    await reading
  } finally {
    clearInterval(poll)
    stop.abort()
  }
  if (failure) throw failure
  return outcome!
}

/** What a BLOCKED job waits on, from its open blocker. */
async function blockerLine(target: ClientTarget, jobId: string): Promise<string> {
  try {
    const { blockers } = await callHost<{ blockers: Array<{ blocker_id: string; file: string; holder: { owner_id: string }; requester: { job_id: string | null } }> }>(
      target,
      'GET',
      '/api/blockers?state=OPEN',
    )
    const blocker = blockers.find((b) => b.requester.job_id === jobId)
    if (blocker) return `halted on ${blocker.file}, held by ${blocker.holder.owner_id} (blocker ${blocker.blocker_id})`
  } catch {
    // the line without the details
  }
  return 'halted on a held file'
}
