import { FINISHED_STATES_CLAUSE, type JobRow, UNCHAINED_JOB_EVENTS_CLAUSE } from '../../db/schema'
import { DAY } from '../rules/clock'
import type { EngineContext } from '../memory/context'
import { storeRecentCounts } from '../memory/recent-counts'
import { noteEventsDeleted } from '../store/event-log'
import { fenceOfLease, findJob, jobExistsSql, SELECT_JOBS } from '../store/rows'
import { TIMELINE_CHAIN } from '../reads/timeline'

/**
 * Retention: finished jobs are deleted, with everything that belongs to them, once they finished
 * longer ago than the retention period (docs/retention.md).
 */

/**
 * Jobs deleted per transaction: about 9 rows and a few index entries each, so a step holds the
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
 * file lease. Any such job goes, whichever events it holds: event ids, like job keys, fences
 * and stream message ids, are reserved apart from their rows (counters.ts), so deleting the
 * newest event never gives its id again.
 */
const DELETABLE = `${FINISHED_STATES_CLAUSE}
  AND NOT EXISTS (SELECT 1 FROM blockers WHERE blockers.state = 'OPEN' AND (blockers.requester_job_id = jobs.id OR blockers.holder_job_id = jobs.id))
  AND NOT EXISTS (SELECT 1 FROM file_leases WHERE file_leases.state = 'ACTIVE' AND file_leases.job_id = jobs.id)`

/** The values a statement deletes by: a JSON array bound as one parameter. */
const IDS = 'SELECT value FROM json_each(?)'

/**
 * A schedule's run (a `schedule_runs` row) that stays whatever its job: its schedule's newest
 * run (the schedule's `last_run`), and its newest run that fired (what its overlap rule asks
 * after) — newest as made last (`seq`), not by fire time, as schedules.ts reads them. Other runs
 * go with their jobs, and runs that made none (skipped) after the retention period
 * (pruneScheduleRuns); a deleted schedule's runs go with their jobs, or at its deletion.
 */
const KEPT_RUN = `(EXISTS (SELECT 1 FROM schedules WHERE schedules.id = schedule_runs.schedule_id) AND (
    schedule_runs.seq = (SELECT MAX(r.seq) FROM schedule_runs r WHERE r.schedule_id = schedule_runs.schedule_id)
    OR (schedule_runs.outcome = 'FIRED' AND schedule_runs.seq =
      (SELECT MAX(r.seq) FROM schedule_runs r WHERE r.schedule_id = schedule_runs.schedule_id AND r.outcome = 'FIRED'))))`

/** Up to `limit` runs of schedule `id` from before `cutoff` that no job of theirs keeps, and that are not kept (KEPT_RUN). */
export const EXPIRED_RUNS_SQL = `DELETE FROM schedule_runs WHERE seq IN (
  SELECT seq FROM schedule_runs WHERE schedule_id = @id AND fire_at < @cutoff
    AND (job_id IS NULL OR NOT ${jobExistsSql('schedule_runs.job_id')}) AND NOT ${KEPT_RUN}
  LIMIT @limit)`

/** The fences on the chains of leases (a job's leases, rows.ts `leasesOfJob`) that start at the fences of a JSON array. */
export const LEASE_CHAINS_SQL = `WITH RECURSIVE chain(fence) AS (
  ${IDS} UNION ALL SELECT leases.prev_fence FROM leases JOIN chain ON leases.fence = chain.fence WHERE leases.prev_fence IS NOT NULL)
  SELECT fence FROM chain`

/** What each deletion takes, as a JSON array: the jobs' ids or keys, their leases' fences, or their newest events. */
type DeleteBy = 'ids' | 'seqs' | 'fences' | 'lastEvents'

/**
 * What deleting a job deletes, in order: its events (the chain from its newest, timeline.ts, and
 * those from before the chains; its leases' and file leases' events are on its chain too), its
 * file contentions, file leases and resolved blocker reports, its leases (each with the attempt
 * it ran), and the job. One statement per table, each taking one JSON array of what it deletes by.
 * (What the events counted is in stats_counts before they go: see deleteJobs.)
 */
export const DELETE_STATEMENTS: readonly { sql: string; by: DeleteBy }[] = [
  { sql: `WITH RECURSIVE ${TIMELINE_CHAIN} DELETE FROM events WHERE id IN (SELECT id FROM chain)`, by: 'lastEvents' },
  { sql: `DELETE FROM events WHERE job_id IN (${IDS}) AND ${UNCHAINED_JOB_EVENTS_CLAUSE}`, by: 'ids' },
  { sql: `DELETE FROM file_contentions WHERE job_id IN (${IDS})`, by: 'ids' },
  { sql: `DELETE FROM file_handovers WHERE job_id IN (${IDS})`, by: 'ids' },
  { sql: `DELETE FROM file_leases WHERE lease_id IN (SELECT id FROM leases WHERE fence IN (${IDS}))`, by: 'fences' },
  { sql: `DELETE FROM blockers WHERE requester_job_id IN (${IDS})`, by: 'ids' },
  { sql: `DELETE FROM schedule_runs WHERE job_id IN (${IDS}) AND NOT ${KEPT_RUN}`, by: 'ids' },
  { sql: `DELETE FROM leases WHERE fence IN (${IDS})`, by: 'fences' },
  { sql: `DELETE FROM jobs WHERE seq IN (${IDS})`, by: 'seqs' },
]

/** Which of the named jobs (by `seq`) may be deleted now. */
export const DELETABLE_JOBS_SQL = `${SELECT_JOBS} WHERE seq IN (${IDS}) AND ${DELETABLE}`

/**
 * Rows a retention step reads at most, per job it may delete: jobs that are not finished yet, or
 * finished too recently, or needed by something live, are read and left (see pruneFinishedJobs).
 */
export const SWEEP_READS_PER_DELETE = 4

/** The jobs after a key, in key order: what a retention step reads (the table's own order, no index). */
export const SWEEP_SQL = 'SELECT seq, created_at, finished_at FROM jobs WHERE seq > ? ORDER BY seq LIMIT ?'

/**
 * Where retention's sweep over the jobs goes on from: the key of the last job it read. Kept in
 * memory only, as a hint — after a start, a sweep begins again at the lowest key.
 */
export interface RetentionSweep {
  after: number
}

/** A retention step's outcome: how many jobs it deleted, and whether the sweep's pass is over. */
export interface PruneStep {
  deleted: number
  /** The sweep reached the jobs made since the cutoff, or the table's end: the next step starts a new pass. */
  done: boolean
}

/**
 * Deletes these jobs and everything that belongs to them (see DELETE_STATEMENTS), inside the
 * caller's transaction; returns their ids. The counts of the events after the statistics' mark
 * are stored first (recent-counts.ts), so that the time series keep what the deleted events counted.
 */
function deleteJobs(ctx: EngineContext, jobs: readonly JobRow[]): string[] {
  if (jobs.length === 0) return []
  storeRecentCounts(ctx)
  const starts = jobs.map((job) => fenceOfLease(ctx, job.lease_id)).filter((fence) => fence !== null)
  const by: Record<DeleteBy, string> = {
    ids: JSON.stringify(jobs.map((job) => job.id)),
    seqs: JSON.stringify(jobs.map((job) => job.seq)),
    fences: JSON.stringify(ctx.stmt(LEASE_CHAINS_SQL).pluck().all(JSON.stringify(starts))),
    lastEvents: JSON.stringify(jobs.map((job) => job.last_event_id)),
  }
  for (const statement of DELETE_STATEMENTS) ctx.run(statement.sql, by[statement.by])
  // A job's newest event is the largest of its chain; those before the chains are older than the
  // mark migration 0025 set.
  noteEventsDeleted(ctx, Math.max(0, ...jobs.map((job) => job.last_event_id ?? 0)))
  return jobs.map((job) => job.id)
}

/** Retention and purges run outside every other transaction: a deletion of up to a few hundred jobs is a unit of its own. */
function ownTransaction<T>(ctx: EngineContext, what: string, fn: () => T): T {
  if (ctx.insideOperation) throw new Error(`${what} runs in a transaction of its own: it cannot run inside another transaction`)
  ctx.flush()
  return ctx.transact(fn)
}

/**
 * Deletes these jobs and everything that belongs to them (see DELETE_STATEMENTS), in one
 * transaction of its own; returns the ids it deleted, in no particular order. A job that is not
 * finished, or that something live still refers to (see DELETABLE), is left alone, as is an
 * unknown id: the caller (a purge) names candidates and this decides.
 *
 * It commits an open group first and runs outside every other transaction: a deletion of up to
 * a few hundred jobs is a unit of its own, never part of a group that answers claims. Called
 * inside an operation, it throws.
 */
export function deleteFinishedJobs(ctx: EngineContext, jobIds: readonly string[]): string[] {
  if (jobIds.length === 0 && !ctx.insideOperation) return []
  return ownTransaction(ctx, 'deleteFinishedJobs', () => {
    const seqs = jobIds.map((id) => findJob(ctx, id)?.seq).filter((seq) => seq !== undefined)
    return deleteJobs(ctx, ctx.all<JobRow>(DELETABLE_JOBS_SQL, JSON.stringify(seqs)))
  })
}

/**
 * One step of retention, in one transaction: reads on from where the sweep stopped, in the order
 * of the jobs' keys (no index: a job's finish writes no index entry for retention), and deletes
 * up to `limit` of the jobs it reads that finished before `cutoff` and that may be deleted
 * (DELETABLE). It reads at most `limit × SWEEP_READS_PER_DELETE` jobs, and stops at the first
 * job made at or after the cutoff: no job made since can have finished before it (were the
 * clock set back, a job made "later" stops the pass early, and what lies beyond it is deleted
 * a pass later — never earlier). A pass therefore reads each old job once: those not finished
 * yet (a QUEUED job waiting since last month, a RUNNING one), finished too recently, or needed by
 * something live are read and left, and read again by the next pass. When the pass is over,
 * the next step starts at the lowest key.
 */
export function pruneFinishedJobs(ctx: EngineContext, sweep: RetentionSweep, cutoff: number, limit = PRUNE_BATCH): PruneStep {
  return ownTransaction(ctx, 'pruneFinishedJobs', () => {
    const reads = limit * SWEEP_READS_PER_DELETE
    const rows = ctx.all<Pick<JobRow, 'seq' | 'created_at' | 'finished_at'>>(SWEEP_SQL, sweep.after, reads)
    const expired: number[] = []
    let last = sweep.after
    let frontier = false
    for (const row of rows) {
      if (row.created_at >= cutoff) {
        frontier = true
        break
      }
      last = row.seq
      if (row.finished_at !== null && row.finished_at < cutoff) {
        expired.push(row.seq)
        if (expired.length === limit) break
      }
    }
    // Over when it met the frontier, or read the table's last job (fewer rows than asked, all read).
    const done = frontier || (rows.length < reads && last === (rows.at(-1)?.seq ?? sweep.after))
    const deleted = deleteJobs(ctx, ctx.all<JobRow>(DELETABLE_JOBS_SQL, JSON.stringify(expired))).length
    const before = sweep.after
    sweep.after = done ? 0 : last
    ctx.onRollback(() => (sweep.after = before)) // a step that fails (a full disk) is read again
    return { deleted, done }
  })
}

/** Events that name no job and are older than a cutoff, the oldest first (their own index, events_jobless_ts). */
export const JOBLESS_EVENTS_SQL = 'SELECT id FROM events WHERE job_id IS NULL AND ts < ? ORDER BY ts LIMIT ?'

/**
 * File leases of owners without a job lease that ended (released, gone idle, or taken by an
 * operator) before a cutoff, the longest ended first (their own index, file_leases_jobless_ended).
 * A lease still held is never among them, whatever its age. Named, as SQLite would rather read
 * every job-less lease by file_leases_lease.
 */
export const JOBLESS_FILE_LEASES_SQL = "SELECT id FROM file_leases INDEXED BY file_leases_jobless_ended WHERE lease_id IS NULL AND state <> 'ACTIVE' AND released_at < ? ORDER BY released_at LIMIT ?"

/** Handovers to an owner without a job (its report named none) that lapsed before a cutoff (index file_handovers_job). */
export const JOBLESS_HANDOVERS_SQL = 'SELECT file FROM file_handovers WHERE job_id IS NULL AND until < ? LIMIT ?'

/**
 * Refused acquires of owners without a job whose one retry was due before a cutoff: an owner
 * that never came back for the file (one that came back and was halted has a blocker report instead).
 */
export const JOBLESS_CONTENTIONS_SQL = 'SELECT rowid FROM file_contentions WHERE job_id IS NULL AND retry_at < ? LIMIT ?'

/** Blocker reports of requesters without a job, answered before a cutoff, the earliest answered first (index blockers_resolved). */
export const JOBLESS_BLOCKERS_SQL = "SELECT id FROM blockers WHERE state = 'RESOLVED' AND requester_job_id IS NULL AND resolved_at < ? ORDER BY resolved_at LIMIT ?"

/**
 * Deletes from `table` the rows whose `key` the statement `expired` names (given the cutoff and
 * the limit), inside the caller's transaction; returns their keys.
 */
function deleteExpired<Key>(ctx: EngineContext, expired: string, table: string, key: string, cutoff: number, limit: number): Key[] {
  if (limit <= 0) return []
  const keys = ctx.stmt(expired).pluck().all(cutoff, limit) as Key[]
  if (keys.length > 0) ctx.run(`DELETE FROM ${table} WHERE ${key} IN (${IDS})`, JSON.stringify(keys))
  return keys
}

/**
 * One step of retention for the runs of schedules that hold no job: those that skipped their
 * firing, and those whose job is gone already, older than `cutoff`. Deletes up to `limit` in one
 * transaction and returns how many; each schedule's runs are read by their key, from its oldest.
 */
export function pruneScheduleRuns(ctx: EngineContext, cutoff: number, limit: number): number {
  return ctx.transact(() => {
    let deleted = 0
    for (const id of ctx.stmt('SELECT id FROM schedules').pluck().all() as string[]) {
      if (deleted >= limit) break
      deleted += ctx.stmt(EXPIRED_RUNS_SQL).run({ id, cutoff, limit: limit - deleted }).changes
    }
    return deleted
  })
}

/**
 * One step of retention for the events that name no job — capacity changes, busy measurements,
 * worker problems, a file lease held without a job lease: deletes up to `limit` of those older
 * than `cutoff`, the oldest first, in one transaction, and returns how many. A step reads
 * `limit` entries of their index at most.
 */
export function pruneJoblessEvents(ctx: EngineContext, cutoff: number, limit: number): number {
  return ctx.transact(() => {
    const ids = deleteExpired<number>(ctx, JOBLESS_EVENTS_SQL, 'events', 'id', cutoff, limit)
    noteEventsDeleted(ctx, Math.max(0, ...ids))
    return ids.length
  })
}

/**
 * One step of retention for the file rows of owners without a job lease (a tool acquiring
 * through the files API), which no job's deletion takes: deletes up to `limit` of their file
 * leases that ended before `cutoff` (JOBLESS_FILE_LEASES_SQL; never one still held), and with
 * the room left their handovers that lapsed before it, their refused acquires whose retry was
 * due before it, and their blocker reports answered before it, in one transaction; returns how
 * many. A step reads `limit` rows of each at most.
 */
export function pruneJoblessFiles(ctx: EngineContext, cutoff: number, limit: number): number {
  return ctx.transact(() => {
    let deleted = 0
    for (const [expired, table, key] of JOBLESS_FILE_ROWS) deleted += deleteExpired(ctx, expired, table, key, cutoff, limit - deleted).length
    return deleted
  })
}

/** What {@link pruneJoblessFiles} deletes, in order: the statement naming the rows, their table and key. */
const JOBLESS_FILE_ROWS: readonly [expired: string, table: string, key: string][] = [
  [JOBLESS_FILE_LEASES_SQL, 'file_leases', 'id'],
  [JOBLESS_HANDOVERS_SQL, 'file_handovers', 'file'],
  [JOBLESS_CONTENTIONS_SQL, 'file_contentions', 'rowid'],
  [JOBLESS_BLOCKERS_SQL, 'blockers', 'id'],
]
