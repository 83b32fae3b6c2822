/**
 * A job id where text names jobs beside something else (a worker's jobs, a blocker, the job a
 * waiting job is behind): its last 8 characters after an ellipsis. Ids are UUIDs that start with
 * the time, so jobs made in the same minute share their first characters; the last 8 differ from
 * job to job (random, or the end of the job's key and random: src-main/engine/ids.ts).
 * Ids too short to shorten show whole. The dashboard shortens the same way
 * (src-renderer/lib/short-id.ts, held to this by a test), and the suffix finds the whole id in
 * `leasehold jobs`. No imports: the command line loads it at start.
 */
export function shortId(id: string): string {
  return id.length > 9 ? `…${id.slice(-8)}` : id
}
