/** How the job page writes an attempt's ending; pure, so the tests can pin it. */

import type { Job, JobResult } from './api'

/** How a job ended, in the word its state badge uses: the result's SUCCEEDED is the job's DONE (the others are the same words). */
export const endWord = (status: JobResult['status']): string => (status === 'SUCCEEDED' ? 'DONE' : (status ?? '—'))

/** Whether a job ended without ever running (canceled while it waited): no attempt, and nothing returned or failed. */
export const neverRan = (job: Pick<Job, 'attempts'>, result: Pick<JobResult, 'error' | 'result_data'>): boolean =>
  job.attempts === 0 && (result.error === null || result.error === undefined) && (result.result_data === null || result.result_data === undefined)

/** An attempt's error as the page shows it: a code and a message, either of which may be missing. */
export interface AttemptError {
  code: string | null
  message: string | null
}

const text = (value: unknown): string | null => (typeof value === 'string' && value !== '' ? value : null)

/**
 * The code and message of an attempt's error. Workers report `{code, message, …}` (the host's
 * own are `lease_expired`, with a `reason`, and `blocked`); a bare string is a message; anything
 * else is shown as its JSON. Null when there is no error.
 */
export function attemptError(error: unknown): AttemptError | null {
  if (error === null || error === undefined) return null
  if (typeof error === 'string') return error ? { code: null, message: error } : null
  if (typeof error === 'object' && !Array.isArray(error)) {
    const fields = error as Record<string, unknown>
    const code = text(fields['code'])
    const message = text(fields['message']) ?? text(fields['detail'])
    if (code || message) return { code, message }
  }
  return { code: null, message: JSON.stringify(error) }
}

/**
 * Whether an attempt's message is shown clipped, with a way to open it whole: one longer than a
 * couple of lines of its cell, or of more than one line. Every attempt may carry the same long
 * error (a stack, a dump), and each whole would make its row thousands of pixels tall.
 */
export const clipsMessage = (message: string): boolean => message.length > CLIPPED_CHARS || message.includes('\n')

/** About two lines of the attempts table's error column. */
const CLIPPED_CHARS = 120

/**
 * A job's error for the page, whole: its fields as JSON, and a stack (which JSON would squeeze
 * into one line of `\n`s) after them as the lines it is.
 */
export function errorText(error: unknown): string {
  if (typeof error !== 'object' || error === null || Array.isArray(error)) return typeof error === 'string' ? error : JSON.stringify(error, null, 2)
  const { stack, ...fields } = error as Record<string, unknown>
  const json = JSON.stringify(typeof stack === 'string' ? fields : error, null, 2)
  return typeof stack === 'string' && stack !== '' ? `${json}\n\n${stack}` : json
}

const DISPOSITIONS: Record<string, string> = {
  REQUEUED: 'requeued',
  DEAD_LETTERED: 'dead-lettered',
  FINAL: 'final',
  BLOCKED: 'halted on a blocker',
}

/** What became of the job after an attempt, in words; `—` while it runs. */
export const dispositionLabel = (disposition: string | null): string =>
  disposition === null ? '—' : (DISPOSITIONS[disposition] ?? disposition.toLowerCase())
