/**
 * A job id where text names jobs beside something else (a worker's jobs, a blocker, the job a
 * waiting job is behind): its last 8 characters after an ellipsis. Ids are UUIDs that start with
 * the time, so jobs made in the same minute share their first characters; the last 8 differ from
 * job to job (random, or the end of the job's key and random: src-main/engine/store/ids.ts). Ids too
 * short to shorten show whole. The command line, the dashboard and the workers' logs show ids
 * this way, and the one-job commands (`leasehold jobs show|cancel|retry|run-now …3f9a0c12`,
 * `leasehold blockers resolve …d17c7b59`) find the whole id by it. No imports: the command line loads it at start.
 */
export function shortId(id: string): string {
  return id.length > SHOWN + 1 ? `…${id.slice(-SHOWN)}` : id
}

/** How many of an id's last characters are shown. */
const SHOWN = 8

/** An id as the host makes them (a UUID). */
export const WHOLE_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
/** An end of an id too short to name one thing: a few characters end many ids. */
export const SHORT_ID_END = /^…?[0-9a-f-]{1,7}$/i

/**
 * The end of an id that `given` names, as {@link shortId} prints it (…0778931b, with or without
 * the ellipsis) or longer: 8 characters at least; undefined for a whole id or anything else.
 */
export function idEnd(given: string): string | undefined {
  return WHOLE_ID.test(given) ? undefined : /^…?([0-9a-f-]{8,35})$/i.exec(given)?.[1]
}

/** The ids of `ids` that end with `end`, in any case. */
export const idsEndingWith = (ids: readonly string[], end: string): string[] => ids.filter((id) => id.toLowerCase().endsWith(end.toLowerCase()))
