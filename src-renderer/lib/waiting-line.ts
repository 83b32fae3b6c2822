import type { Job } from './api'

/** A piece of a waiting line: the host's words, a short id (kept on one line), or one of the job's own names (marked as its cell is). */
export interface WaitingPiece {
  kind: 'text' | 'id' | 'name'
  text: string
}

/** The host names a job ahead (or a blocker) by its short id, "…" and 8 characters (short-id.ts). */
const SHORT_ID = /(…\S{1,8})/

/**
 * A waiting reason cut into its pieces. The host writes the job's own type and queue into it as
 * `job type <type>` and `queue <queue>` (src-main/engine/reads/waiting.ts): those are found whole
 * and shown as names, their outer spaces marked, as in the job's own cells.
 */
export function waitingPieces(reason: string, job: Pick<Job, 'job_type' | 'queue'>): WaitingPiece[] {
  const names = [`job type ${job.job_type}`, `queue ${job.queue}`]
  const pieces: WaitingPiece[] = []
  let rest = reason
  for (;;) {
    const found = names.map((phrase) => ({ phrase, at: rest.indexOf(phrase) })).filter((f) => f.at >= 0)
    if (found.length === 0) break
    const first = found.reduce((a, b) => (b.at < a.at || (b.at === a.at && b.phrase.length > a.phrase.length) ? b : a))
    const word = first.phrase.startsWith('queue ') ? 'queue ' : 'job type '
    pieces.push(...textAndIds(rest.slice(0, first.at) + word), { kind: 'name', text: first.phrase.slice(word.length) })
    rest = rest.slice(first.at + first.phrase.length)
  }
  return [...pieces, ...textAndIds(rest)].filter((piece) => piece.kind === 'name' || piece.text !== '')
}

function textAndIds(text: string): WaitingPiece[] {
  return text.split(SHORT_ID).map((part, i) => ({ kind: i % 2 === 1 ? 'id' : 'text', text: part }))
}
