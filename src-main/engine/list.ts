import { and, desc, eq, gte, inArray, lt, lte, sql, type SQL } from 'drizzle-orm'
import { jobs, leases, STATE_SEQ_CLAUSE, STATES_OUTSIDE_STATE_SEQ, type JobRow } from '../db/schema'
import type { EngineContext } from './context'
import { invalid } from './errors'
import { JOB_STATES, LEASED_STATES, type JobState } from './states'

export interface JobListQuery {
  state?: JobState
  addon_id?: string
  job_type?: string
  created_after?: number
  created_before?: number
  /** 1–500, default 50. */
  limit?: number
  /** Opaque: the `next_cursor` of the previous page. */
  cursor?: string
}

export interface JobPage {
  jobs: JobRow[]
  next_cursor: string | null
}

export const MAX_LIST_LIMIT = 500

const encodeCursor = (seq: number): string => Buffer.from(`seq:${seq}`).toString('base64url')

function decodeCursor(cursor: string): number {
  const match = /^seq:(\d{1,15})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'))
  if (!match) throw invalid('cursor: not a cursor this server gave out')
  return Number(match[1])
}

/**
 * Lists jobs newest first with keyset pagination: a cursor names the last job of a page, so
 * pages stay stable while jobs are submitted. Not a hot path, so it uses drizzle's builder.
 */
export function listJobs(ctx: EngineContext, query: JobListQuery): JobPage {
  const limit = query.limit ?? 50
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT) {
    throw invalid(`limit: must be a whole number from 1 to ${MAX_LIST_LIMIT}`)
  }
  if (query.state !== undefined && !JOB_STATES.includes(query.state)) {
    throw invalid(`state: must be one of ${JOB_STATES.join(', ')}`)
  }
  const rows = jobListQuery(ctx, query, limit + 1).all()
  const page = rows.slice(0, limit)
  return { jobs: page, next_cursor: rows.length > limit ? encodeCursor(page[page.length - 1]!.seq) : null }
}

/**
 * The query behind a page of {@link listJobs}, newest first, at most `rows` rows. Every filter by
 * state but DONE reads an index (a test checks the plan): LEASED and RUNNING jobs through
 * leases_active, the other states through jobs_state_seq.
 */
export function jobListQuery(ctx: EngineContext, query: JobListQuery, rows: number) {
  const conditions: SQL[] = []
  if (query.state !== undefined) {
    conditions.push(eq(jobs.state, query.state))
    if (LEASED_STATES.has(query.state)) {
      // Found through their ACTIVE leases (few: capacity bounds them).
      conditions.push(inArray(jobs.id, ctx.orm.select({ id: leases.job_id }).from(leases).where(eq(leases.state, 'ACTIVE'))))
    } else if (!STATES_OUTSIDE_STATE_SEQ.includes(query.state)) {
      conditions.push(sql.raw(STATE_SEQ_CLAUSE)) // lets SQLite use the jobs_state_seq index
    }
  }
  if (query.addon_id !== undefined) conditions.push(eq(jobs.addon_id, query.addon_id))
  if (query.job_type !== undefined) conditions.push(eq(jobs.job_type, query.job_type))
  if (query.created_after !== undefined) conditions.push(gte(jobs.created_at, query.created_after))
  if (query.created_before !== undefined) conditions.push(lte(jobs.created_at, query.created_before))
  if (query.cursor !== undefined) conditions.push(lt(jobs.seq, decodeCursor(query.cursor)))
  return ctx.orm.select().from(jobs).where(and(...conditions)).orderBy(desc(jobs.seq)).limit(rows)
}
