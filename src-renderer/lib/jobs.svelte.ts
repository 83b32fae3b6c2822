import { eventMoves } from '../../src-shared/event-types'
import { JOB_STATES as CANONICAL_STATES, type JobState as CanonicalState, shownState } from '../../src-shared/job-states'
import { MAX_ID_CHARS } from '../../src-shared/limits'
import { describeError, overtaken, WAITING_STATES, type ApiClient, type Job, type JobState, type LogEvent } from './api'
import { newerJob, reduceJob, reduceJobs } from './job-events'

export const PAGE_SIZE = 25

/** What a job's row asks of the host. */
export type RowAction = 'cancel' | 'run now'

/** How many of the newest jobs the Overview lists. */
export const RECENT_JOBS = 6

export interface JobFilter {
  /** A state as the queue API shows it, or '' for all. */
  state: JobState | ''
  /** A whole job type as the host keeps it, outer spaces and all (" padded " is not "padded"); '' for any. */
  job_type: string
  /** A whole add-on id, as `job_type`; '' for any. */
  addon_id: string
  /** Part of a job's id, type or add-on (the shortened ids the tables show are such parts), spaces and all; '' for none. */
  search: string
  /** Only the jobs that ran out of attempts (FAILED or TIMEOUT, dead-lettered); false for no such filter. */
  dead_letter: boolean
}

/** No filter: every job. */
export const NO_FILTER: JobFilter = { state: '', job_type: '', addon_id: '', search: '', dead_letter: false }

/** The fragment's names of a filter's fields (`#/jobs?state=FAILED&type=sleep`). */
const QUERY_NAMES = { state: 'state', job_type: 'type', addon_id: 'addon', search: 'search', dead_letter: 'dead_letter' } as const

/** A filter as the Jobs view's fragment carries it: only the fields it sets. */
export function filterQuery(filter: JobFilter): URLSearchParams {
  const query = new URLSearchParams()
  if (filter.state) query.set(QUERY_NAMES.state, filter.state)
  for (const field of ['job_type', 'addon_id', 'search'] as const) if (filter[field] !== '') query.set(QUERY_NAMES[field], filter[field])
  if (filter.dead_letter) query.set(QUERY_NAMES.dead_letter, '1')
  return query
}

/** A state as a link may spell it: in any case, and LEASED (the engine's word) as the RUNNING the queue API shows; null for no state the API knows. */
function stateOfLink(spelt: string): JobState | null {
  const upper = spelt.toUpperCase()
  return (CANONICAL_STATES as readonly string[]).includes(upper) ? shownState(upper as CanonicalState) : null
}

/** The dead-letter filter as a link may spell it: the page's `1`, or the API's `true`. */
const DEAD_LETTER_SPELLINGS: Readonly<Record<string, boolean>> = { '1': true, true: true, '0': false, false: false }

/** The filter a fragment's query names, as the page or the API spells it; what neither does is left out ({@link unreadQuery} names it). */
export function filterOfQuery(query: URLSearchParams): JobFilter {
  const state = query.get(QUERY_NAMES.state) ?? ''
  return {
    state: stateOfLink(state) ?? '',
    job_type: query.get(QUERY_NAMES.job_type) ?? '',
    addon_id: query.get(QUERY_NAMES.addon_id) ?? '',
    search: query.get(QUERY_NAMES.search) ?? '',
    dead_letter: DEAD_LETTER_SPELLINGS[(query.get(QUERY_NAMES.dead_letter) ?? '').toLowerCase()] ?? false,
  }
}

/**
 * What of a fragment's query no filter takes (`state=NOPE`, `dead_letter=maybe`, `colour=red`),
 * as written: the view says so, rather than list every job as if the link had asked for them.
 */
export function unreadQuery(query: URLSearchParams): string[] {
  const names: readonly string[] = Object.values(QUERY_NAMES)
  const unread: string[] = []
  for (const [name, value] of query) {
    const understood =
      name === QUERY_NAMES.state
        ? value === '' || stateOfLink(value) !== null
        : name === QUERY_NAMES.dead_letter
          ? value === '' || value.toLowerCase() in DEAD_LETTER_SPELLINGS
          : names.includes(name)
    if (!understood) unread.push(`${name}=${value}`)
  }
  return unread
}

/** Whether two filters select the same jobs. */
export const sameFilter = (a: JobFilter, b: JobFilter): boolean => filterQuery(a).toString() === filterQuery(b).toString()

/** Whether any job can match: its type, add-on and id are at most {@link MAX_ID_CHARS} characters (the fields' maxlength; a link may say more). */
const canMatch = (filter: JobFilter): boolean => [filter.job_type, filter.addon_id, filter.search].every((value) => value.length <= MAX_ID_CHARS)

/** Whether a filter selects fewer than all jobs. */
export const isFiltered = (filter: JobFilter): boolean =>
  filter.state !== '' || filter.job_type !== '' || filter.addon_id !== '' || filter.search !== '' || filter.dead_letter

/** Whether a job waits for something (and the host says what, `waiting_reason`). */
const waits = (job: Job): boolean => (WAITING_STATES as ReadonlySet<string>).has(job.state)

/**
 * A list of jobs: a filter, newest first, pages by cursor. Events move the rows on screen at
 * once; a new job, or a job leaving the filtered state, reloads the first page. The Jobs view
 * has one, and the Overview one of its own that is never filtered (its newest jobs), so that
 * what the Jobs view selects never empties the Overview.
 */
export class JobsState {
  filter = $state<JobFilter>({ ...NO_FILTER })
  rows = $state<Job[]>([])
  error = $state<string | null>(null)
  loading = $state(false)
  loaded = $state(false)
  /** The cursors of the pages before this one; empty on the first page. */
  private cursors = $state<(string | undefined)[]>([])
  nextCursor = $state<string | null>(null)
  /** Job id → message, for a cancel or run-now that failed. */
  rowErrors = $state<Record<string, string>>({})
  /** Job id → the row action on its way to the host: its buttons are off until it is answered, so a double click sends one request. */
  pending = $state<Record<string, RowAction>>({})
  /** What the link that set the filter asked that no filter takes (`state=NOPE`); gone as the filter changes. */
  unread = $state<string[]>([])

  readonly page = $derived(this.cursors.length + 1)
  readonly hasPrevious = $derived(this.cursors.length > 0)
  readonly hasNext = $derived(this.nextCursor !== null)
  private cursor: string | undefined = undefined
  private generation = 0
  /**
   * The events of jobs not on screen that came while a read was on its way: the read may bring
   * those jobs as they were before the events, and no later event may come to move them (a job
   * that ended). They move the read's rows as it lands, each only if newer than the row.
   */
  private missed: LogEvent[] = []

  constructor(
    private readonly api: ApiClient,
    private readonly pageSize = PAGE_SIZE,
  ) {}

  async refresh(): Promise<void> {
    const generation = ++this.generation
    this.loading = true
    this.missed = []
    if (!canMatch(this.filter)) {
      // A type, add-on or id is at most 200 characters, so no job has a longer one, nor a longer part
      // of one: none matches (the host would refuse the query in its validator's terms).
      this.rows = []
      this.nextCursor = null
      this.error = null
      this.loading = false
      this.loaded = true
      return
    }
    try {
      const page = await this.api.listJobs({
        state: this.filter.state || undefined,
        job_type: this.filter.job_type || undefined,
        addon_id: this.filter.addon_id || undefined,
        search: this.filter.search || undefined,
        dead_letter: this.filter.dead_letter ? 'true' : undefined,
        // The table shows no payload (a payload may be megabytes); the job's own view reads it.
        payload: 'false',
        limit: this.pageSize,
        cursor: this.cursor,
      })
      if (generation !== this.generation) return // a newer read is on its way
      const shown = new Map(this.rows.map((row) => [row.job_id, row]))
      let rows = page.jobs.map((job) => {
        const row = shown.get(job.job_id)
        return row ? newerJob(row, job) : job
      })
      const missed = this.missed
      this.missed = []
      const onPage = new Set(rows.map((row) => row.job_id))
      for (const event of missed) if (onPage.has(event.job_id!)) rows = rows.map((row) => (row.job_id === event.job_id ? newerJob(row, reduceJob(row, event)) : row))
      this.rows = rows
      this.nextCursor = page.next_cursor
      this.error = null
    } catch (error) {
      if (generation === this.generation) this.error = describeError(error)
    } finally {
      if (generation === this.generation) {
        this.loading = false
        this.loaded = true
      }
    }
  }

  setFilter(change: Partial<JobFilter>): Promise<void> {
    this.filter = { ...this.filter, ...change }
    this.unread = []
    this.cursors = []
    this.cursor = undefined
    return this.refresh()
  }

  nextPage(): Promise<void> {
    if (this.nextCursor === null) return Promise.resolve()
    this.cursors = [...this.cursors, this.cursor]
    this.cursor = this.nextCursor
    return this.refresh()
  }

  previousPage(): Promise<void> {
    if (this.cursors.length === 0) return Promise.resolve()
    this.cursor = this.cursors[this.cursors.length - 1]
    this.cursors = this.cursors.slice(0, -1)
    return this.refresh()
  }

  cancel(jobId: string): Promise<void> {
    return this.act(jobId, 'cancel', () => this.api.cancelJob(jobId, 'canceled from the dashboard'))
  }

  /** Runs a scheduled (delayed) job now. */
  runNow(jobId: string): Promise<void> {
    return this.act(jobId, 'run now', () => this.api.runJobNow(jobId))
  }

  /** One action of a row at a time: another asked while one is on its way is not sent (its answer would be a 409 about the first). */
  private async act(jobId: string, action: RowAction, call: () => Promise<{ job: Job }>): Promise<void> {
    if (this.pending[jobId] !== undefined) return
    this.pending[jobId] = action
    try {
      const { job } = await call()
      // The answer is the job after the action: why it waited before is not why it waits now (a read says that).
      this.rows = this.rows.map((r) => (r.job_id === job.job_id ? newerJob(r, { ...r, waiting_reason: null, waiting_until: null, ...job }) : r))
      delete this.rowErrors[jobId]
    } catch (error) {
      this.rowErrors[jobId] = describeError(error)
      if (overtaken(error)) await this.readJob(jobId)
    } finally {
      delete this.pending[jobId]
    }
  }

  /** Reads one row's job again: an action refused as overtaken (the job ended, or ran) found the row behind the host, its event still to come. */
  private async readJob(jobId: string): Promise<void> {
    try {
      const { job } = await this.api.getJob(jobId)
      this.rows = this.rows.map((r) => (r.job_id === job.job_id ? newerJob(r, job) : r))
    } catch {
      // The row stays as it was until the job's event, or the page's next read.
    }
  }

  /** Moves the rows on screen; true when the page should be read again. */
  apply(event: LogEvent): boolean {
    // A queue paused or resumed changes why its jobs wait: the waiting lines are read again.
    if (eventMoves(event.type, 'queues')) return true
    if (!eventMoves(event.type, 'job-list')) return false
    const next = reduceJobs(this.rows, event)
    const waitsAgain = next !== this.rows && next.some((row, i) => waits(row) && !waits(this.rows[i]!))
    if (next !== this.rows) this.rows = next
    else if (this.loading && event.job_id) this.missed.push(event)
    // A row back to waiting (retried, requeued, halted) dropped the reason it waited before; no other
    // event would bring why it waits now: the page shown is read again (once for a burst of them).
    if (waitsAgain) return true
    if (this.cursors.length > 0) return false
    // A new job may belong on the first page; with a state or dead-letter filter, a moved job may leave it or join it.
    // A job run now waits for something else than its time, or for nothing: read again to say which.
    return event.type === 'JOB_SUBMITTED' || event.type === 'JOB_RUN_NOW' || this.filter.state !== '' || this.filter.dead_letter
  }
}
