import { EventSource, type ErrorEvent, type FetchLike } from 'eventsource'
import type { components } from '../../src-shared/api-types'
import type { ClientTarget } from '../../src-shared/client-target'
import { answered, HostError, hostApi, hostError, type QueueJob, unreachable } from './http-client'

/** `leasehold submit --wait`: a job followed to its end, on a live progress line. */

const TERMINAL = new Set(['DONE', 'FAILED', 'CANCELED', 'TIMEOUT'])

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
