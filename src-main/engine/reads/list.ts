import { and, desc, eq, getTableColumns, gte, inArray, lt, lte, sql, type SQL } from 'drizzle-orm'
import { jobs, STATE_SEQ_CLAUSE, STATES_OUTSIDE_STATE_SEQ, type JobRow } from '../../db/schema'
import type { EngineContext } from '../memory/context'
import { invalid } from '../rules/errors'
import { DEAD_LETTER_STATES, JOB_STATES, LEASED_STATES, type JobState } from '../rules/states'

/** The states of jobs that hold a lease: found among the ACTIVE leases in memory. */
type LeasedState = 'LEASED' | 'RUNNING'

/** The jobs a page lists, and the page: 50 jobs unless `limit` says (at most 500). */
export interface JobListQuery extends PageRequest {
  /** A state; or several of those jobs hold a lease in (the queue API's RUNNING, which shows LEASED jobs as RUNNING). */
  state?: JobState | readonly LeasedState[]
  addon_id?: string
  job_type?: string
  /** Only the jobs that ran out of attempts (true), or only the others (false). */
  dead_letter?: boolean
  /**
   * Part of the job's id, type or add-on, in any case: the dashboard's search box (it shows ids
   * shortened, so any part of one finds the job). Read row by row, newest first, until a page is full.
   */
  search?: string
  created_after?: number
  created_before?: number
  /**
   * false: the rows without their payload, which is then never read (a payload may be megabytes,
   * and a table of jobs shows none); true or absent: with it.
   */
  payload?: boolean
}

export interface JobPage {
  jobs: JobRow[]
  next_cursor: string | null
}

export const MAX_LIST_LIMIT = 500

/** Where a page of a list starts, after the `next_cursor` of the page before, and how many items it holds at most. */
export interface PageRequest {
  /** 1–{@link MAX_LIST_LIMIT}; each list has its default. */
  limit?: number
  /** Opaque: the `next_cursor` of the previous page. */
  cursor?: string
}

/** A page's size: `page.limit`, else the list's default; 400 outside 1–{@link MAX_LIST_LIMIT}. */
export function pageLimit(page: PageRequest, byDefault: number): number {
  const limit = page.limit ?? byDefault
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT) {
    throw invalid(`limit: must be a whole number from 1 to ${MAX_LIST_LIMIT}`)
  }
  return limit
}

/**
 * A list's cursor: the key of the last item of a page (as the list writes it, `seq:41`), opaque
 * to clients. A list reads its next page after that key, so the pages neither skip nor repeat
 * what stays in place while a client pages.
 */
export const encodeCursor = (key: string): string => Buffer.from(key).toString('base64url')

/** The key a cursor carries, in the shape its list gives out (`shape`'s groups); any other is 400. */
export function decodeCursor(cursor: string, shape: RegExp): RegExpExecArray {
  const match = shape.exec(Buffer.from(cursor, 'base64url').toString('utf8'))
  if (!match) throw invalid('cursor: not a cursor this server gave out')
  return match
}

const JOB_CURSOR = /^seq:(\d{1,15})$/
const jobCursor = (cursor: string): number => Number(decodeCursor(cursor, JOB_CURSOR)[1])

/**
 * Lists jobs newest first with keyset pagination: a cursor names the last job of a page, so
 * pages stay stable while jobs are submitted. Not a hot path, so it uses drizzle's builder.
 */
export function listJobs(ctx: EngineContext, query: JobListQuery): JobPage {
  const limit = checkedLimit(query)
  const rows = query.state === 'QUEUED' ? queuedRows(ctx, query, limit + 1) : readPage(ctx, jobListQuery(ctx, query, limit + 1))
  return pageOf(rows, limit)
}

/**
 * {@link listJobs}, with a page that may walk the whole table ({@link mayWalkTheTable}) read by
 * `read`: the host's read thread (db/read-thread.ts), so that the walk does not hold the main
 * thread. Every other page is read here, in a few index or key lookups; so is a page of QUEUED
 * jobs, as {@link queuedRows} says: its reads go by keys that memory gives, a chunk at a time.
 */
export async function listJobsOn(ctx: EngineContext, query: JobListQuery, read: (page: PageQuery) => Promise<unknown[]>): Promise<JobPage> {
  if (query.state === 'QUEUED' || !mayWalkTheTable(query)) return listJobs(ctx, query)
  const limit = checkedLimit(query)
  return pageOf((await read(jobListQuery(ctx, query, limit + 1))) as JobRow[], limit)
}

/**
 * Whether a page may read far more jobs than it shows: a search, a type or a time range is no
 * index's, so the page reads the jobs newest first until it is full — every job, when few match
 * (a million take ~0.4–0.6 s).
 */
export const mayWalkTheTable = (query: JobListQuery): boolean =>
  query.search !== undefined || query.job_type !== undefined || query.created_after !== undefined || query.created_before !== undefined

/** The query's page size, once its limit and states are known good. */
function checkedLimit(query: JobListQuery): number {
  const limit = pageLimit(query, 50)
  const states: readonly JobState[] = typeof query.state === 'string' ? [query.state] : (query.state ?? [])
  if (states.some((state) => !JOB_STATES.includes(state)) || (states.length > 1 && !states.every((state) => LEASED_STATES.has(state)))) {
    throw invalid(`state: must be one of ${JOB_STATES.join(', ')}`)
  }
  return limit
}

/** A page of `limit` jobs from `rows`, read one past it to know whether another page follows. */
function pageOf(rows: JobRow[], limit: number): JobPage {
  const page = rows.slice(0, limit)
  return { jobs: page, next_cursor: rows.length > limit ? encodeCursor(`seq:${page[page.length - 1]!.seq}`) : null }
}

/** The newest jobs {@link queuedRows} looks for among first, by the table's key, before it asks memory. */
export const QUEUED_WINDOW = 10_000

/** How many of the older QUEUED jobs {@link queuedRows} reads at a time. */
const QUEUED_CHUNK = 1_000

/**
 * QUEUED jobs, newest first: no index holds them (the engine keeps them in memory, in pick order:
 * queued-range.ts). So a page looks among the {@link QUEUED_WINDOW} newest jobs below the cursor
 * first, by the table's key, where a backlog's jobs are; only if that finds too few does it take
 * the older QUEUED jobs' keys from memory, newest first, and read them a chunk at a time (a cost
 * in QUEUED jobs, never in the finished ones).
 */
function queuedRows(ctx: EngineContext, query: JobListQuery, rows: number): JobRow[] {
  const below = query.cursor !== undefined ? jobCursor(query.cursor) : (ctx.one<{ n: number | null }>('SELECT MAX(seq) AS n FROM jobs')!.n ?? 0) + 1
  const from = below - QUEUED_WINDOW
  const found = readPage(ctx, jobListQuery(ctx, query, rows, { from }))
  if (found.length === rows || from <= 1) return found
  const older = ctx.jobTally.committedQueuedBelow(from)
  for (let at = 0; at < older.length && found.length < rows; at += QUEUED_CHUNK) {
    found.push(...readPage(ctx, jobListQuery(ctx, query, rows - found.length, { seqs: older.slice(at, at + QUEUED_CHUNK) })))
  }
  return found
}

/** The jobs whose `seq` is one of these (bound as one JSON parameter, however many). */
const seqIn = (seqs: readonly number[]): SQL => sql`${jobs.seq} IN (SELECT value FROM json_each(${JSON.stringify(seqs)}))`

/** The jobs table's columns but `payload`: a list asked without payloads reads only these. */
const COLUMNS_BUT_PAYLOAD = (({ payload: _payload, ...columns }) => columns)(getTableColumns(jobs))

/** A page's SQL and its parameters. */
export interface PageQuery {
  sql: string
  params: unknown[]
}

const readPage = (ctx: EngineContext, query: PageQuery): JobRow[] => ctx.all<JobRow>(query.sql, ...query.params)

/**
 * The query behind a page of {@link listJobs}, newest first, at most `rows` rows. Every filter by
 * state but DONE reads an index or the table's key (a test checks the plan): LEASED and RUNNING
 * jobs are those of the ACTIVE leases in memory, QUEUED ones are read by their keys — a range of
 * the table's (`window.from`) or the ones given (`window.seqs`, from memory): {@link queuedRows}
 * says which — and the other states are on jobs_state_seq, as are the dead-lettered jobs without one.
 */
export function jobListQuery(ctx: EngineContext, query: JobListQuery, rows: number, window?: { from: number } | { seqs: number[] }): PageQuery {
  const conditions: SQL[] = []
  const state = query.state
  const leased: readonly JobState[] | null = typeof state === 'object' ? state : state !== undefined && LEASED_STATES.has(state) ? [state] : null
  if (leased) {
    // Found among the ACTIVE leases (few: capacity bounds them).
    const wanted = new Set<string>(leased)
    const seqs = ctx.activeLeases.committed().filter(({ job }) => wanted.has(job.state)).map(({ job }) => job.seq)
    conditions.push(seqIn(seqs), leased.length === 1 ? eq(jobs.state, leased[0]!) : inArray(jobs.state, [...leased]))
  } else if (state === 'QUEUED') {
    if (!window) throw new Error('jobListQuery: QUEUED jobs are read by their keys, a range of them or the ones given (queuedRows)')
    // `+state`: no index on state for these, the table's key instead.
    conditions.push('from' in window ? gte(jobs.seq, window.from) : seqIn(window.seqs), sql`+${jobs.state} = 'QUEUED'`)
  } else if (typeof state === 'string') {
    conditions.push(eq(jobs.state, state))
    if (!STATES_OUTSIDE_STATE_SEQ.includes(state)) conditions.push(sql.raw(STATE_SEQ_CLAUSE)) // lets SQLite use the jobs_state_seq index
  }
  if (query.dead_letter !== undefined) conditions.push(eq(jobs.dead_letter, query.dead_letter ? 1 : 0))
  if (query.dead_letter === true && state === undefined) {
    // Dead-lettered jobs are in DEAD_LETTER_STATES: read on jobs_state_seq, not the whole table
    // (then sorted: a cost in the failed and timed-out jobs, never in the DONE ones).
    conditions.push(inArray(jobs.state, [...DEAD_LETTER_STATES]), sql.raw(STATE_SEQ_CLAUSE))
  }
  if (query.addon_id !== undefined) conditions.push(eq(jobs.addon_id, query.addon_id))
  if (query.job_type !== undefined) conditions.push(eq(jobs.job_type, query.job_type))
  if (query.search !== undefined) {
    const part = query.search.toLowerCase()
    conditions.push(
      sql`(instr(lower(${jobs.id}), ${part}) > 0 OR instr(lower(${jobs.job_type}), ${part}) > 0 OR instr(lower(coalesce(${jobs.addon_id}, '')), ${part}) > 0)`,
    )
  }
  if (query.created_after !== undefined) conditions.push(gte(jobs.created_at, query.created_after))
  if (query.created_before !== undefined) conditions.push(lte(jobs.created_at, query.created_before))
  if (query.cursor !== undefined) conditions.push(lt(jobs.seq, jobCursor(query.cursor)))
  const { sql: text, params } = ctx.orm.select(query.payload === false ? COLUMNS_BUT_PAYLOAD : getTableColumns(jobs)).from(jobs).where(and(...conditions)).orderBy(desc(jobs.seq)).limit(rows).toSQL()
  return { sql: text, params }
}
