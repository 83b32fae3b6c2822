import type { AttemptError } from './transport'
import type { JobInfo } from './handler-api'

/**
 * Messages between the worker's main thread (the runtime) and a handler thread. A thread runs
 * several jobs at once (handlers are async); each run has a number, `run`, that its messages
 * carry.
 */

export type ToThread =
  | { type: 'run'; run: number; job: JobInfo; payload: unknown }
  | { type: 'abort'; run: number; reason: string }
  | { type: 'gate-answer'; id: number; error: { code: string; message: string } | null }

export type FromThread =
  | { type: 'ready'; types: string[]; problems: { file: string; error: string }[] }
  | { type: 'progress'; run: number; fraction: number | null; note: string | null }
  | { type: 'log'; run: number; line: string }
  | { type: 'gate'; run: number; id: number; file: string }
  | { type: 'done'; run: number; result: unknown }
  | { type: 'failed'; run: number; error: AttemptError }
