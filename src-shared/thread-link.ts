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
 * This file is the link's protocol, which the host and the worker both speak; the worker's side
 * of it is src-worker/mailbox.ts.
 */

/** The worker's environment: the host's link path, and the token its threads show the host. */
export const LINK_PATH_ENV = 'LEASEHOLD_WORKER_LINK'
export const LINK_TOKEN_ENV = 'LEASEHOLD_WORKER_LINK_TOKEN'

/** A thread's first (and only) line to the host. */
export const LinkHello = z.object({
  worker_id: z.string().min(1).max(200),
  thread: z.number().int().min(0).max(255),
  token: z.string().min(1).max(200),
})
export type LinkHello = z.infer<typeof LinkHello>

/** The longest hello the host reads before it gives up on the connection. */
export const MAX_HELLO_CHARS = 1024
