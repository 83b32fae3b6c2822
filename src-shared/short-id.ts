/**
 * A job id where text names jobs beside something else (a worker's jobs, a blocker, the job a
 * waiting job is behind): its last 8 characters after an ellipsis. Ids are UUIDs that start with
 * the time, so jobs made in the same minute share their first characters; the last 8 differ from
 * job to job (random, or the end of the job's key and random: src-main/engine/store/ids.ts). Ids too
 * short to shorten show whole. The command line and the dashboard both show ids this way, and
 * the one-job commands (`leasehold jobs show|cancel|retry|run-now …3f9a0c12`) find the whole id
 * by it. No imports: the command line loads it at start.
 */
export function shortId(id: string): string {
  return id.length > SHOWN + 1 ? `…${id.slice(-SHOWN)}` : id
}

/** How many of an id's last characters are shown. */
const SHOWN = 8
