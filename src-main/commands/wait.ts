import { EventSource, type ErrorEvent, type FetchLike } from 'eventsource'
import type { components } from '../../src-shared/api-types'
import { answerTimeoutMs, type ClientTarget } from '../../src-shared/client-target'
import { openStream } from '../../src-shared/http-json'
import { heldPath } from '../../src-shared/file-owner'
import { allBlockers, answered, HostError, hostApi, hostError, type QueueJob, refusedToken, unreachable } from './http-client'
import { printable } from '../../src-shared/printable'
import { WAIT_TIMED_OUT_EXIT } from '../../src-shared/command-line'
import { describeError, type JobAnswer } from './job-end'
import { durationText, SIGNAL_EXITS, type StopSignal } from './submit'

/** `leasehold submit --wait`: a job (with --each, every job submitted) followed to its end on a live progress line, through the event stream. */

const TERMINAL: ReadonlySet<string> = new Set(['DONE', 'FAILED', 'CANCELED', 'TIMEOUT'])

/** The live line: redrawn in place on a terminal, one line per change otherwise. */
export class ProgressLine {
  private last = ''
  private drawn = false

  constructor(private readonly out: NodeJS.WriteStream) {}

  /** Whether the line is redrawn in place (a terminal). */
  get tty(): boolean {
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

/**
 * A job's line as the wait shows it. Its note comes from the job's worker (a remote one too) and
 * its waiting reason names other jobs' types: shown {@link printable}, as `jobs show` shows them.
 */
function describe(job: QueueJob): string {
  // A finished job's progress and note are those of its last heartbeat: not worth repeating.
  if (TERMINAL.has(job.state)) return printable(`job ${job.job_id} ${job.state}`)
  const parts = [`job ${job.job_id} ${job.state}`]
  if (job.progress != null) parts.push(`${Math.round(job.progress * 100)}%`)
  if (job.attempts > 0) parts.push(`attempt ${job.attempts}/${job.max_attempts}`)
  let line = parts.join(' ')
  if (job.note) line += ` — ${job.note.replace(/\s+/g, ' ').trim()}`
  if (job.waiting_reason) line += ` — waiting: ${job.waiting_reason}${job.waiting_until ? ` until ${job.waiting_until}` : ''}`
  return printable(line)
}


/**
 * SIGINT and SIGTERM while a wait follows its jobs: the first calls `stop`, which ends the wait
 * as --wait-timeout ends it (each job said, and with --json printed, as it stands; the jobs go
 * on), so that a caller still learns which jobs were made; a second, while the jobs are read for
 * that, ends the command at once. Returns what stops listening.
 */
function onStopSignals(stop: (signal: StopSignal) => void): () => void {
  let first: StopSignal | null = null
  const handlers = (Object.keys(SIGNAL_EXITS) as StopSignal[]).map((signal) => {
    const handler = () => {
      if (first !== null) {
        console.error(`leasehold: ${signal} again: stopped at once; the jobs go on`)
        process.exit(SIGNAL_EXITS[first])
      }
      first = signal
      stop(signal)
    }
    process.on(signal, handler)
    return { signal, handler }
  })
  return () => {
    for (const { signal, handler } of handlers) process.off(signal, handler)
  }
}

/** A wait a signal stopped before the host answered for its job once: the job goes on, its state unknown. */
export class WaitStopped extends Error {
  override name = 'WaitStopped'
  constructor(
    readonly signal: StopSignal,
    jobId: string,
  ) {
    super(`stopped by ${signal} before the host answered for job ${jobId}; it is left as it is (leasehold jobs show ${jobId} says how it stands)`)
  }
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

/** An answer's text as JSON if it is JSON, else as it is. */
function jsonOrText(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return text
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

/** What {@link followEvents} tells its caller. */
interface StreamListener {
  /** The stream is open: events from now on will come. `resumed`: it went on from the last event seen. */
  opened(resumed: boolean): void
  /** An event of the log (a StreamEvent as text). */
  event(data: string): void
  /** Events were missed (a `gap` frame): what the caller knows must be read again. */
  gap(): void
  /** The host refused the stream (4xx), or stayed unreachable past GIVE_UP_MS: the wait ends with this error. */
  failed(error: Error): void
  /** The connection was lost, or the host answered the stream with a 5xx: one line to print now, while it is tried again. */
  lost(line: string): void
  /** The stream is open again after {@link lost}: one line to print. */
  back(line: string): void
}

/**
 * The host's event stream, followed until the returned function is called: opened again when
 * the host answered it with a 5xx, resumed with Last-Event-ID whenever it drops.
 */
function followEvents(target: ClientTarget, listener: StreamListener): () => void {
  let closed = false
  // The stream's requests go over node:http (openStream: fetch would cost the command ~0.1 s to
  // load) and carry the token; a refusal is kept as the host said it, and a failed connection as
  // the reason it failed, for the one line the wait ends with.
  let refusal: HostError | null = null
  let connectError: unknown = null
  const fetchWithToken: FetchLike = async (url, init) => {
    try {
      const answer = await openStream(new URL(url), { token: target.token, headers: init.headers, signal: init.signal, timeoutMs: answerTimeoutMs(target) })
      if (!answer.ok) {
        const error = hostError(answer.status, answer.statusText, jsonOrText(await answer.text()))
        refusal = error.status === 401 ? refusedToken(target, error) : error
      }
      return answer
    } catch (error) {
      connectError = error
      throw error
    }
  }

  let source = null as EventLogSource | null
  let lastEventId: string | null = null
  let unreachableSince: number | null = null
  // Said once when the stream is lost, and once when it is back: a user who sees nothing for a
  // minute after the host stopped cannot tell a lost host from a job that takes long.
  let lostShown = false
  const reason = (event: ErrorEvent): string => {
    const cause = ((connectError as { cause?: unknown } | null)?.cause ?? connectError) as { code?: string; message?: string } | null
    return cause?.code ?? cause?.message ?? event.message ?? 'the event stream dropped'
  }
  const lost = (why: string) => {
    if (lostShown) return
    lostShown = true
    listener.lost(printable(`lost the connection to the host at ${target.url} (${why}); trying again for up to ${GIVE_UP_MS / 1000} s`))
  }
  let reopenTimer: ReturnType<typeof setTimeout> | null = null
  const fail = (error: Error) => {
    closed = true
    source?.close()
    listener.failed(error)
  }
  const open = () => {
    // A stream opened again after the host refused it resumes where the last one stopped.
    // Under the URL's path: a host behind a proxy under a prefix.
    const url = new URL(`${target.url}/api/events/stream`)
    if (lastEventId !== null) url.searchParams.set('last_event_id', lastEventId)
    const stream = (source = new EventLogSource(url, { fetch: fetchWithToken }))
    stream.onopen = () => {
      unreachableSince = null
      connectError = null
      if (lostShown) listener.back(`connected to the host at ${target.url} again; still waiting`)
      lostShown = false
      listener.opened(lastEventId !== null)
    }
    stream.onevent = (event) => {
      if (event.lastEventId) lastEventId = event.lastEventId
      if (event.type === 'gap') listener.gap()
      else listener.event(event.data)
    }
    stream.onerror = (event: ErrorEvent) => {
      if (closed) return
      if (stream.readyState !== EventSource.CLOSED) {
        // Dropped or unreachable: the EventSource tries again by itself, resuming with Last-Event-ID.
        unreachableSince ??= Date.now()
        if (Date.now() - unreachableSince > GIVE_UP_MS) fail(unreachable(target, connectError ?? new Error(event.message ?? 'the event stream dropped')))
        // A stream that ended is opened again at once, unsaid; a connection that failed is said.
        else if (connectError !== null) lost(reason(event))
        return
      }
      // Answered with another status than 200: a refusal ends the wait, a 5xx is tried again.
      const status = event.code ?? refusal?.status ?? 0
      if (status >= 400 && status < 500) fail(refusal ?? new HostError(status, `http_${status}`, event.message ?? 'the event stream was refused', {}))
      else {
        lost(`the event stream was answered ${status}`)
        reopenTimer = setTimeout(open, REOPEN_MS)
      }
    }
  }
  open()
  return () => {
    closed = true
    if (reopenTimer) clearTimeout(reopenTimer)
    source?.close()
  }
}

/**
 * Follows a job to its end: the event stream (resumed with Last-Event-ID when it drops) says
 * when the job changed, a GET of the job after each (re)connect closes the race with events
 * that came before, and a slow poll picks up progress that heartbeats write without an event.
 */
export async function waitForJob(
  target: ClientTarget,
  jobId: string,
  line: ProgressLine,
  { timeoutMs }: { timeoutMs?: number } = {},
): Promise<{ code: number; answer: JobAnswer }> {
  const api = hostApi(target)
  let settle!: (result: { code: number; answer: JobAnswer } | Error) => void
  const settled = new Promise<{ code: number; answer: JobAnswer } | Error>((resolve) => (settle = resolve))
  let done = false
  let blockedShown = false
  /** The job as last read: what a wait that times out answers with. */
  let latest: JobAnswer | null = null

  const end = (result: { code: number; answer: JobAnswer } | Error) => {
    if (done) return
    done = true
    settle(result)
  }

  const render = async (answer: JobAnswer) => {
    latest = answer
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
      console.error(`leasehold: job ${jobId} ${job.state}: ${printable(describeError(answer))}`)
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

  const close = followEvents(target, {
    // Subscribed: whatever happened before is in the job itself.
    opened: () => void refresh(),
    event: (data) => {
      if (data.includes(jobId) && eventJobId(data) === jobId) void refresh()
    },
    gap: () => void refresh(),
    failed: (error) => {
      line.finish()
      end(error)
    },
    lost: (text) => line.show(`leasehold: ${text}`, true),
    back: (text) => line.show(`leasehold: ${text}`, true),
  })
  const poll = setInterval(() => void refresh(), POLL_MS)
  // --wait-timeout: the job read once more, so that the answer is its state at the deadline.
  const deadline = timeoutMs === undefined ? null : setTimeout(() => void refresh().then(() => timedOut()), timeoutMs)
  const timedOut = () => {
    if (done) return
    if (latest === null) return end(new Error(`the host did not answer for job ${jobId} within ${durationText(timeoutMs!)} (--wait-timeout)`))
    line.finish()
    console.error(`leasehold: ${stillGoing(latest, `after ${durationText(timeoutMs!)}`)}; it is left as it is (leasehold jobs cancel ${jobId} stops it)`)
    end({ code: WAIT_TIMED_OUT_EXIT, answer: latest })
  }
  // A signal ends the wait as --wait-timeout does: the job read once more and said as it stands.
  const interrupted = (signal: StopSignal) => {
    if (done) return
    line.finish()
    if (latest === null) return end(new WaitStopped(signal, jobId))
    console.error(`leasehold: ${stillGoing(latest, `when ${signal} stopped the wait`)}; it is left as it is (leasehold jobs cancel ${jobId} stops it)`)
    end({ code: SIGNAL_EXITS[signal], answer: latest })
  }
  const stopListening = onStopSignals((signal) => void refresh().then(() => interrupted(signal)))
  try {
    const result = await settled
    await reading
    if (result instanceof Error) throw result
    return result
  } finally {
    clearInterval(poll)
    if (deadline) clearTimeout(deadline)
    stopListening()
    close()
  }
}

/**
 * A job that had not ended when the wait stopped (`when`: "after 30s", at --wait-timeout's
 * deadline; "when SIGINT stopped the wait"), in words: "job … still QUEUED after 30s — waiting: …".
 */
function stillGoing(answer: JobAnswer, when: string): string {
  const job = answer.job
  const waiting = job.waiting_reason ? ` — waiting: ${job.waiting_reason}` : ''
  return printable(`job ${job.job_id} still ${job.state} ${when}${waiting}`)
}

// ---------------------------------------------------------------------------------------------
// submit --each --wait

type JobState = components['schemas']['JobState']

/** A job of `submit --each`: its id, and the line of the input it came from. */
export interface EachJob {
  job_id: string
  line: number
}

/** How a job of `--each --wait` may end, in the order the line counts them ('gone': purged before it was read). */
const ENDINGS = ['DONE', 'FAILED', 'CANCELED', 'TIMEOUT', 'gone'] as const

/** How many reads of jobs go at once when they must be read one by one. */
const READS_AT_ONCE = 8
/** How often the many-jobs line is redrawn at most: on a terminal, and in a log. */
const REDRAW_MS = { tty: 200, log: 5000 }

/** `fn` for each of `items`, at most `limit` at a time. */
async function eachAtMost<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0
  const lane = async () => {
    while (next < items.length) await fn(items[next++]!)
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane))
}

/** A job's event as `[job_id, the job's state after it]`; null for any other event. */
function jobEventState(data: string): [string, JobState] | null {
  try {
    const event = JSON.parse(data) as Partial<components['schemas']['StreamEvent']>
    const state = event.data?.state
    return event.entity_type === 'JOB' && typeof event.job_id === 'string' && typeof state === 'string' ? [event.job_id, state as JobState] : null
  } catch {
    return null
  }
}

/** Follows the jobs of `submit --each --wait`: see {@link followJobs}. */
export interface JobsFollower {
  /**
   * Waits until every one of `jobs` has ended, on a live line; says why each that is not DONE
   * ended; with `json`, then prints every job's end as {@link eachEndLine} does, in the input's
   * order. The exit code: 0 if all are DONE. With `timeoutMs`, waits that long at most: the jobs
   * not ended then are each said on a line as they are, and left so ({@link WAIT_TIMED_OUT_EXIT}).
   * SIGINT or SIGTERM ends the wait alike, with the signal's exit status (130, 143).
   */
  wait(jobs: EachJob[], line: ProgressLine, options?: { json?: boolean; timeoutMs?: number }): Promise<number>
  close(): void
}

/** How a job of `--each --wait` was last read: its answer, gone from the host, or a read that failed. */
type EachEnd = JobAnswer | { gone: true } | { failed: string }

/**
 * The line `submit --each --wait --json` prints for a job once all have ended: `{job, result}`
 * as `submit --wait --json` prints its one job's end (GET /api/scheduler/jobs/{job_id}), on one
 * line and with `line`, the input line it came from; for a job purged before it was read,
 * `{job_id, line, gone: true}`; for one the host did not answer for, `{job_id, line, error}`.
 */
export function eachEndLine(job: EachJob, end: EachEnd): string {
  if ('gone' in end) return JSON.stringify({ job_id: job.job_id, line: job.line, gone: true })
  if ('failed' in end) return JSON.stringify({ job_id: job.job_id, line: job.line, error: end.failed })
  return JSON.stringify({ ...end, line: job.line })
}

/**
 * `submit --each --wait`: opens the event stream before the jobs are submitted (resolving once
 * the host has subscribed it), so that no job's end can come before it; until `wait` names the
 * jobs, the last state of every job an event names is kept, for the ones that end before their
 * submit is answered. Then each job's events move it on, and a job that reaches DONE, FAILED,
 * CANCELED or TIMEOUT has ended. A `gap` in the stream, or a stream opened again with nothing to
 * resume from, reads the jobs not ended one by one (they may have ended unseen).
 */
export async function followJobs(target: ClientTarget): Promise<JobsFollower> {
  const api = hostApi(target)
  /** Until `wait`: the last state of every job an event named. */
  let seen: Map<string, JobState> | null = new Map()
  /** Events may have been missed before `wait`: the jobs are read once it names them. */
  let missedBefore = false
  /** Ours that have not ended: their last state known (null before any). */
  const pending = new Map<string, JobState | null>()
  const ended = new Map<string, JobState | 'gone'>()
  let failure: Error | null = null
  let changed = () => {}
  /** Where a line about the connection goes: stderr until `wait` has its live line, then above that line. */
  let say = (text: string) => console.error(text)

  const note = (jobId: string, state: JobState | 'gone') => {
    if (!pending.has(jobId)) return
    if (state === 'gone' || TERMINAL.has(state)) {
      pending.delete(jobId)
      ended.set(jobId, state)
    } else pending.set(jobId, state)
    changed()
  }

  // Reads of the jobs not ended run one round at a time; one asked for meanwhile runs after it.
  let reading: Promise<void> | null = null
  let again = false
  const readPending = (): void => {
    if (seen) {
      missedBefore = true
      return
    }
    if (reading) {
      again = true
      return
    }
    reading = (async () => {
      do {
        again = false
        let unanswered = false
        await eachAtMost([...pending.keys()], READS_AT_ONCE, async (jobId) => {
          try {
            const answer = await answered(target, api.GET('/api/scheduler/jobs/{job_id}', { params: { path: { job_id: jobId } } }))
            note(jobId, answer.job.state)
          } catch (error) {
            // Gone (purged, or pruned by retention): it had ended. The host away: read it again later.
            if (error instanceof HostError && error.status === 404) note(jobId, 'gone')
            else unanswered = true
          }
        })
        if (unanswered && failure === null) await new Promise((resolve) => setTimeout(resolve, REOPEN_MS))
        again ||= unanswered && failure === null
      } while (again && pending.size > 0)
      reading = null
    })()
  }

  let openedOnce = false
  let resolveOpen!: () => void
  let rejectOpen!: (error: Error) => void
  const open = new Promise<void>((resolve, reject) => {
    resolveOpen = resolve
    rejectOpen = reject
  })
  const close = followEvents(target, {
    opened: (resumed) => {
      if (!openedOnce) {
        openedOnce = true
        resolveOpen()
      } else if (!resumed) readPending()
    },
    event: (data) => {
      const job = jobEventState(data)
      if (job && seen) seen.set(job[0], job[1])
      else if (job) note(job[0], job[1])
    },
    gap: readPending,
    failed: (error) => {
      failure = error
      rejectOpen(error)
      changed()
    },
    lost: (text) => say(`leasehold: ${text}`),
    back: (text) => say(`leasehold: ${text}`),
  })
  try {
    await open
  } catch (error) {
    close()
    throw error
  }

  const wait = async (jobs: EachJob[], line: ProgressLine, { json = false, timeoutMs }: { json?: boolean; timeoutMs?: number } = {}): Promise<number> => {
    for (const job of jobs) pending.set(job.job_id, null)
    say = (text) => line.show(text, true)
    const early = seen!
    seen = null
    for (const [jobId, state] of early) note(jobId, state)
    if (missedBefore) readPending()

    const render = () => {
      const counts = new Map<string, number>(ENDINGS.map((state) => [state, 0]))
      for (const state of ended.values()) counts.set(state, counts.get(state)! + 1)
      const states = [...counts].filter(([, n]) => n > 0).map(([state, n]) => `${n.toLocaleString('en-US')} ${state}`).join(', ')
      let text = `${ended.size.toLocaleString('en-US')} of ${jobs.length.toLocaleString('en-US')} jobs ended${states ? ` (${states})` : ''}`
      let blocked = 0
      for (const state of pending.values()) if (state === 'BLOCKED') blocked += 1
      if (blocked > 0) text += `; ${blocked.toLocaleString('en-US')} BLOCKED, waiting for an operator`
      line.show(text)
    }
    /** The signal that ended the wait before every job had ended: each is then said as --wait-timeout says it. */
    let stoppedBy = null as StopSignal | null
    let stopWaiting = () => {}
    const stopListening = onStopSignals((signal) => {
      stoppedBy = signal
      stopWaiting()
    })
    try {
      await new Promise<void>((resolve) => {
        let timer: ReturnType<typeof setTimeout> | null = null
        const deadline = timeoutMs === undefined ? null : setTimeout(() => settle(), timeoutMs)
        const settle = () => {
          if (timer) clearTimeout(timer)
          if (deadline) clearTimeout(deadline)
          resolve()
        }
        stopWaiting = settle
        changed = () => {
          if (pending.size === 0 || failure) return settle()
          timer ??= setTimeout(() => {
            timer = null
            render()
          }, line.tty ? REDRAW_MS.tty : REDRAW_MS.log)
        }
        render()
        changed()
      })
      close()
      changed = () => {}
      render()
      line.finish()
      if (failure) throw failure
      // Each job that is not DONE is read for why it ended, or (past --wait-timeout) how it goes on;
      // with --json, every job, for its line.
      const ends = new Map<string, EachEnd>()
      await eachAtMost(json ? jobs : jobs.filter((job) => ended.get(job.job_id) !== 'DONE'), READS_AT_ONCE, async ({ job_id }) => {
        if (ended.get(job_id) === 'gone') return void ends.set(job_id, { gone: true })
        try {
          const answer = await answered(target, api.GET('/api/scheduler/jobs/{job_id}', { params: { path: { job_id } } }))
          ends.set(job_id, answer)
          note(job_id, answer.job.state) // one not ended at the deadline may have ended since
        } catch (error) {
          // Purged between its end and this read: gone, as one purged before its end was seen.
          if (error instanceof HostError && error.status === 404) ends.set(job_id, { gone: true })
          else ends.set(job_id, { failed: (error as Error).message })
        }
      })
      // How the wait stopped before the jobs said as still going had ended: its deadline, or a signal.
      const when = stoppedBy === null ? `after ${durationText(timeoutMs!)}` : `when ${stoppedBy} stopped the wait`
      const why = (end: EachEnd, state: string | undefined) => {
        if ('gone' in end) return 'no longer on the host (purged)'
        if ('failed' in end) return `${state ?? 'not ended'} (${end.failed})`
        return state === undefined ? stillGoing(end, when).replace(/^job \S+ /, '') : `${state}: ${describeError(end)}`
      }
      const notDone = jobs.filter((job) => ended.get(job.job_id) !== 'DONE')
      for (const job of notDone) console.error(printable(`leasehold: line ${job.line}: job ${job.job_id} ${why(ends.get(job.job_id)!, ended.get(job.job_id))}`))
      if (pending.size > 0) {
        const count = pending.size === 1 ? '1 job had not ended' : `${pending.size.toLocaleString('en-US')} jobs had not ended`
        console.error(`leasehold: ${count} ${when}${stoppedBy === null ? ' (--wait-timeout)' : ''}; left as ${pending.size === 1 ? 'it is' : 'they are'}`)
      }
      if (json) process.stdout.write(jobs.map((job) => `${eachEndLine(job, ends.get(job.job_id)!)}\n`).join(''))
      if (pending.size > 0) return stoppedBy === null ? WAIT_TIMED_OUT_EXIT : SIGNAL_EXITS[stoppedBy]
      return notDone.length > 0 ? 1 : 0
    } finally {
      stopListening()
    }
  }
  return { wait, close }
}

/** What a BLOCKED job waits on, from its open blocker. */
async function blockerLine(target: ClientTarget, jobId: string): Promise<string> {
  try {
    const blockers = await allBlockers(target, 'OPEN')
    const blocker = blockers.find((b) => b.requester.job_id === jobId)
    // The file and the holder are free text: control characters are shown escaped.
    if (blocker) return printable(`halted on ${blocker.file}, held by ${blocker.holder.owner_id}${heldPath(blocker.file, blocker.holder.file)} (blocker ${blocker.blocker_id})`)
  } catch {
    // the line without the details
  }
  return 'halted on a held file'
}
