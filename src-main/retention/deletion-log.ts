import { pruneCutoff } from '../engine'
import { HOUR } from '../engine/rules/clock'

/** After the first line, at most one line in this long: the deletions between are added up into it. */
export const DELETION_LOG_EVERY_MS = HOUR

/** What a completed pass deleted, as {@link DeletionLog} reads it (the pruner's PrunePass). */
export interface PassDeletions {
  /** When the pass started, by the engine's clock (epoch ms). */
  at: number
  retain_days: number
  jobs_deleted: number
  /** Events that named no job. */
  events_deleted: number
}

const counted = (n: number, what: string) => `${n.toLocaleString('en-US')} ${what}${n === 1 ? '' : 's'}`

/**
 * What retention deleted, said in the host's log. A deletion must never pass without a word: the
 * first start on a file of a release without retention deletes every job older than the period,
 * months of history, within seconds. Nor may a busy host, which deletes a few jobs every minute,
 * fill its log. So the first pass of a start that deletes anything says so at once; what later
 * passes delete is added up and said in one line at most every {@link DELETION_LOG_EVERY_MS}, and
 * at the stop; a pass that deletes nothing says nothing. Time is the passes' own (`at`).
 */
export class DeletionLog {
  private heldJobs = 0
  private heldEvents = 0
  /** When the last line was said, or null before the first. */
  private saidAt: number | null = null
  /** The newest pass added to what is held. */
  private lastPass: PassDeletions | null = null

  constructor(private readonly log: (line: string) => void) {}

  /** Adds a completed pass's deletions; says them, with those held, when a line is due. */
  passed(pass: PassDeletions): void {
    if (pass.jobs_deleted === 0 && pass.events_deleted === 0) return
    this.heldJobs += pass.jobs_deleted
    this.heldEvents += pass.events_deleted
    this.lastPass = pass
    if (this.saidAt === null || pass.at - this.saidAt >= DELETION_LOG_EVERY_MS) this.say()
  }

  /** Says what is held, if anything (the host stops). */
  flush(): void {
    if (this.lastPass) this.say()
  }

  private say(): void {
    const pass = this.lastPass!
    const since = this.saidAt === null ? '' : ` since ${new Date(this.saidAt).toISOString()}`
    const cutoff = pruneCutoff(pass.at, pass.retain_days)
    this.log(
      `leasehold: retention deleted ${counted(this.heldJobs, 'finished job')} and ${counted(this.heldEvents, 'event')} that named no job${since}, ` +
        `older than ${counted(pass.retain_days, 'day')}${cutoff === null ? '' : ` (before ${new Date(cutoff).toISOString()})`}; ` +
        '--retain-days sets how long they are kept (0 keeps every job)',
    )
    this.saidAt = pass.at
    this.heldJobs = 0
    this.heldEvents = 0
    this.lastPass = null
  }
}
