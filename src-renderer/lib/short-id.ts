/**
 * The part of an id the dashboard shows. Ids are UUIDs that start with the time: jobs made in
 * the same minute share their first 8 characters, while the last 8 differ from job to job
 * (random, or the end of the job's key and random: src-main/engine/ids.ts). So an id shows as
 * its last 8, after an ellipsis that says it is the end of a longer one (the full id is a
 * hover away, and in the job's page). Ids too short to shorten show whole.
 */
export function shortId(id: string): string {
  return id.length > SHOWN + 1 ? `…${id.slice(-SHOWN)}` : id
}

const SHOWN = 8
