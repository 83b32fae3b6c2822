import { HOUR, MINUTE } from '../rules/clock'
import type { StoreContext } from '../store/context'
import { readSetting, writeSetting } from '../store/settings'
import type { EngineContext } from './context'
import { COUNTED_EVENTS as COUNTED, type CountedEvent } from '../rules/events'

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
 * of a commit after `countsStoreAfterEvents` of them (context.ts EngineConfig). A start reads the
 * last day of stats_counts and counts the events after the mark from the log (a range of its
 * key): a crash loses nothing.
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

  constructor(private readonly ctx: StoreContext) {}

  /** Reads the counts from the database (the engine does so once, at start), and follows the events from then on. */
  load(): void {
    const { ctx } = this
    this.storeAfter = ctx.config.countsStoreAfterEvents
    this.mark = Number(readSetting(ctx, COUNTED_THROUGH_KEY) ?? 0)
    this.newest = this.mark
    const since = Math.floor((ctx.clock.now() - WINDOW_MS) / MINUTE) * MINUTE
    const stored = ctx.all<{ event_type: CountedEvent; ts: number; n: number }>('SELECT event_type, ts, n FROM stats_counts WHERE ts >= ?', since)
    for (const row of stored) if (this.byMinute.has(row.event_type)) add(this.byMinute, row.event_type, Math.floor(row.ts / MINUTE), row.n)
    this.countAfterMark()
    ctx.onEvent((event) => this.count(event.id, event.ts, event.event_type as CountedEvent))
    ctx.onCommit(() => {
      if (this.eventsAfterMark >= this.storeAfter) this.storeOrPostpone()
    })
  }

  /**
   * Counts the events after the mark: those the last run had not stored yet (a few seconds' worth,
   * or a whole log written behind the host's back). Minute by minute, in SQLite: reading a row
   * into JavaScript costs ~2 µs, ten times what SQLite takes to count it. A minute's events are a
   * range of ids, found by a binary search on `ts`, which grows with the id; a range whose events
   * do not all fall in one minute (the clock went back) is counted row by row.
   */
  private countAfterMark(): void {
    const { db } = this.ctx
    const next = db.prepare('SELECT id, ts FROM events WHERE id >= ? ORDER BY id LIMIT 1').raw(true)
    const first = (id: number) => next.get(id) as [number, number] | undefined
    const last = (db.prepare('SELECT MAX(id) FROM events').pluck().get() as number | null) ?? 0
    const sums = COUNTED.map((type) => `SUM(event_type = '${type}')`).join(', ')
    const range = db.prepare(`SELECT MIN(ts), MAX(ts), MAX(id), COUNT(*), ${sums} FROM events WHERE id >= ? AND id < ?`).raw(true)
    let step = 64
    for (let from = first(this.mark + 1); from !== undefined; ) {
      const [fromId, fromTs] = from
      // The first id after `fromId` whose event (or the next one's, past a gap) is in a later
      // minute: a gallop from the last minute's length, then a binary search.
      const end = (Math.floor(fromTs / MINUTE) + 1) * MINUTE
      let [lo, hi] = [fromId + 1, last + 1]
      for (let probe = fromId + step; probe < hi; probe = lo + step, step *= 2) {
        const [id, ts] = first(probe)!
        if (ts >= end) hi = probe
        else lo = id + 1
      }
      while (lo < hi) {
        const mid = Math.floor((lo + hi) / 2)
        const [id, ts] = first(mid)!
        if (ts >= end) hi = mid
        else lo = id + 1
      }
      step = Math.max(1, lo - fromId)
      const [minTs, maxTs, newest, events, ...counts] = range.get(fromId, lo) as number[]
      if (Math.floor(minTs! / MINUTE) === Math.floor(maxTs! / MINUTE)) {
        this.followed(newest!, events!)
        COUNTED.forEach((type, i) => this.tally(type, minTs!, counts[i]!))
      } else {
        const rows = db.prepare('SELECT id, ts, event_type FROM events WHERE id >= ? AND id < ?').raw(true)
        for (const [id, ts, type] of rows.iterate(fromId, lo) as IterableIterator<[number, number, CountedEvent]>) this.count(id, ts, type)
      }
      from = first(lo)
    }
  }

  /** One committed event. */
  private count(id: number, ts: number, type: CountedEvent): void {
    this.followed(id, 1)
    if (this.byMinute.has(type)) this.tally(type, ts, 1)
  }

  /** `events` more events after the mark, the newest of them `newest`. */
  private followed(newest: number, events: number): void {
    this.newest = Math.max(this.newest, newest)
    this.eventsAfterMark += events
  }

  /** `n` more events of a counted type in the minute of `ts`. */
  private tally(type: CountedEvent, ts: number, n: number): void {
    if (n === 0) return
    const minute = Math.floor(ts / MINUTE)
    add(this.byMinute, type, minute, n)
    add(this.unstored, type, minute, n)
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
      writeSetting(this.ctx, COUNTED_THROUGH_KEY, String(this.newest))
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

/** Adds the counts of the committed events not stored yet to stats_counts (see {@link RecentCounts.store}): before events are deleted. */
export const storeRecentCounts = (ctx: EngineContext): void => ctx.counts.store()
