import type { BlockerRow, JobRow } from '../../db/schema'
import type { EngineContext } from '../memory/context'
import type { Resolution } from '../rules/blockers'
import { EngineError } from '../rules/errors'
import { cancelNow, requeue } from './moves'
import { getJob, recordJobEvent } from '../store/rows'
import { revokeFile } from './files'


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
  if (!blocker) throw new EngineError('blocker_not_found', `No blocker ${blockerId}`)
  return blocker
}

/** Open blockers first (oldest first: they have waited longest), then resolved ones, newest first. */
export function listBlockers(ctx: EngineContext, state: 'OPEN' | 'RESOLVED' | null, limit = 500): BlockerRow[] {
  const open = state !== 'RESOLVED' ? ctx.all<BlockerRow>("SELECT * FROM blockers WHERE state = 'OPEN' ORDER BY seq LIMIT ?", limit) : []
  const resolved =
    state !== 'OPEN' ? ctx.all<BlockerRow>("SELECT * FROM blockers WHERE state = 'RESOLVED' ORDER BY seq DESC LIMIT ?", limit - open.length) : []
  return [...open, ...resolved]
}

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
    const by = answer.by ?? 'operator'
    const job = blocker.requester_job_id ? getJob(ctx, blocker.requester_job_id) : null
    const halted = job?.state === 'BLOCKED' ? job : null
    const taken = answer.action === 'force_release' ? revokeFile(ctx, blocker, by) !== null : null
    if (halted && answer.action === 'cancel') {
      cancelNow(ctx, halted, 'blocker canceled', answer.note ?? null, by)
    } else if (halted) {
      requeueBlocked(ctx, halted, `blocker ${answer.action}`)
    }
    ctx.run(
      "UPDATE blockers SET state = 'RESOLVED', resolution = ?, note = ?, resolved_by = ?, resolved_at = ?, taken_from_holder = ? WHERE id = ?",
      answer.action,
      answer.note ?? null,
      by,
      ctx.clock.now(),
      taken === null ? null : taken ? 1 : 0,
      blocker.id,
    )
    // A force release says whether the holder still held the file, and so lost it.
    const resolved = { action: answer.action, note: answer.note ?? null, by, file: blocker.file, ...(taken === null ? {} : { taken_from_holder: taken }) }
    if (blocker.requester_job_id === null) ctx.appendEvent('BLOCKER', blocker.id, 'BLOCKER_RESOLVED', resolved)
    else recordJobEvent(ctx, blocker.requester_job_id, { type: 'BLOCKER_RESOLVED', entity: 'BLOCKER', entityId: blocker.id, data: resolved })
    return { blocker: getBlocker(ctx, blocker.id), taken_from_holder: taken }
  })
}
