import { z } from 'zod'
import { MAX_BODY_LIMIT_BYTES } from './limits'

/**
 * A local worker's link to the host, from its driving thread (docs/workers.md, "The driving
 * thread"). Without it, a worker's jobs and reports cross its IPC channel to and from its main
 * thread, which passes each job on to a handler thread: two threads woken, one after the other,
 * both ways. With it, the worker's first handler thread claims, runs and reports its own jobs
 * over the link (src-worker/driver.ts); the main thread only watches them, through memory both
 * threads share (src-worker/job-table.ts).
 *
 * A link is a local socket (a Unix socket in a folder only the host's user can open, a named
 * pipe on Windows) whose path and token the host gives each worker process at spawn. A thread
 * connects and says who it is in one line ({@link LinkHello}); after that it writes requests
 * and the host writes their answers, one JSON line each, in the IPC channel's messages
 * (src-shared/ipc-protocol.ts: `request` → `response`, matched by id). Anything wrong with a
 * link (no path given, a failed connection, a link that closes) only means the worker's main
 * thread claims over IPC instead.
 *
 * This file is the link's protocol, which the host and the worker both speak.
 */

/** The worker's environment: the host's link path, and the token its threads show the host. */
export const LINK_PATH_ENV = 'LEASEHOLD_WORKER_LINK'
export const LINK_TOKEN_ENV = 'LEASEHOLD_WORKER_LINK_TOKEN'

/** What a thread needs to link itself to the host. */
export interface LinkAddress {
  path: string
  token: string
  /** The thread's index among its worker's handler threads. */
  thread: number
}

/** A thread's first line to the host. */
export const LinkHello = z.object({
  worker_id: z.string().min(1).max(200),
  thread: z.number().int().min(0).max(255),
  token: z.string().min(1).max(200),
})
export type LinkHello = z.infer<typeof LinkHello>

/** The longest hello the host reads before it gives up on the connection. */
export const MAX_HELLO_CHARS = 1024

/** The longest request line the host reads from a linked thread (the largest body the host can be set to take). */
export const MAX_REQUEST_CHARS = MAX_BODY_LIMIT_BYTES
