import type { EngineContext } from './context'

/**
 * A number the engine hands out in order, kept in memory instead of asking SQLite for `MAX()` on
 * every grant or submit. SQLite stays the truth: the counter starts from the largest number
 * stored, on first use. A number taken by a write that is rolled back is skipped, not given
 * back: a gap is harmless, the numbers only have to increase. (One host owns a data dir at a
 * time, so nobody else writes these tables.)
 */
class Sequence {
  private last: number | null = null

  constructor(
    private readonly ctx: EngineContext,
    /** Answers the largest number stored, as `n`. */
    private readonly maxSql: string,
  ) {}

  next(): number {
    this.last ??= this.ctx.one<{ n: number }>(this.maxSql)!.n
    this.last += 1
    return this.last
  }
}

/** The engine's sequences: lease fences and stream message ids. */
export class Counters {
  private readonly fences: Sequence
  private readonly messageIds: Sequence

  constructor(ctx: EngineContext) {
    this.fences = new Sequence(ctx, 'SELECT COALESCE(MAX(fence), 0) AS n FROM leases')
    this.messageIds = new Sequence(ctx, 'SELECT COALESCE(MAX(id), 0) AS n FROM stream_messages')
  }

  /** The fence of the next lease: strictly greater than every fence granted before, anywhere. */
  nextFence(): number {
    return this.fences.next()
  }

  /** The id of the next stream message. */
  nextMessageId(): number {
    return this.messageIds.next()
  }
}
