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

/**
 * A sequence whose numbers are stored nowhere else where `MAX()` could find them (a message id
 * lives in its job's row, and is replaced on requeue): it reserves blocks of numbers in the
 * settings table, inside the transaction that takes the first number of a block. After a
 * restart it starts past the last reservation, so a number handed out before is never given
 * again; a reservation rolled back is made again by the next number.
 */
class ReservedSequence {
  private last: number | null = null
  private reserved = 0

  constructor(
    private readonly ctx: EngineContext,
    private readonly key: string,
    private readonly block: number,
  ) {}

  next(): number {
    if (this.last === null) {
      const row = this.ctx.one<{ value: string }>('SELECT value FROM settings WHERE key = ?', this.key)
      this.reserved = row ? Number(row.value) : 0
      this.last = this.reserved
    }
    this.last += 1
    if (this.last > this.reserved) this.reserve(this.last + this.block - 1)
    return this.last
  }

  private reserve(upTo: number): void {
    const before = this.reserved
    this.ctx.run(
      'INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
      this.key,
      String(upTo),
    )
    this.reserved = upTo
    this.ctx.onRollback(() => (this.reserved = before))
  }
}

/** The engine's sequences: lease fences and stream message ids. */
export class Counters {
  private readonly fences: Sequence
  private readonly messageIds: ReservedSequence

  constructor(ctx: EngineContext) {
    this.fences = new Sequence(ctx, 'SELECT COALESCE(MAX(fence), 0) AS n FROM leases')
    this.messageIds = new ReservedSequence(ctx, 'stream_message_ids_reserved', 4096)
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
