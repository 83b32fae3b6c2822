import { BACKUP_TAKEN_AT_KEY } from '../../db/open'
import type { StoreContext } from './context'
import { readSetting, writeSetting } from './settings'

/**
 * A number the engine hands out in order from memory, instead of asking SQLite for `MAX()` on
 * every grant or submit, and which must never be handed out twice, even after the rows that
 * held it were deleted (retention and purges delete old leases and jobs). So the numbers are not
 * looked up in the rows that use them: the sequence reserves blocks of them in the settings
 * table, inside the transaction that takes the first number of a block, and after a restart it
 * starts past the last reservation. A reservation rolled back is made again by the next number;
 * a number taken by a write that is rolled back is skipped, not given back: a gap is harmless,
 * the numbers only have to increase. (One host owns a data dir at a time.)
 */
class ReservedSequence {
  private last: number | null = null
  private reserved = 0

  constructor(
    private readonly ctx: StoreContext,
    /** The settings key of the reservation. */
    readonly key: string,
    /** Where a database from before reservations starts: the largest number stored, as `n`. */
    private readonly storedMaxSql: string,
    /** Called inside the transaction that reserves a block, with the number being taken. */
    private readonly onReserve: (taken: number) => void = () => {},
    private readonly block = 4096,
  ) {}

  next(): number {
    if (this.last === null) {
      this.reserved = this.storedReservation()
      this.last = this.reserved
    }
    this.last += 1
    if (this.last > this.reserved) this.reserve(this.last + this.block - 1)
    return this.last
  }

  /** Where the sequence goes on from: its last reservation, or on a database from before reservations, the largest number stored. */
  storedReservation(): number {
    const stored = readSetting(this.ctx, this.key)
    return stored !== undefined ? Number(stored) : this.ctx.one<{ n: number }>(this.storedMaxSql)!.n
  }

  private reserve(upTo: number): void {
    const before = this.reserved
    writeSetting(this.ctx, this.key, String(upTo))
    this.onReserve(this.last!)
    this.reserved = upTo
    this.ctx.onRollback(() => (this.reserved = before))
  }
}

/**
 * A cache whose start reads its rows from a floor of a sequence (the QUEUED jobs by job key, the
 * ACTIVE leases by fence): it stores the floor with each block the sequence reserves.
 */
export interface FloorKeeper {
  /** Stores a floor at or below every number of its rows now, or `next` (the number being taken) when it holds none; inside the reserving transaction. */
  storeFloor(next: number): void
}

/**
 * More event ids (or stream message ids) than a host gives in a millisecond, by far: a drain of
 * 20,000 jobs a second writes ~60 events a millisecond, and each restart skips at most one block.
 */
export const IDS_PER_MS_BOUND = 1000

/** The least a restored backup's ids jump: a block, for a copy restored within the millisecond (or by a clock set back). */
const JUMP_AT_LEAST = 4096

/** What a start on a restored backup did: when the copy was taken, and the event id and stream message id that come next. */
export interface RestoredBackup {
  takenAt: number
  eventId: number
  messageId: number
}

/** The engine's sequences: job keys, lease fences, stream message ids and event ids. */
export class Counters {
  private readonly jobSeqs: ReservedSequence
  private readonly fences: ReservedSequence
  private readonly messageIds: ReservedSequence
  private readonly eventIds: ReservedSequence
  private jobSeqFloor: FloorKeeper | null = null
  private fenceFloor: FloorKeeper | null = null

  constructor(private readonly ctx: StoreContext) {
    // Before reservations, a job's key was the largest one stored plus one. With each block, where
    // the QUEUED jobs start (job-tally.ts reads from there at start).
    this.jobSeqs = new ReservedSequence(ctx, 'job_seqs_reserved', 'SELECT COALESCE(MAX(seq), 0) AS n FROM jobs', (taken) => this.jobSeqFloor?.storeFloor(taken))
    // With each block of fences, where the ACTIVE leases start (active-leases.ts reads from there at start).
    this.fences = new ReservedSequence(ctx, 'fences_reserved', 'SELECT COALESCE(MAX(fence), 0) AS n FROM leases', (taken) => this.fenceFloor?.storeFloor(taken))
    // Migration 0007 wrote the reservation from the table of messages it dropped.
    this.messageIds = new ReservedSequence(ctx, 'stream_message_ids_reserved', 'SELECT COALESCE(MAX(stream_message_id), 0) AS n FROM jobs')
    // Before reservations, retention and purges never deleted the newest event, so the largest
    // id stored is the largest ever given.
    this.eventIds = new ReservedSequence(ctx, 'event_ids_reserved', 'SELECT COALESCE(MAX(id), 0) AS n FROM events')
  }

  /**
   * On a database restored from a backup (its copy marked as one: db/backup.ts), moves the
   * event ids and stream message ids past every one the backed-up host may have given after the
   * copy: a reader resumes an event stream from an event id and Redis holds message ids, and a
   * number given again would name two things. How many it gave is not in the copy; it is bounded
   * by the time since the copy at {@link IDS_PER_MS_BOUND}, far above what a host can give. Run
   * before the first of those numbers is taken (the host's start does), in a transaction of its
   * own; takes the mark away. Null when the database is not a restored backup.
   */
  goPastRestoredBackup(now: number): RestoredBackup | null {
    const takenAt = readSetting(this.ctx, BACKUP_TAKEN_AT_KEY)
    if (takenAt === undefined) return null
    const jump = IDS_PER_MS_BOUND * Math.max(now - Number(takenAt), 0) + JUMP_AT_LEAST
    return this.ctx.transact(() => {
      const [eventId, messageId] = [this.eventIds, this.messageIds].map((sequence) => {
        const from = sequence.storedReservation() + jump
        writeSetting(this.ctx, sequence.key, String(from))
        return from + 1
      })
      this.ctx.run('DELETE FROM settings WHERE key = ?', BACKUP_TAKEN_AT_KEY)
      return { takenAt: Number(takenAt), eventId: eventId!, messageId: messageId! }
    })
  }

  /** The caches that store a floor with each block of job keys and of fences (the engine's context sets them as it builds them). */
  keepFloors(jobSeqs: FloorKeeper, fences: FloorKeeper): void {
    this.jobSeqFloor = jobSeqs
    this.fenceFloor = fences
  }

  /** The key (`seq`) of the next job: strictly greater than every job's before, deleted ones too. */
  nextJobSeq(): number {
    return this.jobSeqs.next()
  }

  /** The fence of the next lease: strictly greater than every fence granted before, anywhere. */
  nextFence(): number {
    return this.fences.next()
  }

  /** The id of the next stream message. */
  nextMessageId(): number {
    return this.messageIds.next()
  }

  /**
   * The id of the next event: strictly greater than every event's before, deleted ones too, so
   * that an event stream resuming from an id never misses a later event that reused it, and any
   * finished job can be deleted with its events, the newest of all included.
   */
  nextEventId(): number {
    return this.eventIds.next()
  }
}

/** The key (`seq`) of the next job (see {@link Counters.nextJobSeq}). */
export const nextJobSeq = (ctx: StoreContext): number => ctx.counters.nextJobSeq()

/** The fence of the next lease (see {@link Counters.nextFence}). */
export const nextFence = (ctx: StoreContext): number => ctx.counters.nextFence()
