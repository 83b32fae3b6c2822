import { createRequire } from 'node:module'
import { Worker } from 'node:worker_threads'
import { connectionName } from './connection'

/**
 * How long the thread stays without a read before it ends: a dashboard open on the jobs view
 * reads every few seconds and keeps it; a search typed once gives its memory back a minute later.
 */
export const READ_THREAD_IDLE_MS = 60_000

/**
 * How long the reads stay on the main connection after the thread failed to start or died the
 * n-th time in a row, before a read starts it again: 1 s, 2 s, 4 s … up to a minute. A failure
 * is often passing (EMFILE while the host is out of file descriptors), and a thread that is down
 * for good would leave every search to stall the main thread.
 */
export function readThreadRetryMs(failures: number): number {
  return Math.min(1000 * 2 ** (failures - 1), 60_000)
}

/** A read's SQL and its parameters, as the engine's reads build them. */
export interface ThreadRead {
  sql: string
  params: unknown[]
}

/**
 * The thread's code: a read-only connection of its own, and each read asked for answered with
 * its rows, one read at a time. A lock it would wait for (`timeout: 0`) fails the read at once,
 * which the main connection then makes. Its statements are kept by their text (the pages of a
 * list differ in their parameters, not their SQL). Plain CommonJS, as the checkpointer's.
 */
const THREAD = `
const { parentPort, workerData } = require('node:worker_threads')
const Database = require(workerData.driver)
let db = null
try {
  db = new Database(workerData.name, { readonly: true, fileMustExist: true, timeout: 0, ...(workerData.nativeBinding ? { nativeBinding: workerData.nativeBinding } : {}) })
  db.pragma('cache_size = -1024') // a walk reads each page once: a cache the size of the host's (16 MiB) would only fill
} catch (error) {
  parentPort.postMessage({ down: error.message, code: error.code })
}
const statements = new Map()
if (db) parentPort.on('message', ({ id, sql, params, close }) => {
  if (close) {
    db.close()
    return parentPort.close() // nothing else keeps the thread: it ends
  }
  try {
    let statement = statements.get(sql)
    if (!statement) {
      if (statements.size >= 64) statements.clear()
      statements.set(sql, (statement = db.prepare(sql)))
    }
    parentPort.postMessage({ id, rows: statement.all(...params) })
  } catch (error) {
    parentPort.postMessage({ id, error: error.message, code: error.code })
  }
})
`

interface Pending {
  read: ThreadRead
  resolve(rows: unknown[]): void
  reject(error: Error): void
}

/**
 * Reads that may walk the whole jobs table — a search by any part of an id, a type or an add-on,
 * a filter no index holds — on a thread of their own, through a read-only connection: a million
 * jobs take ~0.6 s to walk, which on the host's main thread would hold every request, grant and
 * heartbeat that long (and the dashboard reads its jobs view again as jobs come). The thread sees
 * what is committed, as a reader of the database always does; the main thread only sends the SQL
 * and takes the rows.
 *
 * The thread starts with the first read and ends after {@link READ_THREAD_IDLE_MS} without one.
 * Should it fail to start, open the database or die, the reads in flight and those until the
 * next try ({@link readThreadRetryMs}) run on the main connection (`fallback`), as they did
 * before there was a thread; `onDown` says so once, and `onUp` once a thread reads again. A
 * single read it cannot make runs there too.
 */
export class ReadThread {
  private worker: Worker | null = null
  private stopped = false
  /** Failures to start or keep a thread since one last answered a read. */
  private failures = 0
  /** Until then (`now()`), reads run on the main connection. */
  private retryAt = 0
  private nextId = 1
  private readonly pending = new Map<number, Pending>()
  private idle: ReturnType<typeof setTimeout> | null = null

  constructor(
    private readonly options: {
      path: string
      /** The native addon to load, as openDatabase takes it (the Electron build's). */
      nativeBinding?: string
      /** The same read on the main connection. */
      fallback: (read: ThreadRead) => unknown[]
      /** The thread is down, its reads on the main connection, tried again in `retryMs`: said once, at its first failure in a row. */
      onDown: (error: Error, retryMs: number) => void
      /** A thread that was down reads again. */
      onUp?: () => void
      idleMs?: number
      now?: () => number
    },
  ) {}

  private now(): number {
    return (this.options.now ?? Date.now)()
  }

  /** The rows of `read`, read on the thread. */
  all<T>(read: ThreadRead): Promise<T[]> {
    if (this.stopped || (this.worker === null && this.now() < this.retryAt)) return Promise.resolve(this.options.fallback(read) as T[])
    let worker: Worker
    try {
      worker = this.worker ?? this.start()
    } catch (error) {
      // A thread that cannot even be made (EMFILE) is a failure as one that dies: this read too runs on the main connection.
      this.failed(null, error as Error)
      return Promise.resolve(this.options.fallback(read) as T[])
    }
    if (this.idle) clearTimeout(this.idle)
    this.idle = null
    const id = this.nextId++
    return new Promise<T[]>((resolve, reject) => {
      this.pending.set(id, { read, resolve: resolve as (rows: unknown[]) => void, reject })
      worker.postMessage({ id, sql: read.sql, params: read.params })
    })
  }

  /**
   * Ends the thread (the host stops), its connection closed first: the host's file must not stay
   * open. Reads in flight are answered on the main connection.
   */
  async stop(): Promise<void> {
    if (this.idle) clearTimeout(this.idle)
    const worker = this.worker
    this.worker = null
    this.stopped = true
    this.settleOnMain()
    if (worker) await closeThread(worker)
  }

  private start(): Worker {
    const worker = new Worker(THREAD, {
      eval: true,
      workerData: {
        driver: createRequire(import.meta.url).resolve('better-sqlite3'),
        name: connectionName(this.options.path, this.options.nativeBinding),
        nativeBinding: this.options.nativeBinding,
      },
    })
    worker.unref() // a host that stops does not wait for it
    worker.on('message', (message: { id?: number; rows?: unknown[]; error?: string; code?: string; down?: string }) => {
      if (message.down !== undefined) return this.failed(worker, Object.assign(new Error(message.down), { code: message.code }))
      const pending = this.pending.get(message.id!)
      if (!pending) return
      this.pending.delete(message.id!)
      if (this.failures > 0) {
        this.failures = 0
        this.options.onUp?.()
      }
      // A read the thread could not make (SQLITE_BUSY while a host started on a full disk holds
      // the file alone, an I/O error) is made again on the main connection, whose answer (its
      // rows, or its error) is the one the route gives.
      if (message.rows) pending.resolve(message.rows)
      else this.readOnMain(pending)
      if (this.pending.size === 0 && this.worker === worker) this.idle = setTimeout(() => this.end(worker), this.options.idleMs ?? READ_THREAD_IDLE_MS).unref()
    })
    worker.on('error', (error) => this.failed(worker, error))
    worker.on('exit', (code) => this.failed(worker, new Error(`the read thread ended (exit code ${code})`)))
    this.worker = worker
    return worker
  }

  /** Ends an idle thread; the next read starts another. */
  private end(worker: Worker): void {
    if (this.worker !== worker || this.pending.size > 0) return
    this.worker = null
    void closeThread(worker)
  }

  /** `worker` (null: one that could not be made) failed; whichever of its 'down', 'error' and 'exit' comes first counts. */
  private failed(worker: Worker | null, error: Error): void {
    if (this.stopped || (worker !== null && this.worker !== worker)) return
    // Not terminated (see closeThread): a thread that could not open has nothing to run and ends
    // by itself, and one that threw or exited has ended.
    this.worker = null
    this.failures += 1
    const retryMs = readThreadRetryMs(this.failures)
    this.retryAt = this.now() + retryMs
    if (this.failures === 1) this.options.onDown(error, retryMs)
    this.settleOnMain()
  }

  /** The reads in flight, answered on the main connection. */
  private settleOnMain(): void {
    for (const [id, pending] of this.pending) {
      this.pending.delete(id)
      this.readOnMain(pending)
    }
  }

  private readOnMain({ read, resolve, reject }: Pending): void {
    try {
      resolve(this.options.fallback(read))
    } catch (error) {
      reject(error as Error)
    }
  }
}

/**
 * Asks the thread to close its connection and end; resolves once it has ended, after the read
 * in progress (a walk of a million jobs takes under a second). Never `terminate()`: a thread
 * ended inside a better-sqlite3 call can abort the whole process (`FATAL ERROR:
 * v8::ToLocalChecked Empty MaybeLocal`, an error thrown by a statement while its thread is
 * torn down; better-sqlite3 issue #1507).
 */
function closeThread(worker: Worker): Promise<void> {
  const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()))
  worker.postMessage({ close: true })
  return exited
}
