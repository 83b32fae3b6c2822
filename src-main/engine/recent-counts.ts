import { HOUR, MINUTE } from './clock'
import type { EngineContext, EngineEvent } from './context'
import { COUNTED_EVENTS as COUNTED, type CountedEvent } from './events'

const WINDOW_MS = 24 * HOUR

/** The settings key of the mark: every event with an id up to it is counted in stats_counts. */
export const COUNTED_THROUGH_KEY = 'events_counted_through'

type ByMinute = Map<CountedEvent, Map<number, number>>

const byType = (): ByMinute => new Map(COUNTED.map((type) => [type, new Map()]))

function add(counts: ByMinute, type: CountedEvent, minute: number, n: number): void {
  const minutes = counts.get(type)!
  minutes.set(minute, (minutes.get(minute) ?? 0) + n)
}

/**
 * How many of each counted event committed, per minute: in memory for the snapshot's last 24 h,
 * and in the stats_counts table for the time series. No index on the event log serves either
 * (an index entry per counted event was a page written by a commit). SQLite stays the truth:
 * stats_counts holds the counts of every event up to a mark (the `events_counted_through`
 * setting); the events after it are counted in memory as they commit and stored, with the mark
 * moved past them, in one transaction, by the host's stats timer ({@link store}) or at the end
 * of a commit after `countsStoreAfterEvents` of them (context.ts EngineConfig). A start reads the last day of stats_counts and counts the
 * events after the mark from the log (a range of its key): a crash loses nothing.
 *
 * The last 24 h are counted in whole minutes: from the start of the minute that holds the moment
 * 24 h ago, up to now.
 */
export class RecentCounts {
  /** Per type: committed events by minute (epoch ms / 60,000), for the last day. */
  private readonly byMinute = byType()
  /** Per type: the events after the mark by minute, not yet in stats_counts. */
  private unstored = byType()
  /** Events (of any type) after the mark. */
  private eventsAfterMark = 0
  /** Every event with an id up to this is counted in stats_counts. */
  private mark = 0
  /** The newest committed event seen. */
  private newest = 0
  /** No store at the end of a commit before this many events after the mark (more after a store that failed: a full disk). */
  private storeAfter = 0

  constructor(private readonly ctx: EngineContext) {}

  /** Reads the counts from the database (the engine does so once, at start), and follows the events from then on. */
  load(): void {
    const { ctx } = this
    this.storeAfter = ctx.config.countsStoreAfterEvents
    this.mark = Number(ctx.one<{ value: string }>('SELECT value FROM settings WHERE key = ?', COUNTED_THROUGH_KEY)?.value ?? 0)
    this.newest = this.mark
    const since = Math.floor((ctx.clock.now() - WINDOW_MS) / MINUTE) * MINUTE
    const stored = ctx.all<{ event_type: CountedEvent; ts: number; n: number }>('SELECT event_type, ts, n FROM stats_counts WHERE ts >= ?', since)
    for (const row of stored) if (this.byMinute.has(row.event_type)) add(this.byMinute, row.event_type, Math.floor(row.ts / MINUTE), row.n)
    // The events after the mark: those the last run had not stored yet (all of a log written
    // before the mark existed, or behind the host's back).
    const after = ctx.db.prepare('SELECT id, ts, event_type FROM events WHERE id > ?').raw(true)
    for (const [id, ts, type] of after.iterate(this.mark) as IterableIterator<[number, number, CountedEvent]>) {
      this.count(id, ts, type)
    }
    ctx.onEvent((event) => this.count(event.id, event.ts, event.event_type as CountedEvent))
    ctx.onCommit(() => {
      if (this.eventsAfterMark >= this.storeAfter) this.storeOrPostpone()
    })
  }

  private count(id: number, ts: number, type: CountedEvent): void {
    this.newest = id
    this.eventsAfterMark += 1
    if (!this.byMinute.has(type)) return
    const minute = Math.floor(ts / MINUTE)
    add(this.byMinute, type, minute, 1)
    add(this.unstored, type, minute, 1)
  }

  /** Every event with an id up to this is counted in stats_counts (an open group commits first). */
  storedThrough(): number {
    this.ctx.commitBeforeRead()
    return this.mark
  }

  /**
   * Adds the counts of the committed events after the mark to stats_counts and moves the mark
   * past them, in the transaction in progress or one of its own. Before events are deleted
   * (retention, a purge), so that what they counted stays.
   */
  store(): void {
    this.ctx.transact(() => {
      if (this.newest === this.mark) return
      const before = { unstored: this.unstored, mark: this.mark, eventsAfterMark: this.eventsAfterMark }
      for (const [type, minutes] of this.unstored) {
        for (const [minute, n] of minutes) {
          this.ctx.run(
            'INSERT INTO stats_counts (event_type, ts, n) VALUES (?, ?, ?) ON CONFLICT (ts, event_type) DO UPDATE SET n = n + excluded.n',
            type,
            minute * MINUTE,
            n,
          )
        }
      }
      this.ctx.run(
        'INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
        COUNTED_THROUGH_KEY,
        String(this.newest),
      )
      this.unstored = byType()
      this.mark = this.newest
      this.eventsAfterMark = 0
      this.ctx.onRollback(() => Object.assign(this, before))
    })
  }

  private storeOrPostpone(): void {
    const every = this.ctx.config.countsStoreAfterEvents
    try {
      this.store()
      this.storeAfter = every
    } catch {
      // Tried again later; meanwhile the events after the mark are counted from the log.
      this.storeAfter = this.eventsAfterMark + every
    }
  }

  /** Events of `type` committed in the last 24 h, in whole minutes (see the class). */
  lastDay(type: CountedEvent): number {
    this.ctx.commitBeforeRead()
    const firstMinute = Math.floor((this.ctx.clock.now() - WINDOW_MS) / MINUTE)
    const minutes = this.byMinute.get(type)!
    let count = 0
    for (const [minute, n] of minutes) {
      if (minute >= firstMinute) count += n
      else minutes.delete(minute) // out of every future window
    }
    return count
  }
}
