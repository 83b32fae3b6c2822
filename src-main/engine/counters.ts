import type { EngineContext } from './context'

/**
 * The numbers the engine hands out in order — lease fences, stream message ids — kept in memory
 * instead of asking SQLite for `MAX()` on every grant and submit. SQLite stays the truth: each
 * counter starts from the largest number stored, on first use, and a number taken by a write
 * that is rolled back is given back. (One host owns a data dir at a time, so nobody else
 * writes these tables.)
 */
export class Counters {
  private fence: number | null = null
  private messageId: number | null = null

  constructor(private readonly ctx: EngineContext) {}

  /** The fence of the next lease: strictly greater than every fence granted before, anywhere. */
  nextFence(): number {
    this.fence ??= this.ctx.one<{ n: number }>('SELECT COALESCE(MAX(fence), 0) AS n FROM leases')!.n
    const taken = this.fence + 1
    this.fence = taken
    this.ctx.onRollback(() => (this.fence = taken - 1))
    return taken
  }

  /** The id of the next stream message. */
  nextMessageId(): number {
    this.messageId ??= this.ctx.one<{ n: number }>('SELECT COALESCE(MAX(id), 0) AS n FROM stream_messages')!.n
    const taken = this.messageId + 1
    this.messageId = taken
    this.ctx.onRollback(() => (this.messageId = taken - 1))
    return taken
  }
}
