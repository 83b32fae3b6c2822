import type { AttemptError, Claim } from './transport'

/**
 * The worker's slots, in memory its threads share: one entry per job the worker may run at once.
 * A local worker's first handler thread claims, runs and reports its own jobs over its link to
 * the host (src-worker/driver.ts); the worker's main thread, the runtime, still answers for every
 * job it runs — heartbeats, cancels, runtime limits, the file gate — without being woken for
 * each one. It reads this table instead: every job the thread runs has an entry here, written
 * before its handler starts, and every so often the runtime takes over the jobs it finds there
 * (docs/workers.md, "The driving thread"). A job so ends either where it started, unseen by the
 * runtime, or — once taken over, or handed over by the thread — through the runtime, never both.
 *
 * Each entry is in one of four states, and which side may move it is fixed:
 * - FREE: the thread may take it for a job it claimed;
 * - THREAD: the thread runs the job and reports its end itself (→ REPORTING), unless the runtime
 *   takes it over first (→ RUNTIME) — one compare-and-swap each, so exactly one of them wins;
 * - REPORTING: the job has ended and the thread's report of it has not been answered by the host
 *   yet (→ FREE once it is). The runtime leaves it, unless the thread has exited: its report went
 *   with it, and the runtime takes the job over (→ RUNTIME) to end it as `thread_exited`;
 * - RUNTIME: the runtime heartbeats the job and reports its end, and frees the entry (→ FREE).
 *   The runtime also takes a FREE entry so for each job it claims itself while the thread is
 *   blocked (runtime.ts askIfBlocked), so that the thread's claims leave that slot to it.
 * An entry being written is BUSY, which the runtime passes over.
 */

const FREE = 0
const THREAD = 1
const RUNTIME = 2
const BUSY = 3
const REPORTING = 4

/** How much of a claim (all of it but its payload) an entry holds; a longer one goes to the runtime by message. */
export const ENTRY_BYTES = 1024

/**
 * Int32 fields of an entry: its state, the thread that holds it, its run's number there, the
 * claim's length in bytes, and the length of the outcome kept after it (0: none, see {@link keepOutcome}).
 */
const FIELDS = 5
/**
 * The header: the shortest heartbeat interval (ms) of the jobs taken so far; how many jobs have
 * been taken (a counter); 1 while the runtime's watch is slow, to be told by the next take; the
 * slots asked for by the thread's claims in flight, and by the runtime's (which claims only
 * while the thread is blocked: {@link freeForRuntime}), each written by its own side.
 */
const SHORTEST_BEAT = 0
const TAKES = 1
const WATCH_SLOW = 2
const ASKED_BY_THREAD = 3
const ASKED_BY_RUNTIME = 4
const HEADER = 5

/** A job the runtime has taken from the table: its claim (no payload), its run in the thread, when it started (epoch ms). */
export interface TakenJob {
  entry: number
  claim: Claim
  run: number
  startedAt: number
  /** How its handler ended, when the thread kept it for a report that had not left ({@link JobTable.keepOutcome}). */
  outcome?: KeptOutcome
}

/** A handler's end as the thread reports it. */
export type KeptOutcome = { ok: true; result: unknown } | { ok: false; error: AttemptError }

const encoder = new TextEncoder()
const decoder = new TextDecoder()

export class JobTable {
  private readonly ints: Int32Array
  private readonly starts: Float64Array
  private readonly bytes: Uint8Array

  /** A new table of `size` entries, or the view of one another thread made (its `buffer`). */
  constructor(readonly buffer: SharedArrayBuffer | number) {
    if (typeof buffer === 'number') {
      const size = buffer
      this.buffer = new SharedArrayBuffer(8 * size + 4 * (HEADER + FIELDS * size) + ENTRY_BYTES * size)
    }
    const shared = this.buffer as SharedArrayBuffer
    const size = shared.byteLength / (8 + 4 * FIELDS + ENTRY_BYTES) | 0
    this.starts = new Float64Array(shared, 0, size)
    this.ints = new Int32Array(shared, 8 * size, HEADER + FIELDS * size)
    this.bytes = new Uint8Array(shared, 8 * size + 4 * (HEADER + FIELDS * size))
    if (typeof buffer === 'number') Atomics.store(this.ints, SHORTEST_BEAT, 0x7fffffff)
  }

  get size(): number {
    return this.starts.length
  }

  private state(entry: number): number {
    return HEADER + FIELDS * entry
  }

  /**
   * The entries the thread may claim for: those free now, and those whose end it is reporting
   * (freed when the host answers that report, before the jobs granted with the answer are taken:
   * a report and a claim that go together so fit), less those the runtime's claims in flight
   * asked for.
   */
  freeCount(): number {
    let free = 0
    for (let entry = 0; entry < this.size; entry++) {
      const state = Atomics.load(this.ints, this.state(entry))
      if (state === FREE || state === REPORTING) free++
    }
    return free - Atomics.load(this.ints, ASKED_BY_RUNTIME)
  }

  /** The thread's side: the slots its claims in flight ask for, written each time an exchange leaves or is answered (not per job). */
  threadAsks(slots: number): void {
    Atomics.store(this.ints, ASKED_BY_THREAD, slots)
  }

  /** The runtime's side: the slots its claims in flight ask for. */
  runtimeAsks(slots: number): void {
    Atomics.store(this.ints, ASKED_BY_RUNTIME, slots)
  }

  /**
   * The runtime's side: the entries it may claim for while the thread is blocked — those free
   * now, less those the thread's claims in flight asked for (what a blocked thread's claim is
   * granted is the worker's to run, once the thread takes it). Entries whose end the thread
   * reports stay its own: a blocked thread frees none.
   */
  freeForRuntime(): number {
    let free = 0
    for (let entry = 0; entry < this.size; entry++) if (Atomics.load(this.ints, this.state(entry)) === FREE) free++
    return free - Atomics.load(this.ints, ASKED_BY_THREAD) - Atomics.load(this.ints, ASKED_BY_RUNTIME)
  }

  /** The runtime's side: takes a free entry for a job it claimed itself (RUNTIME's, freed by {@link free}); -1 if none is free. */
  reserve(): number {
    for (let entry = 0; entry < this.size; entry++) {
      if (Atomics.compareExchange(this.ints, this.state(entry), FREE, RUNTIME) === FREE) return entry
    }
    return -1
  }

  /**
   * The thread's side: takes a free entry for `claim`, run as `run` by the thread `owner`. The
   * entry is THREAD's if the claim fits it and `keep` says so, else RUNTIME's at once (the
   * runtime is to be given the job by message). -1 if no entry is free. `look`: the runtime is to
   * be told to look at the table now — the job's heartbeat interval is shorter than any taken
   * before, or the runtime's watch is slow ({@link slowWatch}; only one take says so).
   */
  take(claim: Claim, run: number, owner: number, keep: boolean): { entry: number; kept: boolean; look: boolean } {
    for (let entry = 0; entry < this.size; entry++) {
      const at = this.state(entry)
      if (Atomics.compareExchange(this.ints, at, FREE, BUSY) !== FREE) continue
      const { payload: _payload, ...rest } = claim
      const text = JSON.stringify(rest)
      const { read, written } = encoder.encodeInto(text, this.bytes.subarray(entry * ENTRY_BYTES, (entry + 1) * ENTRY_BYTES))
      const kept = keep && read === text.length
      this.starts[entry] = Date.now()
      this.ints[at + 1] = owner
      this.ints[at + 2] = run
      this.ints[at + 3] = written
      this.ints[at + 4] = 0
      const beatMs = Math.round(claim.heartbeat_interval_seconds * 1000)
      const sooner = beatMs < Atomics.load(this.ints, SHORTEST_BEAT)
      if (sooner) Atomics.store(this.ints, SHORTEST_BEAT, beatMs)
      Atomics.store(this.ints, at, kept ? THREAD : RUNTIME) // after the fields: whoever sees the state sees them
      Atomics.add(this.ints, TAKES, 1) // before the watch's mark is read: a watch slowing down sees one or the other
      const slow = Atomics.load(this.ints, WATCH_SLOW) === 1 && Atomics.compareExchange(this.ints, WATCH_SLOW, 1, 0) === 1
      return { entry, kept, look: sooner || slow }
    }
    return { entry: -1, kept: false, look: false }
  }

  /** The thread's side: its job has ended. True if the thread is to report it (the entry is REPORTING until {@link reported}); false if the runtime took it over. */
  release(entry: number): boolean {
    return Atomics.compareExchange(this.ints, this.state(entry), THREAD, REPORTING) === THREAD
  }

  /**
   * The thread's side: keeps how the job of `entry` ended beside its claim, while the entry is
   * REPORTING, when it fits there: should the thread exit before its report leaves, the runtime
   * reports that end instead of `thread_exited`. False if it does not fit.
   */
  keepOutcome(entry: number, outcome: KeptOutcome): boolean {
    const at = this.state(entry)
    const from = entry * ENTRY_BYTES + this.ints[at + 3]!
    const text = JSON.stringify(outcome)
    const { read, written } = encoder.encodeInto(text, this.bytes.subarray(from, (entry + 1) * ENTRY_BYTES))
    if (read !== text.length) return false
    Atomics.store(this.ints, at + 4, written)
    return true
  }

  /** The thread's side: the host has answered the report of the job of `entry`, or the report went to the runtime: the entry is FREE. */
  reported(entry: number): void {
    Atomics.compareExchange(this.ints, this.state(entry), REPORTING, FREE)
  }

  /** The thread's side: gives the job of `entry` to the runtime (to be told by message); false if the runtime already took it. */
  handOver(entry: number): boolean {
    return Atomics.compareExchange(this.ints, this.state(entry), THREAD, RUNTIME) === THREAD
  }

  /** Whether the thread still answers for the job of `entry`. */
  threadHolds(entry: number): boolean {
    return Atomics.load(this.ints, this.state(entry)) === THREAD
  }

  /** The thread's side: the entries it holds now (THREAD's, taken by `owner`). */
  heldBy(owner: number): number[] {
    const held: number[] = []
    for (let entry = 0; entry < this.size; entry++) {
      const at = this.state(entry)
      if (Atomics.load(this.ints, at) === THREAD && this.ints[at + 1] === owner) held.push(entry)
    }
    return held
  }

  /**
   * The runtime's side: takes over every job the thread `owner` (or any thread, without one)
   * still answers for, and reads what it needs of each. `exited`: that thread has exited, and
   * the jobs whose end it was reporting are taken too (their reports went with it).
   */
  takeOver(owner?: number, exited = false): TakenJob[] {
    const taken: TakenJob[] = []
    for (let entry = 0; entry < this.size; entry++) {
      const at = this.state(entry)
      const state = Atomics.load(this.ints, at)
      if ((state !== THREAD && !(exited && state === REPORTING)) || (owner !== undefined && this.ints[at + 1] !== owner)) continue
      if (Atomics.compareExchange(this.ints, at, state, RUNTIME) !== state) continue // it ended just now: the thread reports it
      taken.push(this.read(entry))
    }
    return taken
  }

  /** The runtime's side: what an entry the thread kept holds (the whole claim but the payload), once the runtime owns it. */
  read(entry: number): TakenJob {
    const at = this.state(entry)
    const length = this.ints[at + 3]!
    const claim = { ...JSON.parse(decoder.decode(this.bytes.slice(entry * ENTRY_BYTES, entry * ENTRY_BYTES + length))), payload: null } as Claim
    const taken: TakenJob = { entry, claim, run: this.ints[at + 2]!, startedAt: this.starts[entry]! }
    const kept = Atomics.load(this.ints, at + 4)
    if (kept > 0) {
      const from = entry * ENTRY_BYTES + length
      taken.outcome = JSON.parse(decoder.decode(this.bytes.slice(from, from + kept))) as KeptOutcome
    }
    return taken
  }

  /** The runtime's side: the job of an entry it owned has ended and been reported. */
  free(entry: number): void {
    Atomics.compareExchange(this.ints, this.state(entry), RUNTIME, FREE)
  }

  /** The shortest heartbeat interval (ms) of the jobs taken so far; none yet: a very large number. */
  shortestBeatMs(): number {
    return Atomics.load(this.ints, SHORTEST_BEAT)
  }

  /** The runtime's side: how many jobs the threads have taken so far. */
  takes(): number {
    return Atomics.load(this.ints, TAKES)
  }

  /**
   * The runtime's side: its watch is to slow down, having seen `takes` jobs taken and none since;
   * the next take then says to look. False if a job was taken meanwhile: the watch keeps its pace.
   */
  slowWatch(takes: number): boolean {
    Atomics.store(this.ints, WATCH_SLOW, 1)
    if (Atomics.load(this.ints, TAKES) === takes) return true
    Atomics.compareExchange(this.ints, WATCH_SLOW, 1, 0) // or the take's thread cleared it, and tells the runtime
    return false
  }
}
