import { createRequire } from 'node:module'
import { Worker } from 'node:worker_threads'
import { connectionName } from './connection'
import type { Durability } from './open'

/**
 * How often the checkpointer copies the write-ahead log back into the database file. Each pass
 * copies what the last 250 ms committed, so the main connection's own checkpoint (the safety net
 * at WAL_AUTOCHECKPOINT_PAGES, open.ts) finds little left to copy when it comes.
 */
export const CHECKPOINT_INTERVAL_MS = 250

/** What a pass did: `wal_checkpoint(PASSIVE)`'s row. */
export interface CheckpointPass {
  /** Frames in the write-ahead log. */
  log: number
  /** Of them, the frames now in the database file. */
  checkpointed: number
}

export interface CheckpointerOptions {
  path: string
  durability: Durability
  /** The native addon to load, as openDatabase takes it (the Electron build's). */
  nativeBinding?: string
  intervalMs?: number
  /** A pass copied frames back. */
  onPass?: (pass: CheckpointPass) => void
  /**
   * A pass failed (the next pass tries again), or — `stopped` — the thread could not open the
   * database or died: checkpoints are then left to the main connection's own.
   */
  onError: (error: Error, stopped: boolean) => void
}

/**
 * The thread's code. Its own connection runs `PRAGMA wal_checkpoint(PASSIVE)` every interval:
 * a passive checkpoint never waits for the writer and never makes it wait, and one with nothing
 * to copy does no I/O. Plain CommonJS, so it needs no build entry of its own.
 */
const THREAD = `
const { parentPort, workerData } = require('node:worker_threads')
const Database = require(workerData.driver)
let db = null
try {
  db = new Database(workerData.name, workerData.nativeBinding ? { fileMustExist: true, nativeBinding: workerData.nativeBinding } : { fileMustExist: true })
  db.pragma('synchronous = ' + (workerData.durability === 'full' ? 'FULL' : 'NORMAL'))
} catch (error) {
  db = null
  parentPort.postMessage({ error: error.message, stopped: true })
}
// The last pass that copied something: an idle host's passes find the same figures and stay
// silent, so the main thread is not woken four times a second for nothing.
let last = { log: 0, checkpointed: 0 }
const pass = () => {
  try {
    const [row] = db.pragma('wal_checkpoint(PASSIVE)')
    if (row.checkpointed > 0 && (row.log !== last.log || row.checkpointed !== last.checkpointed)) {
      last = { log: row.log, checkpointed: row.checkpointed }
      parentPort.postMessage({ pass: last })
    }
  } catch (error) {
    parentPort.postMessage({ error: error.message, code: error.code })
  }
}
const timer = db && setInterval(pass, workerData.intervalMs)
parentPort.on('message', () => {
  clearInterval(timer)
  db?.close()
  parentPort.close()
})
`

/**
 * Copies the write-ahead log back into the database file on a thread of its own. Without it,
 * the commit that brings the log to WAL_AUTOCHECKPOINT_PAGES runs the checkpoint on the host's
 * main thread: every request waits for it (measured at 500 jobs/s: ~43 ms every ~2.7 s, the
 * whole p99 of pickup). Durability is unchanged: commits are exactly as durable as before, and
 * a checkpoint syncs the log before it copies, wherever it runs.
 */
export class Checkpointer {
  /** Null when the thread could not even be started (reported through `onError` as stopped). */
  private readonly worker: Worker | null = null
  private readonly exited: Promise<void> = Promise.resolve()

  constructor(options: CheckpointerOptions) {
    let worker: Worker
    try {
      const driver = createRequire(import.meta.url).resolve('better-sqlite3')
      worker = new Worker(THREAD, {
        eval: true,
        workerData: { driver, name: connectionName(options.path, options.nativeBinding), durability: options.durability, nativeBinding: options.nativeBinding, intervalMs: options.intervalMs ?? CHECKPOINT_INTERVAL_MS },
      })
    } catch (error) {
      queueMicrotask(() => options.onError(error as Error, true))
      return
    }
    worker.on('message', (message: { pass?: CheckpointPass; error?: string; code?: string; stopped?: boolean }) => {
      if (message.pass) options.onPass?.(message.pass)
      // SQLite's code comes along, so a storage fault is logged as one (rate-limited, one line), not as a bug.
      if (message.error) options.onError(Object.assign(new Error(message.error), { code: message.code }), message.stopped === true)
    })
    worker.on('error', (error) => options.onError(error, true))
    this.worker = worker
    this.exited = new Promise((resolve) => worker.once('exit', () => resolve()))
  }

  /** Ends the thread once its pass in progress is done (before the main connection closes). */
  async stop(): Promise<void> {
    this.worker?.postMessage('stop')
    await this.exited
  }
}
