import type { EngineContext } from './context'

/**
 * A number the engine hands out in order, kept in memory instead of asking SQLite for `MAX()` on
 * every grant or submit. SQLite stays the truth: the counter starts from the largest number
 * stored (or the floor a purge left, see {@link keepHighs}), on first use. A number taken by a
 * write that is rolled back is skipped, not given back: a gap is harmless, the numbers only
 * have to increase. (One host owns a data dir at a time, so nobody else writes these tables.)
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
 * The largest number stored of each sequence, and where a purge that deleted it keeps it (the
 * settings table), so that after a restart no number is handed out twice.
 */
const HIGHS = {
  fence: { max: 'SELECT COALESCE(MAX(fence), 0) FROM leases', floorKey: 'sequence_floor.fence' },
  messageId: { max: 'SELECT COALESCE(MAX(id), 0) FROM stream_messages', floorKey: 'sequence_floor.stream_message_id' },
} as const
type High = keyof typeof HIGHS

/** The largest number handed out before, as SQL answering `n`: the largest stored, or the floor a purge left. */
const startSql = (high: High) =>
  `SELECT MAX((${HIGHS[high].max}), COALESCE((SELECT CAST(value AS INTEGER) FROM settings WHERE key = '${HIGHS[high].floorKey}'), 0)) AS n`

/** The largest fence and stream message id stored now. */
export function storedHighs(ctx: EngineContext): Record<High, number> {
  const read = (high: High) => ctx.one<{ n: number }>(`SELECT (${HIGHS[high].max}) AS n`)!.n
  return { fence: read('fence'), messageId: read('messageId') }
}

/**
 * After rows were deleted (inside that transaction): a largest number that went with them is
 * kept as its sequence's floor, so the sequence goes on above it after a restart.
 */
export function keepHighs(ctx: EngineContext, before: Record<High, number>): void {
  const after = storedHighs(ctx)
  for (const high of Object.keys(HIGHS) as High[]) {
    if (after[high] >= before[high]) continue
    ctx.run(
      'INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = MAX(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER))',
      HIGHS[high].floorKey,
      String(before[high]),
    )
  }
}

/** The engine's sequences: lease fences and stream message ids. */
export class Counters {
  private readonly fences: Sequence
  private readonly messageIds: Sequence

  constructor(ctx: EngineContext) {
    this.fences = new Sequence(ctx, startSql('fence'))
    this.messageIds = new Sequence(ctx, startSql('messageId'))
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
