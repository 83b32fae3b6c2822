import type { EngineContext } from './context'
import { TERMINAL_STATES } from './states'

/**
 * Deleting finished jobs for good (an operator's purge, and the retention pruner): the job with
 * everything that is its own — its leases (each with its attempt), events, the file leases
 * held under its leases once released, its resolved blockers. Nothing that a job still waiting
 * or running needs is touched.
 */

/** Jobs deleted per transaction, so that one never holds the write lock for long. */
export const PURGE_BATCH = 500

const FINISHED_IN_SQL = `state IN (${[...TERMINAL_STATES].map((s) => `'${s}'`).join(', ')})`

/**
 * Deletes those of `jobIds` that are finished (DONE, FAILED, CANCELED, TIMEOUT) with their rows;
 * an id that is unknown or of a job that has not finished is left alone. Returns how many jobs
 * it deleted. Each {@link PURGE_BATCH} ids are one transaction of their own, with foreign-key
 * checks off (see EngineContext.transactWithoutForeignKeyChecks): call it outside any
 * transaction, and with at most PURGE_BATCH ids at a time to let other work in between.
 *
 * Fences and stream message ids never come back although their rows go (counters.ts reserves
 * them apart from the rows). Event ids are the rowid, so the newest event of all is not
 * deleted: SQLite gives a new row the largest id + 1, and a client resuming the event stream
 * (Last-Event-ID) relies on ids never repeating; a later purge takes it once newer events exist.
 */
export function deleteFinishedJobs(ctx: EngineContext, jobIds: readonly string[]): number {
  let deleted = 0
  for (let i = 0; i < jobIds.length; i += PURGE_BATCH) {
    const batch = jobIds.slice(i, i + PURGE_BATCH)
    deleted += ctx.transactWithoutForeignKeyChecks(() => deleteBatch(ctx, batch))
  }
  return deleted
}

function deleteBatch(ctx: EngineContext, jobIds: readonly string[]): number {
  const newestEvent = ctx.one<{ id: number | null }>('SELECT MAX(id) AS id FROM events')!.id ?? 0
  let deleted = 0
  for (const jobId of jobIds) {
    // The state is read inside this transaction: a job retried a moment ago is not finished.
    if (!ctx.one(`SELECT 1 FROM jobs WHERE id = ? AND ${FINISHED_IN_SQL}`, jobId)) continue
    ctx.run("DELETE FROM file_leases WHERE lease_id IN (SELECT id FROM leases WHERE job_id = ?) AND state <> 'ACTIVE'", jobId)
    ctx.run('DELETE FROM leases WHERE job_id = ?', jobId)
    ctx.run('DELETE FROM events WHERE job_id = ? AND id < ?', jobId, newestEvent)
    ctx.run("DELETE FROM blockers WHERE requester_job_id = ? AND state = 'RESOLVED'", jobId)
    ctx.run('DELETE FROM jobs WHERE id = ?', jobId)
    deleted += 1
  }
  return deleted
}
