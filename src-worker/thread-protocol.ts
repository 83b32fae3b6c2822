import type { AttemptError } from './transport'
import type { JobInfo } from './handler-api'

/** Messages between the worker's main thread (the runtime) and a handler thread. */

export type ToThread =
  | { type: 'run'; job: JobInfo; payload: unknown }
  | { type: 'abort'; reason: string }
  | { type: 'gate-answer'; id: number; error: { code: string; message: string } | null }

export type FromThread =
  | { type: 'ready'; types: string[]; problems: { file: string; error: string }[] }
  | { type: 'progress'; fraction: number | null; note: string | null }
  | { type: 'log'; line: string }
  | { type: 'gate'; id: number; file: string }
  | { type: 'done'; result: unknown }
  | { type: 'failed'; error: AttemptError }
