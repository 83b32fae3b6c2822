import { shortId } from './short-id'

/**
 * Who holds a file. A worker's file gate takes each file under its job's own name, `job:<id>`
 * (src-worker/runtime.ts); a client of the file-lease API names its own owner, and may hold the
 * file under a job's lease too. No imports but the short id's: the command line and the dashboard
 * both name holders this way.
 */

/** The owner a worker's file gate takes a job's files under. */
export const jobOwnerId = (jobId: string): string => `job:${jobId}`

/** Whether the file is held by the job itself: its worker's gate took it under the job's name. */
export function heldByItsJob(holder: { owner_id: string; job_id: string | null }): boolean {
  return holder.job_id !== null && holder.owner_id === jobOwnerId(holder.job_id)
}

/** The holder in words: a job holding its own file as the job (`job …0778931b`), any other owner by its id. */
export function holderName(holder: { owner_id: string; job_id: string | null }): string {
  return heldByItsJob(holder) ? `job ${shortId(holder.job_id!)}` : holder.owner_id
}

/**
 * Which path the holder holds, where it is not the file asked for: a lease on a folder covers
 * everything under it, so a folder above the file or a path inside it refuses it too
 * (` (it holds /data/out)`); nothing when it holds the file itself.
 */
export function heldPath(file: string, holderFile: string): string {
  return holderFile === file ? '' : ` (it holds ${holderFile})`
}

/** A job's own name as an owner: `job:` and a job id. */
const JOB_OWNER = /^job:([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/

/** An owner id alone in words, where the job it holds under is not known: a job's own name as that job (`job …0778931b`), any other as it is. */
export function ownerName(ownerId: string): string {
  const job = JOB_OWNER.exec(ownerId)?.[1]
  return job === undefined ? ownerId : `job ${shortId(job)}`
}
