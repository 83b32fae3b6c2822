import { spawnSync } from 'node:child_process'
import { readFileSync } from 'node:fs'

/** Descriptors kept from the connections for the host itself: Node's own, the database and its log, the read thread's and the checkpointer's connections, backups. */
const HOST_DESCRIPTORS = 48
/** And for each local worker: its pipes, IPC channel and links. */
const WORKER_DESCRIPTORS = 8
/** The fewest connections a host serves, however low its limit. */
const MIN_CONNECTIONS = 16

/**
 * The soft limit on this process's open files (`ulimit -n`), or null if it cannot be read. Linux
 * says it in /proc; elsewhere (macOS) a shell is asked, once, at start.
 */
export function openFilesLimit(): number | null {
  try {
    const line = /^Max open files\s+(\d+|unlimited)/m.exec(readFileSync('/proc/self/limits', 'utf8'))
    if (line) return line[1] === 'unlimited' ? null : Number(line[1])
  } catch {
    // Not Linux.
  }
  const answer = spawnSync('/bin/sh', ['-c', 'ulimit -n'], { encoding: 'utf8', timeout: 2000 })
  const limit = Number(answer.stdout?.trim())
  return Number.isSafeInteger(limit) && limit > 0 ? limit : null
}

/**
 * How many connections the host takes at once under a limit of `openFiles` descriptors: what is
 * left once its own and its local workers' are kept. Past that, a connection is refused at once
 * (Node's `maxConnections`, which says so as 'drop'), rather than taken until the process is out
 * of descriptors: then libuv accepts and closes each new connection without a word to Node (its
 * EMFILE "reserve descriptor" trick), and the host's workers, database and threads fail to open
 * what they need. Null (no limit known): no cap.
 */
export function connectionLimit(openFiles: number | null, localWorkers: number): number | null {
  if (openFiles === null) return null
  return Math.max(MIN_CONNECTIONS, openFiles - HOST_DESCRIPTORS - WORKER_DESCRIPTORS * localWorkers)
}
