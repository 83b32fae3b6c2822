import type { components } from '../../src-shared/api-types'

/**
 * A job's end in words, for the client commands that print one: `submit --wait` and
 * `jobs show`. Its own module, with no imports beyond types: `leasehold jobs` must not load
 * the event stream's client that `--wait` uses (test/cli/bundle.test.ts).
 */

/** GET /api/scheduler/jobs/{job_id}: the job as the reads show it, and its result once it ended. */
export type JobAnswer = components['schemas']['JobWithResult']

/** The error of a finished job as one line. */
export function describeError(answer: JobAnswer): string {
  const error = answer.result?.error
  if (error == null) {
    if (answer.job.state === 'TIMEOUT') return 'its last lease expired with no attempts left'
    if (answer.job.state === 'CANCELED') return answer.job.note ? `canceled: ${answer.job.note}` : 'canceled'
    return 'no error given'
  }
  return errorLine(error)
}

/** An error a worker or the host reported (usually {code, message}) as one line: "message (code)". */
export function errorLine(error: unknown): string {
  if (typeof error === 'string') return error
  if (typeof error === 'object' && error !== null) {
    const e = error as { message?: unknown; code?: unknown }
    if (typeof e.message === 'string') return typeof e.code === 'string' ? `${e.message} (${e.code})` : e.message
  }
  return JSON.stringify(error)
}
