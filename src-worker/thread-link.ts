import { z } from 'zod'

/**
 * A handler thread's own link to the host, for local workers (docs/workers.md, "How a granted
 * job reaches its handler"). Without it, a job the host grants goes over the worker process's
 * IPC channel to its main thread, which posts it on to a handler thread: two threads woken, one
 * after the other. With it, a claim may name an idle thread (`claim.thread`); when the answer
 * grants one job, the host writes it to that thread's link instead; the thread runs the job, and
 * the main thread takes it on as any job (its heartbeats, its timers, the report of its end).
 *
 * A link is a local socket (a Unix socket in a folder only the host's user can open, a named
 * pipe on Windows) whose path and token the host gives each worker process at spawn. A thread
 * connects, says who it is in one line ({@link LinkHello}), and from then on only reads: the
 * host's answers, one JSON line each. Anything wrong with a link (no path given, a failed
 * connection, a link that closes) only means the answers go over IPC as before.
 *
 * The thread leaves such an answer in its {@link Mailbox} and starts the job's handler before
 * it tells the runtime: a wake-up of the runtime's thread just before the handler starts costs
 * the handler its start on a busy machine (~0.03 ms here, docs/performance.md).
 */

/** The worker's environment: the host's link path, and the token its threads show the host. */
export const LINK_PATH_ENV = 'LEASEHOLD_WORKER_LINK'
export const LINK_TOKEN_ENV = 'LEASEHOLD_WORKER_LINK_TOKEN'

/** What a thread needs to link itself to the host. */
export interface LinkAddress {
  path: string
  token: string
  worker_id: string
  /** The thread's index among its worker's handler threads: what a claim names. */
  thread: number
}

/** A thread's first (and only) line to the host. */
export const LinkHello = z.object({
  worker_id: z.string().min(1).max(200),
  thread: z.number().int().min(0).max(255),
  token: z.string().min(1).max(200),
})
export type LinkHello = z.infer<typeof LinkHello>

/** The longest hello the host reads before it gives up on the connection. */
export const MAX_HELLO_CHARS = 1024

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
