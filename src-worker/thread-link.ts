import { z } from 'zod'

/**
 * A handler thread's own link to the host, for local workers (docs/workers.md, "How a granted
 * job reaches its handler"). Without it, a job the host grants goes over the worker process's
 * IPC channel to its main thread, which posts it on to a handler thread: two threads woken, one
 * after the other. With it, a claim may name an idle thread (`claim.thread`); when the answer
 * grants one job, the host writes it to that thread's link instead, and the thread passes the
 * answer on to the main thread — which keeps the job's heartbeats, its timers and its report,
 * as for any job — before it runs the job. The main thread is woken beside the handler, not
 * before it.
 *
 * A link is a local socket (a Unix socket in a folder only the host's user can open, a named
 * pipe on Windows) whose path and token the host gives each worker process at spawn. A thread
 * connects, says who it is in one line ({@link LinkHello}), and from then on only reads: the
 * host's answers, one JSON line each. Anything wrong with a link (no path given, a failed
 * connection, a link that closes) only means the answers go over IPC as before.
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

/**
 * Cuts a stream of text into lines ("\n"-ended JSON, which never holds a raw newline) and calls
 * `onLine` with each whole one. Returns the function to feed chunks to; it returns false, and
 * takes nothing more, once a line grows past `maxChars` without ending.
 */
export function lineReader(onLine: (line: string) => void, maxChars = Number.POSITIVE_INFINITY): (chunk: string) => boolean {
  let partial = ''
  let broken = false
  return (chunk) => {
    if (broken) return false
    let start = 0
    let end: number
    while ((end = chunk.indexOf('\n', start)) >= 0) {
      const line = partial + chunk.slice(start, end)
      partial = ''
      start = end + 1
      onLine(line)
    }
    partial += chunk.slice(start)
    if (partial.length > maxChars) broken = true
    return !broken
  }
}
