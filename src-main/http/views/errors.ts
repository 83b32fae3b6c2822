/**
 * The error bodies as the wire shows them. Every error is `{detail, code}`; the few that carry
 * more have schemas of their own beside the view that renders them (a duplicate submit's job in
 * views/queue.ts, a worker's `ok: false` in views/worker.ts, the file acquire's refusals in
 * views/files.ts). This one is exact: a body with more fields is not an `Error`.
 */
import { z } from 'zod'

export const ErrorBody = z
  .object({
    detail: z.string().meta({ description: 'What went wrong, for people; a 400 names the failing fields' }),
    code: z.string().meta({ description: 'What went wrong, for programs (e.g. invalid_request, job_not_found, lease_expired)' }),
  })
  .meta({ id: 'Error', description: 'An error answer: {detail, code}, no more' })
export type ErrorBody = z.infer<typeof ErrorBody>
