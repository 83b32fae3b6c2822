import { createRequire } from 'node:module'
import { Worker } from 'node:worker_threads'
import { connectionName } from './connection'
import type { FileIdentity } from './file-watch'
import type { Durability } from './open'

/**
 * How often the checkpointer copies the write-ahead log back into the database file while the
 * host commits. Each pass copies what the last 250 ms committed, so the main connection's own
 * checkpoint (the safety net at WAL_AUTOCHECKPOINT_PAGES, open.ts) finds little left to copy
 * when it comes.
 */
export const CHECKPOINT_INTERVAL_MS = 250

/**
 * How long a checkpointer that found the whole log copied sleeps at the most: an idle host's
 * thread passes every 10 s, not four times a second, and a lone job's few commits wait for that
 * pass. More commits than {@link WAKE_AFTER_COMMITS} wake it sooner.
 */
export const IDLE_PASS_MS = 10_000

/**
 * How many commits a sleeping checkpointer lets go by before the writer wakes it: a burst after a
 * quiet spell has it pass again within its first milliseconds, while a lone job does not wake it.
 * Waking it costs the job: the woken thread starts on the writer's core and runs first, cold
 * after its sleep, before the grant that commit made is written to its worker.
 */
export const WAKE_AFTER_COMMITS = 32

/** The slots of the thread's shared Int32Array. */
const COMMITS = 0 // commits the thread has been told of (a counter)
const ASLEEP = 1 // 1 while the thread waits for commits
const STOP = 2 // 1 once the thread is to end
const PASSES = 3 // passes made (a counter)
const SLEPT_AT = 4 // the commit count the thread went to sleep at

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
  /** How long an idle thread sleeps at the most ({@link IDLE_PASS_MS}). */
  idleMs?: number
  /** The database file and its log as the host opened them: the thread opens nothing else (db/file-watch.ts). */
  files?: { path: string; database: FileIdentity; log: FileIdentity | null }
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
 * to copy does no I/O. A pass that finds the whole log copied puts the thread to sleep until
 * {@link WAKE_AFTER_COMMITS} more commits (it blocks in `Atomics.wait` on the commit counter the
 * host's main thread raises, read before the pass, so commits during the pass or just after it
 * never wait for the next wake-up) or {@link IDLE_PASS_MS}: an idle host's thread stays asleep
 * instead of passing four times a second. It blocks between passes too, so what ends it is the
 * STOP slot, not a message. Plain CommonJS, so it needs no build entry of its own.
 */
const THREAD = `
const { parentPort, workerData } = require('node:worker_threads')
const Database = require(workerData.driver)
const shared = new Int32Array(workerData.shared)
let db = null
let pageSize = 0
// The files at the paths must be those the host has open, or a checkpoint would copy the host's
// log into another file put in the database's place (db/file-watch.ts), or make a new log that
// shares the host's index of the old one.
const same = (path, file) => {
  try {
    const { dev, ino } = require('node:fs').statSync(path)
    return dev === file.dev && ino === file.ino
  } catch {
    return false
  }
}
const sizeOf = (path) => {
  try {
    return require('node:fs').statSync(path).size
  } catch {
    return Infinity // gone or replaced: the host's look tells that
  }
}
try {
  db = new Database(workerData.name, workerData.nativeBinding ? { fileMustExist: true, nativeBinding: workerData.nativeBinding } : { fileMustExist: true })
  const files = workerData.files
  if (files && !(same(files.path, files.database) && (files.log === null || same(files.path + '-wal', files.log)))) {
    throw new Error('the database file or its log at ' + files.path + ' is no longer the one the host opened')
  }
  db.pragma('synchronous = ' + (workerData.durability === 'full' ? 'FULL' : 'NORMAL'))
  pageSize = db.pragma('page_size', { simple: true })
} catch (error) {
  db?.close()
  db = null
  parentPort.postMessage({ error: error.message, stopped: true })
}
// The last pass that copied something: a pass that finds the same figures stays silent, so the
// main thread is not woken for nothing.
let last = { log: 0, checkpointed: 0 }
/** Returns whether the whole log is in the database file now. */
const pass = () => {
  Atomics.add(shared, ${PASSES}, 1)
  // A database file cut below its first page is for the host's look to see (db/file-watch.ts):
  // a pass would write pages into it again, as long as before, and hide it.
  if (workerData.files && sizeOf(workerData.files.path) < pageSize) return false
  try {
    const [row] = db.pragma('wal_checkpoint(PASSIVE)')
    if (row.checkpointed > 0 && (row.log !== last.log || row.checkpointed !== last.checkpointed)) {
      last = { log: row.log, checkpointed: row.checkpointed }
      parentPort.postMessage({ pass: last })
    }
    return row.checkpointed === row.log
  } catch (error) {
    parentPort.postMessage({ error: error.message, code: error.code })
    return false
  }
}
while (db && Atomics.load(shared, ${STOP}) === 0) {
  const seen = Atomics.load(shared, ${COMMITS})
  if (pass()) {
    Atomics.store(shared, ${SLEPT_AT}, seen)
    Atomics.store(shared, ${ASLEEP}, 1)
    Atomics.wait(shared, ${COMMITS}, seen, workerData.idleMs)
    Atomics.store(shared, ${ASLEEP}, 0)
  }
  Atomics.wait(shared, ${STOP}, 0, workerData.intervalMs)
}
db?.close()
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
  private readonly shared = new Int32Array(new SharedArrayBuffer(5 * Int32Array.BYTES_PER_ELEMENT))

  constructor(options: CheckpointerOptions) {
    let worker: Worker
    try {
      const driver = createRequire(import.meta.url).resolve('better-sqlite3')
      worker = new Worker(THREAD, {
        eval: true,
        workerData: {
          driver,
          name: connectionName(options.path, options.nativeBinding),
          durability: options.durability,
          nativeBinding: options.nativeBinding,
          shared: this.shared.buffer,
          intervalMs: options.intervalMs ?? CHECKPOINT_INTERVAL_MS,
          idleMs: options.idleMs ?? IDLE_PASS_MS,
          files: options.files ?? null,
        },
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

  /**
   * The writer has committed: a thread asleep over a log it found all copied wakes once
   * {@link WAKE_AFTER_COMMITS} commits came since, and passes an interval later. Costs the writer
   * an atomic add, and a wake-up call only then.
   */
  committed(): void {
    const commits = Atomics.add(this.shared, COMMITS, 1) + 1
    if (Atomics.load(this.shared, ASLEEP) === 1 && commits - Atomics.load(this.shared, SLEPT_AT) >= WAKE_AFTER_COMMITS) Atomics.notify(this.shared, COMMITS)
  }

  /** Passes the thread has made since it started, copying or not. */
  get passes(): number {
    return Atomics.load(this.shared, PASSES)
  }

  /** Ends the thread once its pass in progress is done (before the main connection closes). */
  async stop(): Promise<void> {
    Atomics.store(this.shared, STOP, 1)
    Atomics.notify(this.shared, STOP)
    Atomics.notify(this.shared, COMMITS)
    await this.exited
  }
}
