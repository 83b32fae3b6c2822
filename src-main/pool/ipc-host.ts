import { dirname } from 'node:path'
import type { z } from 'zod'
import type { Dispatch } from '../dispatch/dispatch'
import type { ClockWaiters } from '../dispatch/clock-waiters'
import { longPollMs } from '../dispatch/long-poll'
import { type Engine, HEARD_AT } from '../engine'
import { answerError, type ErrorAnswer, storageFault } from '../error-answer'
import { HttpError } from '../http/http-error'
import { exchangeAnswer } from '../http/views/worker'
import { exchangeBody } from '../http/exchange-body'
import { acquireAnswer } from './worker-answers'
import { safeParseFast } from '../../src-shared/fast-parse'
import { faultDetail, type FaultKind, faultIn } from '../../src-shared/json-faults'
import { IPC_METHODS, type IpcRequest, type IpcResponse } from '../../src-shared/ipc-protocol'

export interface IpcHostDeps {
  engine: Engine
  dispatch: Dispatch
  clockWaiters: ClockWaiters
  /**
   * While the host takes no writes (its disk full at start, its database file deleted or
   * replaced): the answer a write gets, saying why, as HTTP's. SQLite's own refusal of the write
   * (`query_only`) reads as a disk that failed a write.
   */
  readOnly?: () => ErrorAnswer | null
}

/**
 * Who sends a worker request: its worker's id (a local worker's is its process's own: it cannot
 * act in another's name), and whether it came with a worker token (a remote worker over Redis),
 * which acts on file leases of its own jobs only, as over HTTP.
 */
export interface WorkerCaller {
  workerId: string
  workerToken: boolean
  /**
   * Called once the request is found well formed and its worker's own, before it runs: where a
   * worker is listed (a refused request is no sign of a worker that runs anything).
   */
  accepted?: () => void
  /**
   * When the request reached the host's transport, by the engine's clock, if the host read it only
   * later (a remote worker's request that waited in Redis): an exchange's reports are judged in
   * time against their leases' expiry at that moment (engine `HEARD_AT`). Absent: now.
   */
  heardAt?: number
}

/**
 * Answers one request from a worker of the host's own or over Redis: the same engine calls, with
 * the same semantics, as the worker API's /batch and /api/files over HTTP. `gone` aborts when the
 * process exits. `deliver` gets the response exactly
 * once — an exchange's from dispatch (src-main/dispatch/dispatch.ts), which hands it over from
 * the commit that grants a waiting claim — and the promise settles with the same response.
 */
export async function answerWorkerRequest(
  deps: IpcHostDeps,
  caller: WorkerCaller,
  request: IpcRequest,
  gone: AbortSignal,
  deliver: (response: IpcResponse) => void = () => {},
): Promise<IpcResponse> {
  const respond = (result: unknown): IpcResponse => ({ type: 'response', id: request.id, result })
  let response: IpcResponse | undefined
  try {
    const result = await answer(deps, caller, request, gone, (result) => deliver((response = respond(result))))
    if (response) return response
    response = respond(result)
  } catch (error) {
    const { status, code, detail, internal } = (storageFault(error) === 'io' && deps.readOnly?.()) || answerError(error, dirname(deps.engine.databaseFile))
    // The worker is this host's own process: it logs a bug's message, where the host has no log.
    response = { type: 'response', id: request.id, error: { status, code, detail: internal ? String((error as Error)?.message ?? error) : detail } }
  }
  deliver(response)
  return response
}

/**
 * The params of a request that failed its schema or holds a value JSON cannot carry: an
 * exchange's reports are each atomic on their own, as over HTTP (src-main/http/exchange-body.ts):
 * the exchange is taken without those that fail, which are refused in their slots. Any other
 * request is refused whole.
 */
function paramsRefused(request: IpcRequest, fault: { kind: FaultKind } | null, error: z.ZodError | undefined): unknown {
  if (request.method === 'exchange') {
    try {
      return exchangeBody(request.params)
    } catch (refusal) {
      if (refusal instanceof HttpError) throw new HttpError(refusal.code, `${request.method}: ${refusal.detail}`)
      throw refusal
    }
  }
  if (fault !== null) throw new HttpError('invalid_request', `${request.method}: ${faultDetail(request.params, fault.kind)}`)
  throw new HttpError('invalid_request', `${request.method}: ${error?.issues[0]?.message ?? 'invalid'}`)
}

/** The request's result; an exchange's is also handed to `delivered`, by dispatch, when dispatch says. */
async function answer(deps: IpcHostDeps, caller: WorkerCaller, request: IpcRequest, gone: AbortSignal, delivered: (result: unknown) => void): Promise<unknown> {
  const { engine, dispatch, clockWaiters } = deps
  const { workerId } = caller
  // Held to the rule of every HTTP body (src-main/http/body.ts), whichever way it came (IPC, a
  // link, Redis): a value nested deeper than MAX_JSON_DEPTH would overflow the stack where it is
  // stored, a 500 the worker would send again every second.
  const fault = faultIn(request.params, false)
  const schema = IPC_METHODS[request.method]
  const parsed = fault === null ? safeParseFast(schema, request.params) : null
  const params = (parsed?.success ? parsed.data : paramsRefused(request, fault, parsed?.error)) as Record<string, unknown>
  if ('worker_id' in params && params.worker_id !== workerId) {
    throw new HttpError('worker_mismatch', `This process is ${workerId}, not ${String(params.worker_id)}`)
  }
  caller.accepted?.()
  switch (request.method) {
    case 'exchange': {
      const request = { ...(params as (typeof IPC_METHODS)['exchange']['_output']), worker_id: workerId, [HEARD_AT]: caller.heardAt }
      let view: unknown
      await dispatch.exchange(request, (answer) => delivered((view = exchangeAnswer(request, answer))), () => gone)
      // Dispatch logged a view that threw and delivered nothing: the worker is answered the error.
      if (view === undefined) throw new Error('the answer to an exchange could not be made')
      return view
    }
    case 'acquireFile': {
      const p = params as (typeof IPC_METHODS)['acquireFile']['_output']
      if (caller.workerToken) engine.proveJobLease(p)
      return acquireAnswer(await engine.run(() => engine.acquireFile(p)))
    }
    case 'waitFileRetry': {
      const p = params as (typeof IPC_METHODS)['waitFileRetry']['_output']
      const retryAt = engine.fileRetryAt(p.file, p.owner_id)
      return retryAt === null || (await clockWaiters.waitUntil(retryAt, longPollMs(p.max_wait_ms), gone))
    }
    case 'heartbeatFile': {
      const p = params as (typeof IPC_METHODS)['heartbeatFile']['_output']
      if (caller.workerToken) engine.proveJobLease(p)
      await engine.run(() => engine.heartbeatFile(p))
      return { ok: true }
    }
    case 'report': {
      const p = params as (typeof IPC_METHODS)['report']['_output']
      await engine.run(() => engine.recordWorkerProblem(workerId, { kind: p.kind, detail: p.detail }))
      return { ok: true }
    }
    case 'handBack': {
      const p = params as (typeof IPC_METHODS)['handBack']['_output']
      return { ok: true, handed_back: await engine.run(() => engine.handBackLeases(workerId, p.lease_ids)) }
    }
  }
}
