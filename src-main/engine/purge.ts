import type { JobRow } from '../db/schema'
import type { EngineContext } from './context'
import { keepHighs, storedHighs } from './counters'
import { TERMINAL_STATES } from './states'

/**
 * Deleting finished jobs for good (an operator's purge, and the retention pruner): the job with
 * everything that is its own — attempts, leases, stream messages, events, the file leases
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
 * Two numbers must never come back after a restart although their rows go: a sequence's
 * largest number (fences, stream message ids) is kept as its floor (counters.ts), and the
 * newest event of all is not deleted, because SQLite gives a new row the largest id + 1 and a
 * client resuming the event stream (Last-Event-ID) relies on ids never repeating; a later
 * purge takes it once newer events exist.
 */
export function deleteFinishedJobs(ctx: EngineContext, jobIds: readonly string[]): number {
  let deleted = 0
  for (let i = 0; i < jobIds.length; i += PURGE_BATCH) {
    const batch = jobIds.slice(i, i + PURGE_BATCH)
    deleted += ctx.transactWithoutForeignKeyChecks(() => deleteBatch(ctx, batch))
  }
  return deleted
}

type PurgedJob = Pick<JobRow, 'id' | 'stream_message_id' | 'first_stream_message_id'>

function deleteBatch(ctx: EngineContext, jobIds: readonly string[]): number {
  const highs = storedHighs(ctx)
  const newestEvent = ctx.one<{ id: number | null }>('SELECT MAX(id) AS id FROM events')!.id ?? 0
  let deleted = 0
  for (const jobId of jobIds) {
    // The state is read inside this transaction: a job retried a moment ago is not finished.
    const job = ctx.one<PurgedJob>(`SELECT id, stream_message_id, first_stream_message_id FROM jobs WHERE id = ? AND ${FINISHED_IN_SQL}`, jobId)
    if (!job) continue
    // A job's leases are found through its attempts (every grant writes both): leases keep no index on their job.
    for (const { lease_id } of ctx.all<{ lease_id: string }>('SELECT lease_id FROM attempts WHERE job_id = ?', job.id)) {
      ctx.run("DELETE FROM file_leases WHERE lease_id = ? AND state <> 'ACTIVE'", lease_id)
      ctx.run('DELETE FROM leases WHERE id = ?', lease_id)
    }
    ctx.run('DELETE FROM attempts WHERE job_id = ?', job.id)
    if (job.stream_message_id !== null) {
      // Every message of the job lies between its first and its current one (ids only grow).
      const first = job.first_stream_message_id ?? job.stream_message_id
      ctx.run('DELETE FROM stream_messages WHERE id BETWEEN ? AND ? AND job_id = ?', first, job.stream_message_id, job.id)
    }
    ctx.run('DELETE FROM events WHERE job_id = ? AND id < ?', job.id, newestEvent)
    ctx.run("DELETE FROM blockers WHERE requester_job_id = ? AND state = 'RESOLVED'", job.id)
    ctx.run('DELETE FROM jobs WHERE id = ?', job.id)
    deleted += 1
  }
  if (deleted > 0) keepHighs(ctx, highs)
  return deleted
}
