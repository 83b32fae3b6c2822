import type { BlockerRow, JobRow } from '../../db/schema'
import type { EngineContext } from '../memory/context'
import { answeredBy, type Resolution } from '../rules/blockers'
import { EngineError, notFound } from '../rules/errors'
import { decodeCursor, encodeCursor, MAX_LIST_LIMIT, pageLimit, type PageRequest } from '../reads/list'
import { cancelNow, requeue } from './moves'
import { getJob } from '../store/rows'
import { closeBlocker, revokeFile } from './files'


export interface ResolveBlocker {
  action: Resolution
  note?: string | null
  /** Who answered (shown with the resolved report); defaults to "operator". */
  by?: string | null
}

/** A resolved blocker, and for a force_release whether the holder it names still held the file and lost it (null for the other answers). */
export interface ResolvedBlocker {
  blocker: BlockerRow
  taken_from_holder: boolean | null
}

export function getBlocker(ctx: EngineContext, blockerId: string): BlockerRow {
  const blocker = ctx.one<BlockerRow>('SELECT * FROM blockers WHERE id = ?', blockerId)
  if (!blocker) throw notFound('blocker_not_found', 'blocker', blockerId)
  return blocker
}

/**
 * Open blockers first (oldest first: they have waited longest), then resolved ones, the most
 * recently answered first, a page at a time. A page's cursor names the part it ended in and the
 * last report's place there (its seq; a resolved one's answer time before it).
 */
export function listBlockers(ctx: EngineContext, state: 'OPEN' | 'RESOLVED' | null, page: PageRequest = {}): { blockers: BlockerRow[]; next_cursor: string | null } {
  const limit = pageLimit(page, MAX_LIST_LIMIT)
  const [part, ...place] = page.cursor !== undefined ? decodeCursor(page.cursor, BLOCKER_CURSOR)[0].split(':') : [state === 'RESOLVED' ? 'resolved' : 'open']
  // One more than the page is read, to know whether another follows.
  const open =
    part === 'open' && state !== 'RESOLVED'
      ? ctx.all<BlockerRow>("SELECT * FROM blockers WHERE state = 'OPEN' AND seq > ? ORDER BY seq LIMIT ?", Number(place[0] ?? 0), limit + 1)
      : []
  if (open.length > limit) return { blockers: open.slice(0, limit), next_cursor: encodeCursor(`open:${open[limit - 1]!.seq}`) }
  const [resolvedAt, seq] = part === 'resolved' && place.length === 2 ? place.map(Number) : [Number.MAX_SAFE_INTEGER, 0]
  const room = limit - open.length
  const resolved =
    state !== 'OPEN'
      ? ctx.all<BlockerRow>("SELECT * FROM blockers INDEXED BY blockers_resolved WHERE state = 'RESOLVED' AND (resolved_at, seq) < (?, ?) ORDER BY resolved_at DESC, seq DESC LIMIT ?", resolvedAt, seq, room + 1)
      : []
  if (resolved.length <= room) return { blockers: [...open, ...resolved], next_cursor: null }
  // A page the open reports filled ends where the resolved ones begin.
  const last = room === 0 ? null : resolved[room - 1]!
  return { blockers: [...open, ...resolved.slice(0, room)], next_cursor: encodeCursor(last ? `resolved:${last.resolved_at}:${last.seq}` : 'resolved') }
}

/** How many blocker reports wait for an operator's answer. */
export const openBlockerCount = (ctx: EngineContext): number => ctx.one<{ n: number }>("SELECT COUNT(*) AS n FROM blockers WHERE state = 'OPEN'")!.n

/** `open:<seq>`, `resolved` (their start) or `resolved:<resolved_at>:<seq>`. */
const BLOCKER_CURSOR = /^(open:\d{1,16}|resolved|resolved:\d{1,16}:\d{1,16})$/

/**
 * Puts a halted job back in the queue, eligible at once. An operator's retry is a decision to
 * run it again, so a job that had used its last attempt is given one more, and a cancel asked
 * for before the halt no longer stands.
 */
function requeueBlocked(ctx: EngineContext, job: JobRow, reason: string): void {
  requeue(ctx, job, reason, null, { max_attempts: Math.max(job.max_attempts, job.attempts + 1), cancel_requested: 0 })
}

/**
 * The operator's answer: `retry` requeues the blocked job; `force_release` takes the file from
 * the holder the report names, if it still holds it (its later writes under that lease are
 * refused), and requeues the blocked job;
 * `cancel` cancels it. Each is an event with its note; a resolved blocker answers 409. A force
 * release answers whether it took the file: a holder that let go meanwhile had nothing to lose.
 */
export function resolveBlocker(ctx: EngineContext, blockerId: string, answer: ResolveBlocker): ResolvedBlocker {
  return ctx.transact(() => {
    const blocker = getBlocker(ctx, blockerId)
    if (blocker.state !== 'OPEN') {
      throw new EngineError('blocker_resolved', `Blocker ${blockerId} was already resolved (${blocker.resolution})`)
    }
    const by = answeredBy(answer.by)
    const job = blocker.requester_job_id ? getJob(ctx, blocker.requester_job_id) : null
    const halted = job?.state === 'BLOCKED' ? job : null
    const taken = answer.action === 'force_release' ? revokeFile(ctx, blocker, by) !== null : null
    if (halted && answer.action === 'cancel') {
      cancelNow(ctx, halted, 'blocker canceled', answer.note ?? null, by)
    } else if (halted) {
      requeueBlocked(ctx, halted, `blocker ${answer.action}`)
    }
    closeBlocker(ctx, blocker, { action: answer.action, note: answer.note ?? null, by, taken })
    return { blocker: getBlocker(ctx, blocker.id), taken_from_holder: taken }
  })
}
