/**
 * What a job handler sees. A handler is a module exporting `{ type, run }`; built-in ones live
 * in ./handlers, user ones are `*.mjs` files in `<data-dir>/handlers/`.
 */

export interface JobInfo {
  id: string
  type: string
  attempt_id: string
  max_runtime_s: number | null
}

/** File writes that pass the file-lease gate: acquire, wait once if held, halt if still held. */
export interface GatedFiles {
  /** Replaces the file whole (through a new file renamed over it) or makes it: one that fails leaves the file as it was. */
  writeFile(path: string, data: string | Uint8Array): Promise<void>
  /** Appends in place, or makes the file: one that fails cuts the file back to its length, so a retry appends once. */
  appendFile(path: string, data: string | Uint8Array): Promise<void>
  rm(path: string, options?: { force?: boolean; recursive?: boolean }): Promise<void>
  rename(from: string, to: string): Promise<void>
}

/**
 * A run's context. `signal` and `files` are getters, made when first read (most handlers need
 * neither): pass `ctx` itself on, not a spread copy of it.
 */
export interface HandlerContext {
  job: JobInfo
  payload: unknown
  /** Fires on cancel, max runtime, a lost lease, and shutdown; `signal.reason` (a `JobStopped` error) says which in its message: `canceled`, `max_runtime`, `lease_lost`, `shutdown`. */
  signal: AbortSignal
  /**
   * Reports progress (0–1, or null for none) and/or a note; sent with the next heartbeat. A
   * fraction outside 0–1 throws a RangeError; a note longer than 10,000 characters is cut.
   */
  progress(fraction: number | null, note?: string): void
  /**
   * A line for the worker's log, under the job's name; a value that is not a string is written as
   * util.inspect shows it, on one line. Cut past 10,000 characters; a job's lines past 100 at once,
   * then 10 a second, are dropped and counted (run-log.ts).
   */
  log(line: unknown): void
  files: GatedFiles
}

export interface Handler {
  type: string
  run(ctx: HandlerContext): unknown
}

/** Throw this (or any error with `retryable: false`) to fail the attempt without a retry. */
export class JobError extends Error {
  readonly code: string
  readonly retryable: boolean

  constructor(message: string, options: { code?: string; retryable?: boolean } = {}) {
    super(message)
    this.name = 'JobError'
    this.code = options.code ?? 'job_error'
    this.retryable = options.retryable ?? true
  }
}
