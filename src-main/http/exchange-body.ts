import type { z } from 'zod'
import { faultDetail, faultIn, MAX_JSON_DEPTH } from '../../src-shared/json-faults'
import { ExchangeEnvelope, REPORT_LISTS, WorkerExchange } from '../../src-shared/worker-exchange'
import { type ExchangeRequest, REFUSED_REPORTS, type RefusedReports, type ReportRefusal } from '../dispatch/dispatch'
import { validate } from './errors'
import { HttpError } from './http-error'

/** How deep a report may nest: it sits two levels in (the body, its list), and the body as a whole is held to MAX_JSON_DEPTH. */
const REPORT_DEPTH = MAX_JSON_DEPTH - 2

/**
 * An exchange that failed its schema as a whole, or holds a value JSON cannot carry (a lone
 * surrogate, a number past a double), read report by report: each report is atomic on its own,
 * so one the host cannot read is refused alone, in its slot of the answer, with the 400
 * `invalid_request` its one-job route would answer (`complete.1.note: …`), and the others are
 * run. What makes the body itself unusable — not an object, its worker or its claim invalid, a
 * list that is not one or longer than MAX_BATCH_ITEMS, an unknown field — refuses the whole
 * request, thrown. A body that passes the schema never comes here (route.ts `itemwise`; the
 * local workers' IPC, src-main/pool/ipc-host.ts): the batch is the hottest route, and a good
 * one is taken as it is.
 */
export function exchangeBody(json: unknown): WorkerExchange {
  const envelope = validate(ExchangeEnvelope, json)
  const { heartbeat: _h, complete: _c, fail: _f, ...rest } = envelope
  const fault = faultIn(rest, false)
  if (fault !== null) throw new HttpError('invalid_request', faultDetail(rest, fault.kind))
  const request: ExchangeRequest = { ...rest }
  const refused: Record<(typeof REPORT_LISTS)[number], Map<number, ReportRefusal>> = { heartbeat: new Map(), complete: new Map(), fail: new Map() }
  for (const list of REPORT_LISTS) {
    const reports = envelope[list]
    if (reports === undefined) continue
    const schema = WorkerExchange.shape[list].unwrap().element as z.ZodType
    const kept: unknown[] = []
    reports.forEach((report, i) => {
      const read = readReport(schema, report, [list, i])
      if (read instanceof HttpError) refused[list].set(i, { job_id: jobIdOf(report), code: read.code, detail: read.detail })
      else kept.push(read.report)
    })
    ;(request as Record<string, unknown>)[list] = kept
  }
  if (REPORT_LISTS.some((list) => refused[list].size > 0)) request[REFUSED_REPORTS] = refused satisfies RefusedReports
  // (The lists hold what their schemas took: the exchange as WorkerExchange types it.)
  return request as WorkerExchange
}

/** One report as its schema takes it, or why it cannot be taken (a value JSON cannot carry, or its schema), named from the body. */
function readReport(schema: z.ZodType, report: unknown, at: (string | number)[]): { report: unknown } | HttpError {
  const fault = faultIn(report, false, { maxDepth: REPORT_DEPTH })
  if (fault !== null) return new HttpError('invalid_request', faultDetail(report, fault.kind, at))
  try {
    return { report: validate(schema, report, '(body)', at) }
  } catch (error) {
    if (error instanceof HttpError) return error
    throw error
  }
}

/** The job a refused report named, as sent, for its slot of the answer; "" when it named none. */
function jobIdOf(report: unknown): string {
  const jobId = typeof report === 'object' && report !== null ? (report as { job_id?: unknown }).job_id : undefined
  return typeof jobId === 'string' && faultIn(jobId, false) === null ? jobId : ''
}
