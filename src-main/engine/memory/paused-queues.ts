import type { StoreContext } from '../store/context'
import type { EngineContext } from './context'

/**
 * The paused queues, as committed plus the changes of the transaction in progress. A paused
 * queue's jobs are neither claimed nor leased (verbs/queues.ts). The paused queues are a table
 * (a pause survives a restart) and this set in memory, read once at start, so the pick path asks
 * nothing of SQLite while no queue is paused.
 */
export class PausedQueues {
  private names = new Set<string>()

  constructor(private readonly ctx: StoreContext) {}

  /** Reads the paused queues from the database (the engine does so once, at start). */
  load(): void {
    this.names = new Set(this.ctx.all<{ queue: string }>('SELECT queue FROM paused_queues').map((row) => row.queue))
  }

  /** How many queues are paused; 0 lets the pick path skip every check. */
  get size(): number {
    return this.names.size
  }

  has(queue: string): boolean {
    return this.names.size > 0 && this.names.has(queue)
  }

  /** The paused queues now. */
  all(): ReadonlySet<string> {
    return this.names
  }

  /** Inside the transaction that writes the table: memory follows it, and is put back if it rolls back. */
  set(queue: string, paused: boolean): void {
    if (this.names.has(queue) === paused) return
    const apply = (on: boolean) => (on ? this.names.add(queue) : this.names.delete(queue))
    apply(paused)
    this.ctx.onRollback(() => apply(!paused))
  }
}

// The questions and the one change the verbs make of the paused queues: they name no cache.

/** Whether the queue is paused, as the transaction in progress sees it. */
export const queuePaused = (ctx: EngineContext, queue: string): boolean => ctx.pausedQueues.has(queue)

/** The queue was paused or resumed, inside the transaction that writes the table. */
export const markQueuePaused = (ctx: EngineContext, queue: string, paused: boolean): void => ctx.pausedQueues.set(queue, paused)
