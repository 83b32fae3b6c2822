/**
 * The QUEUED jobs of one queue and priority, in pick order (the time each became eligible, then
 * submit order), as keys only: `eligible_at` and `seq`. Kept in memory beside the database by the
 * tally (job-tally.ts), it is what a pick walks (pick.ts): the rows it may take are then read by
 * their key. SQLite used to walk the same order on the pick index, a statement per page that
 * built every row of the page.
 *
 * Two arrays of numbers, sorted by (eligible_at, seq). A job leaves by being marked (its seq
 * negated), not spliced out: a pick takes jobs from the front, and removing each would shift the
 * whole array. The marked entries keep their place in the order and are dropped in one pass
 * once they are as many as the live ones. A job comes in at the end almost always (a new job
 * is eligible now, with the next seq); a delayed or requeued one is spliced into its place.
 */
export class QueuedRange {
  private eligible: number[] = []
  /** Each entry's seq; negative once the job has left. */
  private seqs: number[] = []
  /** Entries before this one have all left. */
  private head = 0
  private live = 0

  /** The jobs in the range. */
  get size(): number {
    return this.live
  }

  add(eligibleAt: number, seq: number): void {
    const at = this.position(eligibleAt, seq)
    if (at < this.seqs.length && this.eligible[at] === eligibleAt && -this.seqs[at]! === seq) {
      this.seqs[at] = seq // it left and comes back (a rolled-back savepoint): its mark is lifted
    } else if (at === this.seqs.length) {
      this.eligible.push(eligibleAt)
      this.seqs.push(seq)
    } else {
      this.eligible.splice(at, 0, eligibleAt)
      this.seqs.splice(at, 0, seq)
    }
    this.live += 1
  }

  remove(eligibleAt: number, seq: number): void {
    const at = this.position(eligibleAt, seq)
    if (at >= this.seqs.length || this.seqs[at] !== seq) throw new Error(`queued range: job ${seq} (eligible ${eligibleAt}) is not in it`)
    this.seqs[at] = -seq
    this.live -= 1
    while (this.head < this.seqs.length && this.seqs[this.head]! < 0) this.head += 1
    if (this.seqs.length - this.live > Math.max(64, this.live)) this.compact()
  }

  /**
   * Up to `count` jobs eligible at `now`, in order, after the job (`after`) a previous page ended
   * with (or from the front).
   */
  page(now: number, count: number, after: { eligibleAt: number; seq: number } | null): number[] {
    const found: number[] = []
    let at = after === null ? this.head : this.position(after.eligibleAt, after.seq + 1)
    for (; at < this.seqs.length && found.length < count; at++) {
      if (this.eligible[at]! > now) break
      const seq = this.seqs[at]!
      if (seq > 0) found.push(seq)
    }
    return found
  }

  /** Adds the seq of every job of the range below `below` to `out` (in no useful order). */
  seqsBelow(below: number, out: number[]): void {
    for (let at = this.head; at < this.seqs.length; at++) {
      const seq = this.seqs[at]!
      if (seq > 0 && seq < below) out.push(seq)
    }
  }

  /** The smallest seq of the range's jobs, or `atMost` if that is smaller (or the range is empty). */
  minSeq(atMost: number): number {
    let min = atMost
    for (let at = this.head; at < this.seqs.length; at++) {
      const seq = this.seqs[at]!
      if (seq > 0 && seq < min) min = seq
    }
    return min
  }

  /** Whether a job of the range is eligible at `now`. */
  hasEligible(now: number): boolean {
    return this.head < this.seqs.length && this.eligible[this.head]! <= now
  }

  /** The first time after `now` that a job of the range becomes eligible, or null if none waits. */
  nextEligibleAfter(now: number): number | null {
    for (let at = this.position(now + 1, 0); at < this.seqs.length; at++) {
      if (this.seqs[at]! > 0) return this.eligible[at]!
    }
    return null
  }

  /** The first entry at or after (eligibleAt, seq) in the order, marked or not. */
  private position(eligibleAt: number, seq: number): number {
    let low = this.head
    let high = this.seqs.length
    while (low < high) {
      const mid = (low + high) >>> 1
      const e = this.eligible[mid]!
      if (e < eligibleAt || (e === eligibleAt && Math.abs(this.seqs[mid]!) < seq)) low = mid + 1
      else high = mid
    }
    return low
  }

  private compact(): void {
    const eligible: number[] = []
    const seqs: number[] = []
    for (let at = this.head; at < this.seqs.length; at++) {
      if (this.seqs[at]! < 0) continue
      eligible.push(this.eligible[at]!)
      seqs.push(this.seqs[at]!)
    }
    this.eligible = eligible
    this.seqs = seqs
    this.head = 0
  }
}
