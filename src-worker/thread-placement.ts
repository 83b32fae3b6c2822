/**
 * Which handler thread runs each job of a batch. Every message to a thread and back costs a
 * structured clone and a wake-up of both threads, and jobs that only take a moment gain nothing
 * from running on several threads: the jobs of a batch whose type has been short so far go
 * together to one thread — one message there, and their ends back in as few as the thread can
 * (one, for jobs that await; handler-thread.ts `endsOut` says when it sends more). A job that may
 * compute (a type not seen yet, or one whose runs take a while) goes to the least-loaded thread
 * at its turn, so such jobs spread over the threads as before.
 */

/** A job type whose runs typically end within this is short (by default). */
export const SHORT_RUN_MS = 20

/** Weight of the newest run in a type's typical run: a change shows within some 20 runs. */
const NEWEST_WEIGHT = 0.2

/** How long each job type's runs typically take (a moving average), from start to end as the runtime sees them. */
export class RunTimes {
  private readonly typicalMs = new Map<string, number>()

  constructor(private readonly shortMs = SHORT_RUN_MS) {}

  learn(type: string, ms: number): void {
    const typical = this.typicalMs.get(type)
    this.typicalMs.set(type, typical === undefined ? ms : typical + NEWEST_WEIGHT * (ms - typical))
  }

  /**
   * When a run of `type` started at `startedAt` should have ended: twice its typical run, and
   * never later than a short run. A type not seen yet, or not short, has no such moment.
   */
  expectedEnd(type: string, startedAt: number): number {
    const typical = this.typicalMs.get(type)
    return typical === undefined || typical >= this.shortMs ? -Infinity : startedAt + Math.min(2 * typical + 1, this.shortMs)
  }

  /** Whether the type's runs have been short; a type not seen yet is not. */
  isShort(type: string): boolean {
    const typical = this.typicalMs.get(type)
    return typical !== undefined && typical < this.shortMs
  }
}

/**
 * The thread (an index into `loads`, the jobs each thread runs now) for each job of a batch, in
 * order: short jobs all go to the thread that was least loaded when the first of them was
 * placed; every other job to the thread least loaded at its turn (the first such on a tie).
 */
export function placeBatch(types: readonly string[], loads: readonly number[], isShort: (type: string) => boolean): number[] {
  const load = [...loads]
  const leastLoaded = () => load.reduce((best, n, i) => (n < load[best]! ? i : best), 0)
  let shortThread = -1
  return types.map((type) => {
    const thread = !isShort(type) ? leastLoaded() : shortThread >= 0 ? shortThread : (shortThread = leastLoaded())
    load[thread]!++
    return thread
  })
}
