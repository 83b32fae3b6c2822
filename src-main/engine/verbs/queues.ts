import { STATE_SEQ_CLAUSE } from '../../db/schema'
import type { EngineContext } from '../memory/context'
import { invalid } from '../rules/errors'
import { committedActiveLeases } from '../memory/active-leases'
import { committedQueuedByQueue } from '../memory/job-tally'
import { markQueuePaused, queuePaused } from '../memory/paused-queues'
import type { JobState } from '../rules/states'

/**
 * Pausing queues. A paused queue's jobs are neither claimed nor leased, through any API or
 * worker, until it is resumed; jobs already running finish, and submits are still accepted.
 * The paused queues are a table (a pause survives a restart) and a set in memory
 * (memory/paused-queues.ts).
 */

const checkQueue = (queue: string): void => {
  if (typeof queue !== 'string' || queue.length === 0 || queue.length > 200) throw invalid('queue: must be a name of 1 to 200 characters')
}

export interface QueuePause {
  queue: string
  paused: boolean
  paused_at: number | null
  paused_by: string | null
}

/**
 * Pauses a queue: from its commit on, nothing is claimed or leased from it (a queue API lease
 * request for a job claimed before is denied). Pausing a paused queue changes nothing.
 * `QUEUE_PAUSED` records who and when.
 */
export function pauseQueue(ctx: EngineContext, queue: string, by: string | null = null): QueuePause {
  checkQueue(queue)
  return ctx.transact(() => {
    const existing = ctx.one<{ paused_at: number; paused_by: string | null }>('SELECT paused_at, paused_by FROM paused_queues WHERE queue = ?', queue)
    if (existing) return { queue, paused: true, ...existing }
    const now = ctx.clock.now()
    ctx.run('INSERT INTO paused_queues (queue, paused_at, paused_by) VALUES (?, ?, ?)', queue, now, by)
    markQueuePaused(ctx, queue, true)
    ctx.appendEvent('QUEUE', queue, 'QUEUE_PAUSED', { queue, requested_by: by })
    return { queue, paused: true, paused_at: now, paused_by: by }
  })
}

/** Resumes a queue: its jobs may be taken again, and waiting claims are offered them at once (`QUEUE_RESUMED`). */
export function resumeQueue(ctx: EngineContext, queue: string, by: string | null = null): QueuePause {
  checkQueue(queue)
  return ctx.transact(() => {
    if (!queuePaused(ctx, queue)) return { queue, paused: false, paused_at: null, paused_by: null }
    ctx.run('DELETE FROM paused_queues WHERE queue = ?', queue)
    markQueuePaused(ctx, queue, false)
    ctx.appendEvent('QUEUE', queue, 'QUEUE_RESUMED', { queue, requested_by: by })
    return { queue, paused: false, paused_at: null, paused_by: null }
  })
}

/** Why a queue API lease request for a job claimed from a paused queue is denied, or null. */
export function pausedDenial(ctx: EngineContext, queue: string): string | null {
  return queuePaused(ctx, queue) ? `Queue ${queue} is paused` : null
}

/** The states a queue's counts name: every state but DONE, the bulk of all jobs (counting them would read every row). */
export type CountedState = Exclude<JobState, 'DONE'>

export interface QueueSummary extends QueuePause {
  /** Jobs by state; a state with none is left out. DONE jobs are not counted. */
  counts: Partial<Record<CountedState, number>>
}

/**
 * Every queue that has jobs other than DONE ones, or is paused, by name, with its counts by
 * state. QUEUED jobs are counted in memory (job-tally.ts), LEASED and RUNNING ones are the
 * ACTIVE leases in memory, and the others are read from the jobs_state_seq index: a cost in the
 * number of claimed, blocked and failed jobs, never in the QUEUED or DONE ones.
 */
export function listQueues(ctx: EngineContext): QueueSummary[] {
  const byName = new Map<string, QueueSummary>()
  const summary = (queue: string): QueueSummary => {
    let found = byName.get(queue)
    if (!found) byName.set(queue, (found = { queue, paused: false, paused_at: null, paused_by: null, counts: {} }))
    return found
  }
  const counted = [
    ...committedQueuedByQueue(ctx).map(({ queue, n }) => ({ queue, state: 'QUEUED' as const, n })),
    ...ctx.all<{ queue: string; state: CountedState; n: number }>(
      `SELECT queue, state, COUNT(*) AS n FROM jobs WHERE ${STATE_SEQ_CLAUSE} GROUP BY queue, state`,
    ),
    ...committedActiveLeases(ctx).map(({ job }) => ({ queue: job.queue, state: job.state as CountedState, n: 1 })),
  ]
  for (const row of counted) summary(row.queue).counts[row.state] = (summary(row.queue).counts[row.state] ?? 0) + row.n
  for (const row of ctx.all<{ queue: string; paused_at: number; paused_by: string | null }>('SELECT * FROM paused_queues')) {
    Object.assign(summary(row.queue), { paused: true, paused_at: row.paused_at, paused_by: row.paused_by })
  }
  return [...byName.values()].sort((a, b) => a.queue.localeCompare(b.queue))
}
