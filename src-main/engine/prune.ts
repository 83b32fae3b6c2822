import { COUNTED_EVENTS_CLAUSE, FINISHED_STATES_CLAUSE } from '../db/schema'
import { DAY, MINUTE } from './clock'
import type { EngineContext } from './context'

/**
 * Retention: finished jobs are deleted, with everything that belongs to them, once they finished
 * longer ago than the retention period (docs/retention.md).
 */

/**
 * Jobs deleted per transaction: about 9 rows and a dozen index entries each, so a step holds the
 * write lock for a few milliseconds (docs/performance.md has the figures).
 */
export const PRUNE_BATCH = 100

/**
 * The moment before which finished jobs are deleted, or null to keep every job (`retainDays` 0).
 * A pure function of the clock and the setting: the pruner decides nothing else.
 */
export function pruneCutoff(now: number, retainDays: number): number | null {
  return retainDays > 0 ? now - retainDays * DAY : null
}

/**
 * The jobs retention may delete: finished, and referred to by nothing that is live — no open
 * blocker names them (as the halted job or as the holder of its file), and they hold no ACTIVE
 * file lease. Nor the job that holds the newest event: events are keyed by a rowid that SQLite
 * hands out as the largest one plus one, so deleting the newest row would give its number again
 * (an event stream resumes from an event id). A later job soon takes over that role, so such a
 * job is kept only until then. (Fences and stream message ids need no such care: they are
 * reserved apart from their rows, see counters.ts.) A query that bounds `finished_at` reads
 * them through the jobs_finished index.
 */
const DELETABLE = `${FINISHED_STATES_CLAUSE}
  AND NOT EXISTS (SELECT 1 FROM blockers WHERE blockers.state = 'OPEN' AND (blockers.requester_job_id = jobs.id OR blockers.holder_job_id = jobs.id))
  AND NOT EXISTS (SELECT 1 FROM file_leases WHERE file_leases.state = 'ACTIVE' AND file_leases.job_id = jobs.id)
  AND jobs.id NOT IN (SELECT job_id FROM events WHERE id = (SELECT MAX(id) FROM events) AND job_id IS NOT NULL)`

/** The ids a statement deletes by: a JSON array bound as one parameter. */
const IDS = 'SELECT value FROM json_each(?)'

/** The leases of the jobs (through leases_job_attempt). */
const LEASES_OF_IDS = `SELECT id FROM leases WHERE job_id IN (${IDS})`

/**
 * What deleting a job deletes, in order, each statement taking the jobs' ids: the counted events
 * are first added to `stats_counts`, so the time series keep what they counted; then the events
 * of the job (its leases' and file leases' events carry its id too), its file contentions, file
 * leases and resolved blocker reports, its leases (each with the attempt it ran), and the job.
 * One statement per table.
 */
export const DELETE_STATEMENTS = [
  // INDEXED BY: left to itself, SQLite reads the counted events of every job (their partial
  // index) and filters them, instead of the few events of these jobs.
  `INSERT INTO stats_counts (event_type, ts, n)
     SELECT event_type, ts - ts % ${MINUTE}, COUNT(*) FROM events INDEXED BY events_job
     WHERE job_id IN (${IDS}) AND ${COUNTED_EVENTS_CLAUSE} GROUP BY 1, 2
     ON CONFLICT (ts, event_type) DO UPDATE SET n = n + excluded.n`,
  `DELETE FROM events WHERE job_id IN (${IDS})`,
  `DELETE FROM file_contentions WHERE job_id IN (${IDS})`,
  `DELETE FROM file_leases WHERE lease_id IN (${LEASES_OF_IDS})`,
  `DELETE FROM blockers WHERE requester_job_id IN (${IDS})`,
  `DELETE FROM leases WHERE job_id IN (${IDS})`,
  `DELETE FROM jobs WHERE id IN (${IDS})`,
] as const

/** Which of the named jobs may be deleted now. */
export const DELETABLE_JOBS_SQL = `SELECT id FROM jobs WHERE id IN (${IDS}) AND ${DELETABLE}`

/** The oldest finishes before a cutoff that may be deleted now, through the jobs_finished index. */
export const EXPIRED_JOBS_SQL = `SELECT id FROM jobs WHERE ${DELETABLE} AND finished_at < ? ORDER BY finished_at LIMIT ?`

/**
 * Deletes these jobs and everything that belongs to them (see DELETE_STATEMENTS), in one
 * transaction of its own; returns the ids it deleted, in no particular order. A job that is not finished, or that
 * something live still refers to (see DELETABLE), is left alone, as is an unknown id: the
 * caller (retention, a purge) names candidates and this decides.
 *
 * It commits an open group first and runs outside every other transaction: a deletion of up to
 * a few hundred jobs is a unit of its own, never part of a group that answers claims. Called
 * inside an operation, it throws.
 */
export function deleteFinishedJobs(ctx: EngineContext, jobIds: readonly string[]): string[] {
  if (ctx.insideOperation) {
    throw new Error('deleteFinishedJobs runs in a transaction of its own: it cannot run inside another transaction')
  }
  if (jobIds.length === 0) return []
  ctx.flush()
  return ctx.transact(() => {
    const ids = ctx.stmt(DELETABLE_JOBS_SQL).pluck().all(JSON.stringify(jobIds)) as string[]
    if (ids.length === 0) return ids
    const json = JSON.stringify(ids)
    for (const sql of DELETE_STATEMENTS) ctx.run(sql, json)
    return ids
  })
}

/**
 * Up to `limit` finished jobs that ended before `cutoff` and may be deleted, the oldest finish
 * first (read through the jobs_finished index).
 */
export function expiredJobIds(ctx: EngineContext, cutoff: number, limit: number): string[] {
  return ctx.stmt(EXPIRED_JOBS_SQL).pluck().all(cutoff, limit) as string[]
}

/**
 * One step of retention: deletes up to `limit` of the jobs that finished before `cutoff`, in one
 * transaction. Returns how many it deleted; fewer than `limit` means none are left for now.
 */
export function pruneFinishedJobs(ctx: EngineContext, cutoff: number, limit = PRUNE_BATCH): number {
  return deleteFinishedJobs(ctx, expiredJobIds(ctx, cutoff, limit)).length
}

/** Events that name no job, read per step: the oldest of them, by id (the events_job index holds them first). */
export const JOBLESS_EVENTS_SQL = 'SELECT id, ts FROM events INDEXED BY events_job WHERE job_id IS NULL ORDER BY id LIMIT ?'

/**
 * One step of retention for the events that name no job — capacity changes, busy measurements,
 * worker problems, a file lease held without a job lease: deletes up to `limit` of those older
 * than `cutoff`, the oldest first, in one transaction, and returns how many. They are read in id
 * order and the step stops at the first that is not old enough, so a step reads `limit` rows at
 * most. The newest event of all stays (see DELETABLE: its id must not be given again).
 */
export function pruneJoblessEvents(ctx: EngineContext, cutoff: number, limit: number): number {
  return ctx.transact(() => {
    const newest = ctx.one<{ id: number | null }>('SELECT MAX(id) AS id FROM events')!.id
    const expired: number[] = []
    for (const row of ctx.all<{ id: number; ts: number }>(JOBLESS_EVENTS_SQL, limit)) {
      if (row.ts >= cutoff || row.id === newest) break
      expired.push(row.id)
    }
    if (expired.length > 0) ctx.run(`DELETE FROM events WHERE id IN (${IDS})`, JSON.stringify(expired))
    return expired.length
  })
}
