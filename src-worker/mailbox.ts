/**
 * A handler thread's side of its link to the host (src-shared/thread-link.ts): where the thread
 * leaves an answer that came over the link for the runtime. The thread leaves such an answer in
 * its {@link Mailbox} and starts the job's handler before it tells the runtime: a wake-up of the
 * runtime's thread just before the handler starts costs the handler its start on a busy machine
 * (~0.03 ms here, docs/performance.md).
 */

/** What a thread needs to link itself to the host. */
export interface LinkAddress {
  path: string
  token: string
  worker_id: string
  /** The thread's index among its worker's handler threads: what a claim names. */
  thread: number
}

/** How much of an answer a thread's mailbox holds; a longer one goes to the runtime by message, before its job runs. */
export const MAILBOX_BYTES = 64 * 1024

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/**
 * Where a handler thread leaves an answer of one job that came over its link, for the runtime to take
 * without being woken for it: memory both threads share. The thread leaves the answer, starts
 * its job, then tells the runtime; should the handler block the thread from its start, the
 * runtime looks here on its own while a claim names the thread (WorkerRuntime), so the job is
 * heartbeated all the same. One answer at a time: a claim names a thread only while no other
 * does, and the runtime takes the answer before it names the thread again.
 */
export class Mailbox {
  /** [answers left so far, the last one's length in bytes, its job's run number]. */
  private readonly state: Int32Array
  private readonly bytes: Uint8Array
  /** Answers taken so far (the runtime's side). */
  private taken = 0

  constructor(readonly buffer = new SharedArrayBuffer(12 + MAILBOX_BYTES)) {
    this.state = new Int32Array(buffer, 0, 3)
    this.bytes = new Uint8Array(buffer, 12)
  }

  /** The thread's side: leaves `text` (the answer) for its job's `run`; false if it does not fit. */
  put(text: string, run: number): boolean {
    const { read, written } = encoder.encodeInto(text, this.bytes)
    if (read < text.length) return false
    this.state[1] = written
    this.state[2] = run
    Atomics.add(this.state, 0, 1) // after the answer: whoever sees the count sees the answer
    return true
  }

  /** The runtime's side: the answer left since the last take, if one was. */
  take(): { text: string; run: number } | null {
    const left = Atomics.load(this.state, 0)
    if (left === this.taken) return null
    this.taken = left
    return { text: decoder.decode(this.bytes.slice(0, this.state[1])), run: this.state[2]! }
  }
}
